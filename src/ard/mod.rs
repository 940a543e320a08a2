//! ARD, the Agentic Resource Discovery specification (v0.91): the registry as a source of ARD
//! entries and as an ARD registry that clients query and other registries federate with.
//!
//! - `/.well-known/ard.json` (and `/.well-known/ai-catalog.json`, its predecessor's path): every
//!   ACTIVE agent as an ARD entry, plus one entry for the registry itself whose `url` is the
//!   base of the API below (`entry`; served by `api::ard`);
//! - `POST /ard/search`, `POST /ard/explore`, `GET /ard/agents`, `GET /ard/agents/{urn}`: the
//!   registry API, over the one search function (`search`, `list`), its filters resolved as
//!   JSON-LD terms (`query`), its errors in ARD's shape (`error`);
//! - federation with upstream ARD registries (`federation`).
//!
//! The module reads the registry and fetches through the outbound fetcher; it knows nothing of
//! the application's state, so the A2A skill, the web pages and the router can all use it.

use std::sync::Arc;
use std::time::Duration;

use crate::config::ArdConfig;
use crate::outbound::Outbound;
use crate::registry::Registry;

pub mod entry;
pub mod error;
pub mod federation;
pub mod list;
pub mod query;
pub mod search;

/// Where the manifest is served.
pub const MANIFEST_PATH: &str = "/.well-known/ard.json";
/// The predecessor's path, serving the same document.
pub const AI_CATALOG_PATH: &str = "/.well-known/ai-catalog.json";
/// The registry API's base path: the registry's own entry names `{base_url}/ard`.
pub const API_BASE: &str = "/ard";
/// The entry type of a registry, this one included.
pub const REGISTRY_TYPE: &str = "application/ai-registry+json";
/// The entry type of an A2A agent: its `url` is the card the registry serves.
pub const A2A_TYPE: &str = "application/a2a-agent-card+json";
/// The entry type of an MCP server: its `url` is its `server.json` in the MCP Registry API.
pub const MCP_TYPE: &str = "application/mcp-server-card+json";
/// The entry type of an agent that states no way to call it: its `url` is its record.
pub const RECORD_TYPE: &str = "application/vnd.agent-registry.record+json";
/// The entry type of the next page of a paged manifest.
pub const CATALOG_TYPE: &str = "application/ai-catalog+json";
/// A request header naming the registries a federated search already went through: a search
/// that carries it is answered from the local index only, so two registries that name each
/// other as upstreams never loop.
pub const FEDERATED_BY: &str = "ard-federated-by";

/// The ARD side of the registry: what the handlers, the A2A skill and federation share.
pub struct Ard {
    pub registry: Arc<Registry>,
    /// Public root URL without a trailing slash.
    pub base_url: Arc<str>,
    /// The registry's own discovery identifier.
    pub identifier: String,
    /// The ARD API base this registry answers at (`{base_url}/ard`): its entry's `url` and the
    /// `source` of its own results.
    pub api_url: Arc<str>,
    pub upstreams: Vec<federation::Upstream>,
    /// Fetches from the upstreams (operator-configured origins).
    pub outbound: Arc<Outbound>,
    /// How long a federated search waits for every upstream together.
    pub upstream_timeout: Duration,
    /// Entries per page of the manifest.
    pub manifest_page_size: usize,
}

impl Ard {
    pub fn new(
        registry: Arc<Registry>,
        base_url: Arc<str>,
        config: &ArdConfig,
        outbound: Arc<Outbound>,
        manifest_page_size: usize,
    ) -> Self {
        let identifier = entry::registry_identifier(&base_url);
        let api_url = format!("{base_url}{API_BASE}").into();
        Self {
            api_url,
            upstreams: config
                .ard_upstreams
                .iter()
                .map(federation::Upstream::new)
                .collect(),
            registry,
            identifier,
            base_url,
            outbound,
            upstream_timeout: config.upstream_timeout(),
            manifest_page_size: manifest_page_size.clamp(1, 10_000),
        }
    }
}
