//! Server-Sent Events as poem-openapi documents them, written to the body as they come.
//!
//! poem's SSE response turns its events into an `AsyncRead` and the body reads that back through
//! a 4 KiB buffer of its own: 4 KiB per open stream, for the stream's life (heaptrack: 4.1 KiB
//! of each; a status stream over HTTP/2 took 6.8 KiB with it, 2.3 without), and a copy of every
//! event. This type documents the operation exactly as `poem_openapi::payload::EventStream` does
//! (the spec is unchanged) and hands each event's bytes to the body directly, with the same
//! keep-alive comment and headers.

use std::task::Poll;
use std::time::Duration;

use futures_util::{Stream, StreamExt};
use poem::web::sse::Event;
use poem::{Body, IntoResponse, Response};
use poem_openapi::registry::{MetaResponses, Registry};
use poem_openapi::types::{ToJSON, Type};
use poem_openapi::ApiResponse;
use serde::Serialize;

/// How poem-openapi describes an event stream of `T`'s items (the type documents; never built).
type Documented<T> = poem_openapi::payload::EventStream<T>;

/// One SSE message: its `event:` name, its `id:` (what a client that reconnects sends back as
/// `Last-Event-ID`) and its data (as JSON).
pub struct Message<E> {
    pub event: &'static str,
    pub id: String,
    pub data: E,
}

/// Each item of `stream` as one SSE message, and a comment every `keep_alive` so proxies keep
/// an idle stream open.
pub struct EventStream<T> {
    stream: T,
    keep_alive: Duration,
}

impl<T> EventStream<T> {
    pub fn new(stream: T, keep_alive: Duration) -> Self {
        EventStream { stream, keep_alive }
    }
}

impl<T, E> IntoResponse for EventStream<T>
where
    T: Stream<Item = Message<E>> + Unpin + Send + 'static,
    E: Type + Serialize + 'static,
{
    fn into_response(self) -> Response {
        let mut events = self.stream.map(|m| {
            Event::message(serde_json::to_string(&m.data).unwrap_or_default())
                .event_type(m.event)
                .id(m.id)
                .to_string()
        });
        let mut keep_alive = tokio::time::interval_at(
            tokio::time::Instant::now() + self.keep_alive,
            self.keep_alive,
        );
        let body = futures_util::stream::poll_fn(move |cx| {
            if let Poll::Ready(event) = events.poll_next_unpin(cx) {
                return Poll::Ready(event.map(|e| Ok::<_, std::io::Error>(e.into_bytes())));
            }
            keep_alive
                .poll_tick(cx)
                .map(|_| Some(Ok(b":\n\n".to_vec())))
        });
        Response::builder()
            .content_type("text/event-stream")
            .header("X-Accel-Buffering", "no")
            .header("Cache-Control", "no-cache")
            .body(Body::from_bytes_stream(body))
    }
}

impl<T, E> ApiResponse for EventStream<T>
where
    T: Stream<Item = Message<E>> + Unpin + Send + 'static,
    E: Type + ToJSON + 'static,
{
    fn meta() -> MetaResponses {
        Documented::<futures_util::stream::Empty<E>>::meta()
    }

    fn register(registry: &mut Registry) {
        <Documented<futures_util::stream::Empty<E>> as ApiResponse>::register(registry);
    }
}

#[cfg(test)]
mod tests {
    use futures_util::stream;

    use super::*;

    async fn body_of(resp: Response) -> Vec<String> {
        resp.into_body()
            .into_bytes_stream()
            .map(|chunk| String::from_utf8(chunk.unwrap().to_vec()).unwrap())
            .collect()
            .await
    }

    fn message(n: i32) -> Message<i32> {
        Message {
            event: "status",
            id: format!("m{n}"),
            data: n,
        }
    }

    #[tokio::test]
    async fn each_item_is_one_message_and_the_body_ends_with_the_stream() {
        let items = stream::iter([message(1), message(2)]);
        let resp = EventStream::new(items, Duration::from_secs(15)).into_response();
        assert_eq!(resp.content_type(), Some("text/event-stream"));
        assert_eq!(resp.headers()["cache-control"], "no-cache");
        assert_eq!(resp.headers()["x-accel-buffering"], "no");
        assert_eq!(
            body_of(resp).await,
            [
                "id: m1\nevent: status\ndata: 1\n\n",
                "id: m2\nevent: status\ndata: 2\n\n"
            ]
        );
    }

    #[tokio::test]
    async fn an_idle_stream_sends_keep_alive_comments() {
        let items = stream::iter([message(7)]).chain(stream::pending());
        let resp = EventStream::new(items, Duration::from_millis(20)).into_response();
        let mut body = resp.into_body().into_bytes_stream();
        let mut chunks = Vec::new();
        for _ in 0..3 {
            let chunk = tokio::time::timeout(Duration::from_secs(5), body.next()).await;
            let chunk = chunk.expect("a chunk within 5 s").unwrap().unwrap();
            chunks.push(String::from_utf8(chunk.to_vec()).unwrap());
        }
        assert_eq!(
            chunks,
            ["id: m7\nevent: status\ndata: 7\n\n", ":\n\n", ":\n\n"]
        );
    }
}
