//! A sale's seat map: each seat of its venue layout free, held or sold, from this replica's
//! view of the sale's holdings, read from the queue store at most once per sale per
//! `queue.line_refresh_ms` however many buyers look (one store call; the map is then the same
//! for every reader until the next). The map is advisory: a hold on a seat just taken still
//! fails exactly (409 `seat-taken`).
//!
//! Compact: per row, the seats' states in the row's order as runs (`f12h1s3`: 12 free, 1 held,
//! 3 sold; `x` a seat the sale does not sell), not one object per seat. Its `version` is the
//! holdings' (every change to the stock or the holds bumps it), so two replicas with the same
//! version answer the same map and the same `ETag`.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::time::Instant;

use super::{sales, App, ServiceError, ServiceResult};
use crate::domain::venue::Layout;
use crate::domain::{SaleId, Stock, Take};

/// A seat's state on the map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatState {
    Free,
    Held,
    Sold,
    /// Not sold by this sale (withdrawn).
    Off,
}

impl SeatState {
    pub fn letter(self) -> char {
        match self {
            SeatState::Free => 'f',
            SeatState::Held => 'h',
            SeatState::Sold => 's',
            SeatState::Off => 'x',
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct SeatMap {
    /// The holdings' version the map was drawn from.
    pub version: u64,
    pub layout: uuid::Uuid,
    pub sections: Vec<SectionMap>,
    pub free: u32,
    pub held: u32,
    pub sold: u32,
    /// Every seat's id and state in the layout's order (what a change is found in).
    pub seats: Vec<(Arc<str>, SeatState)>,
}

/// The seats whose state changed from one map to the next: what a stream sends.
#[derive(Debug, Clone, PartialEq)]
pub struct Changes {
    pub from: u64,
    pub to: u64,
    pub seats: Vec<(Arc<str>, SeatState)>,
}

/// How many maps' changes each replica keeps per sale, for streams that resume.
const KEPT_CHANGES: usize = 64;

#[derive(Debug, Clone, PartialEq)]
pub struct SectionMap {
    pub id: String,
    pub rows: Vec<RowMap>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RowMap {
    pub id: String,
    /// The row's seats' states as runs: a letter and a count each (`f12h1s3`).
    pub states: String,
}

/// Each replica's seat maps and the layouts they are drawn on (a layout never changes).
#[derive(Default)]
pub struct SeatMaps {
    maps: Mutex<HashMap<SaleId, (Instant, Arc<SeatMap>)>>,
    /// The last maps' changes, oldest first, by sale.
    changes: Mutex<HashMap<SaleId, std::collections::VecDeque<Arc<Changes>>>>,
    /// Sales whose map one request is reading now: the others answer the map it replaces.
    reading: Mutex<HashSet<SaleId>>,
    layouts: Mutex<HashMap<uuid::Uuid, Arc<Layout>>>,
}

/// The sale's seat map, at most `queue.line_refresh_ms` old.
pub async fn seat_map(app: &App, sale: SaleId) -> ServiceResult<Arc<SeatMap>> {
    let fresh_for = Duration::from_millis(app.config.queue.line_refresh_ms);
    let kept = app
        .seat_maps
        .maps
        .lock()
        .expect("not poisoned")
        .get(&sale)
        .cloned();
    if let Some((at, map)) = &kept {
        if at.elapsed() < fresh_for {
            return Ok(Arc::clone(map));
        }
    }
    let first = app
        .seat_maps
        .reading
        .lock()
        .expect("not poisoned")
        .insert(sale);
    if !first {
        if let Some((_, map)) = kept {
            return Ok(map);
        }
    }
    // Let go of the sale however this ends, a cancelled request (a client gone) included: a
    // mark left behind would have every later request answer this stale map.
    struct Reading<'a>(&'a SeatMaps, SaleId);
    impl Drop for Reading<'_> {
        fn drop(&mut self) {
            self.0.reading.lock().expect("not poisoned").remove(&self.1);
        }
    }
    let reading = Reading(&app.seat_maps, sale);
    let read = read(app, sale).await;
    drop(reading);
    let map = Arc::new(read?);
    if let Some((_, before)) = &kept {
        if before.version != map.version && before.layout == map.layout {
            let changes = Arc::new(changes(before, &map));
            let mut all = app.seat_maps.changes.lock().expect("not poisoned");
            let kept = all.entry(sale).or_default();
            if kept.len() >= KEPT_CHANGES {
                kept.pop_front();
            }
            kept.push_back(changes);
        }
    }
    app.seat_maps
        .maps
        .lock()
        .expect("not poisoned")
        .insert(sale, (Instant::now(), Arc::clone(&map)));
    Ok(map)
}

fn changes(before: &SeatMap, after: &SeatMap) -> Changes {
    Changes {
        from: before.version,
        to: after.version,
        seats: before
            .seats
            .iter()
            .zip(&after.seats)
            .filter(|((_, was), (_, is))| was != is)
            .map(|(_, now)| now.clone())
            .collect(),
    }
}

/// The changes from the map of `version` to the current one, when this replica kept them all
/// (`None`: it did not; the caller sends the whole map).
pub fn changes_since(app: &App, sale: SaleId, version: u64) -> Option<Vec<Arc<Changes>>> {
    let all = app.seat_maps.changes.lock().expect("not poisoned");
    let kept = all.get(&sale)?;
    let start = kept.iter().position(|c| c.from == version)?;
    Some(kept.iter().skip(start).cloned().collect())
}

async fn read(app: &App, sale: SaleId) -> ServiceResult<SeatMap> {
    let offer = super::offer::offer(app, sale).await?;
    let layout_id = offer.sale.layout.ok_or(ServiceError::NotFound(
        "seat map (the sale has no venue layout)",
    ))?;
    let layout = layout(app, layout_id).await?;
    let mut holdings = app.queue.holdings(sale).await?;
    if holdings.is_none() && sales::restore_in_queue(app, sale, false).await? {
        holdings = app.queue.holdings(sale).await?;
    }
    let holdings = holdings.ok_or(ServiceError::Unavailable("the queue store"))?;
    let Stock::Seats(all) = &offer.sale.stock else {
        return Err(ServiceError::NotFound(
            "seat map (not a sale of named seats)",
        ));
    };
    let in_sale: HashSet<&str> = all.iter().map(String::as_str).collect();
    let free: HashSet<&str> = match &holdings.free {
        Stock::Seats(free) => free.iter().map(String::as_str).collect(),
        Stock::Quantity(_) => HashSet::new(),
    };
    let held: HashSet<&str> = holdings
        .active
        .values()
        .flatten()
        .flat_map(|take| match take {
            Take::Seats(seats) => seats.iter().map(String::as_str).collect::<Vec<_>>(),
            Take::Quantity(_) => Vec::new(),
        })
        .collect();
    Ok(draw(holdings.version, layout_id, &layout, |id| {
        if !in_sale.contains(id) {
            SeatState::Off
        } else if free.contains(id) {
            SeatState::Free
        } else if held.contains(id) {
            SeatState::Held
        } else {
            SeatState::Sold
        }
    }))
}

/// The map of `layout` with each seat's state.
pub fn draw(
    version: u64,
    layout_id: uuid::Uuid,
    layout: &Layout,
    state: impl Fn(&str) -> SeatState,
) -> SeatMap {
    let (mut free, mut held, mut sold) = (0, 0, 0);
    let mut seats = Vec::new();
    let sections = layout
        .sections
        .iter()
        .map(|section| SectionMap {
            id: section.id.clone(),
            rows: section
                .rows
                .iter()
                .map(|row| {
                    let states: Vec<SeatState> = row
                        .seat_ids(&section.id)
                        .map(|id| {
                            let s = state(&id);
                            seats.push((Arc::from(id), s));
                            s
                        })
                        .collect();
                    for s in &states {
                        match s {
                            SeatState::Free => free += 1,
                            SeatState::Held => held += 1,
                            SeatState::Sold => sold += 1,
                            SeatState::Off => {}
                        }
                    }
                    RowMap {
                        id: row.id.clone(),
                        states: runs(&states),
                    }
                })
                .collect(),
        })
        .collect();
    SeatMap {
        version,
        layout: layout_id,
        sections,
        free,
        held,
        sold,
        seats,
    }
}

/// `f12h1s3`: each run's letter and length.
fn runs(states: &[SeatState]) -> String {
    let mut out = String::new();
    let mut i = 0;
    while i < states.len() {
        let mut j = i;
        while j < states.len() && states[j] == states[i] {
            j += 1;
        }
        out.push(states[i].letter());
        out.push_str(&(j - i).to_string());
        i = j;
    }
    out
}

/// A layout, read from the ledger once per replica (layouts never change).
async fn layout(app: &App, id: uuid::Uuid) -> ServiceResult<Arc<Layout>> {
    if let Some(kept) = app.seat_maps.layouts.lock().expect("not poisoned").get(&id) {
        return Ok(Arc::clone(kept));
    }
    let layout = Arc::new(
        app.ledger
            .layout(id)
            .await?
            .ok_or(ServiceError::NotFound("layout"))?,
    );
    app.seat_maps
        .layouts
        .lock()
        .expect("not poisoned")
        .insert(id, Arc::clone(&layout));
    Ok(layout)
}

/// What a seat-map stream sends: the whole map, or the changes since the last one it sent.
pub enum Update {
    Map(Arc<SeatMap>),
    Changes(Arc<Changes>),
}

/// A sale's seat map as it changes: first the changes since `last` (a resuming client's last
/// version) when this replica kept them, else the whole map; then each map's changes as
/// they come, read from the replica's shared view (no store call of its own), until the
/// process drains.
pub fn follow(
    app: App,
    sale: SaleId,
    first: Arc<SeatMap>,
    last: Option<u64>,
) -> futures_util::stream::BoxStream<'static, Update> {
    use futures_util::StreamExt;
    let every = Duration::from_millis(app.config.queue.line_refresh_ms);
    let opening: Vec<Update> = match last {
        Some(v) if v == first.version => Vec::new(),
        Some(v) => match changes_since(&app, sale, v) {
            Some(changes) if changes.last().is_some_and(|c| c.to == first.version) => {
                changes.into_iter().map(Update::Changes).collect()
            }
            _ => vec![Update::Map(Arc::clone(&first))],
        },
        None => vec![Update::Map(Arc::clone(&first))],
    };
    let sent = first.version;
    let drain = app.drain.subscribe();
    let head = futures_util::stream::iter(opening);
    let tail = futures_util::stream::unfold(
        (app, sent, drain, Vec::<Update>::new()),
        move |(app, mut sent, mut drain, mut queued)| async move {
            loop {
                if let Some(next) = queued.pop() {
                    return Some((next, (app, sent, drain, queued)));
                }
                tokio::select! {
                    _ = tokio::time::sleep(every) => {}
                    _ = super::drain::started(&mut drain) => return None,
                }
                let Ok(map) = seat_map(&app, sale).await else {
                    continue;
                };
                if map.version == sent {
                    continue;
                }
                let mut updates = match changes_since(&app, sale, sent) {
                    Some(changes) if changes.last().is_some_and(|c| c.to == map.version) => {
                        changes.into_iter().map(Update::Changes).collect()
                    }
                    _ => vec![Update::Map(Arc::clone(&map))],
                };
                sent = map.version;
                updates.reverse(); // popped from the back: oldest first
                queued = updates;
            }
        },
    );
    // A version that changed no seat (an admission, a count) is not worth an event.
    head.chain(tail)
        .filter(|u| std::future::ready(!matches!(u, Update::Changes(c) if c.seats.is_empty())))
        .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_is_its_runs() {
        use SeatState::*;
        assert_eq!(runs(&[Free, Free, Held, Sold, Sold, Off]), "f2h1s2x1");
        assert_eq!(runs(&[]), "");
    }
}
