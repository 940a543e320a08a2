//! How the liveness prober checks listed agents' endpoints.

use std::time::Duration;

use clap::Args;

/// The liveness and conformance prober.
#[derive(Args, Clone, Debug)]
pub struct ProbeConfig {
    /// Seconds between two probes of one agent (each gets ±10% jitter, and failing agents are
    /// probed less often); 0 turns the prober off.
    #[arg(long, env = "REGISTRY_PROBE_INTERVAL_SECS", default_value_t = 1800)]
    pub probe_interval_secs: u64,

    /// Seconds one probe may take in total (connection, redirects, body, and the optional
    /// message) before the agent counts as down.
    #[arg(long, env = "REGISTRY_PROBE_TIMEOUT_SECS", default_value_t = 10,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub probe_timeout_secs: u64,

    /// Probes running at once in this process (one per host at a time, whatever this is).
    #[arg(long, env = "REGISTRY_PROBE_CONCURRENCY", default_value_t = 8,
          value_parser = clap::value_parser!(u64).range(1..=256))]
    pub probe_concurrency: u64,
}

impl ProbeConfig {
    /// `None` when probing is off.
    pub fn interval(&self) -> Option<Duration> {
        (self.probe_interval_secs > 0).then(|| Duration::from_secs(self.probe_interval_secs))
    }

    pub fn timeout(&self) -> Duration {
        Duration::from_secs(self.probe_timeout_secs.max(1))
    }

    pub fn concurrency(&self) -> usize {
        usize::try_from(self.probe_concurrency).unwrap_or(8).max(1)
    }
}
