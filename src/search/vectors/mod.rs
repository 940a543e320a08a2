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
//!
//! This file keeps the store (its nodes, slots and upkeep) and chooses how to answer; beside
//! it: `kernel` (the int8 codes and dot products), `scan` (the exact scan), `graph` (the store
//! as the HNSW graph's space, and the searches through it), `hnsw` and `snapshot`.

mod graph;
mod hnsw;
mod kernel;
mod scan;
pub mod snapshot;

use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

use graph::{Edit, EditGraph, Locate, View};
pub use hnsw::GraphParams;
use hnsw::{Graph, Located, NONE};
use kernel::{Prepared, Quantised, dispatch, prepare, quantise};

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
        View::new(self.dim, &self.codes, &self.scales, &self.heads)
    }

    /// The graph to walk or change, beside a view of the rows it links.
    fn graph_and_view(&mut self) -> Option<(&mut Graph, View<'_>)> {
        let graph = self.graph.as_mut()?;
        let view = View::new(self.dim, &self.codes, &self.scales, &self.heads);
        Some((graph, view))
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
        let Some((graph, view)) = self.graph_and_view() else {
            return Located::default();
        };
        let level = graph.draw_level();
        let graph: &Graph = graph;
        dispatch(
            view.dim,
            Locate {
                graph,
                view,
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
        let Some((graph, view)) = self.graph_and_view() else {
            return Vec::new();
        };
        dispatch(view.dim, EditGraph { graph, view, edit })
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

#[cfg(test)]
mod tests;
