//! A sale's seat map: each seat of its venue layout free, held or sold, from this replica's
//! view of the sale's seats, brought up to date at most once per sale per
//! `queue.line_refresh_ms` however many buyers look, by one store call that carries only the
//! seats changed since the view's version (the store's seat log, `lua/lib/seatlog.lua`); the
//! holdings are read whole only for the first map, or when the log cannot bring the view up
//! to date (a rebuilt store, a view older than the log keeps). The map is then the same for
//! every reader until the next. The map is advisory: a hold on a seat just taken still fails
//! exactly (409 `seat-taken`).
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
use crate::domain::best_seats::{self, BestAsk, Blocks};
use crate::domain::venue::Layout;
use crate::domain::{SaleId, Stock, Take};
use crate::queue::SeatChanges;

pub use crate::domain::venue::SeatState;

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
    pub free: u32,
    pub held: u32,
    pub sold: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RowMap {
    pub id: String,
    /// The row's seats' states as runs: a letter and a count each (`f12h1s3`).
    pub states: String,
}

/// A map as a replica keeps it: when it was read, and the store's epoch it was read in (its
/// seat log's versions count within one).
#[derive(Clone)]
struct Kept {
    at: Instant,
    epoch: String,
    map: Arc<SeatMap>,
}

/// A layout as the maps and best available use it, read once per replica (a layout never
/// changes).
pub struct Venue {
    pub layout: Layout,
    /// Each seat's place in the layout's order (a map's `seats`).
    index: HashMap<Arc<str>, usize>,
    /// Its seats' categories (what best available may ask for).
    categories: HashSet<String>,
    /// Best available's blocks, by category (`None`: every one), made on the first ask.
    blocks: Mutex<HashMap<Option<String>, Arc<Blocks>>>,
}

/// Each replica's seat maps and the layouts they are drawn on.
#[derive(Default)]
pub struct SeatMaps {
    maps: Mutex<HashMap<SaleId, Kept>>,
    /// The last maps' changes, oldest first, by sale.
    changes: Mutex<HashMap<SaleId, std::collections::VecDeque<Arc<Changes>>>>,
    /// Each sale's turn to bring its map up to date: one request at a time.
    reading: Mutex<HashMap<SaleId, Arc<tokio::sync::Mutex<()>>>>,
    venues: Mutex<HashMap<uuid::Uuid, Arc<Venue>>>,
}

/// How long a replica keeps a sale's seat map that nobody reads: a sale whose map was last
/// brought up to date that long ago is let go (its map, its changes, its turn), so that a
/// replica serving sale after sale keeps what is being read, not every sale it ever served. A
/// later reader reads it whole again.
const KEPT_UNREAD: Duration = Duration::from_secs(600);

impl SeatMaps {
    /// Lets go of the sales whose map was brought up to date `unread` ago or longer, but for
    /// those with a request holding or awaiting their turn.
    fn let_go(&self, unread: Duration) {
        let mut maps = self.maps.lock().expect("not poisoned");
        let stale: Vec<SaleId> = maps
            .iter()
            .filter(|(_, kept)| kept.at.elapsed() >= unread)
            .map(|(sale, _)| *sale)
            .collect();
        if stale.is_empty() {
            return;
        }
        let mut reading = self.reading.lock().expect("not poisoned");
        let mut changes = self.changes.lock().expect("not poisoned");
        for sale in stale {
            if reading
                .get(&sale)
                .is_some_and(|turn| Arc::strong_count(turn) > 1)
            {
                continue;
            }
            maps.remove(&sale);
            reading.remove(&sale);
            changes.remove(&sale);
        }
    }
}

/// The sale's seat map, at most `queue.line_refresh_ms` old. One request at a time brings a
/// sale's map up to date; the others meanwhile answer the map it replaces, or, when there is
/// none yet (a replica's first readers, thousands of streams opening at once), wait for it.
pub async fn seat_map(app: &App, sale: SaleId) -> ServiceResult<Arc<SeatMap>> {
    let fresh_for = app.config.queue.line_refresh_ms.duration();
    let kept = |app: &App| {
        let kept = app
            .seat_maps
            .maps
            .lock()
            .expect("not poisoned")
            .get(&sale)
            .cloned();
        match kept {
            Some(k) if k.at.elapsed() < fresh_for => Ok(k.map),
            other => Err(other),
        }
    };
    let stale = match kept(app) {
        Ok(fresh) => return Ok(fresh),
        Err(stale) => stale,
    };
    let turn = Arc::clone(
        app.seat_maps
            .reading
            .lock()
            .expect("not poisoned")
            .entry(sale)
            .or_default(),
    );
    // The turn is let go however this ends, a cancelled request (a client gone) included.
    let _turn = match (turn.try_lock(), stale) {
        (Ok(turn), _) => turn,
        (Err(_), Some(stale)) => return Ok(stale.map),
        (Err(_), None) => turn.lock().await,
    };
    // The request before may have just brought it up to date.
    let kept = match kept(app) {
        Ok(fresh) => return Ok(fresh),
        Err(kept) => kept,
    };
    let (epoch, map) = read(app, sale, kept.as_ref()).await?;
    let map = Arc::new(map);
    if let Some(Kept { map: before, .. }) = &kept {
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
    app.seat_maps.maps.lock().expect("not poisoned").insert(
        sale,
        Kept {
            at: Instant::now(),
            epoch,
            map: Arc::clone(&map),
        },
    );
    app.seat_maps.let_go(KEPT_UNREAD);
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

/// The sale's map now, and the store's epoch it is of: `kept` brought up to date by the seat
/// log, or drawn from the holdings read whole.
async fn read(app: &App, sale: SaleId, kept: Option<&Kept>) -> ServiceResult<(String, SeatMap)> {
    let offer = super::offer::offer(app, sale).await?;
    let layout_id = offer.sale.layout.ok_or(ServiceError::NotFound(
        "seat map (the sale has no venue layout)",
    ))?;
    let Stock::Seats(all) = &offer.sale.stock else {
        return Err(ServiceError::NotFound(
            "seat map (not a sale of named seats)",
        ));
    };
    let venue = venue(app, layout_id).await?;
    let kept = kept.filter(|k| k.map.layout == layout_id);
    let (since, epoch) = kept.map_or((0, ""), |k| (k.map.version, k.epoch.as_str()));
    let mut probe = app.queue.seat_changes(sale, since, epoch).await?;
    if probe == SeatChanges::Unknown && sales::restore_in_queue(app, sale, false).await? {
        probe = app.queue.seat_changes(sale, since, epoch).await?;
    }
    let epoch = match (probe, kept) {
        (SeatChanges::Unknown, _) => return Err(ServiceError::Unavailable("the queue store")),
        (
            SeatChanges::Since {
                version,
                epoch,
                changes,
            },
            Some(Kept { map: before, .. }),
        ) => {
            let mut states: Vec<SeatState> = before.seats.iter().map(|(_, s)| *s).collect();
            for change in &changes {
                for seat in &change.seats {
                    if let Some(&i) = venue.index.get(seat.as_str()) {
                        states[i] = change.state;
                    }
                }
            }
            return Ok((epoch, draw(version, layout_id, &venue, |i, _| states[i])));
        }
        (SeatChanges::Since { epoch, .. } | SeatChanges::Whole { epoch, .. }, _) => epoch,
    };
    let holdings = app
        .queue
        .holdings(sale)
        .await?
        .ok_or(ServiceError::Unavailable("the queue store"))?;
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
    let map = draw(holdings.version, layout_id, &venue, |_, id| {
        if free.contains(id) {
            SeatState::Free
        } else if held.contains(id) {
            SeatState::Held
        } else if in_sale.contains(id) {
            SeatState::Sold
        } else {
            SeatState::Off
        }
    });
    Ok((epoch, map))
}

/// The map of `venue` with each seat's state (by its place in the layout's order and id).
fn draw(
    version: u64,
    layout_id: uuid::Uuid,
    venue: &Venue,
    state: impl Fn(usize, &str) -> SeatState,
) -> SeatMap {
    let layout = &venue.layout;
    let mut seats = Vec::new();
    let sections: Vec<SectionMap> = layout
        .sections
        .iter()
        .map(|section| {
            let mut counted = SectionMap {
                id: section.id.clone(),
                rows: Vec::with_capacity(section.rows.len()),
                free: 0,
                held: 0,
                sold: 0,
            };
            for row in &section.rows {
                let states: Vec<SeatState> = row
                    .seat_ids(&section.id)
                    .map(|id| {
                        let s = state(seats.len(), &id);
                        seats.push((Arc::from(id), s));
                        s
                    })
                    .collect();
                for s in &states {
                    match s {
                        SeatState::Free => counted.free += 1,
                        SeatState::Held => counted.held += 1,
                        SeatState::Sold => counted.sold += 1,
                        SeatState::Off => {}
                    }
                }
                counted.rows.push(RowMap {
                    id: row.id.clone(),
                    states: runs(&states),
                });
            }
            counted
        })
        .collect();
    SeatMap {
        version,
        layout: layout_id,
        free: sections.iter().map(|s| s.free).sum(),
        held: sections.iter().map(|s| s.held).sum(),
        sold: sections.iter().map(|s| s.sold).sum(),
        sections,
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
async fn venue(app: &App, id: uuid::Uuid) -> ServiceResult<Arc<Venue>> {
    if let Some(kept) = app.seat_maps.venues.lock().expect("not poisoned").get(&id) {
        return Ok(Arc::clone(kept));
    }
    let layout = app
        .ledger
        .layout(id)
        .await?
        .ok_or(ServiceError::NotFound("layout"))?;
    let index = layout
        .seat_ids()
        .into_iter()
        .enumerate()
        .map(|(i, id)| (Arc::from(id), i))
        .collect();
    let categories = layout
        .sections
        .iter()
        .flat_map(|s| &s.rows)
        .flat_map(|r| &r.seats)
        .filter_map(|seat| seat.category.clone())
        .collect();
    let venue = Arc::new(Venue {
        layout,
        index,
        categories,
        blocks: Mutex::default(),
    });
    app.seat_maps
        .venues
        .lock()
        .expect("not poisoned")
        .insert(id, Arc::clone(&venue));
    Ok(venue)
}

/// The blocks best available looks in for `ask` on the sale's layout; refused when the sale
/// has none, or the layout has no such category or section.
pub async fn blocks(app: &App, sale: SaleId, ask: &BestAsk) -> ServiceResult<Arc<Blocks>> {
    let offer = super::offer::offer(app, sale).await?;
    let layout = offer.sale.layout.ok_or_else(|| {
        ServiceError::validation(
            "best_available",
            "this sale has no venue layout: give `seat_ids` or `quantity`",
        )
    })?;
    let venue = venue(app, layout).await?;
    if let Some(category) = &ask.category {
        if !venue.categories.contains(category) {
            return Err(ServiceError::validation(
                "best_available.category",
                format!("the layout has no category {category}"),
            ));
        }
    }
    if let Some(section) = &ask.section {
        if !venue.layout.sections.iter().any(|s| s.id == *section) {
            return Err(ServiceError::validation(
                "best_available.section",
                format!("the layout has no section {section}"),
            ));
        }
    }
    let mut all = venue.blocks.lock().expect("not poisoned");
    let blocks = all
        .entry(ask.category.clone())
        .or_insert_with(|| Arc::new(best_seats::blocks(&venue.layout, ask.category.as_deref())));
    Ok(Arc::clone(blocks))
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
    let every = app.config.queue.line_refresh_ms.duration();
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

    /// A map read `unread` ago or longer is let go with its changes and its turn; a fresh one
    /// stays, and so does a stale one whose turn a request holds.
    #[test]
    fn maps_nobody_reads_are_let_go_unless_a_reader_waits() {
        let maps = SeatMaps::default();
        let kept = |ago: u64| Kept {
            at: Instant::now() - Duration::from_secs(ago),
            epoch: String::new(),
            map: Arc::new(SeatMap {
                version: 1,
                layout: uuid::Uuid::nil(),
                sections: Vec::new(),
                free: 0,
                held: 0,
                sold: 0,
                seats: Vec::new(),
            }),
        };
        let [old, fresh, awaited] = [(); 3].map(|_| SaleId::new());
        for (sale, ago) in [(old, 700), (fresh, 5), (awaited, 700)] {
            maps.maps.lock().unwrap().insert(sale, kept(ago));
            maps.reading.lock().unwrap().insert(sale, Arc::default());
            maps.changes
                .lock()
                .unwrap()
                .insert(sale, Default::default());
        }
        let waiting = Arc::clone(&maps.reading.lock().unwrap()[&awaited]);
        maps.let_go(Duration::from_secs(600));
        for (name, sale, stays) in [
            ("old", old, false),
            ("fresh", fresh, true),
            ("awaited", awaited, true),
        ] {
            assert_eq!(
                maps.maps.lock().unwrap().contains_key(&sale),
                stays,
                "{name}"
            );
            assert_eq!(
                maps.reading.lock().unwrap().contains_key(&sale),
                stays,
                "{name}"
            );
            assert_eq!(
                maps.changes.lock().unwrap().contains_key(&sale),
                stays,
                "{name}"
            );
        }
        drop(waiting);
    }

    #[test]
    fn a_row_is_its_runs() {
        use SeatState::*;
        assert_eq!(runs(&[Free, Free, Held, Sold, Sold, Off]), "f2h1s2x1");
        assert_eq!(runs(&[]), "");
    }
}
