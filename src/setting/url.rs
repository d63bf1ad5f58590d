//! A setting that is an http(s) URL: checked as it is read, so a bad one is reported by its
//! key with the rest, and the code that uses it holds a URL rather than a string to check.

use std::fmt;
use std::ops::Deref;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::is_http_url;

/// An absolute `http://` or `https://` URL with a host, kept as it was written (an issuer is
/// compared with a token's `iss` as a string).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct HttpUrl(String);

impl HttpUrl {
    /// `text` if it is an http(s) URL with a host; otherwise what is wrong with it.
    pub fn parse(text: &str) -> Result<Self, String> {
        if is_http_url(text) {
            Ok(HttpUrl(text.to_owned()))
        } else {
            Err(format!("`{text}` is not an http(s) URL with a host"))
        }
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Deref for HttpUrl {
    type Target = str;

    fn deref(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for HttpUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for HttpUrl {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        HttpUrl::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A URL setting that is off while empty (`""`, as the example config and an empty
/// `SLUICE__…` variable write it): `None` then. Use with `#[serde(with = "…::or_empty")]`.
pub mod or_empty {
    use super::*;

    pub fn serialize<S: Serializer>(url: &Option<HttpUrl>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(url.as_deref().unwrap_or(""))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<HttpUrl>, D::Error> {
        let text = String::deserialize(d)?;
        if text.is_empty() {
            return Ok(None);
        }
        HttpUrl::parse(&text)
            .map(Some)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Deserialize, Serialize)]
    struct Section {
        required: HttpUrl,
        #[serde(with = "or_empty")]
        optional: Option<HttpUrl>,
    }

    #[test]
    fn a_url_setting_is_checked_as_it_is_read() {
        let read = |json: &str| serde_json::from_str::<Section>(json);
        let ok = read(r#"{"required": "https://shop.example/x", "optional": ""}"#).unwrap();
        assert_eq!(ok.required.as_str(), "https://shop.example/x");
        assert_eq!(ok.optional, None);
        assert_eq!(
            serde_json::to_string(&ok).unwrap(),
            r#"{"required":"https://shop.example/x","optional":""}"#
        );
        let set = read(r#"{"required": "http://a", "optional": "http://b:9090"}"#).unwrap();
        assert_eq!(set.optional.as_deref(), Some("http://b:9090"));
        for bad in [
            "shop.example",
            "https://",
            "ftp://shop.example",
            "https://shop example",
        ] {
            let refused = read(&format!(r#"{{"required": "{bad}", "optional": ""}}"#));
            let e = refused.expect_err(bad).to_string();
            assert!(e.contains("not an http(s) URL"), "{bad}: {e}");
            let refused = read(&format!(
                r#"{{"required": "http://a", "optional": "{bad}"}}"#
            ));
            assert!(refused.is_err(), "{bad} as the optional one");
        }
    }
}
