//! Signals from the Prometheus HTTP API: one instant query (`/api/v1/query`) per signal, all
//! at once, each bounded by the query timeout. The figure is the largest value of the result
//! vector (or the scalar); an empty result or NaN (a ratio without traffic) reads 0 — no data
//! is no pressure. Unreachable, an error status or a timeout reads `None` (stale).

use std::time::Duration;

use async_trait::async_trait;
use serde::Deserialize;

use super::{Signal, SignalSource};
use crate::domain::valve::Reading;

pub struct PrometheusSignals {
    client: reqwest::Client,
    /// `<base>/api/v1/query`.
    endpoint: String,
    signals: Vec<Signal>,
}

impl PrometheusSignals {
    pub fn new(base_url: &str, timeout: Duration, signals: Vec<Signal>) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder().timeout(timeout).build()?;
        Ok(PrometheusSignals {
            client,
            endpoint: format!("{}/api/v1/query", base_url.trim_end_matches('/')),
            signals,
        })
    }

    async fn query(&self, promql: &str) -> anyhow::Result<f64> {
        let answer: QueryAnswer = self
            .client
            .get(&self.endpoint)
            .query(&[("query", promql)])
            .send()
            .await?
            .error_for_status()?
            .json()
            .await?;
        answer.figure()
    }
}

#[async_trait]
impl SignalSource for PrometheusSignals {
    async fn read(&self) -> Vec<Reading> {
        let answers = futures_util::future::join_all(self.signals.iter().map(|s| async move {
            match self.query(&s.query).await {
                Ok(v) => Some(v),
                Err(e) => {
                    tracing::debug!(signal = %s.name, error = %e, "prometheus query failed");
                    None
                }
            }
        }))
        .await;
        self.signals
            .iter()
            .zip(answers)
            .map(|(s, value)| Reading {
                name: s.name.clone(),
                value,
                target: s.target,
            })
            .collect()
    }
}

/// The part of an instant-query answer sluice reads.
#[derive(Debug, Deserialize)]
struct QueryAnswer {
    status: String,
    data: Option<QueryData>,
    error: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "resultType", content = "result", rename_all = "lowercase")]
enum QueryData {
    Vector(Vec<VectorSample>),
    Scalar((f64, String)),
    // Not figures; read only to say so.
    Matrix(#[allow(dead_code)] serde::de::IgnoredAny),
    String(#[allow(dead_code)] serde::de::IgnoredAny),
}

#[derive(Debug, Deserialize)]
struct VectorSample {
    value: (f64, String),
}

impl QueryAnswer {
    fn figure(self) -> anyhow::Result<f64> {
        if self.status != "success" {
            anyhow::bail!("prometheus: {}", self.error.unwrap_or(self.status));
        }
        let values: Vec<String> = match self.data {
            Some(QueryData::Vector(samples)) => samples.into_iter().map(|s| s.value.1).collect(),
            Some(QueryData::Scalar((_, v))) => vec![v],
            Some(QueryData::Matrix(_)) | Some(QueryData::String(_)) | None => {
                anyhow::bail!("prometheus: the query must give an instant vector or a scalar")
            }
        };
        let mut figure = 0.0_f64;
        for v in values {
            // Prometheus writes floats as Go does: "NaN", "+Inf", "-Inf".
            let v: f64 = v.trim_start_matches('+').parse()?;
            if !v.is_nan() {
                figure = figure.max(v);
            }
        }
        Ok(figure)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figure(json: &str) -> anyhow::Result<f64> {
        serde_json::from_str::<QueryAnswer>(json)?.figure()
    }

    #[test]
    fn reads_the_largest_value_of_a_vector() {
        let json = r#"{"status":"success","data":{"resultType":"vector","result":[
            {"metric":{"a":"1"},"value":[1700000000.1,"2.5"]},
            {"metric":{"a":"2"},"value":[1700000000.1,"7"]}]}}"#;
        assert_eq!(figure(json).unwrap(), 7.0);
    }

    #[test]
    fn no_data_and_nan_read_zero_and_inf_reads_inf() {
        let empty = r#"{"status":"success","data":{"resultType":"vector","result":[]}}"#;
        assert_eq!(figure(empty).unwrap(), 0.0);
        let nan = r#"{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"value":[1,"NaN"]}]}}"#;
        assert_eq!(figure(nan).unwrap(), 0.0);
        let inf = r#"{"status":"success","data":{"resultType":"scalar","result":[1,"+Inf"]}}"#;
        assert_eq!(figure(inf).unwrap(), f64::INFINITY);
    }

    #[test]
    fn errors_and_ranges_are_not_figures() {
        let error = r#"{"status":"error","errorType":"bad_data","error":"parse error"}"#;
        assert!(figure(error)
            .unwrap_err()
            .to_string()
            .contains("parse error"));
        let matrix = r#"{"status":"success","data":{"resultType":"matrix","result":[]}}"#;
        assert!(figure(matrix).is_err());
    }
}
