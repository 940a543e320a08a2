//! The exact scan: every vector (or a filter's slots' vectors) compared with the query in a
//! tight loop, on two cores for large stores, keeping the best `k` as it goes. It answers
//! small stores and selective filters, and is the reference the graph is held to.

use std::ops::Range;

use super::graph::Rows;
use super::hnsw::{NONE, Space};
use super::kernel::{Kernel, Prepared, Task, dispatch};
use super::{PARALLEL_ROWS, SCAN_AHEAD, VectorStore};
use crate::search::facets::SlotSet;

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

pub(super) fn best(mut found: Vec<(u32, f32)>, k: usize) -> Vec<(u32, f32)> {
    let by_similarity = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if found.len() > k {
        found.select_nth_unstable_by(k - 1, by_similarity);
        found.truncate(k);
    }
    found.sort_unstable_by(by_similarity);
    found
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

impl VectorStore {
    /// The exact scan of the slots of `within` that `accept` lets through; on two cores, half
    /// of the set each, when `parallel` (many slots, each read from anywhere in the store).
    pub(super) fn scan_within(
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
    pub(super) fn scan_all(
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
    pub(super) fn scan<K: Kernel>(
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
}
