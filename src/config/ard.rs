//! The ARD registry API's federation: which upstream ARD registries a search may ask, and how
//! long it waits for them.

use std::time::Duration;

use clap::Args;

/// Upstream ARD registries.
#[derive(Args, Clone, Debug, Default)]
pub struct ArdConfig {
    /// The ARD API base of an upstream registry (`https://registry.example/ard`, where its
    /// `POST …/search` answers); repeatable, or comma-separated in the environment variable.
    /// A search with `federation: auto` (the default) asks every upstream and merges their
    /// results with the local ones; `referrals` names them instead.
    #[arg(
        long = "ard-upstream",
        env = "REGISTRY_ARD_UPSTREAMS",
        value_delimiter = ','
    )]
    pub ard_upstreams: Vec<url::Url>,

    /// Milliseconds a federated search waits for all upstreams together; an upstream that has
    /// not answered by then is left out of that answer (and named in it).
    #[arg(long, env = "REGISTRY_ARD_UPSTREAM_TIMEOUT_MS", default_value_t = 1500,
          value_parser = clap::value_parser!(u64).range(50..=60_000))]
    pub ard_upstream_timeout_ms: u64,
}

impl ArdConfig {
    pub fn upstream_timeout(&self) -> Duration {
        Duration::from_millis(self.ard_upstream_timeout_ms)
    }
}
