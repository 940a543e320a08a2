//! The Streamable HTTP transport at `/mcp`.
//!
//! Every request first passes the `Origin` check (a browser page on a foreign origin gets 403:
//! DNS-rebinding protection) and, when it sends a bearer token, the same token check as the REST
//! API (an invalid token is 401, never ignored). Then a POST is served in one of two eras:
//! - stateless (2026-07-28, chosen by `MCP-Protocol-Version`): the request's `_meta` names its
//!   revision, the `Mcp-Method` and `Mcp-Name` headers must match the body; no session;
//! - handshake (2025-11-25 back to 2024-11-05): `initialize` opens a session named by the
//!   `Mcp-Session-Id` answer header, which every later request carries; `DELETE` ends it.
//!
//! Answers are JSON, or one Server-Sent Event when the client accepts only `text/event-stream`.
//! There is no GET stream: this server sends nothing unasked (405).

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::future::BoxFuture;
use serde_json::Value;

use super::McpServer;
use super::protocol::{Message, Revision, RpcError, code};
use super::session::Sessions;
use crate::auth::{Caller, Viewer};
use crate::error::ApiResult;

pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";
pub const METHOD_HEADER: &str = "mcp-method";
pub const NAME_HEADER: &str = "mcp-name";

/// Resolves a bearer secret to its caller and whose private agents it sees, as the REST API
/// does (the composition supplies it, so this module needs nothing else of the application).
pub type Authenticate =
    Arc<dyn Fn(String) -> BoxFuture<'static, ApiResult<(Caller, Viewer)>> + Send + Sync>;

/// What the `/mcp` handlers share.
pub struct McpHttp {
    pub server: McpServer,
    pub sessions: Sessions,
    /// Origins (`scheme://host[:port]`, lowercase) a browser may call from.
    pub allowed_origins: Vec<String>,
    pub authenticate: Authenticate,
}

impl McpHttp {
    /// `allowed_origins` are normalised; the public URL's own origin is always allowed.
    pub fn new(
        server: McpServer,
        sessions: Sessions,
        base_url: &str,
        allowed_origins: &[String],
        authenticate: Authenticate,
    ) -> Self {
        let mut origins: Vec<String> = allowed_origins
            .iter()
            .chain(std::iter::once(&base_url.to_owned()))
            .filter_map(|origin| origin_of(origin))
            .collect();
        origins.sort();
        origins.dedup();
        Self {
            server,
            sessions,
            allowed_origins: origins,
            authenticate,
        }
    }
}

/// `scheme://host[:port]` of a URL, lowercase, default port left out.
fn origin_of(text: &str) -> Option<String> {
    let url = url::Url::parse(text.trim()).ok()?;
    match url.origin() {
        origin @ url::Origin::Tuple(..) => Some(origin.ascii_serialization()),
        url::Origin::Opaque(_) => None,
    }
}

/// Who is calling: anonymous, or a token's owner.
type Owner = Option<String>;

/// The checks every method shares: the origin, then the token when one is sent; who calls,
/// and whose private agents it sees.
async fn admit(mcp: &McpHttp, headers: &HeaderMap) -> Result<(Owner, Viewer), Response> {
    if let Some(origin) = headers.get(header::ORIGIN) {
        let allowed = origin
            .to_str()
            .ok()
            .and_then(origin_of)
            .is_some_and(|origin| mcp.allowed_origins.contains(&origin));
        if !allowed {
            let error = RpcError::invalid_request(
                "this Origin may not call the MCP endpoint (REGISTRY_MCP_ALLOWED_ORIGINS lists \
                 the browser origins that may)",
            )
            .with_status(StatusCode::FORBIDDEN);
            return Err(json_error(&error, &Value::Null));
        }
    }
    if headers.get(header::AUTHORIZATION).is_none() {
        return Ok((None, Viewer::Anonymous));
    }
    let secret = headers
        .get(header::AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split_once(' '))
        .filter(|(scheme, secret)| {
            scheme.eq_ignore_ascii_case("bearer") && !secret.trim().is_empty()
        })
        .map(|(_, secret)| secret.trim().to_owned());
    let refused = |error: crate::error::ApiError| {
        let retry_after = error.retry_after_secs;
        let mut response = json_error(&RpcError::from(error), &Value::Null);
        if let Some(secs) = retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    };
    let Some(secret) = secret else {
        return Err(refused(crate::error::ApiError::unauthorized(
            "expected Authorization: Bearer <token>",
        )));
    };
    match (mcp.authenticate)(secret).await {
        Ok((caller, viewer)) => Ok((Some(caller.owner), viewer)),
        Err(error) => Err(refused(error)),
    }
}

/// A JSON-RPC error alone, at its HTTP status.
fn json_error(error: &RpcError, id: &Value) -> Response {
    let mut response = (
        error.status,
        [(header::CONTENT_TYPE, "application/json")],
        error.response(id).to_string(),
    )
        .into_response();
    if error.status == StatusCode::UNAUTHORIZED {
        response
            .headers_mut()
            .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
    }
    response
}

/// How the client wants the answer to a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Json,
    EventStream,
}

/// JSON unless the client accepts only `text/event-stream`; `None` when it accepts neither.
fn framing(headers: &HeaderMap) -> Option<Framing> {
    let accepted: Vec<String> = headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|item| {
            let mut parts = item.split(';').map(str::trim);
            let media = parts.next()?.to_ascii_lowercase();
            let refused = parts.any(|param| {
                param
                    .strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            (!refused && !media.is_empty()).then_some(media)
        })
        .collect();
    if accepted.is_empty() {
        return Some(Framing::Json);
    }
    let takes = |media: &str| accepted.iter().any(|a| a == media);
    if takes("application/json") || takes("application/*") || takes("*/*") {
        Some(Framing::Json)
    } else if takes("text/event-stream") || takes("text/*") {
        Some(Framing::EventStream)
    } else {
        None
    }
}

/// A JSON-RPC response in the framing asked for.
fn answer(body: &Value, status: StatusCode, framing: Framing) -> Response {
    match framing {
        Framing::Json => (
            status,
            [(header::CONTENT_TYPE, "application/json")],
            body.to_string(),
        )
            .into_response(),
        Framing::EventStream => (
            status,
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
                (header::HeaderName::from_static("x-accel-buffering"), "no"),
            ],
            format!("event: message\ndata: {body}\n\n"),
        )
            .into_response(),
    }
}

fn header_text<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .map(|value| value.to_str().unwrap_or("\u{fffd}"))
}

/// The Streamable HTTP endpoint: one JSON-RPC message per POST.
#[utoipa::path(post, path = "/mcp", tag = "mcp",
    request_body(content = crate::wire::schema::McpMessage, description = "One JSON-RPC 2.0 message of the Model Context Protocol: `initialize`, `server/discover`, `ping`, `tools/list`, `tools/call`, `resources/list`, `resources/templates/list`, `resources/read`, or a notification. See docs/mcp.md."),
    params(
        ("MCP-Protocol-Version" = Option<String>, Header, description = "`2026-07-28` for stateless requests (their `_meta` names it too); a handshake revision, or absent, for session requests"),
        ("Mcp-Session-Id" = Option<String>, Header, description = "The session `initialize` opened (handshake revisions)"),
        ("Mcp-Method" = Option<String>, Header, description = "Stateless requests: the body's `method`"),
        ("Mcp-Name" = Option<String>, Header, description = "Stateless `tools/call` and `resources/read`: the body's `params.name` or `params.uri`"),
        ("Origin" = Option<String>, Header, description = "A browser's origin: the public URL's or one of `--mcp-allowed-origins`, else 403"),
    ),
    responses(
        (status = 200, description = "The JSON-RPC response (a result, or an error with its code); `initialize` answers the `Mcp-Session-Id` header. As `text/event-stream` (one `message` event) when the client accepts only that.",
            content((crate::wire::schema::McpResponse = "application/json"), (String = "text/event-stream")),
            headers(("Mcp-Session-Id" = String, description = "After `initialize`: the session's id"))),
        (status = 202, description = "A notification or a response was accepted"),
        (status = 400, description = "Not JSON-RPC, no session (handshake revisions), or a stateless request whose headers or `_meta` are wrong (`-32020`, `-32022`, `-32602`)", body = crate::wire::schema::McpErrorResponse),
        (status = 401, description = "`unauthorized`: a bearer token was sent and is not valid (JSON-RPC error -32000)", body = crate::wire::schema::McpErrorResponse),
        (status = 403, description = "The `Origin` is not allowed", body = crate::wire::schema::McpErrorResponse),
        (status = 404, description = "An unknown or expired session (open a new one), or a stateless request for a method not served (-32601)", body = crate::wire::schema::McpErrorResponse),
        (status = 406, description = "The client accepts neither `application/json` nor `text/event-stream`", body = crate::wire::schema::McpErrorResponse),
        (status = 413, description = "The body is larger than 1 MiB: a problem when `Content-Length` says so, else a JSON-RPC error",
            content((crate::wire::schema::McpErrorResponse = "application/json"), (crate::error::Problem = "application/problem+json"))),
        (status = 415, description = "A Content-Type other than JSON", body = crate::wire::schema::McpErrorResponse),
        (status = 429, description = "`rate_limited`: too many requests from this client (a problem) or with this token (a JSON-RPC error)",
            content((crate::wire::schema::McpErrorResponse = "application/json"), (crate::error::Problem = "application/problem+json")),
            headers(("Retry-After" = i64, description = "Seconds to wait."))),
    ))]
pub async fn post(
    State(mcp): State<Arc<McpHttp>>,
    headers: HeaderMap,
    body: Result<Bytes, BytesRejection>,
) -> Response {
    let (owner, viewer) = match admit(&mcp, &headers).await {
        Ok(admitted) => admitted,
        Err(response) => return response,
    };
    match serve_post(&mcp, &headers, (owner, viewer), body).await {
        Ok(response) | Err(response) => response,
    }
}

async fn serve_post(
    mcp: &McpHttp,
    headers: &HeaderMap,
    (owner, viewer): (Owner, Viewer),
    body: Result<Bytes, BytesRejection>,
) -> Result<Response, Response> {
    let server = mcp.server.as_viewer(viewer);
    let content_type = header_text(headers, header::CONTENT_TYPE.as_str());
    if content_type.is_some_and(|media| !crate::wire::media::is_json_media_type(media)) {
        let error = RpcError::invalid_request("MCP messages are sent as application/json")
            .with_status(StatusCode::UNSUPPORTED_MEDIA_TYPE);
        return Err(json_error(&error, &Value::Null));
    }
    let framing = framing(headers).ok_or_else(|| {
        let error = RpcError::invalid_request(
            "the client must accept application/json or text/event-stream",
        )
        .with_status(StatusCode::NOT_ACCEPTABLE);
        json_error(&error, &Value::Null)
    })?;
    let body = body.map_err(|rejection| {
        let error = RpcError::invalid_request(format!(
            "cannot read the request body: {}",
            rejection.body_text()
        ))
        .with_status(rejection.status());
        json_error(&error, &Value::Null)
    })?;
    let value: Value = serde_json::from_slice(&body).map_err(|err| {
        let error = RpcError::new(code::PARSE_ERROR, format!("parse error: {err}"));
        json_error(&error, &Value::Null)
    })?;
    let message = Message::parse(value).map_err(|(id, error)| json_error(&error, &id))?;
    let stateless = header_text(headers, VERSION_HEADER)
        .is_some_and(|version| Revision::parse(version).is_none_or(Revision::is_modern));
    let (id, method, params) = match message {
        Message::Response | Message::Notification { .. } => {
            return Ok(StatusCode::ACCEPTED.into_response());
        }
        Message::Request { id, method, params } => (id, method, params),
    };
    let reply = |result: Result<Value, RpcError>, status_of_errors: Option<StatusCode>| match result
    {
        Ok(result) => answer(
            &serde_json::json!({"jsonrpc": "2.0", "id": id, "result": result}),
            StatusCode::OK,
            framing,
        ),
        Err(error) => answer(
            &error.response(&id),
            status_of_errors.unwrap_or(error.status),
            framing,
        ),
    };
    if stateless {
        let result = match check_stateless(headers, &method, params.as_ref()) {
            Ok(revision) => server.answer(&method, params.as_ref(), revision).await,
            Err(error) => Err(error),
        };
        return Ok(reply(result, None));
    }
    if method == "initialize" {
        let requested = params
            .as_ref()
            .and_then(|params| params.get("protocolVersion"))
            .and_then(Value::as_str);
        let revision = Revision::negotiate(requested);
        let session = mcp.sessions.open(revision, owner);
        let mut response = reply(Ok(McpServer::initialize(revision)), None);
        if let Ok(value) = HeaderValue::from_str(&session) {
            response.headers_mut().insert(SESSION_HEADER, value);
        }
        return Ok(response);
    }
    let revision =
        session_of(mcp, headers, owner.as_deref()).map_err(|error| json_error(&error, &id))?;
    // A handshake session answers JSON-RPC errors with HTTP 200: the error is in the body.
    let result = server.answer(&method, params.as_ref(), revision).await;
    Ok(reply(result, Some(StatusCode::OK)))
}

/// The revision of the session a handshake-era request names: 400 without one, 404 for one
/// that is unknown, expired, ended or another caller's (the client opens a new one).
fn session_of(
    mcp: &McpHttp,
    headers: &HeaderMap,
    owner: Option<&str>,
) -> Result<Revision, RpcError> {
    let Some(session) = header_text(headers, SESSION_HEADER) else {
        return Err(RpcError::invalid_request(
            "no Mcp-Session-Id: send initialize first, or a stateless request \
             (MCP-Protocol-Version: 2026-07-28 with params._meta)",
        ));
    };
    mcp.sessions.touch(session, owner).ok_or_else(|| {
        RpcError::invalid_request(
            "no such session: it expired, was ended or was never opened; send initialize again",
        )
        .with_status(StatusCode::NOT_FOUND)
    })
}

/// The stateless revision's checks: `_meta` names a served revision, and the routing headers
/// say what the body says.
fn check_stateless(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
) -> Result<Revision, RpcError> {
    let meta_version = super::protocol::request_meta(params)
        .and_then(|meta| meta.get(super::protocol::META_PROTOCOL_VERSION));
    let revision = super::protocol::modern_revision(params);
    if revision
        .as_ref()
        .is_err_and(|error| error.code == code::INVALID_PARAMS)
    {
        return revision;
    }
    if header_text(headers, VERSION_HEADER) != meta_version.and_then(Value::as_str) {
        return Err(RpcError::header_mismatch(
            "the MCP-Protocol-Version header does not match params._meta's protocol version",
        ));
    }
    if header_text(headers, METHOD_HEADER) != Some(method) {
        return Err(RpcError::header_mismatch(
            "the Mcp-Method header is missing or does not match the body's method",
        ));
    }
    let named = match method {
        "tools/call" => params.and_then(|params| params.get("name")),
        "resources/read" => params.and_then(|params| params.get("uri")),
        _ => None,
    };
    if let Some(named) = named.and_then(Value::as_str) {
        let header = header_text(headers, NAME_HEADER).map(decode_header_value);
        if header.as_deref() != Some(named) {
            return Err(RpcError::header_mismatch(
                "the Mcp-Name header is missing or does not match the body's name or uri",
            ));
        }
    }
    revision
}

/// A header value as sent: plain, or `=?base64?…?=` for values that are not plain ASCII.
fn decode_header_value(value: &str) -> String {
    use base64::Engine;
    value
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
        .and_then(|encoded| {
            base64::engine::general_purpose::STANDARD
                .decode(encoded)
                .ok()
        })
        .and_then(|bytes| String::from_utf8(bytes).ok())
        .unwrap_or_else(|| value.to_owned())
}

/// No stream of unasked messages: this server sends none.
#[utoipa::path(get, path = "/mcp", tag = "mcp",
    responses(
        (status = 401, description = "`unauthorized`: a bearer token was sent and is not valid", body = crate::wire::schema::McpErrorResponse),
        (status = 403, description = "The `Origin` is not allowed", body = crate::wire::schema::McpErrorResponse),
        (status = 405, description = "The server sends no unasked messages, so there is no stream to open", body = crate::wire::schema::McpErrorResponse),
        (status = 429, description = "`rate_limited`: too many requests from this client (a problem) or with this token (a JSON-RPC error)",
            content((crate::wire::schema::McpErrorResponse = "application/json"), (crate::error::Problem = "application/problem+json")),
            headers(("Retry-After" = i64, description = "Seconds to wait."))),
    ))]
pub async fn get(State(mcp): State<Arc<McpHttp>>, headers: HeaderMap) -> Response {
    if let Err(response) = admit(&mcp, &headers).await {
        return response;
    }
    let error = RpcError::invalid_request(
        "this server sends no unasked messages, so there is no stream to open; POST requests",
    )
    .with_status(StatusCode::METHOD_NOT_ALLOWED);
    let mut response = json_error(&error, &Value::Null);
    response
        .headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST, DELETE"));
    response
}

/// End a session (handshake revisions).
#[utoipa::path(delete, path = "/mcp", tag = "mcp",
    params(("Mcp-Session-Id" = String, Header, description = "The session to end")),
    responses(
        (status = 204, description = "The session is ended"),
        (status = 400, description = "No `Mcp-Session-Id`", body = crate::wire::schema::McpErrorResponse),
        (status = 401, description = "`unauthorized`: a bearer token was sent and is not valid", body = crate::wire::schema::McpErrorResponse),
        (status = 403, description = "The `Origin` is not allowed", body = crate::wire::schema::McpErrorResponse),
        (status = 404, description = "No such session (expired, ended, never opened, or another caller's)", body = crate::wire::schema::McpErrorResponse),
        (status = 429, description = "`rate_limited`: too many requests from this client (a problem) or with this token (a JSON-RPC error)",
            content((crate::wire::schema::McpErrorResponse = "application/json"), (crate::error::Problem = "application/problem+json")),
            headers(("Retry-After" = i64, description = "Seconds to wait."))),
    ))]
pub async fn delete(State(mcp): State<Arc<McpHttp>>, headers: HeaderMap) -> Response {
    let owner = match admit(&mcp, &headers).await {
        Ok((owner, _)) => owner,
        Err(response) => return response,
    };
    let Some(session) = header_text(&headers, SESSION_HEADER) else {
        let error = RpcError::invalid_request("DELETE ends the session Mcp-Session-Id names");
        return json_error(&error, &Value::Null);
    };
    if mcp.sessions.close(session, owner.as_deref()) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        let error = RpcError::invalid_request("no such session").with_status(StatusCode::NOT_FOUND);
        json_error(&error, &Value::Null)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn accept(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(
            header::ACCEPT,
            HeaderValue::from_str(value).expect("header"),
        );
        headers
    }

    #[test]
    fn the_answer_is_json_unless_only_an_event_stream_is_accepted() {
        assert_eq!(framing(&HeaderMap::new()), Some(Framing::Json));
        assert_eq!(
            framing(&accept("application/json, text/event-stream")),
            Some(Framing::Json)
        );
        assert_eq!(
            framing(&accept("text/event-stream")),
            Some(Framing::EventStream)
        );
        assert_eq!(
            framing(&accept("application/json;q=0, text/event-stream")),
            Some(Framing::EventStream)
        );
        assert_eq!(framing(&accept("text/html")), None);
    }

    #[test]
    fn origins_compare_as_scheme_host_and_port() {
        assert_eq!(
            origin_of("HTTP://Registry.Example:80/x").as_deref(),
            Some("http://registry.example")
        );
        assert_eq!(
            origin_of("https://a.example:8443").as_deref(),
            Some("https://a.example:8443")
        );
        assert_eq!(origin_of("null"), None);
    }

    #[test]
    fn encoded_header_values_are_decoded() {
        assert_eq!(
            decode_header_value("=?base64?SGVsbG8sIOS4lueVjA==?="),
            "Hello, 世界"
        );
        assert_eq!(decode_header_value("search_agents"), "search_agents");
    }
}
