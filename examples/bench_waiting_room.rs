//! The client side of `scripts/bench`'s waiting-room figures (wrk drives the HTTP load):
//!
//! - `tokens <hs256 secret> <count> <file>`: user tokens, one per line (users `bench-<i>`);
//! - `join-all <base url> <sale> <tokens file> <pairs file>`: joins every user (64 at a time)
//!   and writes `<attempt> <token>` lines for the status benchmark;
//! - `sse <base url> <pairs file> <streams> <server pid> [h2]`: opens that many status streams
//!   (with `h2`, all over one HTTP/2 connection),
//!   waits for an event on each, and prints the server's RSS per stream;
//! - `admission-tokens <base url> <pairs file> <holds file>`: waits until each attempt is
//!   admitted and writes `<attempt> <token> <admission token>` lines for the hold benchmark.

use std::io::Write;
use std::time::{Duration, Instant};

use futures_util::stream::{self, StreamExt};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("tokens") => tokens(&args[2], args[3].parse()?, &args[4]),
        Some("join-all") => join_all(&args[2], &args[3], &args[4], &args[5]).await,
        Some("sse") => {
            let h2 = args.get(6).is_some_and(|a| a == "h2");
            sse(&args[2], &args[3], args[4].parse()?, args[5].parse()?, h2).await
        }
        Some("admission-tokens") => admission_tokens(&args[2], &args[3], &args[4]).await,
        _ => anyhow::bail!("usage: tokens | join-all | sse (see the file's doc)"),
    }
}

fn tokens(secret: &str, count: usize, file: &str) -> anyhow::Result<()> {
    let mut auth = sluice::config::Config::default().auth;
    auth.user_jwt_hs256_secret = Some(secret.to_owned());
    let users = sluice::auth::UserTokens::from_config(&auth)?;
    let mut out = std::io::BufWriter::new(std::fs::File::create(file)?);
    for i in 0..count {
        let user = sluice::domain::UserId::parse(&format!("bench-{i}"))?;
        writeln!(out, "{}", users.mint(&user, 24 * 3600)?)?;
    }
    Ok(())
}

async fn join_all(base: &str, sale: &str, tokens: &str, pairs: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let tokens: Vec<String> = std::fs::read_to_string(tokens)?
        .lines()
        .map(str::to_owned)
        .collect();
    let joined: Vec<(String, String)> = stream::iter(tokens)
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
                anyhow::Ok((attempt, token))
            }
        })
        .buffer_unordered(64)
        .filter_map(|r| async move { r.ok().filter(|(a, _)| !a.is_empty()) })
        .collect()
        .await;
    let mut out = std::io::BufWriter::new(std::fs::File::create(pairs)?);
    for (attempt, token) in &joined {
        writeln!(out, "{attempt} {token}")?;
    }
    eprintln!("joined {}", joined.len());
    Ok(())
}

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
    let pairs: Vec<(String, String)> = std::fs::read_to_string(pairs)?
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(a, t)| (a.to_owned(), t.to_owned())))
        .take(streams)
        .collect();
    anyhow::ensure!(
        pairs.len() == streams,
        "only {} attempts to stream",
        pairs.len()
    );
    let before = rss_kib(pid);
    let http = if h2 {
        reqwest::Client::builder().http2_prior_knowledge().build()?
    } else {
        reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()?
    };
    let started = Instant::now();
    // Open every stream, read its first event, keep it open.
    let opened: Vec<_> = stream::iter(pairs)
        .map(|(attempt, token)| {
            let http = http.clone();
            async move {
                let mut resp = http
                    .get(format!("{base}/v1/attempts/{attempt}/events"))
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
    tokio::time::sleep(Duration::from_secs(2)).await;
    let during = rss_kib(pid);
    // Status pushes keep flowing: a second event on a sample of streams.
    let mut sample = open.into_iter().take(200).collect::<Vec<_>>();
    let mut pushed = 0;
    for resp in sample.iter_mut() {
        if let Ok(Ok(Some(chunk))) =
            tokio::time::timeout(Duration::from_secs(20), resp.chunk()).await
        {
            if chunk.windows(5).any(|w| w == b"data:") {
                pushed += 1;
            }
        }
    }
    let per_stream = (during.saturating_sub(before)) as f64 / streams as f64;
    println!(
        "streams opened: {streams} in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    println!("server RSS: {before} KiB before, {during} KiB with the streams open");
    println!("RSS per stream: {per_stream:.1} KiB (goal <= 10 KiB)");
    println!(
        "status pushes still flowing: {pushed} of {} sampled streams got another event",
        sample.len()
    );
    Ok(())
}

async fn admission_tokens(base: &str, pairs: &str, holds: &str) -> anyhow::Result<()> {
    let http = reqwest::Client::new();
    let pairs: Vec<(String, String)> = std::fs::read_to_string(pairs)?
        .lines()
        .filter_map(|l| l.split_once(' ').map(|(a, t)| (a.to_owned(), t.to_owned())))
        .collect();
    let deadline = Instant::now() + Duration::from_secs(120);
    let admitted: Vec<String> = stream::iter(pairs)
        .map(|(attempt, token)| {
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
