//! The search index as a whole: pages, counts, fills and restarts across the stages.

use std::collections::HashSet;

use super::fill::{LOOKUPS_ONE_BY_ONE, STORED_PAGE, place_saved};
use super::fusion::{KeywordRanks, keyword_depth_after};
use super::hit::VECTOR_DEPTH;
use super::page::{Reach, compare};
use super::vectors::VectorStore;
use super::*;
use crate::store::{Agent, AgentState};

/// A deterministic xorshift generator.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// Fuse by streaming `keyword` through `KeywordRanks` as a search does.
fn fuse(
    keyword: Vec<(u32, f32)>,
    semantic: Vec<(u32, f32)>,
    weight: f64,
    depth: usize,
) -> fusion::Fused {
    let by_vector: HashSet<u32> = semantic.iter().map(|(slot, _)| *slot).collect();
    let mut ranks = KeywordRanks::new(depth);
    for (slot, score) in &keyword {
        if by_vector.contains(slot) {
            ranks.peek(*slot, *score);
        }
    }
    ranks.counting(keyword.len());
    for (slot, score) in &keyword {
        ranks.offer(*slot, *score, by_vector.contains(slot));
    }
    ranks.fuse(&semantic, weight, Some(f32::NEG_INFINITY))
}

fn ranked(scores: Vec<(u32, f64)>) -> Vec<(u32, f64)> {
    let mut scores = scores;
    scores.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scores
}

/// Page through a fused ranking the way `search_with_vector` does, cutting the keyword
/// ranking at the depth the cursor allows, and compare with fusing every match.
#[test]
fn fusing_only_the_reachable_keyword_matches_pages_exactly_like_fusing_all() {
    let mut rng = Rng(0x0dd_ba11);
    for round in 0..20 {
        // Every weight an embedder may give its ranking (and more) pages the same way.
        let weight = [0.5, 1.0, 2.0][round % 3];
        let matches = 50 + rng.below(600) as u32;
        // Few distinct scores, so keyword ties are common.
        let keyword: Vec<(u32, f32)> = (0..matches)
            .map(|slot| (slot, rng.below(12) as f32 / 4.0))
            .collect();
        let semantic: Vec<(u32, f32)> = (0..VECTOR_DEPTH as u32)
            .map(|i| {
                (
                    rng.below(u64::from(matches) + 200) as u32,
                    1.0 - i as f32 / 200.0,
                )
            })
            .collect::<Vec<_>>()
            .into_iter()
            .fold(Vec::new(), |mut unique, hit| {
                if !unique.iter().any(|(slot, _)| *slot == hit.0) {
                    unique.push(hit);
                }
                unique
            });
        let full = fuse(keyword.clone(), semantic.clone(), weight, usize::MAX);
        assert_eq!(full.omitted, 0);
        let expected = ranked(full.scores);
        let limit = 1 + rng.below(25) as usize;
        let mut served: Vec<(u32, f64)> = Vec::new();
        let mut last: Option<(u32, f64)> = None;
        loop {
            let depth = match last {
                None => limit + VECTOR_DEPTH,
                Some((_, score)) => {
                    let cursor = Cursor {
                        sort: Sort::Relevance,
                        score: Some(score.to_bits()),
                        time: None,
                        name: None,
                        id: String::new(),
                    };
                    keyword_depth_after(&cursor)
                        .saturating_add(limit)
                        .saturating_add(VECTOR_DEPTH)
                }
            };
            let cut = fuse(keyword.clone(), semantic.clone(), weight, depth);
            assert_eq!(cut.total, expected.len(), "round {round}");
            let after: Vec<(u32, f64)> = ranked(cut.scores)
                .into_iter()
                .filter(|hit| {
                    last.is_none_or(|(slot, score)| {
                        hit.1 < score || (hit.1 == score && hit.0 > slot)
                    })
                })
                .collect();
            assert!(cut.omitted == 0 || after.len() > limit, "round {round}");
            let page: Vec<(u32, f64)> = after.into_iter().take(limit).collect();
            if page.is_empty() {
                break;
            }
            last = page.last().copied();
            served.extend(page);
        }
        assert_eq!(served, expected, "round {round}, limit {limit}");
    }
}

/// Twelve ACTIVE agents gone live two at a time, a second apart, in a keyword index; their
/// ids oldest first and newest first (ties by id in both).
async fn live_agents() -> (SearchIndex, Vec<String>, Vec<String>, tempfile::TempDir) {
    let (dir, store) = sqlite_store().await;
    let mut agents = Vec::new();
    for i in 0..12_i64 {
        let draft = crate::domain::AgentDraft::parse(&serde_json::json!({
            "package_name": format!("com.example.agent{i}"),
            "name": format!("Agent {i}"),
            "description": "Forecasts for any city.",
        }))
        .expect("draft");
        let mut agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
        agent.state = AgentState::Active;
        agent.published_at = Some(crate::timestamp::Timestamp::from_micros(
            1_000_000 * (i / 2),
        ));
        agents.push(agent);
    }
    let index = SearchIndex::new(store, None).expect("index");
    index.rebuild_keyword(&agents).await.expect("index");
    let mut order: Vec<(i64, String)> = agents
        .iter()
        .map(|agent| {
            (
                agent.published_at.map_or(0, |t| t.micros()),
                agent.id.clone(),
            )
        })
        .collect();
    order.sort();
    let oldest_first = order.iter().map(|(_, id)| id.clone()).collect();
    order.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    let newest_first = order.into_iter().map(|(_, id)| id).collect();
    (index, oldest_first, newest_first, dir)
}

fn ids(page: &SearchPage) -> Vec<String> {
    page.hits
        .iter()
        .map(|hit| hit.listing.id().to_owned())
        .collect()
}

fn ordered(sort: Sort, limit: usize, offset: usize, cursor: Option<String>) -> SearchRequest {
    SearchRequest {
        text: String::new(),
        filters: Filters::default(),
        sort: Some(sort),
        limit,
        cursor,
        offset,
        facets: false,
        viewer: Default::default(),
    }
}

#[tokio::test]
async fn offset_pages_are_slices_of_the_whole_order() {
    let (index, oldest_first, newest_first, _dir) = live_agents().await;
    let all = index
        .search(&ordered(Sort::Oldest, 100, 0, None))
        .await
        .expect("search");
    assert_eq!(ids(&all), oldest_first);
    for (sort, whole) in [(Sort::Oldest, &oldest_first), (Sort::Newest, &newest_first)] {
        for offset in [0, 1, 5, 11, 12, 40] {
            let page = index
                .search(&ordered(sort, 5, offset, None))
                .await
                .expect("search");
            let expected: Vec<String> = whole.iter().skip(offset).take(5).cloned().collect();
            assert_eq!(ids(&page), expected, "{sort:?} offset {offset}");
            assert_eq!(page.total, 12);
            assert_eq!(page.next_cursor.is_some(), offset + 5 < 12, "{offset}");
        }
    }
    let page = index
        .search(&ordered(Sort::Oldest, 5, usize::MAX, None))
        .await
        .expect("search");
    assert!(page.hits.is_empty());
}

/// Keyword-only searches without a filter count their matches from document bits and
/// visit only those that can reach the page: the pages, totals and next-page cursors are
/// those of visiting every match, with duplicates collapsed or not, on one core or two, and
/// after changes that show, hide and remove agents.
#[tokio::test]
async fn matches_counted_by_documents_page_like_every_match_visited() {
    let (_dir, store) = sqlite_store().await;
    // Every third agent shares a repository with about three others (`shared`):
    // collapsing hides all but one of each.
    let agent = |i: usize, words: &str, shared: bool| {
        let draft = crate::domain::AgentDraft::parse(&serde_json::json!({
            "package_name": format!("com.example.counted{i}"),
            "name": format!("Agent {}", i % 30),
            "description": format!("Forecasts {words} {}for any city.", "weather ".repeat(i % 5)),
            "manifest_url": if shared && i.is_multiple_of(3) {
                format!("https://github.com/acme/repo{}/blob/main/card.json", (i / 3) % 60)
            } else {
                format!("https://agent{i}.example.com/card.json")
            },
        }))
        .expect("draft");
        let mut agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
        agent.state = AgentState::Active;
        agent
    };
    let agents: Vec<Agent> = (0..700).map(|i| agent(i, "storms", true)).collect();
    let index = SearchIndex::new(store, None).expect("index");
    index.rebuild_keyword(&agents).await.expect("index");
    // `inline_below`: the document bits are built by a thread of their own (0) or on the
    // spot (`usize::MAX`).
    let compare_both_ways = |step: &'static str, inline_below: usize| {
        let index = &index;
        async move {
            index.text.set_shown_inline_below(inline_below);
            let mut totals = Vec::new();
            for (text, collapse, parallel_from, limit) in [
                ("weather forecasts", true, u64::MAX, 10),
                ("weather forecasts", false, 0, 10),
                ("storms", true, 0, 3),
                ("storms city", false, u64::MAX, 100),
                ("weather", true, u64::MAX, 1),
            ] {
                index.set_parallel_from(parallel_from);
                let mut pages = Vec::new();
                for by_documents in [true, false] {
                    index.set_count_by_documents(by_documents);
                    let request = |cursor| SearchRequest {
                        text: text.to_owned(),
                        filters: Filters {
                            collapse_duplicates: collapse,
                            ..Filters::default()
                        },
                        ..ordered(Sort::Relevance, limit, 0, cursor)
                    };
                    // The first search after a change finds the document bits stale,
                    // visits every match and has the bits built off its path; the pages
                    // below count by them.
                    let first = index.search(&request(None)).await.expect("search");
                    let first = (ids(&first), first.total, first.next_cursor.clone());
                    assert!(
                        index
                            .text
                            .wait_for_shown_docs(std::time::Duration::from_secs(60))
                    );
                    let mut served = Vec::new();
                    let mut cursor = None;
                    loop {
                        let page = index.search(&request(cursor)).await.expect("search");
                        served.push((ids(&page), page.total, page.next_cursor.clone()));
                        cursor = page.next_cursor;
                        if cursor.is_none() {
                            break;
                        }
                    }
                    assert_eq!(first, served[0], "{step}: {text:?} before the bits");
                    pages.push(served);
                }
                assert_eq!(pages[0], pages[1], "{step}: {text:?} collapse {collapse}");
                totals.push(pages[0][0].1);
            }
            index.set_count_by_documents(true);
            totals
        }
    };
    let built = compare_both_ways("built", 0).await;
    assert!(built[0] < built[1], "collapsing hides some: {built:?}");
    // Agents leaving their repository's group with the same text: the keyword index is
    // unchanged, the duplicates shown are not.
    let mut moved: Vec<Agent> = Vec::new();
    for i in (0..700).step_by(12) {
        let mut own = agent(i, "storms", false);
        own.id = agents[i].id.clone();
        own.revision = agents[i].revision + 1;
        moved.push(own);
    }
    index.apply_batch(&moved, &[]).await;
    let regrouped = compare_both_ways("regrouped", usize::MAX).await;
    assert_ne!(regrouped[0], built[0], "{regrouped:?}");
    // Unpublished, rewritten, and new agents.
    let mut changed: Vec<Agent> = Vec::new();
    for i in (1..700).step_by(7) {
        let mut gone = agents[i].clone();
        gone.state = AgentState::Stage;
        gone.revision += 2;
        changed.push(gone);
    }
    for i in (4..700).step_by(9) {
        let mut rewritten = agent(i + 1, "storms hail", true);
        rewritten.id = agents[i].id.clone();
        rewritten.revision = agents[i].revision + 2;
        changed.push(rewritten);
    }
    changed.extend((700..760).map(|i| agent(i, "storms", true)));
    index.apply_batch(&changed, &[]).await;
    compare_both_ways("changed", 0).await;
    let deleted: Vec<String> = (1..700).step_by(11).map(|i| agents[i].id.clone()).collect();
    index.apply_batch(&[], &deleted).await;
    compare_both_ways("deleted", usize::MAX).await;
}

/// More matches than the page selection's buffer holds, with scores that tie: every page,
/// by offset and by cursor, is the slice of the order of all matches.
#[tokio::test]
async fn pages_cut_from_many_matches_are_slices_of_the_whole_order() {
    let (_dir, store) = sqlite_store().await;
    let mut agents = Vec::new();
    for i in 0..600_i64 {
        let draft = crate::domain::AgentDraft::parse(&serde_json::json!({
            "package_name": format!("com.example.many{i}"),
            "name": format!("Agent {}", i % 40),
            "description": format!("Forecasts {}for any city.", "weather ".repeat(i as usize % 7)),
        }))
        .expect("draft");
        let mut agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
        agent.state = AgentState::Active;
        agent.published_at = Some(crate::timestamp::Timestamp::from_micros(
            1_000_000 * (i % 50),
        ));
        agents.push(agent);
    }
    let index = SearchIndex::new(store, None).expect("index");
    index.rebuild_keyword(&agents).await.expect("index");
    // On one core, and with every keyword search split over two.
    for (text, sort, parallel_from) in [
        ("weather forecasts", Sort::Relevance),
        ("forecasts", Sort::Newest),
        ("", Sort::Name),
        ("", Sort::Oldest),
    ]
    .into_iter()
    .flat_map(|(text, sort)| [(text, sort, u64::MAX), (text, sort, 0)])
    {
        index.set_parallel_from(parallel_from);
        let request = |limit, offset, cursor| SearchRequest {
            text: text.to_owned(),
            ..ordered(sort, limit, offset, cursor)
        };
        let whole: Vec<String> = {
            let catalog = index.read_catalog();
            let everything = Reach {
                sort,
                cursor: None,
                keep: usize::MAX,
                depth: usize::MAX,
            };
            let mut hits = index
                .matches(&catalog, &request(7, 0, None), None, &everything)
                .hits;
            hits.sort_by(|a, b| compare(sort, a, b));
            hits.iter().map(|hit| hit.doc.id.to_string()).collect()
        };
        assert_eq!(whole.len(), 600, "{text:?}");
        for offset in [0, 7, 300, 595, 600] {
            let page = index
                .search(&request(7, offset, None))
                .await
                .expect("search");
            let expected: Vec<String> = whole.iter().skip(offset).take(7).cloned().collect();
            assert_eq!(ids(&page), expected, "{sort:?} {text:?} offset {offset}");
            assert_eq!(page.total, 600);
        }
        let mut served = Vec::new();
        let mut cursor = None;
        loop {
            let page = index.search(&request(7, 0, cursor)).await.expect("search");
            served.extend(ids(&page));
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => break,
            }
        }
        assert_eq!(served, whole, "{sort:?} {text:?}");
    }
}

#[tokio::test]
async fn oldest_first_pages_by_cursor_like_every_order() {
    let (index, oldest_first, _, _dir) = live_agents().await;
    let mut served = Vec::new();
    let mut cursor = None;
    loop {
        let page = index
            .search(&ordered(Sort::Oldest, 5, 0, cursor))
            .await
            .expect("search");
        served.extend(ids(&page));
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(served, oldest_first);
    // A cursor of one order is refused by another.
    let first = index
        .search(&ordered(Sort::Oldest, 5, 0, None))
        .await
        .expect("search");
    let refused = index
        .search(&ordered(Sort::Newest, 5, 0, first.next_cursor))
        .await;
    assert!(matches!(refused, Err(SearchError::InvalidCursor)));
}

/// Counts the texts it embeds; every vector is the same unit vector.
/// A fresh SQLite store in a temporary directory (kept alive by the returned guard).
async fn sqlite_store() -> (tempfile::TempDir, Arc<dyn Store>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = crate::store::sqlite::SqliteStore::open_dir(dir.path())
        .await
        .expect("store");
    (dir, Arc::new(store))
}

#[tokio::test]
async fn a_write_that_keeps_the_text_keeps_the_keyword_document() {
    let (_dir, store) = sqlite_store().await;
    let index = SearchIndex::new(store, None).expect("index");
    let mut agent = active("com.example.herds", "Tracks alpaca herds.");
    index.apply(&agent).await;
    let commits = index.text.commits();
    // Verified: the listing changes, the text does not.
    agent.revision += 1;
    agent.verification_level = crate::store::VerificationLevel::DomainVerified;
    index.apply(&agent).await;
    assert_eq!(index.text.commits(), commits);
    let found = |text: &str| SearchRequest {
        text: text.to_owned(),
        ..ordered(Sort::Relevance, 10, 0, None)
    };
    let page = index.search(&found("alpaca")).await.expect("search");
    assert_eq!(
        page.hits[0].listing.verification_level,
        crate::store::VerificationLevel::DomainVerified
    );
    // A new description is indexed.
    agent.revision += 1;
    agent.draft.description = "Tracks bison herds.".to_owned();
    index.apply(&agent).await;
    assert_eq!(index.text.commits(), commits + 1);
    assert_eq!(
        index.search(&found("alpaca")).await.expect("search").total,
        0
    );
    assert_eq!(
        index.search(&found("bison")).await.expect("search").total,
        1
    );
}

/// `count` ACTIVE agents `com.example.{prefix}N` with `description`, written to `store`.
async fn stored(
    store: &Arc<dyn Store>,
    prefix: &str,
    count: usize,
    description: &str,
) -> Vec<Agent> {
    let mut agents = Vec::with_capacity(count);
    for i in 0..count {
        let agent = active(&format!("com.example.{prefix}{i}"), description);
        store.insert_agent(&agent).await.expect("insert");
        agents.push(agent);
    }
    agents
}

/// An empty index over `store` that embeds with a `CountingEmbedder`, and that embedder.
fn counting_index(store: &Arc<dyn Store>) -> (SearchIndex, Arc<CountingEmbedder>) {
    let embedder = Arc::new(CountingEmbedder::default());
    let index = SearchIndex::new(
        Arc::clone(store),
        Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
    )
    .expect("index");
    (index, embedder)
}

/// An ACTIVE agent of `alice` with this package name and description.
fn active(package: &str, description: &str) -> Agent {
    active_draft(serde_json::json!({
        "package_name": package,
        "name": package,
        "description": description,
    }))
}

/// An ACTIVE agent of alice's with this draft.
fn active_draft(draft: serde_json::Value) -> Agent {
    let draft = crate::domain::AgentDraft::parse(&draft).expect("draft");
    let mut agent = Agent::new(draft, "alice", crate::timestamp::Timestamp::now());
    agent.state = AgentState::Active;
    agent
}

/// An index of `agents` whose every agent embeds to one vector.
async fn one_vector_index(store: Arc<dyn Store>, agents: &[Agent]) -> SearchIndex {
    let embedder = Arc::new(CountingEmbedder::default());
    let index = SearchIndex::new(store, Some(embedder as Arc<dyn embed::Embedder>)).expect("index");
    index.rebuild(agents).await.expect("index");
    index
}

#[derive(Default)]
struct CountingEmbedder {
    embedded: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl embed::Embedder for CountingEmbedder {
    fn id(&self) -> &str {
        "counting@1"
    }

    fn dim(&self) -> usize {
        2
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
        self.embedded
            .fetch_add(texts.len(), std::sync::atomic::Ordering::SeqCst);
        Ok(texts.iter().map(|_| vec![0.6, 0.8]).collect())
    }
}

/// Every page of `request` by cursor: the ids, the total and the first page's counts.
async fn walk(
    index: &SearchIndex,
    request: &SearchRequest,
) -> (Vec<String>, usize, Option<FacetCounts>) {
    let first = index.search(request).await.expect("search");
    let (total, facets) = (first.total, first.facets.clone());
    let mut served = ids(&first);
    let mut cursor = first.next_cursor;
    while let Some(next) = cursor {
        let page = index
            .search(&SearchRequest {
                cursor: Some(next),
                ..request.clone()
            })
            .await
            .expect("search");
        assert_eq!(page.total, total);
        served.extend(ids(&page));
        cursor = page.next_cursor;
    }
    (served, total, facets)
}

#[tokio::test]
async fn a_fused_search_split_over_two_cores_serves_the_same_pages_and_counts() {
    let (_dir, store) = sqlite_store().await;
    let mut agents = Vec::new();
    for i in 0..700_i64 {
        let category = ["Weather", "Travel", "Data"][i as usize % 3];
        agents.push(active_draft(serde_json::json!({
            "package_name": format!("com.example.fused{i}"),
            "name": format!("Agent {}", i % 40),
            "description": format!("Forecasts {}for any city.", "weather ".repeat(i as usize % 7)),
            "category": category,
            "tags": [format!("t{}", i % 11)],
        })));
    }
    // One vector for every agent: the hundred nearest are spread through the keyword
    // ranking, most of them deep in it.
    let index = one_vector_index(store, &agents).await;
    for text in ["weather forecasts", "city", "weather"] {
        let request = SearchRequest {
            text: text.to_owned(),
            facets: true,
            ..ordered(Sort::Relevance, 9, 0, None)
        };
        index.set_parallel_from(u64::MAX);
        let one = walk(&index, &request).await;
        index.set_parallel_from(0);
        let two = walk(&index, &request).await;
        assert!(one.0.len() > 100, "{text}");
        assert_eq!(one.0.len(), one.1, "{text}");
        assert_eq!(one, two, "{text}");
    }
}

#[tokio::test]
async fn a_fused_search_whose_two_searches_run_at_once_serves_the_same_pages_and_counts() {
    let (_dir, store) = sqlite_store().await;
    // Enough keyword matches for the scoring to go to a pool thread.
    let agents: Vec<Agent> = (0..5_000_i64)
        .map(|i| {
            let category = ["Weather", "Travel", "Data"][i as usize % 3];
            active_draft(serde_json::json!({
                "package_name": format!("com.example.beside{i}"),
                "name": format!("Agent {}", i % 40),
                "description": format!("Forecasts {}for any city.", "weather ".repeat(i as usize % 7)),
                "category": category,
                "tags": [format!("t{}", i % 11)],
            }))
        })
        .collect();
    let one_after_the_other = one_vector_index(Arc::clone(&store), &agents).await;
    let at_once = one_vector_index(store, &agents).await;
    {
        // A store that searches its graph from the first vector: long enough to go beside.
        let mut params = vectors::IndexParams::default();
        params.query.exact_below = 0;
        let mut graph = VectorStore::with_params(2, Some(params));
        let mut catalog = at_once.write_catalog();
        for slot in catalog.slots.values() {
            graph.set(*slot, &[0.6, 0.8]);
        }
        assert!(graph.searches_long());
        catalog.vectors = Some(graph);
    }
    assert!(
        !one_after_the_other
            .read_catalog()
            .vectors
            .as_ref()
            .expect("vectors")
            .searches_long()
    );
    for text in ["weather forecasts", "city", "weather"] {
        let request = SearchRequest {
            text: text.to_owned(),
            facets: true,
            ..ordered(Sort::Relevance, 25, 0, None)
        };
        let first = one_after_the_other.search(&request).await.expect("search");
        let second = at_once.search(&request).await.expect("search");
        assert!(first.total >= 5_000 * 6 / 7, "{text}: {}", first.total);
        assert_eq!(ids(&first), ids(&second), "{text}");
        assert_eq!(first.total, second.total, "{text}");
        assert_eq!(first.facets, second.facets, "{text}");
    }
}

#[tokio::test]
async fn a_starting_index_ranks_by_keywords_until_its_vectors_are_filled() {
    use std::sync::atomic::Ordering::SeqCst;
    let (_dir, store) = sqlite_store().await;
    let agents = stored(&store, "weather", 70, "Forecasts for any city.").await;
    let (index, embedder) = counting_index(&store);

    index.rebuild_keyword(&agents).await.expect("keyword index");
    let loading = index.vector_progress();
    assert!(!loading.ready && !loading.none, "{loading:?}");
    assert_eq!((loading.embedded, loading.total), (0, 70));
    let request = request::from_query_pairs(
        &[("q".to_owned(), "forecasts".to_owned())],
        request::LIST_LIMITS,
    )
    .expect("request");
    let page = index.search(&request).await.expect("search");
    assert_eq!(page.total, 70, "keyword search serves at once");
    assert_eq!(embedder.embedded.load(SeqCst), 0, "no query embedded yet");

    index.fill_vectors().await.expect("vectors");
    let ready = index.vector_progress();
    assert!(ready.ready, "{ready:?}");
    assert_eq!(ready.embedded, 70);
    assert_eq!(embedder.embedded.load(SeqCst), 70, "each agent once");
    index.search(&request).await.expect("search");
    assert_eq!(
        embedder.embedded.load(SeqCst),
        71,
        "the query, now that vectors are in"
    );

    // A restart finds every vector stored: nothing is embedded again.
    let again = Arc::new(CountingEmbedder::default());
    let restarted = SearchIndex::new(
        Arc::clone(&store),
        Some(Arc::clone(&again) as Arc<dyn embed::Embedder>),
    )
    .expect("index");
    restarted.rebuild(&agents).await.expect("rebuild");
    assert_eq!(again.embedded.load(SeqCst), 0);
    assert!(restarted.vector_progress().ready);
}

#[tokio::test]
async fn a_fill_skips_an_agent_whose_text_changed_since_it_was_catalogued() {
    use std::sync::atomic::Ordering::SeqCst;
    let (_dir, store) = sqlite_store().await;
    let agents = stored(&store, "tide", 3, "Tide tables.").await;
    let (index, embedder) = counting_index(&store);
    index.rebuild_keyword(&agents).await.expect("keyword index");
    // Another process rewrites one agent before the vectors are filled: the fill reads
    // the texts from the store and leaves it out rather than embed a text not indexed.
    let mut changed = agents[0].draft.clone();
    changed.description = "Wave heights.".to_owned();
    let updated = store
        .update_agent(
            &agents[0].id,
            &changed,
            None,
            crate::timestamp::Timestamp::now(),
        )
        .await
        .expect("update");
    index.fill_vectors().await.expect("vectors");
    let has_vector = |index: &SearchIndex, slot: u32| {
        let catalog = index.read_catalog();
        catalog
            .vectors
            .as_ref()
            .expect("vectors")
            .get(slot)
            .is_some()
    };
    assert_eq!(embedder.embedded.load(SeqCst), 2);
    assert!(!has_vector(&index, 0));
    // Its newer version, applied as the change log delivers it, is embedded then.
    index.apply(&updated).await;
    assert_eq!(embedder.embedded.load(SeqCst), 3);
    assert!(has_vector(&index, 0));
}

/// Embeds "ocean" texts as [1, 0] and the rest as [0, 1]; its first call waits for `gate`.
#[derive(Default)]
struct GatedEmbedder {
    gate: tokio::sync::Notify,
    first: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl embed::Embedder for GatedEmbedder {
    fn id(&self) -> &str {
        "gated@1"
    }

    fn dim(&self) -> usize {
        2
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
        if !self.first.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.gate.notified().await;
        }
        Ok(texts
            .iter()
            .map(|text| {
                if text.contains("ocean") {
                    vec![1.0, 0.0]
                } else {
                    vec![0.0, 1.0]
                }
            })
            .collect())
    }
}

#[tokio::test]
async fn writes_during_the_vector_fill_survive_the_swap_and_searches_go_on() {
    let (_dir, store) = sqlite_store().await;
    let agents = stored(&store, "fill", 10, "Forecasts for any city.").await;
    let embedder = Arc::new(GatedEmbedder::default());
    let index = Arc::new(
        SearchIndex::new(
            Arc::clone(&store),
            Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
        )
        .expect("index"),
    );
    index.rebuild_keyword(&agents).await.expect("keyword index");
    let filling = tokio::spawn({
        let index = Arc::clone(&index);
        async move { index.fill_vectors().await }
    });
    // Let the fill reach the gated embedder.
    while !embedder.first.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    // Meanwhile: one agent changes its text, another leaves; searches still answer.
    let changed = store
        .update_agent(
            &agents[0].id,
            &active("com.example.fill0", "Tides of the ocean.").draft,
            None,
            crate::timestamp::Timestamp::now(),
        )
        .await
        .expect("update");
    index.apply(&changed).await;
    index.delete(&agents[1].id).await;
    let request = request::from_query_pairs(
        &[("q".to_owned(), "forecasts".to_owned())],
        request::LIST_LIMITS,
    )
    .expect("request");
    let page = index.search(&request).await.expect("search");
    assert_eq!(page.total, 8, "keyword search serves during the fill");
    embedder.gate.notify_one();
    filling.await.expect("join").expect("fill");
    assert!(index.vector_progress().ready);
    let catalog = index.read_catalog();
    let vectors = catalog.vectors.as_ref().expect("vectors");
    let vector_of = |id: &str| vectors.get(catalog.slots[id]);
    let close = |v: Option<Vec<f32>>, want: [f32; 2]| {
        v.is_some_and(|v| (v[0] - want[0]).abs() < 0.01 && (v[1] - want[1]).abs() < 0.01)
    };
    assert!(
        close(vector_of(&agents[0].id), [1.0, 0.0]),
        "the write's vector, not the fill's"
    );
    assert_eq!(vector_of(&agents[1].id), None, "the deleted agent has none");
    for agent in &agents[2..] {
        assert!(close(vector_of(&agent.id), [0.0, 1.0]));
    }
}

#[tokio::test]
async fn a_restart_restores_the_vector_index_from_its_snapshot() {
    use std::sync::atomic::Ordering::SeqCst;
    let snapshots = tempfile::tempdir().expect("snapshot dir");
    let mut agents: Vec<Agent> = (0..40)
        .map(|i| active(&format!("com.example.snap{i}"), "Forecasts for any city."))
        .collect();
    let open = |agents: Vec<Agent>| async move {
        let (dir, store) = sqlite_store().await;
        for agent in &agents {
            store.insert_agent(agent).await.expect("insert");
        }
        (dir, store)
    };
    // The first run embeds every agent and saves the index.
    let (_first_dir, first_store) = open(agents.clone()).await;
    let embedder = Arc::new(CountingEmbedder::default());
    let first = SearchIndex::new(
        first_store,
        Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
    )
    .expect("index")
    .with_snapshot_dir(snapshots.path());
    first.rebuild(&agents).await.expect("rebuild");
    assert_eq!(embedder.embedded.load(SeqCst), 40);
    let path = first.snapshot_path("counting@1").expect("path");
    assert!(
        path.exists(),
        "a snapshot is saved once the index is complete"
    );

    // A restart over a database that holds no stored vectors at all, with one agent's text
    // changed and one agent gone: only the changed agent is embedded.
    agents[0].draft = active("com.example.snap0", "Tides and currents.").draft;
    agents.remove(1);
    let (_second_dir, second_store) = open(agents.clone()).await;
    let again = Arc::new(CountingEmbedder::default());
    let second = SearchIndex::new(
        second_store,
        Some(Arc::clone(&again) as Arc<dyn embed::Embedder>),
    )
    .expect("index")
    .with_snapshot_dir(snapshots.path());
    second.rebuild(&agents).await.expect("rebuild");
    assert_eq!(again.embedded.load(SeqCst), 1, "only the changed agent");
    let progress = second.vector_progress();
    assert!(progress.ready);
    assert_eq!(progress.embedded, 39);
    {
        let catalog = second.read_catalog();
        let vectors = catalog.vectors.as_ref().expect("vectors");
        assert_eq!(vectors.len(), 39);
        for agent in &agents {
            assert!(
                vectors.get(catalog.slots[agent.id.as_str()]).is_some(),
                "{}",
                agent.id
            );
        }
    }

    // A damaged snapshot is not used: the index is built from scratch.
    std::fs::write(&path, b"damaged").expect("damage");
    let (_third_dir, third_store) = open(agents.clone()).await;
    let third_embedder = Arc::new(CountingEmbedder::default());
    let third = SearchIndex::new(
        third_store,
        Some(Arc::clone(&third_embedder) as Arc<dyn embed::Embedder>),
    )
    .expect("index")
    .with_snapshot_dir(snapshots.path());
    third.rebuild(&agents).await.expect("rebuild");
    assert_eq!(third_embedder.embedded.load(SeqCst), 39);
    assert!(third.vector_progress().ready);
}

#[test]
fn a_saved_vector_goes_to_its_agents_slot_only_while_its_text_is_the_same() {
    let doc =
        |package: &str, description: &str| Arc::new(Doc::of(&active(package, description), None).0);
    let (a, b, c) = (
        doc("com.example.a", "Forecasts."),
        doc("com.example.b", "Tides."),
        doc("com.example.c", "Currents."),
    );
    let by_slot = vec![
        Some(Arc::clone(&a)),
        None,
        Some(Arc::clone(&b)),
        Some(Arc::clone(&c)),
    ];
    let mut place = place_saved(&by_slot);
    let key = |doc: &Doc| (doc.id.to_string(), doc.content_hash.hex());
    let (a_id, a_hash) = key(&a);
    let (b_id, b_hash) = key(&b);
    let (c_id, c_hash) = key(&c);
    // Where it was saved.
    assert_eq!(place(0, &a_id, &a_hash), Some(0));
    // Saved elsewhere: found by id, whether the saved slot is empty, another agent's or
    // past the end.
    assert_eq!(place(1, &b_id, &b_hash), Some(2));
    assert_eq!(place(0, &c_id, &c_hash), Some(3));
    assert_eq!(place(9, &b_id, &b_hash), Some(2));
    // Another text, or an agent no longer here: nowhere.
    assert_eq!(place(2, &b_id, &a_hash), None);
    assert_eq!(place(5, &c_id, &b_hash), None);
    assert_eq!(place(3, "agt_gone", &c_hash), None);
}

/// Embeds each text as a distinct unit vector in 2-d (by a hash of it).
struct AngleEmbedder;

#[async_trait::async_trait]
impl embed::Embedder for AngleEmbedder {
    fn id(&self) -> &str {
        "angle@1"
    }

    fn dim(&self) -> usize {
        2
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
        Ok(texts
            .iter()
            .map(|text| {
                let hash = Sha256::digest(text.as_bytes());
                let angle = f32::from(u16::from_le_bytes([hash[0], hash[1]])) / 10_000.0;
                vec![angle.cos(), angle.sin()]
            })
            .collect())
    }
}

#[tokio::test]
async fn a_start_reads_the_stored_vectors_page_by_page_onto_their_agents() {
    use std::sync::atomic::Ordering::SeqCst;
    #[derive(Default)]
    struct Counting(std::sync::atomic::AtomicUsize);

    #[async_trait::async_trait]
    impl embed::Embedder for Counting {
        fn id(&self) -> &str {
            AngleEmbedder.id()
        }

        fn dim(&self) -> usize {
            AngleEmbedder.dim()
        }

        async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
            self.0.fetch_add(texts.len(), SeqCst);
            AngleEmbedder.embed(texts).await
        }
    }

    // More agents than are looked up one by one, over several pages of stored vectors
    // and a last one part full.
    let count = LOOKUPS_ONE_BY_ONE + 3 * STORED_PAGE as usize + 2;
    let (_dir, store) = sqlite_store().await;
    let mut agents: Vec<Agent> = (0..count)
        .map(|i| active(&format!("com.example.paged{i}"), &format!("Forecast {i}.")))
        .collect();
    for agent in &agents {
        store.insert_agent(agent).await.expect("insert");
    }
    let index_of = |agents: Vec<Agent>| {
        let store = Arc::clone(&store);
        async move {
            let embedder = Arc::new(Counting::default());
            let index = SearchIndex::new(
                store,
                Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
            )
            .expect("index");
            index.rebuild(&agents).await.expect("rebuild");
            (index, embedder.0.load(SeqCst))
        }
    };
    let (first, embedded) = index_of(agents.clone()).await;
    assert_eq!(embedded, count);
    // The second start finds every vector stored but the one whose text changed.
    agents[3].draft = active("com.example.paged3", "Tides.").draft;
    let (second, embedded) = index_of(agents.clone()).await;
    assert_eq!(embedded, 1, "only the changed agent is embedded");
    let vector = |index: &SearchIndex, id: &str| {
        let catalog = index.read_catalog();
        catalog.vectors.as_ref()?.get(catalog.slots[id])
    };
    for (n, agent) in agents.iter().enumerate() {
        let (before, after) = (vector(&first, &agent.id), vector(&second, &agent.id));
        assert!(after.is_some(), "{n} has a vector");
        assert_eq!(before == after, n != 3, "{n} kept its own vector");
    }
}

#[tokio::test]
async fn a_catalogue_growing_past_the_graph_size_gets_its_graph_built_aside() {
    let (_dir, store) = sqlite_store().await;
    let index = SearchIndex::new(Arc::clone(&store), Some(Arc::new(AngleEmbedder))).expect("index");
    index.rebuild_keyword(&[]).await.expect("empty index");
    index.fill_vectors().await.expect("no vectors");
    {
        let mut params = vectors::IndexParams::default();
        params.query.exact_below = 20;
        let mut serving = VectorStore::with_params(2, Some(params));
        serving.defer_graph();
        index.write_catalog().vectors = Some(serving);
    }
    let graph_bytes = |index: &SearchIndex| {
        index
            .read_catalog()
            .vectors
            .as_ref()
            .map_or(0, VectorStore::graph_memory_bytes)
    };
    for i in 0..30 {
        let description = format!("Agent number {i} of a growing catalogue.");
        index
            .apply(&active(&format!("com.example.grow{i}"), &description))
            .await;
        let built = graph_bytes(&index) > 0;
        assert_eq!(built, i >= 19, "after agent {i}");
    }
    let catalog = index.read_catalog();
    let vectors = catalog.vectors.as_ref().expect("vectors");
    assert_eq!(vectors.len(), 30);
    assert!(!vectors.graph_due());
}

#[tokio::test]
async fn facets_count_the_keyword_and_the_vector_matches_once_each() {
    let (_dir, store) = sqlite_store().await;
    let mut agents = Vec::new();
    for (i, (description, category, tags)) in [
        ("Forecasts for any city.", "Weather", vec!["forecast"]),
        ("Forecasts and radar.", "weather", vec!["forecast", "radar"]),
        ("Stock quotes.", "Finance", vec!["stocks"]),
        ("Crypto prices.", "Finance", vec!["crypto"]),
    ]
    .into_iter()
    .enumerate()
    {
        agents.push(active_draft(serde_json::json!({
            "package_name": format!("com.example.agent{i}"),
            "name": format!("Agent {i}"),
            "description": description,
            "category": category,
            "tags": tags,
            "payment": {"model": if i % 2 == 0 { "free" } else { "paid" },
                        "protocols": ["x402"], "rails": ["base:usdc"]},
        })));
    }
    // Every agent embeds to one vector: all of them are matches by meaning.
    let index = one_vector_index(store, &agents).await;
    let search = |pairs: &[(&str, &str)]| {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        request::from_query_pairs(&pairs, request::LIST_LIMITS).expect("request")
    };
    let map = |entries: &[(&str, usize)]| -> std::collections::BTreeMap<String, usize> {
        entries.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect()
    };

    let page = index
        .search(&search(&[
            ("q", "forecasts"),
            ("facets", "true"),
            ("limit", "1"),
        ]))
        .await
        .expect("search");
    assert_eq!(
        page.total, 4,
        "two by keyword and vector, two by vector alone"
    );
    let facets = page.facets.expect("facets");
    assert_eq!(facets.category, map(&[("Finance", 2), ("Weather", 2)]));
    assert_eq!(
        facets.tags,
        map(&[("crypto", 1), ("forecast", 2), ("radar", 1), ("stocks", 1)])
    );
    assert_eq!(facets.payment_model, map(&[("free", 2), ("paid", 2)]));
    assert_eq!(
        facets.health,
        map(&[("not_probed", 4)]),
        "none of them lists an endpoint"
    );

    let filtered = index
        .search(&search(&[
            ("q", "forecasts"),
            ("facets", "true"),
            ("payment_model", "paid"),
        ]))
        .await
        .expect("search");
    assert_eq!(filtered.total, 2);
    let facets = filtered.facets.expect("facets");
    assert_eq!(facets.category, map(&[("Finance", 1), ("Weather", 1)]));
    assert_eq!(facets.payment_model, map(&[("paid", 2)]));

    let without = index
        .search(&search(&[("q", "forecasts")]))
        .await
        .expect("search");
    assert!(without.facets.is_none());
}

/// A three-dimensional embedder with a query instruction: "ocean" texts embed to [1, 0, 0],
/// the rest to [0, 1, 0]; its first call waits for `gate`, and it records every text.
#[derive(Default)]
struct SwitchEmbedder {
    gate: tokio::sync::Notify,
    first: std::sync::atomic::AtomicBool,
    seen: std::sync::Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl embed::Embedder for SwitchEmbedder {
    fn id(&self) -> &str {
        "switch@1"
    }

    fn dim(&self) -> usize {
        3
    }

    fn query_instruction(&self) -> &str {
        "Q: "
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
        if !self.first.swap(true, std::sync::atomic::Ordering::SeqCst) {
            self.gate.notified().await;
        }
        self.seen
            .lock()
            .expect("lock")
            .extend(texts.iter().cloned());
        Ok(texts
            .iter()
            .map(|text| {
                if text.contains("ocean") {
                    vec![1.0, 0.0, 0.0]
                } else {
                    vec![0.0, 1.0, 0.0]
                }
            })
            .collect())
    }
}

#[tokio::test]
async fn switching_the_embedder_embeds_every_agent_aside_and_keeps_writes_made_meanwhile() {
    let (_dir, store) = sqlite_store().await;
    let agents = stored(&store, "switch", 10, "Forecasts for any city.").await;
    let index = Arc::new(one_vector_index(Arc::clone(&store), &agents).await);
    assert_eq!(index.embedder_id().as_deref(), Some("counting@1"));
    let next = Arc::new(SwitchEmbedder::default());
    let switching = tokio::spawn({
        let (index, next) = (Arc::clone(&index), Arc::clone(&next));
        async move { index.switch_embedder(next).await }
    });
    while !next.first.load(std::sync::atomic::Ordering::SeqCst) {
        tokio::task::yield_now().await;
    }
    // Meanwhile: one agent changes its text, another leaves, and the old embedder serves.
    let changed = store
        .update_agent(
            &agents[0].id,
            &active("com.example.switch0", "Tides of the ocean.").draft,
            None,
            crate::timestamp::Timestamp::now(),
        )
        .await
        .expect("update");
    index.apply(&changed).await;
    index.delete(&agents[1].id).await;
    let request = request::from_query_pairs(
        &[("q".to_owned(), "forecasts".to_owned())],
        request::LIST_LIMITS,
    )
    .expect("request");
    // 8 by keywords, and the ocean agent by meaning: the old embedder gives every text one
    // vector.
    assert_eq!(index.search(&request).await.expect("search").total, 9);
    assert_eq!(index.embedder_id().as_deref(), Some("counting@1"));

    next.gate.notify_one();
    switching.await.expect("join").expect("switch");
    assert_eq!(index.embedder_id().as_deref(), Some("switch@1"));
    {
        let catalog = index.read_catalog();
        let vectors = catalog.vectors.as_ref().expect("vectors");
        assert_eq!(vectors.dim(), 3);
        let vector_of = |id: &str| vectors.get(catalog.slots[id]);
        let near = |v: Option<Vec<f32>>, want: [f32; 3]| {
            v.is_some_and(|v| v.iter().zip(want).all(|(a, b)| (a - b).abs() < 0.01))
        };
        assert!(
            near(vector_of(&agents[0].id), [1.0, 0.0, 0.0]),
            "the write, by the new embedder"
        );
        assert_eq!(vector_of(&agents[1].id), None, "the deleted agent has none");
        for agent in &agents[2..] {
            assert!(near(vector_of(&agent.id), [0.0, 1.0, 0.0]), "{}", agent.id);
        }
    }
    // Queries now go to the new embedder, with its instruction; writes too.
    let page = index.search(&request).await.expect("search");
    assert_eq!(page.total, 8);
    assert!(
        next.seen
            .lock()
            .expect("lock")
            .iter()
            .any(|text| text == "Q: forecasts")
    );
    let added = active("com.example.switchnew", "An ocean of forecasts.");
    store.insert_agent(&added).await.expect("insert");
    index.apply(&added).await;
    let catalog = index.read_catalog();
    let vectors = catalog.vectors.as_ref().expect("vectors");
    assert_eq!(
        vectors
            .get(catalog.slots[added.id.as_str()])
            .map(|v| v.len()),
        Some(3)
    );
}

#[tokio::test]
async fn a_query_embedded_just_before_a_switch_ranks_by_keywords_instead_of_failing() {
    let (_dir, store) = sqlite_store().await;
    let agents = stored(&store, "stale", 5, "Forecasts for any city.").await;
    let index = one_vector_index(Arc::clone(&store), &agents).await;
    let request = request::from_query_pairs(
        &[("q".to_owned(), "forecasts".to_owned())],
        request::LIST_LIMITS,
    )
    .expect("request");
    // A vector of another length than the index's (2): what a query embedded by the old
    // embedder looks like once the new one's vectors are in.
    let page = index
        .search_with_vector(&request, Some(&[0.0, 1.0, 0.0]))
        .expect("search");
    assert_eq!(page.total, 5);
}

#[tokio::test]
async fn a_repeated_query_is_embedded_once_and_spacing_does_not_matter() {
    use std::sync::atomic::Ordering::SeqCst;
    let (_dir, store) = sqlite_store().await;
    let agents = stored(&store, "cache", 3, "Forecasts for any city.").await;
    let embedder = Arc::new(CountingEmbedder::default());
    let index = SearchIndex::new(
        Arc::clone(&store),
        Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
    )
    .expect("index");
    index.rebuild(&agents).await.expect("index");
    let before = embedder.embedded.load(SeqCst);
    let ask = |q: &str| {
        request::from_query_pairs(&[("q".to_owned(), q.to_owned())], request::LIST_LIMITS)
            .expect("request")
    };
    let first = index.search(&ask("city forecasts")).await.expect("search");
    let again = index
        .search(&ask("  city   forecasts "))
        .await
        .expect("search");
    assert_eq!(ids(&first), ids(&again));
    assert_eq!(embedder.embedded.load(SeqCst), before + 1);
    index.search(&ask("another city")).await.expect("search");
    assert_eq!(embedder.embedded.load(SeqCst), before + 2);

    let uncached = SearchIndex::new(
        store,
        Some(Arc::clone(&embedder) as Arc<dyn embed::Embedder>),
    )
    .expect("index")
    .without_query_cache();
    uncached.rebuild(&agents).await.expect("index");
    let before = embedder.embedded.load(SeqCst);
    uncached
        .search(&ask("city forecasts"))
        .await
        .expect("search");
    uncached
        .search(&ask("city forecasts"))
        .await
        .expect("search");
    assert_eq!(embedder.embedded.load(SeqCst), before + 2);
}

#[tokio::test]
async fn an_agent_whose_representative_query_is_the_request_ranks_first() {
    let (_dir, store) = sqlite_store().await;
    // Competitors with the request's words in their name, description or capabilities.
    let menus = active_draft(serde_json::json!({
        "package_name": "com.example.menus",
        "name": "Restaurant Menu Designer",
        "description": "Design a restaurant menu and translate its prices into any currency.",
        "capabilities": [{"name": "translate_prices", "description": "Menu prices in yen, euros or dollars"}],
    }));
    let guide = active_draft(serde_json::json!({
        "package_name": "com.example.guide",
        "name": "Japanese Restaurant Guide",
        "description": "Reviews of restaurants in Japan with photos of their menus, translated.",
    }));
    // One agent says so in its representative queries, another in its card's skill examples.
    let lingo = active_draft(serde_json::json!({
        "package_name": "com.example.lingo",
        "name": "Lingo",
        "description": "Photo translation for travellers.",
        "representative_queries": [
            "translate a restaurant menu into English",
            "what does this street sign say",
        ],
    }));
    let carded = active_draft(serde_json::json!({
        "package_name": "com.example.signs",
        "card": {
            "name": "Signs",
            "description": "Reads signs aloud.",
            "skills": [{"name": "read", "description": "Read a sign", "tags": [],
                        "examples": ["read the platform sign at the station to me"]}],
        },
    }));
    assert_eq!(
        carded.draft.representative_queries,
        ["read the platform sign at the station to me"]
    );
    let index = SearchIndex::new(store, None).expect("index");
    index
        .rebuild_keyword(&[menus, guide, lingo, carded])
        .await
        .expect("index");
    async fn first(index: &SearchIndex, text: &str) -> String {
        let request = SearchRequest {
            text: text.to_owned(),
            ..ordered(Sort::Relevance, 10, 0, None)
        };
        let page = index.search(&request).await.expect("search");
        assert!(page.total >= 2, "{text}: competitors match too");
        page.hits[0].listing.package_name().to_owned()
    }
    let request = "can you translate this restaurant menu into English for me?";
    assert_eq!(first(&index, request).await, "com.example.lingo");
    let request = "read the sign at the station";
    assert_eq!(first(&index, request).await, "com.example.signs");
}

/// A weather agent, a rain radar sharing its words, and an unrelated one.
fn weather_agents() -> [Agent; 3] {
    [
        (
            "com.example.weather",
            "Weather Agent",
            "Forecasts and current conditions for any city.",
        ),
        (
            "com.example.radar",
            "Rain Radar",
            "Rain forecasts and current conditions near you.",
        ),
        (
            "com.example.prices",
            "Crypto Prices",
            "Prices of bitcoin and other coins.",
        ),
    ]
    .map(|(package_name, name, description)| {
        active_draft(serde_json::json!({
            "package_name": package_name, "name": name, "description": description,
        }))
    })
}

#[tokio::test]
async fn feedback_finds_by_keywords_what_a_sentences_nearest_agents_share() {
    let (_dir, store) = sqlite_store().await;
    let agents = weather_agents();
    let request = SearchRequest {
        text: "will it rain in Paris tomorrow morning, please?".to_owned(),
        ..ordered(Sort::Relevance, 10, 0, None)
    };
    let table: Arc<dyn embed::Embedder> =
        Arc::new(embed::StaticEmbedder::builtin().expect("table"));
    // Every neighbour a match by itself, as a model's near ones are.
    let embedder: Arc<dyn embed::Embedder> = Arc::new(Floored {
        inner: Arc::clone(&table),
        floor: Some(-1.0),
    });
    // Where the weather agent ranks, and its score, with and without feedback.
    let mut found = Vec::new();
    for feedback in [None, Some(Feedback::DEFAULT)] {
        let index = SearchIndex::new(Arc::clone(&store), Some(Arc::clone(&embedder)))
            .expect("index")
            .with_feedback(FeedbackRule::Fixed(feedback));
        index.rebuild(&agents).await.expect("index");
        let page = index.search(&request).await.expect("search");
        let names: Vec<&str> = page.hits.iter().map(|h| h.listing.package_name()).collect();
        let weather = page
            .hits
            .iter()
            .find(|hit| hit.listing.package_name() == "com.example.weather")
            .and_then(|hit| hit.score);
        assert_eq!(names[0], "com.example.radar", "{names:?}");
        found.push(weather.unwrap_or(0.0));
    }
    // Expanded by "forecast", "current" and "condition", which the radar (the nearest agent
    // with the query's "rain") shares with it, the weather agent now ranks by keywords too.
    assert!(found[1] > found[0], "{found:?}");
    // The added words find nothing by themselves: every match is the radar (the query's own
    // word "rain") or one of the query's neighbours, whatever else the added words hold.
    let index = SearchIndex::new(Arc::clone(&store), Some(Arc::clone(&table)))
        .expect("index")
        .with_feedback(FeedbackRule::Fixed(Some(Feedback::DEFAULT)));
    let mut with_stocks = agents.to_vec();
    with_stocks.push(active_draft(serde_json::json!({
        "package_name": "com.example.stocks", "name": "Stock Desk",
        "description": "Forecasts and current conditions of stock markets.",
    })));
    index.rebuild(&with_stocks).await.expect("index");
    let neighbours: Vec<String> = index
        .nearest_by_meaning(&request.text, 100)
        .await
        .into_iter()
        .filter(|(_, similarity)| *similarity >= embed::DEFAULT_MIN_SIMILARITY)
        .map(|(listing, _)| listing.package_name().to_owned())
        .collect();
    let page = index.search(&request).await.expect("search");
    assert_eq!(page.total, page.hits.len());
    for hit in &page.hits {
        let name = hit.listing.package_name();
        assert!(
            name == "com.example.radar" || neighbours.iter().any(|n| n == name),
            "{name} matched by the added words alone: {neighbours:?}"
        );
    }
    let embedder = table;
    // The static table's own default is no feedback; a model's is the default feedback.
    let index = SearchIndex::new(Arc::clone(&store), Some(embedder)).expect("index");
    assert_eq!(index.feedback(), None);
}

/// Another embedder's vectors, with its own similarity floor.
struct Floored {
    inner: Arc<dyn embed::Embedder>,
    floor: Option<f32>,
}

#[async_trait::async_trait]
impl embed::Embedder for Floored {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn is_bag_of_words(&self) -> bool {
        self.inner.is_bag_of_words()
    }

    fn min_similarity(&self) -> Option<f32> {
        self.floor
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
        self.inner.embed(texts).await
    }
}

#[tokio::test]
async fn neighbours_match_by_themselves_only_above_the_floor_and_for_known_words() {
    let (_dir, store) = sqlite_store().await;
    let agents = weather_agents();
    let table: Arc<dyn embed::Embedder> =
        Arc::new(embed::StaticEmbedder::builtin().expect("table"));
    let search = |floor: Option<f32>, text: &'static str| {
        let store = Arc::clone(&store);
        let table = Arc::clone(&table);
        let agents = agents.clone();
        async move {
            let embedder: Arc<dyn embed::Embedder> = Arc::new(Floored {
                inner: table,
                floor,
            });
            let index = SearchIndex::new(store, Some(embedder)).expect("index");
            index.rebuild(&agents).await.expect("index");
            let request = SearchRequest {
                text: text.to_owned(),
                facets: true,
                ..ordered(Sort::Relevance, 10, 0, None)
            };
            let page = index.search(&request).await.expect("search");
            let names: Vec<String> = page
                .hits
                .iter()
                .map(|h| h.listing.package_name().to_owned())
                .collect();
            let counted: usize = page.facets.expect("facets").category.values().sum();
            (page.total, names, counted)
        }
    };
    // Every neighbour admitted: the weather agent matches "rain" by meaning too.
    let (total, names, _) = search(Some(-1.0), "rain").await;
    assert!(total >= 2, "{names:?}");
    assert!(
        names.contains(&"com.example.weather".to_owned()),
        "{names:?}"
    );
    // No neighbour admitted: "rain" matches the radar alone, and facets count that one.
    let (total, names, _) = search(None, "rain").await;
    assert_eq!((total, names), (1, vec!["com.example.radar".to_owned()]));
    // A floor above every neighbour's similarity admits none either.
    let (total, _, _) = search(Some(1.01), "rain").await;
    assert_eq!(total, 1);
    // Words no agent holds: nothing matches, whatever the floor.
    let (total, names, _) = search(Some(-1.0), "zzzqqq").await;
    assert_eq!((total, names.len()), (0, 0));
}

/// Every page of a search for `viewer`, as (every id, sorted; the total and the category counts
/// of the first page).
async fn every_page(
    index: &SearchIndex,
    text: &str,
    (collapse, facets): (bool, bool),
    viewer: &crate::domain::access::Viewer,
) -> (
    Vec<String>,
    usize,
    Option<std::collections::BTreeMap<String, usize>>,
) {
    let request = |cursor| SearchRequest {
        text: text.to_owned(),
        filters: Filters {
            collapse_duplicates: collapse,
            ..Filters::default()
        },
        facets,
        viewer: viewer.clone(),
        ..ordered(Sort::Relevance, 7, 0, cursor)
    };
    let mut seen = Vec::new();
    let mut cursor = None;
    let mut first = None;
    loop {
        let page = index.search(&request(cursor)).await.expect("search");
        seen.extend(ids(&page));
        first.get_or_insert((page.total, page.facets.clone()));
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    let (total, facets) = first.expect("a page");
    seen.sort();
    (seen, total, facets.map(|f| f.category))
}

/// Each viewer's searches of `index` (holding `agents`) against an index of the agents it may
/// see, all public: the same ids, totals and facet counts.
async fn viewers_find_what_they_may_see(
    step: &str,
    index: &SearchIndex,
    store: &Arc<dyn Store>,
    agents: &[Agent],
) {
    use crate::domain::access::Viewer;
    use crate::domain::agent::Visibility;
    let viewers = [
        Viewer::Anonymous,
        Viewer::of_owners(vec!["org:a".to_owned(), "alice".to_owned()]),
        Viewer::Everyone,
    ];
    for viewer in &viewers {
        let visible: Vec<Agent> = agents
            .iter()
            .filter(|agent| agent.is_listed_to(viewer))
            .cloned()
            .map(|mut agent| {
                agent.draft.visibility = Some(Visibility::Public);
                agent
            })
            .collect();
        let reference = SearchIndex::new(Arc::clone(store), None).expect("index");
        reference.rebuild_keyword(&visible).await.expect("index");
        // Collapsing groups public agents alone, so only an anonymous search collapses as the
        // reference does.
        let collapsing: &[bool] = if *viewer == Viewer::Anonymous {
            &[true, false]
        } else {
            &[false]
        };
        // Without facets, a keyword search counts its matches by document bits (public
        // agents') and visits the others one by one; with them, it visits every match.
        for text in ["storms", "forecasts harbour", ""] {
            for &collapse in collapsing {
                for facets in [false, true] {
                    let how = (collapse, facets);
                    let expected = every_page(&reference, text, how, &Viewer::Everyone).await;
                    for by_documents in [true, false] {
                        index.set_count_by_documents(by_documents);
                        let found = every_page(index, text, how, viewer).await;
                        assert_eq!(found, expected, "{step}: {viewer:?} {text:?} {how:?}");
                    }
                }
            }
        }
    }
    index.set_count_by_documents(true);
}

/// Private agents are part of the search, as a filter is: a viewer's pages, totals and facet
/// counts are those of an index holding only the agents it may see (keyword ranking counted
/// by documents or match by match, duplicates collapsed or not), and an agent made private,
/// public again or moved to another owner moves between the viewers' searches.
#[tokio::test]
async fn a_viewer_finds_exactly_the_agents_it_may_see() {
    use crate::domain::agent::Visibility;
    let (_dir, store) = sqlite_store().await;
    let agent = |i: usize| {
        let mut agent = active_draft(serde_json::json!({
            "package_name": format!("com.example.seen{i}"),
            "name": format!("Agent {}", i % 17),
            "description": format!("Forecasts {}for any harbour.", "storms ".repeat(i % 4)),
            "category": if i.is_multiple_of(2) { "Weather" } else { "Sea" },
            // Every fifth shares a repository with two others, private ones among them.
            "manifest_url": if i.is_multiple_of(5) {
                format!("https://github.com/acme/repo{}/blob/main/card.json", (i / 5) % 20)
            } else {
                format!("https://agent{i}.example.com/card.json")
            },
        }));
        if i % 4 == 1 {
            agent.draft.visibility = Some(Visibility::Private);
            agent.owner = if i % 8 == 1 { "org:a" } else { "org:b" }.to_owned();
        }
        agent
    };
    let agents: Vec<Agent> = (0..300).map(agent).collect();
    let index = SearchIndex::new(Arc::clone(&store), None).expect("index");
    index.rebuild_keyword(&agents).await.expect("index");
    viewers_find_what_they_may_see("built", &index, &store, &agents).await;
    // Private agents made public, public ones made private, and private ones moved to the
    // other organisation.
    let mut changed = agents.clone();
    for (i, agent) in changed.iter_mut().enumerate() {
        if i % 12 == 1 {
            agent.draft.visibility = Some(Visibility::Public);
            agent.owner = "alice".to_owned();
        } else if i % 12 == 2 {
            agent.draft.visibility = Some(Visibility::Private);
            agent.owner = "org:a".to_owned();
        } else if i % 8 == 5 {
            agent.owner = "org:a".to_owned();
        } else {
            continue;
        }
        agent.revision += 1;
    }
    index.apply_batch(&changed, &[]).await;
    viewers_find_what_they_may_see("changed", &index, &store, &changed).await;
}
