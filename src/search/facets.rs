//! The filterable facets of indexed agents (target, category, tags, verification level) as
//! sorted slot lists, so a filter becomes a few unions and one intersection of bitsets built
//! from them instead of string comparisons against every match. Lists, not a bitset per value:
//! most tags are rare, and a bitset per tag would cost memory in proportion to the catalogue. Payment filters stay a per-agent test (their grammar
//! does not reduce to set membership), run once per query over the survivors of the others.
//!
//! For facet counts (`counts`), each agent's category and tags are also kept as small interned
//! ids per slot, so counting a match is a few array increments rather than hashing strings.

use std::collections::{BTreeMap, HashMap};

use crate::domain::payment::PaymentModel;
use crate::store::VerificationLevel;

use super::Filters;
use super::counts::{FacetCounts, TOP_TAGS};
use super::listing::Strs;
use crate::domain::HealthStatus;
use crate::domain::scan::Severity;

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

    pub fn intersect_with(&mut self, other: &SlotSet) {
        self.words.truncate(other.words.len());
        for (word, keep) in self.words.iter_mut().zip(&other.words) {
            *word &= keep;
        }
    }

    pub fn union_with(&mut self, other: &SlotSet) {
        if self.words.len() < other.words.len() {
            self.words.resize(other.words.len(), 0);
        }
        for (word, add) in self.words.iter_mut().zip(&other.words) {
            *word |= add;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.words.iter().all(|word| *word == 0)
    }

    /// The slots in the set, ascending.
    pub fn iter(&self) -> impl Iterator<Item = u32> + '_ {
        self.iter_part(0..self.words.len())
    }

    /// The slots of one part of the set (a range of its 64-slot words), ascending.
    pub fn iter_part(&self, words: std::ops::Range<usize>) -> impl Iterator<Item = u32> + '_ {
        let start = words.start.min(self.words.len());
        let end = words.end.clamp(start, self.words.len());
        self.words[start..end]
            .iter()
            .enumerate()
            .flat_map(move |(index, word)| {
                let mut bits = *word;
                let base = (start + index) as u32 * 64;
                std::iter::from_fn(move || {
                    if bits == 0 {
                        return None;
                    }
                    let bit = bits.trailing_zeros();
                    bits &= bits - 1;
                    Some(base + bit)
                })
            })
    }

    /// The set in two parts (ranges of words for `iter_part`) holding about as many slots
    /// each.
    pub fn halves(&self) -> [std::ops::Range<usize>; 2] {
        let total: u32 = self.words.iter().map(|word| word.count_ones()).sum();
        let mut seen = 0;
        let middle = self
            .words
            .iter()
            .position(|word| {
                seen += word.count_ones();
                2 * seen >= total
            })
            .map_or(self.words.len(), |at| at + 1);
        [0..middle, middle..self.words.len()]
    }
}

/// The facet values of one agent, lowercase, as filters compare them. Its tags and published
/// category are not copied here: the facet index reads them from the listing (`Facetted`).
#[derive(Debug, Clone)]
pub struct Facets {
    pub target: Option<String>,
    pub category: Option<String>,
    pub verification_level: VerificationLevel,
    /// `None` when the agent states no payment terms.
    pub payment_model: Option<PaymentModel>,
    /// The worst finding of the scanner in the agent's texts (`none` when clean).
    pub severity: Severity,
    /// The publisher deprecated it.
    pub deprecated: bool,
}

/// What the facet index reads of one agent: its facets, and its tags and category as listed.
#[derive(Debug, Clone, Copy)]
pub struct Facetted<'a> {
    pub facets: &'a Facets,
    /// The category as published (the lowercase `facets.category` is what it is grouped by).
    pub category_label: Option<&'a str>,
    pub tags: Strs<'a>,
}

/// Distinct values (categories, or tags) interned as small ids while some agent carries them.
#[derive(Default)]
struct Values {
    ids: HashMap<String, u32>,
    /// By id; `None` for an id free to reuse.
    entries: Vec<Option<Entry>>,
    free: Vec<u32>,
}

struct Entry {
    key: String,
    agents: u32,
    /// Spellings as published, with how many agents use each.
    labels: Vec<(String, u32)>,
}

impl Values {
    fn acquire(&mut self, key: &str, label: &str) -> u32 {
        let id = match self.ids.get(key) {
            Some(id) => *id,
            None => {
                let entry = Entry {
                    key: key.to_owned(),
                    agents: 0,
                    labels: Vec::new(),
                };
                let id = match self.free.pop() {
                    Some(id) => {
                        self.entries[id as usize] = Some(entry);
                        id
                    }
                    None => {
                        self.entries.push(Some(entry));
                        u32::try_from(self.entries.len() - 1).unwrap_or(u32::MAX)
                    }
                };
                self.ids.insert(key.to_owned(), id);
                id
            }
        };
        if let Some(Some(entry)) = self.entries.get_mut(id as usize) {
            entry.agents += 1;
            match entry.labels.iter_mut().find(|(known, _)| known == label) {
                Some((_, count)) => *count += 1,
                None => entry.labels.push((label.to_owned(), 1)),
            }
        }
        id
    }

    fn release(&mut self, id: u32, label: &str) {
        let Some(slot) = self.entries.get_mut(id as usize) else {
            return;
        };
        let Some(entry) = slot.as_mut() else {
            return;
        };
        if let Some(at) = entry.labels.iter().position(|(known, _)| known == label) {
            entry.labels[at].1 -= 1;
            if entry.labels[at].1 == 0 {
                entry.labels.swap_remove(at);
            }
        }
        entry.agents -= 1;
        if entry.agents == 0 {
            self.ids.remove(&entry.key);
            *slot = None;
            self.free.push(id);
        }
    }

    /// How many ids exist (free ones included): the size of a count array.
    fn len(&self) -> usize {
        self.entries.len()
    }

    fn key(&self, id: u32) -> &str {
        self.entries
            .get(id as usize)
            .and_then(Option::as_ref)
            .map_or("", |entry| entry.key.as_str())
    }

    /// The spelling most agents published (ties: the first in byte order).
    fn label(&self, id: u32) -> &str {
        self.entries
            .get(id as usize)
            .and_then(Option::as_ref)
            .and_then(|entry| {
                entry
                    .labels
                    .iter()
                    .min_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)))
                    .map(|(label, _)| label.as_str())
            })
            .unwrap_or_else(|| self.key(id))
    }
}

/// One agent's facet values as ids, for counting: twelve bytes per slot, its tags a range of
/// one shared array, so counting many matches reads memory in order rather than chasing a
/// pointer per agent.
#[derive(Clone, Copy)]
struct Counted {
    /// `NO_VALUE` when the agent has no category.
    category: u32,
    tags_start: u32,
    tags_len: u16,
    /// `PaymentModel` as an index of `PaymentModel::ALL`; `NO_MODEL` without payment terms.
    payment_model: u8,
    /// `Severity` as an index of `Severity::ALL`.
    severity: u8,
    deprecated: bool,
}

const NO_VALUE: u32 = u32::MAX;
const NO_MODEL: u8 = u8::MAX;

impl Counted {
    const EMPTY: Self = Self {
        category: NO_VALUE,
        tags_start: 0,
        tags_len: 0,
        payment_model: NO_MODEL,
        severity: 0,
        deprecated: false,
    };

    fn tags(self) -> std::ops::Range<usize> {
        let start = self.tags_start as usize;
        start..start + usize::from(self.tags_len)
    }
}

/// Where a payment model is counted: its index in `PaymentModel::ALL`.
fn model_index(model: PaymentModel) -> u8 {
    match model {
        PaymentModel::Free => 0,
        PaymentModel::Paid => 1,
        PaymentModel::Freemium => 2,
    }
}

/// `tag_pool` is compacted once this many of its entries, and half of it, are unused.
const COMPACT_AFTER: usize = 4096;

/// Ascending slots; at most one entry per slot.
type SlotList = Vec<u32>;

/// For every facet value, the slots of the agents that have it.
#[derive(Default)]
pub struct FacetIndex {
    targets: HashMap<String, SlotList>,
    categories: HashMap<String, SlotList>,
    tags: HashMap<String, SlotList>,
    levels: HashMap<VerificationLevel, SlotList>,
    severities: HashMap<Severity, SlotList>,
    /// The slots of deprecated agents (`true`) and of the others.
    deprecations: HashMap<bool, SlotList>,
    /// Every slot holding an agent.
    live: SlotSet,
    category_values: Values,
    tag_values: Values,
    /// By slot.
    counted: Vec<Counted>,
    /// The tag ids of every slot, each slot's in one range (`Counted::tags`).
    tag_pool: Vec<u32>,
    /// Entries of `tag_pool` no slot refers to any more (left by updates and removals).
    tag_garbage: usize,
}

fn insert_slot<K: std::hash::Hash + Eq>(lists: &mut HashMap<K, SlotList>, key: K, slot: u32) {
    let list = lists.entry(key).or_default();
    if let Err(at) = list.binary_search(&slot) {
        list.insert(at, slot);
    }
}

fn remove_slot<K, Q>(lists: &mut HashMap<K, SlotList>, key: &Q, slot: u32)
where
    K: std::hash::Hash + Eq + std::borrow::Borrow<Q>,
    Q: std::hash::Hash + Eq + ?Sized,
{
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
    pub fn insert(&mut self, slot: u32, of: Facetted<'_>) {
        let facets = of.facets;
        self.live.insert(slot);
        if let Some(target) = &facets.target {
            insert_slot(&mut self.targets, target.clone(), slot);
        }
        if let Some(category) = &facets.category {
            insert_slot(&mut self.categories, category.clone(), slot);
        }
        for tag in of.tags {
            insert_slot(&mut self.tags, tag.to_owned(), slot);
        }
        insert_slot(&mut self.levels, facets.verification_level, slot);
        insert_slot(&mut self.severities, facets.severity, slot);
        insert_slot(&mut self.deprecations, facets.deprecated, slot);
        let category = facets.category.as_deref().map_or(NO_VALUE, |key| {
            let label = of.category_label.unwrap_or(key);
            self.category_values.acquire(key, label)
        });
        let index = slot as usize;
        if self.counted.len() <= index {
            self.counted.resize(index + 1, Counted::EMPTY);
        }
        // A slot written again without a removal first leaves its old range unused.
        self.tag_garbage += usize::from(self.counted[index].tags_len);
        let tags_start = u32::try_from(self.tag_pool.len()).unwrap_or(u32::MAX);
        let tags_len = u16::try_from(of.tags.len()).unwrap_or(u16::MAX);
        for tag in of.tags.take(usize::from(tags_len)) {
            let id = self.tag_values.acquire(tag, tag);
            self.tag_pool.push(id);
        }
        self.counted[index] = Counted {
            category,
            tags_start,
            tags_len,
            payment_model: facets.payment_model.map_or(NO_MODEL, model_index),
            severity: u8::try_from(facets.severity.index()).unwrap_or(0),
            deprecated: facets.deprecated,
        };
    }

    /// Drop the unused entries of `tag_pool` once they are many; amortised over the writes that
    /// left them, so a write costs O(1) on average.
    fn compact_tags(&mut self) {
        if self.tag_garbage < COMPACT_AFTER || self.tag_garbage * 2 < self.tag_pool.len() {
            return;
        }
        let mut pool = Vec::with_capacity(self.tag_pool.len() - self.tag_garbage);
        for counted in &mut self.counted {
            let start = u32::try_from(pool.len()).unwrap_or(u32::MAX);
            pool.extend_from_slice(&self.tag_pool[counted.tags()]);
            counted.tags_start = start;
        }
        self.tag_pool = pool;
        self.tag_garbage = 0;
    }

    /// Forget `slot`, which held an agent with these facets.
    pub fn remove(&mut self, slot: u32, of: Facetted<'_>) {
        let facets = of.facets;
        self.live.remove(slot);
        if let Some(target) = &facets.target {
            remove_slot(&mut self.targets, target, slot);
        }
        if let Some(category) = &facets.category {
            remove_slot(&mut self.categories, category, slot);
        }
        for tag in of.tags {
            remove_slot(&mut self.tags, tag, slot);
        }
        remove_slot(&mut self.levels, &facets.verification_level, slot);
        remove_slot(&mut self.severities, &facets.severity, slot);
        remove_slot(&mut self.deprecations, &facets.deprecated, slot);
        if let Some(counted) = self.counted.get_mut(slot as usize) {
            let counted = std::mem::replace(counted, Counted::EMPTY);
            if counted.category != NO_VALUE {
                let label = of
                    .category_label
                    .or(facets.category.as_deref())
                    .unwrap_or_default();
                self.category_values.release(counted.category, label);
            }
            for (id, tag) in self.tag_pool[counted.tags()].iter().zip(of.tags) {
                self.tag_values.release(*id, tag);
            }
            self.tag_garbage += usize::from(counted.tags_len);
            self.compact_tags();
        }
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
            any_of(&self.severities, &filters.severities),
            any_of(
                &self.deprecations,
                if filters.include_deprecated {
                    &[]
                } else {
                    &[false]
                },
            ),
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

    /// Whether the agent in `slot` is deprecated.
    pub fn is_deprecated(&self, slot: u32) -> bool {
        self.counted
            .get(slot as usize)
            .is_some_and(|counted| counted.deprecated)
    }

    /// Every slot holding an agent.
    pub fn live(&self) -> &SlotSet {
        &self.live
    }

    /// A tally of facet values, to which a search adds its matches one by one.
    pub fn counter(&self) -> FacetCounter<'_> {
        FacetCounter {
            index: self,
            categories: vec![0; self.category_values.len()],
            tags: vec![0; self.tag_values.len()],
            payment_models: [0; PaymentModel::ALL.len()],
            health: [0; HealthStatus::ALL.len()],
            security: [0; Severity::ALL.len()],
        }
    }
}

/// Counts of facet values over a set of agents, each added once. Adding an agent costs a few
/// array increments; finishing costs in proportion to the distinct values of the index.
pub struct FacetCounter<'a> {
    index: &'a FacetIndex,
    /// By value id.
    categories: Vec<u32>,
    tags: Vec<u32>,
    /// In the order of `PaymentModel::ALL` and `HealthStatus::ALL`.
    payment_models: [u32; 3],
    health: [u32; HealthStatus::ALL.len()],
    /// In the order of `Severity::ALL`.
    security: [u32; Severity::ALL.len()],
}

impl FacetCounter<'_> {
    /// Count the agent in `slot`, whose health is `health`.
    pub fn add(&mut self, slot: u32, health: HealthStatus) {
        let Some(counted) = self.index.counted.get(slot as usize).copied() else {
            return;
        };
        if let Some(count) = self.categories.get_mut(counted.category as usize) {
            *count += 1;
        }
        for id in &self.index.tag_pool[counted.tags()] {
            if let Some(count) = self.tags.get_mut(*id as usize) {
                *count += 1;
            }
        }
        if let Some(count) = self
            .payment_models
            .get_mut(usize::from(counted.payment_model))
        {
            *count += 1;
        }
        self.health[health.index()] += 1;
        if let Some(count) = self.security.get_mut(usize::from(counted.severity)) {
            *count += 1;
        }
    }

    /// A tally of the same index with nothing counted yet: for part of a search's matches,
    /// counted on another thread and then `merge`d.
    pub fn fresh(&self) -> Self {
        self.index.counter()
    }

    /// Add what `other` (from `fresh`) counted.
    pub fn merge(&mut self, other: Self) {
        for (count, more) in self.categories.iter_mut().zip(other.categories) {
            *count += more;
        }
        for (count, more) in self.tags.iter_mut().zip(other.tags) {
            *count += more;
        }
        for (count, more) in self.payment_models.iter_mut().zip(other.payment_models) {
            *count += more;
        }
        for (count, more) in self.health.iter_mut().zip(other.health) {
            *count += more;
        }
        for (count, more) in self.security.iter_mut().zip(other.security) {
            *count += more;
        }
    }

    /// The counts: every category, the `TOP_TAGS` most frequent tags (ties by name), every
    /// payment model and health status that occurs.
    pub fn finish(self) -> FacetCounts {
        let values = &self.index.category_values;
        let mut category: BTreeMap<String, usize> = BTreeMap::new();
        for (id, count) in self.categories.iter().enumerate() {
            if *count > 0 {
                *category
                    .entry(values.label(id as u32).to_owned())
                    .or_default() += *count as usize;
            }
        }
        let tags = top_tags(&self.tags, &self.index.tag_values);
        let present = |counts: &[u32], names: &[&'static str]| {
            names
                .iter()
                .zip(counts)
                .filter(|(_, count)| **count > 0)
                .map(|(name, count)| ((*name).to_owned(), *count as usize))
                .collect()
        };
        FacetCounts {
            category,
            tags: tags
                .into_iter()
                .map(|(tag, count)| (tag.to_owned(), count as usize))
                .collect(),
            payment_model: present(
                &self.payment_models,
                &PaymentModel::ALL.map(PaymentModel::as_str),
            ),
            health: present(&self.health, &HealthStatus::ALL.map(HealthStatus::as_str)),
            security: present(&self.security, &Severity::ALL.map(Severity::as_str)),
        }
    }
}

/// The `TOP_TAGS` most counted tags, ties by name. Counts are compared first as integers alone
/// (the 20th highest count is a threshold); names only among the tags at the threshold.
fn top_tags<'v>(counts: &[u32], values: &'v Values) -> Vec<(&'v str, u32)> {
    let mut counted: Vec<(u32, u32)> = counts
        .iter()
        .enumerate()
        .filter(|(_, count)| **count > 0)
        .map(|(id, count)| (id as u32, *count))
        .collect();
    if counted.len() > TOP_TAGS {
        counted.select_nth_unstable_by(TOP_TAGS - 1, |a, b| b.1.cmp(&a.1));
        let threshold = counted[TOP_TAGS - 1].1;
        let mut above: Vec<(u32, u32)> = Vec::with_capacity(TOP_TAGS);
        let mut tied: Vec<(u32, u32)> = Vec::new();
        for entry in counted {
            match entry.1.cmp(&threshold) {
                std::cmp::Ordering::Greater => above.push(entry),
                std::cmp::Ordering::Equal => tied.push(entry),
                std::cmp::Ordering::Less => {}
            }
        }
        let wanted = TOP_TAGS - above.len();
        if tied.len() > wanted {
            tied.select_nth_unstable_by(wanted - 1, |a, b| values.key(a.0).cmp(values.key(b.0)));
            tied.truncate(wanted);
        }
        above.extend(tied);
        counted = above;
    }
    counted
        .into_iter()
        .map(|(id, count)| (values.key(id), count))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_slot_set_splits_into_two_parts_of_about_as_many_slots() {
        let mut set = SlotSet::default();
        // Crowded at the start, sparse after: halving the words would not halve the slots.
        let slots: Vec<u32> = (0..500).chain((500..20_000).step_by(97)).collect();
        for slot in &slots {
            set.insert(*slot);
        }
        let [first, second] = set.halves();
        assert_eq!(first.end, second.start);
        let (a, b): (Vec<u32>, Vec<u32>) = (
            set.iter_part(first).collect(),
            set.iter_part(second).collect(),
        );
        // The word where the halves meet goes whole to the first: up to 64 slots.
        assert!(
            a.len().abs_diff(b.len()) <= 128,
            "{} and {}",
            a.len(),
            b.len()
        );
        assert_eq!([a, b].concat(), slots);
        assert_eq!(set.iter_part(0..usize::MAX).collect::<Vec<_>>(), slots);
        let (start, end) = (3, 2);
        assert_eq!(set.iter_part(start..end).count(), 0, "a reversed range");
        assert_eq!(SlotSet::default().halves(), [0..0, 0..0]);
    }
    use crate::search::RawFilters;

    /// An agent's facets with the tags and category its listing would hold.
    struct Described {
        facets: Facets,
        label: Option<String>,
        tags: crate::search::listing::Packed,
    }

    impl Described {
        fn of(&self) -> Facetted<'_> {
            Facetted {
                facets: &self.facets,
                category_label: self.label.as_deref(),
                tags: self.tags.all(),
            }
        }
    }

    fn facets(target: &str, category: &str, tags: &[&str], level: VerificationLevel) -> Described {
        Described {
            facets: Facets {
                target: Some(target.to_owned()),
                category: Some(category.to_owned()),
                verification_level: level,
                payment_model: None,
                severity: Severity::None,
                deprecated: false,
            },
            label: None,
            tags: crate::search::listing::Packed::of(tags.iter().copied()),
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
            facets("mcp", "finance", &["crypto", "prices"], Unverified).of(),
        );
        index.insert(
            1,
            facets("a2a", "finance", &["stocks"], DomainVerified).of(),
        );
        index.insert(
            2,
            facets("mcp", "travel", &["flights", "prices"], DomainVerified).of(),
        );
        index.insert(70, facets("mcp", "finance", &["stocks"], Unverified).of());

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

        index.remove(70, facets("mcp", "finance", &["stocks"], Unverified).of());
        assert_eq!(slots(index.matching(&filters(tags("stocks")))), [1]);
        assert_eq!(index.live().iter().collect::<Vec<_>>(), [0, 1, 2]);
        assert_eq!(index.tags["stocks"], [1]);
        index.remove(
            1,
            facets("a2a", "finance", &["stocks"], DomainVerified).of(),
        );
        assert!(
            !index.tags.contains_key("stocks"),
            "empty lists are dropped"
        );
    }

    fn labelled(category: &str, tags: &[&str], model: Option<PaymentModel>) -> Described {
        Described {
            facets: Facets {
                target: None,
                category: Some(category.to_lowercase()),
                verification_level: VerificationLevel::Unverified,
                payment_model: model,
                severity: Severity::None,
                deprecated: false,
            },
            label: Some(category.to_owned()),
            tags: crate::search::listing::Packed::of(tags.iter().copied()),
        }
    }

    fn count(index: &FacetIndex, slots: &[u32]) -> FacetCounts {
        let mut counter = index.counter();
        for slot in slots {
            counter.add(*slot, HealthStatus::Unknown);
        }
        counter.finish()
    }

    fn map(entries: &[(&str, usize)]) -> BTreeMap<String, usize> {
        entries.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    }

    #[test]
    fn counts_cover_the_given_slots_and_group_categories_as_filters_do() {
        use PaymentModel::{Free, Paid};
        let mut index = FacetIndex::default();
        index.insert(0, labelled("AI", &["llm", "chat"], Some(Free)).of());
        index.insert(1, labelled("ai", &["llm"], Some(Paid)).of());
        index.insert(2, labelled("AI", &["vision"], None).of());
        index.insert(3, labelled("Finance", &["crypto"], Some(Free)).of());

        let all = count(&index, &[0, 1, 2, 3]);
        assert_eq!(
            all.category,
            map(&[("AI", 3), ("Finance", 1)]),
            "most agents spell it AI"
        );
        assert_eq!(
            all.tags,
            map(&[("chat", 1), ("crypto", 1), ("llm", 2), ("vision", 1)])
        );
        assert_eq!(
            all.payment_model,
            map(&[("free", 2), ("paid", 1)]),
            "no terms: not counted"
        );
        assert_eq!(all.health, map(&[("unknown", 4)]));
        let some = count(&index, &[1, 3]);
        assert_eq!(
            some.category,
            map(&[("AI", 1), ("Finance", 1)]),
            "the catalogue's spelling"
        );
        assert_eq!(count(&index, &[]), FacetCounts::default());

        // Removing agents releases their values; ids are reused, counts stay right.
        index.remove(0, labelled("AI", &["llm", "chat"], Some(Free)).of());
        index.remove(2, labelled("AI", &["vision"], None).of());
        index.insert(4, labelled("Weather", &["forecast", "chat"], None).of());
        let after = count(&index, &[1, 3, 4]);
        assert_eq!(
            after.category,
            map(&[("Finance", 1), ("Weather", 1), ("ai", 1)]),
            "now the only spelling"
        );
        assert_eq!(
            after.tags,
            map(&[("chat", 1), ("crypto", 1), ("forecast", 1), ("llm", 1)])
        );
        assert!(index.tag_values.len() <= 5, "freed ids were reused");
    }

    #[test]
    fn only_the_most_frequent_tags_are_listed_ties_by_name() {
        let mut index = FacetIndex::default();
        let names: Vec<String> = (0..TOP_TAGS + 5).map(|i| format!("tag{i:02}")).collect();
        let mut slot = 0;
        for (i, name) in names.iter().enumerate() {
            // tag00 on one agent, tag01 on two, …: except the last five, all on one agent.
            let copies = if i >= TOP_TAGS { 1 } else { 2 + i % 3 };
            for _ in 0..copies {
                index.insert(slot, labelled("x", &[name.as_str()], None).of());
                slot += 1;
            }
        }
        let counts = count(&index, &(0..slot).collect::<Vec<_>>());
        assert_eq!(counts.tags.len(), TOP_TAGS);
        assert!(
            counts.tags.values().all(|count| *count >= 2),
            "{:?}",
            counts.tags
        );
        // With ties at the cut, the first names win.
        let mut index = FacetIndex::default();
        for (slot, name) in names.iter().enumerate() {
            index.insert(slot as u32, labelled("x", &[name.as_str()], None).of());
        }
        let counts = count(&index, &(0..names.len() as u32).collect::<Vec<_>>());
        let listed: Vec<&String> = counts.tags.keys().collect();
        assert_eq!(listed, names.iter().take(TOP_TAGS).collect::<Vec<_>>());
    }

    #[test]
    fn rewriting_agents_many_times_compacts_the_tag_ids_and_keeps_counts_right() {
        for model in PaymentModel::ALL {
            assert_eq!(PaymentModel::ALL[usize::from(model_index(model))], model);
        }
        for health in HealthStatus::ALL {
            assert_eq!(HealthStatus::ALL[health.index()], health);
        }
        let mut index = FacetIndex::default();
        let version = |round: usize, slot: u32| {
            labelled(
                if slot.is_multiple_of(2) {
                    "Even"
                } else {
                    "Odd"
                },
                &[&format!("round{round}"), "always"],
                Some(PaymentModel::Free),
            )
        };
        let mut current: Vec<Described> = (0..10).map(|slot| version(0, slot)).collect();
        for (slot, facets) in current.iter().enumerate() {
            index.insert(slot as u32, facets.of());
        }
        for round in 1..=3 * COMPACT_AFTER {
            let slot = round % 10;
            index.remove(slot as u32, current[slot].of());
            current[slot] = version(round, slot as u32);
            index.insert(slot as u32, current[slot].of());
            assert!(
                index.tag_pool.len() <= COMPACT_AFTER + 2 * 10 + 2,
                "round {round}"
            );
        }
        assert!(index.tag_values.len() < 100, "released ids are reused");
        let counts = count(&index, &(0..10).collect::<Vec<_>>());
        assert_eq!(counts.category, map(&[("Even", 5), ("Odd", 5)]));
        assert_eq!(counts.tags.get("always"), Some(&10));
        assert_eq!(counts.tags.values().sum::<usize>(), 20);
        assert_eq!(counts.payment_model, map(&[("free", 10)]));
    }
}
