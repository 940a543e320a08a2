//! ARD entries: an ACTIVE agent as the registry describes it to ARD clients, the registry's own
//! entry, and a search result.
//!
//! | ARD term | from the agent |
//! |---|---|
//! | `identifier` | its discovery identifier (`urn:air:…`) |
//! | `displayName`, `description`, `version`, `updatedAt`, `tags` | the record's fields |
//! | `type` | A2A card, MCP server card, or this registry's record type (`AgentKind`) |
//! | `url` | the card the registry serves, the MCP server's `server.json`, or the record |
//! | `capabilities` | the names of its skills or tools |
//! | `representativeQueries` | the publisher's (or its card's skill examples), when 2–5 |
//! | `metadata` | package name, record URL, verification level, category, audience |
//! | `trustManifest` | only when the registry verified the publisher's domain: `identity` is that domain, the URN's publisher; the attestation is the agent's record |

use serde_json::{Map, Value, json};

use crate::search::{AgentKind, Listing};
use crate::store::VerificationLevel;

use super::{A2A_TYPE, MCP_TYPE, RECORD_TYPE, REGISTRY_TYPE};

/// What of an entry a caller gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Detail {
    /// Every term: the manifest and the lookup.
    Full,
    /// What selecting among results needs: search results and listings (ARD leaves out
    /// `representativeQueries` there, which serve indexing).
    Result,
}

/// The media type of an agent's entry.
pub fn media_type(kind: AgentKind) -> &'static str {
    match kind {
        AgentKind::A2a => A2A_TYPE,
        AgentKind::Mcp => MCP_TYPE,
        AgentKind::Listed => RECORD_TYPE,
    }
}

/// The artifact an entry's `url` names.
pub fn artifact_url(listing: &Listing, base: &str) -> String {
    let package = listing.package_name();
    match listing.kind {
        AgentKind::A2a => format!("{base}/public/agents/resolve/{package}"),
        AgentKind::Mcp => {
            let name = crate::domain::package_name::mcp_name(package);
            let name: String = url::form_urlencoded::byte_serialize(name.as_bytes()).collect();
            format!("{base}/v0.1/servers/{name}/versions/latest")
        }
        AgentKind::Listed => format!("{base}/public/agents/{package}"),
    }
}

/// The registry's flat `metadata` of an agent (ARD allows only scalar values there).
pub fn metadata(listing: &Listing, base: &str) -> Map<String, Value> {
    let mut metadata = Map::new();
    metadata.insert("packageName".into(), json!(listing.package_name()));
    metadata.insert("agentId".into(), json!(listing.id()));
    metadata.insert(
        "record".into(),
        json!(format!("{base}/public/agents/{}", listing.package_name())),
    );
    metadata.insert(
        "verificationLevel".into(),
        json!(listing.verification_level.as_str()),
    );
    if let Some(category) = listing.category() {
        metadata.insert("category".into(), json!(category));
    }
    if let Some(target) = listing.target() {
        metadata.insert("target".into(), json!(target));
    }
    metadata
}

/// The trust manifest the registry vouches for: only an agent whose publisher domain the
/// registry verified has one, its `identity` that domain (the URN's publisher) and one
/// attestation, the agent's record at the registry, which shows the verification.
pub fn trust_manifest(listing: &Listing, base: &str) -> Option<Value> {
    (listing.verification_level == VerificationLevel::DomainVerified).then(|| {
        json!({
            "identity": listing.publisher(),
            "identityType": "other",
            "attestations": [{
                "type": "domain-control",
                "uri": format!("{base}/public/agents/{}", listing.package_name()),
                "mediaType": "application/json",
            }],
        })
    })
}

/// An agent's ARD entry.
pub fn of_listing(listing: &Listing, base: &str, detail: Detail) -> Value {
    let mut entry = Map::new();
    entry.insert("identifier".into(), json!(listing.urn()));
    entry.insert("displayName".into(), json!(listing.name()));
    entry.insert("type".into(), json!(media_type(listing.kind)));
    entry.insert("url".into(), json!(artifact_url(listing, base)));
    entry.insert("description".into(), json!(listing.description()));
    if listing.tags().len() > 0 {
        entry.insert("tags".into(), json!(listing.tags().collect::<Vec<_>>()));
    }
    if listing.capabilities().len() > 0 {
        entry.insert(
            "capabilities".into(),
            json!(listing.capabilities().collect::<Vec<_>>()),
        );
    }
    if let Some(version) = listing.version() {
        entry.insert("version".into(), json!(version));
    }
    entry.insert("updatedAt".into(), json!(listing.updated_at));
    let queries = listing.representative_queries();
    if detail == Detail::Full && (2..=5).contains(&queries.len()) {
        entry.insert(
            "representativeQueries".into(),
            json!(queries.collect::<Vec<_>>()),
        );
    }
    entry.insert("metadata".into(), Value::Object(metadata(listing, base)));
    if let Some(trust) = trust_manifest(listing, base) {
        entry.insert("trustManifest".into(), trust);
    }
    Value::Object(entry)
}

/// The registry's identifier: `urn:air:<host of its public URL>:registry`.
pub fn registry_identifier(base_url: &str) -> String {
    let host = url::Url::parse(base_url)
        .ok()
        .and_then(|url| url.host_str().map(str::to_ascii_lowercase))
        .map(|host| host.trim_matches(['[', ']']).replace(':', "-"))
        .filter(|host| !host.is_empty())
        .unwrap_or_else(|| "localhost".to_owned());
    format!("urn:air:{host}:registry")
}

/// The registry's own entry: an ARD registry whose API is at `api_url`.
pub fn registry_entry(identifier: &str, api_url: &str) -> Value {
    json!({
        "identifier": identifier,
        "displayName": "Agent Registry",
        "type": REGISTRY_TYPE,
        "url": api_url,
        "description": "A registry of A2A agents and MCP servers: search by intent, keywords and filters (POST /search), facet counts (POST /explore), a deterministic listing (GET /agents), and lookup by identifier (GET /agents/{identifier}).",
        "capabilities": ["search", "explore", "list", "lookup"],
        "representativeQueries": [
            "find an agent that can forecast the weather",
            "which MCP servers can query a PostgreSQL database",
            "an agent that converts currencies and takes x402 payments",
        ],
    })
}

/// A search result's relevance as ARD's integer 0–100: the hit's score relative to the best
/// match of the same query at this registry (which scores 100). Only relevance: never trust.
pub fn percent(score: Option<f64>, best: f64) -> u8 {
    match score {
        Some(score) if best > 0.0 && score.is_finite() => {
            (100.0 * score / best).round().clamp(0.0, 100.0) as u8
        }
        // Without query text nothing is ranked: every match is as relevant as the next.
        _ => 100,
    }
}

/// A local search result: the entry's selection terms, its score, and this registry as its
/// source.
pub fn result(listing: &Listing, base: &str, score: u8, source: &str) -> Value {
    let mut result = of_listing(listing, base, Detail::Result);
    if let Some(object) = result.as_object_mut() {
        object.insert("score".into(), json!(score));
        object.insert("source".into(), json!(source));
    }
    result
}
