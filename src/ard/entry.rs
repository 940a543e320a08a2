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
//! | `metadata` | package name, record URL, verification level, category, audience, the scanner's worst finding (`securityMaxSeverity`), and a deprecation (`deprecated`, `deprecationMessage`, `successor`) |
//! | `trustManifest` | only when the registry verified the publisher's domain: `identity` is that domain, the URN's publisher; the attestation is the agent's record. The registry's own agents have none: their identifiers' publishers (`utility.registry`) are names, not domains anyone proved |

use serde_json::{Map, Value, json};

use crate::domain::json::{json_str, json_strs};
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
    ArtifactUrl(listing, base).to_string()
}

/// `artifact_url`, written where it is needed without a string of its own.
struct ArtifactUrl<'a>(&'a Listing, &'a str);

impl std::fmt::Display for ArtifactUrl<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Self(listing, base) = self;
        let package = listing.package_name();
        match listing.kind {
            AgentKind::A2a => write!(f, "{base}/public/agents/resolve/{package}"),
            AgentKind::Mcp => {
                write!(f, "{base}/v0.1/servers/")?;
                let name = crate::domain::package_name::mcp_name(package);
                for piece in url::form_urlencoded::byte_serialize(name.as_bytes()) {
                    f.write_str(piece)?;
                }
                f.write_str("/versions/latest")
            }
            AgentKind::Listed => write!(f, "{base}/public/agents/{package}"),
        }
    }
}

/// The registry's flat `metadata` of an agent (ARD allows only scalar values there).
pub fn metadata(listing: &Listing, base: &str) -> Map<String, Value> {
    let mut out = Vec::with_capacity(256);
    match write_metadata(&mut out, listing, base).and_then(|()| serde_json::from_slice(&out)) {
        Ok(Value::Object(metadata)) => metadata,
        _ => Map::new(),
    }
}

fn write_metadata(out: &mut Vec<u8>, listing: &Listing, base: &str) -> serde_json::Result<()> {
    let package = listing.package_name();
    out.extend_from_slice(b"{\"packageName\":");
    json_str(out, package)?;
    out.extend_from_slice(b",\"agentId\":");
    json_str(out, listing.id())?;
    out.extend_from_slice(b",\"record\":");
    json_str(out, &format!("{base}/public/agents/{package}"))?;
    out.extend_from_slice(b",\"verificationLevel\":");
    json_str(out, listing.verification_level.as_str())?;
    if let Some(category) = listing.category() {
        out.extend_from_slice(b",\"category\":");
        json_str(out, category)?;
    }
    if let Some(target) = listing.target() {
        out.extend_from_slice(b",\"target\":");
        json_str(out, target)?;
    }
    if !listing.operated {
        out.extend_from_slice(b",\"securityMaxSeverity\":");
        json_str(out, listing.severity.as_str())?;
    }
    if let Some(deprecation) = &listing.deprecation {
        out.extend_from_slice(b",\"deprecated\":true,\"deprecationMessage\":");
        json_str(out, &deprecation.message)?;
        if let Some(successor) = &deprecation.successor {
            out.extend_from_slice(b",\"successor\":");
            json_str(out, successor)?;
        }
    }
    out.push(b'}');
    Ok(())
}

/// The trust manifest the registry vouches for: only an agent whose publisher domain the
/// registry verified has one, its `identity` that domain (the URN's publisher) and one
/// attestation, the agent's record at the registry, which shows the verification.
pub fn trust_manifest(listing: &Listing, base: &str) -> Option<Value> {
    if !is_verified(listing) {
        return None;
    }
    let mut out = Vec::with_capacity(256);
    write_trust(&mut out, listing, base).ok()?;
    serde_json::from_slice(&out).ok()
}

/// Whether the registry proved the listing's publisher domain. Its own agents count as
/// verified for search, but their identifiers' publishers (`utility.registry`) are names no
/// one proved, so no trust manifest vouches for them.
fn is_verified(listing: &Listing) -> bool {
    listing.verification_level == VerificationLevel::DomainVerified && !listing.operated
}

fn write_trust(out: &mut Vec<u8>, listing: &Listing, base: &str) -> serde_json::Result<()> {
    out.extend_from_slice(b"{\"identity\":");
    json_str(out, listing.publisher())?;
    out.extend_from_slice(
        b",\"identityType\":\"other\",\"attestations\":[{\"type\":\"domain-control\",\"uri\":",
    );
    json_str(
        out,
        &format!("{base}/public/agents/{}", listing.package_name()),
    )?;
    out.extend_from_slice(b",\"mediaType\":\"application/json\"}]}");
    Ok(())
}

/// An agent's ARD entry, written straight from its listing (a page of results builds no JSON
/// tree); with `scored`, a search result's `score` and `source` too.
pub struct EntryView<'a> {
    pub listing: &'a Listing,
    pub base: &'a str,
    pub detail: Detail,
    pub scored: Option<(u8, &'a str)>,
}

impl EntryView<'_> {
    /// The entry's JSON, appended to `out`.
    pub fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let listing = self.listing;
        out.extend_from_slice(b"{\"identifier\":");
        json_str(out, listing.urn())?;
        out.extend_from_slice(b",\"displayName\":");
        json_str(out, listing.name())?;
        out.extend_from_slice(b",\"type\":");
        json_str(out, media_type(listing.kind))?;
        out.extend_from_slice(b",\"url\":");
        json_str(out, &ArtifactUrl(listing, self.base).to_string())?;
        out.extend_from_slice(b",\"description\":");
        json_str(out, listing.description())?;
        if listing.tags().len() > 0 {
            out.extend_from_slice(b",\"tags\":");
            json_strs(out, listing.tags())?;
        }
        if listing.capabilities().len() > 0 {
            out.extend_from_slice(b",\"capabilities\":");
            json_strs(out, listing.capabilities())?;
        }
        if let Some(version) = listing.version() {
            out.extend_from_slice(b",\"version\":");
            json_str(out, version)?;
        }
        // Digits and separators: nothing to escape.
        out.extend_from_slice(b",\"updatedAt\":\"");
        out.extend_from_slice(listing.updated_at.rfc3339().as_str().as_bytes());
        out.push(b'"');
        let queries = listing.representative_queries();
        if self.detail == Detail::Full && (2..=5).contains(&queries.len()) {
            out.extend_from_slice(b",\"representativeQueries\":");
            json_strs(out, queries)?;
        }
        out.extend_from_slice(b",\"metadata\":");
        write_metadata(out, listing, self.base)?;
        if is_verified(listing) {
            out.extend_from_slice(b",\"trustManifest\":");
            write_trust(out, listing, self.base)?;
        }
        if let Some((score, source)) = self.scored {
            out.extend_from_slice(format!(",\"score\":{score},\"source\":").as_bytes());
            json_str(out, source)?;
        }
        out.push(b'}');
        Ok(())
    }
}

/// An agent's ARD entry, as a JSON value (where one is embedded in a larger document).
pub fn of_listing(listing: &Listing, base: &str, detail: Detail) -> Value {
    let view = EntryView {
        listing,
        base,
        detail,
        scored: None,
    };
    let mut out = Vec::with_capacity(1024);
    view.write_json(&mut out)
        .and_then(|()| serde_json::from_slice(&out))
        .unwrap_or_default()
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
