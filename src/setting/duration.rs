//! A setting that is a length of time, in the unit its key names (`…_ms`, `…_secs`): written
//! as a plain number, as deployments already write them, but a [`Duration`] to the code, so
//! milliseconds are never read as seconds.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Milliseconds (a `…_ms` key). 0 is what the key says it is (often "off").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Millis(pub u64);

/// Seconds (a `…_secs` key). 0 is what the key says it is (often "off").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seconds(pub u64);

impl Millis {
    pub fn duration(self) -> Duration {
        Duration::from_millis(self.0)
    }

    /// Zero: what turns the setting off, where it can be.
    pub fn is_off(self) -> bool {
        self.0 == 0
    }
}

impl Seconds {
    pub fn duration(self) -> Duration {
        Duration::from_secs(self.0)
    }

    /// In milliseconds, for the stores that count time so.
    pub fn millis(self) -> u64 {
        self.0.saturating_mul(1000)
    }

    /// Zero: what turns the setting off, where it can be.
    pub fn is_off(self) -> bool {
        self.0 == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_duration_setting_is_its_number_in_its_unit() {
        let ms: Millis = serde_json::from_str("1500").unwrap();
        let secs: Seconds = serde_json::from_str("2").unwrap();
        assert_eq!(ms.duration(), Duration::from_millis(1500));
        assert_eq!(secs.duration(), Duration::from_secs(2));
        assert_eq!(serde_json::to_string(&ms).unwrap(), "1500");
        assert!(Millis(0).is_off() && !secs.is_off());
        assert_eq!(secs.millis(), 2000);
        assert!(serde_json::from_str::<Millis>("-1").is_err());
        assert!(serde_json::from_str::<Seconds>("\"5s\"").is_err());
    }
}
