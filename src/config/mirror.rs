//! Mirror sources: other catalogues this registry fills itself from and keeps in step with.

use clap::Args;

use crate::domain::mirror_source::Source;

/// Which sources are mirrored, and how often.
#[derive(Args, Clone, Debug)]
pub struct MirrorConfig {
    /// A source to mirror, as `KIND=URL`: `mcp-registry=https://registry.modelcontextprotocol.io`
    /// (the MCP Registry API), `agent-registry=URL` (another instance of this registry) or
    /// `ard=https://publisher.example` (an ARD publisher). Repeatable, or comma-separated in the
    /// environment variable.
    #[arg(long = "mirror", env = "REGISTRY_MIRRORS", value_delimiter = ',',
          value_parser = Source::parse)]
    pub mirrors: Vec<Source>,

    /// Seconds between two passes of each source (a failing source waits longer, up to eight
    /// times this).
    #[arg(long, env = "REGISTRY_MIRROR_INTERVAL_SECS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub mirror_interval_secs: u64,

    /// Seconds a pass keeps its source from other processes without a sign of life (each page
    /// renews it): how long a source waits after the process syncing it died.
    #[arg(long, env = "REGISTRY_MIRROR_LEASE_SECS", default_value_t = 90,
          value_parser = clap::value_parser!(u64).range(2..=3600))]
    pub mirror_lease_secs: u64,

    /// Keep new mirrored agents in STAGE for an operator to publish, instead of ACTIVE.
    #[arg(long, env = "REGISTRY_MIRROR_STAGE", default_value_t = false, action = clap::ArgAction::Set)]
    pub mirror_stage: bool,
}
