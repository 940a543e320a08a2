//! Writes: an agent published, changed, unpublished or deleted reaches the index before its
//! request returns; health as the prober records it.

use std::collections::HashMap;
use std::sync::Arc;

use super::SearchIndex;
use super::catalog::read_active_scanned;
use super::text::DocText;
use super::vectors::VectorStore;
use crate::domain::{Health, HealthStatus};
use crate::store::Agent;

impl SearchIndex {
    /// Make the index reflect `agent` as just written: indexed when ACTIVE, absent otherwise.
    /// A write older than one already applied (a lower revision) is ignored.
    pub async fn apply(&self, agent: &Agent) {
        self.apply_batch(std::slice::from_ref(agent), &[]).await;
    }

    /// Make the index reflect many agents as they now are (ACTIVE ones indexed, others and the
    /// ids in `deleted` removed) with one text-index commit: the change-log follower applies a
    /// whole batch of changes this way. Vectors are embedded together; stale writes lose.
    pub async fn apply_batch(&self, agents: &[Agent], deleted: &[String]) {
        self.apply_batch_scanned(agents, deleted, &HashMap::new())
            .await;
    }

    /// `apply_batch`, with the scanner's verdicts on some of the agents' texts as their write
    /// stored them (the others are scanned).
    pub async fn apply_batch_scanned(
        &self,
        agents: &[Agent],
        deleted: &[String],
        scanned: &HashMap<String, crate::domain::scan::Severity>,
    ) {
        let docs = read_active_scanned(agents.iter(), scanned);
        let embedder = self.embedder();
        let mut vectors = self.vectors_for(embedder.as_ref(), &docs).await;
        let _guard = self.writes.lock().await;
        let current = self.embedder();
        let same = match (&embedder, &current) {
            (Some(a), Some(b)) => std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b)),
            (None, None) => true,
            _ => false,
        };
        if !same {
            // `switch_embedder` replaced the embedder while these were embedded.
            vectors = self.vectors_for(current.as_ref(), &docs).await;
        }
        let mut text_changes: Vec<(u32, Option<&DocText>)> = Vec::new();
        let graph_due = {
            let mut catalog = self.write_catalog();
            for ((doc, text), vector) in docs.iter().zip(vectors) {
                if catalog.is_stale(&doc.id, doc.revision) {
                    continue;
                }
                let slot = catalog.slot_for(&doc.id);
                // A write that leaves the text as it was (verification, health, state) keeps
                // the keyword document, and costs no commit.
                let same_text = catalog
                    .doc(slot)
                    .is_some_and(|held| held.text_hash == doc.text_hash);
                catalog.put(slot, Arc::clone(doc), vector.as_deref());
                if !same_text {
                    text_changes.push((slot, Some(text)));
                }
            }
            let gone = agents
                .iter()
                .filter(|agent| !agent.is_indexed())
                .map(|agent| (agent.id.as_str(), agent.revision))
                .chain(deleted.iter().map(|id| (id.as_str(), i64::MAX)));
            for (id, revision) in gone {
                if catalog.is_stale(id, revision) {
                    continue;
                }
                catalog.revisions.insert(id.to_owned(), revision);
                if let Some(slot) = catalog.slots.get(id).copied()
                    && catalog.take(slot)
                {
                    text_changes.push((slot, None));
                }
            }
            catalog.filling.is_none()
                && catalog.vectors.as_ref().is_some_and(VectorStore::graph_due)
        };
        if !text_changes.is_empty()
            && let Err(err) = self.text.apply_batch(text_changes.into_iter())
        {
            tracing::error!(error = %err, "cannot index a batch of agents");
        }
        if graph_due {
            self.build_graph_aside().await;
        }
    }

    /// Whether `agent` (ACTIVE) is indexed at exactly its revision, so applying it again would
    /// change nothing: the change follower skips the writes this process already applied.
    pub fn holds(&self, agent: &Agent) -> bool {
        let catalog = self.read_catalog();
        agent.is_indexed()
            && catalog
                .slots
                .get(agent.id.as_str())
                .and_then(|slot| catalog.doc(*slot))
                .is_some_and(|doc| doc.revision == agent.revision)
    }

    /// The worst scanner severity the index holds for `agent`, when it holds it at its revision.
    pub fn severity_of(&self, agent: &Agent) -> Option<crate::domain::scan::Severity> {
        let catalog = self.read_catalog();
        let doc = catalog.doc(*catalog.slots.get(agent.id.as_str())?)?;
        (doc.revision == agent.revision).then_some(doc.facets.severity)
    }

    /// Whether the index holds `agent` with another worst finding in what its endpoint shows
    /// than the agent now has (a probe of another process read something new).
    pub fn live_severity_moved(&self, agent: &Agent) -> bool {
        let catalog = self.read_catalog();
        catalog
            .slots
            .get(agent.id.as_str())
            .and_then(|slot| catalog.doc(*slot))
            .is_some_and(|doc| doc.live_severity != super::catalog::live_severity(agent))
    }

    /// Set an indexed agent's health as the prober (of any process) last recorded it; `None`
    /// clears it (its endpoint changed). Health older than the one held is ignored.
    pub fn set_health(&self, id: &str, health: Option<Health>) {
        let mut catalog = self.write_health();
        if let Some(slot) = catalog.slots.get(id).copied()
            && catalog.doc(slot).is_some()
        {
            let clear = health.is_none();
            catalog.update_health(slot, health.map(Arc::new), clear);
        }
    }

    /// Indexed agents by health status; those never probed count as `unknown`.
    pub fn health_counts(&self) -> Vec<(HealthStatus, usize)> {
        let catalog = self.read_catalog();
        let mut counts: HashMap<HealthStatus, usize> = HashMap::new();
        for health in catalog.health.values() {
            *counts.entry(health.status).or_default() += 1;
        }
        let probed: usize = counts.values().sum();
        *counts.entry(HealthStatus::Unknown).or_default() += catalog.live.saturating_sub(probed);
        HealthStatus::ALL
            .into_iter()
            .map(|status| (status, counts.get(&status).copied().unwrap_or(0)))
            .collect()
    }

    /// Forget a deleted agent for good.
    pub async fn delete(&self, id: &str) {
        self.apply_batch(&[], &[id.to_owned()]).await;
    }
}
