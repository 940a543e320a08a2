//! The filterable facets of indexed agents (target, category, tags, verification level) as
//! sets of slots, so a filter becomes a few unions and one intersection of bitsets instead of
//! string comparisons against every match. Payment filters stay a per-agent test (their grammar
//! does not reduce to set membership), run once per query over the survivors of the others.

use std::collections::HashMap;

use crate::store::VerificationLevel;

use super::Filters;

/// A set of slots, one bit each.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotSet {
    words: Vec<u64>,
}

impl SlotSet {
    pub fn contains(&self, slot: u32) -> bool {
        self.words
            .get(slot as usize / 64)
            .is_some_and(|word| word & (1 << (slot % 64)) != 0)
    }

    pub fn insert(&mut self, slot: u32) {
        let index = slot as usize / 64;
        if self.words.len() <= index {
            self.words.resize(index + 1, 0);
        }
        self.words[index] |= 1 << (slot % 64);
    }

    pub fn remove(&mut self, slot: u32) {
        if let Some(word) = self.words.get_mut(slot as usize / 64) {
            *word &= !(1 << (slot % 64));
        }
    }

    fn is_empty(&self) -> bool {
        self.words.iter().all(|word| *word == 0)
    }

    fn union_with(&mut self, other: &SlotSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (word, add) in self.words.iter_mut().zip(&other.words) {
            *word |= add;
        }
    }

    fn intersect_with(&mut self, other: &SlotSet) {
        self.words.truncate(other.words.len());
        for (word, keep) in self.words.iter_mut().zip(&other.words) {
            *word &= keep;
        }
    }

    /// The slots in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.words.iter().enumerate().flat_map(|(index, word)| {
            let mut bits = *word;
            std::iter::from_fn(move || {
                if bits == 0 {
                    return None;
                }
                let bit = bits.trailing_zeros();
                bits &= bits - 1;
                Some(index as u32 * 64 + bit)
            })
        })
    }
}

/// The facet values of one agent, lowercase, as filters compare them.
#[derive(Debug, Clone)]
pub struct Facets {
    pub target: Option<String>,
    pub category: Option<String>,
    pub tags: Vec<String>,
    pub verification_level: VerificationLevel,
}

/// For every facet value, the slots of the agents that have it.
#[derive(Default)]
pub struct FacetIndex {
    targets: HashMap<String, SlotSet>,
    categories: HashMap<String, SlotSet>,
    tags: HashMap<String, SlotSet>,
    levels: HashMap<VerificationLevel, SlotSet>,
    /// Every slot holding an agent.
    live: SlotSet,
}

impl FacetIndex {
    pub fn insert(&mut self, slot: u32, facets: &Facets) {
        self.live.insert(slot);
        if let Some(target) = &facets.target {
            self.targets.entry(target.clone()).or_default().insert(slot);
        }
        if let Some(category) = &facets.category {
            self.categories
                .entry(category.clone())
                .or_default()
                .insert(slot);
        }
        for tag in &facets.tags {
            self.tags.entry(tag.clone()).or_default().insert(slot);
        }
        self.levels
            .entry(facets.verification_level)
            .or_default()
            .insert(slot);
    }

    /// Forget `slot`, which held an agent with `facets`.
    pub fn remove(&mut self, slot: u32, facets: &Facets) {
        self.live.remove(slot);
        fn forget<K: std::hash::Hash + Eq>(sets: &mut HashMap<K, SlotSet>, key: &K, slot: u32) {
            if let Some(set) = sets.get_mut(key) {
                set.remove(slot);
                if set.is_empty() {
                    sets.remove(key);
                }
            }
        }
        if let Some(target) = &facets.target {
            forget(&mut self.targets, target, slot);
        }
        if let Some(category) = &facets.category {
            forget(&mut self.categories, category, slot);
        }
        for tag in &facets.tags {
            forget(&mut self.tags, tag, slot);
        }
        forget(&mut self.levels, &facets.verification_level, slot);
    }

    /// The slots whose facets pass every facet filter of `filters` (payment filters are not
    /// facets: the caller tests those). `None` when no facet filter is set.
    pub fn matching(&self, filters: &Filters) -> Option<SlotSet> {
        fn any_of<K: std::hash::Hash + Eq>(
            sets: &HashMap<K, SlotSet>,
            wanted: &[K],
        ) -> Option<SlotSet> {
            if wanted.is_empty() {
                return None;
            }
            let mut union = SlotSet::default();
            for set in wanted.iter().filter_map(|key| sets.get(key)) {
                union.union_with(set);
            }
            Some(union)
        }
        let mut result: Option<SlotSet> = None;
        for set in [
            any_of(&self.targets, &filters.targets),
            any_of(&self.categories, &filters.categories),
            any_of(&self.tags, &filters.tags),
            any_of(&self.levels, &filters.verification_levels),
        ]
        .into_iter()
        .flatten()
        {
            match &mut result {
                None => result = Some(set),
                Some(result) => result.intersect_with(&set),
            }
        }
        result
    }

    /// Every slot holding an agent.
    pub fn live(&self) -> &SlotSet {
        &self.live
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::RawFilters;

    fn facets(target: &str, category: &str, tags: &[&str], level: VerificationLevel) -> Facets {
        Facets {
            target: Some(target.to_owned()),
            category: Some(category.to_owned()),
            tags: tags.iter().map(|t| (*t).to_owned()).collect(),
            verification_level: level,
        }
    }

    fn filters(raw: RawFilters) -> Filters {
        Filters::parse(&raw).expect("valid filters")
    }

    fn slots(set: Option<SlotSet>) -> Vec<u32> {
        set.expect("a facet filter").iter().collect()
    }

    #[test]
    fn slot_sets_hold_any_slot_and_iterate_in_order() {
        let mut set = SlotSet::default();
        for slot in [200, 0, 63, 64, 5] {
            set.insert(slot);
        }
        set.remove(63);
        set.remove(10_000);
        assert_eq!(set.iter().collect::<Vec<_>>(), [0, 5, 64, 200]);
        assert!(set.contains(200) && !set.contains(63) && !set.contains(99_999));
    }

    #[test]
    fn filters_are_unions_within_a_facet_and_intersections_across() {
        use VerificationLevel::{DomainVerified, Unverified};
        let mut index = FacetIndex::default();
        index.insert(
            0,
            &facets("mcp", "finance", &["crypto", "prices"], Unverified),
        );
        index.insert(1, &facets("a2a", "finance", &["stocks"], DomainVerified));
        index.insert(
            2,
            &facets("mcp", "travel", &["flights", "prices"], DomainVerified),
        );
        index.insert(70, &facets("mcp", "finance", &["stocks"], Unverified));

        assert_eq!(index.matching(&Filters::default()), None);
        let tags = |t: &str| RawFilters {
            tags: Some(t.to_owned()),
            ..RawFilters::default()
        };
        assert_eq!(
            slots(index.matching(&filters(tags("prices,stocks")))),
            [0, 1, 2, 70]
        );
        assert_eq!(
            slots(index.matching(&filters(tags("unknown")))),
            Vec::<u32>::new()
        );
        let narrow = RawFilters {
            target: Some("MCP".to_owned()),
            category: Some("finance".to_owned()),
            tags: Some("stocks,crypto".to_owned()),
            ..RawFilters::default()
        };
        assert_eq!(slots(index.matching(&filters(narrow))), [0, 70]);
        let verified = RawFilters {
            verification_level: Some("domain_verified".to_owned()),
            ..RawFilters::default()
        };
        assert_eq!(slots(index.matching(&filters(verified))), [1, 2]);

        index.remove(70, &facets("mcp", "finance", &["stocks"], Unverified));
        assert_eq!(slots(index.matching(&filters(tags("stocks")))), [1]);
        assert_eq!(index.live().iter().collect::<Vec<_>>(), [0, 1, 2]);
        assert!(
            !index.tags.values().any(SlotSet::is_empty),
            "empty sets are dropped"
        );
    }
}
