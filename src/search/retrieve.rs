//! Retrieval: the agents a query matches within the filters, by keywords (BM25, streamed from
//! the keyword index to whatever visits them) and by meaning (the nearest vectors), with the
//! rules that say which neighbours are matches and the words pseudo-relevance feedback adds to
//! a sentence's keyword query. What ranks the matches comes after: `fusion`, then `page`.

use super::analyse;
use super::catalog::Catalog;
use super::facets::SlotSet;
use super::hit::VECTOR_DEPTH;
use super::text::MatchVisitor;
use super::vectors::VectorStore;
use super::{Mode, SearchIndex};
use crate::embed;

/// The neighbours by meaning of `query` among the agents `shown` lets through (of the
/// filters' slots, `allowed`, when there is a filter), most similar first.
pub(super) fn neighbours(
    vectors: &VectorStore,
    query: &[f32],
    allowed: Option<&SlotSet>,
    catalog: &Catalog,
    shown: &(impl Fn(u32) -> bool + Sync),
) -> Vec<(u32, f32)> {
    vectors.nearest_within(
        query,
        VECTOR_DEPTH,
        embed::DEFAULT_MIN_SIMILARITY,
        allowed,
        |slot| shown(slot) && catalog.doc(slot).is_some(),
    )
}

/// A sentence's keyword query expanded by pseudo-relevance feedback.
pub(super) struct Expansion {
    /// The query's neighbours by meaning, most similar first.
    pub(super) semantic: Vec<(u32, f32)>,
    /// The words added to the keyword query, with their weights.
    pub(super) terms: Vec<(String, f32)>,
    /// The matches: what the query's own words match, and the neighbours that match by
    /// themselves. The added words re-rank them and find nothing by themselves.
    pub(super) own: SlotSet,
    /// Whether the catalogue knows some word of the query.
    pub(super) worded: bool,
}

impl SearchIndex {
    /// Every neighbour re-ranks the keyword matches it is among. Ranking by meaning alone,
    /// every neighbour is a match; beside the keywords, only those at least as similar as
    /// the embedder's `floor` (none: they only re-rank), and only when the catalogue knows
    /// some word of the query (`worded`): every query has neighbours, and a query of words
    /// no agent uses (`zzzqqq`) is understood by no embedder.
    pub(super) fn vector_floor(&self, floor: Option<f32>, worded: bool) -> Option<f32> {
        if self.mode == Mode::Vector {
            Some(f32::NEG_INFINITY)
        } else {
            floor.filter(|_| worded)
        }
    }

    /// A sentence's keyword query may be expanded by the words of its nearest agents
    /// (pseudo-relevance feedback, in hybrid ranking): then those are found first, not beside
    /// the keyword matches. `None`: no feedback for this query.
    pub(super) fn feedback_expansion(
        &self,
        catalog: &Catalog,
        text: &str,
        nearest: impl FnOnce() -> Vec<(u32, f32)>,
        floor: Option<f32>,
    ) -> Option<Expansion> {
        let feedback = self
            .feedback()
            .filter(|_| self.mode == Mode::Hybrid && analyse::is_sentence(text))?;
        let mut own = OwnMatches(SlotSet::default());
        self.keyword_matches(text, &mut own);
        let mut own = own.0;
        let worded = own.iter().next().is_some();
        let semantic = nearest();
        if let Some(floor) = self.vector_floor(floor, worded) {
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
        let terms = self
            .text
            .feedback_terms(text, &documents, feedback.terms, feedback.weight);
        Some(Expansion {
            semantic,
            terms,
            own,
            worded,
        })
    }

    /// Every keyword match of `text` (none when ranking by vectors alone), to `visit`: generic,
    /// not a trait object, so that the per-match work compiles into the scoring loop.
    pub(super) fn keyword_matches(&self, text: &str, visitor: &mut (impl MatchVisitor + Send)) {
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
