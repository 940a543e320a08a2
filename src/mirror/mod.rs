//! Mirrors: the registry filled from other catalogues and kept in step with them.
//!
//! A source is configured as `KIND=URL`: `mcp-registry` (the MCP Registry API, as the official
//! registry and this one serve it), `agent-registry` (another instance of this registry, through
//! its public change feed) or `ard` (an ARD publisher's manifest). Each pass reads the source a
//! page at a time; each page's agents are written with the source's new position in one
//! transaction (`Store::write_mirror_page`), so a pass stopped anywhere (a crash, `kill -9`)
//! resumes from the last page written, and a page applied twice writes nothing new (`plan`).
//!
//! Mirrored agents are owned by `mirror:{source id}` and carry their provenance; only the master
//! key may change them. A package name a local agent holds is left to it (a collision, counted).
//! A process syncs a source only while it holds the source's lease, so several processes on one
//! PostgreSQL database sync each source once per interval between them; the others see the
//! agents through the change log, as any write.

mod agent_registry;
mod ard;
mod fetch;
mod mcp_registry;
pub mod plan;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use url::Url;

use crate::outbound::Outbound;
use crate::registry::{Registry, RegistryError};
use crate::store::{MirrorPage, MirrorRecord, MirrorSkip, Provenance, Store, StoreError};
use crate::task::AbortOnDrop;
use crate::timestamp::Timestamp;

pub use crate::domain::mirror_source::{Kind, Source};
pub use fetch::MirrorError;
use plan::{Entry, Read};

/// `url` + `path` (which starts with `/`).
fn endpoint(source: &Source, path: &str) -> Result<Url, MirrorError> {
    let base = source.url.as_str().trim_end_matches('/');
    Url::parse(&format!("{base}{path}")).map_err(|err| MirrorError::Malformed(err.to_string()))
}

/// Where `entry` of `source` came from, fetched at `at`.
fn provenance(source: &Source, entry: &Entry, at: Timestamp) -> Provenance {
    Provenance {
        source: source.id.clone(),
        source_url: source.url.to_string(),
        upstream_id: entry.upstream_id.clone(),
        fetched_at: at,
        status: entry.status_text(),
    }
}

/// How mirrors run.
#[derive(Debug, Clone)]
pub struct Settings {
    pub sources: Vec<Source>,
    pub interval: Duration,
    /// New mirrored agents stay in STAGE for an operator to publish.
    pub stage: bool,
    /// How long a pass keeps its source from other processes without a sign of life: each page
    /// written renews it, so a process that died frees its sources after this long.
    pub lease: Duration,
}

impl Settings {
    /// Entries asked for per page: the MCP Registry API's largest page.
    pub const PAGE_SIZE: u32 = 100;

    /// The settings the configuration gives.
    pub fn of(config: &crate::config::MirrorConfig) -> Self {
        Self {
            sources: config.mirrors.clone(),
            interval: Duration::from_secs(config.mirror_interval_secs),
            stage: config.mirror_stage,
            lease: Duration::from_secs(config.mirror_lease_secs),
        }
    }
}

/// What a pass reports as it goes.
pub trait Progress: Send + Sync {
    /// `entries` read so far in this pass, `written` of them changed something.
    fn page(&self, source: &Source, entries: u64, written: u64);
}

/// Reports nothing.
pub struct Quiet;

impl Progress for Quiet {
    fn page(&self, _: &Source, _: u64, _: u64) {}
}

/// What one pass did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct PassReport {
    pub pages: u64,
    pub entries: u64,
    pub inserted: u64,
    pub updated: u64,
    pub deleted: u64,
    pub skipped: u64,
    pub collisions: u64,
    /// The entries left out (`skipped` and `collisions`) by class of reason
    /// (`invalid_field:description`, `collision`, …).
    pub left_out: BTreeMap<String, u64>,
}

impl PassReport {
    /// `left_out` as `class=count` pairs: `identifier=2 invalid_field:description=1`.
    pub fn left_out_text(&self) -> String {
        self.left_out
            .iter()
            .map(|(class, count)| format!("{class}={count}"))
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// The mirror engine of one process: its sources, the fetcher, and who it is for leases.
pub struct Mirrors {
    registry: Arc<Registry>,
    store: Arc<dyn Store>,
    outbound: Arc<Outbound>,
    settings: Settings,
    /// Who holds this process's leases.
    owner: String,
    /// One pass per source at a time in this process (the lease keeps other processes out).
    running: std::sync::Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

/// The longest a process waits between two looks at its sources.
const MAX_TICK: Duration = Duration::from_secs(5);
/// A failing source waits at most this many intervals.
const MAX_BACKOFF: u32 = 8;
/// How often a long pass says how far it is.
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

impl Mirrors {
    pub fn new(
        registry: Arc<Registry>,
        store: Arc<dyn Store>,
        outbound: Arc<Outbound>,
        settings: Settings,
    ) -> Self {
        Self {
            registry,
            store,
            outbound,
            settings,
            owner: format!("mir_{}", ulid::Ulid::new()),
            running: std::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Take leases under `instance`'s name: a source this process's earlier run left
    /// leased (it died mid-pass) is resumed at once, not when the lease runs out.
    pub fn for_instance(mut self, instance: &crate::instance::Instance) -> Self {
        self.owner = format!("mir:{}", instance.id());
        self
    }

    pub fn settings(&self) -> &Settings {
        &self.settings
    }

    /// Sync every source in the background, each when its interval is due, for as long as the
    /// returned guard lives; `None` when no source is configured.
    pub fn spawn(self: Arc<Self>) -> Option<AbortOnDrop> {
        if self.settings.sources.is_empty() {
            return None;
        }
        Some(AbortOnDrop::new(tokio::spawn(self.run())))
    }

    async fn run(self: Arc<Self>) {
        tracing::info!(
            sources = self.settings.sources.len(),
            interval_secs = self.settings.interval.as_secs(),
            "mirrors started"
        );
        let tick = self.settings.interval.min(MAX_TICK);
        loop {
            for source in &self.settings.sources {
                // One source at a time: a first walk is the registry's heaviest write.
                if let Err(err) = self.pass_if_due(source, false, &Quiet).await {
                    tracing::warn!(source = %source.id, error = %err, "mirror pass failed");
                }
            }
            let jitter = rand::thread_rng().gen_range(0..=tick.as_millis() as u64 / 10);
            tokio::time::sleep(tick + Duration::from_millis(jitter)).await;
        }
    }

    /// Run a pass of `source` if it is due (or `force`) and no other process holds it.
    /// `Ok(None)` when it was not this process's turn.
    pub async fn pass_if_due(
        &self,
        source: &Source,
        force: bool,
        progress: &dyn Progress,
    ) -> Result<Option<PassReport>, MirrorError> {
        let gate = {
            let mut running = self.running.lock().unwrap_or_else(|e| e.into_inner());
            Arc::clone(running.entry(source.id.clone()).or_default())
        };
        // A forced pass (the command line, an operator) waits for one under way; a timed one
        // leaves the turn to it.
        let _turn = if force {
            gate.lock().await
        } else {
            match gate.try_lock() {
                Ok(turn) => turn,
                Err(_) => return Ok(None),
            }
        };
        let now = Timestamp::now();
        let claimed = self
            .store
            .claim_mirror(
                &source.id,
                source.kind.as_str(),
                source.url.as_str(),
                &self.owner,
                now,
                now.plus(self.settings.lease),
                force,
            )
            .await
            .map_err(|err| MirrorError::Store(err.to_string()))?;
        let Some(record) = claimed else {
            return Ok(None);
        };
        let mut pass = Pass::new(self, source, &record, progress);
        let result = pass.run().await;
        if !pass.report.left_out.is_empty() {
            // What was left out, by reason; the entries themselves are in `/api/mirrors`.
            tracing::info!(source = %source.id, skipped = pass.report.skipped,
                collisions = pass.report.collisions, reasons = %pass.report.left_out_text(),
                "mirror: pass left entries out");
        }
        let at = Timestamp::now();
        let (error, next) = match &result {
            Ok(()) => (None, self.settings.interval),
            Err(err) => {
                // Twice the interval after one failure, four times after two, then eight.
                let failures = u32::try_from(record.failures + 1).unwrap_or(u32::MAX);
                let factor = 2u32.saturating_pow(failures).min(MAX_BACKOFF);
                (Some(err.to_string()), self.settings.interval * factor)
            }
        };
        let jitter =
            Duration::from_millis(rand::thread_rng().gen_range(0..=next.as_millis() as u64 / 20));
        metrics::counter!("registry_mirror_passes_total", "source" => source.id.clone(),
            "outcome" => if result.is_ok() { "ok" } else { "error" })
        .increment(1);
        if let Err(err) = self
            .store
            .end_mirror_pass(
                &source.id,
                &self.owner,
                at,
                error.as_deref(),
                at.plus(next + jitter),
            )
            .await
        {
            tracing::warn!(source = %source.id, error = %err, "cannot record the mirror pass");
        }
        result.map(|()| Some(pass.report))
    }

    /// Every configured source with its stored state (a source that has not run yet has
    /// none), then the sources that ran before and are no longer configured (their agents
    /// stay until an operator removes them).
    pub async fn status(&self) -> Result<Vec<(Source, Option<MirrorRecord>)>, StoreError> {
        let mut stored: HashMap<String, MirrorRecord> = self
            .store
            .mirror_sources()
            .await?
            .into_iter()
            .map(|record| (record.id.clone(), record))
            .collect();
        let mut status: Vec<(Source, Option<MirrorRecord>)> = self
            .settings
            .sources
            .iter()
            .map(|source| (source.clone(), stored.remove(&source.id)))
            .collect();
        let mut rest: Vec<MirrorRecord> = stored.into_values().collect();
        rest.sort_by(|a, b| a.id.cmp(&b.id));
        for record in rest {
            if let Ok(source) = Source::parse(&format!("{}={}", record.kind, record.url)) {
                status.push((source, Some(record)));
            }
        }
        Ok(status)
    }

    /// Whether `source` is configured here.
    pub fn is_configured(&self, source: &Source) -> bool {
        self.settings.sources.iter().any(|s| s.id == source.id)
    }
}

/// One pass over one source.
struct Pass<'a> {
    mirrors: &'a Mirrors,
    source: &'a Source,
    /// The position the last page wrote (JSON), `None` before the first.
    position: Option<String>,
    walked: bool,
    report: PassReport,
    progress: &'a dyn Progress,
    started: Instant,
    said: Instant,
    /// The package names read in this pass, when it is a full walk that started from the
    /// beginning: what the source holds that such a walk did not see is gone from it.
    seen: Option<HashSet<String>>,
}

impl<'a> Pass<'a> {
    fn new(
        mirrors: &'a Mirrors,
        source: &'a Source,
        record: &MirrorRecord,
        progress: &'a dyn Progress,
    ) -> Self {
        Self {
            mirrors,
            source,
            position: record.position.clone(),
            walked: record.walked,
            report: PassReport::default(),
            progress,
            started: Instant::now(),
            said: Instant::now(),
            seen: None,
        }
    }

    async fn run(&mut self) -> Result<(), MirrorError> {
        let first = !self.walked;
        if first {
            tracing::info!(source = %self.source.id, url = %self.source.url, "mirror: first walk started");
        }
        match self.source.kind {
            Kind::McpRegistry => mcp_registry::pass(self).await?,
            Kind::AgentRegistry => agent_registry::pass(self).await?,
            Kind::Ard => ard::pass(self).await?,
        }
        let report = &self.report;
        if first {
            tracing::info!(source = %self.source.id, entries = report.entries,
                inserted = report.inserted, skipped = report.skipped, collisions = report.collisions,
                elapsed_ms = self.started.elapsed().as_millis() as u64, "mirror: first walk done");
        } else if report.inserted + report.updated + report.deleted > 0 {
            tracing::info!(source = %self.source.id, inserted = report.inserted,
                updated = report.updated, deleted = report.deleted, "mirror: pass wrote changes");
        }
        Ok(())
    }

    /// The position the source's kind keeps, as the last page wrote it; from the start when
    /// there is none (or it is not one this kind reads).
    fn stored_position<T: serde::de::DeserializeOwned + Default>(&self) -> T {
        self.position
            .as_deref()
            .and_then(|text| serde_json::from_str(text).ok())
            .unwrap_or_default()
    }

    /// The fetcher.
    fn outbound(&self) -> &Outbound {
        &self.mirrors.outbound
    }

    fn page_size(&self) -> u32 {
        Settings::PAGE_SIZE
    }

    /// Start remembering the names read: this pass walks the whole source from its start.
    fn track_seen(&mut self) {
        self.seen = Some(HashSet::new());
    }

    /// Decide and write one page with the source's new `position`; `walked` once the first
    /// full walk has reached its end.
    async fn write(
        &mut self,
        reads: Vec<Read>,
        position: Option<String>,
        walked: bool,
    ) -> Result<(), MirrorError> {
        self.write_with(reads, Vec::new(), position, walked).await
    }

    /// `write`, deleting the source's agents in `gone` (ids) too.
    async fn write_with(
        &mut self,
        reads: Vec<Read>,
        gone: Vec<String>,
        position: Option<String>,
        walked: bool,
    ) -> Result<(), MirrorError> {
        self.report.pages += 1;
        self.report.entries += reads
            .iter()
            .filter(|read| !matches!(read, Read::Gone { .. }))
            .count() as u64;
        if let Some(seen) = &mut self.seen {
            for read in &reads {
                if let Read::Entry(entry) = read {
                    seen.insert(entry.draft.package_name.as_str().to_owned());
                }
            }
        }
        let registry = &self.mirrors.registry;
        // Under `--scan-policy block`, what a publisher could not publish is not copied either:
        // the entry is counted as skipped, and a copy written before is removed.
        let reads = if registry.scan_policy() == crate::config::ScanPolicy::Block {
            plan::without_blocked(reads)
        } else {
            reads
        };
        let names: Vec<String> = reads
            .iter()
            .filter_map(|read| match read {
                Read::Entry(entry) => Some(entry.draft.package_name.as_str().to_owned()),
                Read::Gone { package_name } => Some(package_name.clone()),
                Read::Skipped(_) => None,
            })
            .collect();
        let mut attempt = 0;
        loop {
            attempt += 1;
            let existing = registry.find_by_names(&names).await.map_err(store_error)?;
            let mut plan = plan::plan(
                self.source,
                reads.clone(),
                existing,
                self.mirrors.settings.stage,
                Timestamp::now(),
            );
            plan.page.deletes.extend(gone.iter().cloned());
            plan.page.source = self.source.id.clone();
            plan.page.lease_owner = self.mirrors.owner.clone();
            plan.page.lease_until = Some(Timestamp::now().plus(self.mirrors.settings.lease));
            plan.page.position = position.clone();
            plan.page.walked = walked;
            match registry.write_mirror_page(&plan.page, &plan.before).await {
                Ok(written) => {
                    self.count(&plan.page, written.deleted.len());
                    break;
                }
                // A local agent took a name meanwhile, or two entries map onto one
                // identifier: decide again, then write the page an agent at a time.
                Err(RegistryError::Store(StoreError::Conflict(message))) if attempt == 1 => {
                    tracing::debug!(source = %self.source.id, %message, "mirror page conflicts; deciding again");
                }
                Err(RegistryError::Store(StoreError::Conflict(_))) => {
                    self.write_one_by_one(plan.page).await?;
                    break;
                }
                Err(err) => return Err(store_error(err)),
            }
        }
        if position.is_some() {
            self.position = position;
        }
        self.walked = walked;
        self.progress.page(
            self.source,
            self.report.entries,
            self.report.inserted + self.report.updated + self.report.deleted,
        );
        if self.said.elapsed() >= PROGRESS_EVERY {
            self.said = Instant::now();
            tracing::info!(source = %self.source.id, entries = self.report.entries,
                inserted = self.report.inserted, updated = self.report.updated,
                elapsed_ms = self.started.elapsed().as_millis() as u64, "mirror: pass under way");
        }
        Ok(())
    }

    /// Write a page whose whole write conflicts an agent at a time, at the old position, then
    /// the new position alone: what still conflicts is a collision.
    async fn write_one_by_one(&mut self, page: MirrorPage) -> Result<(), MirrorError> {
        let registry = &self.mirrors.registry;
        let old_position = self.position.clone();
        let old_walked = self.walked;
        let single = |page: &MirrorPage| MirrorPage {
            source: page.source.clone(),
            lease_owner: page.lease_owner.clone(),
            lease_until: page.lease_until,
            position: old_position.clone(),
            walked: old_walked,
            at: page.at,
            ..MirrorPage::default()
        };
        let mut collisions = Vec::new();
        let mut parts = Vec::new();
        for agent in &page.inserts {
            let mut one = single(&page);
            one.inserts.push(agent.clone());
            parts.push((agent.package_name().to_owned(), one));
        }
        for update in &page.updates {
            let mut one = single(&page);
            one.updates.push(update.clone());
            parts.push((update.draft.package_name.as_str().to_owned(), one));
        }
        for id in &page.deletes {
            let mut one = single(&page);
            one.deletes.push(id.clone());
            parts.push((id.clone(), one));
        }
        for (name, one) in parts {
            match registry.write_mirror_page(&one, &HashMap::new()).await {
                Ok(written) => self.count(&one, written.deleted.len()),
                Err(RegistryError::Store(StoreError::Conflict(_))) => collisions.push(name),
                Err(err) => return Err(store_error(err)),
            }
        }
        let at = page.at.unwrap_or_else(Timestamp::now);
        let mut last = single(&page);
        last.position = page.position.clone();
        last.walked = page.walked;
        last.history = page.history;
        last.skipped = page.skipped;
        last.collisions = page.collisions + collisions.len() as i64;
        last.skips = page.skips;
        last.skips.extend(collisions.iter().map(|name| {
            MirrorSkip::new(
                name,
                plan::Skip::COLLISION,
                &format!("package name or identifier of {name} is taken"),
                at,
            )
        }));
        registry
            .write_mirror_page(&last, &HashMap::new())
            .await
            .map_err(store_error)?;
        self.count(&last, 0);
        Ok(())
    }

    /// Count a page written (and `deleted` agents it deleted) in the report and the metrics.
    fn count(&mut self, page: &MirrorPage, deleted: usize) {
        self.report.inserted += page.inserts.len() as u64;
        self.report.updated += page.updates.len() as u64;
        self.report.deleted += deleted as u64;
        self.report.skipped += page.skipped as u64;
        self.report.collisions += page.collisions as u64;
        let source = self.source.id.clone();
        let mut by_class: BTreeMap<&str, u64> = BTreeMap::new();
        for skip in &page.skips {
            *by_class.entry(skip.class.as_str()).or_default() += 1;
            if matches!(
                skip.class.as_str(),
                plan::Skip::COLLISION | plan::Skip::RESERVED_NAME | plan::Skip::SECURITY_FINDING
            ) {
                tracing::warn!(source = %source, entry = %skip.upstream_id,
                    reason = %skip.reason, "mirror entry left out");
            }
        }
        for (class, count) in by_class {
            *self.report.left_out.entry(class.to_owned()).or_default() += count;
            // The class is one of a few values (`plan::Skip`), never upstream text.
            metrics::counter!("registry_mirror_entries_skipped_total",
                "source" => source.clone(), "reason" => class.to_owned())
            .increment(count);
        }
        metrics::counter!("registry_mirror_entries_written_total", "source" => source)
            .increment((page.inserts.len() + page.updates.len() + deleted) as u64);
    }

    /// After a full walk from the start: delete what the source holds that the walk did not
    /// see, with the final position.
    async fn sweep(&mut self, position: String) -> Result<(), MirrorError> {
        let Some(seen) = self.seen.take() else {
            return Ok(());
        };
        let owner = self.source.owner();
        let gone: Vec<String> = self
            .mirrors
            .registry
            .owned_by(&owner)
            .await
            .map_err(store_error)?
            .into_iter()
            .filter(|(_, name)| !seen.contains(name))
            .map(|(id, _)| id)
            .collect();
        if gone.is_empty() {
            return Ok(());
        }
        tracing::info!(source = %self.source.id, agents = gone.len(), "mirror: removing agents the source no longer lists");
        for chunk in gone.chunks(500) {
            self.write_with(Vec::new(), chunk.to_vec(), Some(position.clone()), true)
                .await?;
        }
        Ok(())
    }
}

fn store_error(err: RegistryError) -> MirrorError {
    MirrorError::Store(err.to_string())
}
