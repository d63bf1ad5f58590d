//! The parts settings are made of, shared by the configuration (`config`) and the sections
//! payment providers bring (`payments::<provider>::settings`), so that neither depends on the
//! other: a secret that never prints, a URL checked as it is read, a duration in its unit, and
//! the problems a check finds.

mod duration;
mod problems;
mod secret;
mod url;

pub use duration::{Millis, Seconds};
pub use problems::{is_http_url, is_origin, Problem, Problems};
pub use secret::Secret;
pub use url::{or_empty, HttpUrl};
