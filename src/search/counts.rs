//! Facet counts: how many of a search's matches fall in each category, tag, payment model and
//! health status, for clients that offer those as filters (`facets=true`).
//!
//! Counted over every match of the query and filters after duplicates collapse, the same set
//! `total` counts, not over the page. The counting itself is `facets::FacetCounter`.

use std::collections::BTreeMap;

use super::Listing;

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
    /// `up`, `down`, `not_conformant`, `unknown`.
    pub health: BTreeMap<String, usize>,
}

/// Whether an agent answers as its card says, as far as the registry knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    Up,
    Down,
    NotConformant,
    Unknown,
}

impl Health {
    pub const ALL: [Self; 4] = [Self::Up, Self::Down, Self::NotConformant, Self::Unknown];

    /// Its place in `ALL`.
    pub fn index(self) -> usize {
        match self {
            Self::Up => 0,
            Self::Down => 1,
            Self::NotConformant => 2,
            Self::Unknown => 3,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Up => "up",
            Self::Down => "down",
            Self::NotConformant => "not_conformant",
            Self::Unknown => "unknown",
        }
    }
}

/// The health a search counts an agent under. The registry does not probe agents yet, so every
/// agent is `unknown`; this is the one place to read a probed status from once there is one.
pub fn health_of(_listing: &Listing) -> Health {
    Health::Unknown
}
