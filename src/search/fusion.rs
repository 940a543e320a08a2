//! Reciprocal rank fusion of the keyword and the vector rankings, in one pass over the keyword
//! matches.
//!
//! A fused score needs each match's keyword rank: its place in the order of BM25 scores
//! (higher first, then lower slot). Ranking every match would sort them all, and a query of
//! common words matches a large part of the catalogue. Only two kinds of keyword match can be
//! served, though: the best few (`depth`, enough for any page that can still be reached) and
//! those a vector also found (at most `VECTOR_DEPTH`). So the matches stream past
//! `KeywordRanks` once:
//!
//! - the keyword-only matches go through a buffer that keeps the best `depth` of them;
//! - the scores of the vector-found ones are looked up before the stream starts (every score
//!   is final by then), so each streamed match can be counted against their keys: their exact
//!   ranks come from those counts, without keeping the matches.
//!
//! Counting a match against the sorted keys of the vector-found ones is a binary search; for
//! large streams a table by the key's top 16 bits answers most of them with one load.

use super::facets::SlotSet;
use super::hit::{Cursor, Tally};
use super::text::MatchVisitor;

/// Reciprocal rank fusion: score = 1 / (RRF_K + keyword rank) + w / (RRF_K + vector rank), with
/// `w` the embedder's `fusion_weight` (0.5 for the static table, 1 for a model). Chosen on the
/// hard dev set (eval/hard): with the static table, keyword ranking alone scored 0.368 NDCG@10,
/// K 60 with equal weights 0.346 and K 30 with the vectors at half weight 0.374; with MiniLM,
/// K 30 at half weight 0.423 and at full weight 0.442.
const RRF_K: f64 = 30.0;
/// The keyword rank's extra weight in fusion, only ever a tie-break (see `fuse`).
const KEYWORD_TIE_BREAK: f64 = 1e-9;

/// A fused ranking: scores of the matches that can reach the page, and how many there are.
pub(super) struct Fused {
    pub scores: Vec<(u32, f64)>,
    pub total: usize,
    pub omitted: usize,
}

/// The keyword part of a fused score at keyword rank `rank` (0-based).
fn keyword_reciprocal(rank: usize) -> f64 {
    reciprocal(rank) * (1.0 + KEYWORD_TIE_BREAK)
}

fn reciprocal(rank: usize) -> f64 {
    1.0 / (RRF_K + rank as f64 + 1.0)
}

/// The vector part of a fused score at vector rank `rank` (0-based).
fn vector_reciprocal(weight: f64, rank: usize) -> f64 {
    weight * reciprocal(rank)
}

/// The keyword order (higher score first, then lower slot) as one ascending integer.
fn keyword_order_key(slot: u32, score: f32) -> u64 {
    // `f32::total_cmp`'s order as unsigned bits: negatives reversed, positives above them.
    let bits = score.to_bits();
    let ascending = if bits >> 31 == 1 {
        !bits
    } else {
        bits | 1 << 31
    };
    (u64::from(!ascending) << 32) | u64::from(slot)
}

fn slot_of(key: u64) -> u32 {
    key as u32
}

/// Streams the keyword matches of one fused search: see the module docs. Use: `peek` at every
/// match a vector found, then `counting`, then `offer` every match, then `fuse`.
pub(super) struct KeywordRanks {
    depth: usize,
    /// The keys of the matches a vector found, ascending once `counting` has run.
    found: Vec<u64>,
    /// How many offered keys fall between consecutive `found` keys: `before[i]` counts the keys
    /// below `found[i]` and not below `found[i - 1]`.
    before: Vec<usize>,
    /// By a key's top 16 bits: the index into `before` when no `found` key shares those bits;
    /// else `SHARED` plus the first `found` key that does. Built only for large streams.
    table: Option<std::sync::Arc<[u8]>>,
    /// For each `found` key: the end of the run of `found` keys sharing its top 16 bits.
    run_end: Vec<u8>,
    /// The best keyword-only keys seen, at most twice `depth` between cuts.
    best: Vec<u64>,
    /// Keyword-only keys above this cannot be among the best `depth`.
    bar: u64,
    offered: usize,
}

/// A `table` entry with this bit: its bucket holds `found` keys, counted by comparison.
const SHARED: u8 = 0x80;
/// Streams at least this long get a `table` (filling it costs about as much as this many
/// binary searches).
const TABLE_FROM: usize = 4096;

impl KeywordRanks {
    /// For pages that need the best `depth` keyword matches.
    pub fn new(depth: usize) -> Self {
        Self {
            depth,
            found: Vec::new(),
            before: Vec::new(),
            table: None,
            run_end: Vec::new(),
            best: Vec::new(),
            bar: u64::MAX,
            offered: 0,
        }
    }

    /// A keyword match a vector also found, before the stream.
    pub fn peek(&mut self, slot: u32, score: f32) {
        self.found.push(keyword_order_key(slot, score));
    }

    /// Ready to count a stream of about `expected` matches against the peeked ones.
    pub fn counting(&mut self, expected: usize) {
        self.found.sort_unstable();
        self.before = vec![0; self.found.len() + 1];
        if self.found.is_empty() || self.found.len() >= usize::from(SHARED) || expected < TABLE_FROM
        {
            return;
        }
        let bucket = |key: u64| (key >> 48) as usize;
        let mut table = vec![0u8; 1 << 16];
        self.run_end = vec![0; self.found.len()];
        let mut from = 0usize;
        let mut index = 0;
        // Fewer than `SHARED` keys: every index fits beside the flag.
        while index < self.found.len() {
            let at = bucket(self.found[index]);
            let mut end = index + 1;
            while end < self.found.len() && bucket(self.found[end]) == at {
                end += 1;
            }
            table[from..at].fill(index as u8);
            table[at] = SHARED | index as u8;
            self.run_end[index] = end as u8;
            from = at + 1;
            index = end;
        }
        table[from..].fill(self.found.len() as u8);
        self.table = Some(table.into());
    }

    /// An empty stream for part of the matches, counted against the same peeked ones, to
    /// `merge` back.
    pub fn split(&self) -> Self {
        Self {
            depth: self.depth,
            found: self.found.clone(),
            before: vec![0; self.before.len()],
            table: self.table.clone(),
            run_end: self.run_end.clone(),
            best: Vec::new(),
            bar: u64::MAX,
            offered: 0,
        }
    }

    /// Take in what a stream from `split` saw.
    pub fn merge(&mut self, other: Self) {
        for (count, more) in self.before.iter_mut().zip(other.before) {
            *count += more;
        }
        self.best.extend(other.best);
        self.offered += other.offered;
        self.cut();
    }

    /// The slots of the peeked matches.
    pub fn found_slots(&self) -> impl Iterator<Item = u32> + '_ {
        self.found.iter().map(|key| slot_of(*key))
    }

    /// One keyword match, in any order; `found`: a vector found it too (it was peeked).
    #[inline]
    pub fn offer(&mut self, slot: u32, score: f32, found: bool) {
        let key = keyword_order_key(slot, score);
        self.offered += 1;
        if !self.found.is_empty() {
            let index = match &self.table {
                Some(table) => {
                    let entry = table[(key >> 48) as usize];
                    let index = usize::from(entry & !SHARED);
                    if entry & SHARED == 0 {
                        index
                    } else {
                        // The few found keys in this bucket (often one), compared in turn.
                        let end = usize::from(self.run_end[index]);
                        index + self.found[index..end].iter().filter(|f| **f <= key).count()
                    }
                }
                None => self.found.partition_point(|f| *f <= key),
            };
            self.before[index] += 1;
        }
        if found || key > self.bar {
            return;
        }
        self.best.push(key);
        if self.best.len() >= self.depth.saturating_mul(2).max(256) {
            self.cut();
        }
    }

    /// Keep the best `depth` keyword-only keys; the rest cannot be ranked that high.
    fn cut(&mut self) {
        if self.best.len() <= self.depth {
            return;
        }
        if self.depth == 0 {
            self.best.clear();
            self.bar = 0;
            return;
        }
        self.best.select_nth_unstable(self.depth - 1);
        self.best.truncate(self.depth);
        self.bar = self.best[self.depth - 1];
    }

    /// The fused scores: every keyword match ranked within `depth`, every keyword match a
    /// vector found (at its exact keyword rank), and every vector match no keyword found;
    /// `semantic` is the vector ranking, best first (with each neighbour's similarity), its
    /// ranks weighted by `vector_weight`: it re-ranks the keyword matches it holds, and the
    /// neighbours no keyword found are matches only at least `floor` similar (`None`: never).
    pub fn fuse(
        mut self,
        semantic: &[(u32, f32)],
        vector_weight: f64,
        floor: Option<f32>,
    ) -> Fused {
        self.cut();
        self.best.sort_unstable();
        let kept = self.depth.min(self.offered);
        let vector_rank: std::collections::HashMap<u32, usize> = semantic
            .iter()
            .enumerate()
            .map(|(rank, (slot, _))| (*slot, rank))
            .collect();
        let mut scores: Vec<(u32, f64)> = Vec::with_capacity(kept + semantic.len());
        // Keyword-only matches: a match's rank is its place among them plus the found keys
        // below it.
        let mut found_below = 0;
        for (place, key) in self.best.iter().enumerate() {
            while found_below < self.found.len() && self.found[found_below] < *key {
                found_below += 1;
            }
            let rank = place + found_below;
            if rank >= kept {
                break;
            }
            scores.push((slot_of(*key), keyword_reciprocal(rank)));
        }
        let keyword_only = scores.len();
        let mut rank = 0;
        let mut keyword_found = std::collections::HashSet::with_capacity(self.found.len());
        for (key, below) in self.found.iter().zip(&self.before) {
            rank += below;
            let slot = slot_of(*key);
            keyword_found.insert(slot);
            let vector = vector_rank
                .get(&slot)
                .map_or(0.0, |rank| vector_reciprocal(vector_weight, *rank));
            scores.push((slot, keyword_reciprocal(rank) + vector));
        }
        scores.extend(
            semantic
                .iter()
                .enumerate()
                .filter(|(_, (slot, similarity))| {
                    floor.is_some_and(|floor| *similarity >= floor) && !keyword_found.contains(slot)
                })
                .map(|(rank, (slot, _))| (*slot, vector_reciprocal(vector_weight, rank))),
        );
        let omitted = self.offered - keyword_only - self.found.len();
        Fused {
            total: scores.len() + omitted,
            scores,
            omitted,
        }
    }
}

/// The keyword pass of a fused search: the shown matches are counted and streamed through
/// `KeywordRanks`, the scores of those a vector found looked up first.
pub(super) struct Fusion<'c, 'r, S> {
    pub(super) shown: &'r S,
    pub(super) by_vector: &'r SlotSet,
    /// The slots a vector found.
    pub(super) ahead: Vec<u32>,
    pub(super) tally: Tally<'c>,
    pub(super) ranks: KeywordRanks,
    /// How many agents of the whole catalogue the query's words match, filters aside (0 when
    /// the catalogue knows none of its words).
    pub(super) worded: usize,
}

impl<S: Fn(u32) -> bool + Sync> MatchVisitor for Fusion<'_, '_, S> {
    fn ahead(&self) -> &[u32] {
        &self.ahead
    }

    fn scored_ahead(&mut self, found: Vec<(u32, f32)>, matches: usize) {
        self.worded = matches;
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
            worded: self.worded,
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
pub(super) fn keyword_depth_after(cursor: &Cursor) -> usize {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    /// Every keyword match ranked by sorting them all: the reference.
    fn fuse_by_sorting(
        keyword: &[(u32, f32)],
        semantic: &[(u32, f32)],
        vector_weight: f64,
        depth: usize,
    ) -> Fused {
        let mut ordered: Vec<u64> = keyword
            .iter()
            .map(|(slot, score)| keyword_order_key(*slot, *score))
            .collect();
        ordered.sort_unstable();
        let vector_rank: HashMap<u32, usize> = semantic
            .iter()
            .enumerate()
            .map(|(rank, (slot, _))| (*slot, rank))
            .collect();
        let mut scores = Vec::new();
        let mut omitted = 0;
        for (rank, key) in ordered.iter().enumerate() {
            let slot = slot_of(*key);
            match vector_rank.get(&slot) {
                Some(v) => scores.push((
                    slot,
                    keyword_reciprocal(rank) + vector_reciprocal(vector_weight, *v),
                )),
                None if rank < depth => scores.push((slot, keyword_reciprocal(rank))),
                None => omitted += 1,
            }
        }
        for (rank, (slot, _)) in semantic.iter().enumerate() {
            if !keyword.iter().any(|(s, _)| s == slot) {
                scores.push((*slot, vector_reciprocal(vector_weight, rank)));
            }
        }
        Fused {
            total: scores.len() + omitted,
            scores,
            omitted,
        }
    }

    fn streamed(
        keyword: &[(u32, f32)],
        semantic: &[(u32, f32)],
        vector_weight: f64,
        depth: usize,
        expected: usize,
    ) -> Fused {
        let by_vector: std::collections::HashSet<u32> =
            semantic.iter().map(|(slot, _)| *slot).collect();
        let mut ranks = KeywordRanks::new(depth);
        for (slot, score) in keyword {
            if by_vector.contains(slot) {
                ranks.peek(*slot, *score);
            }
        }
        ranks.counting(expected);
        for (slot, score) in keyword {
            ranks.offer(*slot, *score, by_vector.contains(slot));
        }
        ranks.fuse(semantic, vector_weight, Some(f32::NEG_INFINITY))
    }

    fn sorted(mut scores: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
        scores.sort_unstable_by_key(|(slot, _)| *slot);
        scores
    }

    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self
                .0
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn streamed_fusion_scores_exactly_like_sorting_every_match() {
        let mut rng = Rng(0x5eed_f00d);
        for round in 0..60 {
            let matches = 1 + rng.below(if round % 4 == 0 { 20_000 } else { 700 }) as u32;
            // Few distinct scores in some rounds (ties everywhere), many in others.
            let levels = [3, 40, 1_000_000][round % 3];
            let keyword: Vec<(u32, f32)> = (0..matches)
                .map(|i| {
                    // Slots out of order, as segments and slots need not agree.
                    let slot = (i * 7919) % (matches + 13) + 1;
                    (slot, (1 + rng.below(levels)) as f32 / 7.0)
                })
                .collect::<HashMap<u32, f32>>()
                .into_iter()
                .collect();
            let mut semantic: Vec<(u32, f32)> = Vec::new();
            for i in 0..rng.below(120) {
                let slot = rng.below(u64::from(matches) + 300) as u32;
                if !semantic.iter().any(|(s, _)| *s == slot) {
                    semantic.push((slot, 1.0 - i as f32 / 200.0));
                }
            }
            let weight = [0.5, 1.0, 2.0][round % 3];
            let depth = [0, 1, 10, 110, 300, usize::MAX][round % 6];
            // Streams told the wrong length still count right (with or without the table).
            let expected = [keyword.len(), 0, 1 << 20][round % 3];
            let reference = fuse_by_sorting(&keyword, &semantic, weight, depth);
            let fused = streamed(&keyword, &semantic, weight, depth, expected);
            assert_eq!(fused.total, reference.total, "round {round}");
            assert_eq!(fused.omitted, reference.omitted, "round {round}");
            assert_eq!(
                sorted(fused.scores),
                sorted(reference.scores),
                "round {round}"
            );
        }
    }

    #[test]
    fn the_keyword_order_key_orders_like_the_comparator() {
        let order = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        let scores = [
            f32::NEG_INFINITY,
            -2.5,
            -0.0,
            0.0,
            1e-30,
            0.5,
            0.5000001,
            7.25,
            f32::INFINITY,
        ];
        let entries: Vec<(u32, f32)> = scores
            .iter()
            .flat_map(|score| [(3, *score), (1, *score), (u32::MAX, *score)])
            .collect();
        for a in &entries {
            for b in &entries {
                assert_eq!(
                    keyword_order_key(a.0, a.1).cmp(&keyword_order_key(b.0, b.1)),
                    order(a, b),
                    "{a:?} vs {b:?}"
                );
            }
        }
    }
}
