//! A JSON response body written straight from the value's `serde::Serialize`, documented by
//! its poem-openapi `Type` as `Json<T>` is. poem-openapi's `Json<T>` first builds a
//! `serde_json::Value` tree of the value (`ToJSON`) and then writes the tree; the status answer,
//! the hottest response there is, skips the tree. The two representations must agree: the
//! types that use this test `serde_json::to_value(x) == x.to_json()`.

use poem::{IntoResponse, Response};
use poem_openapi::payload::{Json, Payload};
use poem_openapi::registry::{MetaResponses, MetaSchemaRef, Registry};
use poem_openapi::types::{ToJSON, Type};
use poem_openapi::ApiResponse;
use serde::Serialize;

/// `T` as an `application/json` body, serialized by serde.
pub struct Serialized<T>(pub T);

impl<T: Type> Payload for Serialized<T> {
    const CONTENT_TYPE: &'static str = <Json<T> as Payload>::CONTENT_TYPE;

    fn check_content_type(content_type: &str) -> bool {
        <Json<T> as Payload>::check_content_type(content_type)
    }

    fn schema_ref() -> MetaSchemaRef {
        T::schema_ref()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

/// A status answer's body is 300 to 500 bytes: written into room for that, the body is not
/// grown (and copied) on the way.
const BODY_CAPACITY: usize = 512;

impl<T: Type + Serialize + Send> IntoResponse for Serialized<T> {
    fn into_response(self) -> Response {
        let mut body = Vec::with_capacity(BODY_CAPACITY);
        match serde_json::to_writer(&mut body, &self.0) {
            Ok(()) => Response::builder()
                .content_type(<Self as Payload>::CONTENT_TYPE)
                .body(body),
            // What poem's `Json` answers when a value does not serialize.
            Err(e) => Response::builder()
                .status(poem::http::StatusCode::INTERNAL_SERVER_ERROR)
                .body(e.to_string()),
        }
    }
}

impl<T: Type + ToJSON + Serialize> ApiResponse for Serialized<T> {
    fn meta() -> MetaResponses {
        <Json<T> as ApiResponse>::meta()
    }

    fn register(registry: &mut Registry) {
        T::register(registry);
    }
}

/// `serialize_with` for an optional time: RFC 3339 as poem-openapi writes it
/// (`DateTime::to_rfc3339`), so a serialized value reads the same as its `ToJSON`.
pub fn rfc3339<S: serde::Serializer>(
    time: &Option<chrono::DateTime<chrono::Utc>>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    match time {
        Some(time) => serializer.serialize_str(&time.to_rfc3339()),
        None => serializer.serialize_none(),
    }
}
