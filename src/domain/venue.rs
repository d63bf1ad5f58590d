//! A venue's layout: its stage and sections, each section's rows and each row's seats, with
//! where to draw them, their category (and so their price in a sale) and their flags. Uploaded
//! once and used by many sales (a tour plays the same hall many nights). A seat's id is
//! `<section>-<row>-<number>`, the id a sale's stock and holds use.

use serde::{Deserialize, Serialize};

use super::sale::parse_seat_id;

/// Most seats a layout has.
pub const MAX_SEATS: usize = 100_000;

/// Where the drawing's coordinates may lie (a unit square of 100,000 a side).
const EXTENT: f64 = 100_000.0;

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Layout {
    pub name: String,
    /// The stage or field, drawn as a box with its label.
    pub stage: Stage,
    pub sections: Vec<Section>,
    /// Best available may leave a single free seat between taken ones (by default it never
    /// does: a seat alone is hard to sell).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub single_gaps: bool,
}

/// A seat's state on a sale's seat map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeatState {
    Free,
    Held,
    Sold,
    /// Not sold by this sale (withdrawn).
    Off,
}

impl SeatState {
    /// Its letter in a seat map's runs and in the store's seat log.
    pub fn letter(self) -> char {
        match self {
            SeatState::Free => 'f',
            SeatState::Held => 'h',
            SeatState::Sold => 's',
            SeatState::Off => 'x',
        }
    }

    pub fn from_letter(letter: char) -> Option<SeatState> {
        [
            SeatState::Free,
            SeatState::Held,
            SeatState::Sold,
            SeatState::Off,
        ]
        .into_iter()
        .find(|s| s.letter() == letter)
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Stage {
    pub label: String,
    pub x: f64,
    pub y: f64,
    pub width: f64,
    pub height: f64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Section {
    /// Short, in seat ids (`A`, `101`, `FLOOR`).
    pub id: String,
    /// As shown to buyers.
    pub name: String,
    pub rows: Vec<Row>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    /// In seat ids (`1`, `AA`).
    pub id: String,
    pub seats: Vec<Seat>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Seat {
    /// In seat ids (`12`).
    pub number: String,
    pub x: f64,
    pub y: f64,
    /// The seat's category (`VIP`, `R`), priced by each sale; none: the sale's unit price.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub wheelchair: bool,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub restricted_view: bool,
}

/// A layout refused: the field at fault and why, naming the seat when it is one's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LayoutError {
    pub field: &'static str,
    pub message: String,
}

fn refuse(field: &'static str, message: impl Into<String>) -> LayoutError {
    LayoutError {
        field,
        message: message.into(),
    }
}

impl Row {
    /// The ids of its seats, in order.
    pub fn seat_ids<'a>(&'a self, section: &'a str) -> impl Iterator<Item = String> + 'a {
        self.seats
            .iter()
            .map(move |s| format!("{section}-{}-{}", self.id, s.number))
    }
}

impl Layout {
    /// Checks the layout: names, a stage, 1 to [`MAX_SEATS`] seats, each id well formed
    /// and once only, each place within the drawing's extent.
    pub fn check(&self) -> Result<(), LayoutError> {
        let name = self.name.trim();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(refuse("name", "1 to 200 characters"));
        }
        let finite = |v: f64| v.is_finite() && (0.0..=EXTENT).contains(&v);
        let st = &self.stage;
        if st.label.trim().is_empty()
            || !(finite(st.x) && finite(st.y) && finite(st.width) && finite(st.height))
        {
            return Err(refuse(
                "stage",
                "a label, and x, y, width, height between 0 and 100000",
            ));
        }
        let mut seen = std::collections::HashSet::new();
        let mut sections = std::collections::HashSet::new();
        for section in &self.sections {
            if !sections.insert(section.id.as_str()) {
                return Err(refuse(
                    "sections.id",
                    format!("section {} appears twice", section.id),
                ));
            }
            if section.name.trim().is_empty() || section.name.chars().count() > 100 {
                return Err(refuse(
                    "sections.name",
                    format!("section {}: a name of 1 to 100 characters", section.id),
                ));
            }
            for row in &section.rows {
                for (seat, id) in row.seats.iter().zip(row.seat_ids(&section.id)) {
                    if parse_seat_id(&id).is_err() {
                        return Err(refuse(
                            "sections.rows.seats",
                            format!(
                                "seat {id}: ids are letters, digits, '_', ':' and '-', 1 to 64"
                            ),
                        ));
                    }
                    if !(finite(seat.x) && finite(seat.y)) {
                        return Err(refuse(
                            "sections.rows.seats",
                            format!("seat {id}: x and y between 0 and 100000"),
                        ));
                    }
                    if seat
                        .category
                        .as_deref()
                        .is_some_and(|c| c.is_empty() || c.chars().count() > 32)
                    {
                        return Err(refuse(
                            "sections.rows.seats",
                            format!("seat {id}: a category of 1 to 32 characters"),
                        ));
                    }
                    if !seen.insert(id.clone()) {
                        return Err(refuse(
                            "sections.rows.seats",
                            format!("seat {id} appears twice"),
                        ));
                    }
                    if seen.len() > MAX_SEATS {
                        return Err(refuse("sections", format!("at most {MAX_SEATS} seats")));
                    }
                }
            }
        }
        if seen.is_empty() {
            return Err(refuse("sections", "at least one seat"));
        }
        Ok(())
    }

    /// Every seat's id, in the layout's order.
    pub fn seat_ids(&self) -> Vec<String> {
        self.sections
            .iter()
            .flat_map(|s| s.rows.iter().flat_map(|r| r.seat_ids(&s.id)))
            .collect()
    }

    /// The seats of each category, by name, in the layout's order.
    pub fn categories(&self) -> Vec<(String, Vec<String>)> {
        let mut out: Vec<(String, Vec<String>)> = Vec::new();
        for section in &self.sections {
            for row in &section.rows {
                for (seat, id) in row.seats.iter().zip(row.seat_ids(&section.id)) {
                    let Some(category) = &seat.category else {
                        continue;
                    };
                    match out.iter_mut().find(|(name, _)| name == category) {
                        Some((_, seats)) => seats.push(id),
                        None => out.push((category.clone(), vec![id])),
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hall() -> Layout {
        let seat = |n: u32, category: &str| Seat {
            number: n.to_string(),
            x: 10.0 * n as f64,
            y: 100.0,
            category: Some(category.into()),
            wheelchair: n == 1,
            restricted_view: false,
        };
        Layout {
            name: "Olympic Hall".into(),
            stage: Stage {
                label: "STAGE".into(),
                x: 0.0,
                y: 0.0,
                width: 500.0,
                height: 50.0,
            },
            sections: vec![Section {
                id: "A".into(),
                name: "Floor A".into(),
                rows: vec![Row {
                    id: "1".into(),
                    seats: vec![seat(1, "VIP"), seat(2, "VIP"), seat(3, "R")],
                }],
            }],
            single_gaps: false,
        }
    }

    #[test]
    fn a_layout_names_its_seats_and_their_categories() {
        let hall = hall();
        assert_eq!(hall.check(), Ok(()));
        assert_eq!(hall.seat_ids(), ["A-1-1", "A-1-2", "A-1-3"]);
        assert_eq!(
            hall.categories(),
            vec![
                (
                    "VIP".to_owned(),
                    vec!["A-1-1".to_owned(), "A-1-2".to_owned()]
                ),
                ("R".to_owned(), vec!["A-1-3".to_owned()])
            ]
        );
    }

    #[test]
    fn a_bad_seat_is_named() {
        let mut twice = hall();
        twice.sections[0].rows[0].seats[2].number = "2".into();
        assert_eq!(
            twice.check().unwrap_err().message,
            "seat A-1-2 appears twice"
        );
        let mut far = hall();
        far.sections[0].rows[0].seats[0].x = f64::NAN;
        assert!(far.check().unwrap_err().message.starts_with("seat A-1-1:"));
        let mut odd = hall();
        odd.sections[0].rows[0].seats[1].number = "2 b".into();
        assert!(odd
            .check()
            .unwrap_err()
            .message
            .starts_with("seat A-1-2 b:"));
    }
}
