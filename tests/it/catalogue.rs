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
    let documented: BTreeSet<String> = doc["components"]["messages"]
        .as_mapping()
        .unwrap()
        .values()
        .map(|m| m["name"].as_str().unwrap().to_owned())
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
