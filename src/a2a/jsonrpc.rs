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

use crate::auth::{self, Scope, Viewer};
use crate::domain::FieldError;
use crate::error::{ApiError, ErrorCode};
use crate::hosted::HostedAgent;
use crate::search::request::{self, SEARCH_LIMITS};
use crate::state::AppState;
use crate::wire::media::{essence, is_json_media_type};

use super::skills;

/// The domain of the `google.rpc.ErrorInfo` of the registry's own errors (A2A's errors use
/// `a2a-protocol.org`).
pub const REGISTRY_ERROR_DOMAIN: &str = "agent-registry";

/// A JSON-RPC error: one of the registry's error codes (which knows its JSON-RPC code and, for
/// A2A's errors, its ErrorInfo reason), a message, and details for `error.data`.
#[derive(Debug, Clone)]
pub struct RpcError {
    pub code: ErrorCode,
    pub message: String,
    /// `ErrorInfo.metadata`: string values only, as the type requires.
    pub metadata: Vec<(&'static str, String)>,
    /// Field violations, sent as a `google.rpc.BadRequest`.
    pub field_errors: Vec<FieldError>,
}

impl RpcError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            metadata: Vec::new(),
            field_errors: Vec::new(),
        }
    }

    /// The same error with one more ErrorInfo metadata entry.
    pub fn with(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metadata.push((key, value.into()));
        self
    }

    /// The JSON-RPC error object: `{code, message, data}`, where `data` is an array of typed
    /// details: always a `google.rpc.ErrorInfo` (A2A's reason and domain for A2A's errors, the
    /// registry's otherwise, with the registry's snake_case code in its metadata), and a
    /// `google.rpc.BadRequest` when fields are invalid.
    pub fn to_json(&self) -> Value {
        let (reason, domain) = match self.code.a2a_reason() {
            Some(reason) => (reason.to_owned(), "a2a-protocol.org"),
            None => (
                self.code.as_str().to_ascii_uppercase(),
                REGISTRY_ERROR_DOMAIN,
            ),
        };
        let mut metadata = Map::new();
        metadata.insert("code".to_owned(), json!(self.code.as_str()));
        for (key, value) in &self.metadata {
            metadata.insert((*key).to_owned(), json!(value));
        }
        let mut data = vec![json!({
            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
            "reason": reason,
            "domain": domain,
            "metadata": metadata,
        })];
        if !self.field_errors.is_empty() {
            let violations: Vec<Value> = self
                .field_errors
                .iter()
                .map(|e| json!({"field": e.field, "description": e.message}))
                .collect();
            data.push(json!({
                "@type": "type.googleapis.com/google.rpc.BadRequest",
                "fieldViolations": violations,
            }));
        }
        json!({"code": self.code.jsonrpc_code(), "message": self.message, "data": data})
    }
}

impl From<ApiError> for RpcError {
    fn from(err: ApiError) -> Self {
        let message = match err.code {
            ErrorCode::Internal => "internal error".to_owned(),
            _ => err.detail.clone(),
        };
        Self {
            field_errors: err.errors,
            ..Self::new(err.code, message)
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
        Some(version) => Err(RpcError::new(
            ErrorCode::VersionNotSupported,
            format!(
                "A2A version '{}' is not supported; this endpoint serves 1.0",
                crate::domain::truncate(&version, 20)
            ),
        )
        .with("supportedVersions", "1.0")),
    }
}

/// The registry's A2A JSON-RPC endpoint (also at `/a2a/v1/`).
///
/// `SendMessage` runs the skills `search_agents` and `resolve_package`. Task methods answer
/// TaskNotFoundError (-32001), push-notification methods PushNotificationNotSupportedError
/// (-32003), streaming, subscriptions, the extended card and task lists
/// UnsupportedOperationError (-32004); a part the agent cannot read is
/// ContentTypeNotSupportedError (-32005). `error.data` carries a `google.rpc.ErrorInfo`.
#[utoipa::path(post, path = "/a2a/v1", tag = "a2a",
    request_body(content = crate::wire::schema::JsonRpcRequest, description = "JSON-RPC 2.0 request or batch; method `SendMessage`"),
    responses((status = 200, description = "JSON-RPC response (errors too)", body = crate::wire::schema::JsonRpcResponse),
              (status = 204, description = "Only notifications were sent")),
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
    let viewer = match authorize(state, target, parts).await {
        Ok(viewer) => viewer,
        Err(response) => return response,
    };
    if let Err(error) = json_content_type(&parts.headers) {
        return http_json(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            &error_response(Value::Null, &error),
        );
    }
    let body = match body {
        Ok(body) => body,
        Err(rejection) => {
            let error = RpcError::new(
                ErrorCode::InvalidRequest,
                format!("cannot read the request body: {}", rejection.body_text()),
            );
            return http_json(rejection.status(), &error_response(Value::Null, &error));
        }
    };
    let parsed: Value = match serde_json::from_slice(&body) {
        Ok(value) => value,
        Err(err) => {
            let error = if err.to_string().starts_with("recursion limit exceeded") {
                RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "arrays and objects nest more than {} levels deep; at most that many are read",
                        crate::extract::MAX_JSON_DEPTH
                    ),
                )
            } else {
                RpcError::new(ErrorCode::InvalidJson, format!("parse error: {err}"))
            };
            return http_json(StatusCode::OK, &error_response(Value::Null, &error));
        }
    };
    let version = version_supported(&parts.headers, parts.uri.query());
    let answer = match parsed {
        Value::Array(batch) if batch.is_empty() => Some(error_response(
            Value::Null,
            &RpcError::new(ErrorCode::InvalidRequest, "empty batch"),
        )),
        Value::Array(batch) if batch.len() as u64 > state.config.limits.jsonrpc_max_batch => {
            Some(error_response(
                Value::Null,
                &RpcError::new(
                    ErrorCode::InvalidRequest,
                    format!(
                        "a batch of {} calls is over the limit of {}; send fewer calls per request",
                        batch.len(),
                        state.config.limits.jsonrpc_max_batch
                    ),
                )
                .with(
                    "maxBatch",
                    state.config.limits.jsonrpc_max_batch.to_string(),
                ),
            ))
        }
        Value::Array(batch) => {
            let mut answers = Vec::with_capacity(batch.len());
            let mut bytes = 0;
            for call in batch {
                let id = call.get("id").cloned().unwrap_or(Value::Null);
                if bytes > BATCH_ANSWER_BYTES {
                    // Later calls are not run once the answers are this large.
                    if call.get("id").is_some() {
                        answers.push(error_response(id, &batch_too_large()));
                    }
                    continue;
                }
                if let Some(answer) = answer_call(state, target, call, &version, &viewer).await {
                    bytes += serde_json::to_vec(&answer).map_or(0, |b| b.len());
                    answers.push(answer);
                }
            }
            (!answers.is_empty()).then_some(Value::Array(answers))
        }
        call => answer_call(state, target, call, &version, &viewer).await,
    };
    match answer {
        Some(body) => http_json(StatusCode::OK, &body),
        None => StatusCode::NO_CONTENT.into_response(),
    }
}

/// A request body declared as anything but JSON is ContentTypeNotSupportedError (HTTP 415); a
/// request without a `Content-Type` is read as JSON.
fn json_content_type(headers: &HeaderMap) -> Result<(), RpcError> {
    let Some(value) = headers.get(header::CONTENT_TYPE) else {
        return Ok(());
    };
    match value.to_str() {
        Ok(media_type) if is_json_media_type(media_type) => Ok(()),
        other => Err(RpcError::new(
            ErrorCode::UnsupportedMediaType,
            format!(
                "Content-Type {} is not supported; JSON-RPC requests are application/json",
                crate::domain::truncate(other.unwrap_or("?"), 60)
            ),
        )),
    }
}

/// Once a batch's answers pass this size, its remaining calls are not run.
const BATCH_ANSWER_BYTES: usize = 4 * 1024 * 1024;

fn batch_too_large() -> RpcError {
    RpcError::new(
        ErrorCode::InvalidRequest,
        "not run: the batch's earlier answers already exceed 4 MiB; send this call again alone",
    )
}

/// Missing or invalid token → 401, missing scope → 403, both with a JSON-RPC error body;
/// otherwise whose private agents the caller sees in the registry's own searches (a hosted
/// agent reads no agents: there, no one's).
async fn authorize(state: &AppState, target: &Target, parts: &Parts) -> Result<Viewer, Response> {
    let caller = match auth::bearer_secret(parts) {
        Ok(secret) => state.auth.authenticate(secret).await,
        Err(err) => Err(err),
    };
    let denied = |err: ApiError| {
        let status = err.code.status();
        let retry_after = err.retry_after_secs;
        let mut rpc = RpcError::from(err);
        if let Some(secs) = retry_after {
            rpc = rpc.with("retryAfterSeconds", secs.to_string());
        }
        let mut response = http_json(status, &error_response(Value::Null, &rpc));
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    };
    let caller = caller
        .and_then(|caller| caller.require(Scope::A2a).map(|()| caller))
        .map_err(denied)?;
    match target {
        Target::Registry => state.auth.viewer_of(&caller).await.map_err(denied),
        Target::Hosted(_) => Ok(Viewer::Anonymous),
    }
}

/// One call of a request or batch; `None` for a notification (no `id`).
async fn answer_call(
    state: &AppState,
    target: &Target,
    call: Value,
    version: &Result<(), RpcError>,
    viewer: &Viewer,
) -> Option<Value> {
    let Value::Object(call) = call else {
        return Some(error_response(
            Value::Null,
            &RpcError::new(ErrorCode::InvalidRequest, "a request must be a JSON object"),
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
            ErrorCode::InvalidRequest,
            "id must be a string, a number or null",
        )),
        (Some(Value::String(v)), Some(Value::String(method))) if v == "2.0" => match version {
            Err(err) => Err(err.clone()),
            Ok(()) => dispatch(state, target, method, call.get("params"), viewer).await,
        },
        (Some(Value::String(v)), _) if v == "2.0" => Err(RpcError::new(
            ErrorCode::InvalidRequest,
            "method must be a string",
        )),
        _ => Err(RpcError::new(
            ErrorCode::InvalidRequest,
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
    viewer: &Viewer,
) -> Result<Value, RpcError> {
    match method {
        // v0.3 clients say `message/send`.
        "SendMessage" | "message/send" => match target {
            Target::Registry => send_message(state, params, viewer).await,
            Target::Hosted(agent) => super::utility::send_message(agent.as_ref(), params).await,
        },
        // The registry and its hosted agents answer every message at once and keep no tasks.
        "GetTask" | "CancelTask" | "tasks/get" | "tasks/cancel" => {
            Err(task_not_found(params.and_then(|p| p.get("id"))))
        }
        // The cards declare `pushNotifications: false`.
        "CreateTaskPushNotificationConfig"
        | "GetTaskPushNotificationConfig"
        | "ListTaskPushNotificationConfigs"
        | "DeleteTaskPushNotificationConfig"
        | "tasks/pushNotificationConfig/set"
        | "tasks/pushNotificationConfig/get"
        | "tasks/pushNotificationConfig/list"
        | "tasks/pushNotificationConfig/delete" => Err(RpcError::new(
            ErrorCode::PushNotificationNotSupported,
            "push notifications are not supported: the agent card declares pushNotifications false",
        )),
        // No card flag opts out of listing tasks: the list is always empty.
        "ListTasks" | "tasks/list" => list_tasks(params),
        // The cards declare `streaming: false` and `extendedAgentCard: false`.
        "SendStreamingMessage"
        | "SubscribeToTask"
        | "GetExtendedAgentCard"
        | "message/stream"
        | "tasks/resubscribe"
        | "agent/getAuthenticatedExtendedCard" => Err(RpcError::new(
            ErrorCode::UnsupportedOperation,
            format!(
                "{method} is not supported: the agent card declares no streaming and no extended \
                 card; use SendMessage"
            ),
        )),
        other => Err(RpcError::new(
            ErrorCode::MethodNotFound,
            format!(
                "method '{}' not found; this agent serves SendMessage",
                crate::domain::truncate(other, 60)
            ),
        )),
    }
}

/// The task states a `ListTasks` filter may name.
const TASK_STATES: [&str; 8] = [
    "TASK_STATE_SUBMITTED",
    "TASK_STATE_WORKING",
    "TASK_STATE_COMPLETED",
    "TASK_STATE_FAILED",
    "TASK_STATE_CANCELED",
    "TASK_STATE_REJECTED",
    "TASK_STATE_INPUT_REQUIRED",
    "TASK_STATE_AUTH_REQUIRED",
];

/// `ListTasks`: the parameters are checked as A2A defines them (camelCase or the proto's
/// snake_case names), and the answer is an empty final page, since no tasks are kept.
fn list_tasks(params: Option<&Value>) -> Result<Value, RpcError> {
    let empty = Map::new();
    let params = match params {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(params)) => params,
        Some(_) => return Err(invalid_params("params must be an object")),
    };
    let get = |camel: &str, snake: &str| {
        params
            .get(camel)
            .or_else(|| params.get(snake))
            .filter(|v| !v.is_null())
    };
    let mut errors = Vec::new();
    let page_size = match get("pageSize", "page_size") {
        None => 50,
        Some(value) => match value.as_i64() {
            Some(size @ 1..=100) => size,
            _ => {
                errors.push(FieldError::new(
                    "pageSize",
                    "must be an integer between 1 and 100 inclusive",
                ));
                50
            }
        },
    };
    if let Some(value) = get("historyLength", "history_length")
        && value.as_i64().is_none_or(|n| n < 0)
    {
        errors.push(FieldError::new(
            "historyLength",
            "must be a non-negative integer",
        ));
    }
    if let Some(value) = get("status", "status") {
        let known = value.as_str().is_some_and(|s| {
            s.is_empty() || s == "TASK_STATE_UNSPECIFIED" || TASK_STATES.contains(&s)
        });
        if !known {
            errors.push(FieldError::new(
                "status",
                format!("must be one of {}", TASK_STATES.join(", ")),
            ));
        }
    }
    // There is never a next page, so no token can name one.
    if let Some(value) = get("pageToken", "page_token")
        && value.as_str() != Some("")
    {
        errors.push(FieldError::new("pageToken", "names no page of this list"));
    }
    if !errors.is_empty() {
        return Err(RpcError {
            field_errors: errors,
            ..invalid_params("invalid ListTasks parameters")
        });
    }
    Ok(json!({"tasks": [], "nextPageToken": "", "pageSize": page_size, "totalSize": 0}))
}

/// TaskNotFoundError for a task id a client named (none exist: no tasks are kept).
fn task_not_found(task_id: Option<&Value>) -> RpcError {
    let error = RpcError::new(
        ErrorCode::TaskNotFound,
        "task not found: this agent answers every message at once and keeps no tasks",
    );
    match task_id.and_then(Value::as_str) {
        Some(id) => error.with("taskId", crate::domain::truncate(id, 100)),
        None => error,
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
    RpcError::new(ErrorCode::InvalidParameter, message)
}

/// Parse `SendMessage` params: `{message: {parts, metadata?, contextId?, taskId?}, metadata?,
/// skill_id?, configuration?}`. Everything is checked here, before any agent or upstream is
/// called: a `taskId` is TaskNotFoundError (no tasks are kept), a part this agent cannot read
/// (`raw`, `url`, a v0.3 `file`, or a media type other than text or JSON) or output modes it
/// cannot produce are ContentTypeNotSupportedError.
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
    match message.get("taskId") {
        None | Some(Value::Null) => {}
        Some(Value::String(id)) if id.is_empty() => {}
        Some(task_id) => return Err(task_not_found(Some(task_id))),
    }
    check_output_modes(params.get("configuration"))?;
    let mut texts = Vec::new();
    let mut data = Map::new();
    for (index, part) in parts.iter().enumerate() {
        let part = part
            .as_object()
            .ok_or_else(|| invalid_params(format!("parts[{index}] must be an object")))?;
        if let Some(kind) = ["raw", "url", "file"]
            .into_iter()
            .find(|kind| part.contains_key(*kind))
        {
            return Err(unsupported_content(index, &format!("a {kind} part")));
        }
        // v0.3 parts carry `kind`; v1.0 parts are told apart by their member.
        match (part.get("text"), part.get("data")) {
            (Some(Value::String(text)), None) => {
                check_media_type(index, part, is_text_media_type)?;
                texts.push(text.trim().to_owned());
            }
            (None, Some(Value::Object(map))) => {
                check_media_type(index, part, is_json_media_type)?;
                data.extend(map.clone());
            }
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
    let context_id = match message.get("contextId") {
        None | Some(Value::Null) => None,
        Some(Value::String(id)) => Some(Value::String(id.clone())),
        Some(_) => return Err(invalid_params("params.message.contextId must be a string")),
    };
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
        context_id,
    })
}

/// The media types every agent here reads and writes: the cards' input and output modes.
pub const MEDIA_TYPES: [&str; 2] = ["application/json", "text/plain"];

fn unsupported_content(index: usize, what: &str) -> RpcError {
    RpcError::new(
        ErrorCode::ContentTypeNotSupported,
        format!(
            "parts[{index}]: {} is not supported; this agent reads text and JSON data parts",
            crate::domain::truncate(what, 80)
        ),
    )
}

/// The part's `mediaType` (v0.3: `mimeType` in its metadata is not consulted), checked by `fits`.
fn check_media_type(
    index: usize,
    part: &Map<String, Value>,
    fits: fn(&str) -> bool,
) -> Result<(), RpcError> {
    match part.get("mediaType") {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(media_type)) if media_type.is_empty() || fits(media_type) => Ok(()),
        Some(Value::String(media_type)) => Err(unsupported_content(
            index,
            &format!("media type {media_type}"),
        )),
        Some(_) => Err(invalid_params(format!(
            "parts[{index}].mediaType must be a string"
        ))),
    }
}

/// A text part's content is read as text, whatever its text subtype.
fn is_text_media_type(media_type: &str) -> bool {
    essence(media_type).starts_with("text/")
}

/// `configuration.acceptedOutputModes`, when given, must include a mode the agent answers in.
fn check_output_modes(configuration: Option<&Value>) -> Result<(), RpcError> {
    let Some(modes) = configuration.and_then(|c| c.get("acceptedOutputModes")) else {
        return Ok(());
    };
    let modes = match modes {
        Value::Null => return Ok(()),
        Value::Array(modes) => modes,
        _ => {
            return Err(invalid_params(
                "configuration.acceptedOutputModes must be an array of media types",
            ));
        }
    };
    let answerable = modes.is_empty()
        || modes.iter().filter_map(Value::as_str).any(|mode| {
            let mode = essence(mode);
            mode == "*/*" || mode == "text/*" || MEDIA_TYPES.contains(&mode.as_str())
        });
    if answerable {
        Ok(())
    } else {
        Err(RpcError::new(
            ErrorCode::ContentTypeNotSupported,
            "configuration.acceptedOutputModes: this agent answers in application/json and \
             text/plain only",
        ))
    }
}

async fn send_message(
    state: &AppState,
    params: Option<&Value>,
    viewer: &Viewer,
) -> Result<Value, RpcError> {
    let incoming = parse_send_message(params)?;
    let (data, text) = match incoming
        .skill_id
        .as_deref()
        .unwrap_or(skills::SEARCH_AGENTS)
    {
        skills::SEARCH_AGENTS if skills::asks_for_ard(&incoming.data) => {
            skills::ard_search(state, incoming.data.clone(), &incoming.text, viewer).await?
        }
        skills::SEARCH_AGENTS => {
            let mut body = incoming.data.clone();
            if !incoming.text.is_empty() {
                body.insert("query".to_owned(), Value::String(incoming.text.clone()));
            }
            let mut request = request::from_json(&Value::Object(body), SEARCH_LIMITS)
                .map_err(|err| RpcError::from(ApiError::from(err)))?;
            request.viewer = viewer.clone();
            let page = skills::search(state, &request).await?;
            let summary = crate::wire::found_summary(page.agents.len(), page.total, &request.text);
            (crate::wire::page_json(&page), summary)
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
            let card = skills::resolve(state, &package, viewer).await?;
            (json!({"card": card}), format!("Agent card of {package}"))
        }
        other => {
            return Err(invalid_params(format!(
                "unknown skill '{}'; this agent has search_agents and resolve_package",
                crate::domain::truncate(other, 60)
            )));
        }
    };
    Ok(agent_message(data, text, incoming.context_id))
}

/// A `SendMessage` result: `{"message": {messageId, contextId, role: ROLE_AGENT, parts: [data,
/// text]}}`, in the caller's context when it named one, else in a new one.
pub fn agent_message(data: Value, text: String, context_id: Option<Value>) -> Value {
    let context_id = context_id
        .filter(|id| id.as_str().is_some_and(|id| !id.is_empty()))
        .unwrap_or_else(|| Value::String(format!("ctx_{}", ulid::Ulid::new())));
    json!({"message": {
        "messageId": format!("msg_{}", ulid::Ulid::new()),
        "contextId": context_id,
        "role": "ROLE_AGENT",
        "parts": [
            {"data": data, "mediaType": "application/json"},
            {"text": text},
        ],
    }})
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
            json!({"message": {"parts": [{}]}}),
            json!({"message": {"parts": [{"text": "x", "mediaType": 3}]}}),
            json!({"message": {"parts": []}, "configuration": {"acceptedOutputModes": "x"}}),
        ] {
            let err = parse_send_message(Some(&params))
                .map(|_| ())
                .expect_err("invalid");
            assert_eq!(err.code.jsonrpc_code(), -32602, "{params}");
        }
    }

    #[test]
    fn parts_of_other_media_types_are_content_type_not_supported() {
        for params in [
            json!({"message": {"parts": [{"raw": "aGVsbG8=", "mediaType": "image/png"}]}}),
            json!({"message": {"parts": [{"url": "https://x.example/a.pdf"}]}}),
            json!({"message": {"parts": [{"kind": "file", "file": {"uri": "https://x.example"}}]}}),
            json!({"message": {"parts": [{"text": "x", "mediaType": "image/png"}]}}),
            json!({"message": {"parts": [{"data": {}, "mediaType": "text/csv"}]}}),
            json!({"message": {"parts": [{"text": "x"}]},
                   "configuration": {"acceptedOutputModes": ["image/png", "audio/ogg"]}}),
        ] {
            let err = parse_send_message(Some(&params))
                .map(|_| ())
                .expect_err("unsupported");
            assert_eq!(err.code.jsonrpc_code(), -32005, "{params}");
            assert_eq!(err.code.a2a_reason(), Some("CONTENT_TYPE_NOT_SUPPORTED"));
        }
        for params in [
            json!({"message": {"parts": [{"text": "x", "mediaType": "text/markdown"}]}}),
            json!({"message": {"parts": [{"data": {}, "mediaType": "application/ld+json"}]}}),
            json!({"message": {"parts": [{"text": "x"}]},
                   "configuration": {"acceptedOutputModes": ["text/plain; charset=utf-8"]}}),
            json!({"message": {"parts": [{"text": "x"}]},
                   "configuration": {"acceptedOutputModes": []}}),
        ] {
            assert!(parse_send_message(Some(&params)).is_ok(), "{params}");
        }
    }

    #[test]
    fn a_message_for_a_task_is_task_not_found() {
        let params = json!({"message": {"taskId": "t-1", "parts": [{"text": "x"}]}});
        let err = parse_send_message(Some(&params))
            .map(|_| ())
            .expect_err("no tasks");
        assert_eq!(err.code.jsonrpc_code(), -32001);
        let error = err.to_json();
        assert_eq!(error["data"][0]["reason"], "TASK_NOT_FOUND");
        assert_eq!(error["data"][0]["domain"], "a2a-protocol.org");
        assert_eq!(error["data"][0]["metadata"]["taskId"], "t-1");
    }

    #[test]
    fn registry_errors_carry_an_error_info_in_the_registry_domain_and_field_violations() {
        let err = RpcError::from(ApiError::validation(vec![FieldError::new(
            "limit",
            "must be at most 50",
        )]));
        let error = err.to_json();
        assert_eq!(error["code"], -32602);
        let data = error["data"].as_array().expect("data is an array");
        assert_eq!(data[0]["@type"], "type.googleapis.com/google.rpc.ErrorInfo");
        assert_eq!(data[0]["reason"], "VALIDATION_FAILED");
        assert_eq!(data[0]["domain"], REGISTRY_ERROR_DOMAIN);
        assert_eq!(data[0]["metadata"]["code"], "validation_failed");
        assert_eq!(
            data[1]["@type"],
            "type.googleapis.com/google.rpc.BadRequest"
        );
        assert_eq!(data[1]["fieldViolations"][0]["field"], "limit");
    }

    #[test]
    fn versions_other_than_1_0_are_refused() {
        let mut headers = HeaderMap::new();
        assert!(version_supported(&headers, None).is_ok());
        headers.insert("a2a-version", HeaderValue::from_static("1.0"));
        assert!(version_supported(&headers, None).is_ok());
        headers.insert("a2a-version", HeaderValue::from_static("0.3"));
        let err = version_supported(&headers, None).expect_err("refused");
        assert_eq!(err.code.jsonrpc_code(), -32009);
        let query = version_supported(&HeaderMap::new(), Some("A2A-Version=2.0"));
        assert!(query.is_err());
    }
}
