//! A hierarchical navigable small-world graph (HNSW: Malkov and Yashunin, "Efficient and robust
//! approximate nearest neighbor search using Hierarchical Navigable Small World graphs", 2018)
//! over the nodes of a `VectorStore`, written from the paper's algorithms 1 to 4.
//!
//! Every node sits on layer 0 and, with geometrically falling probability, on the layers above
//! it. A search descends greedily through the upper layers to a good entry point, then runs a
//! best-first search of width `ef` on layer 0. Neighbours are chosen with the paper's heuristic
//! (a candidate is linked only if it is closer to the new node than to every neighbour chosen
//! before it), which keeps links pointing in different directions.
//!
//! The graph holds no vectors: it asks a [`Space`] for similarities, so the store can answer
//! with the int8 kernel of the CPU it runs on. Differences from the paper:
//!
//! - Searches can take a filter: filtered-out and dead nodes are walked through but never enter
//!   the results, and the search keeps going until it holds `ef` accepted nodes or has run out of
//!   nodes to visit.
//! - Deletion: a dead node (no live slot) keeps its links so searches can still pass through it;
//!   its live neighbours that link back to it are reconnected at once to its other neighbours,
//!   and once dead nodes are a sixteenth of the graph, `purge` reconnects whatever still links to
//!   them and frees them.
//! - Construction is deterministic: node levels come from a seeded generator.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Mutex;

/// "No node".
pub(super) const NONE: u32 = u32::MAX;
/// The level of a node that is not in the graph.
const ABSENT: u8 = u8::MAX;

/// Similarities between the graph's nodes and queries, as the store computes them.
pub(super) trait Space {
    type Query;
    /// Similarity of `node` to `query`.
    fn sim(&self, node: u32, query: &Self::Query) -> f32;
    /// Similarity of two nodes.
    fn sim_nodes(&self, a: u32, b: u32) -> f32;
    /// Start loading `node`'s vector into the cache.
    fn prefetch(&self, node: u32);
    /// Whether `node` still stands for at least one slot.
    fn live(&self, node: u32) -> bool;
}

/// How the graph is built.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GraphParams {
    /// Links per node on the upper layers; layer 0 keeps twice as many.
    pub m: usize,
    /// Search width while inserting.
    pub ef_construction: usize,
    /// Pruning slack: a candidate is dropped when a kept neighbour is `alpha` times closer to it
    /// (in distance) than the node is. 1 is the paper's heuristic; more keeps more links.
    pub alpha: f32,
    /// Fill a node's links up to the limit with the closest candidates the heuristic pruned
    /// (the paper's `keepPrunedConnections`).
    pub keep_pruned: bool,
    /// Seed of the level generator.
    pub seed: u64,
}

/// A node and its similarity to whatever is being searched for.
#[derive(Debug, Clone, Copy)]
pub(super) struct Scored {
    pub sim: f32,
    pub node: u32,
}

impl PartialEq for Scored {
    #[inline(always)]
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Scored {}

impl PartialOrd for Scored {
    #[inline(always)]
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Scored {
    /// More similar is greater; between equals the lower node is greater, so that every order
    /// (and with it the whole construction) is deterministic.
    #[inline(always)]
    fn cmp(&self, other: &Self) -> Ordering {
        self.sim
            .total_cmp(&other.sim)
            .then(other.node.cmp(&self.node))
    }
}

/// Nodes seen by one search: a mark per node, cleared by moving to the next epoch.
#[derive(Default)]
struct Visited {
    marks: Vec<u16>,
    epoch: u16,
}

impl Visited {
    fn start(&mut self, nodes: usize) {
        if self.marks.len() < nodes {
            self.marks.resize(nodes, 0);
        }
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 {
            self.marks.fill(0);
            self.epoch = 1;
        }
    }

    /// Mark `node`; false when it was already marked in this epoch.
    #[inline(always)]
    fn insert(&mut self, node: u32) -> bool {
        let mark = &mut self.marks[node as usize];
        let fresh = *mark != self.epoch;
        *mark = self.epoch;
        fresh
    }
}

/// What a search for a new node's place found: per layer from 0 up, the nodes to link it to,
/// most similar first.
#[derive(Default)]
pub(super) struct Located {
    level: u8,
    layers: Vec<Vec<Scored>>,
}

impl Located {
    /// The most similar live node found, if any.
    pub fn best(&self) -> Option<Scored> {
        self.layers.first().and_then(|layer| layer.first().copied())
    }
}

/// The outcome of a layer-0 search.
pub(super) struct Found {
    /// Accepted nodes, most similar first.
    pub nodes: Vec<Scored>,
}

pub(super) struct Graph {
    m: usize,
    m0: usize,
    ef_construction: usize,
    /// `alpha` squared: distances of unit vectors compare as `1 - similarity`.
    alpha2: f32,
    keep_pruned: bool,
    level_factor: f64,
    rng: u64,
    /// Per node: its top layer, `ABSENT` when it is not in the graph.
    levels: Vec<u8>,
    /// Layer-0 links, `m0` per node, the first `counts0[node]` of them used.
    links0: Vec<u32>,
    counts0: Vec<u8>,
    /// Links on layers 1 and up, for the few nodes that reach them: per layer a count and `m`
    /// links.
    upper: HashMap<u32, Vec<u32>>,
    entry: u32,
    top: u8,
    /// Nodes in the graph that no longer stand for any slot.
    dead: usize,
    visited: Mutex<Vec<Visited>>,
}

/// splitmix64: a small, well-mixed generator for levels.
fn split_mix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Graph {
    pub fn new(params: GraphParams) -> Self {
        let m = params.m.clamp(2, 127);
        Self {
            m,
            m0: 2 * m,
            ef_construction: params.ef_construction.max(m),
            alpha2: params.alpha * params.alpha,
            keep_pruned: params.keep_pruned,
            level_factor: 1.0 / (m as f64).ln(),
            rng: params.seed,
            levels: Vec::new(),
            links0: Vec::new(),
            counts0: Vec::new(),
            upper: HashMap::new(),
            entry: NONE,
            top: 0,
            dead: 0,
            visited: Mutex::new(Vec::new()),
        }
    }

    /// Dead nodes still in the graph.
    pub fn dead(&self) -> usize {
        self.dead
    }

    /// Nodes the graph has room for (in it or not).
    pub fn nodes(&self) -> usize {
        self.levels.len()
    }

    /// Write the graph for `snapshot`.
    pub fn write<W: std::io::Write>(
        &self,
        out: &mut crate::search::codec::Encoder<W>,
    ) -> std::io::Result<()> {
        out.u64(self.rng)?;
        out.u8s(&self.levels)?;
        out.u32s(&self.links0)?;
        out.u8s(&self.counts0)?;
        let mut upper: Vec<(&u32, &Vec<u32>)> = self.upper.iter().collect();
        upper.sort_unstable_by_key(|(node, _)| **node);
        out.len(upper.len())?;
        for (node, lists) in upper {
            out.u32(*node)?;
            out.u32s(lists)?;
        }
        out.u32(self.entry)?;
        out.u8(self.top)?;
        out.len(self.dead)
    }

    /// Read a graph written by `write` for a store built with `params`, checking that every
    /// link stays within the graph.
    pub fn read<R: std::io::Read>(
        input: &mut crate::search::codec::Decoder<R>,
        params: GraphParams,
    ) -> Result<Self, String> {
        let mut graph = Self::new(params);
        graph.rng = input.u64()?;
        graph.levels = input.u8s()?;
        graph.links0 = input.u32s()?;
        graph.counts0 = input.u8s()?;
        let nodes = graph.levels.len();
        let linked = |link: &u32| (*link as usize) < nodes;
        if graph.counts0.len() != nodes || graph.links0.len() != nodes * graph.m0 {
            return Err("the graph's layer 0 does not match its nodes".to_owned());
        }
        for node in 0..nodes {
            let count = usize::from(graph.counts0[node]);
            let start = node * graph.m0;
            if count > graph.m0 || !graph.links0[start..start + count].iter().all(linked) {
                return Err("a layer-0 link points past the graph".to_owned());
            }
        }
        let stride = graph.m + 1;
        for _ in 0..input.len()? {
            let node = input.u32()?;
            let lists = input.u32s()?;
            let well_formed = (node as usize) < nodes
                && lists.len() % stride == 0
                && lists.len() <= 32 * stride
                && lists.chunks(stride).all(|layer| {
                    let count = layer[0] as usize;
                    count <= graph.m && layer[1..1 + count].iter().all(linked)
                });
            if !well_formed {
                return Err("an upper-layer link list is malformed".to_owned());
            }
            graph.upper.insert(node, lists);
        }
        for (node, level) in graph.levels.iter().enumerate() {
            if *level == ABSENT || *level == 0 {
                continue;
            }
            let layers = graph
                .upper
                .get(&(node as u32))
                .map_or(0, |l| l.len() / stride);
            if *level > 32 || layers < usize::from(*level) {
                return Err("a node's level has no links stored for it".to_owned());
            }
        }
        graph.entry = input.u32()?;
        graph.top = input.u8()?;
        graph.dead = input.len()?;
        if (graph.entry != NONE && !linked(&graph.entry)) || graph.top > 32 {
            return Err("the graph's entry point is out of range".to_owned());
        }
        if graph.entry != NONE && graph.levels[graph.entry as usize] == ABSENT {
            return Err("the graph's entry point is not in the graph".to_owned());
        }
        Ok(graph)
    }

    pub fn contains(&self, node: u32) -> bool {
        self.levels.get(node as usize).is_some_and(|l| *l != ABSENT)
    }

    /// A random level: 0 with probability 1 - 1/m, each further level 1/m as likely.
    pub fn draw_level(&mut self) -> u8 {
        let bits = split_mix(&mut self.rng) >> 11;
        let uniform = (bits as f64 + 1.0) / (1u64 << 53) as f64;
        (-uniform.ln() * self.level_factor).floor().min(32.0) as u8
    }

    fn grow(&mut self, nodes: usize) {
        if self.levels.len() < nodes {
            self.levels.resize(nodes, ABSENT);
            self.counts0.resize(nodes, 0);
            self.links0.resize(nodes * self.m0, NONE);
        }
    }

    fn max_links(&self, layer: u8) -> usize {
        if layer == 0 { self.m0 } else { self.m }
    }

    #[inline(always)]
    fn links(&self, node: u32, layer: u8) -> &[u32] {
        let node = node as usize;
        if layer == 0 {
            let start = node * self.m0;
            &self.links0[start..start + usize::from(self.counts0[node])]
        } else {
            let Some(lists) = self.upper.get(&(node as u32)) else {
                return &[];
            };
            let start = (usize::from(layer) - 1) * (self.m + 1);
            let count = lists[start] as usize;
            &lists[start + 1..start + 1 + count]
        }
    }

    fn set_links(&mut self, node: u32, layer: u8, links: &[u32]) {
        let count = links.len().min(self.max_links(layer));
        if layer == 0 {
            let start = node as usize * self.m0;
            self.links0[start..start + count].copy_from_slice(&links[..count]);
            self.counts0[node as usize] = count as u8;
        } else {
            let m = self.m;
            let lists = self.upper.entry(node).or_default();
            let start = (usize::from(layer) - 1) * (m + 1);
            if lists.len() < start + m + 1 {
                lists.resize(start + m + 1, 0);
            }
            lists[start] = count as u32;
            lists[start + 1..start + 1 + count].copy_from_slice(&links[..count]);
        }
    }

    fn take_visited(&self) -> Visited {
        self.visited
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .pop()
            .unwrap_or_default()
    }

    fn return_visited(&self, visited: Visited) {
        self.visited
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .push(visited);
    }

    /// Greedy walk on one layer: move to the most similar neighbour until none is better.
    #[inline(always)]
    fn greedy<S: Space>(&self, space: &S, query: &S::Query, mut at: Scored, layer: u8) -> Scored {
        loop {
            let mut moved = false;
            for &next in self.links(at.node, layer) {
                let sim = space.sim(next, query);
                if sim > at.sim {
                    at = Scored { sim, node: next };
                    moved = true;
                }
            }
            if !moved {
                return at;
            }
        }
    }

    /// The best-first search of one layer (the paper's algorithm 2), from `entry`, keeping the
    /// `ef` most similar nodes that `accept` lets through. Nodes it refuses are still walked
    /// through; while fewer than `ef` were accepted, the search does not stop early.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn search_layer<S: Space>(
        &self,
        space: &S,
        query: &S::Query,
        entry: &[Scored],
        ef: usize,
        layer: u8,
        accept: &impl Fn(u32) -> bool,
        visited: &mut Visited,
    ) -> Found {
        let mut candidates: BinaryHeap<Scored> = BinaryHeap::with_capacity(ef * 2);
        // The results as a min-heap: the least similar on top.
        let mut results: BinaryHeap<std::cmp::Reverse<Scored>> = BinaryHeap::with_capacity(ef + 1);
        for &start in entry {
            if !visited.insert(start.node) {
                continue;
            }
            candidates.push(start);
            if accept(start.node) {
                results.push(std::cmp::Reverse(start));
                if results.len() > ef {
                    results.pop();
                }
            }
        }
        let mut fresh: Vec<u32> = Vec::with_capacity(self.m0);
        while let Some(closest) = candidates.pop() {
            let worst = results.peek().map_or(f32::NEG_INFINITY, |r| r.0.sim);
            if results.len() >= ef && closest.sim < worst {
                break;
            }
            fresh.clear();
            for &next in self.links(closest.node, layer) {
                if visited.insert(next) {
                    space.prefetch(next);
                    fresh.push(next);
                }
            }
            for &next in &fresh {
                let sim = space.sim(next, query);
                let worst = results.peek().map_or(f32::NEG_INFINITY, |r| r.0.sim);
                if results.len() < ef || sim > worst {
                    let scored = Scored { sim, node: next };
                    candidates.push(scored);
                    if accept(next) {
                        results.push(std::cmp::Reverse(scored));
                        if results.len() > ef {
                            results.pop();
                        }
                    }
                }
            }
        }
        let mut nodes: Vec<Scored> = results.into_iter().map(|r| r.0).collect();
        nodes.sort_unstable_by(|a, b| b.cmp(a));
        Found { nodes }
    }

    /// The `ef` nodes most similar to `query` among those `accept` lets through (live ones only:
    /// `accept` is asked about live nodes alone).
    #[inline(always)]
    pub fn search<S: Space>(
        &self,
        space: &S,
        query: &S::Query,
        ef: usize,
        accept: &impl Fn(u32) -> bool,
    ) -> Found {
        if self.entry == NONE {
            return Found { nodes: Vec::new() };
        }
        let mut at = Scored {
            sim: space.sim(self.entry, query),
            node: self.entry,
        };
        for layer in (1..=self.top).rev() {
            at = self.greedy(space, query, at, layer);
        }
        let mut visited = self.take_visited();
        visited.start(self.levels.len());
        let found = self.search_layer(
            space,
            query,
            &[at],
            ef.max(1),
            0,
            &|node| space.live(node) && accept(node),
            &mut visited,
        );
        self.return_visited(visited);
        found
    }

    /// Where a new node at `level` with vector `query` would go (the search half of the paper's
    /// algorithm 1): its candidate neighbours on each layer it will sit on, live nodes only.
    #[inline(always)]
    pub fn locate<S: Space>(&self, space: &S, query: &S::Query, level: u8) -> Located {
        let mut located = Located {
            level,
            layers: Vec::new(),
        };
        if self.entry == NONE {
            return located;
        }
        let mut at = Scored {
            sim: space.sim(self.entry, query),
            node: self.entry,
        };
        for layer in (level.saturating_add(1)..=self.top).rev() {
            at = self.greedy(space, query, at, layer);
        }
        let reach = level.min(self.top);
        located.layers = vec![Vec::new(); usize::from(reach) + 1];
        let mut entry = vec![at];
        let mut visited = self.take_visited();
        for layer in (0..=reach).rev() {
            visited.start(self.levels.len());
            let found = self.search_layer(
                space,
                query,
                &entry,
                self.ef_construction,
                layer,
                &|node| space.live(node),
                &mut visited,
            );
            if !found.nodes.is_empty() {
                entry.clone_from(&found.nodes);
            }
            located.layers[usize::from(layer)] = found.nodes;
        }
        self.return_visited(visited);
        located
    }

    /// Put `node` in the graph where `located` says (the linking half of algorithm 1).
    #[inline(always)]
    pub fn link<S: Space>(&mut self, space: &S, node: u32, located: &Located) {
        self.grow(node as usize + 1);
        let level = located.level;
        self.levels[node as usize] = level;
        self.counts0[node as usize] = 0;
        self.upper.remove(&node);
        if level > 0 {
            self.upper
                .insert(node, vec![0; usize::from(level) * (self.m + 1)]);
        }
        if self.entry == NONE {
            self.entry = node;
            self.top = level;
            return;
        }
        for (layer, candidates) in located.layers.iter().enumerate() {
            let layer = layer as u8;
            let chosen = self.select(space, node, candidates, self.m);
            self.set_links(node, layer, &chosen);
            for &neighbour in &chosen {
                self.add_link(space, neighbour, node, layer);
            }
        }
        if level > self.top {
            self.entry = node;
            self.top = level;
        }
    }

    /// The paper's algorithm 4 (without extending the candidates or keeping pruned ones): walk
    /// `candidates` (most similar to `base` first) and keep each that is more similar to `base`
    /// than to every one kept before it, up to `m`.
    #[inline(always)]
    fn select<S: Space>(&self, space: &S, base: u32, candidates: &[Scored], m: usize) -> Vec<u32> {
        // Loops, not iterator closures: everything here must inline into the kernel's frame.
        let mut chosen: Vec<u32> = Vec::with_capacity(m);
        let mut pruned: Vec<u32> = Vec::new();
        for candidate in candidates {
            if chosen.len() >= m {
                break;
            }
            if candidate.node == base {
                continue;
            }
            // For unit vectors the squared distance is 2 - 2 similarity, so "a kept neighbour
            // is alpha times closer to the candidate than the base is" reads as below.
            let distance = 1.0 - candidate.sim;
            let mut diverse = true;
            for &kept in &chosen {
                let to_kept = 1.0 - space.sim_nodes(candidate.node, kept);
                if self.alpha2 * to_kept < distance {
                    diverse = false;
                    break;
                }
            }
            if diverse {
                chosen.push(candidate.node);
            } else if self.keep_pruned && pruned.len() < m {
                pruned.push(candidate.node);
            }
        }
        for node in pruned {
            if chosen.len() >= m {
                break;
            }
            chosen.push(node);
        }
        chosen
    }

    /// Link `from` to `to` on `layer`; a full list is cut back with the heuristic, dropping
    /// dead nodes first.
    #[inline(always)]
    fn add_link<S: Space>(&mut self, space: &S, from: u32, to: u32, layer: u8) {
        let links = self.links(from, layer);
        if links.contains(&to) {
            return;
        }
        if links.len() < self.max_links(layer) {
            let mut grown = links.to_vec();
            grown.push(to);
            self.set_links(from, layer, &grown);
            return;
        }
        let mut candidates: Vec<Scored> = Vec::with_capacity(links.len() + 1);
        for &node in links.iter().chain(std::iter::once(&to)) {
            if space.live(node) {
                let sim = space.sim_nodes(from, node);
                candidates.push(Scored { sim, node });
            }
        }
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let chosen = self.select(space, from, &candidates, self.max_links(layer));
        self.set_links(from, layer, &chosen);
    }

    /// Re-choose the links of live `node` on `layer`: its live neighbours, and in place of each
    /// dead one that one's live neighbours.
    #[inline(always)]
    fn reconnect<S: Space>(&mut self, space: &S, node: u32, layer: u8) {
        let mut pool: Vec<u32> = Vec::with_capacity(self.m0 * 2);
        for &neighbour in self.links(node, layer) {
            if space.live(neighbour) {
                pool.push(neighbour);
            } else {
                pool.extend(
                    self.links(neighbour, layer)
                        .iter()
                        .copied()
                        .filter(|&next| next != node && space.live(next)),
                );
            }
        }
        pool.sort_unstable();
        pool.dedup();
        let mut candidates: Vec<Scored> = Vec::with_capacity(pool.len());
        for other in pool {
            let sim = space.sim_nodes(node, other);
            candidates.push(Scored { sim, node: other });
        }
        candidates.sort_unstable_by(|a, b| b.cmp(a));
        let chosen = self.select(space, node, &candidates, self.max_links(layer));
        self.set_links(node, layer, &chosen);
    }

    /// `node` has just died: it stays in the graph for searches to pass through, and each live
    /// neighbour that links back to it is reconnected around it.
    #[inline(always)]
    pub fn bury<S: Space>(&mut self, space: &S, node: u32) {
        if !self.contains(node) {
            return;
        }
        self.dead += 1;
        for layer in 0..=self.levels[node as usize] {
            let neighbours = self.links(node, layer).to_vec();
            for neighbour in neighbours {
                if space.live(neighbour) && self.links(neighbour, layer).contains(&node) {
                    self.reconnect(space, neighbour, layer);
                }
            }
        }
    }

    /// Take every dead node out of the graph: reconnect the live nodes still linking to one,
    /// then clear them. Returns the freed nodes.
    #[inline(always)]
    pub fn purge<S: Space>(&mut self, space: &S) -> Vec<u32> {
        for node in 0..self.levels.len() as u32 {
            let level = self.levels[node as usize];
            if level == ABSENT || !space.live(node) {
                continue;
            }
            for layer in 0..=level {
                if self
                    .links(node, layer)
                    .iter()
                    .any(|&neighbour| !space.live(neighbour))
                {
                    self.reconnect(space, node, layer);
                }
            }
        }
        let mut freed = Vec::new();
        for node in 0..self.levels.len() as u32 {
            if self.levels[node as usize] != ABSENT && !space.live(node) {
                self.levels[node as usize] = ABSENT;
                self.counts0[node as usize] = 0;
                self.upper.remove(&node);
                freed.push(node);
            }
        }
        self.dead = 0;
        if !self.contains(self.entry) {
            self.entry = NONE;
            self.top = 0;
            for (node, &level) in self.levels.iter().enumerate() {
                if level != ABSENT && (self.entry == NONE || level > self.top) {
                    self.entry = node as u32;
                    self.top = level;
                }
            }
        }
        freed
    }

    /// Bytes held, for memory reports.
    pub fn memory_bytes(&self) -> usize {
        let upper: usize = self
            .upper
            .values()
            .map(|lists| lists.capacity() * 4 + 32)
            .sum();
        self.levels.capacity()
            + self.counts0.capacity()
            + self.links0.capacity() * 4
            + self.upper.capacity() * 40
            + upper
    }

    /// The layer-0 links of `node` (for tests).
    #[cfg(test)]
    pub fn links0(&self, node: u32) -> &[u32] {
        self.links(node, 0)
    }
}
