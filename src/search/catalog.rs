//! The catalogue the index serves: every ACTIVE agent's document (listing, facets, hashes) by
//! slot, its health and duplicate group, behind one lock; and the texts an agent is searched
//! and embedded by.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

use sha2::{Digest, Sha256};

use super::facets::{FacetIndex, Facets, Facetted, SlotSet};
use super::text::DocText;
use super::vectors::VectorStore;
use super::{Filters, Listing, duplicates};
use crate::domain::access::Viewer;
use crate::domain::scan::Severity;
use crate::domain::{Health, HealthStatus, health};
use crate::store::Agent;

/// An ACTIVE agent as the index keeps it.
pub(super) struct Doc {
    /// Shared by the catalog's id map and the duplicate rank: one allocation per agent.
    pub(super) id: Arc<str>,
    pub(super) revision: i64,
    pub(super) listing: Arc<Listing>,
    pub(super) published_micros: i64,
    pub(super) name_key: Box<str>,
    pub(super) facets: Facets,
    /// A hash of the text the agent's vector is made from (`embedding_text`); its text itself
    /// is not kept (it goes to the keyword index and the embedder as the agent is read).
    pub(super) content_hash: ContentHash,
    /// A hash of `text`: a saved keyword index keeps an agent's document while this matches.
    pub(super) text_hash: [u8; 32],
    /// The duplicate group it belongs to (`duplicates::group_key`), and its rank there.
    pub(super) group: Option<String>,
    pub(super) rank: duplicates::Rank,
    /// The agent's health as read with it; the catalog keeps the newest it has seen.
    pub(super) health: Option<Arc<Health>>,
    /// For a private agent, its owner: only viewers who see that owner's private agents find
    /// it. `None` for a public one.
    pub(super) private_to: Option<Arc<str>>,
    /// The worst finding in what the prober last read from its endpoint (part of
    /// `facets.severity`, kept apart so a new read can tell whether it moved).
    pub(super) live_severity: Severity,
    /// The worst finding in the record's own texts (the scanner's stored verdict).
    pub(super) text_severity: Severity,
}

impl Doc {
    /// What the facet index reads of the agent.
    fn facetted(&self) -> Facetted<'_> {
        Facetted {
            facets: &self.facets,
            category_label: self.listing.category(),
            tags: self.listing.tags(),
        }
    }

    /// The index's copy of `agent`, and the text to index it by. `severity`: the scanner's
    /// verdict on its texts as stored with it; scanned here when `None`.
    pub(super) fn of(agent: &Agent, severity: Option<Severity>) -> (Doc, DocText) {
        let draft = &agent.draft;
        let text = doc_text(agent);
        let id: Arc<str> = Arc::from(agent.id.as_str());
        let private = agent.visibility() == crate::domain::agent::Visibility::Private;
        let live_severity = live_severity(agent);
        let text_severity =
            severity.unwrap_or_else(|| crate::domain::scan::scan(draft).max_severity);
        let mut deprecation = Vec::new();
        crate::domain::scan::scan_deprecation(agent.deprecation.as_ref(), &mut deprecation);
        let deprecation_severity = deprecation.iter().map(|f| f.severity).max();
        let severity = text_severity
            .max(live_severity)
            .max(deprecation_severity.unwrap_or(Severity::None));
        let doc = Doc {
            id: Arc::clone(&id),
            revision: agent.revision,
            listing: Arc::new(Listing::with_severity(agent, severity)),
            published_micros: agent.published_at.map_or(0, |t| t.micros()),
            name_key: draft.name.to_lowercase().into_boxed_str(),
            facets: Facets {
                target: draft.target.as_deref().map(str::to_lowercase),
                category: draft.category.as_deref().map(str::to_lowercase),
                verification_level: agent.verification_level,
                payment_model: draft.payment.as_ref().map(|payment| payment.model),
                severity,
                deprecated: agent.shown_deprecation().is_some(),
            },
            content_hash: ContentHash::of(&embedding_text(&text)),
            text_hash: text_hash(&text),
            // A private agent is in no duplicate group: it would hide a public duplicate from
            // everyone who cannot see it.
            group: duplicates::group_key(agent).filter(|_| !private),
            rank: duplicates::Rank::of(agent, id),
            health: shown_health(agent),
            private_to: private.then(|| Arc::from(agent.owner.as_str())),
            live_severity,
            text_severity,
        };
        (doc, text)
    }
}

/// The worst finding in what the prober last read from `agent`'s endpoint.
pub(super) fn live_severity(agent: &Agent) -> Severity {
    if agent.draft.inspect_tools == Some(false) {
        return Severity::None;
    }
    agent
        .inspection
        .as_ref()
        .map_or(Severity::None, |inspection| inspection.max_severity)
}

/// The health an indexed agent shows (`Health::shown`); the two `not_probed` values are shared
/// by every agent that has one, rather than allocated for each.
fn shown_health(agent: &Agent) -> Option<Arc<Health>> {
    static PACKAGE_ONLY: LazyLock<Arc<Health>> =
        LazyLock::new(|| Arc::new(Health::not_probed(health::PACKAGE_ONLY)));
    static NO_ENDPOINT: LazyLock<Arc<Health>> =
        LazyLock::new(|| Arc::new(Health::not_probed(health::NO_ENDPOINT)));
    let shown = Health::shown(&agent.draft, agent.health.clone())?;
    if shown.status != HealthStatus::NotProbed {
        return Some(Arc::new(shown));
    }
    Some(match shown.detail.as_deref() {
        Some(health::PACKAGE_ONLY) => Arc::clone(&PACKAGE_ONLY),
        Some(health::NO_ENDPOINT) => Arc::clone(&NO_ENDPOINT),
        _ => Arc::new(shown),
    })
}

/// The SHA-256 of the text an agent's vector is made from: the key of stored vectors, which
/// the store and the vector snapshot write in hex. Kept as bytes (a million of them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ContentHash(pub(super) [u8; 32]);

impl ContentHash {
    pub(super) fn of(text: &str) -> Self {
        Self(Sha256::digest(text.as_bytes()).into())
    }

    pub(super) fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Whether `hex` (as stored) names this hash.
    pub(super) fn is(&self, hex: &str) -> bool {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex, &mut bytes).is_ok_and(|()| bytes == self.0)
    }
}

/// An agent as the index keeps it, with the text it is being indexed by.
pub(super) type Read = (Arc<Doc>, DocText);

/// The indexed ones of `agents` (ACTIVE, public or private), read for the index: an unlisted
/// agent is in no list, search or count, so the index does not hold it.
pub(super) fn read_active<'a>(agents: impl Iterator<Item = &'a Agent>) -> Vec<Read> {
    read_active_scanned(agents, &HashMap::new())
}

/// `read_active`, with the scanner's verdicts stored for some of them (the others are
/// scanned).
pub(super) fn read_active_scanned<'a>(
    agents: impl Iterator<Item = &'a Agent>,
    scanned: &HashMap<String, Severity>,
) -> Vec<Read> {
    agents
        .filter(|agent| agent.is_indexed())
        .map(|agent| {
            let (doc, text) = Doc::of(agent, scanned.get(&agent.id).copied());
            (Arc::new(doc), text)
        })
        .collect()
}

/// Everything searches read, behind one lock.
#[derive(Default)]
pub(super) struct Catalog {
    /// By slot; `None` for agents no longer ACTIVE.
    pub(super) docs: Vec<Option<Arc<Doc>>>,
    /// Agent id → slot. Slots are never reused within a process, so the text index can never
    /// point a stale document at a new agent.
    pub(super) slots: HashMap<Arc<str>, u32>,
    /// Highest revision applied per agent id not ACTIVE here (`i64::MAX` once deleted); an
    /// ACTIVE agent's is its document's. Stale writes lose.
    pub(super) revisions: HashMap<String, i64>,
    pub(super) vectors: Option<VectorStore>,
    pub(super) facets: FacetIndex,
    pub(super) groups: duplicates::Groups,
    /// While `fill_vectors` builds a new vector index beside this one: the slots written since
    /// it started, whose vectors it must take from here when it swaps its index in.
    pub(super) filling: Option<HashSet<u32>>,
    /// Counts replacements of the whole vector store (`fill_vectors`' swap), so a graph built
    /// on a copy of an older store is not swapped in over a newer one.
    pub(super) vectors_generation: u64,
    /// Health by slot, for agents probed at least once. Kept beside the documents because the
    /// prober updates it without a new revision.
    pub(super) health: HashMap<u32, Arc<Health>>,
    /// The status of `health` by slot (`Unknown` beyond its end): read for every match, by
    /// the ranking prior and the facet counts, where a hash lookup each would cost more than
    /// the match itself.
    pub(super) statuses: Vec<HealthStatus>,
    pub(super) live: usize,
    /// The slots of public agents: what an anonymous search starts from.
    pub(super) public: SlotSet,
    /// The slots of private agents, by owner.
    pub(super) private: HashMap<Arc<str>, SlotSet>,
    /// The slots of every private agent.
    pub(super) private_slots: SlotSet,
}

/// The agents a viewer may find, as a search starts from them.
pub(super) enum Visible<'c> {
    /// The public agents (all of them when none is private).
    Public(&'c SlotSet),
    /// Every agent, private ones included (the master key).
    All(&'c SlotSet),
    /// The public agents and some owners' private ones.
    Some(SlotSet),
}

impl Visible<'_> {
    pub(super) fn set(&self) -> &SlotSet {
        match self {
            Self::Public(set) | Self::All(set) => set,
            Self::Some(set) => set,
        }
    }
}

impl Catalog {
    pub(super) fn doc(&self, slot: u32) -> Option<&Arc<Doc>> {
        self.docs.get(slot as usize).and_then(Option::as_ref)
    }

    pub(super) fn slot_for(&mut self, id: &Arc<str>) -> u32 {
        if let Some(slot) = self.slots.get(id) {
            return *slot;
        }
        let slot = u32::try_from(self.docs.len()).unwrap_or(u32::MAX);
        self.docs.push(None);
        self.slots.insert(Arc::clone(id), slot);
        slot
    }

    /// Give `id` the slot a saved keyword index keeps its document under (the catalog being
    /// built has room for every saved slot, so fresh slots come after them).
    pub(super) fn claim(&mut self, id: &Arc<str>, slot: u32) {
        let index = slot as usize;
        if self.docs.len() <= index {
            self.docs.resize(index + 1, None);
        }
        self.slots.insert(Arc::clone(id), slot);
    }

    pub(super) fn is_stale(&self, id: &str, revision: i64) -> bool {
        let seen = match self.slots.get(id).and_then(|slot| self.doc(*slot)) {
            Some(doc) => Some(doc.revision),
            None => self.revisions.get(id).copied(),
        };
        seen.is_some_and(|seen| seen > revision)
    }

    pub(super) fn put(&mut self, slot: u32, doc: Arc<Doc>, vector: Option<&[f32]>) {
        if let Some(written) = &mut self.filling {
            written.insert(slot);
        }
        if !self.revisions.is_empty() {
            self.revisions.remove(&*doc.id);
        }
        let entry = &mut self.docs[slot as usize];
        match entry {
            Some(old) => {
                self.facets.remove(slot, old.facetted());
                if let Some(key) = &old.group {
                    self.groups.remove(key, slot);
                }
                forget_audience(
                    (&mut self.public, &mut self.private, &mut self.private_slots),
                    slot,
                    old,
                );
            }
            None => self.live += 1,
        }
        match &doc.private_to {
            None => self.public.insert(slot),
            Some(owner) => {
                self.private
                    .entry(Arc::clone(owner))
                    .or_default()
                    .insert(slot);
                self.private_slots.insert(slot);
            }
        }
        self.facets.insert(slot, doc.facetted());
        if let Some(key) = &doc.group {
            self.groups.insert(key, slot, doc.rank.clone());
        }
        let health = doc.health.clone();
        *entry = Some(doc);
        if health.is_some() {
            self.update_health(slot, health, false);
        }
        if let Some(vectors) = &mut self.vectors {
            match vector {
                Some(vector) => vectors.set(slot, vector),
                None => vectors.clear(slot),
            }
        }
    }

    pub(super) fn take(&mut self, slot: u32) -> bool {
        if let Some(written) = &mut self.filling {
            written.insert(slot);
        }
        let removed = self.docs[slot as usize].take();
        if let Some(old) = &removed {
            forget_audience(
                (&mut self.public, &mut self.private, &mut self.private_slots),
                slot,
                old,
            );
            self.facets.remove(slot, old.facetted());
            if let Some(key) = &old.group {
                self.groups.remove(key, slot);
            }
            self.live -= 1;
        }
        self.forget_health(slot);
        if let Some(vectors) = &mut self.vectors {
            vectors.clear(slot);
        }
        removed.is_some()
    }

    /// Replace a slot's health unless it is older than the one held; `None` clears it only
    /// when `clear` (the endpoint changed), since a record read before a probe carries none.
    pub(super) fn update_health(&mut self, slot: u32, health: Option<Arc<Health>>, clear: bool) {
        match health {
            Some(new) => {
                // `not_probed` is read off the record itself, never older than what is held.
                let older = new.status != HealthStatus::NotProbed
                    && self
                        .health
                        .get(&slot)
                        .is_some_and(|held| held.checked_at > new.checked_at);
                if !older {
                    let index = slot as usize;
                    if self.statuses.len() <= index {
                        self.statuses.resize(index + 1, HealthStatus::Unknown);
                    }
                    self.statuses[index] = new.status;
                    self.health.insert(slot, new);
                }
            }
            None if clear => self.forget_health(slot),
            None => {}
        }
    }

    fn forget_health(&mut self, slot: u32) {
        self.health.remove(&slot);
        if let Some(status) = self.statuses.get_mut(slot as usize) {
            *status = HealthStatus::Unknown;
        }
    }

    pub(super) fn health_status(&self, slot: u32) -> HealthStatus {
        self.statuses
            .get(slot as usize)
            .copied()
            .unwrap_or(HealthStatus::Unknown)
    }

    /// The agents `viewer` may find: the public ones, and the private ones of the owners it
    /// sees. A set is built only for a viewer that sees some private agent.
    pub(super) fn visible(&self, viewer: &Viewer) -> Visible<'_> {
        if self.private.is_empty() {
            return Visible::Public(&self.public);
        }
        match viewer.owners() {
            None => Visible::All(self.facets.live()),
            Some(owners) => {
                let mut own = owners
                    .iter()
                    .filter_map(|owner| self.private.get(owner.as_str()));
                let Some(first) = own.next() else {
                    return Visible::Public(&self.public);
                };
                let mut set = self.public.clone();
                set.union_with(first);
                for more in own {
                    set.union_with(more);
                }
                Visible::Some(set)
            }
        }
    }

    /// Whether a viewer's set is the public one, the set keyword counting caches per segment
    /// (with no private agent, every viewer's is).
    pub(super) fn is_public(&self, visible: &Visible<'_>) -> bool {
        matches!(visible, Visible::Public(_)) || self.private.is_empty()
    }

    /// The slots `filters` let through within `visible`, `None` when there is no filter
    /// (duplicate collapsing is applied by `matches`, not here). Facet filters are set
    /// operations; payment and x402 filters are then tested on each agent that passed them.
    pub(super) fn allowed(&self, filters: &Filters, visible: &SlotSet) -> Option<SlotSet> {
        if filters.is_empty() {
            return None;
        }
        let mut allowed = match self.facets.matching(filters) {
            Some(mut matching) => {
                if !self.private.is_empty() {
                    matching.intersect_with(visible);
                }
                matching
            }
            None => visible.clone(),
        };
        if filters.per_agent() || !filters.health.is_empty() {
            let refused: Vec<u32> = allowed
                .iter()
                .filter(|slot| {
                    !self.doc(*slot).is_some_and(|doc| {
                        filters.listing_matches(&doc.listing)
                            && (filters.health.is_empty()
                                || filters.health.contains(&self.health_status(*slot)))
                    })
                })
                .collect();
            for slot in refused {
                allowed.remove(slot);
            }
        }
        Some(allowed)
    }
}

/// Take `slot` (holding `old`) out of the public set, or out of the private ones.
fn forget_audience(
    (public, private, private_slots): (&mut SlotSet, &mut HashMap<Arc<str>, SlotSet>, &mut SlotSet),
    slot: u32,
    old: &Doc,
) {
    match &old.private_to {
        None => public.remove(slot),
        Some(owner) => {
            private_slots.remove(slot);
            if let Some(set) = private.get_mut(owner) {
                set.remove(slot);
                if set.is_empty() {
                    private.remove(owner);
                }
            }
        }
    }
}

/// What a hash of an agent's indexed text covers: every field, each with its length, so no
/// two different texts run together into the same bytes.
pub(super) fn text_hash(text: &DocText) -> [u8; 32] {
    let mut digest = Sha256::new();
    let fields = [
        &text.name,
        &text.package_name,
        &text.tags,
        &text.category,
        &text.description,
        &text.capabilities,
        &text.queries,
    ];
    for field in fields {
        digest.update((field.len() as u64).to_le_bytes());
        digest.update(field.as_bytes());
    }
    digest.finalize().into()
}

/// The searchable text of an agent, field by field.
pub(super) fn doc_text(agent: &Agent) -> DocText {
    let draft = &agent.draft;
    let capabilities = draft
        .capabilities
        .iter()
        .map(|c| format!("{} {}", c.name.replace('_', " "), c.description))
        .collect::<Vec<_>>()
        .join("\n");
    DocText {
        name: draft.name.clone(),
        package_name: package_words(agent.package_name()),
        tags: draft.tags.join(" "),
        category: draft.category.clone().unwrap_or_default(),
        description: draft.description.clone(),
        capabilities,
        // Representative queries say what the agent does in its users' words (a card's skill
        // examples fill them in when the publisher gives none: `AgentDraft::parse`).
        queries: draft.representative_queries.join("\n"),
    }
}

/// The informative labels of a package name: without its reverse-domain prefix (`io.github`,
/// `ai.smithery`, `com.example`), which would otherwise match most of the catalogue.
fn package_words(package_name: &str) -> String {
    let labels: Vec<&str> = package_name.split('.').collect();
    let informative = if labels.len() > 2 {
        &labels[2..]
    } else {
        &labels[..]
    };
    informative.join(" ")
}

/// What the embedder sees of an agent: the fields that say what it does, most telling first.
/// Representative queries come right after the description: a model reads the first 256
/// tokens, and a long list of capabilities would otherwise cut them off.
pub(super) fn embedding_text(text: &DocText) -> String {
    let mut parts = vec![text.name.as_str(), text.description.as_str()];
    if !text.queries.is_empty() {
        parts.push(text.queries.as_str());
    }
    if !text.tags.is_empty() {
        parts.push(text.tags.as_str());
    }
    if !text.category.is_empty() {
        parts.push(text.category.as_str());
    }
    if !text.capabilities.is_empty() {
        parts.push(text.capabilities.as_str());
    }
    parts.join("\n")
}
