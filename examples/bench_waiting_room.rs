//! The client side of `scripts/bench`'s waiting-room figures (wrk drives the HTTP load):
//!
//! - `tokens <hs256 secret> <count> <file>`: user tokens, one per line (users `bench-<i>`);
//! - `tokens-rs256 <RSA private key PEM file> <kid> <count> <file>`: the same, signed RS256 as
//!   an identity provider signs them (users `jwks-<i>`);
//! - `join-all <base url> <sale> <tokens file> <pairs file>`: joins every user (64 at a time)
//!   and writes `<attempt> <token> <queue ticket>` lines for the status benchmark;
//! - `sse <base url> <pairs file> <streams> <server pid> [h2]`: opens that many status streams
//!   (with `h2`, over HTTP/2, 10,000 a connection), waits for an event on each, and prints the
//!   server's RSS per stream, the queue-store calls made while they are open, and whether
//!   pushes still flow once the head of the line leaves;
//! - `admission-tokens <base url> <pairs file> <holds file>`: waits until each attempt is
//!   admitted and writes `<attempt> <token> <admission token>` lines for the hold benchmark;
//! - `opening <base urls, comma-separated> <sale> <tokens file> <users> <in flight>`: an
//!   opening's burst: the first `<users>` users of the file each join once, spread over the
//!   replicas in turn, `<in flight>` at a time, each answer of 503 retried as sluice's page
//!   retries it (after `Retry-After × 2^n` plus up to as much again at random, three tries at
//!   most); prints `<users> <joined> <seconds> <joins a second> <p50 ms> <p99 ms> <max ms>
//!   <503 answers> <users who gave up> <other answers, neither 2xx nor 503>`;
//! - `claims <base url> <sale> <tokens file> <users> <in flight>`: a coupon drop: the first
//!   `<users>` users of the file each claim once (an instant sale's join), `<in flight>` at a
//!   time; a user told to wait polls until CONFIRMED or sold out; prints `<users> <confirmed>
//!   <confirmed at once> <sold out> <waited> <other answers> <seconds to the last
//!   confirmation> <claims a second until then> <p50 ms> <p99 ms>` (latencies of the claims'
//!   own answers);
//! - `holds <base url> <holds file> <in flight> [checkout]`: each line of the file
//!   (`admission-tokens`' output) holds one unit once, `<in flight>` at a time, and with
//!   `checkout` checks out right after (a free sale's claim as hold + checkout); prints `<holds>
//!   <done> <seconds> <a second> <p50 ms> <p99 ms>` (a user's whole way, both calls);
//! - `seat-streams <base url> <sale> <streams> <admin key> <seats file>`: opens that many
//!   streams of the sale's seat map, withdraws the seats of the file one every 200 ms (50:
//!   10 s) while they are open, then puts them back; prints `<streams open> <store calls for
//!   the map meanwhile> <streams told of every withdrawal> <seconds to open them> <seconds the
//!   withdrawals took>`.

use std::io::Write;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("tokens") => tokens(&args[2], args[3].parse()?, &args[4]),
        Some("tokens-rs256") => tokens_rs256(&args[2], &args[3], args[4].parse()?, &args[5]),
        Some("join-all") => join_all(&args[2], &args[3], &args[4], &args[5]).await,
        Some("opening") => {
            opening(
                &args[2],
                &args[3],
                &args[4],
                args[5].parse()?,
                args[6].parse()?,
            )
            .await
        }
        Some("sse") => {
            let h2 = args.get(6).is_some_and(|a| a == "h2");
            sse(&args[2], &args[3], args[4].parse()?, args[5].parse()?, h2).await
        }
        Some("admission-tokens") => admission_tokens(&args[2], &args[3], &args[4]).await,
        Some("seat-streams") => {
            seat_streams(&args[2], &args[3], args[4].parse()?, &args[5], &args[6]).await
        }
        Some("holds") => {
            let checkout = args.get(5).is_some_and(|a| a == "checkout");
            holds(&args[2], &args[3], args[4].parse()?, checkout).await
        }
        Some("claims") => {
            claims(
                &args[2],
                &args[3],
                &args[4],
                args[5].parse()?,
                args[6].parse()?,
            )
            .await
        }
        _ => anyhow::bail!(
            "usage: tokens | join-all | opening | sse | seat-streams | claims (see the file's doc)"
        ),
    }
}

fn tokens(secret: &str, count: usize, file: &str) -> anyhow::Result<()> {
    let mut auth = sluice::config::Config::default().auth;
    auth.user_jwt_hs256_secret = Some(secret.into());
    let users = sluice::auth::UserTokens::from_config(&auth)?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(file)?);
    for i in 0..count {
        let user = sluice::domain::UserId::parse(&format!("bench-{i}"))?;
        writeln!(out, "{}", users.mint(&user, 24 * 3600)?)?;
    }
    Ok(())
}

fn tokens_rs256(pem: &str, kid: &str, count: usize, file: &str) -> anyhow::Result<()> {
    use jsonwebtoken::{Algorithm, EncodingKey, Header};
    let key = EncodingKey::from_rsa_pem(&std::fs::read(pem)?)?;
    let mut header = Header::new(Algorithm::RS256);
    header.kid = Some(kid.to_owned());
    let exp = chrono::Utc::now().timestamp() + 24 * 3600;
    let mut out = std::io::BufWriter::new(std::fs::File::create(file)?);
    for i in 0..count {
        let claims = serde_json::json!({ "sub": format!("jwks-{i}"), "exp": exp });
        writeln!(out, "{}", jsonwebtoken::encode(&header, &claims, &key)?)?;
    }
    Ok(())
}

async fn join_all(base: &str, sale: &str, tokens: &str, pairs: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let tokens: Vec<String> = std::fs::read_to_string(tokens)?
        .lines()
        .map(str::to_owned)
        .collect();
    let joined: Vec<(String, String, String)> = stream::iter(tokens)
        .map(|token| {
            let http = http.clone();
            async move {
                let resp: serde_json::Value = http
                    .post(format!("{base}/v1/sales/{sale}/attempts"))
                    .bearer_auth(&token)
                    .send()
                    .await?
                    .json()
                    .await?;
                let attempt = resp["attempt_id"].as_str().unwrap_or_default().to_owned();
                let ticket = resp["queue_ticket"].as_str().unwrap_or("-").to_owned();
                anyhow::Ok((attempt, token, ticket))
            }
        })
        .buffer_unordered(64)
        .filter_map(|r| async move { r.ok().filter(|(a, _, _)| !a.is_empty()) })
        .collect()
        .await;
    let mut out = std::io::BufWriter::new(std::fs::File::create(pairs)?);
    for (attempt, token, ticket) in &joined {
        writeln!(out, "{attempt} {token} {ticket}")?;
    }
    eprintln!("joined {}", joined.len());
    Ok(())
}

/// What became of one user's join in the opening: the latency of each answer (µs), the 503s
/// among them, and whether the user joined in the end (or gave up after three tries).
struct Opened {
    latencies_us: Vec<u64>,
    unavailable: u32,
    joined: bool,
    other: u32,
}

/// The first `users` tokens of the file (it must have that many).
fn first_tokens(file: &str, users: usize) -> anyhow::Result<Vec<String>> {
    let tokens: Vec<String> = std::fs::read_to_string(file)?
        .lines()
        .take(users)
        .map(str::to_owned)
        .collect();
    anyhow::ensure!(
        tokens.len() == users,
        "the tokens file has {} users",
        tokens.len()
    );
    Ok(tokens)
}

/// An opening's burst over the replicas `bases` (see the file's doc).
async fn opening(
    bases: &str,
    sale: &str,
    tokens: &str,
    users: usize,
    in_flight: usize,
) -> anyhow::Result<()> {
    use rand::Rng;
    let bases: Vec<String> = bases.split(',').map(str::to_owned).collect();
    let tokens = first_tokens(tokens, users)?;
    let http = reqwest::Client::new();
    let started = Instant::now();
    let outcomes: Vec<Opened> = stream::iter(tokens.into_iter().enumerate())
        .map(|(i, token)| {
            let http = http.clone();
            let url = format!("{}/v1/sales/{sale}/attempts", bases[i % bases.len()]);
            async move {
                let mut opened = Opened {
                    latencies_us: Vec::new(),
                    unavailable: 0,
                    joined: false,
                    other: 0,
                };
                for attempt in 0..=3u32 {
                    let sent = Instant::now();
                    let answer = http.post(&url).bearer_auth(&token).send().await;
                    opened.latencies_us.push(sent.elapsed().as_micros() as u64);
                    let Ok(answer) = answer else {
                        opened.other += 1;
                        break;
                    };
                    if answer.status().is_success() {
                        opened.joined = true;
                        break;
                    }
                    if answer.status() != reqwest::StatusCode::SERVICE_UNAVAILABLE {
                        opened.other += 1;
                        break;
                    }
                    opened.unavailable += 1;
                    if attempt == 3 {
                        break;
                    }
                    let after: f64 = answer
                        .headers()
                        .get("retry-after")
                        .and_then(|v| v.to_str().ok()?.parse().ok())
                        .unwrap_or(1.0);
                    let wait = after * f64::from(1u32 << attempt);
                    let jitter = rand::thread_rng().gen_range(0.0..=wait);
                    tokio::time::sleep(Duration::from_secs_f64(wait + jitter)).await;
                }
                opened
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    let secs = started.elapsed().as_secs_f64();
    let mut latencies: Vec<u64> = outcomes
        .iter()
        .flat_map(|o| o.latencies_us.iter().copied())
        .collect();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    let joined = outcomes.iter().filter(|o| o.joined).count();
    let unavailable: u32 = outcomes.iter().map(|o| o.unavailable).sum();
    let gave_up = outcomes
        .iter()
        .filter(|o| !o.joined && o.other == 0)
        .count();
    let other: u32 = outcomes.iter().map(|o| o.other).sum();
    println!(
        "{users} {joined} {secs:.1} {:.0} {:.2} {:.2} {:.2} {unavailable} {gave_up} {other}",
        joined as f64 / secs,
        at(0.5),
        at(0.99),
        at(1.0),
    );
    Ok(())
}

/// Each admitted user holds one unit once (and checks out): see the file's doc.
async fn holds(base: &str, holds: &str, in_flight: usize, checkout: bool) -> anyhow::Result<()> {
    let lines: Vec<(String, String, String)> = std::fs::read_to_string(holds)?
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            Some((
                parts.next()?.to_owned(),
                parts.next()?.to_owned(),
                parts.next()?.to_owned(),
            ))
        })
        .collect();
    let n = lines.len();
    let http = reqwest::Client::new();
    let started = Instant::now();
    let outcomes: Vec<(bool, u64)> = stream::iter(lines)
        .map(|(attempt, token, admission)| {
            let http = http.clone();
            async move {
                let sent = Instant::now();
                let held = http
                    .post(format!("{base}/v1/attempts/{attempt}/hold"))
                    .bearer_auth(&token)
                    .json(&serde_json::json!({ "admission_token": admission, "quantity": 1 }))
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                let done = held
                    && (!checkout
                        || http
                            .post(format!("{base}/v1/attempts/{attempt}/checkout"))
                            .bearer_auth(&token)
                            .send()
                            .await
                            .is_ok_and(|r| r.status().is_success()));
                (done, sent.elapsed().as_micros() as u64)
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    let secs = started.elapsed().as_secs_f64();
    let done = outcomes.iter().filter(|(ok, _)| *ok).count();
    let mut latencies: Vec<u64> = outcomes.iter().map(|(_, us)| *us).collect();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len().max(1) - 1) as f64 * q) as usize] as f64 / 1000.0;
    println!(
        "{n} {done} {secs:.2} {:.0} {:.2} {:.2}",
        done as f64 / secs,
        at(0.5),
        at(0.99)
    );
    Ok(())
}

/// What became of one user's claim: its answer's latency (µs) and kind, and when (since the
/// drop began) it was CONFIRMED, if it was.
struct Claim {
    latency_us: u64,
    kind: &'static str,
    confirmed_at: Option<Duration>,
}

/// A coupon drop (see the file's doc).
async fn claims(
    base: &str,
    sale: &str,
    tokens: &str,
    users: usize,
    in_flight: usize,
) -> anyhow::Result<()> {
    let tokens = first_tokens(tokens, users)?;
    let http = reqwest::Client::new();
    let started = Instant::now();
    let url = format!("{base}/v1/sales/{sale}/attempts");
    let outcomes: Vec<Claim> = stream::iter(tokens)
        .map(|token| {
            let (http, url) = (http.clone(), url.clone());
            async move {
                let sent = Instant::now();
                let answer = http.post(&url).bearer_auth(&token).send().await;
                let latency_us = sent.elapsed().as_micros() as u64;
                let (status, body) = match answer {
                    Ok(a) => (
                        a.status().as_u16(),
                        a.json::<serde_json::Value>().await.ok(),
                    ),
                    Err(_) => (0, None),
                };
                let body = body.unwrap_or_default();
                let kind = match (status, body["type"].as_str()) {
                    (201, _) => "confirmed",
                    (202, _) => "waited",
                    (409, Some("/problems/sold-out")) => "sold_out",
                    _ => "other",
                };
                let mut confirmed_at = (kind == "confirmed").then(|| started.elapsed());
                if kind == "waited" {
                    let attempt = body["attempt_id"].as_str().unwrap_or_default().to_owned();
                    confirmed_at = waited(&http, base, &attempt, &token, started).await;
                }
                Claim {
                    latency_us,
                    kind,
                    confirmed_at,
                }
            }
        })
        .buffer_unordered(in_flight)
        .collect()
        .await;
    let mut latencies: Vec<u64> = outcomes.iter().map(|c| c.latency_us).collect();
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() - 1) as f64 * q) as usize] as f64 / 1000.0;
    let count = |kind: &str| outcomes.iter().filter(|c| c.kind == kind).count();
    let confirmed = outcomes.iter().filter(|c| c.confirmed_at.is_some()).count();
    let last = outcomes
        .iter()
        .filter_map(|c| c.confirmed_at)
        .max()
        .unwrap_or_default()
        .as_secs_f64();
    println!(
        "{users} {confirmed} {} {} {} {} {last:.2} {:.0} {:.2} {:.2}",
        count("confirmed"),
        count("sold_out"),
        count("waited"),
        count("other"),
        confirmed as f64 / last.max(1e-9),
        at(0.5),
        at(0.99),
    );
    Ok(())
}

/// A user told to wait: polls until CONFIRMED (when, since the drop began) or sold out.
async fn waited(
    http: &reqwest::Client,
    base: &str,
    attempt: &str,
    token: &str,
    started: Instant,
) -> Option<Duration> {
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline {
        let status: serde_json::Value = http
            .get(format!("{base}/v1/attempts/{attempt}"))
            .bearer_auth(token)
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        if status["state"] == "CONFIRMED" {
            return Some(started.elapsed());
        }
        if status["sold_out"] == true || status["state"] == "EXPIRED" {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    None
}

/// The `(attempt, token, queue ticket)` lines `join-all` wrote.
fn read_pairs(file: &str) -> anyhow::Result<Vec<(String, String, String)>> {
    Ok(std::fs::read_to_string(file)?
        .lines()
        .filter_map(|l| {
            let mut parts = l.split_whitespace();
            let (attempt, token) = (parts.next()?, parts.next()?);
            let ticket = parts.next().unwrap_or("-");
            Some((attempt.to_owned(), token.to_owned(), ticket.to_owned()))
        })
        .collect())
}

/// sluice's count of queue-store calls made for status answers (lookups and line refreshes).
async fn status_store_calls(http: &reqwest::Client, base: &str) -> f64 {
    let Ok(resp) = http.get(format!("{base}/metrics")).send().await else {
        return 0.0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("sluice_status_store_calls_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// sluice's count of queue-store calls of `names` so far (its call-duration histogram).
async fn store_calls(http: &reqwest::Client, base: &str, names: &[&str]) -> f64 {
    let Ok(resp) = http.get(format!("{base}/metrics")).send().await else {
        return 0.0;
    };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("sluice_queue_call_duration_seconds_count{"))
        .filter(|l| names.iter().any(|n| l.contains(&format!("call=\"{n}\""))))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Opens `streams` seat-map streams of `sale`, changes its seats while they are open, and
/// prints the store calls made for the map meanwhile and the streams that saw every change.
async fn seat_streams(
    base: &str,
    sale: &str,
    streams: usize,
    admin: &str,
    seats: &str,
) -> anyhow::Result<()> {
    let seats: Vec<String> = std::fs::read_to_string(seats)?
        .lines()
        .map(str::to_owned)
        .collect();
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(0)
        .build()?;
    let started = Instant::now();
    let opened: Vec<_> = stream::iter(0..streams)
        .map(|_| {
            let http = http.clone();
            async move {
                let resp = http
                    .get(format!("{base}/v1/public/sales/{sale}/seat-map/events"))
                    .send()
                    .await
                    .map_err(|e| e.to_string())?;
                match resp.status().is_success() {
                    true => Ok(resp),
                    false => Err(format!("status {}", resp.status())),
                }
            }
        })
        .buffer_unordered(500)
        .collect()
        .await;
    let (open, refused): (Vec<_>, Vec<_>) = opened.into_iter().partition(Result::is_ok);
    if let Some(Err(first)) = refused.first() {
        eprintln!("{} streams not opened; the first: {first}", refused.len());
    }
    let open: Vec<_> = open.into_iter().flatten().collect();
    let opened_in = started.elapsed();
    // Every stream is read all along, as a page reads it, until told to stop; each counts the
    // seats it is told were withdrawn.
    let window = Duration::from_secs(10);
    let (stop, stopped) = tokio::sync::watch::channel(false);
    let readers: Vec<_> = open
        .into_iter()
        .map(|mut resp| {
            let mut stopped = stopped.clone();
            tokio::spawn(async move {
                let mut text = String::new();
                loop {
                    tokio::select! {
                        chunk = resp.chunk() => match chunk {
                            Ok(Some(chunk)) => text.push_str(&String::from_utf8_lossy(&chunk)),
                            _ => break,
                        },
                        _ = stopped.changed() => break,
                    }
                }
                text.matches("\"state\":\"off\"").count()
            })
        })
        .collect();
    let plain = reqwest::Client::new();
    let names = ["seat_changes", "holdings"];
    let before = store_calls(&plain, base, &names).await;
    let step = window / seats.len().max(1) as u32;
    let changing = Instant::now();
    for seat in &seats {
        let _ = plain
            .post(format!("{base}/v1/sales/{sale}/stock"))
            .header("X-Admin-Key", admin)
            .json(&serde_json::json!({ "withdraw_seats": [seat] }))
            .send()
            .await;
        tokio::time::sleep(step).await;
    }
    let calls = store_calls(&plain, base, &names).await - before;
    let changed_for = changing.elapsed();
    // The last withdrawal reaches every stream within a refresh or two.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let _ = stop.send(true);
    let mut told = Vec::new();
    for reader in readers {
        told.push(reader.await.unwrap_or(0));
    }
    let listening = told.len();
    let whole = told.iter().filter(|&&n| n >= seats.len()).count();
    eprintln!(
        "withdrawals told per stream: {} to {} of {}",
        told.iter().min().unwrap_or(&0),
        told.iter().max().unwrap_or(&0),
        seats.len()
    );
    let _ = plain
        .post(format!("{base}/v1/sales/{sale}/stock"))
        .header("X-Admin-Key", admin)
        .json(&serde_json::json!({ "add_seats": seats }))
        .send()
        .await;
    // Every replica's map shows them back before anything else is measured.
    tokio::time::sleep(Duration::from_secs(3)).await;
    println!(
        "{listening} {calls} {whole} {:.1} {:.1}",
        opened_in.as_secs_f64(),
        changed_for.as_secs_f64()
    );
    Ok(())
}

/// Status streams carried by one HTTP/2 connection in `sse ... h2`.
const H2_STREAMS_PER_CONNECTION: usize = 10_000;

fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Opens `streams` status streams and measures the server's RSS per stream; with `h2`, all
/// of them over one HTTP/2 connection (h2c, prior knowledge), as behind an HTTP/2 proxy.
async fn sse(base: &str, pairs: &str, streams: usize, pid: u32, h2: bool) -> anyhow::Result<()> {
    let mut pairs = read_pairs(pairs)?;
    pairs.truncate(streams);
    anyhow::ensure!(
        pairs.len() == streams,
        "only {} attempts to stream",
        pairs.len()
    );
    let before = rss_kib(pid);
    // Over HTTP/2, one connection per H2_STREAMS_PER_CONNECTION streams: the h2 client refuses
    // a connection on which many more small DATA frames arrive at once (its DoS guard, "too
    // many data frames"), as each stream's event is one when the line moves.
    let clients: Vec<reqwest::Client> = if h2 {
        (0..streams.div_ceil(H2_STREAMS_PER_CONNECTION))
            .map(|_| reqwest::Client::builder().http2_prior_knowledge().build())
            .collect::<Result<_, _>>()?
    } else {
        vec![reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()?]
    };
    let started = Instant::now();
    // The head of the line, which leaves once every stream is open: each stream behind it
    // gets a new position at the next refresh.
    let leaving: Vec<_> = pairs.iter().take(10).cloned().collect();
    // Open every stream, read its first event, keep it open.
    let opened: Vec<_> = stream::iter(pairs.into_iter().enumerate())
        .map(|(i, (attempt, token, ticket))| {
            let http = clients[i % clients.len()].clone();
            async move {
                let mut resp = http
                    .get(format!("{base}/v1/attempts/{attempt}/events"))
                    .query(&[("ticket", ticket)])
                    .bearer_auth(&token)
                    .send()
                    .await
                    .ok()?;
                let first = tokio::time::timeout(Duration::from_secs(60), resp.chunk())
                    .await
                    .ok()?
                    .ok()??;
                first.windows(5).any(|w| w == b"data:").then_some(resp)
            }
        })
        .buffer_unordered(500)
        .collect()
        .await;
    let open: Vec<_> = opened.into_iter().flatten().collect();
    let opened_in = started.elapsed();
    let plain = reqwest::Client::new();
    let calls_before = status_store_calls(&plain, base).await;
    let quiet = Duration::from_secs(10);
    tokio::time::sleep(quiet).await;
    let calls_quiet = status_store_calls(&plain, base).await - calls_before;
    let during = rss_kib(pid);
    for (attempt, token, _) in &leaving {
        let _ = plain
            .delete(format!("{base}/v1/attempts/{attempt}"))
            .bearer_auth(token)
            .send()
            .await;
    }
    // Status pushes keep flowing: every open stream (all read at once, as clients do, so none
    // holds the connection's flow-control window) gets a new event once the head has left.
    let listening = open.len();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let readers = open.into_iter().map(|mut resp| {
        tokio::spawn(async move {
            loop {
                match tokio::time::timeout_at(deadline, resp.chunk()).await {
                    Ok(Ok(Some(chunk))) => {
                        if chunk.windows(5).any(|w| w == b"data:") {
                            return true;
                        }
                    }
                    Ok(Ok(None)) | Ok(Err(_)) | Err(_) => return false,
                }
            }
        })
    });
    let mut pushed = 0;
    for reader in readers.collect::<Vec<_>>() {
        if reader.await.unwrap_or(false) {
            pushed += 1;
        }
    }
    let per_stream = (during.saturating_sub(before)) as f64 / streams as f64;
    println!(
        "streams opened: {streams} in {:.1} s",
        opened_in.as_secs_f64()
    );
    println!("server RSS: {before} KiB before, {during} KiB with the streams open");
    println!("RSS per stream: {per_stream:.2} KiB");
    println!(
        "queue-store calls for status while the streams were open for {} s: {calls_quiet}",
        quiet.as_secs()
    );
    println!(
        "status pushes still flowing: {pushed} of {listening} open streams got an event after the head of the line left (within 30 s)"
    );
    Ok(())
}

async fn admission_tokens(base: &str, pairs: &str, holds: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let pairs = read_pairs(pairs)?;
    let deadline = Instant::now() + Duration::from_secs(120);
    let admitted: Vec<String> = stream::iter(pairs)
        .map(|(attempt, token, _)| {
            let http = http.clone();
            async move {
                while Instant::now() < deadline {
                    let status: serde_json::Value = http
                        .get(format!("{base}/v1/attempts/{attempt}"))
                        .bearer_auth(&token)
                        .send()
                        .await
                        .ok()?
                        .json()
                        .await
                        .ok()?;
                    if let Some(admission) = status["admission_token"].as_str() {
                        return Some(format!("{attempt} {token} {admission}"));
                    }
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                None
            }
        })
        .buffer_unordered(64)
        .filter_map(|line| async move { line })
        .collect()
        .await;
    std::fs::write(holds, admitted.join("\n") + "\n")?;
    eprintln!("admitted {}", admitted.len());
    Ok(())
}
