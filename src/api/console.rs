//! The operator console at `/admin`: plain HTML, CSS and JavaScript compiled into the binary,
//! like the waiting-room page. It holds no data and needs no key to load; it signs in with an
//! admin key (kept in the tab's session storage) and drives the public API with it, so
//! anything it does a script can do.

use poem::http::StatusCode;
use poem::web::{Data, Path};
use poem::{handler, Response};

use super::page::file;
use crate::service::App;

const INDEX: &str = include_str!("console/index.html");
const SCRIPT: &str = include_str!("console/console.js");
const STYLE: &str = include_str!("console/console.css");

#[handler]
pub fn index(app: Data<&App>) -> Response {
    file(INDEX, "text/html; charset=utf-8", &app.config.page)
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
