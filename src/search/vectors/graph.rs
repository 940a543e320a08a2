//! The glue between the store and its HNSW graph (`hnsw.rs`): the store's rows as the graph's
//! space, the graph's searches and edits as tasks for the kernels, and the store's search
//! through the graph.

use super::VectorStore;
use super::hnsw::{Graph, Located, NONE, Space};
use super::kernel::{Kernel, Prepared, Task, dispatch};
use super::scan::best;

/// The store's vectors as the graph sees them.
#[derive(Clone, Copy)]
pub(super) struct View<'a> {
    pub(super) dim: usize,
    pub(super) codes: &'a [i8],
    pub(super) scales: &'a [f32],
    pub(super) heads: &'a [u32],
}

impl<'a> View<'a> {
    pub(super) fn new(dim: usize, codes: &'a [i8], scales: &'a [f32], heads: &'a [u32]) -> Self {
        Self {
            dim,
            codes,
            scales,
            heads,
        }
    }
}

/// A `View` with the kernel that computes its dot products.
pub(super) struct Rows<'a, K> {
    pub(super) view: View<'a>,
    pub(super) kernel: K,
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

/// One graph search.
pub(super) struct SearchGraph<'a, F> {
    pub(super) graph: &'a Graph,
    pub(super) view: View<'a>,
    pub(super) query: &'a Prepared,
    pub(super) ef: usize,
    pub(super) accept: &'a F,
}

impl<F: Fn(u32) -> bool> Task for SearchGraph<'_, F> {
    type Output = super::hnsw::Found;

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
pub(super) struct Locate<'a> {
    pub(super) graph: &'a Graph,
    pub(super) view: View<'a>,
    pub(super) query: &'a Prepared,
    pub(super) level: u8,
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
pub(super) enum Edit<'a> {
    /// Link a new node where it was located.
    Link { node: u32, located: &'a Located },
    /// A node has lost its last slot.
    Bury(u32),
    /// Take the dead nodes out; they are returned.
    Purge,
}

pub(super) struct EditGraph<'a> {
    pub(super) graph: &'a mut Graph,
    pub(super) view: View<'a>,
    pub(super) edit: Edit<'a>,
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

impl VectorStore {
    /// The graph's answer, or `None` when the graph ran out of nodes before finding `k`
    /// accepted slots (some may be unreachable from its entry point: the caller scans).
    pub(super) fn nearest_in_graph(
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
}
