//! Retrieval: the agents a query matches within the filters, by keywords (BM25, streamed from
//! the keyword index) and by meaning (the nearest vectors), each match counted once; the
//! keyword-only ranking goes straight to the page, the two rankings to fusion.

use std::collections::HashSet;

use super::analyse;
use super::catalog::Catalog;
use super::facets::{self, SlotSet};
use super::fusion::{Fusion, KeywordRanks};
use super::page::{Matches, Reach, Scored, TopHits};
use super::text::{self, MatchVisitor};
use super::{Mode, SearchIndex, SearchRequest, embed};

/// How many nearest neighbours join the keyword matches as semantic matches (those at least
/// as similar as the embedder's floor, `Embedder::min_similarity`).
pub(super) const VECTOR_DEPTH: usize = 100;

impl SearchIndex {
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
        let embedder = self.embedder();
        let floor = self.similarity_floor(embedder.as_deref());
        let nearest = || {
            vectors.nearest_within(
                query_vector,
                VECTOR_DEPTH,
                embed::DEFAULT_MIN_SIMILARITY,
                allowed.as_ref(),
                |slot| shown(slot) && catalog.doc(slot).is_some(),
            )
        };
        // The keyword matches stream past the vector matches once, each counted against them.
        // With feedback, the matches are what the query's own words match and the neighbours
        // that match by themselves (`own`, see `vector_floor`), and the neighbours the added
        // words match too (near in meaning and sharing the words of the nearest): the added
        // words find nothing else by themselves.
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
        // Every neighbour re-ranks the keyword matches it is among. Ranking by meaning alone,
        // every neighbour is a match; beside the keywords, only those at least as similar as
        // the embedder's floor (none: they only re-rank), and only when the catalogue knows
        // some word of the query (`worded`): every query has neighbours, and a query of words
        // no agent uses (`zzzqqq`) is understood by no embedder.
        let vector_floor = |worded: bool| {
            if self.mode == Mode::Vector {
                Some(f32::NEG_INFINITY)
            } else {
                floor.filter(|_| worded)
            }
        };
        // A sentence's keyword query may be expanded by the words of its nearest agents
        // (pseudo-relevance feedback): then those are found first, not beside.
        let feedback = self
            .feedback()
            .filter(|_| self.mode == Mode::Hybrid && analyse::is_sentence(&request.text))
            .map(|feedback| {
                let mut own = OwnMatches(SlotSet::default());
                self.keyword_matches(&request.text, &mut own);
                let mut own = own.0;
                let worded = own.iter().next().is_some();
                let semantic = nearest();
                if let Some(floor) = vector_floor(worded) {
                    for (slot, similarity) in &semantic {
                        if *similarity >= floor {
                            own.insert(*slot);
                        }
                    }
                }
                let documents: Vec<String> = semantic
                    .iter()
                    .take(feedback.docs)
                    .filter_map(|(slot, _)| catalog.doc(*slot))
                    .map(|doc| feedback_text(&doc.listing))
                    .collect();
                let terms = self.text.feedback_terms(
                    &request.text,
                    &documents,
                    feedback.terms,
                    feedback.weight,
                );
                (semantic, terms, own, worded)
            });
        let (semantic, mut tally, ranks, worded) = if self.mode == Mode::Vector {
            fuse(nearest(), None, None)
        } else {
            let keyword_search_failed = |err: &text::TextIndexError| {
                tracing::error!(error = %err, "keyword search failed");
            };
            match feedback {
                Some((semantic, terms, own, worded)) => {
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
        let floor = vector_floor(worded);
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
}

/// What pseudo-relevance feedback reads of an agent: the words that say what it does.
fn feedback_text(listing: &super::Listing) -> String {
    let mut text = format!("{}\n{}", listing.name(), listing.description());
    for part in listing.tags().chain(listing.capabilities()) {
        text.push('\n');
        text.push_str(part);
    }
    text
}

/// The agents a text's own words match, whatever their scores: with feedback, only these (and
/// the matches by meaning) are matches.
struct OwnMatches(SlotSet);

impl MatchVisitor for OwnMatches {
    fn visit(&mut self, slot: u32, _score: f32) {
        self.0.insert(slot);
    }
}

/// The matches a search counts, with their facet values when asked for.
pub(super) struct Tally<'c> {
    pub(super) catalog: &'c Catalog,
    pub(super) counter: Option<facets::FacetCounter<'c>>,
    pub(super) total: usize,
}

impl Tally<'_> {
    #[inline(always)]
    pub(super) fn add(&mut self, slot: u32) {
        self.total += 1;
        if let Some(counter) = self.counter.as_mut() {
            counter.add(slot, self.catalog.health_status(slot));
        }
    }

    /// An empty tally for part of the matches, to `merge` back.
    pub(super) fn split(&self) -> Self {
        Self {
            catalog: self.catalog,
            counter: self.counter.as_ref().map(facets::FacetCounter::fresh),
            total: 0,
        }
    }

    pub(super) fn merge(&mut self, other: Self) {
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
    pub(super) shown: &'r S,
    prior: &'r P,
    pub(super) tally: Tally<'c>,
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
