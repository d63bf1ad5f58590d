//! A setting that is a secret: read and written as the string it is, never printed.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A key, a password or a signing secret from the configuration. `Debug` and `Display` show
/// `[secret]` (or `[unset]`), so a configuration that is logged, or an error that quotes a
/// setting, never shows one; the code that signs or calls with it asks for [`Secret::expose`].
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(String);

impl Secret {
    /// The secret itself, for the one place that uses it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Its length in bytes (the checks ask for a minimum), which says nothing of its value.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether it starts with a provider's published prefix (`sk_`, `whsec_`).
    pub fn starts_with(&self, prefix: &str) -> bool {
        self.0.starts_with(prefix)
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Secret(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Secret(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.is_empty() {
            "[unset]"
        } else {
            "[secret]"
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_never_prints_but_round_trips() {
        let secret = Secret::from("sk_test_0123456789");
        assert_eq!(format!("{secret} {secret:?}"), "[secret] [secret]");
        assert_eq!(format!("{:?}", Secret::default()), "[unset]");
        let json = serde_json::to_string(&secret).unwrap();
        assert_eq!(json, "\"sk_test_0123456789\"");
        assert_eq!(serde_json::from_str::<Secret>(&json).unwrap(), secret);
    }
}
