//! What every transport speaks, beneath them all: `api`, `a2a`, `mcp`, `playground`, `openapi`
//! and `web` name this module and never one another (`tests/layers.rs`).
//!
//! Here: the wire types, what clients see, built from the model and never the model itself
//! (records, pages, versions; `server_json`, an agent as the MCP Registry's `server.json`);
//! agent cards built from records (`card`) and fetched from the network (`fetch`); what the
//! cards and the OpenAPI document say about MCP (`mcp`: its endpoint and revisions); how a
//! `Content-Type` is read (`media`); and the marker types the OpenAPI annotations name for the
//! hand-written schemas (`schema`).

use std::collections::BTreeMap;

use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::{AirUrn, Capability, CardSignatureCheck, Health, Payment, Reach};
use crate::search::{FacetCounts, Hit, Listing, SearchPage};
use crate::store::{Agent, AgentState, AgentVersion, Provenance, VerificationLevel};
use crate::timestamp::Timestamp;

pub mod card;
pub mod fetch;
pub mod mcp;
pub mod media;
pub mod schema;
pub mod server_json;

/// The full record of one agent.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AgentRecord {
    /// Opaque server-generated id, `agt_…`.
    pub id: String,
    /// Unique reverse-domain package name, lowercase.
    pub package_name: String,
    /// The discovery identifier other registries know the agent by (`urn:air:…`): the
    /// publisher's own, or derived from the package name when it was published; it never
    /// changes.
    #[schema(value_type = String, example = "urn:air:example.com:weather")]
    pub identifier: AirUrn,
    /// Display name.
    pub name: String,
    /// Short description.
    pub description: String,
    /// The agent's version: the publisher's string, `1.0.0` when published without one, the
    /// next patch after a change that names none (when it is a semantic version). Earlier
    /// versions are at `/public/agents/{id}/versions`.
    pub version: String,
    /// Where the agent's own card lives.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest_url: Option<String>,
    /// The agent's A2A JSON-RPC endpoint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Audience grouping, e.g. `Business`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Category, e.g. `Finance`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub category: Option<String>,
    /// Lowercase tags.
    pub tags: Vec<String>,
    /// What the agent can do.
    pub capabilities: Vec<Capability>,
    /// Requests a user might make that this agent serves, in the user's words (absent when
    /// none are known).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub representative_queries: Vec<String>,
    /// Payment terms; absent when unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub payment: Option<Payment>,
    /// `unverified` or `domain_verified`.
    pub verification_level: VerificationLevel,
    /// `STAGE` or `ACTIVE`.
    pub state: AgentState,
    /// The owner of the token that created it.
    pub owner: String,
    /// Write counter; send it back in `If-Match` to update without losing a concurrent write.
    pub revision: i64,
    pub created_at: Timestamp,
    pub updated_at: Timestamp,
    /// When it last went live; absent while in STAGE.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_at: Option<Timestamp>,
    /// Owner's view only: the token to publish for domain verification.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub verification_token: Option<String>,
    /// How to reach the agent: `interfaces` (A2A; the first is `url`), `remotes` and `packages`
    /// (MCP), `repository`. Each is absent when the publisher gave none.
    #[serde(flatten)]
    pub reach: Reach,
    /// Public view: the other ACTIVE agents that share this one's repository or endpoint (its
    /// duplicate group), best first; search shows one agent per group unless `collapse=false`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<String>,
    /// What checking the signatures on the publisher's own card found, when it carries any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub card_signature: Option<CardSignatureCheck>,
    /// Whether the agent's endpoint answers, as the registry's liveness prober last found it
    /// (`unknown` before its first probe, `not_probed` with the reason when it lists no
    /// endpoint to probe).
    pub health: Health,
    /// Where a mirrored agent came from (the mirror source, the entry there, when it was
    /// fetched, and `status: deprecated` when its source says so); absent for an agent
    /// published here. A mirrored agent changes at its source only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provenance: Option<Provenance>,
    /// What the registry's scanner finds in the texts a host or model reads (descriptions,
    /// input schemas, card skills): hidden instructions, invisible characters, pasted
    /// credentials. `status` is `clean` or `flagged`; see docs/security.md.
    pub security: crate::domain::scan::Report,
    /// The publisher's deprecation (`message`, `successor`, `deprecated_at`): the agent is still
    /// listed and resolvable, ranked below its equals. Absent when not deprecated.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<crate::domain::deprecation::Deprecation>,
    /// `public` (listed everywhere), `unlisted` (resolvable by whoever knows it, listed
    /// nowhere) or `private` (seen only by its owner, its organisation's members and the
    /// master key).
    pub visibility: crate::domain::agent::Visibility,
    /// Owner's view only: whether the owner published a full A2A card with the record.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub has_card: Option<bool>,
    /// Owner's view only: whether the prober may list the endpoint's tools (`inspect_tools`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inspect_tools: Option<bool>,
    /// Owner's view only: the message the prober sends with `SendMessage` once the card checks
    /// out, when the owner opted in.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub probe_message: Option<String>,
}

impl AgentRecord {
    /// The public view: no owner-only fields.
    pub fn public(agent: &Agent) -> Self {
        Self::public_given(agent, None)
    }

    /// `public`, given the agent's worst scanner severity when the index knows it
    /// (`Registry::worst_severity`): a clean agent's texts are not scanned again.
    pub fn public_given(agent: &Agent, worst: Option<crate::domain::scan::Severity>) -> Self {
        let draft = &agent.draft;
        Self {
            id: agent.id.clone(),
            package_name: agent.package_name().to_owned(),
            identifier: agent.urn.clone(),
            name: draft.name.clone(),
            description: draft.description.clone(),
            version: agent.version().to_owned(),
            manifest_url: draft.manifest_url.clone(),
            url: draft.url.clone(),
            target: draft.target.clone(),
            category: draft.category.clone(),
            tags: draft.tags.clone(),
            capabilities: draft.capabilities.clone(),
            representative_queries: draft.representative_queries.clone(),
            payment: draft.payment.clone(),
            verification_level: agent.verification_level,
            state: agent.state,
            owner: agent.owner.clone(),
            revision: agent.revision,
            created_at: agent.created_at,
            updated_at: agent.updated_at,
            published_at: agent.published_at,
            reach: draft.reach.clone(),
            duplicates: Vec::new(),
            card_signature: draft.card_signature.clone(),
            health: agent.health.clone().unwrap_or_else(Health::unknown),
            provenance: agent.provenance.clone(),
            security: agent.security_given(worst),
            deprecation: agent.shown_deprecation(),
            visibility: draft.visibility.unwrap_or_default(),
            verification_token: None,
            has_card: None,
            inspect_tools: None,
            probe_message: None,
        }
    }

    /// The owner's view: adds the verification token.
    pub fn owned(agent: &Agent) -> Self {
        Self {
            verification_token: Some(agent.verification_token.clone()),
            has_card: Some(agent.draft.card.is_some()),
            probe_message: agent.draft.probe_message.clone(),
            inspect_tools: Some(agent.draft.inspect_tools != Some(false)),
            ..Self::public(agent)
        }
    }
}

/// One agent in a list or search result.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AgentSummary {
    pub id: String,
    pub package_name: String,
    pub name: String,
    pub description: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    pub verification_level: VerificationLevel,
    /// Where to fetch the agent's card: its own, or the registry's resolve path.
    pub manifest_url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub target: Option<String>,
    pub category: Option<String>,
    pub tags: Vec<String>,
    pub payment: Option<Payment>,
    /// Names of the agent's capabilities.
    pub capabilities: Vec<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published_at: Option<Timestamp>,
    /// What the liveness prober last found (`unknown`: not probed yet; `not_probed`: no
    /// endpoint to probe).
    pub health: Health,
    /// The worst scanner finding in its texts and in what its endpoint shows (`none`: clean);
    /// the record's `security` lists the findings.
    pub max_severity: crate::domain::scan::Severity,
    /// The publisher's deprecation, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<crate::domain::deprecation::Deprecation>,
}

impl AgentSummary {
    /// The wire form of a search listing with its health; `base_url` supplies a card address
    /// when the owner gave none.
    pub fn of(listing: &Listing, health: Option<&Health>, base_url: &str) -> Self {
        Self {
            id: listing.id().to_owned(),
            package_name: listing.package_name().to_owned(),
            name: listing.name().to_owned(),
            description: listing.description().to_owned(),
            version: listing.version().map(str::to_owned),
            verification_level: listing.verification_level,
            manifest_url: listing.manifest_url().map_or_else(
                || {
                    format!(
                        "{base_url}/public/agents/resolve/{}",
                        listing.package_name()
                    )
                },
                str::to_owned,
            ),
            url: listing.url().map(str::to_owned),
            target: listing.target().map(str::to_owned),
            category: listing.category().map(str::to_owned),
            tags: listing.tags().map(str::to_owned).collect(),
            payment: listing.payment.as_deref().cloned(),
            capabilities: listing.capabilities().map(str::to_owned).collect(),
            published_at: listing.published_at,
            health: health.cloned().unwrap_or_else(Health::unknown),
            max_severity: listing.severity,
            deprecation: listing.deprecation.as_deref().cloned(),
        }
    }
}

/// A summary with its relevance score, in search results.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AgentHit {
    #[serde(flatten)]
    pub agent: AgentSummary,
    /// Relevance, higher is better; comparable within one response only. Absent when listing
    /// without a query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub score: Option<f64>,
}

/// A page of agents.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct AgentPage {
    pub agents: Vec<AgentHit>,
    /// Matches for the query and filters, over all pages.
    pub total: usize,
    /// The page size used (after clamping).
    pub limit: usize,
    /// Pass back as `cursor` for the next page; null on the last page.
    pub next_cursor: Option<String>,
    /// Only when asked with `facets=true`: the matches (all `total` of them) counted per facet
    /// value.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = crate::wire::schema::SearchFacets, required = false)]
    pub facets: Option<SearchFacets>,
}

/// Counts of a search's matches per facet value; values with no match are absent. The schema
/// is written by hand (`schema::SearchFacets`).
#[derive(Debug, Clone, Serialize)]
pub struct SearchFacets {
    pub category: BTreeMap<String, usize>,
    pub tags: BTreeMap<String, usize>,
    pub payment_model: BTreeMap<String, usize>,
    pub health: BTreeMap<String, usize>,
    pub security: BTreeMap<String, usize>,
}

impl SearchFacets {
    pub fn of(counts: &FacetCounts) -> Self {
        Self {
            category: counts.category.clone(),
            tags: counts.tags.clone(),
            payment_model: counts.payment_model.clone(),
            health: counts.health.clone(),
            security: counts.security.clone(),
        }
    }
}

impl AgentPage {
    /// The wire form of a page of search results.
    pub fn of(page: &SearchPage, base_url: &str) -> Self {
        Self {
            agents: page
                .hits
                .iter()
                .map(|hit| AgentHit {
                    agent: AgentSummary::of(&hit.listing, hit.health.as_deref(), base_url),
                    score: hit.score,
                })
                .collect(),
            total: page.total,
            limit: page.limit,
            next_cursor: page.next_cursor.clone(),
            facets: page.facets.as_ref().map(SearchFacets::of),
        }
    }
}

/// "Found 3 agents matching 'bitcoin price'" (or "Found 3 agents" without query text).
pub fn found_summary(shown: usize, total: usize, query: &str) -> String {
    let noun = if total == 1 { "agent" } else { "agents" };
    let matching = if query.trim().is_empty() {
        String::new()
    } else {
        format!(" matching '{}'", crate::domain::truncate(query.trim(), 100))
    };
    if shown < total {
        format!("Found {total} {noun}{matching}; showing {shown}.")
    } else {
        format!("Found {total} {noun}{matching}.")
    }
}

/// A page as a JSON object: `{agents, total, limit, next_cursor}`.
pub fn page_json(page: &AgentPage) -> serde_json::Value {
    serde_json::to_value(page).unwrap_or_else(|_| serde_json::json!({"agents": []}))
}

use crate::domain::json::{json_opt_str, json_str, json_strs};

/// A page of search results written straight from the index's listings: the JSON of
/// `AgentPage::of` (tested equal), without first copying every listing's strings into an
/// `AgentSummary`. The REST search paths answer with it; `AgentPage` stays the documented
/// schema and the form the other paths embed.
pub struct PageView<'a> {
    page: &'a SearchPage,
    base_url: &'a str,
}

/// One hit's JSON, as `serde_json` writes `AgentHit` (the tests hold them equal): the fields of
/// `AgentSummary` in its order, then the score; the strings by `json_str`, the small nested
/// values by `serde_json` itself.
fn write_hit(out: &mut Vec<u8>, hit: &Hit, base_url: &str) -> serde_json::Result<()> {
    let listing = &*hit.listing;
    out.extend_from_slice(b"{\"id\":");
    json_str(out, listing.id())?;
    out.extend_from_slice(b",\"package_name\":");
    json_str(out, listing.package_name())?;
    out.extend_from_slice(b",\"name\":");
    json_str(out, listing.name())?;
    out.extend_from_slice(b",\"description\":");
    json_str(out, listing.description())?;
    if let Some(version) = listing.version() {
        out.extend_from_slice(b",\"version\":");
        json_str(out, version)?;
    }
    out.extend_from_slice(b",\"verification_level\":");
    serde_json::to_writer(&mut *out, &listing.verification_level)?;
    out.extend_from_slice(b",\"manifest_url\":");
    match listing.manifest_url() {
        Some(url) => json_str(out, url)?,
        None => json_str(
            out,
            &format!(
                "{base_url}/public/agents/resolve/{}",
                listing.package_name()
            ),
        )?,
    }
    if let Some(url) = listing.url() {
        out.extend_from_slice(b",\"url\":");
        json_str(out, url)?;
    }
    out.extend_from_slice(b",\"target\":");
    json_opt_str(out, listing.target())?;
    out.extend_from_slice(b",\"category\":");
    json_opt_str(out, listing.category())?;
    out.extend_from_slice(b",\"tags\":");
    json_strs(out, listing.tags())?;
    out.extend_from_slice(b",\"payment\":");
    serde_json::to_writer(&mut *out, &listing.payment.as_deref())?;
    out.extend_from_slice(b",\"capabilities\":");
    json_strs(out, listing.capabilities())?;
    if let Some(published_at) = &listing.published_at {
        // Digits and separators: nothing to escape.
        out.extend_from_slice(b",\"published_at\":\"");
        out.extend_from_slice(published_at.rfc3339().as_str().as_bytes());
        out.push(b'"');
    }
    out.extend_from_slice(b",\"health\":");
    match hit.health.as_deref() {
        Some(health) => serde_json::to_writer(&mut *out, health)?,
        None => serde_json::to_writer(&mut *out, &Health::unknown())?,
    }
    // A severity name: nothing to escape.
    out.extend_from_slice(b",\"max_severity\":\"");
    out.extend_from_slice(listing.severity.as_str().as_bytes());
    out.push(b'"');
    if let Some(deprecation) = &listing.deprecation {
        out.extend_from_slice(b",\"deprecation\":");
        serde_json::to_writer(&mut *out, deprecation)?;
    }
    if let Some(score) = hit.score {
        out.extend_from_slice(b",\"score\":");
        serde_json::to_writer(&mut *out, &score)?;
    }
    out.push(b'}');
    Ok(())
}

impl<'a> PageView<'a> {
    pub fn of(page: &'a SearchPage, base_url: &'a str) -> Self {
        Self { page, base_url }
    }

    /// The page's JSON, as `serde_json` writes `AgentPage` (the tests hold them equal).
    fn write(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        let page = self.page;
        out.extend_from_slice(b"{\"agents\":[");
        for (i, hit) in page.hits.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            write_hit(out, hit, self.base_url)?;
        }
        out.extend_from_slice(b"],\"total\":");
        serde_json::to_writer(&mut *out, &page.total)?;
        out.extend_from_slice(b",\"limit\":");
        serde_json::to_writer(&mut *out, &page.limit)?;
        out.extend_from_slice(b",\"next_cursor\":");
        json_opt_str(out, page.next_cursor.as_deref())?;
        if let Some(facets) = &page.facets {
            out.extend_from_slice(b",\"facets\":");
            serde_json::to_writer(&mut *out, &SearchFacets::of(facets))?;
        }
        out.push(b'}');
        Ok(())
    }

    /// The JSON response, its buffer sized for the page at once.
    pub fn response(self) -> crate::error::ApiResult<axum::response::Response> {
        use axum::http::{HeaderValue, header};
        use axum::response::IntoResponse;
        let mut body = Vec::with_capacity(256 + self.page.hits.len() * 1024);
        self.write(&mut body)
            .map_err(crate::error::ApiError::internal)?;
        let json = HeaderValue::from_static("application/json");
        Ok(([(header::CONTENT_TYPE, json)], body).into_response())
    }
}

/// One version of an agent.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VersionEntry {
    /// The version string; `GET /public/agents/{id}/versions/{version}` serves its record.
    pub version: String,
    /// When this version was written: published, or made by an update.
    pub published_at: Timestamp,
    /// This is the agent's current version, the one every other path serves.
    pub is_latest: bool,
    /// The publisher's deprecation of this version, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deprecation: Option<crate::domain::deprecation::Deprecation>,
}

/// An agent's versions.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct VersionList {
    /// The latest version first, then the earlier ones, most recent first.
    pub versions: Vec<VersionEntry>,
}

impl VersionList {
    /// The wire form of a history whose first entry is the current version.
    pub fn of(history: &[AgentVersion]) -> Self {
        Self {
            versions: history
                .iter()
                .enumerate()
                .map(|(at, version)| VersionEntry {
                    version: version.version.clone(),
                    published_at: version.published_at,
                    is_latest: at == 0,
                    deprecation: version.deprecation.clone(),
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use serde_json::json;

    use super::*;
    use crate::domain::{AgentDraft, HealthStatus};
    use crate::search::Hit;

    fn listing(body: serde_json::Value) -> Arc<Listing> {
        let draft = AgentDraft::parse(&body).expect("valid draft");
        let mut agent = Agent::new(
            draft,
            "alice",
            Timestamp::from_micros(1_795_000_000_000_000),
        );
        agent.published_at = Some(Timestamp::from_micros(1_795_000_100_000_000));
        Arc::new(Listing::of(&agent))
    }

    fn written(view: &PageView) -> String {
        let mut out = Vec::new();
        view.write(&mut out).expect("written");
        String::from_utf8(out).expect("UTF-8")
    }

    #[test]
    fn strings_are_written_as_serde_json_writes_them() {
        let mut strings: Vec<String> = [
            "",
            "plain words",
            "a \"quoted\" name",
            "back\\slash",
            "tab\there\r\nand\u{0}nul\u{1f}unit",
            "del \u{7f}, slash /, ünïcode, 漢字, emoji 🦀",
            "</script><script>alert(1)</script>",
        ]
        .map(str::to_owned)
        .to_vec();
        // Every byte below 0x80 at the start, the middle and the end of a longer string.
        for byte in 0u8..0x80 {
            let c = char::from(byte);
            strings.push(format!("{c}{}{c}{}{c}", "x".repeat(40), "y".repeat(40)));
        }
        for value in &strings {
            let mut out = Vec::new();
            json_str(&mut out, value).expect("written");
            let expected = serde_json::to_string(value).expect("serde_json");
            assert_eq!(
                String::from_utf8(out).expect("UTF-8"),
                expected,
                "{value:?}"
            );
        }
        let mut out = Vec::new();
        json_strs(&mut out, strings.iter().map(String::as_str)).expect("written");
        assert_eq!(out, serde_json::to_vec(&strings).expect("serde_json"));
    }

    #[test]
    fn the_borrowed_page_writes_the_json_of_the_wire_page() {
        // Every optional field present in one hit and absent in the other, so a field added to
        // one form and not the other shows here.
        let full = listing(json!({
            "package_name": "com.example.weather",
            "name": "Weather \"Agent\"",
            "description": "Forecasts for any city.\nLine two, ünïcode.",
            "version": "1.2.3",
            "url": "https://weather.example.com/a2a/v1",
            "manifest_url": "https://weather.example.com/.well-known/agent-card.json",
            "target": "developers",
            "category": "Weather",
            "tags": ["forecast", "real\"time"],
            "capabilities": [{"name": "get_forecast", "description": "Forecast"}],
            "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}
        }));
        let bare = listing(
            json!({"package_name": "com.example.bare", "name": "Bare", "description": "d"}),
        );
        let mut health = Health::unknown();
        health.status = HealthStatus::Up;
        health.latency_ms = Some(42);
        let mut facets = FacetCounts::default();
        facets.category.insert("Weather".to_owned(), 1);
        let page = SearchPage {
            hits: vec![
                Hit {
                    listing: full,
                    score: Some(0.75),
                    health: Some(Arc::new(health)),
                },
                Hit {
                    listing: bare,
                    score: None,
                    health: None,
                },
            ],
            total: 7,
            limit: 2,
            next_cursor: Some("abc".to_owned()),
            facets: Some(facets),
        };
        let base = "http://127.0.0.1:8080";
        let owned = serde_json::to_string(&AgentPage::of(&page, base)).expect("owned");
        let borrowed = written(&PageView::of(&page, base));
        assert_eq!(borrowed, owned);
        let last = SearchPage {
            next_cursor: None,
            facets: None,
            ..page
        };
        let owned = serde_json::to_string(&AgentPage::of(&last, base)).expect("owned");
        let borrowed = written(&PageView::of(&last, base));
        assert_eq!(borrowed, owned);
        assert!(owned.contains("\"next_cursor\":null") && !owned.contains("\"facets\""));
    }
}
