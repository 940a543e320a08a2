//! Facet counts: how many of a search's matches fall in each category, tag, payment model and
//! health status, for clients that offer those as filters (`facets=true`).
//!
//! Counted over every match of the query and filters after duplicates collapse, the same set
//! `total` counts, not over the page. The counting itself is `facets::FacetCounter`.

use std::collections::BTreeMap;

/// How many tags a count lists: the most frequent, ties broken by name.
pub const TOP_TAGS: usize = 20;

/// The counts of one search. Values absent from the matches are absent here (no zero counts).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FacetCounts {
    /// By category, case-insensitively grouped as the `category` filter compares them, named by
    /// the spelling most agents of the catalogue published.
    pub category: BTreeMap<String, usize>,
    /// The `TOP_TAGS` most frequent tags (lowercase, as filters compare them).
    pub tags: BTreeMap<String, usize>,
    /// `free`, `paid`, `freemium`: as the `payment_model` filter names them. Agents that state
    /// no payment terms are not counted (no `payment_model` filter matches them either).
    pub payment_model: BTreeMap<String, usize>,
    /// `up`, `down`, `not_conformant`, `unknown`, `not_probed`.
    pub health: BTreeMap<String, usize>,
    /// By the worst finding of the scanner: `none` (clean), `low`, `medium`, `high`,
    /// `critical`.
    pub security: BTreeMap<String, usize>,
}
