//! The filterable facets of indexed agents (target, category, tags, verification level) as
//! sorted slot lists, so a filter becomes a few unions and one intersection of bitsets built
//! from them instead of string comparisons against every match. Lists, not a bitset per value:
//! most tags are rare, and a bitset per tag would cost memory in proportion to the catalogue. Payment filters stay a per-agent test (their grammar
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

/// Ascending slots; at most one entry per slot.
type SlotList = Vec<u32>;

/// For every facet value, the slots of the agents that have it.
#[derive(Default)]
pub struct FacetIndex {
    targets: HashMap<String, SlotList>,
    categories: HashMap<String, SlotList>,
    tags: HashMap<String, SlotList>,
    levels: HashMap<VerificationLevel, SlotList>,
    /// Every slot holding an agent.
    live: SlotSet,
}

fn insert_slot<K: std::hash::Hash + Eq>(lists: &mut HashMap<K, SlotList>, key: K, slot: u32) {
    let list = lists.entry(key).or_default();
    if let Err(at) = list.binary_search(&slot) {
        list.insert(at, slot);
    }
}

fn remove_slot<K: std::hash::Hash + Eq>(lists: &mut HashMap<K, SlotList>, key: &K, slot: u32) {
    if let Some(list) = lists.get_mut(key) {
        if let Ok(at) = list.binary_search(&slot) {
            list.remove(at);
        }
        if list.is_empty() {
            lists.remove(key);
        }
    }
}

/// The slots of any of the `wanted` values; `None` when nothing is wanted (no filter).
fn any_of<K: std::hash::Hash + Eq>(lists: &HashMap<K, SlotList>, wanted: &[K]) -> Option<SlotSet> {
    if wanted.is_empty() {
        return None;
    }
    let mut union = SlotSet::default();
    for slot in wanted.iter().filter_map(|key| lists.get(key)).flatten() {
        union.insert(*slot);
    }
    Some(union)
}

impl FacetIndex {
    pub fn insert(&mut self, slot: u32, facets: &Facets) {
        self.live.insert(slot);
        if let Some(target) = &facets.target {
            insert_slot(&mut self.targets, target.clone(), slot);
        }
        if let Some(category) = &facets.category {
            insert_slot(&mut self.categories, category.clone(), slot);
        }
        for tag in &facets.tags {
            insert_slot(&mut self.tags, tag.clone(), slot);
        }
        insert_slot(&mut self.levels, facets.verification_level, slot);
    }

    /// Forget `slot`, which held an agent with `facets`.
    pub fn remove(&mut self, slot: u32, facets: &Facets) {
        self.live.remove(slot);
        if let Some(target) = &facets.target {
            remove_slot(&mut self.targets, target, slot);
        }
        if let Some(category) = &facets.category {
            remove_slot(&mut self.categories, category, slot);
        }
        for tag in &facets.tags {
            remove_slot(&mut self.tags, tag, slot);
        }
        remove_slot(&mut self.levels, &facets.verification_level, slot);
    }

    /// The slots whose facets pass every facet filter of `filters` (payment filters are not
    /// facets: the caller tests those). `None` when no facet filter is set.
    pub fn matching(&self, filters: &Filters) -> Option<SlotSet> {
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
        assert_eq!(index.tags["stocks"], [1]);
        index.remove(1, &facets("a2a", "finance", &["stocks"], DomainVerified));
        assert!(
            !index.tags.contains_key("stocks"),
            "empty lists are dropped"
        );
    }
}
