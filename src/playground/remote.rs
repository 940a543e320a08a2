//! Calling a published agent over A2A: fetch its card (`manifest_url`, else the card
//! built from the record), POST `SendMessage` to the first JSON-RPC interface, and read a
//! `{message}` or `{task}` result; with no JSON-RPC interface but a `url`, POST the legacy
//! `{"action", "params"}` there. Every request goes through the SSRF-safe outbound fetcher.

use std::time::Duration;

use axum::http::HeaderName;
use serde_json::{Map, Value, json};
use url::Url;

use crate::domain::truncate;
use crate::outbound::{Fetch, Fetched, JSON, Outbound, OutboundError};

use super::execute::{Answer, Call, StepError, Transport};

/// Largest card read.
const MAX_CARD_BYTES: usize = 64 * 1024;
/// Largest answer read from an agent.
pub const MAX_ANSWER_BYTES: usize = 1024 * 1024;
/// Longest piece of an agent's own error text repeated in a step.
const MAX_ECHOED_CHARS: usize = 300;

/// What was decided before the answer came (kept when the call times out).
#[derive(Debug, Default)]
pub struct Trace {
    pub transport: Option<Transport>,
    pub endpoint: Option<String>,
}

/// Call a remote agent's capability.
pub async fn call(
    outbound: &Outbound,
    call: &Call,
    limit: Duration,
    trace: &mut Trace,
) -> Result<Answer, StepError> {
    let card = card(outbound, call, limit).await?;
    if let Some(endpoint) = jsonrpc_interface(&card) {
        trace.transport = Some(Transport::Jsonrpc);
        trace.endpoint = Some(endpoint.to_string());
        return send_message(outbound, &endpoint, call, limit).await;
    }
    let Some(url) = call.agent.draft.url.as_deref() else {
        return Err(StepError::upstream(
            "the agent's card names no JSON-RPC interface and its record has no url to call",
        ));
    };
    let url = Url::parse(url)
        .map_err(|err| StepError::upstream(format!("the agent's url is not usable: {err}")))?;
    trace.transport = Some(Transport::Legacy);
    trace.endpoint = Some(url.to_string());
    legacy(outbound, &url, call, limit).await
}

/// The agent's card: fetched from `manifest_url`, else the one published with or built from the
/// record.
async fn card(outbound: &Outbound, call: &Call, limit: Duration) -> Result<Value, StepError> {
    let Some(manifest) = call.agent.draft.manifest_url.as_deref() else {
        return Ok(crate::wire::card::card_of(&call.agent, None));
    };
    let url = Url::parse(manifest).map_err(|err| {
        StepError::upstream(format!("the agent's manifest_url is not usable: {err}"))
    })?;
    let fetched = outbound
        .get(&Fetch::get(url.clone(), JSON, MAX_CARD_BYTES).timeout(limit))
        .await
        .map_err(|err| outbound_error("cannot fetch the agent card", err))?;
    if !fetched.status.is_success() {
        return Err(StepError::upstream(format!(
            "the agent card at {url} answered HTTP {}",
            fetched.status.as_u16()
        )));
    }
    fetched
        .json()
        .map_err(|err| StepError::upstream(format!("the agent card at {url} is not JSON: {err}")))
}

/// The URL of the first `supportedInterfaces` entry with protocol binding JSONRPC.
fn jsonrpc_interface(card: &Value) -> Option<Url> {
    card.get("supportedInterfaces")?
        .as_array()?
        .iter()
        .find(|interface| {
            interface
                .get("protocolBinding")
                .and_then(Value::as_str)
                .is_some_and(|binding| binding.eq_ignore_ascii_case("JSONRPC"))
        })
        .and_then(|interface| interface.get("url")?.as_str())
        .and_then(|url| Url::parse(url).ok())
}

fn outbound_error(what: &str, err: OutboundError) -> StepError {
    StepError::new(err.code(), format!("{what}: {err}"))
}

/// POST `SendMessage` with the input as a data part and the capability as `metadata.skill_id`.
async fn send_message(
    outbound: &Outbound,
    endpoint: &Url,
    call: &Call,
    limit: Duration,
) -> Result<Answer, StepError> {
    let request_id = ulid::Ulid::new().to_string();
    let body = json!({
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": format!("msg_{}", ulid::Ulid::new()),
                "role": "ROLE_USER",
                "parts": [{"data": call.input, "mediaType": "application/json"}],
                "metadata": {"skill_id": call.capability},
            },
            "metadata": {"skill_id": call.capability},
        },
    });
    let fetch = Fetch::post_json(endpoint.clone(), &body, JSON, MAX_ANSWER_BYTES)
        .timeout(limit)
        .header(HeaderName::from_static("a2a-version"), "1.0");
    let fetched = outbound
        .get(&fetch)
        .await
        .map_err(|err| outbound_error("cannot call the agent", err))?;
    let answer = json_answer(&fetched)?;
    if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        return Err(StepError::upstream(format!(
            "the agent answered JSON-RPC error {code}: {}",
            truncate(message, MAX_ECHOED_CHARS)
        )));
    }
    if !fetched.status.is_success() {
        return Err(http_failure(&fetched, &answer));
    }
    match answer.get("result") {
        Some(result) => read_result(result),
        None => Err(StepError::upstream(
            "the agent's answer is not a JSON-RPC response: it has neither result nor error",
        )),
    }
}

/// The body of an answer as JSON; a non-JSON error page says its HTTP status.
fn json_answer(fetched: &Fetched) -> Result<Value, StepError> {
    fetched.json::<Value>().map_err(|err| {
        if fetched.status.is_success() {
            StepError::upstream(format!("the agent's answer is not valid JSON: {err}"))
        } else {
            StepError::upstream(format!(
                "the agent answered HTTP {}",
                fetched.status.as_u16()
            ))
        }
    })
}

fn http_failure(fetched: &Fetched, answer: &Value) -> StepError {
    let detail = ["detail", "error", "message"]
        .into_iter()
        .find_map(|key| answer.get(key).and_then(Value::as_str))
        .map(|text| format!(": {}", truncate(text, MAX_ECHOED_CHARS)))
        .unwrap_or_default();
    StepError::upstream(format!(
        "the agent answered HTTP {}{detail}",
        fetched.status.as_u16()
    ))
}

/// A `SendMessage` result: `{message}` or `{task}` (v1.0), or a bare v0.3 message or task.
fn read_result(result: &Value) -> Result<Answer, StepError> {
    if let Some(message) = result.get("message") {
        return message_answer(message);
    }
    if let Some(task) = result.get("task") {
        return task_answer(task);
    }
    match result.get("kind").and_then(Value::as_str) {
        Some("message") => message_answer(result),
        Some("task") => task_answer(result),
        _ => Err(StepError::upstream(
            "the agent's result is neither a message nor a task",
        )),
    }
}

fn message_answer(message: &Value) -> Result<Answer, StepError> {
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| StepError::upstream("the agent's message has no parts array"))?;
    Ok(answer_of_parts(parts))
}

/// A task's artifacts' parts are the output; a failed, rejected or cancelled task is a failure,
/// and so is one still running (the playground does not poll).
fn task_answer(task: &Value) -> Result<Answer, StepError> {
    let raw_state = task
        .pointer("/status/state")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    let state = raw_state
        .to_ascii_lowercase()
        .trim_start_matches("task_state_")
        .to_owned();
    let status_text = task
        .pointer("/status/message/parts")
        .and_then(Value::as_array)
        .map(|parts| texts_of(parts).join(" "))
        .filter(|text| !text.is_empty());
    match state.as_str() {
        "completed" => {
            let parts: Vec<Value> = task
                .get("artifacts")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(|artifact| artifact.get("parts")?.as_array())
                .flatten()
                .cloned()
                .collect();
            if parts.is_empty() {
                let fallback = task
                    .pointer("/status/message/parts")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                return Ok(answer_of_parts(&fallback));
            }
            Ok(answer_of_parts(&parts))
        }
        "failed" | "rejected" | "canceled" | "cancelled" => Err(StepError::upstream(format!(
            "the agent's task ended {state}{}",
            status_text
                .map(|text| format!(": {}", truncate(&text, MAX_ECHOED_CHARS)))
                .unwrap_or_default()
        ))),
        _ => Err(StepError::upstream(format!(
            "the agent answered with a task in state '{}'; the playground does not wait for tasks",
            truncate(raw_state, 60)
        ))),
    }
}

fn texts_of(parts: &[Value]) -> Vec<String> {
    parts
        .iter()
        .filter_map(|part| part.get("text")?.as_str())
        .map(|text| text.trim().to_owned())
        .filter(|text| !text.is_empty())
        .collect()
}

/// One data part is the output as is; several are `{"data": [...]}`; text alone is
/// `{"text": "…"}`; anything else is `{"parts": [...]}`. Text beside data is the summary.
fn answer_of_parts(parts: &[Value]) -> Answer {
    let data: Vec<&Value> = parts.iter().filter_map(|part| part.get("data")).collect();
    let text = texts_of(parts).join("\n");
    let summary = (!text.is_empty()).then(|| text.clone());
    match data.as_slice() {
        [] if summary.is_some() => Answer {
            output: json!({"text": text}),
            summary: None,
        },
        [] => Answer {
            output: json!({"parts": parts}),
            summary: None,
        },
        [one] => Answer {
            output: (*one).clone(),
            summary,
        },
        many => Answer {
            output: json!({"data": many}),
            summary,
        },
    }
}

/// POST `{"action": capability, "params": input}` to the record's `url`.
async fn legacy(
    outbound: &Outbound,
    url: &Url,
    call: &Call,
    limit: Duration,
) -> Result<Answer, StepError> {
    let body = json!({"action": call.capability, "params": call.input});
    let fetch = Fetch::post_json(url.clone(), &body, JSON, MAX_ANSWER_BYTES).timeout(limit);
    let fetched = outbound
        .get(&fetch)
        .await
        .map_err(|err| outbound_error("cannot call the agent", err))?;
    let answer = json_answer(&fetched)?;
    if !fetched.status.is_success() {
        return Err(http_failure(&fetched, &answer));
    }
    let output = match answer {
        Value::Object(_) => answer,
        other => Value::Object(Map::from_iter([("result".to_owned(), other)])),
    };
    Ok(Answer {
        output,
        summary: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;

    #[test]
    fn one_data_part_is_the_output_and_text_beside_it_the_summary() {
        let answer = answer_of_parts(&[json!({"data": {"temp": 21}}), json!({"text": "Sunny"})]);
        assert_eq!(answer.output, json!({"temp": 21}));
        assert_eq!(answer.summary.as_deref(), Some("Sunny"));
        let text = answer_of_parts(&[json!({"kind": "text", "text": "hello"})]);
        assert_eq!(text.output, json!({"text": "hello"}));
        let many = answer_of_parts(&[json!({"data": {"a": 1}}), json!({"data": {"b": 2}})]);
        assert_eq!(many.output, json!({"data": [{"a": 1}, {"b": 2}]}));
        let files = answer_of_parts(&[json!({"url": "https://x/y.png"})]);
        assert_eq!(files.output, json!({"parts": [{"url": "https://x/y.png"}]}));
    }

    #[test]
    fn results_may_be_messages_or_tasks_in_either_version() {
        let v1 = json!({"message": {"role": "ROLE_AGENT", "parts": [{"data": {"x": 1}}]}});
        assert_eq!(read_result(&v1).map(|a| a.output), Ok(json!({"x": 1})));
        let v03 = json!({"kind": "message", "parts": [{"kind": "data", "data": {"x": 2}}]});
        assert_eq!(read_result(&v03).map(|a| a.output), Ok(json!({"x": 2})));
        let task = json!({"task": {"id": "t", "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a", "parts": [{"data": {"x": 3}}]}]}});
        assert_eq!(read_result(&task).map(|a| a.output), Ok(json!({"x": 3})));
        let failed = json!({"task": {"id": "t", "status": {"state": "TASK_STATE_FAILED",
            "message": {"parts": [{"text": "no such city"}]}}}});
        let err = read_result(&failed).expect_err("failed task");
        assert_eq!(err.code, ErrorCode::UpstreamError);
        assert!(err.message.contains("no such city"), "{}", err.message);
        let working = json!({"kind": "task", "status": {"state": "working"}});
        assert!(read_result(&working).is_err());
        assert!(read_result(&json!({"foo": 1})).is_err());
    }

    #[test]
    fn the_first_jsonrpc_interface_is_chosen() {
        let card = json!({"supportedInterfaces": [
            {"url": "https://a.example/rest", "protocolBinding": "HTTP+JSON"},
            {"url": "https://a.example/rpc", "protocolBinding": "JSONRPC"},
            {"url": "https://b.example/rpc", "protocolBinding": "JSONRPC"}
        ]});
        assert_eq!(
            jsonrpc_interface(&card).map(|u| u.to_string()),
            Some("https://a.example/rpc".to_owned())
        );
        assert_eq!(
            jsonrpc_interface(&json!({"url": "https://old.example"})),
            None
        );
    }
}
