//! The page, the last stage: the order results are served in, the keyset cursor that
//! continues it, and the selection of a page's hits from any number of matches, without
//! ordering them all; then what a search returns, which the transports map to their wire
//! shapes.
//!
//! The page pulls what it needs through the stages before it (`SearchIndex::matches`): it
//! knows how many hits it must rank (`Reach`), retrieval streams the keyword matches either
//! straight into its selection (keyword ranking alone) or into fusion's keyword ranks, with
//! the neighbours by meaning, and the fused scores come back to its selection.

use std::cmp::Ordering;
use std::collections::HashSet;
use std::sync::Arc;

use super::catalog::Catalog;
use super::facets::{self, SlotSet};
use super::fusion::{Fusion, KeywordRanks, keyword_depth_after};
use super::hit::{Cursor, Scored, Tally, VECTOR_DEPTH};
use super::retrieve::{Expansion, neighbours};
use super::text::{self, MatchVisitor};
use super::{FacetCounts, Listing, MAX_LIMIT, Mode, SearchIndex, SearchRequest, Sort};

/// The factor a deprecated agent's relevance is multiplied by: below an otherwise equal agent,
/// never hidden from a strong match.
pub const DEPRECATED_PRIOR: f64 = 0.9;

impl SearchIndex {
    /// The page `request` asks for, after `cursor`, ranked with `query_vector` when there is
    /// one.
    pub(super) fn page(
        &self,
        catalog: &Catalog,
        request: &SearchRequest,
        query_vector: Option<&[f32]>,
        cursor: Option<&Cursor>,
    ) -> SearchPage {
        let sort = request.effective_sort();
        let limit = request.limit.clamp(1, MAX_LIMIT);
        let mut bounds = Reach::new(sort, cursor, request.offset, limit);
        let mut found = self.matches(catalog, request, query_vector, &bounds);
        if found.omitted > 0 && found.hits.len() < bounds.keep {
            // Cannot happen when `keyword_depth_after` is right; stay correct if it is not.
            tracing::warn!(
                depth = bounds.depth,
                "fused ranking was cut too short; ranking every match"
            );
            bounds.depth = usize::MAX;
            bounds.keep = usize::MAX;
            found = self.matches(catalog, request, query_vector, &bounds);
        }
        found.into_page(sort, request.offset, limit, catalog)
    }

    /// Every match of `request` in its order, as one page without end.
    pub(super) fn every_match(
        &self,
        catalog: &Catalog,
        request: &SearchRequest,
        query_vector: Option<&[f32]>,
    ) -> Vec<Hit> {
        let sort = request.effective_sort();
        let mut bounds = Reach::new(sort, None, 0, 1);
        bounds.depth = usize::MAX;
        bounds.keep = usize::MAX;
        let found = self.matches(catalog, request, query_vector, &bounds);
        let page = found.into_page(sort, 0, usize::MAX, catalog);
        page.hits
    }

    /// The agents that pass the filters and match the text (all of them without text), with
    /// their relevance scores; of those after the cursor, only the `keep` first in order are
    /// kept and the rest counted. With both rankings, keyword matches ranked below `depth`
    /// (and not found by meaning) are counted but left out: see `fuse`.
    pub(super) fn matches<'c>(
        &self,
        catalog: &'c Catalog,
        request: &SearchRequest,
        query_vector: Option<&[f32]>,
        reach: &Reach<'_>,
    ) -> Matches<'c> {
        // Each match costs a bit test or two: the filters' set (the live agents when nothing is
        // filtered), and the duplicates hidden by collapsing. The document is read only for
        // hits that can reach the page.
        // Private agents the viewer may not see are outside the search from the start, as a
        // filter is: no count, facet or page holds them.
        let visible = catalog.visible(&request.viewer);
        let allowed = catalog.allowed(&request.filters, visible.set());
        let base = allowed.as_ref().unwrap_or(visible.set());
        let hidden = request
            .filters
            .collapse_duplicates
            .then(|| catalog.groups.hidden());
        let shown = |slot: u32| base.contains(slot) && hidden.is_none_or(|set| !set.contains(slot));
        // Agents the prober found not answering, and deprecated ones, sink a little (the prior
        // never exceeds 1).
        let prior = |slot: u32, score: f64| {
            let deprecated = if catalog.facets.is_deprecated(slot) {
                DEPRECATED_PRIOR
            } else {
                1.0
            };
            score * catalog.health_status(slot).ranking_prior() * deprecated
        };
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
        // A query embedded just before `switch_embedder` swapped the vectors has the old
        // length: it ranks by keywords alone.
        let vectors = query_vector
            .zip(catalog.vectors.as_ref())
            .filter(|(query, vectors)| query.len() == vectors.dim());
        let Some((query_vector, vectors)) = vectors else {
            // Keyword ranking alone: every match streams through the page's selection, and
            // most matches of a common word are only counted.
            // Without a filter or facets, a match's only effect below the page's floor is to
            // be counted, and the search counts those 64 documents at a time.
            // The bits count the public matches; a caller who sees private agents too has
            // the other matches handed over one by one (`visits_unshown`), few of them.
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
                live: &catalog.public,
                hidden,
            });
            let mut keyword = KeywordOnly {
                shown: &shown,
                prior: &prior,
                tally,
                top,
                counted_by_documents,
                // The third variant: every private agent, the only ones a caller may see
                // beyond the public.
                unshown: (!catalog.is_public(&visible)).then(|| text::ShownFilter {
                    variant: 2,
                    version: self
                        .catalog_version
                        .load(std::sync::atomic::Ordering::Relaxed),
                    live: &catalog.private_slots,
                    hidden: None,
                }),
            };
            self.keyword_matches(&request.text, &mut keyword);
            let KeywordOnly { tally, top, .. } = keyword;
            return top.into_matches(tally.total, 0, tally.counter);
        };
        let embedder = self.embedder();
        let floor = self.similarity_floor(embedder.as_deref());
        let nearest = || neighbours(vectors, query_vector, allowed.as_ref(), catalog, &shown);
        // The keyword matches stream past the vector matches once, each counted against them.
        // With feedback, the matches are what the query's own words match and the neighbours
        // that match by themselves (`own`, see `feedback_expansion`), and the neighbours the
        // added words match too (near in meaning and sharing the words of the nearest): the
        // added words find nothing else by themselves.
        let fuse = |semantic: Vec<(u32, f32)>,
                    matches: Option<text::Matches<'_>>,
                    own: Option<&SlotSet>| {
            let mut by_vector = SlotSet::default();
            for (slot, _) in &semantic {
                by_vector.insert(*slot);
            }
            let matched = |slot: u32| {
                shown(slot) && own.is_none_or(|own| own.contains(slot) || by_vector.contains(slot))
            };
            let mut fusion = Fusion {
                shown: &matched,
                by_vector: &by_vector,
                ahead: semantic.iter().map(|(slot, _)| *slot).collect(),
                tally,
                ranks: KeywordRanks::new(reach.depth),
                worded: 0,
            };
            if let Some(matches) = matches {
                matches.visit(&mut fusion);
            }
            let worded = fusion.worded > 0;
            let Fusion { tally, ranks, .. } = fusion;
            (semantic, tally, ranks, worded)
        };
        let feedback = self.feedback_expansion(catalog, &request.text, nearest, floor);
        let (semantic, mut tally, ranks, worded) = if self.mode == Mode::Vector {
            fuse(nearest(), None, None)
        } else {
            let keyword_search_failed = |err: &text::TextIndexError| {
                tracing::error!(error = %err, "keyword search failed");
            };
            match feedback {
                Some(Expansion {
                    semantic,
                    terms,
                    own,
                    worded,
                }) => {
                    let (semantic, tally, ranks, _) = self.text.search_beside(
                        &request.text,
                        &terms,
                        false,
                        || semantic,
                        |semantic, matches| {
                            let matches = matches.inspect_err(keyword_search_failed).ok();
                            fuse(semantic, matches, Some(&own))
                        },
                    );
                    (semantic, tally, ranks, worded)
                }
                // A large store's vector search takes the other core while the keyword
                // matches are scored.
                None => self.text.search_beside(
                    &request.text,
                    &[],
                    vectors.searches_long(),
                    nearest,
                    |semantic, matches| {
                        fuse(
                            semantic,
                            matches.inspect_err(keyword_search_failed).ok(),
                            None,
                        )
                    },
                ),
            }
        };
        let floor = self.vector_floor(floor, worded);
        if request.facets
            && let Some(floor) = floor
        {
            // The vector matches no keyword found; the keyword ones were counted as visited.
            let keyword_found: HashSet<u32> = ranks.found_slots().collect();
            for (slot, similarity) in &semantic {
                if *similarity >= floor && !keyword_found.contains(slot) {
                    tally.add(*slot);
                }
            }
        }
        let weight = embedder.map_or(1.0, |embedder| embedder.fusion_weight());
        let fused = ranks.fuse(&semantic, weight, floor);
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
}

/// The keyword pass of a keyword-only search: the shown matches are counted and offered to
/// the page's selection (most of a common word's matches rank below its cut and are only
/// counted, their documents never read).
struct KeywordOnly<'c, 'r, S, P> {
    pub(super) shown: &'r S,
    prior: &'r P,
    pub(super) tally: Tally<'c>,
    top: TopHits<'c, 'r>,
    /// `shown` as the text index's filter, when it may count the shown matches itself
    /// (`MatchVisitor::shown_filter`): one variant per value of duplicate collapsing, the only
    /// filter it is offered with.
    counted_by_documents: Option<text::ShownFilter<'r>>,
    /// When the caller sees more than the public agents the document bits count: the
    /// private agents, whose matches are visited one by one.
    unshown: Option<text::ShownFilter<'r>>,
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

    fn unshown_filter(&self) -> Option<text::ShownFilter<'_>> {
        self.unshown
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
            unshown: self.unshown,
        })
    }

    fn merge(&mut self, other: Self) {
        self.tally.merge(other.tally);
        self.top.merge(other.top);
    }
}

/// What a search found: the hits after the cursor that can reach the page, and how many
/// matches there are.
pub(super) struct Matches<'c> {
    pub(super) hits: Vec<Scored<'c>>,
    /// Every match, the ones before the cursor included.
    pub(super) total: usize,
    /// Matches after the cursor counted in `total` but not in `hits`; each ranks below every
    /// hit.
    pub(super) omitted: usize,
    /// Facet counts over the `total` matches, when asked for.
    pub(super) facets: Option<FacetCounts>,
}

impl Matches<'_> {
    /// The page of these matches: the `limit` hits after the `offset` skipped ones, in order,
    /// and a cursor after the last when more follow.
    pub(super) fn into_page(
        self,
        sort: Sort,
        offset: usize,
        limit: usize,
        catalog: &Catalog,
    ) -> SearchPage {
        let Matches {
            mut hits,
            total,
            omitted,
            facets,
        } = self;
        let reach = offset.saturating_add(limit);
        let more = hits.len() > reach || omitted > 0;
        // Only the page (and what it skips) is ordered: selecting it is linear, sorting every
        // match is not.
        if hits.len() > reach {
            hits.select_nth_unstable_by(reach - 1, |a, b| compare(sort, a, b));
            hits.truncate(reach);
        }
        hits.sort_unstable_by(|a, b| compare(sort, a, b));
        hits.drain(..offset.min(hits.len()));
        let next_cursor = match hits.last() {
            Some(last) if more => Some(cursor_after(sort, last).encode()),
            _ => None,
        };
        let with_score = sort == Sort::Relevance;
        SearchPage {
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
        }
    }
}

/// What a search must rank: the order, where the previous page ended, and how many hits in
/// that order it needs.
pub(super) struct Reach<'a> {
    pub(super) sort: Sort,
    pub(super) cursor: Option<&'a Cursor>,
    /// Hits kept, in order after the cursor: the page, what it skips, and one more, so that a
    /// next page shows.
    pub(super) keep: usize,
    /// Keyword matches fused in full (see `fuse`).
    pub(super) depth: usize,
}

impl<'a> Reach<'a> {
    /// What a page of `limit` hits after `offset` more (and after the cursor) needs ranked.
    pub(super) fn new(sort: Sort, cursor: Option<&'a Cursor>, offset: usize, limit: usize) -> Self {
        // The matches the page is cut from: the skipped ones and the page itself.
        let reach = offset.saturating_add(limit);
        // Relevance pages need only the keyword matches that can still reach them (see
        // `fuse`); any other order needs every match.
        let depth = match (sort, cursor) {
            (Sort::Relevance, None) => reach.saturating_add(VECTOR_DEPTH),
            (Sort::Relevance, Some(cursor)) => keyword_depth_after(cursor)
                .saturating_add(reach)
                .saturating_add(VECTOR_DEPTH),
            _ => usize::MAX,
        };
        Self {
            sort,
            cursor,
            keep: reach.saturating_add(1),
            depth,
        }
    }
}

/// The first `keep` hits after the cursor in the order of `sort`, of any number offered,
/// without ordering them all: the buffer is cut back to `keep` by selection whenever it holds
/// twice that, and an offer ranked below the last hit kept at the latest cut is only counted.
/// A query of common words matches most of the catalogue; a page shows twenty of them.
pub(super) struct TopHits<'c, 'r> {
    pub(super) reach: &'r Reach<'r>,
    pub(super) hits: Vec<Scored<'c>>,
    /// The last hit kept at the latest cut: nothing ranked below it can reach the page.
    pub(super) floor: Option<Scored<'c>>,
    /// Offers after the cursor that cannot reach the page.
    pub(super) dropped: usize,
}

impl<'c, 'r> TopHits<'c, 'r> {
    pub(super) fn new(reach: &'r Reach<'r>) -> Self {
        Self {
            reach,
            hits: Vec::new(),
            floor: None,
            dropped: 0,
        }
    }

    pub(super) fn offer(&mut self, hit: Scored<'c>) {
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
    pub(super) fn floor_score(&self) -> f64 {
        match &self.floor {
            Some(floor) if self.reach.sort == Sort::Relevance => floor.score,
            _ => f64::NEG_INFINITY,
        }
    }

    /// Whether a hit of relevance `score` ranks below the cut, so that it cannot reach the page
    /// whatever its id: then it is counted as dropped. (The last hit kept is after the cursor,
    /// so such a hit is too.) Always false in the other orders.
    pub(super) fn drops(&mut self, score: f64) -> bool {
        let below = score < self.floor_score();
        if below {
            self.dropped += 1;
        }
        below
    }

    /// Take in the hits of another selection for the same page (part of the same matches).
    pub(super) fn merge(&mut self, other: Self) {
        self.dropped += other.dropped;
        for hit in other.hits {
            self.offer(hit);
        }
    }

    pub(super) fn cut(&mut self) {
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
    pub(super) fn into_matches(
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

/// The total order of results for `sort`; ids break every tie, so the order is stable.
pub(super) fn compare(sort: Sort, a: &Scored<'_>, b: &Scored<'_>) -> Ordering {
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

pub(super) fn cursor_after(sort: Sort, last: &Scored<'_>) -> Cursor {
    Cursor {
        sort,
        score: (sort == Sort::Relevance).then_some(last.score.to_bits()),
        time: matches!(sort, Sort::Newest | Sort::Oldest).then_some(last.doc.published_micros),
        name: (sort == Sort::Name).then(|| last.doc.name_key.to_string()),
        id: last.doc.id.to_string(),
    }
}

/// One result: the agent's listing and, when ranked by relevance, its score.
#[derive(Debug, Clone)]
pub struct Hit {
    pub listing: Arc<Listing>,
    /// Higher is better; comparable within one page only. `None` unless sorted by relevance.
    pub score: Option<f64>,
    /// What the prober last found; `None` when the agent was never probed.
    pub health: Option<Arc<crate::domain::Health>>,
}

/// One page of results.
#[derive(Debug, Clone)]
pub struct SearchPage {
    pub hits: Vec<Hit>,
    /// Matches for the query and filters, over all pages.
    pub total: usize,
    /// The page size used (after clamping).
    pub limit: usize,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
    /// Counts per facet value over every match, when the request asked for them.
    pub facets: Option<super::FacetCounts>,
}
