//! JSON-RPC 2.0 (A2A v1.0) at `POST /a2a/v1` and, for each hosted agent, at
//! `POST /a2a/utility/{name}/v1`: `SendMessage` (the registry's skills `search_agents` and
//! `resolve_package`, or a hosted agent's capabilities), batches, notifications, versions.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value, json};

use crate::agents::HostedAgent;
use crate::auth::{self, Scope};
use crate::error::{ApiError, ErrorCode};
use crate::search::request::{self, SEARCH_LIMITS};
use crate::state::AppState;

use super::skills;

/// JSON-RPC error codes used here.
pub mod codes {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL: i64 = -32603;
    pub const UNAUTHORIZED: i64 = -32000;
    pub const TASK_NOT_FOUND: i64 = -32001;
    pub const VERSION_NOT_SUPPORTED: i64 = -32009;
}

/// A JSON-RPC error object.
#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let (Some(data), Value::Object(map)) = (&self.data, &mut error) {
            map.insert("data".to_owned(), data.clone());
        }
        error
    }
}

impl From<ApiError> for RpcError {
    fn from(err: ApiError) -> Self {
        let message = match err.code {
            ErrorCode::Internal => "internal error".to_owned(),
            _ => err.detail.clone(),
        };
        Self {
            code: err.code.jsonrpc_code(),
            message,
            data: Some(json!({"code": err.code.as_str()})),
        }
    }
}

fn error_response(id: Value, error: &RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": error.to_json()})
}

fn http_json(status: StatusCode, body: &Value) -> Response {
    let mut response = (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response();
    if status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// Is the requested A2A protocol version one this endpoint serves?
fn version_supported(headers: &HeaderMap, query: Option<&str>) -> Result<(), RpcError> {
    let from_query = query.and_then(|q| {
        url::form_urlencoded::parse(q.as_bytes())
            .find(|(key, _)| key.eq_ignore_ascii_case("A2A-Version"))
            .map(|(_, value)| value.into_owned())
    });
    let from_header = headers
        .get("a2a-version")
        .map(|v| v.to_str().unwrap_or("?").to_owned());
    match from_header.or(from_query) {
        None => Ok(()),
        Some(version) if matches!(version.trim(), "" | "1.0" | "1.0.0") => Ok(()),
        Some(version) => Err(RpcError {
            data: Some(json!({"supported": ["1.0"]})),
            ..RpcError::new(
                codes::VERSION_NOT_SUPPORTED,
                format!(
                    "A2A version '{}' is not supported; this endpoint serves 1.0",
                    crate::error::truncate(&version, 20)
                ),
            )
        }),
    }
}

/// `POST /a2a/v1`: authenticate, then answer a request or a batch.
#[utoipa::path(post, path = "/a2a/v1", tag = "a2a",
    request_body(content = serde_json::Value, description = "JSON-RPC 2.0 request or batch; method `SendMessage`"),
    responses((status = 200, description = "JSON-RPC response (errors too)", body = serde_json::Value),
              (status = 204, description = "Only notifications were sent"),
              (status = 401, description = "JSON-RPC error -32000 unauthorized")),
    security(("bearer" = [])))]
pub async fn handle(
    State(state): State<AppState>,
    parts: Parts,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    serve(&state, &Target::Registry, &parts, body).await
}

/// Which agent a JSON-RPC endpoint speaks for.
pub enum Target {
    /// The registry itself (`/a2a/v1`).
    Registry,
    /// A hosted utility agent (`/a2a/utility/{name}/v1`).
    Hosted(Arc<dyn HostedAgent>),
}

/// Authenticate (scope `a2a`), then answer a JSON-RPC request or batch for `target`.
pub async fn serve(
    state: &AppState,
    target: &Target,
    parts: &Parts,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    if let Err(response) = authorize(state, parts).await {
        return response;
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let error = RpcError::new(
                codes::INVALID_REQUEST,
                format!("cannot read the request body: {}", rejection.body_text()),
            );
            return http_json(rejection.status(), &error_response(Value::Null, &error));
        }
    };
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(err) => {
            let error = RpcError::new(codes::PARSE_ERROR, format!("parse error: {err}"));
            return http_json(StatusCode::OK, &error_response(Value::Null, &error));
        }
    };
    let version = version_supported(&parts.headers, parts.uri.query());
    let answer = match parsed {
        Value::Array(batch) if batch.is_empty() => Some(error_response(
            Value::Null,
            &RpcError::new(codes::INVALID_REQUEST, "empty batch"),
        )),
        Value::Array(batch) => {
            let mut answers = Vec::with_capacity(batch.len());
            for call in batch {
                if let Some(answer) = answer_call(state, target, call, &version).await {
                    answers.push(answer);
                }
            }
            (!answers.is_empty()).then_some(Value::Array(answers))
        }
        call => answer_call(state, target, call, &version).await,
    };
    match answer {
        Some(body) => http_json(StatusCode::OK, &body),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// Missing or invalid token → 401, missing scope → 403, both with a JSON-RPC error body.
async fn authorize(state: &AppState, parts: &Parts) -> Result<(), Response> {
    let caller = match auth::bearer_secret(parts) {
        Ok(secret) => auth::authenticate(state, secret).await,
        Err(err) => Err(err),
    };
    let denied = |status: StatusCode, message: &str, detail: String| {
        let error = RpcError {
            data: Some(json!({"detail": detail})),
            ..RpcError::new(codes::UNAUTHORIZED, message)
        };
        http_json(status, &error_response(Value::Null, &error))
    };
    match caller {
        Err(err) if err.code == ErrorCode::Unauthorized => {
            Err(denied(StatusCode::UNAUTHORIZED, "unauthorized", err.detail))
        }
        Err(err) => Err(denied(err.code.status(), "unavailable", err.detail)),
        Ok(caller) => caller
            .require(Scope::A2a)
            .map_err(|err| denied(StatusCode::FORBIDDEN, "forbidden", err.detail)),
    }
}

/// One call of a request or batch; `None` for a notification (no `id`).
async fn answer_call(
    state: &AppState,
    target: &Target,
    call: Value,
    version: &Result<(), RpcError>,
) -> Option<Value> {
    let Value::Object(call) = call else {
        return Some(error_response(
            Value::Null,
            &RpcError::new(codes::INVALID_REQUEST, "a request must be a JSON object"),
        ));
    };
    let id = call.get("id").cloned();
    let valid_id = matches!(
        id,
        None | Some(Value::Null | Value::String(_) | Value::Number(_))
    );
    let reply_id = if valid_id {
        id.clone().unwrap_or(Value::Null)
    } else {
        Value::Null
    };
    let outcome = match (call.get("jsonrpc"), call.get("method")) {
        _ if !valid_id => Err(RpcError::new(
            codes::INVALID_REQUEST,
            "id must be a string, a number or null",
        )),
        (Some(Value::String(v)), Some(Value::String(method))) if v == "2.0" => match version {
            Err(err) => Err(err.clone()),
            Ok(()) => dispatch(state, target, method, call.get("params")).await,
        },
        (Some(Value::String(v)), _) if v == "2.0" => Err(RpcError::new(
            codes::INVALID_REQUEST,
            "method must be a string",
        )),
        _ => Err(RpcError::new(
            codes::INVALID_REQUEST,
            "jsonrpc must be \"2.0\"",
        )),
    };
    // A notification gets no answer, even when it failed.
    id.as_ref()?;
    Some(match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": reply_id, "result": result}),
        Err(error) => error_response(reply_id, &error),
    })
}

async fn dispatch(
    state: &AppState,
    target: &Target,
    method: &str,
    params: Option<&Value>,
) -> Result<Value, RpcError> {
    match method {
        // v0.3 clients say `message/send`.
        "SendMessage" | "message/send" => match target {
            Target::Registry => send_message(state, params).await,
            Target::Hosted(agent) => super::utility::send_message(agent.as_ref(), params).await,
        },
        "GetTask" | "CancelTask" | "tasks/get" | "tasks/cancel" => Err(RpcError::new(
            codes::TASK_NOT_FOUND,
            "task not found: the registry answers every message at once and keeps no tasks",
        )),
        other => Err(RpcError::new(
            codes::METHOD_NOT_FOUND,
            format!(
                "method '{}' not found; this agent serves SendMessage",
                crate::error::truncate(other, 60)
            ),
        )),
    }
}

/// The message of a `SendMessage` call, decomposed.
pub struct Incoming {
    pub skill_id: Option<String>,
    /// Text parts joined with a space.
    pub text: String,
    /// Data parts merged (later keys win).
    pub data: Map<String, Value>,
    pub context_id: Option<Value>,
}

fn invalid_params(message: impl Into<String>) -> RpcError {
    RpcError::new(codes::INVALID_PARAMS, message)
}

/// Parse `SendMessage` params: `{message: {parts, metadata?, contextId?}, metadata?, skill_id?}`.
pub fn parse_send_message(params: Option<&Value>) -> Result<Incoming, RpcError> {
    let params = params
        .and_then(Value::as_object)
        .ok_or_else(|| invalid_params("params must be an object with a message"))?;
    let message = params
        .get("message")
        .and_then(Value::as_object)
        .ok_or_else(|| invalid_params("params.message must be an object"))?;
    let parts = message
        .get("parts")
        .and_then(Value::as_array)
        .ok_or_else(|| invalid_params("params.message.parts must be an array"))?;
    let mut texts = Vec::new();
    let mut data = Map::new();
    for (index, part) in parts.iter().enumerate() {
        let part = part
            .as_object()
            .ok_or_else(|| invalid_params(format!("parts[{index}] must be an object")))?;
        // v0.3 parts carry `kind`; v1.0 parts are told apart by their member.
        match (part.get("text"), part.get("data")) {
            (Some(Value::String(text)), None) => texts.push(text.trim().to_owned()),
            (None, Some(Value::Object(map))) => data.extend(map.clone()),
            (Some(_), None) => {
                return Err(invalid_params(format!(
                    "parts[{index}].text must be a string"
                )));
            }
            (None, Some(_)) => {
                return Err(invalid_params(format!(
                    "parts[{index}].data must be an object"
                )));
            }
            _ => {
                return Err(invalid_params(format!(
                    "parts[{index}] must be a text part {{\"text\"}} or a data part {{\"data\"}}"
                )));
            }
        }
    }
    let skill_from = |metadata: Option<&Value>| {
        metadata
            .and_then(|m| m.get("skill_id").or_else(|| m.get("skillId")))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    let skill_id = params
        .get("skill_id")
        .or_else(|| params.get("skillId"))
        .and_then(Value::as_str)
        .map(str::to_owned)
        .or_else(|| skill_from(params.get("metadata")))
        .or_else(|| skill_from(message.get("metadata")));
    Ok(Incoming {
        skill_id,
        text: texts
            .into_iter()
            .filter(|t| !t.is_empty())
            .collect::<Vec<_>>()
            .join(" "),
        data,
        context_id: message.get("contextId").cloned(),
    })
}

async fn send_message(state: &AppState, params: Option<&Value>) -> Result<Value, RpcError> {
    let incoming = parse_send_message(params)?;
    let (data, text) = match incoming
        .skill_id
        .as_deref()
        .unwrap_or(skills::SEARCH_AGENTS)
    {
        skills::SEARCH_AGENTS => {
            let mut body = incoming.data.clone();
            if !incoming.text.is_empty() {
                body.insert("query".to_owned(), Value::String(incoming.text.clone()));
            }
            let request = request::from_json(&Value::Object(body), SEARCH_LIMITS)
                .map_err(|err| RpcError::from(ApiError::from(err)))?;
            let page = state.index.search(&request).await.map_err(ApiError::from)?;
            let summary = skills::found_summary(page.agents.len(), page.total, &request.text);
            (skills::page_json(&page), summary)
        }
        skills::RESOLVE_PACKAGE => {
            let package = incoming
                .data
                .get("package_name")
                .or_else(|| incoming.data.get("packageName"))
                .and_then(Value::as_str)
                .map_or(incoming.text.as_str(), str::trim)
                .to_owned();
            if package.is_empty() {
                return Err(invalid_params(
                    "resolve_package needs a package name as text or data {\"package_name\"}",
                ));
            }
            let card = skills::resolve(state, &package).await?;
            (json!({"card": card}), format!("Agent card of {package}"))
        }
        other => {
            return Err(invalid_params(format!(
                "unknown skill '{}'; this agent has search_agents and resolve_package",
                crate::error::truncate(other, 60)
            )));
        }
    };
    Ok(agent_message(data, text, incoming.context_id))
}

/// A `SendMessage` result: `{"message": {messageId, role: ROLE_AGENT, parts: [data, text]}}`,
/// in the caller's context when it named one.
pub fn agent_message(data: Value, text: String, context_id: Option<Value>) -> Value {
    let mut message = json!({
        "messageId": format!("msg_{}", ulid::Ulid::new()),
        "role": "ROLE_AGENT",
        "parts": [
            {"data": data, "mediaType": "application/json"},
            {"text": text},
        ],
    });
    if let (Some(context), Value::Object(map)) = (context_id, &mut message) {
        map.insert("contextId".to_owned(), context);
    }
    json!({"message": message})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_parts_join_and_data_parts_merge() {
        let params = json!({"message": {"messageId": "m", "role": "ROLE_USER", "parts": [
            {"text": "price of"}, {"kind": "text", "text": " bitcoin "},
            {"data": {"limit": 3}}, {"data": {"payment_model": "free"}}
        ]}, "metadata": {"skill_id": "search_agents"}});
        let incoming = parse_send_message(Some(&params)).expect("valid");
        assert_eq!(incoming.text, "price of bitcoin");
        assert_eq!(incoming.data.get("limit"), Some(&json!(3)));
        assert_eq!(incoming.data.get("payment_model"), Some(&json!("free")));
        assert_eq!(incoming.skill_id.as_deref(), Some("search_agents"));
    }

    #[test]
    fn skill_id_is_taken_from_params_then_metadata_then_message_metadata() {
        let parse = |params: Value| parse_send_message(Some(&params)).expect("valid").skill_id;
        let parts = json!([{"text": "x"}]);
        assert_eq!(
            parse(json!({"skill_id": "a", "metadata": {"skill_id": "b"},
                         "message": {"parts": parts, "metadata": {"skill_id": "c"}}})),
            Some("a".into())
        );
        assert_eq!(
            parse(json!({"metadata": {"skill_id": "b"},
                         "message": {"parts": parts, "metadata": {"skill_id": "c"}}})),
            Some("b".into())
        );
        assert_eq!(
            parse(json!({"message": {"parts": parts, "metadata": {"skill_id": "c"}}})),
            Some("c".into())
        );
        assert_eq!(parse(json!({"message": {"parts": parts}})), None);
    }

    #[test]
    fn malformed_parts_are_invalid_params() {
        for params in [
            json!(null),
            json!({"message": 1}),
            json!({"message": {"parts": {}}}),
            json!({"message": {"parts": [1]}}),
            json!({"message": {"parts": [{"text": 1}]}}),
            json!({"message": {"parts": [{"data": "x"}]}}),
            json!({"message": {"parts": [{"file": {}}]}}),
        ] {
            let err = parse_send_message(Some(&params))
                .map(|_| ())
                .expect_err("invalid");
            assert_eq!(err.code, codes::INVALID_PARAMS, "{params}");
        }
    }

    #[test]
    fn versions_other_than_1_0_are_refused() {
        let mut headers = HeaderMap::new();
        assert!(version_supported(&headers, None).is_ok());
        headers.insert("a2a-version", HeaderValue::from_static("1.0"));
        assert!(version_supported(&headers, None).is_ok());
        headers.insert("a2a-version", HeaderValue::from_static("0.3"));
        let err = version_supported(&headers, None).expect_err("refused");
        assert_eq!(err.code, codes::VERSION_NOT_SUPPORTED);
        let query = version_supported(&HeaderMap::new(), Some("A2A-Version=2.0"));
        assert!(query.is_err());
    }
}
