//! Start-up: the store's ACTIVE agents read page by page into the catalogue and the keyword
//! index (brought up to date from its snapshot when one is usable), and the snapshot saved.

use std::collections::HashMap;
use std::sync::Arc;

use super::SearchIndex;
use super::catalog::{Catalog, Read, read_active, read_active_scanned};
use super::fill::{Texts, serving_store};
use super::text::{self, Staged, TextIndex, TextIndexError};
use super::vectors::VectorStore;
use crate::domain::scan::Severity;
use crate::store::{Agent, AgentState, Store};

/// A re-scan at load says how far it is every this many agents.
const RESCAN_REPORT_EVERY: usize = 10_000;

impl SearchIndex {
    /// Replace the whole index with the ACTIVE agents among `agents`, vectors included: vectors
    /// come from the store when their content hash still matches; the rest are embedded (from
    /// these agents' texts, so they need not be in the store) and saved. (The server instead
    /// calls `load_catalogue` and fills vectors in the background.)
    pub async fn rebuild(&self, agents: &[Agent]) -> anyhow::Result<()> {
        self.rebuild_keyword(agents).await?;
        let given = agents
            .iter()
            .map(|agent| (agent.id.as_str(), agent))
            .collect();
        self.fill_vectors_from(&Texts::Given(given)).await
    }

    /// Replace the whole index with the ACTIVE agents among `agents`, without vectors: searches
    /// rank by keywords until `fill_vectors` has given every agent its vector.
    pub async fn rebuild_keyword(&self, agents: &[Agent]) -> anyhow::Result<()> {
        let _guard = self.writes.lock().await;
        let started = std::time::Instant::now();
        let docs = read_active(agents.iter());
        self.text.stage_clear()?;
        let mut build = CatalogBuild::new(self.serving_vectors(), Vec::new());
        build.add(docs, &self.text)?;
        let (catalog, _) = build.finish(&self.text)?;
        self.text.commit_staged(true)?;
        self.serve_catalog(catalog, started);
        Ok(())
    }

    /// Load every ACTIVE agent of the store (a start-up): pages of agents are read while the
    /// ones before are indexed. With a snapshot directory, the keyword index saved there is
    /// loaded and brought up to date (the documents of agents whose text changed re-indexed,
    /// those of agents gone removed, new ones added) instead of indexing every agent; without
    /// a usable snapshot every agent is indexed. Without vectors, like `rebuild_keyword`.
    ///
    /// Takes the index before it is shared: the loaded keyword index replaces the empty one.
    pub async fn load_catalogue(&mut self) -> anyhow::Result<LoadCounts> {
        let started = std::time::Instant::now();
        let (pages_out, mut pages) = tokio::sync::mpsc::channel(LOAD_PAGES_AHEAD);
        // Reading starts at once; a saved index loads meanwhile.
        tokio::spawn(read_active_pages(Arc::clone(&self.store), pages_out));
        let saved = match self.text_snapshot_path() {
            Some(path) => {
                let loaded =
                    tokio::task::spawn_blocking(move || (TextIndex::load(&path), path)).await?;
                match loaded {
                    (Ok(saved), _) if usable(&saved.slots) => Some(saved),
                    (Ok(_), path) => {
                        tracing::info!(path = %path.display(), "keyword index snapshot too sparse; indexing every agent");
                        None
                    }
                    (Err(reason), path) => {
                        if path.exists() {
                            tracing::warn!(%reason, path = %path.display(), "keyword index snapshot not used; indexing every agent");
                        }
                        None
                    }
                }
            }
            None => None,
        };
        let from_snapshot = saved.is_some();
        let (text, saved_slots, saved_at) = match saved {
            Some(saved) => (Arc::new(saved.index), saved.slots, Some(saved.change_seq)),
            None => {
                self.text.stage_clear()?;
                (Arc::clone(&self.text), Vec::new(), None)
            }
        };
        let snapshot_loaded = started.elapsed();
        let mut build = CatalogBuild::new(self.serving_vectors(), saved_slots);
        // Where the time goes: waiting for the store's pages, and cataloguing them.
        let (mut waited, mut catalogued) = (std::time::Duration::ZERO, std::time::Duration::ZERO);
        let mut unscanned: Vec<(String, Severity)> = Vec::new();
        loop {
            let asked = std::time::Instant::now();
            let Some(page) = pages.recv().await else {
                break;
            };
            waited += asked.elapsed();
            let (page, scanned) = page?;
            let text = Arc::clone(&text);
            let began = std::time::Instant::now();
            let (built, found) = tokio::task::spawn_blocking(
                move || -> anyhow::Result<(CatalogBuild, Vec<(String, Severity)>)> {
                    use rayon::prelude::*;
                    // Both cores: a page's documents are built in two halves.
                    let docs: Vec<Read> = page
                        .par_chunks(page.len().div_ceil(2).max(1))
                        .flat_map_iter(|half| read_active_scanned(half.iter(), &scanned))
                        .collect();
                    // The agents scanned here, whose verdict is stored for the next start.
                    let found = docs
                        .iter()
                        .filter(|(doc, _)| !scanned.contains_key(&*doc.id))
                        .map(|(doc, _)| (doc.id.to_string(), doc.text_severity))
                        .collect();
                    build.add(docs, &text)?;
                    Ok((build, found))
                },
            )
            .await??;
            build = built;
            if !found.is_empty() {
                // A new scanner version re-scans every agent as it loads: say how far it is.
                let before = unscanned.len() / RESCAN_REPORT_EVERY;
                unscanned.extend(found);
                metrics::gauge!("registry_scanner_rescanned").set(unscanned.len() as f64);
                if unscanned.len() / RESCAN_REPORT_EVERY > before {
                    tracing::info!(
                        agents = unscanned.len(),
                        scanner = crate::domain::scan::SCANNER,
                        "scanning the agents without a verdict of this scanner version"
                    );
                }
            }
            catalogued += began.elapsed();
        }
        let (catalog, mut counts) = build.finish(&text)?;
        counts.from_snapshot = from_snapshot;
        let committing = std::time::Instant::now();
        if !from_snapshot || counts.changed() {
            // Merge in the background: a full build's indexing threads wrote a segment each,
            // and a loaded index's replaced and removed documents still count in BM25's
            // statistics until merged away.
            text.commit_staged(true)?;
        }
        tracing::info!(
            snapshot_ms = snapshot_loaded.as_millis() as u64,
            waiting_for_store_ms = waited.as_millis() as u64,
            cataloguing_ms = catalogued.as_millis() as u64,
            keyword_commit_ms = committing.elapsed().as_millis() as u64,
            "catalogue read"
        );
        if from_snapshot {
            tracing::info!(
                saved_at_change = saved_at.unwrap_or_default(),
                kept = counts.kept,
                reindexed = counts.replaced,
                added = counts.added,
                removed = counts.removed,
                "keyword index loaded from its snapshot"
            );
            self.text = text;
        }
        let unchanged = from_snapshot && !counts.changed();
        self.text_saved_at.store(
            if unchanged {
                self.text.commits()
            } else {
                u64::MAX
            },
            std::sync::atomic::Ordering::Relaxed,
        );
        self.serve_catalog(catalog, started);
        if !unscanned.is_empty() {
            // Agents written before verdicts were stored (or by another scanner version):
            // stored now, off the start-up's path, so the next start reads them.
            metrics::gauge!("registry_scanner_verdicts_pending").set(unscanned.len() as f64);
            let store = Arc::clone(&self.store);
            tokio::spawn(async move {
                match store.record_scan_severities(&unscanned).await {
                    Ok(()) => {
                        metrics::gauge!("registry_scanner_verdicts_pending").set(0.0);
                        tracing::info!(
                            agents = unscanned.len(),
                            scanner = crate::domain::scan::SCANNER,
                            "scanned the agents that had no stored verdict, and stored the verdicts"
                        )
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "cannot store the scanner's verdicts")
                    }
                }
            });
        }
        Ok(counts)
    }

    /// An empty vector store for a catalog being built (none without an embedder).
    fn serving_vectors(&self) -> Option<VectorStore> {
        self.embedder().map(|e| serving_store(e.dim()))
    }

    /// Serve `catalog`, just built, with the keyword index; vectors follow (`fill_vectors`).
    fn serve_catalog(&self, catalog: Catalog, started: std::time::Instant) {
        use std::sync::atomic::Ordering::Relaxed;
        tracing::info!(
            agents = catalog.live,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "search index built"
        );
        self.vectors_total.store(catalog.live, Relaxed);
        self.vectors_filled.store(0, Relaxed);
        self.vectors_ready
            .store(self.embedder().is_none() || catalog.live == 0, Relaxed);
        *self.write_catalog() = catalog;
    }

    /// Save the keyword index and which agent each document is, unless nothing changed since
    /// it was loaded or last saved. Waits up to `merge_wait` for background merges first, so
    /// the saved index is the merged one when it can be; writes wait only while the files are
    /// taken, not while they are written.
    pub async fn save_text_snapshot(&self, merge_wait: std::time::Duration) -> anyhow::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(path) = self.text_snapshot_path() else {
            return Ok(());
        };
        let text = Arc::clone(&self.text);
        tokio::task::spawn_blocking(move || text.wait_for_merges(merge_wait)).await?;
        let change_seq = self.store.latest_change().await?;
        let (files, slots, commits) = {
            let _guard = self.writes.lock().await;
            let commits = self.text.commits();
            if self.text_saved_at.load(Relaxed) == commits {
                return Ok(());
            }
            let files = self.text.committed_files()?;
            let catalog = self.read_catalog();
            let slots: Vec<text::SavedSlot> = catalog
                .docs
                .iter()
                .enumerate()
                .filter_map(|(slot, doc)| {
                    let doc = doc.as_ref()?;
                    Some(text::SavedSlot {
                        slot: slot as u32,
                        agent_id: doc.id.to_string(),
                        text_hash: doc.text_hash,
                    })
                })
                .collect();
            (files, slots, commits)
        };
        let started = std::time::Instant::now();
        let bytes = files.bytes();
        let shown = path.clone();
        tokio::task::spawn_blocking(move || files.save(&path, change_seq, &slots)).await??;
        self.text_saved_at.store(commits, Relaxed);
        tracing::info!(
            path = %shown.display(),
            bytes,
            elapsed_ms = started.elapsed().as_millis() as u64,
            "keyword index snapshot saved"
        );
        Ok(())
    }
}

/// How long a start-up's snapshot save waits for the keyword index's merge (about half a
/// minute at a million agents on a busy machine).
pub const STARTUP_MERGE_WAIT: std::time::Duration = std::time::Duration::from_secs(300);
/// How long a shutdown's snapshot save waits for a merge: not long, since something waits for
/// the process to end; an unmerged index saves as well, it only loads a little slower.
pub const SHUTDOWN_MERGE_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// Agents read per page at start-up.
const LOAD_PAGE: u32 = 2_000;
/// Pages read ahead of the one being indexed.
const LOAD_PAGES_AHEAD: usize = 4;

/// Send the store's ACTIVE agents to `out` page by page, until there are no more, an error
/// (sent on), or nobody listens.
async fn read_active_pages(
    store: Arc<dyn Store>,
    out: tokio::sync::mpsc::Sender<anyhow::Result<ScannedPage>>,
) {
    let mut after: Option<String> = None;
    loop {
        let page = match store
            .agents_page(Some(AgentState::Active), after.as_deref(), LOAD_PAGE)
            .await
        {
            Ok(page) => {
                let ids: Vec<String> = page.iter().map(|agent| agent.id.clone()).collect();
                store
                    .scan_severities(&ids)
                    .await
                    .map(|scanned| (page, scanned.into_iter().collect()))
            }
            Err(err) => Err(err),
        };
        match page {
            Ok(page) => {
                let last = page.0.last().map(|agent| agent.id.clone());
                let full = page.0.len() == LOAD_PAGE as usize;
                if (!page.0.is_empty() && out.send(Ok(page)).await.is_err()) || !full {
                    return;
                }
                after = last;
            }
            Err(err) => {
                let _ = out.send(Err(err.into())).await;
                return;
            }
        }
    }
}

/// A page of ACTIVE agents, with the scanner's verdicts stored for them.
type ScannedPage = (Vec<Agent>, HashMap<String, Severity>);

/// Whether a saved keyword index is worth starting from: its slots are never reused, so
/// deleted agents leave holes, and a table mostly of holes is rebuilt compactly instead.
pub(super) fn usable(slots: &[text::SavedSlot]) -> bool {
    let highest = slots.iter().map(|s| s.slot as usize + 1).max().unwrap_or(0);
    highest <= 2 * slots.len() + 1024
}

/// How a start-up's agents reached the keyword index (`SearchIndex::load_catalogue`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LoadCounts {
    /// Whether it started from a saved keyword index.
    pub from_snapshot: bool,
    /// Documents of a saved index kept as they were.
    pub kept: usize,
    /// Documents of a saved index whose agent's text changed, indexed again.
    pub replaced: usize,
    /// Agents the saved index (if any) did not hold.
    pub added: usize,
    /// Documents of a saved index whose agent is no longer ACTIVE.
    pub removed: usize,
}

impl LoadCounts {
    pub(super) fn changed(&self) -> bool {
        self.replaced + self.added + self.removed > 0
    }
}

/// A catalog being built at start-up, and the keyword index changes that go with it.
struct CatalogBuild {
    pub(super) catalog: Catalog,
    /// A saved keyword index's documents not yet claimed: agent id → slot and text hash.
    saved: HashMap<String, (u32, [u8; 32])>,
    pub(super) counts: LoadCounts,
}

impl CatalogBuild {
    /// A build starting from the documents `saved` in a keyword index (none for a fresh one).
    pub(super) fn new(vectors: Option<VectorStore>, saved: Vec<text::SavedSlot>) -> Self {
        let mut catalog = Catalog {
            vectors,
            ..Catalog::default()
        };
        // Room for every saved slot first: fresh slots then never collide with saved ones.
        let room = saved.iter().map(|s| s.slot as usize + 1).max().unwrap_or(0);
        catalog.docs.resize(room, None);
        let saved = saved
            .into_iter()
            .map(|s| (s.agent_id, (s.slot, s.text_hash)))
            .collect();
        Self {
            catalog,
            saved,
            counts: LoadCounts::default(),
        }
    }

    /// Catalog `docs` and stage their text in `text`: an agent the saved index holds keeps
    /// its slot, and its document unless its text changed; others get fresh slots.
    pub(super) fn add(&mut self, docs: Vec<Read>, text: &TextIndex) -> Result<(), TextIndexError> {
        let mut staged = Vec::with_capacity(docs.len());
        for (doc, words) in &docs {
            let slot = match self.saved.remove(&*doc.id) {
                Some((slot, hash)) => {
                    self.catalog.claim(&doc.id, slot);
                    if hash == doc.text_hash {
                        self.counts.kept += 1;
                    } else {
                        self.counts.replaced += 1;
                        staged.push(Staged::Replace(slot, words));
                    }
                    slot
                }
                None => {
                    let slot = self.catalog.slot_for(&doc.id);
                    self.counts.added += 1;
                    staged.push(Staged::Add(slot, words));
                    slot
                }
            };
            self.catalog.put(slot, Arc::clone(doc), None);
        }
        text.stage(staged.into_iter())
    }

    /// The catalog, once every agent is in: the saved documents nobody claimed are removed.
    pub(super) fn finish(
        mut self,
        text: &TextIndex,
    ) -> Result<(Catalog, LoadCounts), TextIndexError> {
        self.counts.removed = self.saved.len();
        text.stage(self.saved.values().map(|(slot, _)| Staged::Remove(*slot)))?;
        Ok((self.catalog, self.counts))
    }
}
