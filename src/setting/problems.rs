//! What a check of the settings finds: each setting that cannot be used, by its TOML key and
//! its `SLUICE__…` variable, collected so that all of them are reported at once.

use std::fmt;

/// One setting that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The TOML key, e.g. `queue.timeout_ms`; the environment's name is derived from it.
    pub key: String,
    /// What the key must be.
    pub message: String,
}

impl Problem {
    /// The environment variable that sets the key: `SLUICE__QUEUE__TIMEOUT_MS`.
    pub fn variable(&self) -> String {
        format!("SLUICE__{}", self.key.replace('.', "__").to_uppercase())
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "`{}` ({}): {}", self.key, self.variable(), self.message)
    }
}

/// The problems found so far, in the order of the checks.
#[derive(Default)]
pub struct Problems(Vec<Problem>);

impl Problems {
    pub fn add(&mut self, key: &str, message: impl Into<String>) {
        self.0.push(Problem {
            key: key.to_owned(),
            message: message.into(),
        });
    }

    /// Adds the problem unless `ok`.
    pub fn unless(&mut self, ok: bool, key: &'static str, message: impl Into<String>) {
        if !ok {
            self.add(key, message);
        }
    }

    /// Each of `urls` that is set must be an http(s) URL.
    pub fn http_urls<'a>(&mut self, urls: impl IntoIterator<Item = (&'static str, &'a str)>) {
        for (key, url) in urls {
            self.unless(is_http_url(url), key, "must be an http(s) URL");
        }
    }
}

/// Whether `url` parses as an absolute http(s) URL with a host (as reqwest will read it): a
/// prefix alone (`https://`, `https://shop example`) is not one.
pub fn is_http_url(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| {
        matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty())
    })
}

impl Problems {
    /// The problems found, in the order of the checks.
    pub fn into_vec(self) -> Vec<Problem> {
        self.0
    }
}

/// `scheme://host[:port]` as a browser sends it in `Origin` (lower-case, no path).
pub fn is_origin(origin: &str) -> bool {
    let Some((scheme, authority)) = origin.split_once("://") else {
        return false;
    };
    // `[::1]:8080`: an IPv6 host is bracketed; otherwise the port follows the only colon.
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => match v6.split_once(']') {
            Some((addr, tail)) if addr.bytes().all(|b| b.is_ascii_hexdigit() || b == b':') => {
                ("v6", tail)
            }
            _ => return false,
        },
        None => match authority.find(':') {
            Some(at) => (&authority[..at], &authority[at..]),
            None => (authority, ""),
        },
    };
    let port_ok = match port.strip_prefix(':') {
        None => port.is_empty(),
        Some(p) => (1..=5).contains(&p.len()) && p.bytes().all(|b| b.is_ascii_digit()),
    };
    matches!(scheme, "http" | "https")
        && !host.is_empty()
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
        && port_ok
}
