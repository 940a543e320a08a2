//! The liveness and conformance prober: a background task that checks the endpoints of ACTIVE
//! agents and records what it finds as their `health`.
//!
//! The schedule lives in the store (`agent_probes`): each probeable agent has a next due time,
//! and a process takes due agents by leasing them, so several processes on one PostgreSQL
//! database probe each agent once per round between them. After a probe the next one is due one
//! interval later, with ±10% jitter so probes of a big import spread out, and later still while
//! the agent keeps failing (twice the interval after two failures in a row, up to eight times).
//!
//! Politeness: every request goes through the SSRF-guarded fetcher (private addresses are
//! refused unless the operator allows them); one probe per host at a time; at most
//! `--probe-concurrency` probes at once per process; each probe has a total time limit.
//! Which requests a probe makes, and how answers are classified, is in `check`.

pub mod check;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rand::Rng;
use tokio::task::JoinSet;

use crate::config::ProbeConfig;
use crate::domain::Health;
use crate::domain::health::ProbeOutcome;
use crate::outbound::Outbound;
use crate::registry::Registry;
use crate::task::AbortOnDrop;
use crate::timestamp::Timestamp;

/// The longest the prober waits between two looks at the schedule.
const MAX_TICK: Duration = Duration::from_secs(5);
/// The first probes of agents found at start-up are spread over at most this long.
const MAX_START_SPREAD: Duration = Duration::from_secs(300);
/// A failing agent's interval grows to at most this many times the configured one.
const MAX_BACKOFF: u32 = 8;

/// The prober of one process.
pub struct Prober {
    registry: Arc<Registry>,
    outbound: Arc<Outbound>,
    interval: Duration,
    timeout: Duration,
    concurrency: usize,
    /// Who holds this process's leases.
    owner: String,
    /// One lock per host being probed: a host sees one probe at a time from this process.
    hosts: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Prober {
    /// Start probing in the background for as long as the returned guard lives; `None` when
    /// the configuration turns probing off.
    pub fn spawn(
        registry: Arc<Registry>,
        outbound: Arc<Outbound>,
        config: &ProbeConfig,
        instance: &crate::instance::Instance,
    ) -> Option<AbortOnDrop> {
        let interval = config.interval()?;
        let prober = Arc::new(Self {
            registry,
            outbound,
            interval,
            timeout: config.timeout(),
            concurrency: config.concurrency(),
            owner: format!("prb:{}", instance.id()),
            hosts: Mutex::new(HashMap::new()),
        });
        Some(AbortOnDrop::new(tokio::spawn(prober.run())))
    }

    async fn run(self: Arc<Self>) {
        // Probes this process's earlier run leased and never finished (it died mid-probe)
        // are due again now, not when their leases run out.
        match self.registry.release_probe_leases(&self.owner).await {
            Ok(0) => {}
            Ok(released) => {
                tracing::info!(released, "resuming the probes this instance left leased")
            }
            Err(err) => tracing::warn!(error = %err, "cannot release this instance's probe leases"),
        }
        let spread = self.interval.min(MAX_START_SPREAD);
        let started = Timestamp::now();
        let scheduled = self
            .registry
            .schedule_all_probes(started, |i| {
                // Spread the first round evenly over `spread`, a few agents per second.
                started.plus(Duration::from_millis((i as u64).saturating_mul(100)).min(spread))
            })
            .await;
        match scheduled {
            Ok(count) => tracing::info!(
                agents = count,
                interval_secs = self.interval.as_secs(),
                "prober started"
            ),
            Err(err) => {
                tracing::warn!(error = %err, "cannot schedule the probes of existing agents")
            }
        }
        let tick = self.interval.min(MAX_TICK);
        let mut running = JoinSet::new();
        loop {
            while running.try_join_next().is_some() {}
            let free = self.concurrency.saturating_sub(running.len());
            if free > 0 {
                match self.claim(free).await {
                    Ok(claimed) => {
                        for id in claimed {
                            let prober = Arc::clone(&self);
                            running.spawn(async move { prober.probe(&id).await });
                        }
                    }
                    Err(err) => tracing::warn!(error = %err, "cannot claim due probes"),
                }
            }
            self.forget_idle_hosts();
            tokio::select! {
                () = tokio::time::sleep(tick) => {}
                Some(_) = running.join_next(), if !running.is_empty() => {}
            }
        }
    }

    /// Lease up to `free` due agents. The lease covers the worst case of them all waiting for
    /// one host in turn, so no other process takes them meanwhile.
    async fn claim(&self, free: usize) -> crate::registry::RegistryResult<Vec<String>> {
        let now = Timestamp::now();
        let hold = self.timeout * u32::try_from(free + 2).unwrap_or(u32::MAX);
        let lease_until = now.plus(hold);
        self.registry
            .claim_probes(
                &self.owner,
                now,
                lease_until,
                u32::try_from(free).unwrap_or(u32::MAX),
            )
            .await
    }

    /// Probe one claimed agent and record the outcome.
    async fn probe(&self, id: &str) {
        let subject = match self.registry.probe_subject(id).await {
            Ok(Some(subject)) => subject,
            Ok(None) => return,
            Err(err) => {
                tracing::warn!(error = %err, agent = id, "cannot read the agent to probe");
                return;
            }
        };
        let (agent, target) = subject;
        let host = url::Url::parse(target.url())
            .ok()
            .and_then(|url| url.host_str().map(str::to_owned))
            .unwrap_or_default();
        let lock = self.host_lock(&host);
        let _one_per_host = lock.lock().await;
        let at = Timestamp::now();
        let started = Instant::now();
        let inspect = agent.draft.inspect_tools != Some(false);
        let finding = check::run(&self.outbound, &target, self.timeout, inspect).await;
        let latency = finding.answered_in.unwrap_or_else(|| started.elapsed());
        let outcome = ProbeOutcome {
            status: finding.status,
            kind: finding.kind,
            target: target.url().to_owned(),
            at,
            latency_ms: u64::try_from(latency.as_millis()).unwrap_or(u64::MAX),
            detail: finding.detail,
        };
        let failures = Health::failures_after(agent.health.as_ref(), outcome.status);
        let next_at = self.next_due(Timestamp::now(), failures);
        metrics::counter!("registry_probes_total", "status" => outcome.status.as_str())
            .increment(1);
        metrics::histogram!("registry_probe_duration_seconds").record(latency.as_secs_f64());
        if let Err(err) = self.registry.record_probe(id, &outcome, next_at).await {
            tracing::warn!(error = %err, agent = id, "cannot record a probe");
        }
        if let Some(surface) = &finding.surface
            && let Err(err) = self.registry.record_surface(id, surface, at).await
        {
            tracing::warn!(error = %err, agent = id, "cannot record what the endpoint shows");
        }
    }

    /// When the next probe is due after `failures` failures in a row.
    fn next_due(&self, now: Timestamp, failures: u32) -> Timestamp {
        let backoff = match failures {
            0 | 1 => 1,
            n => (1u32 << (n - 1).min(3)).min(MAX_BACKOFF),
        };
        let jitter = rand::thread_rng().gen_range(0.9..=1.1);
        now.plus(self.interval.mul_f64(f64::from(backoff) * jitter))
    }

    fn host_lock(&self, host: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut hosts = self
            .hosts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        Arc::clone(hosts.entry(host.to_owned()).or_default())
    }

    /// Drop the locks of hosts no probe holds or waits for.
    fn forget_idle_hosts(&self) {
        let mut hosts = self
            .hosts
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        hosts.retain(|_, lock| Arc::strong_count(lock) > 1);
    }
}
