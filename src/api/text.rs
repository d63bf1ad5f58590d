//! [`Text`]: a string of a request, the one type for what a request says in text and sluice
//! may keep. In a body it takes JSON strings only: poem-openapi's own `String` also takes a
//! number or a boolean and turns it into text (`{"name": -1}` would be the name "-1"); a
//! generated client, and the spec, say the field is a string, so anything else is a malformed
//! request (400). As a path, query or header parameter it refuses control characters (a NUL
//! above all, which PostgreSQL's text cannot hold): a 400 naming the parameter, before any
//! store sees it. A body's fields are checked by the domain, which names the field (422).

use std::borrow::Cow;
use std::ops::Deref;

use poem_openapi::registry::MetaSchemaRef;
use poem_openapi::types::{
    ParseError, ParseFromJSON, ParseFromParameter, ParseResult, ToJSON, Type,
};
use serde_json::Value;

/// A string field of a request body; in the spec, a plain `string`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(transparent)]
pub struct Text(pub String);

impl Text {
    pub fn into_inner(self) -> String {
        self.0
    }
}

impl Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Text(s.to_owned())
    }
}

impl Type for Text {
    const IS_REQUIRED: bool = true;
    type RawValueType = String;
    type RawElementValueType = String;

    fn name() -> Cow<'static, str> {
        String::name()
    }

    fn schema_ref() -> MetaSchemaRef {
        String::schema_ref()
    }

    fn as_raw_value(&self) -> Option<&String> {
        Some(&self.0)
    }

    fn raw_element_iter<'a>(&'a self) -> Box<dyn Iterator<Item = &'a String> + 'a> {
        Box::new(std::iter::once(&self.0))
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl ParseFromJSON for Text {
    fn parse_from_json(value: Option<Value>) -> ParseResult<Self> {
        match value.unwrap_or_default() {
            Value::String(s) => Ok(Text(s)),
            other => Err(ParseError::expected_type(other)),
        }
    }
}

impl ParseFromParameter for Text {
    fn parse_from_parameter(value: &str) -> ParseResult<Self> {
        match value.chars().find(|c| c.is_control()) {
            Some(c) => Err(ParseError::custom(format!(
                "a control character ({c:?}) is not allowed"
            ))),
            None => Ok(Text(value.to_owned())),
        }
    }
}

impl ToJSON for Text {
    fn to_json(&self) -> Option<Value> {
        Some(Value::String(self.0.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_a_json_string_is_text() {
        assert_eq!(
            Text::parse_from_json(Some(json!("-1"))).unwrap(),
            Text::from("-1")
        );
        for value in [
            json!(-1),
            json!(true),
            json!(1.5),
            json!(null),
            json!(["a"]),
        ] {
            assert!(
                Text::parse_from_json(Some(value.clone())).is_err(),
                "{value}"
            );
        }
        assert!(
            <Option<Text>>::parse_from_json(Some(json!(7))).is_err(),
            "an optional field too"
        );
        assert!(<Vec<Text>>::parse_from_json(Some(json!(["A1", 2]))).is_err());
    }

    #[test]
    fn a_parameter_takes_no_control_character() {
        assert_eq!(
            Text::parse_from_parameter("서울-1").unwrap(),
            Text::from("서울-1")
        );
        for bad in ["\0", "a\0b", "\u{1}", "tab\there", "\u{7f}", "\u{85}"] {
            assert!(Text::parse_from_parameter(bad).is_err(), "{bad:?}");
        }
    }
}
