//! The resources: the registry's own card (fixed), and two templates over every ACTIVE
//! agent, `agent://{package_name}` (its record) and `agent-card://{package_name}` (its card).

use serde_json::{Value, json};

use super::protocol::{Revision, RpcError, code};
use super::source::Source;
use super::tools::{has_a2a, has_mcp};
use crate::error::{ApiError, ErrorCode};

/// The registry's own A2A card.
pub const REGISTRY_CARD_URI: &str = "registry://agent-card";
const AGENT_SCHEME: &str = "agent://";
const CARD_SCHEME: &str = "agent-card://";
const JSON: &str = "application/json";

/// `resources/list`: the one fixed resource.
pub fn list() -> Value {
    json!({"resources": [{
        "uri": REGISTRY_CARD_URI,
        "name": "registry-card",
        "title": "This registry's agent card",
        "description": "The registry's own A2A agent card, signed: its skills, its A2A \
                        endpoint and its MCP endpoint.",
        "mimeType": JSON,
    }]})
}

/// `resources/templates/list`.
pub fn templates() -> Value {
    json!({"resourceTemplates": [
        {
            "uriTemplate": "agent://{package_name}",
            "name": "agent",
            "title": "Agent record",
            "description": "The full public record of an ACTIVE agent, by package name (or id), \
                            as get_agent answers it.",
            "mimeType": JSON,
        },
        {
            "uriTemplate": "agent-card://{package_name}",
            "name": "agent-card",
            "title": "Agent card",
            "description": "An ACTIVE agent's card: its A2A agent card, signed by the registry, \
                            or, for an agent that is only an MCP server, its server.json.",
            "mimeType": JSON,
        },
    ]})
}

/// `resources/read`.
pub async fn read(
    source: &dyn Source,
    params: Option<&Value>,
    revision: Revision,
) -> Result<Value, RpcError> {
    let uri = super::protocol::required_param(params, "resources/read", "uri")?;
    let not_found = |err: ApiError| not_found(uri, err, revision);
    let document = if uri == REGISTRY_CARD_URI {
        source.registry_card().await.map_err(not_found)?
    } else if let Some(identifier) = uri.strip_prefix(AGENT_SCHEME) {
        source
            .record(agent_of(uri, identifier)?)
            .await
            .map_err(not_found)?
    } else if let Some(identifier) = uri.strip_prefix(CARD_SCHEME) {
        let identifier = agent_of(uri, identifier)?;
        let record = source.record(identifier).await.map_err(not_found)?;
        let package = record["package_name"].as_str().unwrap_or(identifier);
        if has_mcp(&record) && !has_a2a(&record) {
            source.server_json(package).await.map_err(not_found)?
        } else {
            source.card(package).await.map_err(not_found)?
        }
    } else {
        return Err(RpcError::invalid_params(format!(
            "unknown resource '{}'; this server has {REGISTRY_CARD_URI}, agent://{{package_name}} \
             and agent-card://{{package_name}}",
            crate::domain::truncate(uri, 200)
        )));
    };
    Ok(json!({"contents": [{
        "uri": uri,
        "mimeType": JSON,
        "text": document.to_string(),
    }]}))
}

/// The agent a templated URI names: one non-empty path segment.
fn agent_of<'a>(uri: &str, identifier: &'a str) -> Result<&'a str, RpcError> {
    let identifier = identifier.trim_end_matches('/');
    if identifier.is_empty() || identifier.contains(['/', '?', '#']) {
        return Err(RpcError::invalid_params(format!(
            "'{}' names no agent: expected agent://com.example.weather",
            crate::domain::truncate(uri, 200)
        )));
    }
    Ok(identifier)
}

/// An unknown agent is "resource not found" (`-32002`, `-32602` from 2026-07-28 on); other
/// failures keep their own code.
fn not_found(uri: &str, err: ApiError, revision: Revision) -> RpcError {
    if err.code != ErrorCode::AgentNotFound {
        return RpcError::from(err);
    }
    let code = if revision.is_modern() {
        code::INVALID_PARAMS
    } else {
        code::RESOURCE_NOT_FOUND
    };
    RpcError::new(code, format!("Resource not found: {}", err.detail))
        .with_data(json!({"uri": uri}))
}
