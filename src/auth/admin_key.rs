//! The admin key of the admin routes, compared in constant time.

use subtle::ConstantTimeEq;

#[derive(Clone)]
pub struct AdminKey(String);

impl AdminKey {
    pub fn new(key: &str) -> Self {
        AdminKey(key.to_owned())
    }

    pub fn matches(&self, presented: &str) -> bool {
        self.0.as_bytes().ct_eq(presented.as_bytes()).into()
    }
}

impl std::fmt::Debug for AdminKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminKey(…)")
    }
}
