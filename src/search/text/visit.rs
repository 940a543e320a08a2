//! Handing a query's scored matches to what the search does with them (`MatchVisitor`): once
//! each, on one core or two, after the scores it asks for ahead; and, for a visitor that only
//! counts the matches a filter shows, counted 64 documents at a time from that filter's
//! document bits.

use std::sync::Arc;

use arc_swap::ArcSwapOption;
use tantivy::DocId;

use super::score::Scores;
use super::{NO_SLOT, Running, Segment, SlotMap};
use crate::search::facets::SlotSet;

/// A query's scored matches, to visit once (see `TextIndex::search_beside`); left unvisited,
/// they are cleared when dropped.
pub struct Matches<'a> {
    pub(super) scored: Option<(&'a [Segment<'a>], Parts<'a>)>,
}

/// The accumulator scored whole, or as two halves each visited on a core of its own.
pub(super) enum Parts<'a> {
    Whole(Scores<'a>),
    Halves(Scores<'a>, Scores<'a>),
}

impl Matches<'_> {
    pub(super) fn none() -> Self {
        Self { scored: None }
    }

    /// Give `visitor` the scores it asks for ahead, then every match.
    pub fn visit<V: MatchVisitor + Send>(mut self, visitor: &mut V) {
        let Some((segments, parts)) = self.scored.take() else {
            return;
        };
        match parts {
            Parts::Whole(mut scores) => {
                look_ahead(segments, &[&scores], visitor);
                visit(segments, &mut scores, visitor);
            }
            Parts::Halves(mut first, mut second) => {
                look_ahead(segments, &[&first, &second], visitor);
                let Some(mut other) = visitor.split() else {
                    visit(segments, &mut first, visitor);
                    visit(segments, &mut second, visitor);
                    return;
                };
                rayon::join(
                    || visit(segments, &mut first, visitor),
                    || visit(segments, &mut second, &mut other),
                );
                visitor.merge(other);
            }
        }
    }
}

impl Drop for Matches<'_> {
    fn drop(&mut self) {
        if let Some((_, parts)) = &mut self.scored {
            parts.clear();
        }
    }
}

impl Parts<'_> {
    /// Leave every entry clear.
    pub(super) fn clear(&mut self) {
        match self {
            Parts::Whole(scores) => scores.drain_all(),
            Parts::Halves(first, second) => {
                first.drain_all();
                second.drain_all();
            }
        }
    }
}

/// Give the visitor the scores of the slots it asks for ahead, if any, from the `parts` of
/// the accumulator.
fn look_ahead(segments: &[Segment<'_>], parts: &[&Scores<'_>], visitor: &mut impl MatchVisitor) {
    let wanted = visitor.ahead();
    if wanted.is_empty() {
        return;
    }
    let mut found = Vec::with_capacity(wanted.len());
    for slot in wanted {
        for segment in segments {
            for doc in segment.part.slots.docs_of(*slot) {
                if segment.alive.is_some_and(|alive| alive.is_deleted(doc)) {
                    continue;
                }
                let at = segment.base + doc as usize;
                if let Some(score) = parts.iter().find_map(|part| part.score_at(at)) {
                    found.push((*slot, score));
                }
            }
        }
    }
    let matches = parts.iter().map(|part| part.touched_count()).sum();
    visitor.scored_ahead(found, matches);
}

/// Visit the matches `scores` holds, leaving it clear.
fn visit(segments: &[Segment<'_>], scores: &mut Scores<'_>, visitor: &mut impl MatchVisitor) {
    for segment in segments {
        let shown = visitor
            .shown_filter()
            .and_then(|filter| segment.shown_docs(&filter));
        match shown {
            Some(shown) => visit_shown(segment, scores, &shown.bits, visitor),
            None => scores.drain(segment, |doc, score| {
                if let Some(slot) = segment.slot(doc) {
                    visitor.visit(slot, score);
                }
            }),
        }
    }
}

/// `visit` for a visitor with a `shown_filter`: the shown matches are counted 64 documents
/// at a time from the filter's document bits (`shown`), and only those scoring at least the
/// visitor's floor are visited. Most matches of a common word are counted, never visited.
fn visit_shown(
    segment: &Segment<'_>,
    scores: &mut Scores<'_>,
    shown: &[u64],
    visitor: &mut impl MatchVisitor,
) {
    let words = scores.words_of(segment);
    // This part's word `w` is the segment's word `first + w - base` (counted in words: parts
    // and segments start at multiples of 64 documents).
    let (first, base) = (scores.first / 64, segment.base / 64);
    let (mut counted, mut below) = (0, 0);
    // The bits of the other slots the visitor may want; all of them when none are built.
    let unshown = visitor
        .unshown_filter()
        .map(|filter| segment.shown_docs(&filter));
    for word in words {
        let touched = std::mem::take(&mut scores.touched[word]);
        if touched == 0 {
            continue;
        }
        let shown_word = (first + word)
            .checked_sub(base)
            .and_then(|at| shown.get(at).copied());
        if let Some(unshown) = &unshown {
            let wanted = match unshown {
                Some(docs) => (first + word)
                    .checked_sub(base)
                    .and_then(|at| docs.bits.get(at).copied())
                    .unwrap_or(0),
                None => u64::MAX,
            };
            let mut rest = touched & !shown_word.unwrap_or(0) & wanted;
            while rest != 0 {
                let at = word * 64 + rest.trailing_zeros() as usize;
                rest &= rest - 1;
                if let Some(slot) = segment.slot(scores.first + at) {
                    visitor.visit(slot, scores.scores[at]);
                }
            }
        }
        let mut hits = touched & shown_word.unwrap_or(0);
        counted += hits.count_ones() as usize;
        let floor = visitor.floor();
        while hits != 0 {
            let bit = hits.trailing_zeros() as usize;
            hits &= hits - 1;
            let at = word * 64 + bit;
            let score = scores.scores[at];
            if f64::from(score) < floor {
                below += 1;
                continue;
            }
            let local = scores.first + at - segment.base;
            if let Some(&slot) = segment.part.slots.slots.get(local) {
                visitor.visit_shown(slot, score);
            }
        }
        // Every touched score back to zero, shown or not.
        let end = (word * 64 + 64).min(scores.scores.len());
        let scores = &mut scores.scores[word * 64..end];
        if touched.count_ones() > 16 {
            scores.fill(0.0);
        } else {
            let mut touched = touched;
            while touched != 0 {
                scores[touched.trailing_zeros() as usize] = 0.0;
                touched &= touched - 1;
            }
        }
    }
    visitor.counted(counted, below);
}

/// What a search does with its matches (any `FnMut(slot, score)` visits them).
pub trait MatchVisitor {
    /// Slots whose scores the visitor needs before its first visit.
    fn ahead(&self) -> &[u32] {
        &[]
    }

    /// The `ahead` slots that match, with their scores (the same `visit` will get), and about
    /// how many matches there are (deleted documents may count).
    fn scored_ahead(&mut self, _found: Vec<(u32, f32)>, _matches: usize) {}

    /// A match: once per matching document, in no particular order.
    fn visit(&mut self, slot: u32, score: f32);

    /// `Some` when what a match does depends only on whether the filter it names shows its
    /// slot (shown matches are counted) and, for a shown one, on whether its score reaches
    /// `floor()`. The search may then count the shown matches from a bit set over the
    /// documents, and hand `visit_shown` only those at the floor or above.
    fn shown_filter(&self) -> Option<ShownFilter<'_>> {
        None
    }

    /// The slots beyond its `shown_filter` that may still be the visitor's (it shows more
    /// than the filter its bits count: a caller's private agents beside the public ones).
    /// Matches among them are handed to `visit`, one by one, which decides; when this
    /// filter's bits are not built yet, every match the shown filter leaves out is.
    fn unshown_filter(&self) -> Option<ShownFilter<'_>> {
        None
    }

    /// Scores under this cannot change what the visitor keeps (with a `shown_filter`).
    fn floor(&self) -> f64 {
        f64::NEG_INFINITY
    }

    /// A match its `shown_filter` shows, already counted by `counted`, scoring at least the
    /// floor.
    fn visit_shown(&mut self, slot: u32, score: f32) {
        self.visit(slot, score);
    }

    /// Shown matches counted without a visit: `shown` in all, `below` of them under the floor.
    fn counted(&mut self, _shown: usize, _below: usize) {}

    /// For a large search: a visitor for part of the matches, visited on another thread at
    /// the same time, then given to `merge`. `None`: this one visits them all.
    fn split(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }

    /// Take in what a visitor from `split` found.
    fn merge(&mut self, _other: Self)
    where
        Self: Sized,
    {
    }
}

/// Which slots a visitor's matches are counted for (`MatchVisitor::shown_filter`).
#[derive(Clone, Copy)]
pub struct ShownFilter<'a> {
    /// Which of the (three) filters a search can name: each keeps its own document bit sets.
    pub variant: usize,
    /// Changes whenever the filter may show a different set of slots.
    pub version: u64,
    /// It shows the slots of `live` that `hidden` does not hold.
    pub live: &'a SlotSet,
    pub hidden: Option<&'a SlotSet>,
}

impl ShownFilter<'_> {
    fn shows(&self, slot: u32) -> bool {
        self.live.contains(slot) && self.hidden.is_none_or(|hidden| !hidden.contains(slot))
    }
}

/// How many filters get document bit sets of their own (`ShownFilter::variant`).
pub const SHOWN_VARIANTS: usize = 3;

/// The documents of one segment a filter shows (alive, with a slot, and shown), one bit each.
struct ShownDocs {
    version: u64,
    bits: Box<[u64]>,
}

/// Segments with fewer documents than this get their `ShownDocs` built by the search that
/// finds them stale (under 0.1 ms), not by a thread started for it.
pub(super) const SHOWN_DOCS_INLINE: usize = 16_384;

/// One segment's `ShownDocs` for one filter variant, and whether a build of newer ones is under
/// way.
#[derive(Default)]
pub(super) struct ShownCache {
    docs: ArcSwapOption<ShownDocs>,
    building: std::sync::atomic::AtomicBool,
}

impl ShownCache {
    /// Keep `docs` unless a newer version is already here.
    fn offer(&self, docs: Arc<ShownDocs>) {
        self.docs.rcu(|current| match current {
            Some(current) if current.version > docs.version => Some(Arc::clone(current)),
            _ => Some(Arc::clone(&docs)),
        });
    }
}

/// A build of `ShownDocs` under way: when dropped, it is over.
struct EndBuild(Arc<ShownCache>, Arc<Running>);

impl Drop for EndBuild {
    fn drop(&mut self) {
        self.0
            .building
            .store(false, std::sync::atomic::Ordering::Release);
        self.1.end();
    }
}

/// The bits of the documents of a segment (`slots`, `alive`) that `filter` shows.
fn build_shown_docs(
    slots: &SlotMap,
    alive: Option<&tantivy::fastfield::AliveBitSet>,
    filter: &ShownFilter<'_>,
) -> ShownDocs {
    let mut bits = vec![0u64; slots.slots.len().div_ceil(64)].into_boxed_slice();
    for (doc, &slot) in slots.slots.iter().enumerate() {
        if slot != NO_SLOT
            && !alive.is_some_and(|alive| alive.is_deleted(doc as DocId))
            && filter.shows(slot)
        {
            bits[doc / 64] |= 1 << (doc % 64);
        }
    }
    ShownDocs {
        version: filter.version,
        bits,
    }
}

impl<F: FnMut(u32, f32)> MatchVisitor for F {
    #[inline(always)]
    fn visit(&mut self, slot: u32, score: f32) {
        self(slot, score)
    }
}

impl Segment<'_> {
    /// The documents `filter` shows, one bit each by document id, if they are built for its
    /// version (and this searcher generation, which a change of the documents makes new).
    /// Otherwise `None`, and the search visits every match: a catalogue change makes every
    /// segment's bits stale, and rebuilding them is a pass over all its documents (5 ms at a
    /// million agents), which no search of a large segment waits for. The first search to find
    /// them stale starts one build on a thread of its own, with copies of the filter's slot
    /// sets; while it runs, more searches find it under way and start none. A small segment's
    /// bits are built on the spot.
    fn shown_docs(&self, filter: &ShownFilter<'_>) -> Option<Arc<ShownDocs>> {
        let cache = self.part.shown.get(filter.variant)?;
        if let Some(docs) = cache.docs.load_full()
            && docs.version == filter.version
        {
            return Some(docs);
        }
        if self.part.slots.slots.len() < self.shown_inline_below {
            let docs = Arc::new(build_shown_docs(&self.part.slots, self.alive, filter));
            cache.offer(Arc::clone(&docs));
            return Some(docs);
        }
        if cache
            .building
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return None;
        }
        let (slots, builds) = (
            Arc::clone(&self.part.slots),
            Arc::clone(&self.part.shown_builds),
        );
        let (alive, live, hidden) = (
            self.alive.cloned(),
            filter.live.clone(),
            filter.hidden.cloned(),
        );
        let (variant, version) = (filter.variant, filter.version);
        builds.start();
        // Ends the build however the thread ends, or when it cannot start.
        let end = EndBuild(Arc::clone(cache), builds);
        let started = std::thread::Builder::new()
            .name("shown-docs".to_owned())
            .spawn(move || {
                let filter = ShownFilter {
                    variant,
                    version,
                    live: &live,
                    hidden: hidden.as_ref(),
                };
                let docs = build_shown_docs(&slots, alive.as_ref(), &filter);
                end.0.offer(Arc::new(docs));
            });
        if let Err(err) = started {
            tracing::warn!(error = %err, "cannot build a filter's document bits");
        }
        None
    }
}
