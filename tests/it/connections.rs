//! The HTTP server itself (src/server/http.rs): one port for HTTP/1.1 and HTTP/2 with prior
//! knowledge, the protocol told by a peek at the first bytes; many status streams over one
//! HTTP/2 connection, as an HTTP/2 proxy carries them; the idle timeout; a burst of new
//! connections queued by the kernel until the process accepts them; an address in use.

use std::time::Duration;

use futures_util::future::join_all;
use reqwest::{Method, Version};
use serde_json::{json, Value};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::helpers::{fresh_database, test_config, SluiceProcess, TestApp};

/// More than hyper's default limit of 200 concurrent streams on one HTTP/2 connection.
const STREAMS: usize = 250;

#[tokio::test]
async fn one_port_speaks_http1_and_http2_and_carries_many_streams_on_one_connection() {
    let t = TestApp::spawn().await;
    let http1 = reqwest::Client::builder().http1_only().build().unwrap();
    let live = http1.get(t.url("/health/live")).send().await.unwrap();
    assert_eq!(
        (live.status().as_u16(), live.version()),
        (200, Version::HTTP_11)
    );

    let sale = t.create_sale(json!({})).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    // Everything from here on over one HTTP/2 connection: joins (a POST) and status streams.
    let http2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let mut attempts = Vec::new();
    for i in 0..STREAMS {
        let user = format!("h2-{i}");
        let joined = http2
            .post(t.url(&format!("/v1/sales/{sale}/attempts")))
            .bearer_auth(t.token(&user))
            .send()
            .await
            .unwrap();
        assert_eq!(
            (joined.status().as_u16(), joined.version()),
            (202, Version::HTTP_2)
        );
        let joined: Value = joined.json().await.unwrap();
        attempts.push((user, joined["attempt_id"].as_str().unwrap().to_owned()));
    }
    // All streams open at once; each must get its first event while all the others stay open
    // (each is kept, not dropped, until every one has been heard from).
    let opened = join_all(attempts.iter().map(|(user, attempt)| {
        let request = http2
            .get(t.url(&format!("/v1/attempts/{attempt}/events")))
            .bearer_auth(t.token(user));
        tokio::time::timeout(Duration::from_secs(20), async move {
            let mut stream = request.send().await.ok()?;
            let version = stream.version();
            let first = stream.chunk().await.ok()??;
            let first = format!("{version:?} {}", String::from_utf8_lossy(&first));
            Some((stream, first))
        })
    }))
    .await;
    let firsts: Vec<&str> = opened
        .iter()
        .map(|o| match o {
            Ok(Some((_, first))) => first.as_str(),
            Ok(None) => "(the stream failed)",
            Err(_) => "(nothing in 20 s)",
        })
        .collect();
    let with_status = firsts
        .iter()
        .filter(|first| first.starts_with("HTTP/2.0 ") && first.contains("\"QUEUED\""))
        .count();
    assert_eq!(
        with_status,
        STREAMS,
        "first events over HTTP/2: {:?}",
        &firsts[firsts.len() - 3..]
    );
    t.stop().await;
}

/// With `http.idle_timeout_secs` at 1: a connection that sends nothing, one that sends half a
/// request head, and one left idle after its answer are each closed; a status stream, whose
/// events come seconds apart, is not.
/// A second sluice on an address in use says which address, and where it is configured.
#[tokio::test]
async fn an_address_in_use_is_named_in_the_start_up_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let mut config = test_config();
    config.queue.url = String::new();
    config.ledger.url = String::new();
    config.embedded.data_dir =
        std::env::temp_dir().join(format!("sluice-test-{}", uuid::Uuid::new_v4().simple()));
    config.http.listen = addr;
    let error = match sluice::server::start(config).await {
        Ok(_) => panic!("sluice started on {addr}, which is in use"),
        Err(e) => e.to_string(),
    };
    assert!(
        error.contains(&format!("listening on {addr} (http.listen)")) && error.contains("in use"),
        "{error}"
    );
}

#[tokio::test]
async fn idle_and_half_sent_connections_are_closed_and_status_streams_are_not() {
    let t = TestApp::spawn_with(|c| c.http.idle_timeout_secs = sluice::config::Seconds(1)).await;
    let addr = t.base.trim_start_matches("http://").to_owned();
    let silent = TcpStream::connect(&addr).await.unwrap();
    let mut half = TcpStream::connect(&addr).await.unwrap();
    half.write_all(b"GET /health/live HTTP/1.1\r\nHost: sluice\r\n")
        .await
        .unwrap();
    let mut idle = TcpStream::connect(&addr).await.unwrap();
    idle.write_all(b"GET /health/live HTTP/1.1\r\nHost: sluice\r\n\r\n")
        .await
        .unwrap();
    let (silent, half, idle) =
        tokio::join!(until_closed(silent), until_closed(half), until_closed(idle));
    assert_eq!(silent.as_deref(), Ok(""), "the silent connection");
    assert!(
        half.as_ref().is_ok_and(|said| !said.contains(" 200 ")),
        "the half-sent request: {half:?}"
    );
    assert!(
        idle.as_ref()
            .is_ok_and(|said| said.starts_with("HTTP/1.1 200 ") && said.ends_with("ok")),
        "the idle connection, after its answer: {idle:?}"
    );

    // A paused sale: nothing changes, so after its first event the stream carries only its
    // keep-alive comment (every 15 s), past the idle timeout.
    let sale = t.create_sale(json!({ "rate_per_minute": 1 })).await;
    t.admin_json(Method::POST, &format!("/v1/sales/{sale}/pause"))
        .await;
    let joined = t.join(&sale, "streamer").await;
    let attempt = joined["attempt_id"].as_str().unwrap();
    let mut stream = t
        .as_user(
            Method::GET,
            &format!("/v1/attempts/{attempt}/events"),
            "streamer",
        )
        .send()
        .await
        .unwrap();
    for (event, says) in [("first event", "\"QUEUED\""), ("keep-alive", ":\n\n")] {
        let chunk = tokio::time::timeout(Duration::from_secs(20), stream.chunk())
            .await
            .unwrap_or_else(|_| panic!("no {event}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended before its {event}"));
        assert!(String::from_utf8_lossy(&chunk).contains(says), "{event}");
    }
    t.stop().await;
}

/// With `http.idle_timeout_secs` at 1: an HTTP/2 connection whose peer sends its preface and
/// settings and then nothing, answering no ping, is closed; one whose peer answers pings (a
/// real HTTP/2 client, quiet between its requests) stays and is served again.
#[tokio::test]
async fn a_quiet_http2_peer_is_pinged_and_closed_only_if_it_does_not_answer() {
    let t = TestApp::spawn_with(|c| c.http.idle_timeout_secs = sluice::config::Seconds(1)).await;
    let addr = t.base.trim_start_matches("http://").to_owned();
    let mut mute = TcpStream::connect(&addr).await.unwrap();
    // The preface, then an empty SETTINGS frame (length 0, type 4, no flags, stream 0).
    mute.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let said = bytes_until_closed(mute)
        .await
        .expect("the mute peer is closed");
    // Among what the server sent: a PING frame (type 6) and a GOAWAY (type 7).
    let frame_types = frames(&said);
    assert!(frame_types.contains(&6), "pinged: {frame_types:?}");
    assert!(frame_types.contains(&7), "told to go away: {frame_types:?}");

    let h2 = reqwest::Client::builder()
        .http2_prior_knowledge()
        .build()
        .unwrap();
    let live = t.url("/health/live");
    assert_eq!(h2.get(&live).send().await.unwrap().status(), 200);
    tokio::time::sleep(Duration::from_secs(4)).await; // pinged and answered, more than once
    let again = h2.get(&live).send().await.unwrap();
    assert_eq!(
        (again.status().as_u16(), again.version()),
        (200, Version::HTTP_2)
    );
    t.stop().await;
}

/// The types of the HTTP/2 frames in `bytes` (the server's side of a connection).
fn frames(mut bytes: &[u8]) -> Vec<u8> {
    let mut types = Vec::new();
    while bytes.len() >= 9 {
        let length = u32::from_be_bytes([0, bytes[0], bytes[1], bytes[2]]) as usize;
        types.push(bytes[3]);
        bytes = &bytes[(9 + length).min(bytes.len())..];
    }
    types
}

/// Everything the server sends until it closes the connection, or `Err` if it is still open
/// after 10 s.
/// A sale's opening brings new connections in a burst. While the process is stopped (SIGSTOP),
/// 600 clients connect at once (fewer where the kernel allows fewer): the kernel completes and queues every one (past the listen
/// queue's length it drops their SYNs, and each of those clients waits a second or more to try
/// again); the process goes on (SIGCONT) and answers every request.
#[tokio::test]
async fn a_burst_of_new_connections_waits_in_the_listen_queue() {
    // The kernel caps the queue at net.core.somaxconn (4096 on current kernels, 128 on old).
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(128);
    let burst = somaxconn.min(600);
    let mut config = test_config();
    config.ledger.url = fresh_database().await;
    let sluice = SluiceProcess::start(config, "").await;
    let listen = sluice.config.http.listen;
    sluice.signal("STOP");
    let connects = join_all(
        (0..burst)
            .map(|_| tokio::time::timeout(Duration::from_millis(800), TcpStream::connect(listen))),
    )
    .await;
    let connected: Vec<TcpStream> = connects.into_iter().flatten().flatten().collect();
    let queued = connected.len();
    sluice.signal("CONT");
    let answers = join_all(connected.into_iter().map(|mut connection| async move {
        connection
            .write_all(b"GET /health/live HTTP/1.1\r\nhost: sluice\r\nconnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), connection.read_to_end(&mut answer))
            .await;
        answer.starts_with(b"HTTP/1.1 200")
    }))
    .await;
    assert_eq!(
        queued, burst,
        "connections queued while the process was stopped"
    );
    assert!(
        answers.iter().all(|ok| *ok),
        "every queued connection answered"
    );
}

async fn until_closed(connection: TcpStream) -> Result<String, &'static str> {
    let said = bytes_until_closed(connection).await?;
    Ok(String::from_utf8_lossy(&said).into_owned())
}

/// The same, as the bytes sent.
async fn bytes_until_closed(mut connection: TcpStream) -> Result<Vec<u8>, &'static str> {
    let mut said = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), connection.read_to_end(&mut said))
        .await
        .map_err(|_| "still open after 10 s")?
        .map_err(|_| "read failed")?;
    Ok(said)
}
