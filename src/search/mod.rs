//! The one search function behind every path: query text + filters → ranked, paginated agents.
//!
//! The index holds every ACTIVE agent in memory: its summary, its text in a BM25 index
//! (`text`), and its embedding in a dense matrix (`vectors`). Filters are applied first (so a
//! top-k with a filter returns k matches when k exist); the keyword and vector rankings of the
//! survivors are fused by reciprocal rank; then matches are paginated with a keyset cursor that
//! never repeats or skips an agent. See docs/search.md.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, RwLock};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::domain::{Health, HealthStatus, health};
use crate::store::{Agent, AgentState, Store, StoredEmbedding};

mod codec;
pub mod counts;
pub mod duplicates;
pub mod embed;
pub mod facets;
pub mod filters;
mod fusion;
mod page;
pub mod query;
pub mod request;
pub mod text;
pub mod vectors;

pub use counts::FacetCounts;
pub use filters::{Filters, McpFilter, RawFilters};

pub use crate::domain::DEFAULT_VERSION;
pub use page::{Hit, Listing, SearchPage};

use embed::Embedder;
use facets::{FacetIndex, Facets, Facetted, SlotSet};
use fusion::KeywordRanks;
use text::{DocText, MatchVisitor, Staged, TextIndex, TextIndexError};
use vectors::VectorStore;

/// Largest page any path serves.
pub const MAX_LIMIT: usize = 100;
/// Reciprocal rank fusion: score = 1 / (RRF_K + keyword rank) + w / (RRF_K + vector rank), with
/// `w` the embedder's `fusion_weight` (0.5 for the static table, 1 for a model). Chosen on the
/// hard dev set (eval/hard): with the static table, keyword ranking alone scored 0.368 NDCG@10,
/// K 60 with equal weights 0.346 and K 30 with the vectors at half weight 0.374; with MiniLM,
/// K 30 at half weight 0.423 and at full weight 0.442.
const RRF_K: f64 = 30.0;
/// The keyword rank's extra weight in fusion, only ever a tie-break (see `fuse`).
const KEYWORD_TIE_BREAK: f64 = 1e-9;
/// How many nearest neighbours join the keyword matches as semantic matches.
const VECTOR_DEPTH: usize = 100;
/// Neighbours less similar than this are not matches at all.
const MIN_SIMILARITY: f32 = 0.2;
/// Agents embedded per embedder call at start-up.
const EMBED_BATCH: usize = 64;

/// Why a search request cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    #[error("{message}")]
    InvalidParameter { parameter: String, message: String },
    #[error("malformed or stale cursor")]
    InvalidCursor,
    #[error("unknown sort '{0}'; allowed: relevance, newest, name")]
    InvalidSort(String),
}

/// Result order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// Best match first (needs query text; without it, falls back to `Newest`).
    Relevance,
    /// Most recently published first.
    Newest,
    /// By display name, A→Z.
    Name,
    /// Longest published first: agents that go live join the end, so offsets into this order
    /// stay put while the catalogue grows (the x402 resource list pages by offset). Not a
    /// `sort` value of the search paths.
    Oldest,
}

impl Sort {
    pub fn parse(value: &str) -> Result<Self, SearchError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "relevance" => Ok(Self::Relevance),
            "newest" => Ok(Self::Newest),
            "name" => Ok(Self::Name),
            _ => Err(SearchError::InvalidSort(crate::domain::truncate(value, 40))),
        }
    }
}

/// One search, as every transport expresses it.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub text: String,
    pub filters: Filters,
    /// `None`: relevance with query text, else newest.
    pub sort: Option<Sort>,
    /// Already clamped to 1..=MAX_LIMIT by the caller's defaults.
    pub limit: usize,
    pub cursor: Option<String>,
    /// Matches skipped (after the cursor, if any) before the page: offset paging, for the
    /// paths that offer it. 0 everywhere else.
    pub offset: usize,
    /// Also count the matches per category, tag, payment model and health (`counts`).
    pub facets: bool,
}

impl SearchRequest {
    fn has_text(&self) -> bool {
        !self.text.trim().is_empty()
    }

    fn effective_sort(&self) -> Sort {
        match self.sort {
            Some(Sort::Relevance) | None if self.has_text() => Sort::Relevance,
            Some(Sort::Relevance) | None => Sort::Newest,
            Some(sort) => sort,
        }
    }
}

/// How a search ranks text: what the index was built with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// BM25 only.
    Keyword,
    /// Nearest neighbours only.
    Vector,
    /// Reciprocal rank fusion of both.
    Hybrid,
}

/// Clamp a requested page size: absent → `default`, 0 → 1, above `max` → `max`.
pub fn clamp_limit(requested: Option<i64>, default: usize, max: usize) -> usize {
    match requested {
        None => default,
        Some(n) if n < 1 => 1,
        Some(n) => usize::try_from(n).unwrap_or(max).min(max),
    }
}

/// An ACTIVE agent as the index keeps it.
struct Doc {
    /// Shared by the catalog's id map and the duplicate rank: one allocation per agent.
    id: Arc<str>,
    revision: i64,
    listing: Arc<Listing>,
    published_micros: i64,
    name_key: Box<str>,
    facets: Facets,
    /// A hash of the text the agent's vector is made from (`embedding_text`); its text itself
    /// is not kept (it goes to the keyword index and the embedder as the agent is read).
    content_hash: ContentHash,
    /// A hash of `text`: a saved keyword index keeps an agent's document while this matches.
    text_hash: [u8; 32],
    /// The duplicate group it belongs to (`duplicates::group_key`), and its rank there.
    group: Option<String>,
    rank: duplicates::Rank,
    /// The agent's health as read with it; the catalog keeps the newest it has seen.
    health: Option<Arc<Health>>,
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

    /// The index's copy of `agent`, and the text to index it by.
    fn of(agent: &Agent) -> (Doc, DocText) {
        let draft = &agent.draft;
        let text = doc_text(agent);
        let id: Arc<str> = Arc::from(agent.id.as_str());
        let doc = Doc {
            id: Arc::clone(&id),
            revision: agent.revision,
            listing: Arc::new(Listing::of(agent)),
            published_micros: agent.published_at.map_or(0, |t| t.micros()),
            name_key: draft.name.to_lowercase().into_boxed_str(),
            facets: Facets {
                target: draft.target.as_deref().map(str::to_lowercase),
                category: draft.category.as_deref().map(str::to_lowercase),
                verification_level: agent.verification_level,
                payment_model: draft.payment.as_ref().map(|payment| payment.model),
            },
            content_hash: ContentHash::of(&embedding_text(&text)),
            text_hash: text_hash(&text),
            group: duplicates::group_key(agent),
            rank: duplicates::Rank::of(agent, id),
            health: shown_health(agent),
        };
        (doc, text)
    }
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
struct ContentHash([u8; 32]);

impl ContentHash {
    fn of(text: &str) -> Self {
        Self(Sha256::digest(text.as_bytes()).into())
    }

    fn hex(&self) -> String {
        hex::encode(self.0)
    }

    /// Whether `hex` (as stored) names this hash.
    fn is(&self, hex: &str) -> bool {
        let mut bytes = [0u8; 32];
        hex::decode_to_slice(hex, &mut bytes).is_ok_and(|()| bytes == self.0)
    }
}

/// Where `fill_vectors` reads the text of the agents it embeds (the index keeps none).
enum Texts<'a> {
    /// The store, by id.
    Store,
    /// The agents `rebuild` was given, by id (they need not be in the store).
    Given(HashMap<&'a str, &'a Agent>),
}

/// Where a vector snapshot's saved slot goes among the documents `by_slot`: the slot of the
/// same agent, if its text is the one the vector was made from. A restart from the keyword
/// snapshot keeps every agent's slot, so the saved slot is nearly always the one; the others
/// are looked up by id, in a table sorted on the first miss.
fn place_saved(by_slot: &[Option<Arc<Doc>>]) -> impl FnMut(u32, &str, &str) -> Option<u32> + '_ {
    let mut by_id: Option<Vec<(&str, u32)>> = None;
    move |saved, agent_id, content_hash| {
        let slot = match by_slot.get(saved as usize).and_then(Option::as_ref) {
            Some(doc) if &*doc.id == agent_id => saved,
            _ => {
                let ids = by_id.get_or_insert_with(|| {
                    let mut ids: Vec<(&str, u32)> = by_slot
                        .iter()
                        .enumerate()
                        .filter_map(|(slot, doc)| Some((&*doc.as_ref()?.id, slot as u32)))
                        .collect();
                    ids.sort_unstable();
                    ids
                });
                let at = ids.binary_search_by(|(id, _)| (*id).cmp(agent_id)).ok()?;
                ids[at].1
            }
        };
        let doc = by_slot.get(slot as usize)?.as_ref()?;
        doc.content_hash.is(content_hash).then_some(slot)
    }
}

/// An agent as the index keeps it, with the text it is being indexed by.
type Read = (Arc<Doc>, DocText);

/// The ACTIVE ones of `agents`, read for the index.
fn read_active<'a>(agents: impl Iterator<Item = &'a Agent>) -> Vec<Read> {
    agents
        .filter(|agent| agent.state == AgentState::Active)
        .map(|agent| {
            let (doc, text) = Doc::of(agent);
            (Arc::new(doc), text)
        })
        .collect()
}

/// Everything searches read, behind one lock.
#[derive(Default)]
struct Catalog {
    /// By slot; `None` for agents no longer ACTIVE.
    docs: Vec<Option<Arc<Doc>>>,
    /// Agent id → slot. Slots are never reused within a process, so the text index can never
    /// point a stale document at a new agent.
    slots: HashMap<Arc<str>, u32>,
    /// Highest revision applied per agent id not ACTIVE here (`i64::MAX` once deleted); an
    /// ACTIVE agent's is its document's. Stale writes lose.
    revisions: HashMap<String, i64>,
    vectors: Option<VectorStore>,
    facets: FacetIndex,
    groups: duplicates::Groups,
    /// While `fill_vectors` builds a new vector index beside this one: the slots written since
    /// it started, whose vectors it must take from here when it swaps its index in.
    filling: Option<HashSet<u32>>,
    /// Counts replacements of the whole vector store (`fill_vectors`' swap), so a graph built
    /// on a copy of an older store is not swapped in over a newer one.
    vectors_generation: u64,
    /// Health by slot, for agents probed at least once. Kept beside the documents because the
    /// prober updates it without a new revision.
    health: HashMap<u32, Arc<Health>>,
    /// The status of `health` by slot (`Unknown` beyond its end): read for every match, by
    /// the ranking prior and the facet counts, where a hash lookup each would cost more than
    /// the match itself.
    statuses: Vec<HealthStatus>,
    live: usize,
}

impl Catalog {
    fn doc(&self, slot: u32) -> Option<&Arc<Doc>> {
        self.docs.get(slot as usize).and_then(Option::as_ref)
    }

    fn slot_for(&mut self, id: &Arc<str>) -> u32 {
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
    fn claim(&mut self, id: &Arc<str>, slot: u32) {
        let index = slot as usize;
        if self.docs.len() <= index {
            self.docs.resize(index + 1, None);
        }
        self.slots.insert(Arc::clone(id), slot);
    }

    fn is_stale(&self, id: &str, revision: i64) -> bool {
        let seen = match self.slots.get(id).and_then(|slot| self.doc(*slot)) {
            Some(doc) => Some(doc.revision),
            None => self.revisions.get(id).copied(),
        };
        seen.is_some_and(|seen| seen > revision)
    }

    fn put(&mut self, slot: u32, doc: Arc<Doc>, vector: Option<&[f32]>) {
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
            }
            None => self.live += 1,
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

    fn take(&mut self, slot: u32) -> bool {
        if let Some(written) = &mut self.filling {
            written.insert(slot);
        }
        let removed = self.docs[slot as usize].take();
        if let Some(old) = &removed {
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
    fn update_health(&mut self, slot: u32, health: Option<Arc<Health>>, clear: bool) {
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

    fn health_status(&self, slot: u32) -> HealthStatus {
        self.statuses
            .get(slot as usize)
            .copied()
            .unwrap_or(HealthStatus::Unknown)
    }

    /// The slots `filters` let through, `None` when there is no filter (duplicate collapsing is
    /// applied by `matches`, not here). Facet filters are set
    /// operations; payment and x402 filters are then tested on each agent that passed them.
    fn allowed(&self, filters: &Filters) -> Option<SlotSet> {
        if filters.is_empty() {
            return None;
        }
        let mut allowed = self
            .facets
            .matching(filters)
            .unwrap_or_else(|| self.facets.live().clone());
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

/// The in-memory search index over ACTIVE agents.
pub struct SearchIndex {
    mode: Mode,
    embedder: Option<Arc<dyn Embedder>>,
    store: Arc<dyn Store>,
    catalog: RwLock<Catalog>,
    /// Moves on every write access to the catalog (`write_catalog`): a reader holding the
    /// catalog sees one value per state of it (health aside: `write_health`).
    catalog_version: std::sync::atomic::AtomicU64,
    /// Whether keyword-only searches may count their matches by documents (tests compare
    /// both ways).
    count_by_documents: std::sync::atomic::AtomicBool,
    text: Arc<TextIndex>,
    /// The keyword index's commit count when it was last saved or loaded (`u64::MAX`: never).
    text_saved_at: std::sync::atomic::AtomicU64,
    /// Serialises index writes so the text index and the catalog change together.
    writes: tokio::sync::Mutex<()>,
    /// Whether every indexed agent has its vector: until then searches rank by keywords alone,
    /// and `fill_vectors` is loading or computing them.
    vectors_ready: std::sync::atomic::AtomicBool,
    /// Agents given a vector so far by `fill_vectors`, of how many.
    vectors_filled: std::sync::atomic::AtomicUsize,
    vectors_total: std::sync::atomic::AtomicUsize,
    /// Where the keyword and vector indexes are saved between runs (`with_snapshot_dir`).
    snapshot_dir: Option<std::path::PathBuf>,
}

/// How far the vectors of a starting index are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VectorProgress {
    /// No embedder: keyword ranking only.
    pub none: bool,
    pub ready: bool,
    /// Agents with their vector, and how many the index held when loading began.
    pub embedded: usize,
    pub total: usize,
}

/// Where the previous page ended: the last hit's sort key and id.
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    sort: Sort,
    /// The score's exact bits: a JSON float need not parse back to the same `f64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    score: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    id: String,
}

impl Cursor {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(text: &str, sort: Sort) -> Result<Self, SearchError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim())
            .map_err(|_| SearchError::InvalidCursor)?;
        let cursor: Cursor =
            serde_json::from_slice(&bytes).map_err(|_| SearchError::InvalidCursor)?;
        let complete = match sort {
            Sort::Relevance => cursor
                .score
                .is_some_and(|bits| f64::from_bits(bits).is_finite()),
            Sort::Newest | Sort::Oldest => cursor.time.is_some(),
            Sort::Name => cursor.name.is_some(),
        };
        if cursor.sort != sort || !complete {
            return Err(SearchError::InvalidCursor);
        }
        Ok(cursor)
    }
}

#[derive(Clone, Copy)]
struct Scored<'c> {
    slot: u32,
    doc: &'c Doc,
    score: f64,
}

/// What a search found: the hits after the cursor that can reach the page, and how many
/// matches there are.
struct Matches<'c> {
    hits: Vec<Scored<'c>>,
    /// Every match, the ones before the cursor included.
    total: usize,
    /// Matches after the cursor counted in `total` but not in `hits`; each ranks below every
    /// hit.
    omitted: usize,
    /// Facet counts over the `total` matches, when asked for.
    facets: Option<FacetCounts>,
}

/// What a search must rank: the order, where the previous page ended, and how many hits in
/// that order it needs.
struct Reach<'a> {
    sort: Sort,
    cursor: Option<&'a Cursor>,
    /// Hits kept, in order after the cursor: the page, what it skips, and one more, so that a
    /// next page shows.
    keep: usize,
    /// Keyword matches fused in full (see `fuse`).
    depth: usize,
}

/// The first `keep` hits after the cursor in the order of `sort`, of any number offered,
/// without ordering them all: the buffer is cut back to `keep` by selection whenever it holds
/// twice that, and an offer ranked below the last hit kept at the latest cut is only counted.
/// A query of common words matches most of the catalogue; a page shows twenty of them.
struct TopHits<'c, 'r> {
    reach: &'r Reach<'r>,
    hits: Vec<Scored<'c>>,
    /// The last hit kept at the latest cut: nothing ranked below it can reach the page.
    floor: Option<Scored<'c>>,
    /// Offers after the cursor that cannot reach the page.
    dropped: usize,
}

impl<'c, 'r> TopHits<'c, 'r> {
    fn new(reach: &'r Reach<'r>) -> Self {
        Self {
            reach,
            hits: Vec::new(),
            floor: None,
            dropped: 0,
        }
    }

    fn offer(&mut self, hit: Scored<'c>) {
        let sort = self.reach.sort;
        if self
            .reach
            .cursor
            .is_some_and(|cursor| after_cursor(sort, &hit, cursor).is_le())
        {
            return;
        }
        if self
            .floor
            .as_ref()
            .is_some_and(|floor| compare(sort, &hit, floor).is_gt())
        {
            self.dropped += 1;
            return;
        }
        self.hits.push(hit);
        // An early first cut sets the floor soon: until then every match is offered, and a
        // plain keyword search skips only what ranks under the floor (callgrind over the
        // bench's 1,200 queries at 10k: 3.9% fewer instructions in `matches` than at 256).
        if self.hits.len() >= self.reach.keep.saturating_mul(2).max(64) {
            self.cut();
        }
    }

    /// The relevance under which `drops` drops a hit (minus infinity before the first cut, and
    /// in the other orders).
    fn floor_score(&self) -> f64 {
        match &self.floor {
            Some(floor) if self.reach.sort == Sort::Relevance => floor.score,
            _ => f64::NEG_INFINITY,
        }
    }

    /// Whether a hit of relevance `score` ranks below the cut, so that it cannot reach the page
    /// whatever its id: then it is counted as dropped. (The last hit kept is after the cursor,
    /// so such a hit is too.) Always false in the other orders.
    fn drops(&mut self, score: f64) -> bool {
        let below = score < self.floor_score();
        if below {
            self.dropped += 1;
        }
        below
    }

    /// Take in the hits of another selection for the same page (part of the same matches).
    fn merge(&mut self, other: Self) {
        self.dropped += other.dropped;
        for hit in other.hits {
            self.offer(hit);
        }
    }

    fn cut(&mut self) {
        let keep = self.reach.keep.max(1);
        if self.hits.len() <= keep {
            return;
        }
        let sort = self.reach.sort;
        self.hits
            .select_nth_unstable_by(keep - 1, |a, b| compare(sort, a, b));
        self.dropped += self.hits.len() - keep;
        self.hits.truncate(keep);
        self.floor = Some(self.hits[keep - 1]);
    }

    /// The hits kept (unordered) of `total` matches, of which `omitted` were left out before
    /// they were offered; facet counts from `counter`.
    fn into_matches(
        mut self,
        total: usize,
        omitted: usize,
        counter: Option<facets::FacetCounter<'_>>,
    ) -> Matches<'c> {
        self.cut();
        Matches {
            hits: self.hits,
            total,
            omitted: omitted + self.dropped,
            facets: counter.map(facets::FacetCounter::finish),
        }
    }
}

impl SearchIndex {
    /// An empty index. With an embedder, agents are also ranked by meaning, and their vectors
    /// are kept in `store` keyed by embedder id and content hash.
    pub fn new(store: Arc<dyn Store>, embedder: Option<Arc<dyn Embedder>>) -> anyhow::Result<Self> {
        let catalog = Catalog {
            vectors: embedder.as_ref().map(|e| serving_store(e.dim())),
            ..Catalog::default()
        };
        Ok(Self {
            mode: if embedder.is_some() {
                Mode::Hybrid
            } else {
                Mode::Keyword
            },
            embedder,
            store,
            catalog: RwLock::new(catalog),
            catalog_version: 0.into(),
            count_by_documents: true.into(),
            text: Arc::new(TextIndex::new()?),
            text_saved_at: u64::MAX.into(),
            writes: tokio::sync::Mutex::new(()),
            vectors_ready: std::sync::atomic::AtomicBool::new(true),
            vectors_filled: std::sync::atomic::AtomicUsize::new(0),
            vectors_total: std::sync::atomic::AtomicUsize::new(0),
            snapshot_dir: None,
        })
    }

    /// Keep snapshots of the keyword and vector indexes in `dir`: `load_catalogue` starts the
    /// keyword index from its snapshot and `fill_vectors` the vector index from its own (each
    /// writes a new one when it changed), so a restart neither re-indexes every agent's text nor
    /// rebuilds the graph.
    pub fn with_snapshot_dir(mut self, dir: impl Into<std::path::PathBuf>) -> Self {
        self.snapshot_dir = Some(dir.into());
        self
    }

    /// Where the keyword index's snapshot lives.
    fn text_snapshot_path(&self) -> Option<std::path::PathBuf> {
        Some(self.snapshot_dir.as_ref()?.join("text.snapshot"))
    }

    /// Where the vector snapshot of `embedder_id` lives.
    fn snapshot_path(&self, embedder_id: &str) -> Option<std::path::PathBuf> {
        let key = hex::encode(Sha256::digest(embedder_id.as_bytes()));
        Some(
            self.snapshot_dir
                .as_ref()?
                .join(format!("vectors-{}.snapshot", &key[..16])),
        )
    }

    /// How far the vectors are (for readiness and metrics).
    pub fn vector_progress(&self) -> VectorProgress {
        use std::sync::atomic::Ordering::Relaxed;
        let ready = self.vectors_ready.load(Relaxed);
        let total = self.vectors_total.load(Relaxed);
        VectorProgress {
            none: self.embedder.is_none(),
            ready,
            embedded: if ready {
                total.max(self.vectors_filled.load(Relaxed))
            } else {
                self.vectors_filled.load(Relaxed)
            },
            total,
        }
    }

    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Rank with `mode` instead of the default (hybrid with an embedder, else keyword): the
    /// quality harness compares them. Modes that need an embedder fall back to keyword without.
    pub fn with_mode(mut self, mode: Mode) -> Self {
        self.mode = match (mode, &self.embedder) {
            (Mode::Vector | Mode::Hybrid, None) => Mode::Keyword,
            (mode, _) => mode,
        };
        self
    }

    /// The embedder's id, when there is one.
    pub fn embedder_id(&self) -> Option<&str> {
        self.embedder.as_deref().map(|e| e.id())
    }

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
        loop {
            let asked = std::time::Instant::now();
            let Some(page) = pages.recv().await else {
                break;
            };
            waited += asked.elapsed();
            let page = page?;
            let text = Arc::clone(&text);
            let began = std::time::Instant::now();
            build = tokio::task::spawn_blocking(move || -> anyhow::Result<CatalogBuild> {
                use rayon::prelude::*;
                // Both cores: a page's documents are built in two halves.
                let docs: Vec<Read> = page
                    .par_chunks(page.len().div_ceil(2).max(1))
                    .flat_map_iter(|half| read_active(half.iter()))
                    .collect();
                build.add(docs, &text)?;
                Ok(build)
            })
            .await??;
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
        Ok(counts)
    }

    /// An empty vector store for a catalog being built (none without an embedder).
    fn serving_vectors(&self) -> Option<VectorStore> {
        self.embedder.as_ref().map(|e| serving_store(e.dim()))
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
            .store(self.embedder.is_none() || catalog.live == 0, Relaxed);
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

    /// Give every indexed agent its vector: stored ones whose content hash still matches, the
    /// rest embedded (in batches) and saved. Then intent ranking joins.
    ///
    /// The vector index (at scale, an HNSW graph: minutes at a million agents) is built beside
    /// the serving one, outside the catalog's lock, so searches go on meanwhile; writes landing
    /// in between are noted by slot and carried over when the new index is swapped in.
    pub async fn fill_vectors(&self) -> anyhow::Result<()> {
        self.fill_vectors_from(&Texts::Store).await
    }

    /// `fill_vectors`, reading the texts to embed from `texts`.
    async fn fill_vectors_from(&self, texts: &Texts<'_>) -> anyhow::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let Some(embedder) = self.embedder.clone() else {
            self.vectors_ready.store(true, Relaxed);
            return Ok(());
        };
        let (by_slot, template) = {
            let mut catalog = self.write_catalog();
            catalog.filling = Some(HashSet::new());
            (
                catalog.docs.clone(),
                catalog.vectors.as_ref().map(VectorStore::empty_like),
            )
        };
        let built = match template {
            Some(template) => {
                self.restore_and_build(embedder.as_ref(), by_slot, template, texts)
                    .await
            }
            None => Ok(None),
        };
        let mut catalog = self.write_catalog();
        let written = catalog.filling.take().unwrap_or_default();
        let mut fresh = match built {
            Ok(Some(fresh)) => fresh,
            Ok(None) => {
                drop(catalog);
                self.vectors_ready.store(true, Relaxed);
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        if let Some(serving) = &catalog.vectors {
            for slot in written {
                match serving.get(slot) {
                    Some(vector) => fresh.set(slot, &vector),
                    None => fresh.clear(slot),
                }
            }
        }
        fresh.defer_graph();
        catalog.vectors = Some(fresh);
        catalog.vectors_generation += 1;
        drop(catalog);
        self.vectors_ready.store(true, Relaxed);
        Ok(())
    }

    /// The vector index over the documents `by_slot` (the catalog's, as they were when the
    /// fill began): the snapshot's vectors for agents whose text has not changed since it was
    /// saved, then `build_vectors` for the rest; a new snapshot is saved when anything had to
    /// be added or dropped.
    async fn restore_and_build(
        &self,
        embedder: &dyn Embedder,
        by_slot: Vec<Option<Arc<Doc>>>,
        template: VectorStore,
        texts: &Texts<'_>,
    ) -> anyhow::Result<Option<VectorStore>> {
        use std::sync::atomic::Ordering::Relaxed;
        let docs: Vec<(u32, Arc<Doc>)> = by_slot
            .iter()
            .enumerate()
            .filter_map(|(slot, doc)| Some((slot as u32, Arc::clone(doc.as_ref()?))))
            .collect();
        let Some(path) = self.snapshot_path(embedder.id()) else {
            return self.build_vectors(embedder, docs, template, texts).await;
        };
        let change_seq = self.store.latest_change().await?;
        // `by_slot` places the snapshot's vectors, and keys a new snapshot.
        let started = std::time::Instant::now();
        let (loaded, by_slot) = {
            let (path, embedder_id) = (path.clone(), embedder.id().to_owned());
            let like = template.empty_like();
            tokio::task::spawn_blocking(move || {
                let loaded = VectorStore::load(&path, &embedder_id, &like, place_saved(&by_slot));
                (loaded, by_slot)
            })
            .await
            .map_err(|err| anyhow::anyhow!("reading the vector snapshot failed: {err}"))?
        };
        let (mut fresh, rest, dropped) = match loaded {
            Ok(loaded) => {
                let rest: Vec<(u32, Arc<Doc>)> = docs
                    .into_iter()
                    .filter(|(slot, _)| !loaded.store.holds(*slot))
                    .collect();
                self.vectors_filled.fetch_add(loaded.restored, Relaxed);
                tracing::info!(
                    restored = loaded.restored,
                    to_add = rest.len(),
                    dropped = loaded.dropped,
                    saved_at_change = loaded.change_seq,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "vector index restored from its snapshot"
                );
                (loaded.store, rest, loaded.dropped)
            }
            Err(reason) => {
                if path.exists() {
                    tracing::warn!(%reason, path = %path.display(), "vector snapshot not used; building the index");
                }
                (template, docs, 0)
            }
        };
        let changed = !rest.is_empty() || dropped > 0 || !path.exists();
        fresh = match self.build_vectors(embedder, rest, fresh, texts).await? {
            Some(fresh) => fresh,
            None => return Ok(None),
        };
        if changed {
            let embedder_id = embedder.id().to_owned();
            let saved = tokio::task::spawn_blocking(move || {
                let key = |slot: u32| {
                    let doc = by_slot.get(slot as usize)?.as_ref()?;
                    Some((doc.id.to_string(), doc.content_hash.hex()))
                };
                let result = fresh.save(&path, &embedder_id, change_seq, key);
                (fresh, result, path)
            })
            .await
            .map_err(|err| anyhow::anyhow!("writing the vector snapshot failed: {err}"))?;
            fresh = saved.0;
            match saved.1 {
                Ok(()) => tracing::info!(path = %saved.2.display(), "vector snapshot saved"),
                Err(err) => tracing::warn!(error = %err, "cannot save the vector snapshot"),
            }
        }
        Ok(Some(fresh))
    }

    /// A vector index over `docs` (slot and document), started from the empty `fresh`: stored
    /// vectors whose content hash matches, the rest embedded and saved. Built on the blocking
    /// pool, never under the catalog's lock.
    async fn build_vectors(
        &self,
        embedder: &dyn Embedder,
        docs: Vec<(u32, Arc<Doc>)>,
        mut fresh: VectorStore,
        texts: &Texts<'_>,
    ) -> anyhow::Result<Option<VectorStore>> {
        use std::sync::atomic::Ordering::Relaxed;
        let usable = |doc: &Doc, stored: &StoredEmbedding| {
            doc.content_hash.is(&stored.content_hash)
                && (embedder.dim() == 0 || stored.vector.len() == embedder.dim())
        };
        // Stored vectors whose agent's text is unchanged go in as they are read: a few agents'
        // (those a snapshot lacked) one by one; many agents', a page of every stored vector
        // at a time (all at once, a million of them would take gigabytes as `f32`s).
        let mut missing = Vec::new();
        if docs.len() < LOOKUPS_ONE_BY_ONE {
            let mut current = Vec::new();
            for (slot, doc) in docs {
                match self.store.find_embedding(&doc.id, embedder.id()).await? {
                    Some(stored) if usable(&doc, &stored) => current.push((slot, stored.vector)),
                    _ => missing.push((slot, doc)),
                }
            }
            let added = current.len();
            fresh = add_vectors(fresh, current).await?;
            self.vectors_filled.fetch_add(added, Relaxed);
        } else {
            let mut docs = docs;
            docs.sort_unstable_by(|(_, a), (_, b)| a.id.cmp(&b.id));
            let mut found = vec![false; docs.len()];
            let mut after: Option<String> = None;
            loop {
                let page = self
                    .store
                    .embeddings_page(embedder.id(), after.as_deref(), STORED_PAGE)
                    .await?;
                let full = page.len() == STORED_PAGE as usize;
                after = page.last().map(|stored| stored.agent_id.clone());
                let mut current = Vec::with_capacity(page.len());
                for stored in page {
                    let Ok(at) = docs.binary_search_by(|(_, doc)| (*doc.id).cmp(&stored.agent_id))
                    else {
                        continue;
                    };
                    let (slot, doc) = &docs[at];
                    if usable(doc, &stored) {
                        found[at] = true;
                        current.push((*slot, stored.vector));
                    }
                }
                let added = current.len();
                fresh = add_vectors(fresh, current).await?;
                self.vectors_filled.fetch_add(added, Relaxed);
                if !full {
                    break;
                }
            }
            missing.extend(
                docs.into_iter()
                    .zip(found)
                    .filter_map(|(doc, found)| (!found).then_some(doc)),
            );
            missing.sort_unstable_by_key(|(slot, _)| *slot);
        }
        if !missing.is_empty() {
            tracing::info!(
                embedder = embedder.id(),
                stored = self.vectors_filled.load(Relaxed),
                to_embed = missing.len(),
                "embedding agents; keyword ranking until they are done"
            );
        }
        let started = std::time::Instant::now();
        let mut reported = started;
        for (done, batch) in missing.chunks(EMBED_BATCH).enumerate() {
            // The index keeps no text: it is read again. An agent whose text changed since
            // it was catalogued is left out; applying its newer version embeds it.
            let (batch, batch_texts) = self.texts_of(batch, texts).await?;
            if batch.is_empty() {
                continue;
            }
            let vectors = embedder.embed(&batch_texts).await?;
            let fresh_embeddings: Vec<StoredEmbedding> = batch
                .iter()
                .zip(vectors)
                .map(|((_, doc), vector)| StoredEmbedding {
                    agent_id: doc.id.to_string(),
                    content_hash: doc.content_hash.hex(),
                    vector,
                })
                .collect();
            self.store
                .save_embeddings(embedder.id(), &fresh_embeddings)
                .await?;
            let slotted: Vec<(u32, Vec<f32>)> = batch
                .iter()
                .zip(fresh_embeddings)
                .map(|((slot, _), embedding)| (*slot, embedding.vector))
                .collect();
            fresh = add_vectors(fresh, slotted).await?;
            self.vectors_filled.fetch_add(batch.len(), Relaxed);
            if reported.elapsed() >= std::time::Duration::from_secs(10) {
                reported = std::time::Instant::now();
                tracing::info!(
                    embedded = (done + 1) * EMBED_BATCH,
                    of = missing.len(),
                    "embedding agents"
                );
            }
        }
        if !missing.is_empty() {
            tracing::info!(
                embedded = missing.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "every agent has its vector; intent ranking is on"
            );
        }
        Ok(Some(fresh))
    }

    /// The embedding texts of `docs`, read from the store, for those whose text is still the
    /// one catalogued (same content hash); the others are left out.
    async fn texts_of(
        &self,
        docs: &[(u32, Arc<Doc>)],
        source: &Texts<'_>,
    ) -> anyhow::Result<(Vec<(u32, Arc<Doc>)>, Vec<String>)> {
        let text = |agent: &Agent| (agent.id.clone(), embedding_text(&doc_text(agent)));
        let mut texts: HashMap<String, String> = match source {
            Texts::Store => {
                let ids: Vec<String> = docs.iter().map(|(_, doc)| doc.id.to_string()).collect();
                self.store
                    .find_agents_by_id(&ids)
                    .await?
                    .iter()
                    .map(text)
                    .collect()
            }
            Texts::Given(agents) => docs
                .iter()
                .filter_map(|(_, doc)| agents.get(&*doc.id).map(|agent| text(agent)))
                .collect(),
        };
        let mut kept = Vec::with_capacity(docs.len());
        let mut kept_texts = Vec::with_capacity(docs.len());
        for (slot, doc) in docs {
            let Some(text) = texts.remove(&*doc.id) else {
                continue;
            };
            if ContentHash::of(&text) == doc.content_hash {
                kept.push((*slot, Arc::clone(doc)));
                kept_texts.push(text);
            }
        }
        Ok((kept, kept_texts))
    }

    /// Make the index reflect `agent` as just written: indexed when ACTIVE, absent otherwise.
    /// A write older than one already applied (a lower revision) is ignored.
    pub async fn apply(&self, agent: &Agent) {
        self.apply_batch(std::slice::from_ref(agent), &[]).await;
    }

    /// Make the index reflect many agents as they now are (ACTIVE ones indexed, others and the
    /// ids in `deleted` removed) with one text-index commit: the change-log follower applies a
    /// whole batch of changes this way. Vectors are embedded together; stale writes lose.
    pub async fn apply_batch(&self, agents: &[Agent], deleted: &[String]) {
        let docs = read_active(agents.iter());
        let vectors = self.vectors_for(&docs).await;
        let _guard = self.writes.lock().await;
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
                .filter(|agent| agent.state != AgentState::Active)
                .map(|agent| (agent.id.as_str(), agent.revision))
                .chain(deleted.iter().map(|id| (id.as_str(), i64::MAX)));
            for (id, revision) in gone {
                if catalog.is_stale(id, revision) {
                    continue;
                }
                catalog.revisions.insert(id.to_owned(), revision);
                if let Some(slot) = catalog.slots.get(id).copied() {
                    if catalog.take(slot) {
                        text_changes.push((slot, None));
                    }
                }
            }
            catalog.filling.is_none()
                && catalog.vectors.as_ref().is_some_and(VectorStore::graph_due)
        };
        if !text_changes.is_empty() {
            if let Err(err) = self.text.apply_batch(text_changes.into_iter()) {
                tracing::error!(error = %err, "cannot index a batch of agents");
            }
        }
        if graph_due {
            self.build_graph_aside().await;
        }
    }

    /// The catalogue has grown to the size that wants a vector graph: build it on a copy of the
    /// store, outside the catalog's lock, and swap it in. The caller holds `writes`, so no write
    /// lands in between; searches go on with the exact scan meanwhile.
    async fn build_graph_aside(&self) {
        let (copy, generation) = {
            let catalog = self.read_catalog();
            let copy = catalog
                .vectors
                .as_ref()
                .and_then(VectorStore::copy_without_graph);
            (copy, catalog.vectors_generation)
        };
        let Some(copy) = copy else {
            return;
        };
        let started = std::time::Instant::now();
        let built = tokio::task::spawn_blocking(move || {
            let mut copy = copy;
            copy.build_graph();
            copy
        })
        .await;
        match built {
            Ok(built) => {
                tracing::info!(
                    vectors = built.distinct(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "vector graph built"
                );
                let mut catalog = self.write_catalog();
                // A start-up fill that swapped in its own store meanwhile wins; its store
                // builds its graph itself.
                if catalog.vectors_generation == generation {
                    catalog.vectors = Some(built);
                }
            }
            Err(err) => tracing::error!(error = %err, "cannot build the vector graph"),
        }
    }

    /// The vectors of `docs` (see `vector_for`), the missing ones embedded in batches.
    async fn vectors_for(&self, docs: &[Read]) -> Vec<Option<Vec<f32>>> {
        let Some(embedder) = self.embedder.clone() else {
            return vec![None; docs.len()];
        };
        let mut vectors = Vec::with_capacity(docs.len());
        let mut missing = Vec::new();
        for (i, (doc, _)) in docs.iter().enumerate() {
            let known = {
                let catalog = self.read_catalog();
                catalog.slots.get(&doc.id).and_then(|slot| {
                    let same = catalog
                        .doc(*slot)
                        .is_some_and(|d| d.content_hash == doc.content_hash);
                    same.then(|| catalog.vectors.as_ref()?.get(*slot)).flatten()
                })
            };
            let known = match known {
                Some(vector) => Some(vector),
                None => match self.store.find_embedding(&doc.id, embedder.id()).await {
                    Ok(Some(stored)) if doc.content_hash.is(&stored.content_hash) => {
                        Some(stored.vector)
                    }
                    _ => None,
                },
            };
            if known.is_none() {
                missing.push(i);
            }
            vectors.push(known);
        }
        for chunk in missing.chunks(EMBED_BATCH) {
            let texts: Vec<String> = chunk.iter().map(|&i| embedding_text(&docs[i].1)).collect();
            let embedded = match embedder.embed(&texts).await {
                Ok(embedded) if embedded.len() == chunk.len() => embedded,
                Ok(_) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot embed agents; keyword search only");
                    continue;
                }
            };
            let fresh: Vec<StoredEmbedding> = chunk
                .iter()
                .zip(embedded)
                .map(|(&i, vector)| StoredEmbedding {
                    agent_id: docs[i].0.id.to_string(),
                    content_hash: docs[i].0.content_hash.hex(),
                    vector,
                })
                .collect();
            if let Err(err) = self.store.save_embeddings(embedder.id(), &fresh).await {
                tracing::warn!(error = %err, "cannot store embeddings");
            }
            for (&i, stored) in chunk.iter().zip(fresh) {
                vectors[i] = Some(stored.vector);
            }
        }
        vectors
    }

    /// Whether `agent` (ACTIVE) is indexed at exactly its revision, so applying it again would
    /// change nothing: the change follower skips the writes this process already applied.
    pub fn holds(&self, agent: &Agent) -> bool {
        let catalog = self.read_catalog();
        agent.state == AgentState::Active
            && catalog
                .slots
                .get(agent.id.as_str())
                .and_then(|slot| catalog.doc(*slot))
                .is_some_and(|doc| doc.revision == agent.revision)
    }

    /// Set an indexed agent's health as the prober (of any process) last recorded it; `None`
    /// clears it (its endpoint changed). Health older than the one held is ignored.
    pub fn set_health(&self, id: &str, health: Option<Health>) {
        let mut catalog = self.write_health();
        if let Some(slot) = catalog.slots.get(id).copied() {
            if catalog.doc(slot).is_some() {
                let clear = health.is_none();
                catalog.update_health(slot, health.map(Arc::new), clear);
            }
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

    /// The keyword index's segments and stored documents (deleted ones included).
    /// See `TextIndex::set_parallel_from`.
    pub fn set_parallel_from(&self, postings: u64) {
        self.text.set_parallel_from(postings);
    }

    #[cfg(test)]
    fn set_count_by_documents(&self, on: bool) {
        self.count_by_documents
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    pub fn text_stats(&self) -> text::TextStats {
        self.text.stats()
    }

    /// The number of ACTIVE agents indexed.
    pub fn len(&self) -> usize {
        self.read_catalog().live
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Run one search: embed the query (when there is text and an embedder), then rank.
    pub async fn search(&self, request: &SearchRequest) -> Result<SearchPage, SearchError> {
        let wants_vector = self.mode != Mode::Keyword
            && request.has_text()
            && self
                .vectors_ready
                .load(std::sync::atomic::Ordering::Relaxed);
        let query_vector = match (&self.embedder, wants_vector) {
            (Some(embedder), true) => {
                let text = if embedder.is_bag_of_words() {
                    query::content_text(&request.text).into_owned()
                } else {
                    request.text.clone()
                };
                match embedder.embed(std::slice::from_ref(&text)).await {
                    Ok(mut vectors) => vectors.pop(),
                    Err(err) => {
                        tracing::warn!(error = %err, "cannot embed query; keyword ranking only");
                        None
                    }
                }
            }
            _ => None,
        };
        self.search_with_vector(request, query_vector.as_deref())
    }

    /// Rank with an already embedded query (`None`: keyword ranking only).
    pub fn search_with_vector(
        &self,
        request: &SearchRequest,
        query_vector: Option<&[f32]>,
    ) -> Result<SearchPage, SearchError> {
        let sort = request.effective_sort();
        let cursor = request
            .cursor
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .map(|c| Cursor::decode(c, sort))
            .transpose()?;
        let catalog = self.read_catalog();
        let limit = request.limit.clamp(1, MAX_LIMIT);
        // The matches the page is cut from: the skipped ones and the page itself.
        let reach = request.offset.saturating_add(limit);
        // Relevance pages need only the keyword matches that can still reach them (see
        // `fuse`); any other order needs every match.
        let depth = match (sort, &cursor) {
            (Sort::Relevance, None) => reach.saturating_add(VECTOR_DEPTH),
            (Sort::Relevance, Some(cursor)) => keyword_depth_after(cursor)
                .saturating_add(reach)
                .saturating_add(VECTOR_DEPTH),
            _ => usize::MAX,
        };
        let mut bounds = Reach {
            sort,
            cursor: cursor.as_ref(),
            keep: reach.saturating_add(1),
            depth,
        };
        let mut found = self.matches(&catalog, request, query_vector, &bounds);
        if found.omitted > 0 && found.hits.len() <= reach {
            // Cannot happen when `keyword_depth_after` is right; stay correct if it is not.
            tracing::warn!(
                depth,
                "fused ranking was cut too short; ranking every match"
            );
            bounds.depth = usize::MAX;
            bounds.keep = usize::MAX;
            found = self.matches(&catalog, request, query_vector, &bounds);
        }
        let Matches {
            mut hits,
            total,
            omitted,
            facets,
        } = found;
        let more = hits.len() > reach || omitted > 0;
        // Only the page (and what it skips) is ordered: selecting it is linear, sorting every
        // match is not.
        if hits.len() > reach {
            hits.select_nth_unstable_by(reach - 1, |a, b| compare(sort, a, b));
            hits.truncate(reach);
        }
        hits.sort_unstable_by(|a, b| compare(sort, a, b));
        hits.drain(..request.offset.min(hits.len()));
        let next_cursor = match hits.last() {
            Some(last) if more => Some(cursor_after(sort, last).encode()),
            _ => None,
        };
        let with_score = sort == Sort::Relevance;
        Ok(SearchPage {
            hits: hits
                .into_iter()
                .map(|hit| Hit {
                    listing: Arc::clone(&hit.doc.listing),
                    score: with_score.then_some(hit.score),
                    health: catalog.health.get(&hit.slot).cloned(),
                })
                .collect(),
            total,
            limit,
            next_cursor,
            facets,
        })
    }

    /// The agents that pass the filters and match the text (all of them without text), with
    /// their relevance scores; of those after the cursor, only the `keep` first in order are
    /// kept and the rest counted. With both rankings, keyword matches ranked below `depth`
    /// (and not found by meaning) are counted but left out: see `fuse`.
    fn matches<'c>(
        &self,
        catalog: &'c Catalog,
        request: &SearchRequest,
        query_vector: Option<&[f32]>,
        reach: &Reach<'_>,
    ) -> Matches<'c> {
        // Each match costs a bit test or two: the filters' set (the live agents when nothing is
        // filtered), and the duplicates hidden by collapsing. The document is read only for
        // hits that can reach the page.
        let allowed = catalog.allowed(&request.filters);
        let base = allowed.as_ref().unwrap_or(catalog.facets.live());
        let hidden = request
            .filters
            .collapse_duplicates
            .then(|| catalog.groups.hidden());
        let shown = |slot: u32| base.contains(slot) && hidden.is_none_or(|set| !set.contains(slot));
        // Agents the prober found not answering sink a little (the prior never exceeds 1).
        let prior = |slot: u32, score: f64| score * catalog.health_status(slot).ranking_prior();
        // Facet counts go over the very matches `total` counts, once each.
        let mut tally = Tally {
            catalog,
            counter: request.facets.then(|| catalog.facets.counter()),
            total: 0,
        };
        let mut top = TopHits::new(reach);
        if !request.has_text() {
            for slot in base.iter().filter(|slot| shown(*slot)) {
                if let Some(doc) = catalog.doc(slot) {
                    tally.add(slot);
                    top.offer(Scored {
                        slot,
                        doc,
                        score: 0.0,
                    });
                }
            }
            return top.into_matches(tally.total, 0, tally.counter);
        }
        let query_vector = query_vector.filter(|_| self.mode != Mode::Keyword);
        let vectors = query_vector.zip(catalog.vectors.as_ref());
        let Some((query_vector, vectors)) = vectors else {
            // Keyword ranking alone: every match streams through the page's selection, and
            // most matches of a common word are only counted.
            // Without a filter or facets, a match's only effect below the page's floor is to
            // be counted, and the search counts those 64 documents at a time.
            let by_documents = allowed.is_none()
                && tally.counter.is_none()
                && self
                    .count_by_documents
                    .load(std::sync::atomic::Ordering::Relaxed);
            let counted_by_documents = by_documents.then(|| text::ShownFilter {
                variant: usize::from(hidden.is_some()),
                version: self
                    .catalog_version
                    .load(std::sync::atomic::Ordering::Relaxed),
                live: base,
                hidden,
            });
            let mut keyword = KeywordOnly {
                shown: &shown,
                prior: &prior,
                tally,
                top,
                counted_by_documents,
            };
            self.keyword_matches(&request.text, &mut keyword);
            let KeywordOnly { tally, top, .. } = keyword;
            return top.into_matches(tally.total, 0, tally.counter);
        };
        let nearest = || {
            vectors.nearest_within(
                query_vector,
                VECTOR_DEPTH,
                MIN_SIMILARITY,
                allowed.as_ref(),
                |slot| shown(slot) && catalog.doc(slot).is_some(),
            )
        };
        // The keyword matches stream past the vector matches once, each counted against them.
        let fuse = |semantic: Vec<(u32, f32)>, matches: Option<text::Matches<'_>>| {
            let mut by_vector = SlotSet::default();
            for (slot, _) in &semantic {
                by_vector.insert(*slot);
            }
            let mut fusion = Fusion {
                shown: &shown,
                by_vector: &by_vector,
                ahead: semantic.iter().map(|(slot, _)| *slot).collect(),
                tally,
                ranks: KeywordRanks::new(reach.depth),
            };
            if let Some(matches) = matches {
                matches.visit(&mut fusion);
            }
            let Fusion { tally, ranks, .. } = fusion;
            (semantic, tally, ranks)
        };
        let (semantic, mut tally, ranks) = if self.mode == Mode::Vector {
            fuse(nearest(), None)
        } else {
            // A large store's vector search takes the other core while the keyword matches
            // are scored.
            self.text.search_beside(
                &request.text,
                vectors.searches_long(),
                nearest,
                |semantic, matches| {
                    let matches = matches
                        .inspect_err(|err| tracing::error!(error = %err, "keyword search failed"))
                        .ok();
                    fuse(semantic, matches)
                },
            )
        };
        if request.facets {
            // The vector matches no keyword found; the keyword ones were counted as visited.
            let keyword_found: HashSet<u32> = ranks.found_slots().collect();
            for (slot, _) in &semantic {
                if !keyword_found.contains(slot) {
                    tally.add(*slot);
                }
            }
        }
        let weight = self
            .embedder
            .as_ref()
            .map_or(1.0, |embedder| embedder.fusion_weight());
        let fused = ranks.fuse(&semantic, weight);
        for (slot, score) in fused.scores {
            if let Some(doc) = catalog.doc(slot) {
                top.offer(Scored {
                    slot,
                    doc,
                    score: prior(slot, score),
                });
            }
        }
        top.into_matches(fused.total, fused.omitted, tally.counter)
    }

    /// Every keyword match of `text` (none when ranking by vectors alone), to `visit`: generic,
    /// not a trait object, so that the per-match work compiles into the scoring loop.
    fn keyword_matches(&self, text: &str, visitor: &mut (impl MatchVisitor + Send)) {
        if self.mode == Mode::Vector {
            return;
        }
        if let Err(err) = self.text.search_visiting(text, visitor) {
            tracing::error!(error = %err, "keyword search failed");
        }
    }

    /// The package names of the other ACTIVE agents in `id`'s duplicate group (same repository
    /// or endpoint), best first.
    pub fn duplicates_of(&self, id: &str) -> Vec<String> {
        let catalog = self.read_catalog();
        let Some(slot) = catalog.slots.get(id).copied() else {
            return Vec::new();
        };
        let Some(key) = catalog.doc(slot).and_then(|doc| doc.group.clone()) else {
            return Vec::new();
        };
        let mut others: Vec<&Arc<Doc>> = catalog
            .groups
            .others(&key, slot)
            .into_iter()
            .filter_map(|member| catalog.doc(member))
            .collect();
        others.sort_by(|a, b| a.rank.cmp(&b.rank));
        others
            .into_iter()
            .map(|doc| doc.listing.package_name().to_owned())
            .collect()
    }

    fn read_catalog(&self) -> std::sync::RwLockReadGuard<'_, Catalog> {
        self.catalog
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn write_catalog(&self) -> std::sync::RwLockWriteGuard<'_, Catalog> {
        let catalog = self
            .catalog
            .write()
            .unwrap_or_else(|poison| poison.into_inner());
        self.catalog_version
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        catalog
    }

    /// The catalogue for writing health alone, without moving its version: health changes no
    /// agent's place in an unfiltered search, only its prior (read per query), so keyword
    /// searches' document bits stay valid, which at a million agents matters while the prober
    /// records health all the time. Every other write goes through `write_catalog`.
    fn write_health(&self) -> std::sync::RwLockWriteGuard<'_, Catalog> {
        self.catalog
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
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
    out: tokio::sync::mpsc::Sender<anyhow::Result<Vec<Agent>>>,
) {
    let mut after: Option<String> = None;
    loop {
        match store
            .agents_page(Some(AgentState::Active), after.as_deref(), LOAD_PAGE)
            .await
        {
            Ok(page) => {
                let last = page.last().map(|agent| agent.id.clone());
                let full = page.len() == LOAD_PAGE as usize;
                if (!page.is_empty() && out.send(Ok(page)).await.is_err()) || !full {
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

/// Whether a saved keyword index is worth starting from: its slots are never reused, so
/// deleted agents leave holes, and a table mostly of holes is rebuilt compactly instead.
fn usable(slots: &[text::SavedSlot]) -> bool {
    let highest = slots.iter().map(|s| s.slot as usize + 1).max().unwrap_or(0);
    highest <= 2 * slots.len() + 1024
}

/// What a hash of an agent's indexed text covers: every field, each with its length, so no
/// two different texts run together into the same bytes.
fn text_hash(text: &DocText) -> [u8; 32] {
    let mut digest = Sha256::new();
    let fields = [
        &text.name,
        &text.package_name,
        &text.tags,
        &text.category,
        &text.description,
        &text.capabilities,
    ];
    for field in fields {
        digest.update((field.len() as u64).to_le_bytes());
        digest.update(field.as_bytes());
    }
    digest.finalize().into()
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
    fn changed(&self) -> bool {
        self.replaced + self.added + self.removed > 0
    }
}

/// A catalog being built at start-up, and the keyword index changes that go with it.
struct CatalogBuild {
    catalog: Catalog,
    /// A saved keyword index's documents not yet claimed: agent id → slot and text hash.
    saved: HashMap<String, (u32, [u8; 32])>,
    counts: LoadCounts,
}

impl CatalogBuild {
    /// A build starting from the documents `saved` in a keyword index (none for a fresh one).
    fn new(vectors: Option<VectorStore>, saved: Vec<text::SavedSlot>) -> Self {
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
    fn add(&mut self, docs: Vec<Read>, text: &TextIndex) -> Result<(), TextIndexError> {
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
    fn finish(mut self, text: &TextIndex) -> Result<(Catalog, LoadCounts), TextIndexError> {
        self.counts.removed = self.saved.len();
        text.stage(self.saved.values().map(|(slot, _)| Staged::Remove(*slot)))?;
        Ok((self.catalog, self.counts))
    }
}

/// The searchable text of an agent, field by field.
fn doc_text(agent: &Agent) -> DocText {
    let draft = &agent.draft;
    // Representative queries say what the agent does in its users' words: searched (and
    // embedded) with the capabilities, after them, so agents without any index as before.
    let capabilities = draft
        .capabilities
        .iter()
        .map(|c| format!("{} {}", c.name.replace('_', " "), c.description))
        .chain(draft.representative_queries.iter().cloned())
        .collect::<Vec<_>>()
        .join("\n");
    DocText {
        name: draft.name.clone(),
        package_name: package_words(agent.package_name()),
        tags: draft.tags.join(" "),
        category: draft.category.clone().unwrap_or_default(),
        description: draft.description.clone(),
        capabilities,
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
fn embedding_text(text: &DocText) -> String {
    let mut parts = vec![text.name.as_str(), text.description.as_str()];
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

/// The vector store a serving index writes into: it leaves the graph's one-off build to
/// `build_graph_aside`, which runs it outside the catalog's lock.
fn serving_store(dim: usize) -> VectorStore {
    let mut store = VectorStore::new(dim);
    store.defer_graph();
    store
}

/// Below this many agents without a vector, their stored vectors are read one by one rather
/// than page by page through every stored vector. (Tests take both ways with a few agents.)
const LOOKUPS_ONE_BY_ONE: usize = if cfg!(test) { 5 } else { 2_000 };

/// Stored vectors read (and added to a starting index) per page: a few megabytes of `f32`s.
const STORED_PAGE: u32 = if cfg!(test) { 4 } else { 4_096 };

/// `store` with `vectors` set, on the blocking pool: inserting into a graph is CPU work that
/// must not hold up the runtime's threads.
async fn add_vectors(
    store: VectorStore,
    vectors: Vec<(u32, Vec<f32>)>,
) -> anyhow::Result<VectorStore> {
    tokio::task::spawn_blocking(move || {
        let mut store = store;
        for (slot, vector) in &vectors {
            store.set(*slot, vector);
        }
        store
    })
    .await
    .map_err(|err| anyhow::anyhow!("building the vector index failed: {err}"))
}

/// The matches a search counts, with their facet values when asked for.
struct Tally<'c> {
    catalog: &'c Catalog,
    counter: Option<facets::FacetCounter<'c>>,
    total: usize,
}

impl Tally<'_> {
    #[inline(always)]
    fn add(&mut self, slot: u32) {
        self.total += 1;
        if let Some(counter) = self.counter.as_mut() {
            counter.add(slot, self.catalog.health_status(slot));
        }
    }

    /// An empty tally for part of the matches, to `merge` back.
    fn split(&self) -> Self {
        Self {
            catalog: self.catalog,
            counter: self.counter.as_ref().map(facets::FacetCounter::fresh),
            total: 0,
        }
    }

    fn merge(&mut self, other: Self) {
        self.total += other.total;
        if let (Some(counter), Some(more)) = (self.counter.as_mut(), other.counter) {
            counter.merge(more);
        }
    }
}

/// The keyword pass of a keyword-only search: the shown matches are counted and offered to
/// the page's selection (most of a common word's matches rank below its cut and are only
/// counted, their documents never read).
struct KeywordOnly<'c, 'r, S, P> {
    shown: &'r S,
    prior: &'r P,
    tally: Tally<'c>,
    top: TopHits<'c, 'r>,
    /// `shown` as the text index's filter, when it may count the shown matches itself
    /// (`MatchVisitor::shown_filter`): one variant per value of duplicate collapsing, the only
    /// filter it is offered with.
    counted_by_documents: Option<text::ShownFilter<'r>>,
}

impl<S, P> MatchVisitor for KeywordOnly<'_, '_, S, P>
where
    S: Fn(u32) -> bool + Sync,
    P: Fn(u32, f64) -> f64 + Sync,
{
    #[inline(always)]
    fn visit(&mut self, slot: u32, score: f32) {
        if !(self.shown)(slot) {
            return;
        }
        self.tally.add(slot);
        self.visit_shown(slot, score);
    }

    fn shown_filter(&self) -> Option<text::ShownFilter<'_>> {
        self.counted_by_documents
    }

    /// The page's floor: the prior never raises a score, so a match scoring under it is
    /// dropped whatever its prior.
    fn floor(&self) -> f64 {
        self.top.floor_score()
    }

    #[inline(always)]
    fn visit_shown(&mut self, slot: u32, score: f32) {
        let score = (self.prior)(slot, f64::from(score));
        if self.top.drops(score) {
            return;
        }
        if let Some(doc) = self.tally.catalog.doc(slot) {
            self.top.offer(Scored { slot, doc, score });
        }
    }

    fn counted(&mut self, shown: usize, below: usize) {
        self.tally.total += shown;
        self.top.dropped += below;
    }

    fn split(&self) -> Option<Self> {
        Some(Self {
            shown: self.shown,
            prior: self.prior,
            tally: self.tally.split(),
            top: TopHits::new(self.top.reach),
            counted_by_documents: self.counted_by_documents,
        })
    }

    fn merge(&mut self, other: Self) {
        self.tally.merge(other.tally);
        self.top.merge(other.top);
    }
}

/// The keyword pass of a fused search: the shown matches are counted and streamed through
/// `KeywordRanks`, the scores of those a vector found looked up first.
struct Fusion<'c, 'r, S> {
    shown: &'r S,
    by_vector: &'r SlotSet,
    /// The slots a vector found.
    ahead: Vec<u32>,
    tally: Tally<'c>,
    ranks: KeywordRanks,
}

impl<S: Fn(u32) -> bool + Sync> MatchVisitor for Fusion<'_, '_, S> {
    fn ahead(&self) -> &[u32] {
        &self.ahead
    }

    fn scored_ahead(&mut self, found: Vec<(u32, f32)>, matches: usize) {
        for (slot, score) in found {
            if (self.shown)(slot) {
                self.ranks.peek(slot, score);
            }
        }
        self.ranks.counting(matches);
    }

    #[inline(always)]
    fn visit(&mut self, slot: u32, score: f32) {
        if (self.shown)(slot) {
            self.tally.add(slot);
            self.ranks.offer(slot, score, self.by_vector.contains(slot));
        }
    }

    fn split(&self) -> Option<Self> {
        Some(Self {
            shown: self.shown,
            by_vector: self.by_vector,
            ahead: Vec::new(),
            tally: self.tally.split(),
            ranks: self.ranks.split(),
        })
    }

    fn merge(&mut self, other: Self) {
        self.tally.merge(other.tally);
        self.ranks.merge(other.ranks);
    }
}

/// How deep in the keyword ranking the first agent after `cursor` can be, at most. A keyword
/// match that no vector found scores `keyword_reciprocal(rank)`, which falls with `rank`, so
/// every such match ranked deeper than this scores below the cursor.
fn keyword_depth_after(cursor: &Cursor) -> usize {
    let score = f64::from_bits(cursor.score.unwrap_or_default());
    if !(score.is_finite() && score > 0.0) {
        return usize::MAX;
    }
    let rank = (1.0 + KEYWORD_TIE_BREAK) / score - RRF_K - 1.0;
    if rank >= 1e15 {
        usize::MAX
    } else {
        rank.max(0.0).ceil() as usize + 2
    }
}

/// The total order of results for `sort`; ids break every tie, so the order is stable.
fn compare(sort: Sort, a: &Scored<'_>, b: &Scored<'_>) -> Ordering {
    let primary = match sort {
        Sort::Relevance => b.score.total_cmp(&a.score),
        Sort::Newest => b.doc.published_micros.cmp(&a.doc.published_micros),
        Sort::Name => a.doc.name_key.cmp(&b.doc.name_key),
        Sort::Oldest => a.doc.published_micros.cmp(&b.doc.published_micros),
    };
    primary.then_with(|| a.doc.id.cmp(&b.doc.id))
}

/// Where `hit` stands relative to the cursor position in the order of `sort`.
fn after_cursor(sort: Sort, hit: &Scored<'_>, cursor: &Cursor) -> Ordering {
    let primary = match sort {
        Sort::Relevance => f64::from_bits(cursor.score.unwrap_or_default()).total_cmp(&hit.score),
        Sort::Newest => cursor
            .time
            .unwrap_or_default()
            .cmp(&hit.doc.published_micros),
        Sort::Name => hit
            .doc
            .name_key
            .as_ref()
            .cmp(cursor.name.as_deref().unwrap_or_default()),
        Sort::Oldest => hit
            .doc
            .published_micros
            .cmp(&cursor.time.unwrap_or_default()),
    };
    // Equal keys: ids at or before the cursor's id were already served.
    match primary.then_with(|| (*hit.doc.id).cmp(cursor.id.as_str())) {
        Ordering::Equal => Ordering::Less,
        other => other,
    }
}

fn cursor_after(sort: Sort, last: &Scored<'_>) -> Cursor {
    Cursor {
        sort,
        score: (sort == Sort::Relevance).then_some(last.score.to_bits()),
        time: matches!(sort, Sort::Newest | Sort::Oldest).then_some(last.doc.published_micros),
        name: (sort == Sort::Name).then(|| last.doc.name_key.to_string()),
        id: last.doc.id.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic xorshift generator.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0 % n
        }
    }

    /// Fuse by streaming `keyword` through `KeywordRanks` as a search does.
    fn fuse(
        keyword: Vec<(u32, f32)>,
        semantic: Vec<(u32, f32)>,
        weight: f64,
        depth: usize,
    ) -> fusion::Fused {
        let by_vector: HashSet<u32> = semantic.iter().map(|(slot, _)| *slot).collect();
        let mut ranks = KeywordRanks::new(depth);
        for (slot, score) in &keyword {
            if by_vector.contains(slot) {
                ranks.peek(*slot, *score);
            }
        }
        ranks.counting(keyword.len());
        for (slot, score) in &keyword {
            ranks.offer(*slot, *score, by_vector.contains(slot));
        }
        ranks.fuse(&semantic, weight)
    }

    fn ranked(scores: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
        let mut scores = scores;
        scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        scores
    }

    /// Page through a fused ranking the way `search_with_vector` does, cutting the keyword
    /// ranking at the depth the cursor allows, and compare with fusing every match.
    #[test]
    fn fusing_only_the_reachable_keyword_matches_pages_exactly_like_fusing_all() {
        let mut rng = Rng(0x0dd_ba11);
        for round in 0..20 {
            // Every weight an embedder may give its ranking (and more) pages the same way.
            let weight = [0.5, 1.0, 2.0][round % 3];
            let matches = 50 + rng.below(600) as u32;
            // Few distinct scores, so keyword ties are common.
            let keyword: Vec<(u32, f32)> = (0..matches)
                .map(|slot| (slot, rng.below(12) as f32 / 4.0))
                .collect();
            let semantic: Vec<(u32, f32)> = (0..VECTOR_DEPTH as u32)
                .map(|i| {
                    (
                        rng.below(u64::from(matches) + 200) as u32,
                        1.0 - i as f32 / 200.0,
                    )
                })
                .collect::<Vec<_>>()
                .into_iter()
                .fold(Vec::new(), |mut unique, hit| {
                    if !unique.iter().any(|(slot, _)| *slot == hit.0) {
                        unique.push(hit);
                    }
                    unique
                });
            let full = fuse(keyword.clone(), semantic.clone(), weight, usize::MAX);
            assert_eq!(full.omitted, 0);
            let expected = ranked(full.scores);
            let limit = 1 + rng.below(25) as usize;
            let mut served: Vec<(u32, f64)> = Vec::new();
            let mut last: Option<(u32, f64)> = None;
            loop {
                let depth = match last {
                    None => limit + VECTOR_DEPTH,
                    Some((_, score)) => {
                        let cursor = Cursor {
                            sort: Sort::Relevance,
                            score: Some(score.to_bits()),
                            time: None,
                            name: None,
                            id: String::new(),
                        };
                        keyword_depth_after(&cursor)
                            .saturating_add(limit)
                            .saturating_add(VECTOR_DEPTH)
                    }
                };
                let cut = fuse(keyword.clone(), semantic.clone(), weight, depth);
                assert_eq!(cut.total, expected.len(), "round {round}");
                let after: Vec<(u32, f64)> = ranked(cut.scores)
                    .into_iter()
                    .filter(|hit| {
                        last.is_none_or(|(slot, score)| {
                            hit.1 < score || (hit.1 == score && hit.0 > slot)
                        })
                    })
                    .collect();
                assert!(cut.omitted == 0 || after.len() > limit, "round {round}");
                let page: Vec<(u32, f64)> = after.into_iter().take(limit).collect();
                if page.is_empty() {
                    break;
                }
                last = page.last().copied();
                served.extend(page);
            }
            assert_eq!(served, expected, "round {round}, limit {limit}");
        }
    }

    /// Twelve ACTIVE agents gone live two at a time, a second apart, in a keyword index; their
    /// ids oldest first and newest first (ties by id in both).
    async fn live_agents() -> (SearchIndex, Vec<String>, Vec<String>, tempfile::TempDir) {
        let (dir, store) = sqlite_store().await;
        let mut agents = Vec::new();
        for i in 0..12_i64 {
            let draft = crate::domain::AgentDraft::parse(&serde_json::json!({
                "package_name": format!("com.example.agent{i}"),
                "name": format!("Agent {i}"),
                "description": "Forecasts for any city.",
            }))
            .expect("draft");
            let mut agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
            agent.state = AgentState::Active;
            agent.published_at = Some(crate::timestamp::Timestamp::from_micros(
                1_000_000 * (i / 2),
            ));
            agents.push(agent);
        }
        let index = SearchIndex::new(store, None).expect("index");
        index.rebuild_keyword(&agents).await.expect("index");
        let mut order: Vec<(i64, String)> = agents
            .iter()
            .map(|agent| {
                (
                    agent.published_at.map_or(0, |t| t.micros()),
                    agent.id.clone(),
                )
            })
            .collect();
        order.sort();
        let oldest_first = order.iter().map(|(_, id)| id.clone()).collect();
        order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let newest_first = order.into_iter().map(|(_, id)| id).collect();
        (index, oldest_first, newest_first, dir)
    }

    fn ids(page: &SearchPage) -> Vec<String> {
        page.hits
            .iter()
            .map(|hit| hit.listing.id().to_owned())
            .collect()
    }

    fn ordered(sort: Sort, limit: usize, offset: usize, cursor: Option<String>) -> SearchRequest {
        SearchRequest {
            text: String::new(),
            filters: Filters::default(),
            sort: Some(sort),
            limit,
            cursor,
            offset,
            facets: false,
        }
    }

    #[tokio::test]
    async fn offset_pages_are_slices_of_the_whole_order() {
        let (index, oldest_first, newest_first, _dir) = live_agents().await;
        let all = index
            .search(&ordered(Sort::Oldest, 100, 0, None))
            .await
            .expect("search");
        assert_eq!(ids(&all), oldest_first);
        for (sort, whole) in [(Sort::Oldest, &oldest_first), (Sort::Newest, &newest_first)] {
            for offset in [0, 1, 5, 11, 12, 40] {
                let page = index
                    .search(&ordered(sort, 5, offset, None))
                    .await
                    .expect("search");
                let expected: Vec<String> = whole.iter().skip(offset).take(5).cloned().collect();
                assert_eq!(ids(&page), expected, "{sort:?} offset {offset}");
                assert_eq!(page.total, 12);
                assert_eq!(page.next_cursor.is_some(), offset + 5 < 12, "{offset}");
            }
        }
        let page = index
            .search(&ordered(Sort::Oldest, 5, usize::MAX, None))
            .await
            .expect("search");
        assert!(page.hits.is_empty());
    }

    /// Keyword-only searches without a filter count their matches from document bits and
    /// visit only those that can reach the page: the pages, totals and next-page cursors are
    /// those of visiting every match, with duplicates collapsed or not, on one core or two, and
    /// after changes that show, hide and remove agents.
    #[tokio::test]
    async fn matches_counted_by_documents_page_like_every_match_visited() {
        let (_dir, store) = sqlite_store().await;
        // Every third agent shares a repository with about three others (`shared`):
        // collapsing hides all but one of each.
        let agent = |i: usize, words: &str, shared: bool| {
            let draft = crate::domain::AgentDraft::parse(&serde_json::json!({
                "package_name": format!("com.example.counted{i}"),
                "name": format!("Agent {}", i % 30),
                "description": format!("Forecasts {words} {}for any city.", "weather ".repeat(i % 5)),
                "manifest_url": if shared && i % 3 == 0 {
                    format!("https://github.com/acme/repo{}/blob/main/card.json", (i / 3) % 60)
                } else {
                    format!("https://agent{i}.example.com/card.json")
                },
            }))
            .expect("draft");
            let mut agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
            agent.state = AgentState::Active;
            agent
        };
        let agents: Vec<Agent> = (0..700).map(|i| agent(i, "storms", true)).collect();
        let index = SearchIndex::new(store, None).expect("index");
        index.rebuild_keyword(&agents).await.expect("index");
        // `inline_below`: the document bits are built by a thread of their own (0) or on the
        // spot (`usize::MAX`).
        let compare_both_ways = |step: &'static str, inline_below: usize| {
            let index = &index;
            async move {
                index.text.set_shown_inline_below(inline_below);
                let mut totals = Vec::new();
                for (text, collapse, parallel_from, limit) in [
                    ("weather forecasts", true, u64::MAX, 10),
                    ("weather forecasts", false, 0, 10),
                    ("storms", true, 0, 3),
                    ("storms city", false, u64::MAX, 100),
                    ("weather", true, u64::MAX, 1),
                ] {
                    index.set_parallel_from(parallel_from);
                    let mut pages = Vec::new();
                    for by_documents in [true, false] {
                        index.set_count_by_documents(by_documents);
                        let request = |cursor| SearchRequest {
                            text: text.to_owned(),
                            filters: Filters {
                                collapse_duplicates: collapse,
                                ..Filters::default()
                            },
                            ..ordered(Sort::Relevance, limit, 0, cursor)
                        };
                        // The first search after a change finds the document bits stale,
                        // visits every match and has the bits built off its path; the pages
                        // below count by them.
                        let first = index.search(&request(None)).await.expect("search");
                        let first = (ids(&first), first.total, first.next_cursor.clone());
                        assert!(
                            index
                                .text
                                .wait_for_shown_docs(std::time::Duration::from_secs(60))
                        );
                        let mut served = Vec::new();
                        let mut cursor = None;
                        loop {
                            let page = index.search(&request(cursor)).await.expect("search");
                            served.push((ids(&page), page.total, page.next_cursor.clone()));
                            cursor = page.next_cursor;
                            if cursor.is_none() {
                                break;
                            }
                        }
                        assert_eq!(first, served[0], "{step}: {text:?} before the bits");
                        pages.push(served);
                    }
                    assert_eq!(pages[0], pages[1], "{step}: {text:?} collapse {collapse}");
                    totals.push(pages[0][0].1);
                }
                index.set_count_by_documents(true);
                totals
            }
        };
        let built = compare_both_ways("built", 0).await;
        assert!(built[0] < built[1], "collapsing hides some: {built:?}");
        // Agents leaving their repository's group with the same text: the keyword index is
        // unchanged, the duplicates shown are not.
        let mut moved: Vec<Agent> = Vec::new();
        for i in (0..700).step_by(12) {
            let mut own = agent(i, "storms", false);
            own.id = agents[i].id.clone();
            own.revision = agents[i].revision + 1;
            moved.push(own);
        }
        index.apply_batch(&moved, &[]).await;
        let regrouped = compare_both_ways("regrouped", usize::MAX).await;
        assert_ne!(regrouped[0], built[0], "{regrouped:?}");
        // Unpublished, rewritten, and new agents.
        let mut changed: Vec<Agent> = Vec::new();
        for i in (1..700).step_by(7) {
            let mut gone = agents[i].clone();
            gone.state = AgentState::Stage;
            gone.revision += 2;
            changed.push(gone);
        }
        for i in (4..700).step_by(9) {
            let mut rewritten = agent(i + 1, "storms hail", true);
            rewritten.id = agents[i].id.clone();
            rewritten.revision = agents[i].revision + 2;
            changed.push(rewritten);
        }
        changed.extend((700..760).map(|i| agent(i, "storms", true)));
        index.apply_batch(&changed, &[]).await;
        compare_both_ways("changed", 0).await;
        let deleted: Vec<String> = (1..700).step_by(11).map(|i| agents[i].id.clone()).collect();
        index.apply_batch(&[], &deleted).await;
        compare_both_ways("deleted", usize::MAX).await;
    }

    /// More matches than the page selection's buffer holds, with scores that tie: every page,
    /// by offset and by cursor, is the slice of the order of all matches.
    #[tokio::test]
    async fn pages_cut_from_many_matches_are_slices_of_the_whole_order() {
        let (_dir, store) = sqlite_store().await;
        let mut agents = Vec::new();
        for i in 0..600_i64 {
            let draft = crate::domain::AgentDraft::parse(&serde_json::json!({
                "package_name": format!("com.example.many{i}"),
                "name": format!("Agent {}", i % 40),
                "description": format!("Forecasts {}for any city.", "weather ".repeat(i as usize % 7)),
            }))
            .expect("draft");
            let mut agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
            agent.state = AgentState::Active;
            agent.published_at = Some(crate::timestamp::Timestamp::from_micros(
                1_000_000 * (i % 50),
            ));
            agents.push(agent);
        }
        let index = SearchIndex::new(store, None).expect("index");
        index.rebuild_keyword(&agents).await.expect("index");
        // On one core, and with every keyword search split over two.
        for (text, sort, parallel_from) in [
            ("weather forecasts", Sort::Relevance),
            ("forecasts", Sort::Newest),
            ("", Sort::Name),
            ("", Sort::Oldest),
        ]
        .into_iter()
        .flat_map(|(text, sort)| [(text, sort, u64::MAX), (text, sort, 0)])
        {
            index.set_parallel_from(parallel_from);
            let request = |limit, offset, cursor| SearchRequest {
                text: text.to_owned(),
                ..ordered(sort, limit, offset, cursor)
            };
            let whole: Vec<String> = {
                let catalog = index.read_catalog();
                let everything = Reach {
                    sort,
                    cursor: None,
                    keep: usize::MAX,
                    depth: usize::MAX,
                };
                let mut hits = index
                    .matches(&catalog, &request(7, 0, None), None, &everything)
                    .hits;
                hits.sort_by(|a, b| compare(sort, a, b));
                hits.iter().map(|hit| hit.doc.id.to_string()).collect()
            };
            assert_eq!(whole.len(), 600, "{text:?}");
            for offset in [0, 7, 300, 595, 600] {
                let page = index
                    .search(&request(7, offset, None))
                    .await
                    .expect("search");
                let expected: Vec<String> = whole.iter().skip(offset).take(7).cloned().collect();
                assert_eq!(ids(&page), expected, "{sort:?} {text:?} offset {offset}");
                assert_eq!(page.total, 600);
            }
            let mut served = Vec::new();
            let mut cursor = None;
            loop {
                let page = index.search(&request(7, 0, cursor)).await.expect("search");
                served.extend(ids(&page));
                match page.next_cursor {
                    Some(next) => cursor = Some(next),
                    None => break,
                }
            }
            assert_eq!(served, whole, "{sort:?} {text:?}");
        }
    }

    #[tokio::test]
    async fn oldest_first_pages_by_cursor_like_every_order() {
        let (index, oldest_first, _, _dir) = live_agents().await;
        let mut served = Vec::new();
        let mut cursor = None;
        loop {
            let page = index
                .search(&ordered(Sort::Oldest, 5, 0, cursor))
                .await
                .expect("search");
            served.extend(ids(&page));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(served, oldest_first);
        // A cursor of one order is refused by another.
        let first = index
            .search(&ordered(Sort::Oldest, 5, 0, None))
            .await
            .expect("search");
        let refused = index
            .search(&ordered(Sort::Newest, 5, 0, first.next_cursor))
            .await;
        assert!(matches!(refused, Err(SearchError::InvalidCursor)));
    }

    /// Counts the texts it embeds; every vector is the same unit vector.
    /// A fresh SQLite store in a temporary directory (kept alive by the returned guard).
    async fn sqlite_store() -> (tempfile::TempDir, Arc<dyn Store>) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = crate::store::sqlite::SqliteStore::open_dir(dir.path())
            .await
            .expect("store");
        (dir, Arc::new(store))
    }

    #[tokio::test]
    async fn a_write_that_keeps_the_text_keeps_the_keyword_document() {
        let (_dir, store) = sqlite_store().await;
        let index = SearchIndex::new(store, None).expect("index");
        let mut agent = active("com.example.herds", "Tracks alpaca herds.");
        index.apply(&agent).await;
        let commits = index.text.commits();
        // Verified: the listing changes, the text does not.
        agent.revision += 1;
        agent.verification_level = crate::store::VerificationLevel::DomainVerified;
        index.apply(&agent).await;
        assert_eq!(index.text.commits(), commits);
        let found = |text: &str| SearchRequest {
            text: text.to_owned(),
            filters: Filters::default(),
            sort: None,
            limit: 10,
            cursor: None,
            offset: 0,
            facets: false,
        };
        let page = index.search(&found("alpaca")).await.expect("search");
        assert_eq!(
            page.hits[0].listing.verification_level,
            crate::store::VerificationLevel::DomainVerified
        );
        // A new description is indexed.
        agent.revision += 1;
        agent.draft.description = "Tracks bison herds.".to_owned();
        index.apply(&agent).await;
        assert_eq!(index.text.commits(), commits + 1);
        assert_eq!(
            index.search(&found("alpaca")).await.expect("search").total,
            0
        );
        assert_eq!(
            index.search(&found("bison")).await.expect("search").total,
            1
        );
    }

    /// `count` ACTIVE agents `com.example.{prefix}N` with `description`, written to `store`.
    async fn stored(
        store: &Arc<dyn Store>,
        prefix: &str,
        count: usize,
        description: &str,
    ) -> Vec<Agent> {
        let mut agents = Vec::with_capacity(count);
        for i in 0..count {
            let agent = active(&format!("com.example.{prefix}{i}"), description);
            store.insert_agent(&agent).await.expect("insert");
            agents.push(agent);
        }
        agents
    }

    /// An empty index over `store` that embeds with a `CountingEmbedder`, and that embedder.
    fn counting_index(store: &Arc<dyn Store>) -> (SearchIndex, Arc<CountingEmbedder>) {
        let embedder = Arc::new(CountingEmbedder::default());
        let index = SearchIndex::new(
            Arc::clone(store),
            Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
        )
        .expect("index");
        (index, embedder)
    }

    /// An ACTIVE agent of `alice` with this package name and description.
    fn active(package: &str, description: &str) -> Agent {
        active_draft(serde_json::json!({
            "package_name": package,
            "name": package,
            "description": description,
        }))
    }

    /// An ACTIVE agent of alice's with this draft.
    fn active_draft(draft: serde_json::Value) -> Agent {
        let draft = crate::domain::AgentDraft::parse(&draft).expect("draft");
        let mut agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
        agent.state = AgentState::Active;
        agent
    }

    /// An index of `agents` whose every agent embeds to one vector.
    async fn one_vector_index(store: Arc<dyn Store>, agents: &[Agent]) -> SearchIndex {
        let embedder = Arc::new(CountingEmbedder::default());
        let index =
            SearchIndex::new(store, Some(embedder as Arc<dyn embed::Embedder>)).expect("index");
        index.rebuild(agents).await.expect("index");
        index
    }

    #[derive(Default)]
    struct CountingEmbedder {
        embedded: std::sync::atomic::AtomicUsize,
    }

    #[async_trait::async_trait]
    impl embed::Embedder for CountingEmbedder {
        fn id(&self) -> &str {
            "counting@1"
        }

        fn dim(&self) -> usize {
            2
        }

        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
            self.embedded
                .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
            Ok(texts.iter().map(|_| vec![0.6, 0.8]).collect())
        }
    }

    /// Every page of `request` by cursor: the ids, the total and the first page's counts.
    async fn walk(
        index: &SearchIndex,
        request: &SearchRequest,
    ) -> (Vec<String>, usize, Option<FacetCounts>) {
        let first = index.search(request).await.expect("search");
        let (total, facets) = (first.total, first.facets.clone());
        let mut served = ids(&first);
        let mut cursor = first.next_cursor;
        while let Some(next) = cursor {
            let page = index
                .search(&SearchRequest {
                    cursor: Some(next),
                    ..request.clone()
                })
                .await
                .expect("search");
            assert_eq!(page.total, total);
            served.extend(ids(&page));
            cursor = page.next_cursor;
        }
        (served, total, facets)
    }

    #[tokio::test]
    async fn a_fused_search_split_over_two_cores_serves_the_same_pages_and_counts() {
        let (_dir, store) = sqlite_store().await;
        let mut agents = Vec::new();
        for i in 0..700_i64 {
            let category = ["Weather", "Travel", "Data"][i as usize % 3];
            agents.push(active_draft(serde_json::json!({
                "package_name": format!("com.example.fused{i}"),
                "name": format!("Agent {}", i % 40),
                "description": format!("Forecasts {}for any city.", "weather ".repeat(i as usize % 7)),
                "category": category,
                "tags": [format!("t{}", i % 11)],
            })));
        }
        // One vector for every agent: the hundred nearest are spread through the keyword
        // ranking, most of them deep in it.
        let index = one_vector_index(store, &agents).await;
        for text in ["weather forecasts", "city", "weather"] {
            let request = SearchRequest {
                text: text.to_owned(),
                facets: true,
                ..ordered(Sort::Relevance, 9, 0, None)
            };
            index.set_parallel_from(u64::MAX);
            let one = walk(&index, &request).await;
            index.set_parallel_from(0);
            let two = walk(&index, &request).await;
            assert!(one.0.len() > 100, "{text}");
            assert_eq!(one.0.len(), one.1, "{text}");
            assert_eq!(one, two, "{text}");
        }
    }

    #[tokio::test]
    async fn a_fused_search_whose_two_searches_run_at_once_serves_the_same_pages_and_counts() {
        let (_dir, store) = sqlite_store().await;
        // Enough keyword matches for the scoring to go to a pool thread.
        let agents: Vec<Agent> = (0..5_000_i64)
            .map(|i| {
                let category = ["Weather", "Travel", "Data"][i as usize % 3];
                active_draft(serde_json::json!({
                    "package_name": format!("com.example.beside{i}"),
                    "name": format!("Agent {}", i % 40),
                    "description": format!("Forecasts {}for any city.", "weather ".repeat(i as usize % 7)),
                    "category": category,
                    "tags": [format!("t{}", i % 11)],
                }))
            })
            .collect();
        let one_after_the_other = one_vector_index(Arc::clone(&store), &agents).await;
        let at_once = one_vector_index(store, &agents).await;
        {
            // A store that searches its graph from the first vector: long enough to go beside.
            let mut params = vectors::IndexParams::default();
            params.query.exact_below = 0;
            let mut graph = VectorStore::with_params(2, Some(params));
            let mut catalog = at_once.write_catalog();
            for slot in catalog.slots.values() {
                graph.set(*slot, &[0.6, 0.8]);
            }
            assert!(graph.searches_long());
            catalog.vectors = Some(graph);
        }
        assert!(
            !one_after_the_other
                .read_catalog()
                .vectors
                .as_ref()
                .expect("vectors")
                .searches_long()
        );
        for text in ["weather forecasts", "city", "weather"] {
            let request = SearchRequest {
                text: text.to_owned(),
                facets: true,
                ..ordered(Sort::Relevance, 25, 0, None)
            };
            let first = one_after_the_other.search(&request).await.expect("search");
            let second = at_once.search(&request).await.expect("search");
            assert!(first.total >= 5_000 * 6 / 7, "{text}: {}", first.total);
            assert_eq!(ids(&first), ids(&second), "{text}");
            assert_eq!(first.total, second.total, "{text}");
            assert_eq!(first.facets, second.facets, "{text}");
        }
    }

    #[tokio::test]
    async fn a_starting_index_ranks_by_keywords_until_its_vectors_are_filled() {
        use std::sync::atomic::Ordering::SeqCst;
        let (_dir, store) = sqlite_store().await;
        let agents = stored(&store, "weather", 70, "Forecasts for any city.").await;
        let (index, embedder) = counting_index(&store);

        index.rebuild_keyword(&agents).await.expect("keyword index");
        let loading = index.vector_progress();
        assert!(!loading.ready && !loading.none, "{loading:?}");
        assert_eq!((loading.embedded, loading.total), (0, 70));
        let request = request::from_query_pairs(
            &[("q".to_owned(), "forecasts".to_owned())],
            request::LIST_LIMITS,
        )
        .expect("request");
        let page = index.search(&request).await.expect("search");
        assert_eq!(page.total, 70, "keyword search serves at once");
        assert_eq!(embedder.embedded.load(SeqCst), 0, "no query embedded yet");

        index.fill_vectors().await.expect("vectors");
        let ready = index.vector_progress();
        assert!(ready.ready, "{ready:?}");
        assert_eq!(ready.embedded, 70);
        assert_eq!(embedder.embedded.load(SeqCst), 70, "each agent once");
        index.search(&request).await.expect("search");
        assert_eq!(
            embedder.embedded.load(SeqCst),
            71,
            "the query, now that vectors are in"
        );

        // A restart finds every vector stored: nothing is embedded again.
        let again = Arc::new(CountingEmbedder::default());
        let restarted = SearchIndex::new(
            Arc::clone(&store),
            Some(Arc::clone(&again) as Arc<dyn embed::Embedder>),
        )
        .expect("index");
        restarted.rebuild(&agents).await.expect("rebuild");
        assert_eq!(again.embedded.load(SeqCst), 0);
        assert!(restarted.vector_progress().ready);
    }

    #[tokio::test]
    async fn a_fill_skips_an_agent_whose_text_changed_since_it_was_catalogued() {
        use std::sync::atomic::Ordering::SeqCst;
        let (_dir, store) = sqlite_store().await;
        let agents = stored(&store, "tide", 3, "Tide tables.").await;
        let (index, embedder) = counting_index(&store);
        index.rebuild_keyword(&agents).await.expect("keyword index");
        // Another process rewrites one agent before the vectors are filled: the fill reads
        // the texts from the store and leaves it out rather than embed a text not indexed.
        let mut changed = agents[0].draft.clone();
        changed.description = "Wave heights.".to_owned();
        let updated = store
            .update_agent(
                &agents[0].id,
                &changed,
                None,
                crate::timestamp::Timestamp::now(),
            )
            .await
            .expect("update");
        index.fill_vectors().await.expect("vectors");
        let has_vector = |index: &SearchIndex, slot: u32| {
            let catalog = index.read_catalog();
            catalog
                .vectors
                .as_ref()
                .expect("vectors")
                .get(slot)
                .is_some()
        };
        assert_eq!(embedder.embedded.load(SeqCst), 2);
        assert!(!has_vector(&index, 0));
        // Its newer version, applied as the change log delivers it, is embedded then.
        index.apply(&updated).await;
        assert_eq!(embedder.embedded.load(SeqCst), 3);
        assert!(has_vector(&index, 0));
    }

    /// Embeds "ocean" texts as [1, 0] and the rest as [0, 1]; its first call waits for `gate`.
    #[derive(Default)]
    struct GatedEmbedder {
        gate: tokio::sync::Notify,
        first: std::sync::atomic::AtomicBool,
    }

    #[async_trait::async_trait]
    impl embed::Embedder for GatedEmbedder {
        fn id(&self) -> &str {
            "gated@1"
        }

        fn dim(&self) -> usize {
            2
        }

        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
            if !self.first.swap(true, std::sync::atomic::Ordering::SeqCst) {
                self.gate.notified().await;
            }
            Ok(texts
                .iter()
                .map(|text| {
                    if text.contains("ocean") {
                        vec![1.0, 0.0]
                    } else {
                        vec![0.0, 1.0]
                    }
                })
                .collect())
        }
    }

    #[tokio::test]
    async fn writes_during_the_vector_fill_survive_the_swap_and_searches_go_on() {
        let (_dir, store) = sqlite_store().await;
        let agents = stored(&store, "fill", 10, "Forecasts for any city.").await;
        let embedder = Arc::new(GatedEmbedder::default());
        let index = Arc::new(
            SearchIndex::new(
                Arc::clone(&store),
                Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
            )
            .expect("index"),
        );
        index.rebuild_keyword(&agents).await.expect("keyword index");
        let filling = tokio::spawn({
            let index = Arc::clone(&index);
            async move { index.fill_vectors().await }
        });
        // Let the fill reach the gated embedder.
        while !embedder.first.load(std::sync::atomic::Ordering::SeqCst) {
            tokio::task::yield_now().await;
        }
        // Meanwhile: one agent changes its text, another leaves; searches still answer.
        let changed = store
            .update_agent(
                &agents[0].id,
                &active("com.example.fill0", "Tides of the ocean.").draft,
                None,
                crate::timestamp::Timestamp::now(),
            )
            .await
            .expect("update");
        index.apply(&changed).await;
        index.delete(&agents[1].id).await;
        let request = request::from_query_pairs(
            &[("q".to_owned(), "forecasts".to_owned())],
            request::LIST_LIMITS,
        )
        .expect("request");
        let page = index.search(&request).await.expect("search");
        assert_eq!(page.total, 8, "keyword search serves during the fill");
        embedder.gate.notify_one();
        filling.await.expect("join").expect("fill");
        assert!(index.vector_progress().ready);
        let catalog = index.read_catalog();
        let vectors = catalog.vectors.as_ref().expect("vectors");
        let vector_of = |id: &str| vectors.get(catalog.slots[id]);
        let close = |v: Option<Vec<f32>>, want: [f32; 2]| {
            v.is_some_and(|v| (v[0] - want[0]).abs() < 0.01 && (v[1] - want[1]).abs() < 0.01)
        };
        assert!(
            close(vector_of(&agents[0].id), [1.0, 0.0]),
            "the write's vector, not the fill's"
        );
        assert_eq!(vector_of(&agents[1].id), None, "the deleted agent has none");
        for agent in &agents[2..] {
            assert!(close(vector_of(&agent.id), [0.0, 1.0]));
        }
    }

    #[tokio::test]
    async fn a_restart_restores_the_vector_index_from_its_snapshot() {
        use std::sync::atomic::Ordering::SeqCst;
        let snapshots = tempfile::tempdir().expect("snapshot dir");
        let mut agents: Vec<Agent> = (0..40)
            .map(|i| active(&format!("com.example.snap{i}"), "Forecasts for any city."))
            .collect();
        let open = |agents: Vec<Agent>| async move {
            let (dir, store) = sqlite_store().await;
            for agent in &agents {
                store.insert_agent(agent).await.expect("insert");
            }
            (dir, store)
        };
        // The first run embeds every agent and saves the index.
        let (_first_dir, first_store) = open(agents.clone()).await;
        let embedder = Arc::new(CountingEmbedder::default());
        let first = SearchIndex::new(
            first_store,
            Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
        )
        .expect("index")
        .with_snapshot_dir(snapshots.path());
        first.rebuild(&agents).await.expect("rebuild");
        assert_eq!(embedder.embedded.load(SeqCst), 40);
        let path = first.snapshot_path("counting@1").expect("path");
        assert!(
            path.exists(),
            "a snapshot is saved once the index is complete"
        );

        // A restart over a database that holds no stored vectors at all, with one agent's text
        // changed and one agent gone: only the changed agent is embedded.
        agents[0].draft = active("com.example.snap0", "Tides and currents.").draft;
        agents.remove(1);
        let (_second_dir, second_store) = open(agents.clone()).await;
        let again = Arc::new(CountingEmbedder::default());
        let second = SearchIndex::new(
            second_store,
            Some(Arc::clone(&again) as Arc<dyn embed::Embedder>),
        )
        .expect("index")
        .with_snapshot_dir(snapshots.path());
        second.rebuild(&agents).await.expect("rebuild");
        assert_eq!(again.embedded.load(SeqCst), 1, "only the changed agent");
        let progress = second.vector_progress();
        assert!(progress.ready);
        assert_eq!(progress.embedded, 39);
        {
            let catalog = second.read_catalog();
            let vectors = catalog.vectors.as_ref().expect("vectors");
            assert_eq!(vectors.len(), 39);
            for agent in &agents {
                assert!(
                    vectors.get(catalog.slots[agent.id.as_str()]).is_some(),
                    "{}",
                    agent.id
                );
            }
        }

        // A damaged snapshot is not used: the index is built from scratch.
        std::fs::write(&path, b"damaged").expect("damage");
        let (_third_dir, third_store) = open(agents.clone()).await;
        let third_embedder = Arc::new(CountingEmbedder::default());
        let third = SearchIndex::new(
            third_store,
            Some(Arc::clone(&third_embedder) as Arc<dyn embed::Embedder>),
        )
        .expect("index")
        .with_snapshot_dir(snapshots.path());
        third.rebuild(&agents).await.expect("rebuild");
        assert_eq!(third_embedder.embedded.load(SeqCst), 39);
        assert!(third.vector_progress().ready);
    }

    #[test]
    fn a_saved_vector_goes_to_its_agents_slot_only_while_its_text_is_the_same() {
        let doc =
            |package: &str, description: &str| Arc::new(Doc::of(&active(package, description)).0);
        let (a, b, c) = (
            doc("com.example.a", "Forecasts."),
            doc("com.example.b", "Tides."),
            doc("com.example.c", "Currents."),
        );
        let by_slot = vec![
            Some(Arc::clone(&a)),
            None,
            Some(Arc::clone(&b)),
            Some(Arc::clone(&c)),
        ];
        let mut place = place_saved(&by_slot);
        let key = |doc: &Doc| (doc.id.to_string(), doc.content_hash.hex());
        let (a_id, a_hash) = key(&a);
        let (b_id, b_hash) = key(&b);
        let (c_id, c_hash) = key(&c);
        // Where it was saved.
        assert_eq!(place(0, &a_id, &a_hash), Some(0));
        // Saved elsewhere: found by id, whether the saved slot is empty, another agent's or
        // past the end.
        assert_eq!(place(1, &b_id, &b_hash), Some(2));
        assert_eq!(place(0, &c_id, &c_hash), Some(3));
        assert_eq!(place(9, &b_id, &b_hash), Some(2));
        // Another text, or an agent no longer here: nowhere.
        assert_eq!(place(2, &b_id, &a_hash), None);
        assert_eq!(place(5, &c_id, &b_hash), None);
        assert_eq!(place(3, "agt_gone", &c_hash), None);
    }

    /// Embeds each text as a distinct unit vector in 2-d (by a hash of it).
    struct AngleEmbedder;

    #[async_trait::async_trait]
    impl embed::Embedder for AngleEmbedder {
        fn id(&self) -> &str {
            "angle@1"
        }

        fn dim(&self) -> usize {
            2
        }

        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
            Ok(texts
                .iter()
                .map(|text| {
                    let hash = Sha256::digest(text.as_bytes());
                    let angle = f32::from(u16::from_le_bytes([hash[0], hash[1]])) / 10_000.0;
                    vec![angle.cos(), angle.sin()]
                })
                .collect())
        }
    }

    #[tokio::test]
    async fn a_start_reads_the_stored_vectors_page_by_page_onto_their_agents() {
        use std::sync::atomic::Ordering::SeqCst;
        #[derive(Default)]
        struct Counting(std::sync::atomic::AtomicUsize);

        #[async_trait::async_trait]
        impl embed::Embedder for Counting {
            fn id(&self) -> &str {
                AngleEmbedder.id()
            }

            fn dim(&self) -> usize {
                AngleEmbedder.dim()
            }

            async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
                self.0.fetch_add(texts.len(), SeqCst);
                AngleEmbedder.embed(texts).await
            }
        }

        // More agents than are looked up one by one, over several pages of stored vectors
        // and a last one part full.
        let count = LOOKUPS_ONE_BY_ONE + 3 * STORED_PAGE as usize + 2;
        let (_dir, store) = sqlite_store().await;
        let mut agents: Vec<Agent> = (0..count)
            .map(|i| active(&format!("com.example.paged{i}"), &format!("Forecast {i}.")))
            .collect();
        for agent in &agents {
            store.insert_agent(agent).await.expect("insert");
        }
        let index_of = |agents: Vec<Agent>| {
            let store = Arc::clone(&store);
            async move {
                let embedder = Arc::new(Counting::default());
                let index = SearchIndex::new(
                    store,
                    Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
                )
                .expect("index");
                index.rebuild(&agents).await.expect("rebuild");
                (index, embedder.0.load(SeqCst))
            }
        };
        let (first, embedded) = index_of(agents.clone()).await;
        assert_eq!(embedded, count);
        // The second start finds every vector stored but the one whose text changed.
        agents[3].draft = active("com.example.paged3", "Tides.").draft;
        let (second, embedded) = index_of(agents.clone()).await;
        assert_eq!(embedded, 1, "only the changed agent is embedded");
        let vector = |index: &SearchIndex, id: &str| {
            let catalog = index.read_catalog();
            catalog.vectors.as_ref()?.get(catalog.slots[id])
        };
        for (n, agent) in agents.iter().enumerate() {
            let (before, after) = (vector(&first, &agent.id), vector(&second, &agent.id));
            assert!(after.is_some(), "{n} has a vector");
            assert_eq!(before == after, n != 3, "{n} kept its own vector");
        }
    }

    #[tokio::test]
    async fn a_catalogue_growing_past_the_graph_size_gets_its_graph_built_aside() {
        let (_dir, store) = sqlite_store().await;
        let index =
            SearchIndex::new(Arc::clone(&store), Some(Arc::new(AngleEmbedder))).expect("index");
        index.rebuild_keyword(&[]).await.expect("empty index");
        index.fill_vectors().await.expect("no vectors");
        {
            let mut params = vectors::IndexParams::default();
            params.query.exact_below = 20;
            let mut serving = VectorStore::with_params(2, Some(params));
            serving.defer_graph();
            index.write_catalog().vectors = Some(serving);
        }
        let graph_bytes = |index: &SearchIndex| {
            index
                .read_catalog()
                .vectors
                .as_ref()
                .map_or(0, VectorStore::graph_memory_bytes)
        };
        for i in 0..30 {
            let description = format!("Agent number {i} of a growing catalogue.");
            index
                .apply(&active(&format!("com.example.grow{i}"), &description))
                .await;
            let built = graph_bytes(&index) > 0;
            assert_eq!(built, i >= 19, "after agent {i}");
        }
        let catalog = index.read_catalog();
        let vectors = catalog.vectors.as_ref().expect("vectors");
        assert_eq!(vectors.len(), 30);
        assert!(!vectors.graph_due());
    }

    #[tokio::test]
    async fn facets_count_the_keyword_and_the_vector_matches_once_each() {
        let (_dir, store) = sqlite_store().await;
        let mut agents = Vec::new();
        for (i, (description, category, tags)) in [
            ("Forecasts for any city.", "Weather", vec!["forecast"]),
            ("Forecasts and radar.", "weather", vec!["forecast", "radar"]),
            ("Stock quotes.", "Finance", vec!["stocks"]),
            ("Crypto prices.", "Finance", vec!["crypto"]),
        ]
        .into_iter()
        .enumerate()
        {
            agents.push(active_draft(serde_json::json!({
                "package_name": format!("com.example.agent{i}"),
                "name": format!("Agent {i}"),
                "description": description,
                "category": category,
                "tags": tags,
                "payment": {"model": if i % 2 == 0 { "free" } else { "paid" },
                            "protocols": ["x402"], "rails": ["base:usdc"]},
            })));
        }
        // Every agent embeds to one vector: all of them are matches by meaning.
        let index = one_vector_index(store, &agents).await;
        let search = |pairs: &[(&str, &str)]| {
            let pairs: Vec<(String, String)> = pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect();
            request::from_query_pairs(&pairs, request::LIST_LIMITS).expect("request")
        };
        let map = |entries: &[(&str, usize)]| -> std::collections::BTreeMap<String, usize> {
            entries.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
        };

        let page = index
            .search(&search(&[
                ("q", "forecasts"),
                ("facets", "true"),
                ("limit", "1"),
            ]))
            .await
            .expect("search");
        assert_eq!(
            page.total, 4,
            "two by keyword and vector, two by vector alone"
        );
        let facets = page.facets.expect("facets");
        assert_eq!(facets.category, map(&[("Finance", 2), ("Weather", 2)]));
        assert_eq!(
            facets.tags,
            map(&[("crypto", 1), ("forecast", 2), ("radar", 1), ("stocks", 1)])
        );
        assert_eq!(facets.payment_model, map(&[("free", 2), ("paid", 2)]));
        assert_eq!(
            facets.health,
            map(&[("not_probed", 4)]),
            "none of them lists an endpoint"
        );

        let filtered = index
            .search(&search(&[
                ("q", "forecasts"),
                ("facets", "true"),
                ("payment_model", "paid"),
            ]))
            .await
            .expect("search");
        assert_eq!(filtered.total, 2);
        let facets = filtered.facets.expect("facets");
        assert_eq!(facets.category, map(&[("Finance", 1), ("Weather", 1)]));
        assert_eq!(facets.payment_model, map(&[("paid", 2)]));

        let without = index
            .search(&search(&[("q", "forecasts")]))
            .await
            .expect("search");
        assert!(without.facets.is_none());
    }
}
