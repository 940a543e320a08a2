//! What every stage of a search shares, beneath them all: a scored match, where the previous
//! page ended, the count of matches, and how deep the vector ranking reaches.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::catalog::{Catalog, Doc};
use super::facets;
use super::{SearchError, Sort};

/// How many nearest neighbours join the keyword matches as semantic matches (those at least
/// as similar as the embedder's floor, `Embedder::min_similarity`).
pub(super) const VECTOR_DEPTH: usize = 100;

#[derive(Clone, Copy)]
pub(super) struct Scored<'c> {
    pub(super) slot: u32,
    pub(super) doc: &'c Doc,
    pub(super) score: f64,
}

/// Where the previous page ended: the last hit's sort key and id.
#[derive(Debug, Serialize, Deserialize)]
pub(super) struct Cursor {
    pub(super) sort: Sort,
    /// The score's exact bits: a JSON float need not parse back to the same `f64`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) score: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) time: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) name: Option<String>,
    pub(super) id: String,
}

impl Cursor {
    pub(super) fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    pub(super) fn decode(text: &str, sort: Sort) -> Result<Self, SearchError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim())
            .map_err(|_| SearchError::InvalidCursor)?;
        let cursor: Cursor =
            serde_json::from_slice(&bytes).map_err(|_| SearchError::InvalidCursor)?;
        let complete = match sort {
            Sort::Relevance => cursor
                .score
                .is_some_and(|bits| f64::from_bits(bits).is_finite()),
            Sort::Newest | Sort::Oldest => cursor.time.is_some(),
            Sort::Name => cursor.name.is_some(),
        };
        if cursor.sort != sort || !complete {
            return Err(SearchError::InvalidCursor);
        }
        Ok(cursor)
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
