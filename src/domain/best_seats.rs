//! Best available: which seats side by side a buyer gets when they ask for "2 seats in R,
//! as close to the stage as you can" instead of choosing. The layout is cut into blocks (a
//! row's seats side by side, in the row's order; of one category when the ask names one, the
//! whole row otherwise), ordered nearest the stage
//! first; the seats go to the first block with enough free seats side by side that leave no
//! single free seat stranded (unless the layout allows it), and in that block to the
//! placement whose middle is nearest its seat nearest the stage. `lua/hold_best.lua` picks
//! the same way inside the queue store; [`pick`] is the tests' copy, which they check it against.
//!
//! Seats next to each other in a row's list are side by side: a layout puts an aisle between
//! sections, or starts a new row after it.

use super::venue::Layout;

/// Most seats one ask takes.
pub const MAX_COUNT: u32 = 20;

/// Seats side by side in one row, of one category: where best available looks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    pub section: String,
    /// Which of its seats is nearest the stage (0-based).
    pub nearest: usize,
    pub seats: Vec<String>,
}

impl Block {
    /// As `lua/hold_best.lua` reads it: `<section>|<nearest, 1-based>|<seat,seat,...>`.
    pub fn encode(&self) -> String {
        format!(
            "{}|{}|{}",
            self.section,
            self.nearest + 1,
            self.seats.join(",")
        )
    }
}

/// A sale's blocks for one category (or every one), nearest the stage first, and the
/// layout's rule on single seats.
#[derive(Debug, Clone, PartialEq)]
pub struct Blocks {
    /// `None`: every category.
    pub category: Option<String>,
    pub blocks: Vec<Block>,
    /// A single free seat may be left between taken ones.
    pub single_gaps: bool,
}

/// What a buyer asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BestAsk {
    pub count: u32,
    pub category: Option<String>,
    pub section: Option<String>,
}

/// The blocks of `layout` of `category` (every category: `None`), nearest the stage first
/// (of equals, the layout's order).
pub fn blocks(layout: &Layout, category: Option<&str>) -> Blocks {
    let stage = &layout.stage;
    // The distance from a seat to the stage's box (0 inside it).
    let distance = |x: f64, y: f64| {
        let dx = (stage.x - x).max(0.0).max(x - (stage.x + stage.width));
        let dy = (stage.y - y).max(0.0).max(y - (stage.y + stage.height));
        dx.hypot(dy)
    };
    let mut found: Vec<(f64, Block)> = Vec::new();
    for section in &layout.sections {
        for row in &section.rows {
            let mut current: Option<(f64, Block, Option<&str>)> = None;
            for (seat, id) in row.seats.iter().zip(row.seat_ids(&section.id)) {
                let wanted = category.is_none() || seat.category.as_deref() == category;
                let same = current
                    .as_ref()
                    .is_some_and(|(_, _, c)| category.is_none() || *c == seat.category.as_deref());
                if !wanted || !same {
                    found.extend(current.take().map(|(d, b, _)| (d, b)));
                }
                if !wanted {
                    continue;
                }
                let d = distance(seat.x, seat.y);
                let (best, block, _) = current.get_or_insert_with(|| {
                    (
                        f64::INFINITY,
                        Block {
                            section: section.id.clone(),
                            nearest: 0,
                            seats: Vec::new(),
                        },
                        seat.category.as_deref(),
                    )
                });
                if d < *best {
                    *best = d;
                    block.nearest = block.seats.len();
                }
                block.seats.push(id);
            }
            found.extend(current.map(|(d, b, _)| (d, b)));
        }
    }
    found.sort_by(|a, b| a.0.total_cmp(&b.0));
    Blocks {
        category: category.map(str::to_owned),
        blocks: found.into_iter().map(|(_, b)| b).collect(),
        single_gaps: layout.single_gaps,
    }
}

/// The seats best available gives `ask` with `is_free` telling which seats are free; `None`
/// when no block has them side by side.
pub fn pick(blocks: &Blocks, ask: &BestAsk, is_free: impl Fn(&str) -> bool) -> Option<Vec<String>> {
    let count = ask.count as usize;
    blocks.blocks.iter().find_map(|block| {
        let wanted = ask.section.as_ref().is_none_or(|s| *s == block.section);
        if !wanted || block.seats.len() < count {
            return None;
        }
        let free: Vec<bool> = block.seats.iter().map(|s| is_free(s)).collect();
        place(&free, count, block.nearest, blocks.single_gaps)
            .map(|at| block.seats[at..at + count].to_vec())
    })
}

/// Where in a block with `free` seats `count` seats side by side go (their first's index).
fn place(free: &[bool], count: usize, nearest: usize, single_gaps: bool) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < free.len() {
        if !free[i] {
            i += 1;
            continue;
        }
        let mut j = i;
        while j + 1 < free.len() && free[j + 1] {
            j += 1;
        }
        // The run i..=j: each placement in it, and the free seats it leaves either side.
        for start in i..=(j + 1).saturating_sub(count) {
            if start + count > j + 1 {
                break;
            }
            let (left, right) = (start - i, j + 1 - (start + count));
            if single_gaps || (left != 1 && right != 1) {
                // Twice the distance of the placement's middle from the nearest seat.
                let score = (2 * start + count - 1).abs_diff(2 * nearest);
                if best.is_none_or(|(_, s)| score < s) {
                    best = Some((start, score));
                }
            }
        }
        i = j + 1;
    }
    best.map(|(start, _)| start)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn free(pattern: &str) -> Vec<bool> {
        pattern.chars().map(|c| c == '.').collect()
    }

    #[test]
    fn seats_go_nearest_the_middle_and_leave_no_single_seat() {
        // 8 free seats, the nearest the 4th (index 3): 2-3 and 3-4 are as near; the first.
        assert_eq!(place(&free("........"), 2, 3, false), Some(2));
        // A run of 3 can take 2 only by leaving one: refused, unless single gaps are allowed.
        assert_eq!(place(&free("x...x"), 2, 2, false), None);
        assert_eq!(place(&free("x...x"), 2, 2, true), Some(1));
        // Of a run of 4, the middle two would leave a single seat each side: the ends instead.
        assert_eq!(place(&free("x....x"), 2, 2, false), Some(1));
        // A run of exactly the count leaves nothing.
        assert_eq!(place(&free("xx..xx"), 2, 0, false), Some(2));
        assert_eq!(place(&free("x.x.x"), 2, 0, true), None);
    }

    #[test]
    fn blocks_are_rows_of_one_category_nearest_the_stage_first() {
        use super::super::venue::{Row, Seat, Section, Stage};
        let seat = |n: u32, y: f64, category: &str| Seat {
            number: n.to_string(),
            x: 10.0 * f64::from(n),
            y,
            category: Some(category.into()),
            wheelchair: false,
            restricted_view: false,
        };
        let layout = Layout {
            name: "Hall".into(),
            stage: Stage {
                label: "STAGE".into(),
                x: 0.0,
                y: 0.0,
                width: 100.0,
                height: 10.0,
            },
            sections: vec![Section {
                id: "A".into(),
                name: "A".into(),
                rows: vec![
                    Row {
                        id: "2".into(),
                        seats: (1..=4).map(|n| seat(n, 40.0, "R")).collect(),
                    },
                    Row {
                        id: "1".into(),
                        seats: vec![
                            seat(1, 20.0, "R"),
                            seat(2, 20.0, "VIP"),
                            seat(3, 20.0, "VIP"),
                        ],
                    },
                ],
            }],
            single_gaps: false,
        };
        let r = blocks(&layout, Some("R"));
        assert_eq!(
            r.blocks
                .iter()
                .map(|b| b.seats.join(","))
                .collect::<Vec<_>>(),
            ["A-1-1", "A-2-1,A-2-2,A-2-3,A-2-4"]
        );
        let all = blocks(&layout, None);
        assert_eq!(all.blocks[0].seats, ["A-1-1", "A-1-2", "A-1-3"]);
        assert_eq!(all.blocks[0].encode(), "A|1|A-1-1,A-1-2,A-1-3");
        let ask = BestAsk {
            count: 2,
            category: Some("R".into()),
            section: None,
        };
        // Row 1 has one R seat: the two go to row 2, leaving the other two together.
        assert_eq!(
            pick(&r, &ask, |_| true),
            Some(vec!["A-2-1".to_owned(), "A-2-2".to_owned()])
        );
        // Three free: any two would strand the third.
        assert_eq!(pick(&r, &ask, |s| s != "A-2-4"), None);
        assert_eq!(pick(&r, &ask, |s| s == "A-2-2"), None);
    }
}
