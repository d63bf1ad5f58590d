//! The waiting-room page at `/`: plain HTML, CSS and JavaScript compiled into the binary (no
//! build step, nothing to deploy beside sluice). The customer's site links to
//! `/?sale=<id>#token=<user JWT>`; the token stays in the fragment, so it never reaches a
//! server log. The page drives the public API like any other client.
//!
//! The page is in the visitor's language: `GET /` reads `Accept-Language` and marks the page
//! `lang="ko"` or `lang="en"` (the script translates from it, and its switch overrides it). The
//! shop's name, logo and colours come from configuration (`[page]`): `brand.json` and
//! `brand.css`, empty when unset.

use std::sync::Arc;

use poem::http::{header, Method, StatusCode};
use poem::web::{Data, Path};
use poem::{handler, Endpoint, IntoResponse, Request, Response};

use crate::config::PageConfig;
use crate::payments::page_sources::{origin, PageSources};
use crate::service::App;

/// The page's files as they are in `src/api/page`: its HTML, its ES modules (the page and its
/// modules, the seat map's drawing, the payment windows), its style and icon.
static FILES: include_dir::Dir<'static> =
    include_dir::include_dir!("$CARGO_MANIFEST_DIR/src/api/page");

/// The page itself (`index.html`).
fn index() -> &'static str {
    FILES
        .get_file("index.html")
        .and_then(|f| f.contents_utf8())
        .unwrap_or_default()
}

/// The content type of a file of the page served by name, by its extension; `None` for what
/// is not served (the type checker's settings).
fn served_as(name: &str) -> Option<&'static str> {
    match name.rsplit_once('.')?.1 {
        "js" => Some("text/javascript; charset=utf-8"),
        "css" => Some("text/css; charset=utf-8"),
        "svg" => Some("image/svg+xml"),
        _ => None,
    }
}

/// The languages the page speaks, the first the default.
const LANGUAGES: [&str; 2] = ["en", "ko"];

/// Only the page's own files (and the configured logo, and the payment provider's script and
/// frames), no inline code, no framing by others.
fn policy(page: &PageConfig, payment: &PageSources) -> String {
    // A logo only over HTTPS.
    let logo = origin(&page.logo_url)
        .filter(|o| o.starts_with("https://"))
        .unwrap_or_default();
    let PageSources {
        script,
        frame,
        connect,
    } = payment;
    format!(
        "default-src 'self'; script-src 'self'{script}; worker-src 'self'; style-src 'self'; \
         img-src 'self' data: {logo}; connect-src 'self'{connect}; frame-src 'self'{frame}; \
         frame-ancestors 'none'; base-uri 'none'"
    )
}

/// One of the page's files, with the page's policy (the console's files too).
pub(super) fn file(body: impl Into<poem::Body>, content_type: &str, page: &PageConfig) -> Response {
    with_policy(body, content_type, policy(page, &PageSources::default()))
}

fn with_policy(body: impl Into<poem::Body>, content_type: &str, policy: String) -> Response {
    Response::builder()
        .content_type(content_type)
        .header(header::CONTENT_SECURITY_POLICY, policy)
        .header(header::X_CONTENT_TYPE_OPTIONS, "nosniff")
        .header(header::REFERRER_POLICY, "no-referrer")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(body)
}

/// The visitor's language among [`LANGUAGES`], from `Accept-Language` (highest `q` first; the
/// default when none is spoken).
pub(super) fn language(accept: Option<&str>) -> &'static str {
    let mut best = (LANGUAGES[0], 0.0_f32);
    for item in accept.unwrap_or("").split(',') {
        let mut parts = item.trim().split(';');
        let tag = parts.next().unwrap_or("").trim().to_ascii_lowercase();
        let q = parts
            .find_map(|p| p.trim().strip_prefix("q="))
            .and_then(|q| q.parse::<f32>().ok())
            .unwrap_or(1.0);
        let primary = tag.split('-').next().unwrap_or("");
        if let Some(lang) = LANGUAGES.iter().find(|l| **l == primary) {
            if q > best.1 {
                best = (lang, q);
            }
        }
    }
    best.0
}

/// `GET /` is the page; everything else goes on to the routes.
pub async fn at_root<E: Endpoint>(
    ep: Arc<E>,
    req: Request,
    page: Arc<(PageConfig, PageSources)>,
) -> poem::Result<Response> {
    if req.uri().path() == "/" && req.method() == Method::GET {
        let accept = req
            .headers()
            .get(header::ACCEPT_LANGUAGE)
            .and_then(|v| v.to_str().ok());
        let lang = language(accept);
        let html = index().replacen("<html lang=\"en\">", &format!("<html lang=\"{lang}\">"), 1);
        let (page, payment) = &*page;
        let mut resp = with_policy(html, "text/html; charset=utf-8", policy(page, payment));
        // Its language follows the visitor's.
        resp.headers_mut().insert(
            header::VARY,
            poem::http::HeaderValue::from_static("Accept-Language"),
        );
        return Ok(resp);
    }
    ep.call(req).await.map(IntoResponse::into_response)
}

#[handler]
pub fn asset(Path(name): Path<String>, app: Data<&App>) -> Response {
    let page = &app.config.page;
    match name.as_str() {
        "brand.css" => file(brand_css(page), "text/css; charset=utf-8", page),
        "brand.json" => file(
            serde_json::json!({ "name": page.shop_name, "logo_url": page.logo_url }).to_string(),
            "application/json",
            page,
        ),
        // Files of the folder itself only (a name has no `/`).
        _ => match (served_as(&name), FILES.get_file(&name)) {
            (Some(content_type), Some(f)) => file(f.contents(), content_type, page),
            _ => super::problem::problem_response(StatusCode::NOT_FOUND, "no such file".into()),
        },
    }
}

/// The shop's colours over the page's own (validated as `#rgb` / `#rrggbb` at start-up).
fn brand_css(page: &PageConfig) -> String {
    let mut css = String::from("/* The shop's colours (configuration [page]). */\n");
    if !page.accent_colour.is_empty() {
        css.push_str(&format!(":root {{ --accent: {}; }}\n", page.accent_colour));
    }
    if !page.background_colour.is_empty() {
        css.push_str(&format!(
            ":root {{ --paper: {}; }}\n",
            page.background_colour
        ));
    }
    css
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_modules_are_served_and_its_tools_settings_are_not() {
        for module in ["waiting-room.js", "api.js", "timing.js", "texts-ko.js"] {
            assert!(FILES.get_file(module).is_some(), "{module}");
            assert_eq!(served_as(module), Some("text/javascript; charset=utf-8"));
        }
        for tooling in ["tsconfig.json", "package.json", "index.html"] {
            assert!(FILES.get_file(tooling).is_some(), "{tooling}");
            assert_eq!(
                served_as(tooling),
                None,
                "{tooling} is not served as a file"
            );
        }
        assert!(index().contains(r#"type="module""#));
    }

    #[test]
    fn the_visitors_language_is_the_best_one_spoken() {
        assert_eq!(language(Some("ko-KR,ko;q=0.9,en-US;q=0.8,en;q=0.7")), "ko");
        assert_eq!(language(Some("en-GB,en;q=0.9,ko;q=0.8")), "en");
        assert_eq!(language(Some("fr-FR,fr;q=0.9,ko;q=0.5")), "ko");
        assert_eq!(language(Some("de,fr")), "en");
        assert_eq!(language(None), "en");
        assert_eq!(language(Some("KO")), "ko");
    }

    #[test]
    fn a_logo_elsewhere_is_allowed_by_the_policy_and_nothing_else() {
        let none = PageSources::default();
        let mut page = PageConfig::default();
        assert!(policy(&page, &none).contains("img-src 'self' data: ;"));
        page.logo_url = "https://cdn.shop.example/logo.png".into();
        assert!(policy(&page, &none).contains("img-src 'self' data: https://cdn.shop.example;"));
        for elsewhere in ["/static/logo.png", "http://cdn.shop.example/logo.png"] {
            page.logo_url = elsewhere.into();
            assert!(policy(&page, &none).contains("img-src 'self' data: ;"));
        }
        assert!(policy(&page, &none).contains("script-src 'self';"));
    }
}
