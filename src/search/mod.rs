//! The one search function behind every path: query text + filters → ranked, paginated agents.
//!
//! The index holds every ACTIVE agent in memory: its summary, its text in a BM25 index
//! (`text`), and its embedding in a dense matrix (`vectors`); the embedders that make those
//! vectors are a module of their own beside this one (`crate::embed`). A search is a one-way
//! pipeline, a file a stage (docs/search.md); each stage names only the stages before it and
//! the types they all share (`hit`: a scored match, the cursor, the count of matches):
//!
//! 1. `analyse`: what of the query's text the keyword ranking and the embedder read;
//! 2. `retrieve`: the agents that pass the filters (so a top-k with a filter returns k matches
//!    when k exist) and match by keywords or by meaning;
//! 3. `fusion`: the keyword and vector rankings fused by reciprocal rank;
//! 4. `page`: the page cut from the ranked matches, with a keyset cursor that never repeats or
//!    skips an agent. The page pulls what it needs through the stages before it, so a query
//!    enters it once (`SearchIndex::search_with_vector` → `page`).
//!
//! Around them: `catalog` (what the index keeps of each agent), `load` (start-up), `fill`
//! (every agent's vector), `write` (agents changing while it serves), `request` (what a search
//! asks, from each transport). `tests/layers.rs` checks the stages' order.

use std::sync::{Arc, RwLock};

use sha2::{Digest, Sha256};

use crate::store::Store;

pub mod analyse;
mod catalog;
mod codec;
pub mod counts;
pub mod duplicates;
pub mod facets;
mod fill;
pub mod filters;
mod fusion;
mod hit;
mod listing;
mod load;
mod page;
pub mod request;
mod retrieve;
pub mod text;
pub mod vectors;
mod write;

pub use counts::FacetCounts;
pub use filters::{Filters, ListingFilter, McpFilter, RawFilters};
pub use load::{LoadCounts, SHUTDOWN_MERGE_WAIT, STARTUP_MERGE_WAIT};
pub use request::{SearchError, SearchRequest, Sort, clamp_limit};

pub use crate::domain::DEFAULT_VERSION;
pub use listing::{AgentKind, Listing, Strs};
pub use page::{Hit, SearchPage};

/// The text the index embeds for `agent`: for tools and benchmarks that embed as it does.
pub fn embedding_text(agent: &crate::store::Agent) -> String {
    catalog::embedding_text(&catalog::doc_text(agent))
}

use crate::embed::{self, Embedder};
use catalog::{Catalog, Doc};
use fill::serving_store;
use hit::Cursor;
use text::TextIndex;

/// Largest page any path serves.
pub const MAX_LIMIT: usize = 100;

/// Query embeddings kept for repeated queries (a vector of 384 floats is 1.5 KB: 6 MB in all).
pub const QUERY_CACHE: usize = 4096;

/// Query vectors by embedder id and query words.
type QueryVectors = lru::LruCache<(String, String), Vec<f32>>;

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

/// Pseudo-relevance feedback for sentence queries in hybrid ranking: the keyword ranking also
/// matches the `terms` words that best say what the query's `docs` nearest agents by meaning
/// share (`TextIndex::feedback_terms`), the strongest at `weight` against a query word's 1.
/// On by default with a model's vectors ([`Feedback::DEFAULT`]), off with the static table's,
/// whose nearest agents are not good enough to learn words from (docs/search.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Feedback {
    pub docs: usize,
    pub terms: usize,
    pub weight: f32,
}

impl Feedback {
    /// Chosen on the hard set's `dev` split with bge-small (NDCG@10 0.441 → 0.473).
    pub const DEFAULT: Feedback = Feedback {
        docs: 5,
        terms: 8,
        weight: 0.8,
    };
}

/// When a search expands its sentence queries by feedback.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum FeedbackRule {
    /// [`Feedback::DEFAULT`] with an embedder that is not a bag of words (the default).
    #[default]
    ByEmbedder,
    /// Always these settings, or never, whatever the embedder (the quality harness compares
    /// them).
    Fixed(Option<Feedback>),
}

/// The in-memory search index over ACTIVE agents.
pub struct SearchIndex {
    mode: Mode,
    /// The embedder queries and agents are embedded with now; `switch_embedder` replaces it
    /// together with every vector.
    embedder: RwLock<Option<Arc<dyn Embedder>>>,
    /// Serialises the fills of every agent's vectors (`fill_vectors`, `switch_embedder`).
    fills: tokio::sync::Mutex<()>,
    /// What the operator should know about the embedder beyond its id (a model being fetched
    /// or embedded with, or why it is not used), for `/readyz`.
    embedder_note: std::sync::Mutex<Option<String>>,
    /// Recently embedded queries, by embedder id and text (`None`: no cache).
    query_vectors: Option<std::sync::Mutex<QueryVectors>>,
    /// Pseudo-relevance feedback for sentence queries.
    feedback: FeedbackRule,
    /// Which neighbours are matches by meaning, when not as the embedder says (the quality
    /// harness calibrates it): see [`Embedder::min_similarity`].
    similarity_floor: Option<Option<f32>>,
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
            embedder: RwLock::new(embedder),
            fills: tokio::sync::Mutex::new(()),
            embedder_note: std::sync::Mutex::new(None),
            query_vectors: std::num::NonZeroUsize::new(QUERY_CACHE)
                .map(|size| std::sync::Mutex::new(lru::LruCache::new(size))),
            feedback: FeedbackRule::ByEmbedder,
            similarity_floor: None,
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

    /// Embed every query, even one asked a moment ago (benchmarks measure the embedder).
    pub fn without_query_cache(mut self) -> Self {
        self.query_vectors = None;
        self
    }

    /// Expand sentence queries by pseudo-relevance feedback as `rule` says ([`Feedback`]).
    pub fn with_feedback(mut self, rule: FeedbackRule) -> Self {
        self.feedback = rule;
        self
    }

    /// Count as matches by meaning only the neighbours at least `floor` similar (`None`: none,
    /// they only re-rank), whatever the embedder's own rule ([`Embedder::min_similarity`]); the
    /// quality harness calibrates it.
    pub fn with_similarity_floor(mut self, floor: Option<f32>) -> Self {
        self.similarity_floor = Some(floor);
        self
    }

    /// The similarity under which a neighbour is not a match (`None`: no neighbour is).
    fn similarity_floor(&self, embedder: Option<&dyn Embedder>) -> Option<f32> {
        self.similarity_floor.unwrap_or_else(|| {
            embedder.map_or(Some(embed::DEFAULT_MIN_SIMILARITY), |embedder| {
                embedder.min_similarity()
            })
        })
    }

    /// The `k` agents nearest `text` by meaning, most similar first, with their similarity as
    /// the search reads it (whatever the floor): what calibrating the floor measures.
    pub async fn nearest_by_meaning(&self, text: &str, k: usize) -> Vec<(Arc<Listing>, f32)> {
        let request = SearchRequest {
            text: text.to_owned(),
            filters: Filters::default(),
            sort: None,
            limit: k,
            cursor: None,
            offset: 0,
            facets: false,
            viewer: Default::default(),
        };
        let Some(query) = self.query_vector(&request).await else {
            return Vec::new();
        };
        let catalog = self.read_catalog();
        let Some(vectors) = catalog.vectors.as_ref() else {
            return Vec::new();
        };
        let public = &catalog.public;
        vectors
            .nearest_within(&query, k, f32::NEG_INFINITY, None, |slot| {
                public.contains(slot)
            })
            .into_iter()
            .filter_map(|(slot, similarity)| {
                catalog
                    .doc(slot)
                    .map(|doc| (Arc::clone(&doc.listing), similarity))
            })
            .collect()
    }

    /// The feedback a hybrid search expands sentence queries with, if any.
    fn feedback(&self) -> Option<Feedback> {
        match self.feedback {
            FeedbackRule::Fixed(feedback) => feedback,
            FeedbackRule::ByEmbedder => self
                .embedder()
                .filter(|embedder| !embedder.is_bag_of_words())
                .map(|_| Feedback::DEFAULT),
        }
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
            none: self.embedder().is_none(),
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
        self.mode = match (mode, self.embedder().is_some()) {
            (Mode::Vector | Mode::Hybrid, false) => Mode::Keyword,
            (mode, _) => mode,
        };
        self
    }

    /// The embedder in use, when there is one.
    pub fn embedder(&self) -> Option<Arc<dyn Embedder>> {
        self.embedder
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// The embedder's id, when there is one.
    pub fn embedder_id(&self) -> Option<String> {
        self.embedder().map(|e| e.id().to_owned())
    }

    /// What `/readyz` says about the embedder beyond its id (`None`: nothing).
    pub fn embedder_note(&self) -> Option<String> {
        self.embedder_note
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .clone()
    }

    /// Replace that note.
    pub fn set_embedder_note(&self, note: Option<String>) {
        *self
            .embedder_note
            .lock()
            .unwrap_or_else(|poison| poison.into_inner()) = note;
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
        let query_vector = self.query_vector(request).await;
        self.search_with_vector(request, query_vector.as_deref())
    }

    /// Every match of `request` in its order (its cursor, offset and limit ignored): what an
    /// aggregation over the whole matched set reads, with the very cut-off a page has.
    pub async fn all_matches(&self, request: &SearchRequest) -> Vec<Hit> {
        let query_vector = self.query_vector(request).await;
        let catalog = self.read_catalog();
        self.every_match(&catalog, request, query_vector.as_deref())
    }

    /// The query's embedding, when this search ranks by meaning too.
    async fn query_vector(&self, request: &SearchRequest) -> Option<Vec<f32>> {
        let wants_vector = self.mode != Mode::Keyword
            && request.has_text()
            && self
                .vectors_ready
                .load(std::sync::atomic::Ordering::Relaxed);
        match (self.embedder(), wants_vector) {
            (Some(embedder), true) => {
                let text = if embedder.is_bag_of_words() {
                    analyse::content_text(&request.text).into_owned()
                } else {
                    format!("{}{}", embedder.query_instruction(), request.text)
                };
                // The same words in the same order embed the same: spacing aside.
                let key = (
                    embedder.id().to_owned(),
                    text.split_whitespace().collect::<Vec<_>>().join(" "),
                );
                let cached = self.query_vectors.as_ref().and_then(|cache| {
                    let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                    cache.get(&key).cloned()
                });
                if cached.is_some() {
                    return cached;
                }
                match embedder.embed(std::slice::from_ref(&text)).await {
                    Ok(mut vectors) => {
                        let vector = vectors.pop()?;
                        if let Some(cache) = &self.query_vectors {
                            let mut cache = cache.lock().unwrap_or_else(|p| p.into_inner());
                            cache.put(key, vector.clone());
                        }
                        Some(vector)
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "cannot embed query; keyword ranking only");
                        None
                    }
                }
            }
            _ => None,
        }
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
        Ok(self.page(&catalog, request, query_vector, cursor.as_ref()))
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

#[cfg(test)]
mod tests;
