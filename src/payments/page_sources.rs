//! What the waiting page loads from the payment provider (its script, its frames, its API),
//! as sources of the page's Content-Security-Policy. Each provider says its own
//! (`Connector::page_sources`); the page adds them to its policy.

/// Sources of the page's policy, each with a leading space.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PageSources {
    pub script: String,
    pub frame: String,
    pub connect: String,
}

impl PageSources {
    /// The provider's script origin `js` and its `extra` hosts (each with a leading space), as
    /// script, frame and connect sources alike.
    pub fn alike(js: &str, extra: &str) -> Self {
        PageSources {
            script: format!(" {js}{extra}"),
            frame: format!(" {js}{extra}"),
            connect: format!(" {js}{extra}"),
        }
    }

    /// These sources and `other`'s.
    pub fn and(&self, other: &PageSources) -> Self {
        PageSources {
            script: format!("{}{}", self.script, other.script),
            frame: format!("{}{}", self.frame, other.frame),
            connect: format!("{}{}", self.connect, other.connect),
        }
    }
}

/// The origin of an absolute URL (`https://cdn.shop.example`), for the page's policy.
pub fn origin(url: &str) -> Option<&str> {
    let scheme = ["https://", "http://"]
        .into_iter()
        .find(|s| url.starts_with(s))?;
    let rest = &url[scheme.len()..];
    let end = rest.find('/').unwrap_or(rest.len());
    Some(&url[..scheme.len() + end])
}
