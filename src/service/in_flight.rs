//! Holds in flight in this process, by sale: taken in the queue store, not yet committed (or
//! given back) in the ledger. While one is, the store is ahead of the ledger on purpose, and
//! the drift checker leaves the sale alone.

use std::collections::HashMap;
use std::sync::Mutex;

use crate::domain::SaleId;

#[derive(Default)]
pub struct InFlight {
    by_sale: Mutex<HashMap<SaleId, u32>>,
}

/// Counts one hold of a sale as in flight until dropped.
pub struct InFlightHold<'a> {
    of: &'a InFlight,
    sale: SaleId,
}

impl InFlight {
    pub fn hold(&self, sale: SaleId) -> InFlightHold<'_> {
        *self
            .by_sale
            .lock()
            .expect("not poisoned")
            .entry(sale)
            .or_default() += 1;
        InFlightHold { of: self, sale }
    }

    /// Whether a hold of `sale` is in flight here now.
    pub fn any(&self, sale: SaleId) -> bool {
        self.by_sale
            .lock()
            .expect("not poisoned")
            .contains_key(&sale)
    }
}

impl Drop for InFlightHold<'_> {
    fn drop(&mut self) {
        let mut by_sale = self.of.by_sale.lock().expect("not poisoned");
        if let Some(n) = by_sale.get_mut(&self.sale) {
            *n -= 1;
            if *n == 0 {
                by_sale.remove(&self.sale);
            }
        }
    }
}
