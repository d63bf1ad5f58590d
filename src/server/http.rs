//! Serving the routes on a TCP listener: a task per connection, HTTP/1.1 or HTTP/2 (h2c with
//! prior knowledge, as from an HTTP/2 proxy) told apart by a *peek* at its first bytes, hyper
//! underneath, poem's endpoint answering.
//!
//! A waiting room holds a connection per waiting user (a status stream, or keep-alive between
//! polls), so what a connection costs is a figure of its own. poem's server tells the protocols
//! apart with hyper-util's "auto" connection, which *reads* the first 24 bytes and hands them to
//! hyper's HTTP/1.1 parser as a first, partial read; the rest of the request then made hyper
//! double that connection's read buffer to 16 KiB, for the connection's life. The auto
//! connection's future, sized for HTTP/2's state as well, also lived in every connection's task.
//! Peeking leaves the bytes in the socket, so hyper reads the whole request at once into its
//! first 8 KiB; an HTTP/2 connection's state is boxed; and a request's future is boxed per
//! request rather than held, empty, for the connection's life. (docs/benchmarks.md has the
//! figures: memory per idle connection and per status stream, before and after.)
//!
//! What poem's server did and this keeps: upgrades allowed on HTTP/1.1, the remote address for
//! the per-IP limits. Added: `TCP_NODELAY`, so a status push or a small answer is not held back
//! waiting for the client's acknowledgement of the one before; and an idle timeout
//! (`http.idle_timeout_secs`): a connection that sends nothing, or over HTTP/1.1 no complete
//! request head, for that long is closed, where poem's server kept it (and its ~18 KiB) for
//! good — a cheap way to exhaust a waiting room's memory is to open connections and say
//! nothing. An HTTP/2 connection (from a proxy, as a rule, carrying many users' streams) is
//! not closed for being quiet: after that long without a frame from its peer it is pinged,
//! and closed, streams and all, if the ping goes unanswered as long — a peer that went away
//! without closing, or one that never speaks past its preface.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use hyper::body::{Bytes, Incoming};
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use poem::endpoint::BoxEndpoint;
use poem::http::uri::Scheme;
use poem::web::{LocalAddr, RemoteAddr};
use poem::{Addr, Endpoint, Response};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::service::drain;

/// How every HTTP/2 connection with prior knowledge begins (RFC 9113, section 3.4).
const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// What hyper sends back: poem's response body.
type ResponseBody = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;
type Answer =
    Pin<Box<dyn Future<Output = Result<hyper::Response<ResponseBody>, Infallible>> + Send>>;

/// After a drain starts, how long an HTTP/1.1 connection is still served (each answer telling
/// the client `Connection: close`) before it is closed once idle, and how long a connection
/// that has sent nothing yet is waited for: a client that sent its next request on a kept-alive
/// connection, or its first on a new one, just as the drain began gets its answer, not a
/// closed connection.
const HTTP1_DRAIN_GRACE: Duration = Duration::from_secs(1);

/// What a connection needs besides its socket: shared by all of them.
#[derive(Clone)]
struct Serving {
    routes: Arc<BoxEndpoint<'static, Response>>,
    /// The listener's address: every request's local address, as under poem's server.
    local: SocketAddr,
    /// See `http.idle_timeout_secs`.
    idle_timeout: Option<Duration>,
    drain: watch::Receiver<bool>,
}

/// Accepts connections, each served on a task of its own, until `drain` says the process
/// drains and `accept_for` more has passed (`http.drain_delay_secs`); then takes the
/// connections already queued, closes the listener, and returns once every connection has
/// finished: HTTP/1.1 ones after the request in flight, HTTP/2 ones (told to go away) after
/// their streams. The caller bounds the wait.
pub async fn serve(
    listener: TcpListener,
    routes: BoxEndpoint<'static, Response>,
    idle_timeout: Option<Duration>,
    accept_for: Duration,
    drain: watch::Receiver<bool>,
) {
    let local = match listener.local_addr() {
        Ok(local) => local,
        Err(e) => return tracing::error!(error = %e, "the listener has no address"),
    };
    let serving = Serving {
        routes: Arc::new(routes),
        local,
        idle_timeout,
        drain: drain.clone(),
    };
    // Each connection holds a receiver: the sender is closed once all of them are gone.
    let (open, _) = watch::channel(());
    let spawn = |stream: TcpStream, remote: SocketAddr| {
        let alive = open.subscribe();
        let serving = serving.clone();
        tokio::spawn(async move {
            connection(stream, remote, serving).await;
            drop(alive);
        });
    };
    // Made once: the delay runs from the drain's start, not from the last connection taken.
    let mut closing = std::pin::pin!(drained_for(drain, accept_for));
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, remote)) => spawn(stream, remote),
                Err(e) => {
                    // Out of file descriptors, most likely: give the open connections a
                    // moment to close rather than spinning on the same error.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            },
            _ = closing.as_mut() => break,
        }
    }
    take_queued(listener, spawn);
    tracing::info!(
        connections = open.receiver_count(),
        "draining: no new connections, finishing the open ones"
    );
    open.closed().await;
}

/// Closes the listener after handing `spawn` every connection already in its queue. The kernel
/// completes a client's handshake before the server accepts it, so a client may have sent its
/// request on a connection that waits in the queue as the drain begins; closing the listener
/// would reset it, a request sent and never answered. Each such connection is served as the
/// others (its answer says `Connection: close`). The queue is read by `accept(2)` itself, not
/// by the runtime's readiness, which can lag behind it; at most a full queue's worth is taken,
/// so that clients arriving as fast as they are taken cannot hold the drain here. A connection
/// completed after the last read is refused or reset, as at any listener's close.
fn take_queued(listener: TcpListener, mut spawn: impl FnMut(TcpStream, SocketAddr)) {
    let listener = match listener.into_std() {
        Ok(listener) => listener,
        Err(e) => return tracing::warn!(error = %e, "the listener's queue could not be read"),
    };
    for _ in 0..super::LISTEN_BACKLOG {
        let taken = listener.accept().and_then(|(stream, remote)| {
            stream.set_nonblocking(true)?;
            Ok((TcpStream::from_std(stream)?, remote))
        });
        match taken {
            Ok((stream, remote)) => spawn(stream, remote),
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
            // A client that gave up while queued: the rest of the queue still waits.
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionAborted => continue,
            Err(e) => return tracing::warn!(error = %e, "taking a queued connection failed"),
        }
    }
}

/// What a connection speaks.
#[derive(Debug, PartialEq, Eq)]
enum Protocol {
    Http1,
    Http2,
}

/// What the first bytes of a connection say it speaks; `None` while all of them begin the
/// HTTP/2 preface, too few to tell.
fn protocol(first: &[u8]) -> Option<Protocol> {
    let n = first.len().min(H2_PREFACE.len());
    if first[..n] != H2_PREFACE[..n] {
        Some(Protocol::Http1)
    } else if n == H2_PREFACE.len() {
        Some(Protocol::Http2)
    } else {
        None
    }
}

/// The connection's protocol, from its first bytes, left in the socket; `None` if it closed
/// first. A first segment that is only the start of the HTTP/2 preface (real clients send it
/// whole, with their settings) is peeked at again for up to a second; then it is HTTP/1.1's to
/// refuse.
async fn sniff(stream: &TcpStream) -> Option<Protocol> {
    let mut first = [0u8; H2_PREFACE.len()];
    for _ in 0..100 {
        match stream.peek(&mut first).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => match protocol(&first[..n]) {
                Some(decided) => return Some(decided),
                None => tokio::time::sleep(Duration::from_millis(10)).await,
            },
        }
    }
    Some(Protocol::Http1)
}

async fn connection(stream: TcpStream, remote: SocketAddr, serving: Serving) {
    let Serving {
        routes,
        local,
        idle_timeout,
        drain,
    } = serving;
    let _ = stream.set_nodelay(true);
    let sniffing = async {
        match idle_timeout {
            Some(limit) => tokio::time::timeout(limit, sniff(&stream))
                .await
                .ok()
                .flatten(),
            None => sniff(&stream).await,
        }
    };
    // A connection that has sent nothing a grace after the drain began is closed, as an idle
    // kept-alive one is: HTTP clients open connections they may never use (a browser's
    // preconnect, the loser of a client pool's race to connect), and one left waiting would
    // hold the drain for the whole idle timeout, past the shutdown bound.
    let sniffed = tokio::select! {
        sniffed = sniffing => sniffed,
        _ = drained_for(drain.clone(), HTTP1_DRAIN_GRACE) => None,
    };
    let Some(protocol) = sniffed else {
        return;
    };
    // Over HTTP/1.1 a draining process answers `Connection: close` (HTTP/2 has no such header:
    // it is told to go away instead).
    let closing = (protocol == Protocol::Http1).then(|| drain.clone());
    let service = hyper::service::service_fn(move |request| {
        answer(&routes, request, local, remote, closing.clone())
    });
    let io = TokioIo::new(stream);
    let served = match protocol {
        // hyper's header-read timeout runs from when it starts waiting for a request head (on a
        // new connection, or once the previous answer is sent) until the head is read.
        Protocol::Http1 => {
            let conn = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(idle_timeout)
                .serve_connection(io, service)
                .with_upgrades();
            until_drained(conn, drain, HTTP1_DRAIN_GRACE, |conn| {
                conn.graceful_shutdown()
            })
            .await
            .map_err(|e| e.to_string())
        }
        Protocol::Http2 => {
            let conn = Box::pin(http2(idle_timeout).serve_connection(io, service));
            until_drained(conn, drain, Duration::ZERO, |conn| {
                conn.get_mut().as_mut().graceful_shutdown()
            })
            .await
            .map_err(|e| e.to_string())
        }
    };
    if let Err(error) = served {
        // A client that went away mid-request, as a rule: not the service's fault.
        tracing::debug!(%remote, %error, "connection ended with an error");
    }
}

/// Serves `conn` to its end; once the process drains (and `grace` later), asks it to shut down
/// gracefully (`shutdown`: HTTP/1.1 closes after the answer in flight, or at once when idle;
/// HTTP/2 sends GOAWAY and finishes its streams) and serves it to its end still.
async fn until_drained<C, T, E>(
    conn: C,
    drain: watch::Receiver<bool>,
    grace: Duration,
    shutdown: impl FnOnce(Pin<&mut C>),
) -> Result<T, E>
where
    C: Future<Output = Result<T, E>>,
{
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        served = conn.as_mut() => return served,
        _ = drained_for(drain, grace) => {}
    }
    shutdown(conn.as_mut());
    conn.await
}

/// Resolves `after` the drain began (never if the process does not drain).
async fn drained_for(mut drain: watch::Receiver<bool>, after: Duration) {
    drain::started(&mut drain).await;
    tokio::time::sleep(after).await;
}

/// HTTP/2 as poem's server set it up: no limit on concurrent streams (hyper's default is 200,
/// and an HTTP/2 proxy carries many users' status streams on one connection), at most 20 streams
/// reset before they were accepted, header lists up to 16 KiB. Added: after `idle_timeout`
/// without a frame from the peer, a ping, which must be answered within as long (hyper's
/// keep-alive; none when the timeout is off).
fn http2(idle_timeout: Option<Duration>) -> http2::Builder<TokioExecutor> {
    let mut builder = http2::Builder::new(TokioExecutor::new());
    builder
        .max_concurrent_streams(None)
        .max_pending_accept_reset_streams(20)
        .max_header_list_size(16 * 1024)
        .timer(TokioTimer::new())
        .keep_alive_interval(idle_timeout);
    if let Some(limit) = idle_timeout {
        builder.keep_alive_timeout(limit);
    }
    builder
}

/// One request through the routes. Boxed: hyper keeps room for a request's future for the
/// connection's life, and poem's request and response are large.
/// `closing`: over HTTP/1.1, the drain, so answers made while it runs say `Connection: close`.
fn answer(
    routes: &Arc<BoxEndpoint<'static, Response>>,
    request: hyper::Request<Incoming>,
    local: SocketAddr,
    remote: SocketAddr,
    closing: Option<watch::Receiver<bool>>,
) -> Answer {
    let routes = routes.clone();
    Box::pin(async move {
        let request = poem::Request::from((
            request,
            LocalAddr(Addr::SocketAddr(local)),
            RemoteAddr(Addr::SocketAddr(remote)),
            Scheme::HTTP,
        ));
        let mut response = routes.get_response(request).await;
        if closing.is_some_and(|drain| *drain.borrow()) {
            response.headers_mut().insert(
                poem::http::header::CONNECTION,
                poem::http::HeaderValue::from_static("close"),
            );
        }
        Ok(response.into())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_line_is_http1_from_its_first_differing_byte() {
        assert_eq!(
            protocol(b"GET /health/live HTTP/1.1\r\n"),
            Some(Protocol::Http1)
        );
        assert_eq!(protocol(b"POST /v1/sales"), Some(Protocol::Http1));
        assert_eq!(protocol(b"G"), Some(Protocol::Http1));
    }

    /// Connections whose handshake the kernel completed, each with a request sent, still in
    /// the listener's queue when the drain begins: every one is answered, not reset.
    #[tokio::test]
    async fn requests_queued_as_the_drain_begins_are_answered() {
        use poem::EndpointExt;
        use std::io::{Read, Write};

        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let clients: Vec<_> = (0..10)
            .map(|_| {
                let mut client = std::net::TcpStream::connect(addr).unwrap();
                client
                    .write_all(b"GET / HTTP/1.1\r\nhost: sluice\r\n\r\n")
                    .unwrap();
                client
                    .set_read_timeout(Some(Duration::from_secs(5)))
                    .unwrap();
                client
            })
            .collect();
        let drain = crate::service::drain::Drain::default();
        drain.start();
        let routes = poem::endpoint::make_sync(|_| "ok")
            .map_to_response()
            .boxed();
        let server = tokio::spawn(serve(
            listener,
            routes,
            None,
            Duration::ZERO,
            drain.subscribe(),
        ));
        let answers = tokio::task::spawn_blocking(move || {
            clients
                .into_iter()
                .map(|mut client| {
                    let mut answer = String::new();
                    match client.read_to_string(&mut answer) {
                        Ok(_) => answer,
                        Err(e) => format!("{e}"),
                    }
                })
                .collect::<Vec<_>>()
        })
        .await
        .unwrap();
        for answer in &answers {
            assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
            assert!(answer.contains("connection: close"), "{answer:?}");
        }
        server.await.unwrap();
    }

    #[test]
    fn the_whole_preface_is_http2_and_a_part_of_it_undecided() {
        let mut with_settings = H2_PREFACE.to_vec();
        with_settings.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
        assert_eq!(protocol(&with_settings), Some(Protocol::Http2));
        assert_eq!(protocol(H2_PREFACE), Some(Protocol::Http2));
        assert_eq!(protocol(b"PRI * HTTP/2.0\r\n"), None);
        assert_eq!(protocol(b"P"), None);
    }
}
