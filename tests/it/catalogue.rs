//! The event catalogue (`openapi/asyncapi.yaml`) and the code agree: every event type the code
//! emits is documented and every documented one exists, and the envelope's fields are exactly
//! what is serialised.

use std::collections::BTreeSet;

use sluice::domain::{
    decide, AttemptEvent, AttemptId, AttemptState, DomainEvent, EventType, SaleId,
};

fn catalogue() -> serde_yaml::Value {
    serde_yaml::from_str(include_str!("../../openapi/asyncapi.yaml"))
        .expect("asyncapi.yaml is YAML")
}

#[test]
fn every_event_type_is_documented_and_nothing_else() {
    let doc = catalogue();
    assert_eq!(doc["asyncapi"].as_str(), Some("3.0.0"));
    let messages = &doc["components"]["messages"];
    let documented: BTreeSet<String> = doc["channels"]["events"]["messages"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| {
            messages[k.as_str().unwrap()]["name"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect();
    let emitted: BTreeSet<String> = EventType::ALL
        .iter()
        .map(|t| t.as_str().to_owned())
        .collect();
    assert_eq!(documented, emitted);
    let in_channel = doc["channels"]["events"]["messages"]
        .as_mapping()
        .unwrap()
        .len();
    assert_eq!(
        in_channel,
        EventType::ALL.len(),
        "every message is on the channel"
    );
}

#[test]
fn the_envelope_matches_what_is_serialised() {
    let doc = catalogue();
    let envelope = &doc["components"]["schemas"]["Envelope"];
    let required: BTreeSet<String> = envelope["required"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    let properties: BTreeSet<String> = envelope["properties"]
        .as_mapping()
        .unwrap()
        .keys()
        .map(|k| k.as_str().unwrap().to_owned())
        .collect();
    let attempt = AttemptId::new(SaleId::new());
    let hold = decide(AttemptState::Admitted, AttemptEvent::Hold).unwrap();
    let event = DomainEvent::for_decision(attempt, "u", &hold, None).unwrap();
    let serialised = serde_json::to_value(&event).unwrap();
    let fields: BTreeSet<String> = serialised.as_object().unwrap().keys().cloned().collect();
    assert_eq!(fields, required);
    assert_eq!(fields, properties);
    let data_required: BTreeSet<String> = doc["components"]["schemas"]["AttemptEvent"]["allOf"][1]
        ["properties"]["data"]["required"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    for field in &data_required {
        assert!(
            serialised["data"].get(field).is_some(),
            "attempt events carry data.{field}"
        );
    }
}

/// Checks an event of a seat-map stream against `asyncapi.yaml`'s `seatMap` channel: its SSE
/// name is one of the channel's messages, and its data has every field the schema requires and
/// none it does not name, at every level.
pub fn assert_seat_map_event_documented(event: &str, data: &serde_json::Value) {
    let doc: serde_json::Value = serde_json::to_value(catalogue()).unwrap();
    let messages = &doc["components"]["messages"];
    let names: Vec<&str> = doc["channels"]["seatMap"]["messages"]
        .as_object()
        .unwrap()
        .keys()
        .map(|k| messages[k]["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&event), "event {event} not in {names:?}");
    let schema = &doc["components"]["schemas"]["SeatMapEvent"];
    let mut wrong = Vec::new();
    conforms(schema, data, "data", &mut wrong);
    assert!(wrong.is_empty(), "{event}: {}", wrong.join("; "));
}

fn conforms(
    schema: &serde_json::Value,
    value: &serde_json::Value,
    at: &str,
    wrong: &mut Vec<String>,
) {
    if let Some(items) = schema.get("items") {
        for (i, item) in value.as_array().into_iter().flatten().enumerate() {
            conforms(items, item, &format!("{at}[{i}]"), wrong);
        }
    }
    let (Some(properties), Some(fields)) = (schema["properties"].as_object(), value.as_object())
    else {
        return;
    };
    for required in schema["required"].as_array().into_iter().flatten() {
        if !fields.contains_key(required.as_str().unwrap()) {
            wrong.push(format!("{at}.{required} is missing"));
        }
    }
    for (name, field) in fields {
        match properties.get(name) {
            Some(property) => conforms(property, field, &format!("{at}.{name}"), wrong),
            None => wrong.push(format!("{at}.{name} is not documented")),
        }
    }
}
