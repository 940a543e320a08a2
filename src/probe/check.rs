//! One probe: contact an agent's endpoint once and classify the answer.
//!
//! - `down`: no answer (refused, unresolvable, timed out), a 5xx, or an address the fetcher may
//!   not contact (a redirect to a private address counts here: the registry cannot reach it).
//! - `not_conformant`: an answer, but not what the protocol requires (a 404, HTML instead of a
//!   card, a card that fails the A2A v1.0 checks, a JSON-RPC error, no MCP `initialize` result).
//! - `up`: the card is a valid A2A v1.0 card (and the owner's probe message got a result), or the
//!   MCP server answered `initialize` or its SSE stream opened with an `endpoint` event (a 401
//!   counts too: it is how MCP authorisation begins, so the server is there).

use std::time::{Duration, Instant};

use axum::http::{HeaderName, StatusCode, header};
use serde_json::{Value, json};
use url::Url;

use crate::domain::health::{ProbeKind, ProbeTarget};
use crate::domain::surface::Surface;
use crate::domain::{A2aCard, HealthStatus, truncate};
use crate::outbound::{Fetch, Fetched, JSON, Outbound, OutboundError};

/// Largest card read, as when publishing from a card.
const MAX_CARD_BYTES: usize = 64 * 1024;
/// Largest answer read from a message or `initialize`.
const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// Redirects followed to a card (each hop checked by the address guard).
const MAX_REDIRECTS: u8 = 3;
/// Longest piece of an agent's own text kept in `detail`.
const MAX_DETAIL_CHARS: usize = 300;
/// The MCP protocol revision the `initialize` request offers.
const MCP_PROTOCOL_VERSION: &str = "2025-06-18";
/// Media types an MCP streamable HTTP server may answer with.
const MCP_ANSWER: &[&str] = &["application/json", "text/event-stream"];
/// An SSE stream's media type.
const EVENT_STREAM: &[&str] = &["text/event-stream"];

/// Most pages of `tools/list` read in one probe.
const MAX_TOOL_PAGES: usize = 4;

/// What one probe found.
#[derive(Debug, Clone, PartialEq)]
pub struct Finding {
    pub status: HealthStatus,
    pub kind: ProbeKind,
    pub detail: Option<String>,
    /// What the endpoint shows a model (an MCP server's tools, the card's skills), when the
    /// probe read it.
    pub surface: Option<Surface>,
    /// How long the endpoint took to show it is there, when the probe went on to read its
    /// tools (the health's latency leaves the listing out); else the whole probe's time counts.
    pub answered_in: Option<Duration>,
}

impl Finding {
    fn up(kind: ProbeKind) -> Self {
        Self {
            status: HealthStatus::Up,
            kind,
            detail: None,
            surface: None,
            answered_in: None,
        }
    }

    fn showing(mut self, surface: Option<Surface>) -> Self {
        self.surface = surface;
        self
    }

    fn down(kind: ProbeKind, detail: impl Into<String>) -> Self {
        Self {
            status: HealthStatus::Down,
            kind,
            detail: Some(truncate(&detail.into(), MAX_DETAIL_CHARS)),
            surface: None,
            answered_in: None,
        }
    }

    fn not_conformant(kind: ProbeKind, detail: impl Into<String>) -> Self {
        Self {
            status: HealthStatus::NotConformant,
            kind,
            detail: Some(truncate(&detail.into(), MAX_DETAIL_CHARS)),
            surface: None,
            answered_in: None,
        }
    }
}

/// Probe `target` within `limit` in total; with `inspect`, also read what the endpoint shows a
/// model (an MCP server's `tools/list`, the card's skills).
pub async fn run(
    outbound: &Outbound,
    target: &ProbeTarget,
    limit: Duration,
    inspect: bool,
) -> Finding {
    let deadline = Instant::now() + limit;
    match target {
        ProbeTarget::A2a {
            card,
            endpoint,
            message,
        } => {
            let mut found = a2a_card(outbound, card, limit).await;
            if !inspect {
                found.surface = None;
            }
            match (found.status, endpoint, message) {
                (HealthStatus::Up, Some(endpoint), Some(message)) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    send_message(outbound, endpoint, message, left)
                        .await
                        .showing(found.surface)
                }
                _ => found,
            }
        }
        ProbeTarget::Mcp { url, sse: false } => mcp_initialize(outbound, url, limit, inspect).await,
        ProbeTarget::Mcp { url, sse: true } => mcp_sse(outbound, url, limit).await,
    }
}

fn parse_url(kind: ProbeKind, raw: &str) -> Result<Url, Finding> {
    Url::parse(raw).map_err(|err| Finding::down(kind, format!("{raw} is not a usable URL: {err}")))
}

/// A fetch that produced no HTTP answer, or one the protocol rules out at once.
fn failed(kind: ProbeKind, err: &OutboundError) -> Finding {
    match err {
        // It answered, with the wrong kind or size of document.
        OutboundError::ContentType { .. } | OutboundError::TooLarge { .. } => {
            Finding::not_conformant(kind, err.to_string())
        }
        _ => Finding::down(kind, err.to_string()),
    }
}

/// A non-2xx answer: 5xx is down (the server is failing), anything else answers but not as
/// the protocol requires.
fn bad_status(kind: ProbeKind, url: &Url, status: StatusCode) -> Finding {
    let detail = format!("{url} answered HTTP {}", status.as_u16());
    if status.is_server_error() {
        Finding::down(kind, detail)
    } else {
        Finding::not_conformant(kind, detail)
    }
}

async fn a2a_card(outbound: &Outbound, card: &str, limit: Duration) -> Finding {
    let kind = ProbeKind::A2aCard;
    let url = match parse_url(kind, card) {
        Ok(url) => url,
        Err(finding) => return finding,
    };
    let fetch = Fetch::get(url.clone(), JSON, MAX_CARD_BYTES)
        .redirects(MAX_REDIRECTS)
        .timeout(limit);
    let fetched = match outbound.get(&fetch).await {
        Ok(fetched) => fetched,
        Err(err) => return failed(kind, &err),
    };
    if !fetched.status.is_success() {
        return bad_status(kind, &fetched.url, fetched.status);
    }
    let document: Value = match fetched.json() {
        Ok(document) => document,
        Err(err) => {
            return Finding::not_conformant(kind, format!("the card is not valid JSON: {err}"));
        }
    };
    let skills = document
        .get("skills")
        .and_then(Value::as_array)
        .map(|skills| Surface::a2a_skills(skills));
    match A2aCard::parse(document) {
        Ok(_) => Finding::up(kind).showing(skills),
        Err(errors) => {
            let listed = errors
                .iter()
                .take(3)
                .map(|error| format!("{}: {}", error.field, error.message))
                .collect::<Vec<_>>()
                .join("; ");
            Finding::not_conformant(kind, format!("not a valid A2A v1.0 card: {listed}"))
        }
    }
}

/// `SendMessage` with the owner's text; any JSON-RPC result is up.
async fn send_message(outbound: &Outbound, endpoint: &str, text: &str, limit: Duration) -> Finding {
    let kind = ProbeKind::A2aMessage;
    let url = match parse_url(kind, endpoint) {
        Ok(url) => url,
        Err(finding) => return finding,
    };
    if limit.is_zero() {
        return Finding::down(kind, "no time left for the message after the card");
    }
    let body = json!({
        "jsonrpc": "2.0",
        "id": format!("probe_{}", ulid::Ulid::new()),
        "method": "SendMessage",
        "params": {
            "message": {
                "messageId": format!("msg_{}", ulid::Ulid::new()),
                "role": "ROLE_USER",
                "parts": [{"text": text}],
            },
        },
    });
    let fetch = Fetch::post_json(url.clone(), &body, JSON, MAX_ANSWER_BYTES)
        .timeout(limit)
        .header(HeaderName::from_static("a2a-version"), "1.0");
    let fetched = match outbound.get(&fetch).await {
        Ok(fetched) => fetched,
        Err(err) => return failed(kind, &err),
    };
    let answer: Option<Value> = fetched.json().ok();
    if let Some(error) = answer
        .as_ref()
        .and_then(|a| a.get("error"))
        .filter(|e| !e.is_null())
    {
        let code = error.get("code").and_then(Value::as_i64).unwrap_or(0);
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        return Finding::not_conformant(
            kind,
            format!("the probe message got JSON-RPC error {code}: {message}"),
        );
    }
    if !fetched.status.is_success() {
        return bad_status(kind, &fetched.url, fetched.status);
    }
    match answer {
        Some(answer) if answer.get("result").is_some_and(|r| !r.is_null()) => Finding::up(kind),
        _ => Finding::not_conformant(
            kind,
            "the answer to the probe message is not a JSON-RPC response",
        ),
    }
}

/// Whether an event stream holds one whole event with data.
fn sse_event_complete(body: &[u8]) -> bool {
    let Some(data) = find(body, b"data:") else {
        return false;
    };
    let rest = &body[data..];
    find(rest, b"\n\n").is_some() || find(rest, b"\r\n\r\n").is_some()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The JSON-RPC message of a streamable HTTP answer: the body itself, or the first `data:` of
/// an event stream.
fn jsonrpc_of(fetched: &Fetched) -> Option<Value> {
    if fetched.media_type == "text/event-stream" {
        let text = fetched.text();
        let data: String = text
            .lines()
            .skip_while(|line| !line.starts_with("data:"))
            .take_while(|line| line.starts_with("data:"))
            .map(|line| line.trim_start_matches("data:").trim_start())
            .collect::<Vec<_>>()
            .join("\n");
        serde_json::from_str(&data).ok()
    } else {
        fetched.json().ok()
    }
}

/// An MCP `initialize` over streamable HTTP; with `inspect`, then `tools/list` in the same
/// session (a server that does not answer it is still up, and not inspected).
async fn mcp_initialize(
    outbound: &Outbound,
    remote: &str,
    limit: Duration,
    inspect: bool,
) -> Finding {
    let began = Instant::now();
    let deadline = began + limit;
    let kind = ProbeKind::McpStreamableHttp;
    let url = match parse_url(kind, remote) {
        Ok(url) => url,
        Err(finding) => return finding,
    };
    let body = json!({
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": MCP_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "agent-registry-prober", "version": env!("CARGO_PKG_VERSION")},
        },
    });
    let fetch = Fetch::post_json(url.clone(), &body, MCP_ANSWER, MAX_ANSWER_BYTES)
        .timeout(limit)
        .until(sse_event_complete);
    let fetched = match mcp_answer(outbound, kind, &fetch).await {
        Ok(fetched) => fetched,
        Err(finding) => return finding,
    };
    let Some(answer) = jsonrpc_of(&fetched) else {
        return Finding::not_conformant(kind, "the answer to initialize is not JSON-RPC");
    };
    if let Some(error) = answer.get("error").filter(|e| !e.is_null()) {
        let message = error.get("message").and_then(Value::as_str).unwrap_or("");
        return Finding::not_conformant(kind, format!("initialize failed: {message}"));
    }
    let result = answer.get("result");
    let speaks_mcp = result
        .and_then(|result| result.get("protocolVersion"))
        .is_some_and(Value::is_string);
    if speaks_mcp {
        // Asked even when `initialize` declares no `tools` capability (some servers leave it
        // out): one that has no tools answers with an error, and is not inspected.
        let answered_in = began.elapsed();
        let surface = if inspect {
            let session = fetched.mcp_session.clone();
            list_tools(outbound, &url, session.as_deref(), deadline).await
        } else {
            None
        };
        Finding {
            answered_in: Some(answered_in),
            ..Finding::up(kind).showing(surface)
        }
    } else {
        Finding::not_conformant(kind, "the answer to initialize names no protocolVersion")
    }
}

/// The server's tools, read with `tools/list` (following `nextCursor` for at most four pages)
/// after the `initialized` notification; `None` when it does not answer with a tool list in
/// time.
async fn list_tools(
    outbound: &Outbound,
    url: &Url,
    session: Option<&str>,
    deadline: Instant,
) -> Option<Surface> {
    let left = || deadline.saturating_duration_since(Instant::now());
    let with_session = |fetch: Fetch| match session {
        Some(session) => fetch.header(HeaderName::from_static("mcp-session-id"), session),
        None => fetch,
    };
    let protocol = |fetch: Fetch| {
        fetch.header(
            HeaderName::from_static("mcp-protocol-version"),
            MCP_PROTOCOL_VERSION,
        )
    };
    let notification = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let notify = protocol(with_session(
        Fetch::post_json(url.clone(), &notification, MCP_ANSWER, MAX_ANSWER_BYTES).timeout(left()),
    ));
    // A 202 with no body is the usual answer, which the accept check may refuse: either way
    // the notification was delivered.
    let _ = outbound.get(&notify).await;
    let mut tools: Vec<Value> = Vec::new();
    let mut cursor: Option<String> = None;
    for page in 0..MAX_TOOL_PAGES {
        if left().is_zero() {
            break;
        }
        let mut params = json!({});
        if let Some(cursor) = &cursor {
            params["cursor"] = json!(cursor);
        }
        let body =
            json!({"jsonrpc": "2.0", "id": page + 2, "method": "tools/list", "params": params});
        let fetch = protocol(with_session(
            Fetch::post_json(url.clone(), &body, MCP_ANSWER, MAX_ANSWER_BYTES)
                .timeout(left())
                .until(sse_event_complete),
        ));
        let fetched = outbound.get(&fetch).await.ok()?;
        if !fetched.status.is_success() {
            return None;
        }
        let answer = jsonrpc_of(&fetched)?;
        let result = answer.get("result")?;
        tools.extend(result.get("tools")?.as_array()?.iter().cloned());
        cursor = result
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() || tools.len() >= crate::domain::surface::MAX_ITEMS {
            break;
        }
    }
    Some(Surface::mcp_tools(&tools))
}

/// An MCP server's 2xx answer to `fetch`, or what the lack of one says: no answer, a status
/// other than success, or a 401, which is how MCP authorisation begins, so the server is up.
async fn mcp_answer(
    outbound: &Outbound,
    kind: ProbeKind,
    fetch: &Fetch,
) -> Result<Fetched, Finding> {
    let fetched = outbound
        .get(fetch)
        .await
        .map_err(|err| failed(kind, &err))?;
    if fetched.status == StatusCode::UNAUTHORIZED {
        return Err(Finding {
            status: HealthStatus::Up,
            kind,
            detail: Some("authorisation required".to_owned()),
            surface: None,
            answered_in: None,
        });
    }
    if !fetched.status.is_success() {
        return Err(bad_status(kind, &fetched.url, fetched.status));
    }
    Ok(fetched)
}

/// An MCP SSE remote: open the stream and read its first event (`endpoint`).
async fn mcp_sse(outbound: &Outbound, remote: &str, limit: Duration) -> Finding {
    let kind = ProbeKind::McpSse;
    let url = match parse_url(kind, remote) {
        Ok(url) => url,
        Err(finding) => return finding,
    };
    let fetch = Fetch::get(url, EVENT_STREAM, MAX_ANSWER_BYTES)
        .redirects(MAX_REDIRECTS)
        .timeout(limit)
        .header(header::CACHE_CONTROL, "no-cache")
        .until(sse_event_complete);
    let fetched = match mcp_answer(outbound, kind, &fetch).await {
        Ok(fetched) => fetched,
        Err(finding) => return finding,
    };
    if fetched
        .text()
        .lines()
        .any(|line| line.trim() == "event: endpoint")
    {
        Finding::up(kind)
    } else {
        Finding::not_conformant(
            kind,
            "the event stream did not start with an endpoint event",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_complete_after_its_data_and_a_blank_line() {
        assert!(!sse_event_complete(b"event: endpoint\n"));
        assert!(!sse_event_complete(b"event: endpoint\ndata: /messages\n"));
        assert!(sse_event_complete(b"event: endpoint\ndata: /messages\n\n"));
        assert!(sse_event_complete(b"data: {}\r\n\r\n"));
    }
}
