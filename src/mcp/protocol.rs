//! MCP's JSON-RPC wire: the protocol revisions served (`Revision`, kept in `wire::mcp` since the
//! registry's card and the OpenAPI document name them too), a message as received, the protocol's
//! errors with their codes, and how a result is dressed for the revision it answers.

use axum::http::StatusCode;
use serde_json::{Map, Value, json};

use crate::error::{ApiError, ErrorCode};

pub use crate::wire::mcp::Revision;

/// `_meta` keys of the stateless revision.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// JSON-RPC and MCP error codes.
pub mod code {
    pub const PARSE_ERROR: i64 = -32700;
    pub const INVALID_REQUEST: i64 = -32600;
    pub const METHOD_NOT_FOUND: i64 = -32601;
    pub const INVALID_PARAMS: i64 = -32602;
    pub const INTERNAL_ERROR: i64 = -32603;
    /// A resource that does not exist, before 2026-07-28 (which uses `INVALID_PARAMS`).
    pub const RESOURCE_NOT_FOUND: i64 = -32002;
    /// The HTTP headers disagree with the body, or a required one is missing (2026-07-28).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// A request in a protocol revision the server does not speak (2026-07-28).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// A JSON-RPC error as MCP answers it, with the HTTP status it travels with.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
    pub data: Option<Value>,
    /// The HTTP status of the answer on the stateless revision, and of transport-level refusals
    /// (a missing session, a foreign origin) on every revision.
    pub status: StatusCode,
}

impl RpcError {
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        let status = match code {
            code::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
            code::PARSE_ERROR
            | code::INVALID_REQUEST
            | code::INVALID_PARAMS
            | code::HEADER_MISMATCH
            | code::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
            _ => StatusCode::OK,
        };
        Self {
            code,
            message: message.into(),
            data: None,
            status,
        }
    }

    pub fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    pub fn with_data(mut self, data: Value) -> Self {
        self.data = Some(data);
        self
    }

    pub fn invalid_request(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_REQUEST, message)
    }

    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }

    pub fn method_not_found(method: &str) -> Self {
        Self::new(
            code::METHOD_NOT_FOUND,
            format!(
                "method '{}' is not served here",
                crate::domain::truncate(method, 60)
            ),
        )
    }

    pub fn unsupported_version(requested: &Value) -> Self {
        Self::new(
            code::UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
        )
        .with_data(json!({"supported": Revision::supported(), "requested": requested}))
    }

    pub fn header_mismatch(message: impl Into<String>) -> Self {
        Self::new(code::HEADER_MISMATCH, message)
    }

    /// `{code, message, data?}`.
    pub fn to_json(&self) -> Value {
        let mut error = json!({"code": self.code, "message": self.message});
        if let Some(data) = &self.data {
            error["data"] = data.clone();
        }
        error
    }

    /// The whole JSON-RPC error response (`id` null when the request's id is unknown).
    pub fn response(&self, id: &Value) -> Value {
        json!({"jsonrpc": "2.0", "id": id, "error": self.to_json()})
    }
}

/// A registry error at the protocol level: its JSON-RPC code is the one every JSON-RPC
/// transport of the registry uses for it; its HTTP status is the REST one.
impl From<ApiError> for RpcError {
    fn from(err: ApiError) -> Self {
        let message = match err.code {
            ErrorCode::Internal => "internal error".to_owned(),
            _ => err.detail,
        };
        let mut rpc = Self::new(err.code.jsonrpc_code(), message).with_status(err.code.status());
        rpc.data = Some(json!({"code": err.code.as_str()}));
        if let Some(secs) = err.retry_after_secs {
            rpc.data = Some(json!({"code": err.code.as_str(), "retryAfterSeconds": secs}));
        }
        rpc
    }
}

/// One JSON-RPC message as received.
#[derive(Debug, Clone, PartialEq)]
pub enum Message {
    /// A request: it gets an answer.
    Request {
        id: Value,
        method: String,
        params: Option<Value>,
    },
    /// A notification: no answer, ever.
    Notification { method: String },
    /// A response to a request of ours (this server sends none, so it is only acknowledged).
    Response,
}

impl Message {
    /// Reads one message; the error carries the request's id when it had a usable one.
    pub fn parse(value: Value) -> Result<Self, (Value, RpcError)> {
        let Value::Object(mut object) = value else {
            let error = if value.is_array() {
                "batches are not accepted: send one JSON-RPC message per request"
            } else {
                "a JSON-RPC message must be an object"
            };
            return Err((Value::Null, RpcError::invalid_request(error)));
        };
        let id = object.remove("id");
        let reply_id = match &id {
            Some(id @ (Value::String(_) | Value::Number(_))) => id.clone(),
            _ => Value::Null,
        };
        if object.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return Err((
                reply_id,
                RpcError::invalid_request("jsonrpc must be \"2.0\""),
            ));
        }
        let method = match object.remove("method") {
            Some(Value::String(method)) => method,
            Some(_) => {
                return Err((
                    reply_id,
                    RpcError::invalid_request("method must be a string"),
                ));
            }
            None if object.contains_key("result") || object.contains_key("error") => {
                return Ok(Self::Response);
            }
            None => return Err((reply_id, RpcError::invalid_request("method is missing"))),
        };
        let params = object.remove("params");
        if !matches!(params, None | Some(Value::Object(_))) {
            return Err((
                reply_id,
                RpcError::invalid_request("params must be an object"),
            ));
        }
        match id {
            None => Ok(Self::Notification { method }),
            Some(Value::String(_) | Value::Number(_)) => Ok(Self::Request {
                id: reply_id,
                method,
                params,
            }),
            Some(_) => Err((
                Value::Null,
                RpcError::invalid_request("id must be a string or a number"),
            )),
        }
    }
}

/// The string `params[key]` of a `method` request; -32602 naming it when it is missing.
pub fn required_param<'a>(
    params: Option<&'a Value>,
    method: &str,
    key: &str,
) -> Result<&'a str, RpcError> {
    params
        .and_then(|params| params.get(key))
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::invalid_params(format!("{method} needs params.{key}, a string")))
}

/// The `_meta` of a request's params, when it is an object.
pub fn request_meta(params: Option<&Value>) -> Option<&Map<String, Value>> {
    params?.get("_meta")?.as_object()
}

/// The revision a stateless request declares in its `_meta`, checked as the 2026-07-28
/// revision asks: `_meta` carries the protocol version and the client's capabilities, and the
/// version is one served here.
pub fn modern_revision(params: Option<&Value>) -> Result<Revision, RpcError> {
    let Some(meta) = request_meta(params) else {
        return Err(RpcError::invalid_params(format!(
            "params._meta must be an object carrying '{META_PROTOCOL_VERSION}' and \
             '{META_CLIENT_CAPABILITIES}' (or open a session with initialize)"
        )));
    };
    let missing: Vec<&str> = [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES]
        .into_iter()
        .filter(|key| !meta.contains_key(*key))
        .collect();
    if !missing.is_empty() {
        return Err(RpcError::invalid_params(format!(
            "params._meta lacks {}",
            missing.join(" and ")
        )));
    }
    let requested = &meta[META_PROTOCOL_VERSION];
    let Some(text) = requested.as_str() else {
        return Err(RpcError::invalid_params(format!(
            "{META_PROTOCOL_VERSION} must be a string"
        )));
    };
    match Revision::parse(text) {
        Some(revision) if revision.is_modern() => Ok(revision),
        _ => Err(RpcError::unsupported_version(requested)),
    }
}

/// Who this server is, as `initialize` and `server/discover` say.
pub fn server_info() -> Value {
    json!({
        "name": "agent-registry",
        "title": "Agent Registry",
        "version": env!("CARGO_PKG_VERSION"),
    })
}

/// What this server offers: tools and resources, with no change notifications or
/// subscriptions (the lists are fixed for the life of the process).
pub fn capabilities() -> Value {
    json!({
        "tools": {"listChanged": false},
        "resources": {"subscribe": false, "listChanged": false},
    })
}

/// Guidance for the model, sent with `initialize` and `server/discover`.
pub const INSTRUCTIONS: &str = "This server searches a registry of software agents (A2A agents \
and MCP servers). Call search_agents with what you need done to find agents, best match first; \
list_categories shows how the matches spread over categories and tags, to narrow a search; \
get_agent gives one agent's full record and get_agent_card its card and how to connect to it.";

/// How long a client may cache a list or a read, in milliseconds (2026-07-28's `ttlMs`): the
/// tool and template lists are fixed for the life of the process; records change.
fn ttl_ms(method: &str) -> Option<u64> {
    match method {
        "server/discover" | "tools/list" | "resources/templates/list" | "resources/list" => {
            Some(3_600_000)
        }
        "resources/read" => Some(60_000),
        _ => None,
    }
}

/// Dress a result for the revision it answers: the stateless revision's `resultType`, cache
/// hints and server identity.
pub fn finish(method: &str, mut result: Value, revision: Revision) -> Value {
    if !revision.is_modern() {
        return result;
    }
    if let Value::Object(object) = &mut result {
        object.insert("resultType".to_owned(), json!("complete"));
        if let Some(ttl) = ttl_ms(method) {
            object.insert("ttlMs".to_owned(), json!(ttl));
            object.insert("cacheScope".to_owned(), json!("public"));
        }
        let meta = object
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(meta) = meta {
            meta.insert(META_SERVER_INFO.to_owned(), server_info());
        }
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_gets_the_asked_revision_or_the_newest_handshake_one() {
        assert_eq!(
            Revision::negotiate(Some("2025-06-18")),
            Revision::V2025_06_18
        );
        assert_eq!(
            Revision::negotiate(Some("2024-11-05")),
            Revision::V2024_11_05
        );
        assert_eq!(
            Revision::negotiate(Some("1999-01-01")),
            Revision::V2025_11_25
        );
        assert_eq!(
            Revision::negotiate(Some("2026-07-28")),
            Revision::V2025_11_25,
            "the stateless revision has no handshake"
        );
        assert_eq!(Revision::negotiate(None), Revision::V2025_11_25);
    }

    #[test]
    fn a_stateless_request_names_a_served_revision_in_its_meta() {
        let meta = |meta: Value| json!({"_meta": meta});
        let good = meta(json!({META_PROTOCOL_VERSION: "2026-07-28", META_CLIENT_CAPABILITIES: {}}));
        assert_eq!(modern_revision(Some(&good)), Ok(Revision::V2026_07_28));

        let old = meta(json!({META_PROTOCOL_VERSION: "2025-11-25", META_CLIENT_CAPABILITIES: {}}));
        let error = modern_revision(Some(&old)).expect_err("a handshake revision");
        assert_eq!(error.code, code::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(error.data.expect("data")["requested"], "2025-11-25");

        let bare = meta(json!({META_PROTOCOL_VERSION: "2026-07-28"}));
        assert_eq!(
            modern_revision(Some(&bare)).map_err(|e| e.code),
            Err(code::INVALID_PARAMS)
        );
        assert_eq!(
            modern_revision(None).map_err(|e| e.code),
            Err(code::INVALID_PARAMS)
        );
    }

    #[test]
    fn messages_are_requests_notifications_or_responses() {
        let parse = |value: Value| Message::parse(value);
        assert!(matches!(
            parse(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"})),
            Ok(Message::Request { id, .. }) if id == 7
        ));
        assert!(matches!(
            parse(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
            Ok(Message::Notification { .. })
        ));
        assert_eq!(
            parse(json!({"jsonrpc": "2.0", "id": 1, "result": {}})),
            Ok(Message::Response)
        );
        for bad in [
            json!([]),
            json!("x"),
            json!({"id": 1, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": 3}),
            json!({"jsonrpc": "2.0", "id": {}, "method": "ping"}),
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": [1]}),
        ] {
            let (_, error) = parse(bad.clone()).expect_err("refused");
            assert_eq!(error.code, code::INVALID_REQUEST, "{bad}");
        }
    }

    #[test]
    fn only_stateless_results_carry_result_type_and_cache_hints() {
        let legacy = finish("tools/list", json!({"tools": []}), Revision::V2025_11_25);
        assert_eq!(legacy, json!({"tools": []}));
        let modern = finish("tools/list", json!({"tools": []}), Revision::V2026_07_28);
        assert_eq!(modern["resultType"], "complete");
        assert_eq!(modern["cacheScope"], "public");
        assert!(modern["ttlMs"].is_u64());
        assert_eq!(modern["_meta"][META_SERVER_INFO]["name"], "agent-registry");
        let call = finish("tools/call", json!({"content": []}), Revision::V2026_07_28);
        assert!(call.get("ttlMs").is_none());
    }
}
