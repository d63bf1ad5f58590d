//! The parts settings are made of, shared by the configuration (`config`) and the sections
//! payment providers bring (`payments::<provider>::settings`), so that neither depends on the
//! other: a secret that never prints, and the problems a check finds.

mod problems;
mod secret;

pub use problems::{is_http_url, is_origin, Problem, Problems};
pub use secret::Secret;
