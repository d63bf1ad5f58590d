//! Gates in front of a site: real proxies (Debian's nginx and Caddy, run from the configs of
//! `deploy/proxies`) guard a small origin of the test's, and visitors go through them as a
//! browser would (a cookie jar, no redirects followed), or in Chromium.
//!
//! Layout: this file (the origin, the proxies, a visitor); `flow.rs` (a visitor's way through,
//! on nginx and Caddy); `refusals.rs` (nothing let in without a real session); `crowd.rs`
//! (1,000 visitors through nginx); `store_down.rs` (fail-open and fail-closed);
//! `challenges.rs` (Turnstile and hCaptcha against their stand-ins); `browser.rs` (Chromium).

mod browser;
mod challenges;
mod crowd;
mod flow;
mod refusals;
mod store_down;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use reqwest::Method;
use ring::hmac;
use serde_json::{json, Value};

use crate::helpers::{free_port, TestApp};

/// A request the origin answered.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Path and query, as the origin got them.
    pub uri: String,
    /// `X-Sluice-Visitor`, as the proxy passed it on.
    pub visitor: String,
}

/// The guarded site: answers every page with what it got, `*.css` as a style sheet, and
/// `/shop/api/*` as JSON; it keeps what it answered.
pub struct Origin {
    pub port: u16,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[poem::handler]
fn origin_page(
    req: &poem::Request,
    seen: poem::web::Data<&Arc<Mutex<Vec<Seen>>>>,
) -> poem::Response {
    let uri = req
        .uri()
        .path_and_query()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_default();
    let visitor = req
        .headers()
        .get("x-sluice-visitor")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    seen.lock().unwrap().push(Seen {
        uri: uri.clone(),
        visitor: visitor.clone(),
    });
    if req.uri().path().ends_with(".css") {
        return poem::Response::builder()
            .content_type("text/css")
            .body("body { color: #123; }");
    }
    if req.uri().path().starts_with("/shop/api/") {
        return poem::Response::builder()
            .content_type("application/json")
            .body(json!({ "uri": uri, "visitor": visitor }).to_string());
    }
    let escaped = uri.replace('&', "&amp;").replace('<', "&lt;");
    poem::Response::builder()
        .content_type("text/html; charset=utf-8")
        .body(format!(
            "<!doctype html><html><head><title>Origin</title><link rel=\"stylesheet\" href=\"/shop/app.css\"></head>\
             <body><h1 id=\"origin\">The shop</h1><p id=\"uri\">{escaped}</p><p id=\"visitor\">{visitor}</p></body></html>"
        ))
}

impl Origin {
    pub async fn start() -> Origin {
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app =
            poem::EndpointExt::data(poem::Route::new().at("/*path", origin_page), seen.clone());
        let std_listener = listener.into_std().unwrap();
        let task = tokio::spawn(async move {
            let acceptor = poem::listener::TcpAcceptor::from_std(std_listener).unwrap();
            let _ = poem::Server::new_with_acceptor(acceptor).run(app).await;
        });
        Origin { port, seen, task }
    }

    /// How many requests the origin answered so far.
    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// How many requests of `uri_prefix` the origin answered after the first `since`.
    pub fn answered(&self, since: usize, uri_prefix: &str) -> usize {
        self.seen.lock().unwrap()[since..]
            .iter()
            .filter(|s| s.uri.starts_with(uri_prefix))
            .count()
    }
}

/// A proxy started from a config of `deploy/proxies`, its addresses replaced by the test's.
pub struct Proxy {
    pub port: u16,
    pub name: &'static str,
    child: Child,
    _dir: TempDir,
}

struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn deploy(path: &str) -> String {
    let file = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("deploy/proxies")
        .join(path);
    std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()))
}

impl Proxy {
    /// nginx with `deploy/proxies/nginx/sluice-gate.conf`.
    pub async fn nginx(sluice: u16, origin: u16) -> Proxy {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("sluice-nginx-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(dir.join("tmp")).unwrap();
        let site = deploy("nginx/sluice-gate.conf")
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{sluice}"))
            .replace("127.0.0.1:3000", &format!("127.0.0.1:{origin}"))
            .replace("listen 80;", &format!("listen 127.0.0.1:{port};"));
        std::fs::write(dir.join("site.conf"), site).unwrap();
        let d = dir.display();
        let main = format!(
            "daemon off;\npid {d}/nginx.pid;\nerror_log {d}/error.log;\nworker_processes 1;\n\
             events {{ worker_connections 4096; }}\n\
             http {{\n  access_log off;\n  client_body_temp_path {d}/tmp;\n  proxy_temp_path {d}/tmp;\n  \
             fastcgi_temp_path {d}/tmp;\n  uwsgi_temp_path {d}/tmp;\n  scgi_temp_path {d}/tmp;\n  \
             include {d}/site.conf;\n}}\n"
        );
        std::fs::write(dir.join("nginx.conf"), main).unwrap();
        let child = Command::new("/usr/sbin/nginx")
            .arg("-c")
            .arg(dir.join("nginx.conf"))
            .arg("-p")
            .arg(&dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("nginx is installed (scripts/tools)");
        Self::ready(Proxy {
            port,
            name: "nginx",
            child,
            _dir: TempDir(dir),
        })
        .await
    }

    /// Caddy with `deploy/proxies/caddy/Caddyfile`.
    pub async fn caddy(sluice: u16, origin: u16) -> Proxy {
        let port = free_port();
        let dir =
            std::env::temp_dir().join(format!("sluice-caddy-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        let site = deploy("caddy/Caddyfile")
            .replace("127.0.0.1:8080", &format!("127.0.0.1:{sluice}"))
            .replace("127.0.0.1:3000", &format!("127.0.0.1:{origin}"))
            .replace("http://:80", &format!("http://127.0.0.1:{port}"));
        std::fs::write(dir.join("Caddyfile"), site).unwrap();
        let child = Command::new("caddy")
            .arg("run")
            .arg("--config")
            .arg(dir.join("Caddyfile"))
            .arg("--adapter")
            .arg("caddyfile")
            .env("HOME", &dir)
            .env("XDG_DATA_HOME", &dir)
            .env("XDG_CONFIG_HOME", &dir)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("caddy is installed (scripts/tools)");
        Self::ready(Proxy {
            port,
            name: "caddy",
            child,
            _dir: TempDir(dir),
        })
        .await
    }

    async fn ready(mut proxy: Proxy) -> Proxy {
        for _ in 0..400 {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                panic!("{} exited at start: {status}", proxy.name);
            }
            if tokio::net::TcpStream::connect(("127.0.0.1", proxy.port))
                .await
                .is_ok()
            {
                return proxy;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("{} did not start", proxy.name);
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }
}

/// A sale for a gate's line (`max_active` sessions at once) and a gate guarding `/shop/` with
/// it; the gate's JSON.
pub async fn gate(t: &TestApp, max_active: u32, extra: Value) -> Value {
    let sale = t
        .create_sale(json!({ "quantity": 1, "max_active": max_active, "rate_per_minute": 60000 }))
        .await;
    let mut body = json!({
        "name": "shop",
        "sale_id": sale,
        "hosts": ["127.0.0.1"],
        "paths": ["/shop/"],
        "static_extensions": ["css", "js"],
    });
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    let resp = t
        .admin(Method::POST, "/v1/gates")
        .json(&body)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201, "{:?}", resp.text().await);
    resp.json().await.unwrap()
}

/// A browser without JavaScript: a cookie jar, redirects not followed.
pub struct Visitor {
    pub http: reqwest::Client,
    pub cookies: BTreeMap<String, String>,
}

/// What a request gave back: status, headers, body.
pub struct Got {
    pub status: u16,
    pub headers: reqwest::header::HeaderMap,
    pub body: String,
}

impl Got {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or(Value::Null)
    }
}

impl Default for Visitor {
    fn default() -> Self {
        Visitor {
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: BTreeMap::new(),
        }
    }
}

impl Visitor {
    pub async fn send(
        &mut self,
        method: Method,
        url: &str,
        accept: &str,
        body: Option<Value>,
        bearer: Option<&str>,
    ) -> Got {
        let mut req = self.http.request(method, url).header("Accept", accept);
        if !self.cookies.is_empty() {
            let jar: Vec<String> = self
                .cookies
                .iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            req = req.header("Cookie", jar.join("; "));
        }
        if let Some(token) = bearer {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let headers = resp.headers().clone();
        for c in headers.get_all("set-cookie") {
            let c = c.to_str().unwrap();
            let (pair, _) = c.split_once(';').unwrap_or((c, ""));
            let (k, v) = pair.split_once('=').unwrap();
            self.cookies.insert(k.to_owned(), v.to_owned());
        }
        let body = resp.text().await.unwrap_or_default();
        Got {
            status,
            headers,
            body,
        }
    }

    /// A script's call of the site's API (`Accept: application/json`).
    pub async fn xhr(&mut self, url: &str) -> Got {
        self.send(Method::GET, url, "application/json", None, None)
            .await
    }

    /// A browser's page request.
    pub async fn page(&mut self, url: &str) -> Got {
        self.send(
            Method::GET,
            url,
            "text/html,application/xhtml+xml",
            None,
            None,
        )
        .await
    }

    /// Through the waiting room to the page `path`: sent to the line, in it, admitted, back.
    /// The join's attempt, and the last page answer.
    pub async fn through(&mut self, proxy: &Proxy, path: &str) -> (String, Got) {
        let sent = self.page(&proxy.url(path)).await;
        assert_eq!(sent.status, 302, "sent to the line: {}", sent.body);
        let location = sent.header("location").unwrap().to_owned();
        let (attempt, got) = self.wait_and_return(proxy, &location).await;
        (attempt, got)
    }

    /// From the waiting page's address: enter, join, wait for the turn, trade it, go back.
    pub async fn wait_and_return(&mut self, proxy: &Proxy, waiting_page: &str) -> (String, Got) {
        let (gate, return_to) = waiting_page_params(waiting_page);
        let (token, sale) = self.enter(proxy, &gate).await;
        let attempt = self.join(proxy, &sale, &token).await;
        let admission = self.admitted(proxy, &attempt, &token).await;
        let traded = self
            .trade(proxy, &gate, &attempt, &admission, &return_to)
            .await;
        assert_eq!(traded.status, 200, "{}", traded.body);
        let location = traded.json()["location"].as_str().unwrap().to_owned();
        (attempt, self.page(&location).await)
    }

    pub async fn enter(&mut self, proxy: &Proxy, gate: &str) -> (String, String) {
        let got = self
            .send(
                Method::POST,
                &proxy.url(&format!("/.sluice/v1/gates/{gate}/visitors")),
                "application/json",
                Some(json!({})),
                None,
            )
            .await;
        assert_eq!(got.status, 200, "{}", got.body);
        let v = got.json();
        (
            v["token"].as_str().unwrap().to_owned(),
            v["sale_id"].as_str().unwrap().to_owned(),
        )
    }

    pub async fn join(&mut self, proxy: &Proxy, sale: &str, token: &str) -> String {
        let got = self
            .send(
                Method::POST,
                &proxy.url(&format!("/.sluice/v1/sales/{sale}/attempts")),
                "application/json",
                None,
                Some(token),
            )
            .await;
        assert!(
            matches!(got.status, 200..=202),
            "{}: {}",
            got.status,
            got.body
        );
        got.json()["attempt_id"].as_str().unwrap().to_owned()
    }

    /// The attempt's status, as the waiting page asks it.
    pub async fn status(&mut self, proxy: &Proxy, attempt: &str, token: &str) -> Value {
        let url = proxy.url(&format!("/.sluice/v1/attempts/{attempt}"));
        let got = self
            .send(Method::GET, &url, "application/json", None, Some(token))
            .await;
        got.json()
    }

    /// Polls until the attempt is admitted; its admission token.
    pub async fn admitted(&mut self, proxy: &Proxy, attempt: &str, token: &str) -> String {
        for _ in 0..3000 {
            let v = self.status(proxy, attempt, token).await;
            if v["state"] == "ADMITTED" {
                return v["admission_token"].as_str().unwrap().to_owned();
            }
            assert_eq!(v["state"], "QUEUED", "{v}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("not admitted in time");
    }

    pub async fn trade(
        &mut self,
        proxy: &Proxy,
        gate: &str,
        attempt: &str,
        admission: &str,
        return_to: &str,
    ) -> Got {
        self.send(
            Method::POST,
            &proxy.url(&format!("/.sluice/v1/gates/{gate}/session")),
            "application/json",
            Some(json!({ "attempt_id": attempt, "admission_token": admission, "return_to": return_to })),
            None,
        )
        .await
    }
}

/// The gate and the `return_to` of a waiting page's address.
pub fn waiting_page_params(url: &str) -> (String, String) {
    let query = url.split_once('?').unwrap().1;
    let mut gate = String::new();
    let mut return_to = String::new();
    for pair in query.split('&') {
        let (k, v) = pair.split_once('=').unwrap();
        match k {
            "gate" => gate = v.to_owned(),
            "return_to" => return_to = v.to_owned(),
            _ => {}
        }
    }
    (gate, return_to)
}

/// The origin ends a visitor's session (its one authenticated call).
pub async fn end_session(t: &TestApp, gate: &str, visitor: &str) -> u16 {
    t.admin(
        Method::POST,
        &format!("/v1/gates/{gate}/sessions/{visitor}/end"),
    )
    .send()
    .await
    .unwrap()
    .status()
    .as_u16()
}

/// A value as the gate signs it, signed by the test itself from the shared seed and the format
/// `src/auth/gate_cookies.rs` documents (not with sluice's code). `<body>.<mac>`: HMAC-SHA-256 under HMAC("sluice gate", seed), over kind|gate|body.
fn signed(seed_hex: &str, kind: &str, gate: &str, body: &str) -> String {
    let seed = hex::decode(seed_hex).unwrap();
    let derived = hmac::sign(&hmac::Key::new(hmac::HMAC_SHA256, b"sluice gate"), &seed);
    let key = hmac::Key::new(hmac::HMAC_SHA256, derived.as_ref());
    let gate = uuid::Uuid::parse_str(gate).unwrap();
    let mut message = Vec::new();
    message.extend_from_slice(kind.as_bytes());
    message.push(b'|');
    message.extend_from_slice(gate.as_bytes());
    message.push(b'|');
    message.extend_from_slice(body.as_bytes());
    let mac = hmac::sign(&key, &message);
    format!("{body}.{}", URL_SAFE_NO_PAD.encode(mac.as_ref()))
}

/// The admission key's seed `t` runs with, from which the gate's key is derived.
pub fn seed_of(t: &TestApp) -> String {
    let seed = t.app.config.auth.admission_key_seed_hex.as_ref().unwrap();
    seed.expose().to_owned()
}

/// The port sluice serves on.
pub fn port_of(t: &TestApp) -> u16 {
    t.base.rsplit(':').next().unwrap().parse().unwrap()
}
