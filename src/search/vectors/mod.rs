//! Nearest neighbours over unit vectors quantised to int8 (one scale per vector), compared by
//! integer dot product: a quarter of the memory of `f32` and a quarter of the bytes read per
//! comparison, at a ranking cost well under the noise of the embedders (see the tests).
//!
//! Two ways to answer `VectorStore::nearest`, behind the same call:
//!
//! - **The exact scan**: every vector, in one dense matrix, in a tight loop (AVX2 where the CPU
//!   has it, two cores for large stores). It answers small stores, selective filters, and is the
//!   reference the tests hold the graph to.
//! - **An HNSW graph** (`hnsw.rs`), kept up to date on every `set` and `clear`, searched once the
//!   store holds `QueryParams::exact_below` distinct vectors. It reads a few thousand vectors
//!   per query instead of all of them, and returns nearly the same neighbours (recall@100
//!   against the exact scan is measured in BENCHMARKS.md and tested below).
//!
//! With a graph, vectors are stored once per distinct value (a *node*); the slots holding that
//! value hang off it in a list. Identical vectors would otherwise crowd each other's links in
//! the graph (each is every other's nearest neighbour) and cut a store of copies into cliques.
//! A vector that changes gets a new node; the old one, once no slot holds it, stays in the graph
//! as a way through until enough such nodes are purged (`hnsw.rs`).

mod hnsw;
pub mod snapshot;

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

pub use hnsw::GraphParams;
use hnsw::{Graph, Located, NONE, Space};

use super::facets::SlotSet;

/// How the graph is built and when it is searched. The defaults were chosen by measurement on
/// the real catalogue's static vectors (BENCHMARKS.md, docs/search.md).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct IndexParams {
    pub graph: GraphParams,
    pub query: QueryParams,
}

/// When and how wide the graph is searched; can change on a built store.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct QueryParams {
    /// Search width of a query: the graph search keeps this many candidates (at least `k`), in a
    /// graph of up to `wider_from` distinct vectors.
    pub ef_search: usize,
    /// Larger graphs search wider, `ef_search · (vectors / wider_from)^0.4`, and hand more
    /// filters to the exact scan, `filtered_exact_below · (vectors / wider_from)^0.6`
    /// (`grown`).
    pub wider_from: usize,
    /// Stores with fewer distinct vectors than this are always scanned exactly, and have no
    /// graph until they reach it.
    pub exact_below: usize,
    /// A filter expected to let fewer slots than this through is answered by an exact scan of
    /// the slots it lets through (in a graph of up to `wider_from` vectors).
    pub filtered_exact_below: usize,
}

impl Default for IndexParams {
    fn default() -> Self {
        Self {
            graph: GraphParams {
                m: 16,
                ef_construction: 150,
                alpha: 1.0,
                keep_pruned: true,
                seed: 0x0005_eed0_fa11_0e15,
            },
            query: QueryParams {
                ef_search: 400,
                wider_from: 100_000,
                exact_below: PARALLEL_ROWS,
                filtered_exact_below: 20_000,
            },
        }
    }
}

static GRAPH_ENABLED: AtomicBool = AtomicBool::new(true);

/// Whether stores made after this call keep a graph (the default) or only ever scan. For
/// benchmarks that compare the two through the whole search.
pub fn set_graph_enabled(enabled: bool) {
    GRAPH_ENABLED.store(enabled, Relaxed);
}

/// Stores with at least this many nodes are scanned on two cores.
const PARALLEL_ROWS: usize = 32_768;

/// A filter's slot set expected to hold at least this many slots is scanned on two cores.
const PARALLEL_SLOTS: usize = 8_192;

/// Slots sampled to guess how many a filter lets through.
const FILTER_SAMPLES: usize = 256;

/// How many slots ahead the scan of a slot set starts loading rows.
const SCAN_AHEAD: usize = 8;

/// The graph is purged of dead nodes once they are this many, or a sixteenth of the live ones.
const PURGE_MIN: usize = 256;
const PURGE_FRACTION: usize = 16;

/// `value` for a graph of up to `from` nodes, `value · (nodes / from)^exponent` beyond.
fn grown(value: usize, nodes: usize, from: usize, exponent: f64) -> usize {
    if nodes <= from || from == 0 {
        return value;
    }
    (value as f64 * (nodes as f64 / from as f64).powf(exponent)).ceil() as usize
}

/// The search width of a graph of `nodes` distinct vectors: `ef` up to `from`, then
/// `ef · (nodes / from)^0.4`. At a fixed width, recall falls as the graph grows (more
/// neighbourhoods as close to the query as the answer's): measured on the bench sets
/// (BENCHMARKS.md), width 400 finds 0.975 of the exact top 100 at 100k vectors but 0.932 at a
/// million, where 1,000 finds 0.971. The exponent joins those two points: 400 at 100k, 1,005
/// at a million.
fn size_width(ef: usize, nodes: usize, from: usize) -> usize {
    grown(ef, nodes, from, 0.4)
}

/// How many accepted slots a filter must be expected to let through for the graph to answer
/// it rather than an exact scan of those slots: `below` up to `from` nodes, then
/// `below · (nodes / from)^0.6`. A filtered walk passes through the refused nodes, so its
/// cost grows as the filter narrows, and more so in a larger graph, while the scan's follows
/// the slots it reads. Measured (BENCHMARKS.md), the two cross at about 25,000 accepted slots
/// at 100k vectors and about 90,000 at a million; the exponent joins 20,000 at 100k with
/// 80,000 at a million.
fn scan_threshold(below: usize, nodes: usize, from: usize) -> usize {
    grown(below, nodes, from, 0.6)
}

/// The search width at which a filtered graph search finds about as much of its exact answer
/// as an unfiltered search at `ef` finds of its own, when the filter is expected to let
/// `accepted` of the `live` slots through. The width counts accepted nodes only, and the walk
/// passes through the refused ones too, so a filter widens the walk: measured on the 100k
/// bench set (BENCHMARKS.md), recall@100 at 400 is 0.975 unfiltered, and the same or better at
/// 300 when half the agents pass, at 230 when a quarter and at 175 when an eighth do, which
/// `ef · share^0.4` gives. Never below half of `ef`: narrower filters were not measured through
/// the graph (at 100k, fewer than `filtered_exact_below` accepted agents are scanned exactly),
/// and in what was measured, recall at a given width only rose as the filter narrowed.
fn filtered_width(ef: usize, accepted: usize, live: usize) -> usize {
    if live == 0 || accepted >= live {
        return ef;
    }
    let share = accepted as f64 / live as f64;
    (ef as f64 * share.powf(0.4).max(0.5)).ceil() as usize
}

/// Unit vectors by slot, int8-quantised, each distinct vector stored once.
pub struct VectorStore {
    dim: usize,
    params: IndexParams,
    /// Whether the store builds a graph once it is large enough.
    graph_wanted: bool,
    /// Leave the graph's one-off build to the owner (`graph_due`, `build_graph`) instead of
    /// doing it inside the `set` that reaches the size: a serving index builds it off its lock.
    graph_deferred: bool,
    /// By node, `dim` codes each.
    codes: Vec<i8>,
    /// By node: the factor that turns codes back into the vector.
    scales: Vec<f32>,
    /// By node: the first slot holding its vector; `NONE` for a dead or free node.
    heads: Vec<u32>,
    /// Nodes that hold nothing and are in no graph, for reuse.
    free: Vec<u32>,
    live_nodes: usize,
    /// By slot: its node, `NONE` without a vector.
    slot_nodes: Vec<u32>,
    /// By slot: the next slot holding the same vector.
    next_slot: Vec<u32>,
    live_slots: usize,
    /// Built once the store holds `exact_below` distinct vectors, then kept.
    graph: Option<Graph>,
}

/// A vector as int8 codes and the factor that scales them back.
struct Quantised {
    codes: Vec<i8>,
    scale: f32,
}

fn quantise(vector: &[f32]) -> Quantised {
    let max = vector.iter().fold(0.0f32, |max, x| max.max(x.abs()));
    let scale = if max > 0.0 && max.is_finite() {
        max / 127.0
    } else {
        1.0
    };
    let codes = vector
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    Quantised { codes, scale }
}

/// A query ready for a kernel: its codes, and for AVX2 the same codes laid out for the kernel
/// the row length allows (`Avx2Bytes` for multiples of 32, `Avx2` for other multiples of 16).
struct Prepared {
    codes: Vec<i8>,
    /// By sixteen codes: widened to 16 bits.
    #[cfg(target_arch = "x86_64")]
    wide: Vec<[i16; 16]>,
    /// By thirty-two codes: their magnitudes, and the codes themselves (for their signs).
    #[cfg(target_arch = "x86_64")]
    magnitudes: Vec<[u8; 32]>,
    #[cfg(target_arch = "x86_64")]
    signs: Vec<[i8; 32]>,
    scale: f32,
}

fn prepare(quantised: Quantised) -> Prepared {
    #[cfg(target_arch = "x86_64")]
    let (wide, magnitudes, signs) = if quantised.codes.len().is_multiple_of(32) {
        let signs: Vec<[i8; 32]> = arrays::<32>(&quantised.codes).copied().collect();
        let magnitudes = signs
            .iter()
            .map(|chunk| chunk.map(i8::unsigned_abs))
            .collect();
        (Vec::new(), magnitudes, signs)
    } else {
        let wide = arrays::<16>(&quantised.codes)
            .map(|chunk| chunk.map(i16::from))
            .collect();
        (wide, Vec::new(), Vec::new())
    };
    Prepared {
        #[cfg(target_arch = "x86_64")]
        wide,
        #[cfg(target_arch = "x86_64")]
        magnitudes,
        #[cfg(target_arch = "x86_64")]
        signs,
        codes: quantised.codes,
        scale: quantised.scale,
    }
}

/// The best `k` of `found`, most similar first; ties go to the lower slot.
/// The `k` most similar of any number of offered slots, without keeping them all: a buffer
/// of a few k is cut to the best k whenever it fills, and the k-th similarity becomes the bar
/// that most offers fail on one comparison.
struct Best {
    k: usize,
    budget: usize,
    bar: f32,
    found: Vec<(u32, f32)>,
}

impl Best {
    fn new(k: usize, min_similarity: f32) -> Self {
        let budget = k.saturating_mul(4).max(64);
        Self {
            k,
            budget,
            bar: min_similarity,
            found: Vec::with_capacity(budget + 1),
        }
    }

    /// Whether a slot this similar can be among the best.
    #[inline(always)]
    fn admits(&self, similarity: f32) -> bool {
        similarity >= self.bar
    }

    #[inline(always)]
    fn push(&mut self, slot: u32, similarity: f32) {
        self.found.push((slot, similarity));
    }

    /// Cut the buffer back to the best k if it is full.
    #[inline(always)]
    fn settle(&mut self) {
        if self.found.len() > self.budget {
            self.found = best(std::mem::take(&mut self.found), self.k);
            self.bar = self
                .found
                .last()
                .map_or(self.bar, |(_, similarity)| *similarity);
        }
    }

    fn finish(self) -> Vec<(u32, f32)> {
        best(self.found, self.k)
    }
}

fn best(mut found: Vec<(u32, f32)>, k: usize) -> Vec<(u32, f32)> {
    let by_similarity = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if found.len() > k {
        found.select_nth_unstable_by(k - 1, by_similarity);
        found.truncate(k);
    }
    found.sort_unstable_by(by_similarity);
    found
}

impl VectorStore {
    /// An empty store with the default index (or none, after `set_graph_enabled(false)`).
    pub fn new(dim: usize) -> Self {
        let graph = GRAPH_ENABLED.load(Relaxed);
        Self::with_params(dim, graph.then(IndexParams::default))
    }

    /// An empty store whose graph is built with `params` once the store is large enough, or
    /// with none (exact scans only).
    pub fn with_params(dim: usize, params: Option<IndexParams>) -> Self {
        let mut store = Self {
            dim,
            params: params.unwrap_or_default(),
            graph_wanted: params.is_some(),
            graph_deferred: false,
            codes: Vec::new(),
            scales: Vec::new(),
            heads: Vec::new(),
            free: Vec::new(),
            live_nodes: 0,
            slot_nodes: Vec::new(),
            next_slot: Vec::new(),
            live_slots: 0,
            graph: None,
        };
        store.build_graph_when_due();
        store
    }

    /// An empty store of the same dimension and index parameters.
    pub fn empty_like(&self) -> Self {
        Self::with_params(self.dim, self.graph_wanted.then_some(self.params))
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    pub fn query_params(&self) -> QueryParams {
        self.params.query
    }

    /// Change when and how wide the graph is searched.
    pub fn set_query_params(&mut self, query: QueryParams) {
        self.params.query = query;
        self.build_graph_when_due();
    }

    /// Build the graph over every stored vector once the store has grown to `exact_below`
    /// distinct vectors (a one-off: from then on `set` and `clear` keep it up to date).
    /// Identical vectors, separate nodes until now, are merged.
    fn build_graph_when_due(&mut self) {
        if !self.graph_deferred {
            self.build_graph();
        }
    }

    /// Leave the graph's one-off build to the caller (see `graph_deferred`).
    pub fn defer_graph(&mut self) {
        self.graph_deferred = true;
    }

    /// Whether the store has grown to the size that wants a graph and has none yet.
    pub fn graph_due(&self) -> bool {
        self.graph_wanted
            && self.graph.is_none()
            && self.live_nodes >= self.params.query.exact_below
    }

    /// A copy of a store that has no graph yet, to build one on (a store with a graph is not
    /// copied: its graph is kept up to date in place).
    pub fn copy_without_graph(&self) -> Option<Self> {
        self.graph.is_none().then(|| Self {
            dim: self.dim,
            params: self.params,
            graph_wanted: self.graph_wanted,
            graph_deferred: self.graph_deferred,
            codes: self.codes.clone(),
            scales: self.scales.clone(),
            heads: self.heads.clone(),
            free: self.free.clone(),
            live_nodes: self.live_nodes,
            slot_nodes: self.slot_nodes.clone(),
            next_slot: self.next_slot.clone(),
            live_slots: self.live_slots,
            graph: None,
        })
    }

    /// Build the graph now if it is due, deferred or not.
    pub fn build_graph(&mut self) {
        if !self.graph_due() {
            return;
        }
        self.graph = Some(Graph::new(self.params.graph));
        for node in 0..self.heads.len() as u32 {
            if self.heads[node as usize] == NONE {
                continue;
            }
            let query = prepare(Quantised {
                codes: self.row(node).to_vec(),
                scale: self.scales[node as usize],
            });
            let located = self.locate(&query);
            match self.twin(&located, &query) {
                Some(twin) => self.merge(node, twin),
                None => {
                    self.edit(Edit::Link {
                        node,
                        located: &located,
                    });
                }
            }
        }
    }

    /// Move every slot of `from` to `into`, which holds the same vector, and free `from`.
    fn merge(&mut self, from: u32, into: u32) {
        let mut slot = std::mem::replace(&mut self.heads[from as usize], NONE);
        while slot != NONE {
            let next = self.next_slot[slot as usize];
            self.slot_nodes[slot as usize] = into;
            self.next_slot[slot as usize] = self.heads[into as usize];
            self.heads[into as usize] = slot;
            slot = next;
        }
        self.live_nodes -= 1;
        self.free.push(from);
    }

    /// Slots holding a vector.
    pub fn len(&self) -> usize {
        self.live_slots
    }

    pub fn is_empty(&self) -> bool {
        self.live_slots == 0
    }

    /// Distinct vectors held.
    pub fn distinct(&self) -> usize {
        self.live_nodes
    }

    fn row(&self, node: u32) -> &[i8] {
        let start = node as usize * self.dim;
        &self.codes[start..start + self.dim]
    }

    fn view(&self) -> View<'_> {
        View {
            dim: self.dim,
            codes: &self.codes,
            scales: &self.scales,
            heads: &self.heads,
        }
    }

    /// Store `vector` at `slot`; a vector of the wrong dimension is dropped. A store made with
    /// dimension 0 (an embedder that learns its dimension from its first answer) adopts the
    /// dimension of the first vector.
    pub fn set(&mut self, slot: u32, vector: &[f32]) {
        if self.dim == 0 && !vector.is_empty() {
            self.dim = vector.len();
        }
        if vector.len() != self.dim {
            self.clear(slot);
            return;
        }
        let quantised = quantise(vector);
        let index = slot as usize;
        if self.slot_nodes.len() <= index {
            self.slot_nodes.resize(index + 1, NONE);
            self.next_slot.resize(index + 1, NONE);
        }
        let current = self.slot_nodes[index];
        if current != NONE
            && self.scales[current as usize] == quantised.scale
            && self.row(current) == quantised.codes.as_slice()
        {
            return;
        }
        self.clear(slot);
        if self.graph.is_some() {
            self.insert(prepare(quantised), slot);
        } else {
            let node = self.alloc(&quantised.codes, quantised.scale);
            self.attach(slot, node);
            self.build_graph_when_due();
        }
    }

    /// Give `slot` the node holding `query`'s vector: an identical live node the graph finds, or
    /// a new node linked into the graph.
    fn insert(&mut self, query: Prepared, slot: u32) {
        let located = self.locate(&query);
        if let Some(twin) = self.twin(&located, &query) {
            self.attach(slot, twin);
            return;
        }
        let node = self.alloc(&query.codes, query.scale);
        self.attach(slot, node);
        self.edit(Edit::Link {
            node,
            located: &located,
        });
    }

    /// Where the graph would put `query`, at a level drawn for it.
    fn locate(&mut self, query: &Prepared) -> Located {
        let Some(graph) = self.graph.as_mut() else {
            return Located::default();
        };
        let level = graph.draw_level();
        let graph: &Graph = graph;
        dispatch(
            self.dim,
            Locate {
                graph,
                view: View {
                    dim: self.dim,
                    codes: &self.codes,
                    scales: &self.scales,
                    heads: &self.heads,
                },
                query,
                level,
            },
        )
    }

    /// The live node `located` found that holds exactly `query`'s vector, if any.
    fn twin(&self, located: &Located, query: &Prepared) -> Option<u32> {
        let best = located.best()?;
        (self.scales[best.node as usize] == query.scale
            && self.row(best.node) == query.codes.as_slice())
        .then_some(best.node)
    }

    /// A node holding `codes`, from the free list or new; it holds no slot yet.
    fn alloc(&mut self, codes: &[i8], scale: f32) -> u32 {
        let node = match self.free.pop() {
            Some(node) => node,
            None => {
                self.heads.push(NONE);
                self.scales.push(0.0);
                self.codes.resize(self.codes.len() + self.dim, 0);
                (self.heads.len() - 1) as u32
            }
        };
        let start = node as usize * self.dim;
        self.codes[start..start + self.dim].copy_from_slice(codes);
        self.scales[node as usize] = scale;
        node
    }

    fn attach(&mut self, slot: u32, node: u32) {
        let head = &mut self.heads[node as usize];
        if *head == NONE {
            self.live_nodes += 1;
        }
        self.next_slot[slot as usize] = *head;
        *head = slot;
        self.slot_nodes[slot as usize] = node;
        self.live_slots += 1;
    }

    fn edit(&mut self, edit: Edit<'_>) -> Vec<u32> {
        let Some(graph) = self.graph.as_mut() else {
            return Vec::new();
        };
        dispatch(
            self.dim,
            EditGraph {
                graph,
                view: View {
                    dim: self.dim,
                    codes: &self.codes,
                    scales: &self.scales,
                    heads: &self.heads,
                },
                edit,
            },
        )
    }

    pub fn clear(&mut self, slot: u32) {
        let index = slot as usize;
        let Some(&node) = self.slot_nodes.get(index) else {
            return;
        };
        if node == NONE {
            return;
        }
        self.slot_nodes[index] = NONE;
        self.live_slots -= 1;
        let next = std::mem::replace(&mut self.next_slot[index], NONE);
        if self.heads[node as usize] == slot {
            self.heads[node as usize] = next;
        } else {
            let mut at = self.heads[node as usize];
            while self.next_slot[at as usize] != slot {
                at = self.next_slot[at as usize];
            }
            self.next_slot[at as usize] = next;
        }
        if self.heads[node as usize] != NONE {
            return;
        }
        self.live_nodes -= 1;
        match &self.graph {
            Some(graph) if graph.contains(node) => {
                self.edit(Edit::Bury(node));
                let dead = self.graph.as_ref().map_or(0, Graph::dead);
                // With no live node left the graph could not link a new one to anything.
                if dead >= PURGE_MIN.max(self.live_nodes / PURGE_FRACTION) || self.live_nodes == 0 {
                    let freed = self.edit(Edit::Purge);
                    self.free.extend(freed);
                }
            }
            _ => self.free.push(node),
        }
    }

    /// The stored (dequantised) vector of `slot`.
    pub fn get(&self, slot: u32) -> Option<Vec<f32>> {
        let node = *self.slot_nodes.get(slot as usize)?;
        if node == NONE {
            return None;
        }
        let scale = self.scales[node as usize];
        Some(
            self.row(node)
                .iter()
                .map(|c| f32::from(*c) * scale)
                .collect(),
        )
    }

    /// The `k` stored vectors most similar to `query` (cosine, since vectors are unit length)
    /// among the slots `accept`ed, at least `min_similarity` similar, most similar first; ties
    /// go to the lower slot. Approximate once the store is large (see the module docs); a
    /// filtered search still returns `k` slots whenever `k` pass the filter and the threshold.
    pub fn nearest(
        &self,
        query: &[f32],
        k: usize,
        min_similarity: f32,
        accept: impl Fn(u32) -> bool + Sync,
    ) -> Vec<(u32, f32)> {
        self.nearest_within(query, k, min_similarity, None, accept)
    }

    /// `nearest`, where `accept` lets through only slots of `within` (a filter's slots, when
    /// known): a filter that leaves few of them is then answered by scanning their vectors
    /// alone rather than asking it about every vector of the store.
    pub fn nearest_within(
        &self,
        query: &[f32],
        k: usize,
        min_similarity: f32,
        within: Option<&SlotSet>,
        accept: impl Fn(u32) -> bool + Sync,
    ) -> Vec<(u32, f32)> {
        if query.len() != self.dim || self.dim == 0 || k == 0 {
            return Vec::new();
        }
        let query = prepare(quantise(query));
        let (mut selective, mut expected) = (false, 0);
        if let Some(graph) = &self.graph
            && self.live_nodes >= self.params.query.exact_below
        {
            expected = self.expected_accepted(&accept);
            let query_params = &self.params.query;
            let scan_below = scan_threshold(
                query_params.filtered_exact_below,
                self.live_nodes,
                query_params.wider_from,
            );
            if expected >= scan_below {
                let ef = size_width(
                    query_params.ef_search,
                    self.live_nodes,
                    query_params.wider_from,
                );
                let ef = filtered_width(ef, expected, self.live_slots).max(k);
                if let Some(found) =
                    self.nearest_in_graph(graph, &query, k, ef, min_similarity, &accept)
                {
                    return found;
                }
            }
            selective = expected.saturating_mul(2) < self.live_slots;
        }
        match within {
            Some(within) if selective => self.scan_within(
                &query,
                k,
                min_similarity,
                within,
                &accept,
                expected >= PARALLEL_SLOTS,
            ),
            _ => self.scan_all(&query, k, min_similarity, &accept, selective),
        }
    }

    /// Whether a search takes long enough to be worth a core of its own beside other work:
    /// from the size at which it walks the graph, or scans on both cores.
    pub fn searches_long(&self) -> bool {
        self.live_nodes >= self.params.query.exact_below.min(PARALLEL_ROWS)
    }

    /// `nearest` by an exact scan of every vector, whatever the size of the store: the
    /// reference the graph is measured against.
    pub fn nearest_exact(
        &self,
        query: &[f32],
        k: usize,
        min_similarity: f32,
        accept: impl Fn(u32) -> bool + Sync,
    ) -> Vec<(u32, f32)> {
        if query.len() != self.dim || self.dim == 0 || k == 0 {
            return Vec::new();
        }
        self.scan_all(&prepare(quantise(query)), k, min_similarity, &accept, false)
    }

    /// `nearest` through the graph alone, whatever the size of the store, with search width
    /// `ef`; an empty answer without a graph. For measuring the graph.
    pub fn nearest_approximate(
        &self,
        query: &[f32],
        k: usize,
        ef: usize,
        min_similarity: f32,
        accept: impl Fn(u32) -> bool + Sync,
    ) -> Vec<(u32, f32)> {
        let (Some(graph), true) = (&self.graph, query.len() == self.dim && k > 0) else {
            return Vec::new();
        };
        let query = prepare(quantise(query));
        self.nearest_in_graph(graph, &query, k, ef.max(k), min_similarity, &accept)
            .unwrap_or_default()
    }

    /// How many live slots `accept` lets through, judged from an even sample of the slots.
    fn expected_accepted(&self, accept: &impl Fn(u32) -> bool) -> usize {
        let slots = self.slot_nodes.len();
        let samples = slots.min(FILTER_SAMPLES);
        let (mut live, mut passed) = (0usize, 0usize);
        for i in 0..samples {
            let slot = i * slots / samples;
            if self.slot_nodes[slot] != NONE {
                live += 1;
                passed += usize::from(accept(slot as u32));
            }
        }
        if live == 0 {
            return 0;
        }
        passed * self.live_slots / live
    }

    /// Whether `accept` lets through any slot of the list starting at `slot`.
    fn any_accepted(&self, mut slot: u32, accept: &impl Fn(u32) -> bool) -> bool {
        while slot != NONE {
            if accept(slot) {
                return true;
            }
            slot = self.next_slot[slot as usize];
        }
        false
    }

    /// The graph's answer, or `None` when the graph ran out of nodes before finding `k`
    /// accepted slots (some may be unreachable from its entry point: the caller scans).
    fn nearest_in_graph(
        &self,
        graph: &Graph,
        query: &Prepared,
        k: usize,
        ef: usize,
        min_similarity: f32,
        accept: &impl Fn(u32) -> bool,
    ) -> Option<Vec<(u32, f32)>> {
        let accept_node = |node: u32| self.any_accepted(self.heads[node as usize], accept);
        let found = dispatch(
            self.dim,
            SearchGraph {
                graph,
                view: self.view(),
                query,
                ef,
                accept: &accept_node,
            },
        );
        let mut hits = Vec::with_capacity(found.nodes.len());
        let mut accepted = 0usize;
        for scored in &found.nodes {
            let mut slot = self.heads[scored.node as usize];
            while slot != NONE {
                if accept(slot) {
                    accepted += 1;
                    if scored.sim >= min_similarity {
                        hits.push((slot, scored.sim));
                    }
                }
                slot = self.next_slot[slot as usize];
            }
        }
        (accepted >= k).then(|| best(hits, k))
    }

    /// The exact scan of the slots of `within` that `accept` lets through; on two cores, half
    /// of the set each, when `parallel` (many slots, each read from anywhere in the store).
    fn scan_within(
        &self,
        query: &Prepared,
        k: usize,
        min_similarity: f32,
        within: &SlotSet,
        accept: &(impl Fn(u32) -> bool + Sync),
        parallel: bool,
    ) -> Vec<(u32, f32)> {
        let scan = |words: Range<usize>| {
            dispatch(
                self.dim,
                ScanSlots {
                    store: self,
                    query,
                    slots: within,
                    words,
                    k,
                    min_similarity,
                    accept,
                },
            )
        };
        if !parallel {
            return scan(0..usize::MAX);
        }
        let [first, second] = within.halves();
        let (mut found, rest) = rayon::join(|| scan(first), || scan(second));
        found.extend(rest);
        best(found, k)
    }

    /// The exact scan over every node, split over two cores for large stores. `selective`:
    /// the filter is expected to refuse most slots, so ask it before computing a similarity.
    fn scan_all(
        &self,
        query: &Prepared,
        k: usize,
        min_similarity: f32,
        accept: &(impl Fn(u32) -> bool + Sync),
        selective: bool,
    ) -> Vec<(u32, f32)> {
        let scan = |nodes: Range<usize>| {
            dispatch(
                self.dim,
                Scan {
                    store: self,
                    query,
                    nodes,
                    k,
                    min_similarity,
                    accept,
                    selective,
                },
            )
        };
        let rows = self.heads.len();
        if rows < PARALLEL_ROWS {
            return scan(0..rows);
        }
        // A large store streams more bytes than one core can read quickly: scan its halves on
        // two cores (rayon's pool, sized to the machine) and keep the best of both.
        let middle = rows / 2;
        let (mut found, second) = rayon::join(|| scan(0..middle), || scan(middle..rows));
        found.extend(second);
        best(found, k)
    }

    /// The exact scan of the nodes in `nodes` with one kernel.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn scan<K: Kernel>(
        &self,
        kernel: K,
        query: &Prepared,
        nodes: Range<usize>,
        k: usize,
        min_similarity: f32,
        accept: &impl Fn(u32) -> bool,
        selective: bool,
    ) -> Vec<(u32, f32)> {
        let mut best = Best::new(k, min_similarity);
        let codes = &self.codes[nodes.start * self.dim..nodes.end * self.dim];
        for (row, (scale, head)) in codes.chunks_exact(self.dim).zip(
            self.scales[nodes.clone()]
                .iter()
                .zip(&self.heads[nodes.clone()]),
        ) {
            if *head == NONE || (selective && !self.any_accepted(*head, accept)) {
                continue;
            }
            let similarity = kernel.dot(row, query) as f32 * scale * query.scale;
            if !best.admits(similarity) {
                continue;
            }
            let mut slot = *head;
            while slot != NONE {
                if accept(slot) {
                    best.push(slot, similarity);
                }
                slot = self.next_slot[slot as usize];
            }
            best.settle();
        }
        best.finish()
    }

    /// The exact scan of the vectors of the `slots` (those of the part `words` of the set)
    /// that `accept` lets through.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn scan_slots<K: Kernel>(
        &self,
        kernel: K,
        query: &Prepared,
        slots: &SlotSet,
        words: Range<usize>,
        k: usize,
        min_similarity: f32,
        accept: &impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        let rows = Rows {
            view: self.view(),
            kernel,
        };
        let mut best = Best::new(k, min_similarity);
        // The slots' rows lie anywhere in the store, so each read would wait on memory: a
        // second walk of the set runs ahead and starts loading the rows to come.
        let node_of = |slot: u32| self.slot_nodes.get(slot as usize).copied().unwrap_or(NONE);
        let mut ahead = slots.iter_part(words.clone());
        for slot in ahead.by_ref().take(SCAN_AHEAD) {
            let node = node_of(slot);
            if node != NONE {
                rows.prefetch(node);
            }
        }
        for slot in slots.iter_part(words) {
            if let Some(node) = ahead.next().map(node_of).filter(|node| *node != NONE) {
                rows.prefetch(node);
            }
            let node = node_of(slot);
            if node == NONE || !accept(slot) {
                continue;
            }
            let similarity = rows.sim(node, query);
            if best.admits(similarity) {
                best.push(slot, similarity);
                best.settle();
            }
        }
        best.finish()
    }

    /// Bytes held, for memory reports.
    pub fn memory_bytes(&self) -> usize {
        self.codes.capacity()
            + (self.scales.capacity()
                + self.heads.capacity()
                + self.free.capacity()
                + self.slot_nodes.capacity()
                + self.next_slot.capacity())
                * 4
            + self.graph.as_ref().map_or(0, Graph::memory_bytes)
    }

    /// Bytes held by the graph alone.
    pub fn graph_memory_bytes(&self) -> usize {
        self.graph.as_ref().map_or(0, Graph::memory_bytes)
    }
}

/// The store's vectors as the graph sees them.
#[derive(Clone, Copy)]
struct View<'a> {
    dim: usize,
    codes: &'a [i8],
    scales: &'a [f32],
    heads: &'a [u32],
}

/// A `View` with the kernel that computes its dot products.
struct Rows<'a, K> {
    view: View<'a>,
    kernel: K,
}

impl<K: Kernel> Rows<'_, K> {
    #[inline(always)]
    fn row(&self, node: u32) -> &[i8] {
        let start = node as usize * self.view.dim;
        &self.view.codes[start..start + self.view.dim]
    }
}

impl<K: Kernel> Space for Rows<'_, K> {
    type Query = Prepared;

    #[inline(always)]
    fn sim(&self, node: u32, query: &Prepared) -> f32 {
        self.kernel.dot(self.row(node), query) as f32
            * self.view.scales[node as usize]
            * query.scale
    }

    #[inline(always)]
    fn sim_nodes(&self, a: u32, b: u32) -> f32 {
        self.kernel.dot_rows(self.row(a), self.row(b)) as f32
            * self.view.scales[a as usize]
            * self.view.scales[b as usize]
    }

    #[inline(always)]
    fn prefetch(&self, node: u32) {
        self.kernel.prefetch(self.row(node));
    }

    #[inline(always)]
    fn live(&self, node: u32) -> bool {
        self.view.heads[node as usize] != NONE
    }
}

/// An integer dot product: the portable loop, or AVX2.
trait Kernel: Copy {
    /// `row` · the query.
    fn dot(self, row: &[i8], query: &Prepared) -> i32;
    /// `a` · `b`.
    fn dot_rows(self, a: &[i8], b: &[i8]) -> i32;
    /// Start loading `row` into the cache.
    fn prefetch(self, row: &[i8]);
}

#[derive(Clone, Copy)]
struct Portable;

impl Kernel for Portable {
    #[inline(always)]
    fn dot(self, row: &[i8], query: &Prepared) -> i32 {
        dot_i8(row, &query.codes)
    }

    #[inline(always)]
    fn dot_rows(self, a: &[i8], b: &[i8]) -> i32 {
        dot_i8(a, b)
    }

    #[inline(always)]
    fn prefetch(self, _row: &[i8]) {}
}

/// AVX2, which most x86-64 servers have (detected at run time by `pulp`, whose feature tokens
/// make the intrinsics safe to call): each sixteen codes of a row are widened to 16 bits and
/// multiplied and pair-summed with the pre-widened query in one instruction, four times fewer
/// than the compiler's own vectorisation of `dot_i8` issues.
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Avx2(pulp::x86::V3);

#[cfg(target_arch = "x86_64")]
impl Kernel for Avx2 {
    #[inline(always)]
    fn dot(self, row: &[i8], query: &Prepared) -> i32 {
        dot_avx2(self.0, row, &query.wide)
    }

    #[inline(always)]
    fn dot_rows(self, a: &[i8], b: &[i8]) -> i32 {
        dot_avx2_rows(self.0, a, b)
    }

    #[inline(always)]
    fn prefetch(self, row: &[i8]) {
        use std::arch::x86_64::_MM_HINT_T0;
        for line in row.chunks(64) {
            self.0.sse._mm_prefetch::<_MM_HINT_T0>(line.as_ptr());
        }
    }
}

/// AVX2 for rows whose length is a multiple of 32: thirty-two codes per step, multiplied as
/// bytes. `maddubs` multiplies unsigned by signed bytes and adds pairs into 16 bits, so the
/// query's magnitudes take the unsigned side and its signs are moved onto the row's codes
/// (`sign`). Codes stay within ±127, so a pair sums to at most 2 · 127 · 127 = 32,258 and
/// never saturates: the result is exactly `dot_i8`'s. Against `Avx2` it reads the row in
/// half the loads and widens nothing (the exact scan of 10,000 vectors: 178 → 125 µs).
#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy)]
struct Avx2Bytes(pulp::x86::V3);

#[cfg(target_arch = "x86_64")]
impl Kernel for Avx2Bytes {
    #[inline(always)]
    fn dot(self, row: &[i8], query: &Prepared) -> i32 {
        dot_avx2_bytes(self.0, row, &query.magnitudes, &query.signs)
    }

    #[inline(always)]
    fn dot_rows(self, a: &[i8], b: &[i8]) -> i32 {
        dot_avx2_bytes_rows(self.0, a, b)
    }

    #[inline(always)]
    fn prefetch(self, row: &[i8]) {
        Avx2(self.0).prefetch(row);
    }
}

/// Work that computes dot products, run with the best kernel of the CPU.
trait Task {
    type Output;
    fn run<K: Kernel>(self, kernel: K) -> Self::Output;
}

/// Run `task` with AVX2 when the CPU has it and rows split into sixteens, else portably. Under
/// AVX2 the task runs inside a function compiled for it (`pulp`'s `vectorize`), so everything
/// it inlines uses the wide instructions.
fn dispatch<T: Task>(dim: usize, task: T) -> T::Output {
    #[cfg(target_arch = "x86_64")]
    if let (0, Some(v3)) = (dim % 16, pulp::x86::V3::try_new()) {
        let bytes = dim.is_multiple_of(32);
        return v3.vectorize(OnAvx2 { v3, bytes, task });
    }
    task.run(Portable)
}

#[cfg(target_arch = "x86_64")]
struct OnAvx2<T> {
    v3: pulp::x86::V3,
    /// Rows split into thirty-twos: `Avx2Bytes`.
    bytes: bool,
    task: T,
}

#[cfg(target_arch = "x86_64")]
impl<T: Task> pulp::NullaryFnOnce for OnAvx2<T> {
    type Output = T::Output;

    #[inline(always)]
    fn call(self) -> T::Output {
        if self.bytes {
            self.task.run(Avx2Bytes(self.v3))
        } else {
            self.task.run(Avx2(self.v3))
        }
    }
}

/// One exact scan.
struct Scan<'a, F> {
    store: &'a VectorStore,
    query: &'a Prepared,
    nodes: Range<usize>,
    k: usize,
    min_similarity: f32,
    accept: &'a F,
    selective: bool,
}

impl<F: Fn(u32) -> bool> Task for Scan<'_, F> {
    type Output = Vec<(u32, f32)>;

    #[inline(always)]
    fn run<K: Kernel>(self, kernel: K) -> Self::Output {
        self.store.scan(
            kernel,
            self.query,
            self.nodes,
            self.k,
            self.min_similarity,
            self.accept,
            self.selective,
        )
    }
}

/// One exact scan of some slots' vectors.
struct ScanSlots<'a, F> {
    store: &'a VectorStore,
    query: &'a Prepared,
    slots: &'a SlotSet,
    words: Range<usize>,
    k: usize,
    min_similarity: f32,
    accept: &'a F,
}

impl<F: Fn(u32) -> bool> Task for ScanSlots<'_, F> {
    type Output = Vec<(u32, f32)>;

    #[inline(always)]
    fn run<K: Kernel>(self, kernel: K) -> Self::Output {
        self.store.scan_slots(
            kernel,
            self.query,
            self.slots,
            self.words,
            self.k,
            self.min_similarity,
            self.accept,
        )
    }
}

/// One graph search.
struct SearchGraph<'a, F> {
    graph: &'a Graph,
    view: View<'a>,
    query: &'a Prepared,
    ef: usize,
    accept: &'a F,
}

impl<F: Fn(u32) -> bool> Task for SearchGraph<'_, F> {
    type Output = hnsw::Found;

    #[inline(always)]
    fn run<K: Kernel>(self, kernel: K) -> Self::Output {
        let rows = Rows {
            view: self.view,
            kernel,
        };
        self.graph.search(&rows, self.query, self.ef, self.accept)
    }
}

/// The search for a new vector's place in the graph.
struct Locate<'a> {
    graph: &'a Graph,
    view: View<'a>,
    query: &'a Prepared,
    level: u8,
}

impl Task for Locate<'_> {
    type Output = Located;

    #[inline(always)]
    fn run<K: Kernel>(self, kernel: K) -> Located {
        let rows = Rows {
            view: self.view,
            kernel,
        };
        self.graph.locate(&rows, self.query, self.level)
    }
}

/// A change to the graph.
enum Edit<'a> {
    /// Link a new node where it was located.
    Link { node: u32, located: &'a Located },
    /// A node has lost its last slot.
    Bury(u32),
    /// Take the dead nodes out; they are returned.
    Purge,
}

struct EditGraph<'a> {
    graph: &'a mut Graph,
    view: View<'a>,
    edit: Edit<'a>,
}

impl Task for EditGraph<'_> {
    type Output = Vec<u32>;

    #[inline(always)]
    fn run<K: Kernel>(self, kernel: K) -> Vec<u32> {
        let rows = Rows {
            view: self.view,
            kernel,
        };
        match self.edit {
            Edit::Link { node, located } => {
                self.graph.link(&rows, node, located);
                Vec::new()
            }
            Edit::Bury(node) => {
                self.graph.bury(&rows, node);
                Vec::new()
            }
            Edit::Purge => self.graph.purge(&rows),
        }
    }
}

/// `dot_i8` for rows whose length is a multiple of 16, against a query widened to 16 bits.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dot_avx2(v3: pulp::x86::V3, row: &[i8], query: &[[i16; 16]]) -> i32 {
    use pulp::bytemuck::cast;
    use std::arch::x86_64::__m256i;
    let mut sum: __m256i = v3.avx._mm256_setzero_si256();
    for (codes, wide_query) in arrays::<16>(row).zip(query) {
        let wide_row = v3.avx2._mm256_cvtepi8_epi16(cast(*codes));
        let products = v3.avx2._mm256_madd_epi16(wide_row, cast(*wide_query));
        sum = v3.avx2._mm256_add_epi32(sum, products);
    }
    sum_lanes(v3, sum)
}

/// `dot_i8` for rows whose length is a multiple of 32, against a query's magnitudes and signs
/// (see `Avx2Bytes`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dot_avx2_bytes(
    v3: pulp::x86::V3,
    row: &[i8],
    magnitudes: &[[u8; 32]],
    signs: &[[i8; 32]],
) -> i32 {
    use pulp::bytemuck::cast;
    use std::arch::x86_64::__m256i;
    let mut sum: __m256i = v3.avx._mm256_setzero_si256();
    for ((codes, magnitude), sign) in arrays::<32>(row).zip(magnitudes).zip(signs) {
        let signed = v3.avx2._mm256_sign_epi8(cast(*codes), cast(*sign));
        sum = add_byte_products(v3, sum, cast(*magnitude), signed);
    }
    sum_lanes(v3, sum)
}

/// `dot_i8` of two rows whose length is a multiple of 32, the first row's magnitudes and
/// signs taken on the fly (see `Avx2Bytes`).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dot_avx2_bytes_rows(v3: pulp::x86::V3, a: &[i8], b: &[i8]) -> i32 {
    use pulp::bytemuck::cast;
    use std::arch::x86_64::__m256i;
    let mut sum: __m256i = v3.avx._mm256_setzero_si256();
    for (x, y) in arrays::<32>(a).zip(arrays::<32>(b)) {
        let x: __m256i = cast(*x);
        let signed = v3.avx2._mm256_sign_epi8(cast(*y), x);
        sum = add_byte_products(v3, sum, v3.avx2._mm256_abs_epi8(x), signed);
    }
    sum_lanes(v3, sum)
}

/// `sum` plus the products of 32 unsigned `magnitudes` and 32 signed `codes`, summed in fours
/// into its eight 32-bit lanes (`maddubs` pairs them into 16 bits, `madd` by ones the pairs).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn add_byte_products(
    v3: pulp::x86::V3,
    sum: std::arch::x86_64::__m256i,
    magnitudes: std::arch::x86_64::__m256i,
    codes: std::arch::x86_64::__m256i,
) -> std::arch::x86_64::__m256i {
    let pairs = v3.avx2._mm256_maddubs_epi16(magnitudes, codes);
    let ones = v3.avx._mm256_set1_epi16(1);
    v3.avx2
        ._mm256_add_epi32(sum, v3.avx2._mm256_madd_epi16(pairs, ones))
}

/// The sum of a vector's eight 32-bit lanes, in registers.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn sum_lanes(v3: pulp::x86::V3, sum: std::arch::x86_64::__m256i) -> i32 {
    let low = v3.avx._mm256_castsi256_si128(sum);
    let high = v3.avx2._mm256_extracti128_si256::<1>(sum);
    let four = v3.sse2._mm_add_epi32(low, high);
    let two = v3
        .sse2
        ._mm_add_epi32(four, v3.sse2._mm_unpackhi_epi64(four, four));
    let one = v3
        .sse2
        ._mm_add_epi32(two, v3.sse2._mm_shuffle_epi32::<0b01>(two));
    v3.sse2._mm_cvtsi128_si32(one)
}

/// `dot_i8` of two rows whose length is a multiple of 16: both widened on the fly.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dot_avx2_rows(v3: pulp::x86::V3, a: &[i8], b: &[i8]) -> i32 {
    use pulp::bytemuck::cast;
    use std::arch::x86_64::__m256i;
    let mut sum: __m256i = v3.avx._mm256_setzero_si256();
    for (x, y) in arrays::<16>(a).zip(arrays::<16>(b)) {
        let wide_x = v3.avx2._mm256_cvtepi8_epi16(cast(*x));
        let wide_y = v3.avx2._mm256_cvtepi8_epi16(cast(*y));
        sum = v3
            .avx2
            ._mm256_add_epi32(sum, v3.avx2._mm256_madd_epi16(wide_x, wide_y));
    }
    sum_lanes(v3, sum)
}

/// The whole `N`-code chunks of `codes`, as arrays.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn arrays<const N: usize>(codes: &[i8]) -> impl Iterator<Item = &[i8; N]> {
    codes.chunks_exact(N).filter_map(<[i8]>::first_chunk::<N>)
}

/// Integer dot product, portable: the compiler vectorises it for the baseline instruction set.
#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::dot;

    fn unit(values: &[f32]) -> Vec<f32> {
        let norm = dot(values, values).sqrt();
        values.iter().map(|x| x / norm).collect()
    }

    /// A deterministic pseudo-random unit vector.
    fn pseudo_random(seed: u32, dim: usize) -> Vec<f32> {
        let values: Vec<f32> = (0..dim)
            .map(|i| ((seed as f32 * 12.9898 + i as f32 * 78.233).sin() * 43_758.547).fract())
            .collect();
        unit(&values)
    }

    #[test]
    fn integer_dot_matches_the_naive_sum_for_any_length() {
        for len in [0, 1, 15, 16, 17, 33, 384] {
            let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as u8 as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| ((i * 11) % 255) as u8 as i8).collect();
            let naive: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot_i8(&a, &b), naive, "len {len}");
        }
    }

    #[test]
    fn quantised_similarities_stay_within_a_hundredth_of_exact_ones() {
        let dim = 256;
        let mut store = VectorStore::new(dim);
        let vectors: Vec<Vec<f32>> = (0..200).map(|i| pseudo_random(i, dim)).collect();
        for (slot, vector) in vectors.iter().enumerate() {
            store.set(slot as u32, vector);
        }
        let query = pseudo_random(999, dim);
        for (slot, similarity) in store.nearest(&query, 200, -1.0, |_| true) {
            let exact = dot(&vectors[slot as usize], &query);
            assert!((similarity - exact).abs() < 0.01, "{similarity} vs {exact}");
        }
    }

    #[test]
    fn the_avx2_dot_product_equals_the_portable_one() {
        #[cfg(target_arch = "x86_64")]
        if let Some(v3) = pulp::x86::V3::try_new() {
            for len in [16, 32, 256, 384] {
                let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as u8 as i8).collect();
                let b: Vec<i8> = (0..len).map(|i| ((i * 11 + 3) % 255) as u8 as i8).collect();
                let wide: Vec<[i16; 16]> =
                    arrays::<16>(&b).map(|chunk| chunk.map(i16::from)).collect();
                let extreme = vec![-127i8; len];
                let wide_extreme = vec![[-127i16; 16]; len / 16];
                assert_eq!(dot_avx2(v3, &a, &wide), dot_i8(&a, &b), "len {len}");
                assert_eq!(dot_avx2_rows(v3, &a, &b), dot_i8(&a, &b), "len {len}");
                assert_eq!(
                    dot_avx2(v3, &extreme, &wide_extreme),
                    dot_i8(&extreme, &extreme)
                );
            }
        }
    }

    #[test]
    fn the_byte_kernel_equals_the_portable_one_to_the_extremes() {
        #[cfg(target_arch = "x86_64")]
        if let Some(v3) = pulp::x86::V3::try_new() {
            // Codes span -127..=127 (quantising never makes -128); the extremes make every
            // pair sum 2 · 127 · 127, the most `maddubs` must hold without saturating.
            let spread = |len: usize, step: usize, shift: usize| -> Vec<i8> {
                (0..len)
                    .map(|i| ((i * step + shift) % 255) as i32 - 127)
                    .map(|code| code as i8)
                    .collect()
            };
            for len in [32, 64, 256, 384] {
                let cases = [
                    (spread(len, 37, 0), spread(len, 11, 3)),
                    (vec![-127; len], vec![-127; len]),
                    (vec![127; len], vec![-127; len]),
                    (vec![-127; len], vec![127; len]),
                    (spread(len, 1, 0), vec![0; len]),
                ];
                for (a, b) in cases {
                    let query = prepare(Quantised {
                        codes: b.clone(),
                        scale: 1.0,
                    });
                    let exact = dot_i8(&a, &b);
                    assert_eq!(
                        dot_avx2_bytes(v3, &a, &query.magnitudes, &query.signs),
                        exact,
                        "len {len}"
                    );
                    assert_eq!(dot_avx2_bytes_rows(v3, &a, &b), exact, "len {len}");
                    assert_eq!(dot_avx2_bytes_rows(v3, &b, &a), exact, "len {len}");
                }
            }
        }
    }

    #[test]
    fn a_large_store_scanned_in_halves_finds_what_one_portable_scan_finds() {
        let dim = 32;
        let rows = PARALLEL_ROWS + 1_000;
        let mut store = VectorStore::with_params(dim, None);
        for slot in 0..rows {
            store.set(slot as u32, &pseudo_random(slot as u32, dim));
        }
        store.clear(7);
        let query = pseudo_random(123_456, dim);
        let accept = |slot: u32| !slot.is_multiple_of(3);
        let halves = store.nearest(&query, 50, -1.0, accept);
        let prepared = prepare(quantise(&query));
        let portable = store.scan(Portable, &prepared, 0..rows, 50, -1.0, &accept, false);
        let selective = store.scan(Portable, &prepared, 0..rows, 50, -1.0, &accept, true);
        assert_eq!(selective, portable);
        assert_eq!(halves.len(), 50);
        assert_eq!(halves, portable);
    }

    #[test]
    fn nearest_ranks_by_similarity_and_keeps_the_best_k() {
        let mut store = VectorStore::new(2);
        store.set(0, &unit(&[1.0, 0.0]));
        store.set(1, &unit(&[0.0, 1.0]));
        store.set(2, &unit(&[0.8, 0.6]));
        store.set(3, &unit(&[0.6, 0.8]));
        let slots = |found: Vec<(u32, f32)>| found.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
        assert_eq!(
            slots(store.nearest(&[1.0, 0.0], 4, -1.0, |_| true)),
            [0, 2, 3, 1]
        );
        assert_eq!(slots(store.nearest(&[1.0, 0.0], 2, -1.0, |_| true)), [0, 2]);
        assert_eq!(
            slots(store.nearest(&[1.0, 0.0], 4, 0.5, |_| true)),
            [0, 2, 3]
        );
    }

    #[test]
    fn a_store_without_a_dimension_adopts_the_first_vectors() {
        let mut store = VectorStore::new(0);
        store.set(1, &[0.0, 1.0, 0.0]);
        assert_eq!(store.dim(), 3);
        store.set(2, &[1.0]);
        assert_eq!(store.get(2), None);
        let found = store.nearest(&[0.0, 1.0, 0.0], 10, 0.0, |_| true);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, 1);
        assert!((found[0].1 - 1.0).abs() < 1e-6);
    }

    #[test]
    fn nearest_skips_cleared_rejected_and_missing_slots() {
        let mut store = VectorStore::new(2);
        store.set(0, &[1.0, 0.0]);
        store.set(2, &[0.0, 1.0]);
        store.set(3, &[0.6, 0.8]);
        store.clear(2);
        store.set(4, &[1.0]);
        let found = store.nearest(&[1.0, 0.0], 10, -1.0, |slot| slot != 3);
        assert_eq!(found.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [0]);
        let kept = store.get(3).expect("slot 3");
        assert!((kept[0] - 0.6).abs() < 0.01 && (kept[1] - 0.8).abs() < 0.01);
        assert_eq!(store.get(4), None);
        assert!(store.nearest(&[1.0], 10, -1.0, |_| true).is_empty());
    }

    /// A deterministic generator for the graph tests.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// Roughly normal: the sum of four uniforms, centred.
        fn normal(&mut self) -> f32 {
            (0..4)
                .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32)
                .sum::<f32>()
                - 2.0
        }
    }

    /// `count` unit vectors in `clusters` clusters around a shared direction, the way text
    /// embeddings crowd: every pair is somewhat similar, neighbours within a cluster more so.
    fn clustered(count: usize, clusters: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
        let mut rng = Rng(seed);
        let shared: Vec<f32> = (0..dim).map(|_| rng.normal()).collect();
        let centres: Vec<Vec<f32>> = (0..clusters)
            .map(|_| {
                let centre: Vec<f32> = (0..dim).map(|_| rng.normal()).collect();
                unit(
                    &centre
                        .iter()
                        .zip(&shared)
                        .map(|(c, s)| c + 0.8 * s)
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        (0..count)
            .map(|i| {
                let centre = &centres[i % clusters];
                let point: Vec<f32> = centre.iter().map(|c| c + 0.12 * rng.normal()).collect();
                unit(&point)
            })
            .collect()
    }

    /// Parameters for small graphs: the graph always searched, at a width the tests can afford
    /// unoptimised.
    fn graph_params(ef_search: usize) -> IndexParams {
        IndexParams {
            graph: GraphParams {
                m: 8,
                ef_construction: 64,
                alpha: 1.0,
                keep_pruned: true,
                seed: 7,
            },
            query: QueryParams {
                ef_search,
                wider_from: usize::MAX,
                exact_below: 0,
                filtered_exact_below: 0,
            },
        }
    }

    fn store_of(vectors: &[Vec<f32>], params: Option<IndexParams>) -> VectorStore {
        let mut store = VectorStore::with_params(vectors[0].len(), params);
        for (slot, vector) in vectors.iter().enumerate() {
            store.set(slot as u32, vector);
        }
        store
    }

    /// The share of the exact answer's similarities the approximate answer reaches: results
    /// as similar as the exact k-th count, so that ties between equal vectors do not matter.
    fn recall(approximate: &[(u32, f32)], exact: &[(u32, f32)]) -> f64 {
        let Some(&(_, kth)) = exact.last() else {
            return 1.0;
        };
        let reached = approximate.iter().filter(|(_, sim)| *sim >= kth).count();
        reached.min(exact.len()) as f64 / exact.len() as f64
    }

    fn mean_recall(
        store: &VectorStore,
        queries: &[Vec<f32>],
        k: usize,
        accept: impl Fn(u32) -> bool + Sync + Copy,
    ) -> f64 {
        let total: f64 = queries
            .iter()
            .map(|query| {
                let exact = store.nearest_exact(query, k, -1.0, accept);
                let found = store.nearest(query, k, -1.0, accept);
                assert_eq!(
                    found.len(),
                    exact.len(),
                    "as many results as the exact scan"
                );
                recall(&found, &exact)
            })
            .sum();
        total / queries.len() as f64
    }

    #[test]
    fn a_narrow_filter_with_its_slots_is_answered_by_scanning_only_those() {
        let vectors = clustered(600, 12, 24, 11);
        let mut params = graph_params(64);
        params.query.filtered_exact_below = 200;
        let mut store = store_of(&vectors, Some(params));
        store.clear(10);
        // Twins share one vector: both slots count.
        store.set(700, &vectors[20]);
        let mut within = SlotSet::default();
        for slot in (0..600).step_by(7).chain([10, 700, 900]) {
            within.insert(slot);
        }
        let accept = |slot: u32| within.contains(slot) && slot % 5 != 1;
        for seed in 0..5 {
            let query = &vectors[seed * 97];
            let exact = store.nearest_exact(query, 30, -1.0, accept);
            assert_eq!(
                store.nearest_within(query, 30, -1.0, Some(&within), accept),
                exact
            );
            assert_eq!(store.nearest(query, 30, -1.0, accept), exact);
            assert!(exact.iter().all(|(slot, _)| accept(*slot) && *slot != 10));
            // On one core or two (half of the set each), the same answer.
            let prepared = prepare(quantise(query));
            for parallel in [false, true] {
                let scanned = store.scan_within(&prepared, 30, -1.0, &within, &accept, parallel);
                assert_eq!(scanned, exact, "parallel: {parallel}");
            }
        }
        let slots: Vec<u32> = store
            .nearest_within(&vectors[20], 2, 0.99, Some(&within), accept)
            .iter()
            .map(|(slot, _)| *slot)
            .collect();
        assert_eq!(slots, [700]);
    }

    #[test]
    fn the_graph_finds_what_the_exact_scan_finds_on_clustered_vectors() {
        let dim = 32;
        let vectors = clustered(2_000, 40, dim, 1);
        let queries = clustered(30, 40, dim, 2);
        let store = store_of(&vectors, Some(graph_params(200)));
        assert_eq!(store.distinct(), 2_000);
        let recall_100 = mean_recall(&store, &queries, 100, |_| true);
        let recall_10 = mean_recall(&store, &queries, 10, |_| true);
        assert!(recall_100 >= 0.97, "recall@100 {recall_100}");
        assert!(recall_10 >= 0.97, "recall@10 {recall_10}");
        // Filters that let half and a quarter through search narrower, and find as much.
        for every in [2, 4] {
            let recall = mean_recall(&store, &queries, 100, move |slot| slot % every == 0);
            assert!(recall >= 0.97, "1/{every}: recall@100 {recall}");
        }
    }

    #[test]
    fn a_graph_past_the_reference_size_finds_more_of_the_exact_answer() {
        let vectors = clustered(4_000, 80, 32, 3);
        let queries = clustered(40, 80, 32, 4);
        let mut store = store_of(&vectors, Some(graph_params(100)));
        let narrow = mean_recall(&store, &queries, 100, |_| true);
        // 4,000 vectors against 400: width 100 · 10^0.4 = 252.
        store.set_query_params(QueryParams {
            wider_from: 400,
            ..store.query_params()
        });
        let wide = mean_recall(&store, &queries, 100, |_| true);
        assert!(wide >= narrow + 0.01 && wide >= 0.97, "{narrow} → {wide}");
    }

    #[test]
    fn a_graph_past_the_reference_size_scans_more_filters() {
        assert_eq!(scan_threshold(20_000, 100_000, 100_000), 20_000);
        // 20,000 · 10^0.6 = 79,621.4.
        assert_eq!(scan_threshold(20_000, 1_000_000, 100_000), 79_622);
        assert_eq!(scan_threshold(20_000, 1_000_000, usize::MAX), 20_000);
        // Through `nearest`: 1,600 vectors against a reference of 400, so a filter expected
        // to let 300 through (under 200 · 4^0.6 = 460) is scanned, and finds the exact answer
        // where the narrow graph walk of width 50 (graph_params) would not.
        let vectors = clustered(1_600, 40, 32, 5);
        let mut params = graph_params(50);
        params.query.filtered_exact_below = 200;
        let mut store = store_of(&vectors, Some(params));
        let accept = |slot: u32| slot % 16 < 3;
        let queries = clustered(20, 40, 32, 6);
        let graph_recall = mean_recall(&store, &queries, 100, accept);
        store.set_query_params(QueryParams {
            wider_from: 400,
            ..store.query_params()
        });
        for query in &queries {
            assert_eq!(
                store.nearest(query, 100, -1.0, accept),
                store.nearest_exact(query, 100, -1.0, accept)
            );
        }
        assert!(
            graph_recall < 1.0,
            "the graph alone misses some: {graph_recall}"
        );
    }

    #[test]
    fn a_graph_past_the_reference_size_searches_wider() {
        assert_eq!(size_width(400, 0, 100_000), 400);
        assert_eq!(size_width(400, 100_000, 100_000), 400);
        // 400 · 2^0.4 = 527.8, 400 · 10^0.4 = 1,004.8.
        assert_eq!(size_width(400, 200_000, 100_000), 528);
        assert_eq!(size_width(400, 1_000_000, 100_000), 1_005);
        assert_eq!(size_width(400, 1_000_000, usize::MAX), 400);
        assert_eq!(size_width(400, 1_000_000, 0), 400);
    }

    #[test]
    fn a_filter_narrows_the_search_width_by_its_share_to_half_at_most() {
        assert_eq!(filtered_width(400, 1_000, 1_000), 400);
        assert_eq!(filtered_width(400, 0, 0), 400);
        // 400 · 0.5^0.4 = 303.1, 400 · 0.25^0.4 = 229.7.
        assert_eq!(filtered_width(400, 500, 1_000), 304);
        assert_eq!(filtered_width(400, 250, 1_000), 230);
        assert_eq!(filtered_width(400, 10, 1_000), 200);
        assert_eq!(filtered_width(400, 0, 1_000), 200);
    }

    #[test]
    fn construction_is_deterministic() {
        let vectors = clustered(300, 10, 16, 3);
        let a = store_of(&vectors, Some(graph_params(50)));
        let b = store_of(&vectors, Some(graph_params(50)));
        let (ga, gb) = (
            a.graph.as_ref().expect("graph"),
            b.graph.as_ref().expect("graph"),
        );
        for node in 0..300 {
            assert_eq!(ga.links0(node), gb.links0(node), "node {node}");
        }
        let query = &clustered(1, 10, 16, 4)[0];
        assert_eq!(
            a.nearest(query, 20, -1.0, |_| true),
            b.nearest(query, 20, -1.0, |_| true)
        );
    }

    #[test]
    fn deleted_slots_leave_the_answers_and_reinserted_ones_return() {
        let dim = 16;
        let vectors = clustered(1_200, 20, dim, 5);
        let queries = clustered(20, 20, dim, 6);
        let mut store = store_of(&vectors, Some(graph_params(100)));
        // Delete two slots in three: enough to purge the dead nodes on the way.
        for slot in (0..1_200u32).filter(|slot| slot % 3 != 0) {
            store.clear(slot);
        }
        assert_eq!(store.len(), 400);
        let graph = store.graph.as_ref().expect("graph");
        assert!(graph.dead() < 400, "purged: {} dead", graph.dead());
        for query in &queries {
            let found = store.nearest(query, 50, -1.0, |_| true);
            assert_eq!(found.len(), 50);
            assert!(found.iter().all(|(slot, _)| slot % 3 == 0), "{found:?}");
        }
        assert!(mean_recall(&store, &queries, 50, |_| true) >= 0.97);
        // Back in, some with their old vector, some moved to another one.
        for slot in (0..1_200u32).filter(|slot| slot % 3 != 0) {
            let vector = if slot % 2 == 0 {
                &vectors[slot as usize]
            } else {
                &vectors[(slot as usize + 7) % 1_200]
            };
            store.set(slot, vector);
        }
        assert_eq!(store.len(), 1_200);
        assert!(mean_recall(&store, &queries, 100, |_| true) >= 0.97);
        // Nodes freed by the purge were reused rather than the store growing past what it
        // held at its fullest plus the moved vectors.
        assert!(
            store.heads.len() <= 1_200 + 400,
            "{} nodes",
            store.heads.len()
        );
    }

    #[test]
    fn a_moved_vector_is_found_where_it_now_is() {
        let vectors = clustered(500, 10, 16, 8);
        let mut store = store_of(&vectors, Some(graph_params(50)));
        let target = clustered(1, 10, 16, 9).remove(0);
        store.set(42, &target);
        let found = store.nearest(&target, 1, -1.0, |_| true);
        assert_eq!(found[0].0, 42);
        assert!(found[0].1 > 0.99);
        let old = store.nearest(&vectors[42], 500, -1.0, |_| true);
        let (_, sim) = old.iter().find(|(slot, _)| *slot == 42).expect("slot 42");
        assert!(*sim < 0.99, "slot 42 moved away from its old vector");
    }

    #[test]
    fn a_filtered_search_returns_k_matches_whenever_k_exist() {
        let dim = 16;
        let vectors = clustered(1_500, 15, dim, 10);
        let queries = clustered(10, 15, dim, 11);
        let store = store_of(&vectors, Some(graph_params(60)));
        // A filter far from every query's neighbourhood: one cluster in fifteen.
        let one_cluster = |slot: u32| slot % 15 == 7;
        // And five slots in all.
        let five = |slot: u32| [3, 400, 777, 1_001, 1_499].contains(&slot);
        for query in &queries {
            let found = store.nearest(query, 5, -1.0, one_cluster);
            assert_eq!(found.len(), 5);
            assert!(found.iter().all(|(slot, _)| one_cluster(*slot)));
            let found = store.nearest(query, 5, -1.0, five);
            assert_eq!(found.len(), 5);
            assert_eq!(found, store.nearest_exact(query, 5, -1.0, five));
            assert_eq!(store.nearest(query, 10, -1.0, five).len(), 5);
        }
        assert!(mean_recall(&store, &queries, 20, one_cluster) >= 0.97);
        // With the default thresholds a filter this selective goes to the exact scan.
        let mut exact_for_filters = graph_params(60);
        exact_for_filters.query.filtered_exact_below = 500;
        let store = store_of(&vectors, Some(exact_for_filters));
        assert!(store.expected_accepted(&one_cluster) < 500);
        for query in &queries {
            assert_eq!(
                store.nearest(query, 20, -1.0, one_cluster),
                store.nearest_exact(query, 20, -1.0, one_cluster)
            );
        }
    }

    #[test]
    fn tiny_stores_answer_like_the_exact_scan() {
        let vectors = clustered(6, 2, 16, 12);
        let query = clustered(1, 2, 16, 13).remove(0);
        for count in 0..=6 {
            let mut store = VectorStore::with_params(16, Some(graph_params(10)));
            for (slot, vector) in vectors.iter().take(count).enumerate() {
                store.set(slot as u32 * 3, vector);
            }
            for k in [1, 3, 10] {
                assert_eq!(
                    store.nearest(&query, k, -1.0, |_| true),
                    store.nearest_exact(&query, k, -1.0, |_| true),
                    "{count} vectors, k {k}"
                );
            }
            for slot in 0..count as u32 {
                store.clear(slot * 3);
            }
            assert!(store.is_empty());
            assert!(store.nearest(&query, 3, -1.0, |_| true).is_empty());
        }
    }

    #[test]
    fn identical_vectors_share_a_node_and_are_all_found() {
        let dim = 16;
        let mut vectors = clustered(400, 8, dim, 14);
        // Every vector three times more, like a catalogue of copies.
        let originals = vectors.clone();
        for _ in 0..3 {
            vectors.extend(originals.iter().cloned());
        }
        let mut store = store_of(&vectors, Some(graph_params(100)));
        assert_eq!(store.len(), 1_600);
        assert_eq!(store.distinct(), 400);
        let query = &originals[17];
        let found = store.nearest(query, 4, -1.0, |_| true);
        assert_eq!(
            found.iter().map(|(slot, _)| *slot).collect::<Vec<_>>(),
            [17, 417, 817, 1_217]
        );
        assert_eq!(store.nearest(query, 100, -1.0, |_| true).len(), 100);
        assert!(mean_recall(&store, &clustered(10, 8, dim, 15), 100, |_| true) >= 0.97);
        // The node lives while one of its slots does.
        for slot in [17, 417, 817] {
            store.clear(slot);
        }
        assert_eq!(store.nearest(query, 1, -1.0, |_| true)[0].0, 1_217);
        assert_eq!(store.distinct(), 400);
        store.clear(1_217);
        assert_eq!(store.distinct(), 399);
        assert!(
            store
                .nearest(query, 10, -1.0, |_| true)
                .iter()
                .all(|(slot, _)| slot % 400 != 17)
        );
    }

    #[test]
    fn a_store_without_a_dimension_builds_its_graph_from_the_first_vector() {
        let vectors = clustered(200, 4, 16, 16);
        let mut store = VectorStore::with_params(0, Some(graph_params(50)));
        assert_eq!(store.dim(), 0);
        assert!(store.nearest(&vectors[0], 5, -1.0, |_| true).is_empty());
        for (slot, vector) in vectors.iter().enumerate() {
            store.set(slot as u32, vector);
        }
        store.set(500, &[1.0, 0.0]);
        assert_eq!(store.dim(), 16);
        assert_eq!(store.len(), 200);
        assert_eq!(store.nearest(&vectors[9], 1, -1.0, |_| true)[0].0, 9);
    }

    #[test]
    fn the_graph_is_built_once_the_store_reaches_its_size() {
        let dim = 16;
        let vectors = clustered(261, 5, dim, 18);
        let queries = clustered(10, 5, dim, 19);
        let mut params = graph_params(100);
        params.query.exact_below = 300;
        let mut store = VectorStore::with_params(dim, Some(params));
        for (slot, vector) in vectors.iter().take(250).enumerate() {
            store.set(slot as u32, vector);
        }
        store.clear(3);
        // Copies of the first 40 vectors: separate nodes until the graph merges them (slot 253
        // holds the only copy of vector 3 left).
        for (slot, vector) in (250..).zip(&vectors[..40]) {
            store.set(slot, vector);
        }
        for (slot, vector) in (290..).zip(&vectors[250..260]) {
            store.set(slot, vector);
        }
        assert_eq!(store.distinct(), 299);
        assert!(store.graph.is_none());
        store.set(300, &vectors[260]);
        assert!(store.graph.is_some());
        assert_eq!(store.distinct(), 261, "copies merged");
        assert_eq!(store.len(), 300);
        assert!(mean_recall(&store, &queries, 50, |_| true) >= 0.97);
        let slots = |found: Vec<(u32, f32)>| found.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
        assert_eq!(
            slots(store.nearest(&vectors[7], 2, -1.0, |_| true)),
            [7, 257]
        );
        store.set(310, &vectors[3]);
        assert_eq!(store.distinct(), 261, "a copy joins its twin");
        assert_eq!(
            slots(store.nearest(&vectors[3], 2, -1.0, |_| true)),
            [253, 310]
        );
    }

    #[test]
    fn a_store_without_a_graph_stays_exact() {
        let vectors = clustered(300, 5, 16, 20);
        let store = store_of(&vectors, None);
        assert!(store.graph.is_none());
        let query = &clustered(1, 5, 16, 21)[0];
        assert_eq!(
            store.nearest(query, 30, -1.0, |_| true),
            store.nearest_exact(query, 30, -1.0, |_| true)
        );
    }

    #[test]
    fn setting_the_same_vector_again_changes_nothing() {
        let vectors = clustered(100, 4, 16, 17);
        let mut store = store_of(&vectors, Some(graph_params(50)));
        let before: Vec<Vec<u32>> = (0..100)
            .map(|node| store.graph.as_ref().expect("graph").links0(node).to_vec())
            .collect();
        for (slot, vector) in vectors.iter().enumerate() {
            store.set(slot as u32, vector);
        }
        let graph = store.graph.as_ref().expect("graph");
        for (node, links) in before.iter().enumerate() {
            assert_eq!(graph.links0(node as u32), links.as_slice());
        }
        assert_eq!(store.distinct(), 100);
    }
}
