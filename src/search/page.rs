//! What a search returns: its own types, which the transports map to their wire shapes.

use std::sync::Arc;

use crate::domain::Payment;
use crate::store::{Agent, VerificationLevel};
use crate::timestamp::Timestamp;

/// What a result list shows of one agent. The index keeps one per agent, built when the agent
/// is indexed, so a page of results reads nothing from storage.
#[derive(Debug, Clone, PartialEq)]
pub struct Listing {
    pub id: String,
    pub package_name: String,
    pub name: String,
    pub description: String,
    pub version: Option<String>,
    pub verification_level: VerificationLevel,
    /// The owner's own card address, when they gave one.
    pub manifest_url: Option<String>,
    pub url: Option<String>,
    pub target: Option<String>,
    pub category: Option<String>,
    pub tags: Vec<String>,
    /// Boxed: most agents have none, and the struct is 150 bytes (a million listings).
    pub payment: Option<Box<Payment>>,
    /// Names of the agent's capabilities.
    pub capabilities: Vec<String>,
    pub published_at: Option<Timestamp>,
    /// When the record last changed.
    pub updated_at: Timestamp,
    /// Whether it lists an MCP remote or package.
    pub mcp: bool,
}

impl Listing {
    pub fn of(agent: &Agent) -> Self {
        let draft = &agent.draft;
        Self {
            id: agent.id.clone(),
            package_name: agent.package_name().to_owned(),
            name: draft.name.clone(),
            description: draft.description.clone(),
            version: draft.version.clone(),
            verification_level: agent.verification_level,
            manifest_url: draft.manifest_url.clone(),
            url: draft.url.clone(),
            target: draft.target.clone(),
            category: draft.category.clone(),
            tags: draft.tags.clone(),
            payment: draft.payment.clone().map(Box::new),
            capabilities: draft.capabilities.iter().map(|c| c.name.clone()).collect(),
            published_at: agent.published_at,
            updated_at: agent.updated_at,
            mcp: !draft.reach.remotes.is_empty() || !draft.reach.packages.is_empty(),
        }
    }
}

/// One result: the agent's listing and, when ranked by relevance, its score.
#[derive(Debug, Clone)]
pub struct Hit {
    pub listing: Arc<Listing>,
    /// Higher is better; comparable within one page only. `None` unless sorted by relevance.
    pub score: Option<f64>,
    /// What the prober last found; `None` when the agent was never probed.
    pub health: Option<Arc<crate::domain::Health>>,
}

/// One page of results.
#[derive(Debug, Clone)]
pub struct SearchPage {
    pub hits: Vec<Hit>,
    /// Matches for the query and filters, over all pages.
    pub total: usize,
    /// The page size used (after clamping).
    pub limit: usize,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
    /// Counts per facet value over every match, when the request asked for them.
    pub facets: Option<super::FacetCounts>,
}
