//! The operator console at `/admin`: plain HTML, CSS and JavaScript compiled into the binary,
//! like the waiting-room page. It holds no data and needs no key to load; it signs in with an
//! admin key (kept in the tab's session storage) and drives the public API with it, so
//! anything it does a script can do. It speaks the operator's language (English or Korean).

use poem::http::{header, HeaderValue, StatusCode};
use poem::web::{Data, Path};
use poem::{handler, Request, Response};

use super::page::{file, language};
use crate::service::App;

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

/// The console, in the operator's language (`Accept-Language`: English or Korean).
#[handler]
pub fn index(req: &Request, app: Data<&App>) -> Response {
    let accept = req
        .headers()
        .get(header::ACCEPT_LANGUAGE)
        .and_then(|v| v.to_str().ok());
    let html = INDEX.replacen(
        "<html lang=\"en\">",
        &format!("<html lang=\"{}\">", language(accept)),
        1,
    );
    let mut resp = file(html, "text/html; charset=utf-8", &app.config.page);
    resp.headers_mut()
        .insert(header::VARY, HeaderValue::from_static("Accept-Language"));
    resp
}

#[handler]
pub fn asset(Path(name): Path<String>, app: Data<&App>) -> Response {
    let page = &app.config.page;
    match name.as_str() {
        "console.js" => file(SCRIPT, "text/javascript; charset=utf-8", page),
        "console.css" => file(STYLE, "text/css; charset=utf-8", page),
        _ => super::problem::problem_response(StatusCode::NOT_FOUND, "no such file".into()),
    }
}
