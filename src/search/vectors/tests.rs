//! The store against exact answers: quantisation, kernels, scans, the graph and its upkeep.

use super::kernel::{Portable, dot_i8};
#[cfg(target_arch = "x86_64")]
use super::kernel::{arrays, dot_avx2, dot_avx2_bytes, dot_avx2_bytes_rows, dot_avx2_rows};
use super::*;
use crate::embed::dot;

fn unit(values: &[f32]) -> Vec<f32> {
    let norm = dot(values, values).sqrt();
    values.iter().map(|x| x / norm).collect()
}

/// A deterministic pseudo-random unit vector.
fn pseudo_random(seed: u32, dim: usize) -> Vec<f32> {
    let values: Vec<f32> = (0..dim)
        .map(|i| ((seed as f32 * 12.9898 + i as f32 * 78.233).sin() * 43_758.547).fract())
        .collect();
    unit(&values)
}

#[test]
fn integer_dot_matches_the_naive_sum_for_any_length() {
    for len in [0, 1, 15, 16, 17, 33, 384] {
        let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as u8 as i8).collect();
        let b: Vec<i8> = (0..len).map(|i| ((i * 11) % 255) as u8 as i8).collect();
        let naive: i32 = a
            .iter()
            .zip(&b)
            .map(|(x, y)| i32::from(*x) * i32::from(*y))
            .sum();
        assert_eq!(dot_i8(&a, &b), naive, "len {len}");
    }
}

#[test]
fn quantised_similarities_stay_within_a_hundredth_of_exact_ones() {
    let dim = 256;
    let mut store = VectorStore::new(dim);
    let vectors: Vec<Vec<f32>> = (0..200).map(|i| pseudo_random(i, dim)).collect();
    for (slot, vector) in vectors.iter().enumerate() {
        store.set(slot as u32, vector);
    }
    let query = pseudo_random(999, dim);
    for (slot, similarity) in store.nearest(&query, 200, -1.0, |_| true) {
        let exact = dot(&vectors[slot as usize], &query);
        assert!((similarity - exact).abs() < 0.01, "{similarity} vs {exact}");
    }
}

#[test]
fn the_avx2_dot_product_equals_the_portable_one() {
    #[cfg(target_arch = "x86_64")]
    if let Some(v3) = pulp::x86::V3::try_new() {
        for len in [16, 32, 256, 384] {
            let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as u8 as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| ((i * 11 + 3) % 255) as u8 as i8).collect();
            let wide: Vec<[i16; 16]> = arrays::<16>(&b).map(|chunk| chunk.map(i16::from)).collect();
            let extreme = vec![-127i8; len];
            let wide_extreme = vec![[-127i16; 16]; len / 16];
            assert_eq!(dot_avx2(v3, &a, &wide), dot_i8(&a, &b), "len {len}");
            assert_eq!(dot_avx2_rows(v3, &a, &b), dot_i8(&a, &b), "len {len}");
            assert_eq!(
                dot_avx2(v3, &extreme, &wide_extreme),
                dot_i8(&extreme, &extreme)
            );
        }
    }
}

#[test]
fn the_byte_kernel_equals_the_portable_one_to_the_extremes() {
    #[cfg(target_arch = "x86_64")]
    if let Some(v3) = pulp::x86::V3::try_new() {
        // Codes span -127..=127 (quantising never makes -128); the extremes make every
        // pair sum 2 · 127 · 127, the most `maddubs` must hold without saturating.
        let spread = |len: usize, step: usize, shift: usize| -> Vec<i8> {
            (0..len)
                .map(|i| ((i * step + shift) % 255) as i32 - 127)
                .map(|code| code as i8)
                .collect()
        };
        for len in [32, 64, 256, 384] {
            let cases = [
                (spread(len, 37, 0), spread(len, 11, 3)),
                (vec![-127; len], vec![-127; len]),
                (vec![127; len], vec![-127; len]),
                (vec![-127; len], vec![127; len]),
                (spread(len, 1, 0), vec![0; len]),
            ];
            for (a, b) in cases {
                let query = prepare(Quantised {
                    codes: b.clone(),
                    scale: 1.0,
                });
                let exact = dot_i8(&a, &b);
                assert_eq!(
                    dot_avx2_bytes(v3, &a, &query.magnitudes, &query.signs),
                    exact,
                    "len {len}"
                );
                assert_eq!(dot_avx2_bytes_rows(v3, &a, &b), exact, "len {len}");
                assert_eq!(dot_avx2_bytes_rows(v3, &b, &a), exact, "len {len}");
            }
        }
    }
}

#[test]
fn a_large_store_scanned_in_halves_finds_what_one_portable_scan_finds() {
    let dim = 32;
    let rows = PARALLEL_ROWS + 1_000;
    let mut store = VectorStore::with_params(dim, None);
    for slot in 0..rows {
        store.set(slot as u32, &pseudo_random(slot as u32, dim));
    }
    store.clear(7);
    let query = pseudo_random(123_456, dim);
    let accept = |slot: u32| !slot.is_multiple_of(3);
    let halves = store.nearest(&query, 50, -1.0, accept);
    let prepared = prepare(quantise(&query));
    let portable = store.scan(Portable, &prepared, 0..rows, 50, -1.0, &accept, false);
    let selective = store.scan(Portable, &prepared, 0..rows, 50, -1.0, &accept, true);
    assert_eq!(selective, portable);
    assert_eq!(halves.len(), 50);
    assert_eq!(halves, portable);
}

#[test]
fn nearest_ranks_by_similarity_and_keeps_the_best_k() {
    let mut store = VectorStore::new(2);
    store.set(0, &unit(&[1.0, 0.0]));
    store.set(1, &unit(&[0.0, 1.0]));
    store.set(2, &unit(&[0.8, 0.6]));
    store.set(3, &unit(&[0.6, 0.8]));
    let slots = |found: Vec<(u32, f32)>| found.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
    assert_eq!(
        slots(store.nearest(&[1.0, 0.0], 4, -1.0, |_| true)),
        [0, 2, 3, 1]
    );
    assert_eq!(slots(store.nearest(&[1.0, 0.0], 2, -1.0, |_| true)), [0, 2]);
    assert_eq!(
        slots(store.nearest(&[1.0, 0.0], 4, 0.5, |_| true)),
        [0, 2, 3]
    );
}

#[test]
fn a_store_without_a_dimension_adopts_the_first_vectors() {
    let mut store = VectorStore::new(0);
    store.set(1, &[0.0, 1.0, 0.0]);
    assert_eq!(store.dim(), 3);
    store.set(2, &[1.0]);
    assert_eq!(store.get(2), None);
    let found = store.nearest(&[0.0, 1.0, 0.0], 10, 0.0, |_| true);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].0, 1);
    assert!((found[0].1 - 1.0).abs() < 1e-6);
}

#[test]
fn nearest_skips_cleared_rejected_and_missing_slots() {
    let mut store = VectorStore::new(2);
    store.set(0, &[1.0, 0.0]);
    store.set(2, &[0.0, 1.0]);
    store.set(3, &[0.6, 0.8]);
    store.clear(2);
    store.set(4, &[1.0]);
    let found = store.nearest(&[1.0, 0.0], 10, -1.0, |slot| slot != 3);
    assert_eq!(found.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [0]);
    let kept = store.get(3).expect("slot 3");
    assert!((kept[0] - 0.6).abs() < 0.01 && (kept[1] - 0.8).abs() < 0.01);
    assert_eq!(store.get(4), None);
    assert!(store.nearest(&[1.0], 10, -1.0, |_| true).is_empty());
}

/// A deterministic generator for the graph tests.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// Roughly normal: the sum of four uniforms, centred.
    fn normal(&mut self) -> f32 {
        (0..4)
            .map(|_| (self.next() >> 40) as f32 / (1u64 << 24) as f32)
            .sum::<f32>()
            - 2.0
    }
}

/// `count` unit vectors in `clusters` clusters around a shared direction, the way text
/// embeddings crowd: every pair is somewhat similar, neighbours within a cluster more so.
fn clustered(count: usize, clusters: usize, dim: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut rng = Rng(seed);
    let shared: Vec<f32> = (0..dim).map(|_| rng.normal()).collect();
    let centres: Vec<Vec<f32>> = (0..clusters)
        .map(|_| {
            let centre: Vec<f32> = (0..dim).map(|_| rng.normal()).collect();
            unit(
                &centre
                    .iter()
                    .zip(&shared)
                    .map(|(c, s)| c + 0.8 * s)
                    .collect::<Vec<_>>(),
            )
        })
        .collect();
    (0..count)
        .map(|i| {
            let centre = &centres[i % clusters];
            let point: Vec<f32> = centre.iter().map(|c| c + 0.12 * rng.normal()).collect();
            unit(&point)
        })
        .collect()
}

/// Parameters for small graphs: the graph always searched, at a width the tests can afford
/// unoptimised.
fn graph_params(ef_search: usize) -> IndexParams {
    IndexParams {
        graph: GraphParams {
            m: 8,
            ef_construction: 64,
            alpha: 1.0,
            keep_pruned: true,
            seed: 7,
        },
        query: QueryParams {
            ef_search,
            wider_from: usize::MAX,
            exact_below: 0,
            filtered_exact_below: 0,
        },
    }
}

fn store_of(vectors: &[Vec<f32>], params: Option<IndexParams>) -> VectorStore {
    let mut store = VectorStore::with_params(vectors[0].len(), params);
    for (slot, vector) in vectors.iter().enumerate() {
        store.set(slot as u32, vector);
    }
    store
}

/// The share of the exact answer's similarities the approximate answer reaches: results
/// as similar as the exact k-th count, so that ties between equal vectors do not matter.
fn recall(approximate: &[(u32, f32)], exact: &[(u32, f32)]) -> f64 {
    let Some(&(_, kth)) = exact.last() else {
        return 1.0;
    };
    let reached = approximate.iter().filter(|(_, sim)| *sim >= kth).count();
    reached.min(exact.len()) as f64 / exact.len() as f64
}

fn mean_recall(
    store: &VectorStore,
    queries: &[Vec<f32>],
    k: usize,
    accept: impl Fn(u32) -> bool + Sync + Copy,
) -> f64 {
    let total: f64 = queries
        .iter()
        .map(|query| {
            let exact = store.nearest_exact(query, k, -1.0, accept);
            let found = store.nearest(query, k, -1.0, accept);
            assert_eq!(
                found.len(),
                exact.len(),
                "as many results as the exact scan"
            );
            recall(&found, &exact)
        })
        .sum();
    total / queries.len() as f64
}

#[test]
fn a_narrow_filter_with_its_slots_is_answered_by_scanning_only_those() {
    let vectors = clustered(600, 12, 24, 11);
    let mut params = graph_params(64);
    params.query.filtered_exact_below = 200;
    let mut store = store_of(&vectors, Some(params));
    store.clear(10);
    // Twins share one vector: both slots count.
    store.set(700, &vectors[20]);
    let mut within = SlotSet::default();
    for slot in (0..600).step_by(7).chain([10, 700, 900]) {
        within.insert(slot);
    }
    let accept = |slot: u32| within.contains(slot) && slot % 5 != 1;
    for seed in 0..5 {
        let query = &vectors[seed * 97];
        let exact = store.nearest_exact(query, 30, -1.0, accept);
        assert_eq!(
            store.nearest_within(query, 30, -1.0, Some(&within), accept),
            exact
        );
        assert_eq!(store.nearest(query, 30, -1.0, accept), exact);
        assert!(exact.iter().all(|(slot, _)| accept(*slot) && *slot != 10));
        // On one core or two (half of the set each), the same answer.
        let prepared = prepare(quantise(query));
        for parallel in [false, true] {
            let scanned = store.scan_within(&prepared, 30, -1.0, &within, &accept, parallel);
            assert_eq!(scanned, exact, "parallel: {parallel}");
        }
    }
    let slots: Vec<u32> = store
        .nearest_within(&vectors[20], 2, 0.99, Some(&within), accept)
        .iter()
        .map(|(slot, _)| *slot)
        .collect();
    assert_eq!(slots, [700]);
}

#[test]
fn the_graph_finds_what_the_exact_scan_finds_on_clustered_vectors() {
    let dim = 32;
    let vectors = clustered(2_000, 40, dim, 1);
    let queries = clustered(30, 40, dim, 2);
    let store = store_of(&vectors, Some(graph_params(200)));
    assert_eq!(store.distinct(), 2_000);
    let recall_100 = mean_recall(&store, &queries, 100, |_| true);
    let recall_10 = mean_recall(&store, &queries, 10, |_| true);
    assert!(recall_100 >= 0.97, "recall@100 {recall_100}");
    assert!(recall_10 >= 0.97, "recall@10 {recall_10}");
    // Filters that let half and a quarter through search narrower, and find as much.
    for every in [2, 4] {
        let recall = mean_recall(&store, &queries, 100, move |slot| slot % every == 0);
        assert!(recall >= 0.97, "1/{every}: recall@100 {recall}");
    }
}

#[test]
fn a_graph_past_the_reference_size_finds_more_of_the_exact_answer() {
    let vectors = clustered(4_000, 80, 32, 3);
    let queries = clustered(40, 80, 32, 4);
    let mut store = store_of(&vectors, Some(graph_params(100)));
    let narrow = mean_recall(&store, &queries, 100, |_| true);
    // 4,000 vectors against 400: width 100 · 10^0.4 = 252.
    store.set_query_params(QueryParams {
        wider_from: 400,
        ..store.query_params()
    });
    let wide = mean_recall(&store, &queries, 100, |_| true);
    assert!(wide >= narrow + 0.01 && wide >= 0.97, "{narrow} → {wide}");
}

#[test]
fn a_graph_past_the_reference_size_scans_more_filters() {
    assert_eq!(scan_threshold(20_000, 100_000, 100_000), 20_000);
    // 20,000 · 10^0.6 = 79,621.4.
    assert_eq!(scan_threshold(20_000, 1_000_000, 100_000), 79_622);
    assert_eq!(scan_threshold(20_000, 1_000_000, usize::MAX), 20_000);
    // Through `nearest`: 1,600 vectors against a reference of 400, so a filter expected
    // to let 300 through (under 200 · 4^0.6 = 460) is scanned, and finds the exact answer
    // where the narrow graph walk of width 50 (graph_params) would not.
    let vectors = clustered(1_600, 40, 32, 5);
    let mut params = graph_params(50);
    params.query.filtered_exact_below = 200;
    let mut store = store_of(&vectors, Some(params));
    let accept = |slot: u32| slot % 16 < 3;
    let queries = clustered(20, 40, 32, 6);
    let graph_recall = mean_recall(&store, &queries, 100, accept);
    store.set_query_params(QueryParams {
        wider_from: 400,
        ..store.query_params()
    });
    for query in &queries {
        assert_eq!(
            store.nearest(query, 100, -1.0, accept),
            store.nearest_exact(query, 100, -1.0, accept)
        );
    }
    assert!(
        graph_recall < 1.0,
        "the graph alone misses some: {graph_recall}"
    );
}

#[test]
fn a_graph_past_the_reference_size_searches_wider() {
    assert_eq!(size_width(400, 0, 100_000), 400);
    assert_eq!(size_width(400, 100_000, 100_000), 400);
    // 400 · 2^0.4 = 527.8, 400 · 10^0.4 = 1,004.8.
    assert_eq!(size_width(400, 200_000, 100_000), 528);
    assert_eq!(size_width(400, 1_000_000, 100_000), 1_005);
    assert_eq!(size_width(400, 1_000_000, usize::MAX), 400);
    assert_eq!(size_width(400, 1_000_000, 0), 400);
}

#[test]
fn a_filter_narrows_the_search_width_by_its_share_to_half_at_most() {
    assert_eq!(filtered_width(400, 1_000, 1_000), 400);
    assert_eq!(filtered_width(400, 0, 0), 400);
    // 400 · 0.5^0.4 = 303.1, 400 · 0.25^0.4 = 229.7.
    assert_eq!(filtered_width(400, 500, 1_000), 304);
    assert_eq!(filtered_width(400, 250, 1_000), 230);
    assert_eq!(filtered_width(400, 10, 1_000), 200);
    assert_eq!(filtered_width(400, 0, 1_000), 200);
}

#[test]
fn construction_is_deterministic() {
    let vectors = clustered(300, 10, 16, 3);
    let a = store_of(&vectors, Some(graph_params(50)));
    let b = store_of(&vectors, Some(graph_params(50)));
    let (ga, gb) = (
        a.graph.as_ref().expect("graph"),
        b.graph.as_ref().expect("graph"),
    );
    for node in 0..300 {
        assert_eq!(ga.links0(node), gb.links0(node), "node {node}");
    }
    let query = &clustered(1, 10, 16, 4)[0];
    assert_eq!(
        a.nearest(query, 20, -1.0, |_| true),
        b.nearest(query, 20, -1.0, |_| true)
    );
}

#[test]
fn deleted_slots_leave_the_answers_and_reinserted_ones_return() {
    let dim = 16;
    let vectors = clustered(1_200, 20, dim, 5);
    let queries = clustered(20, 20, dim, 6);
    let mut store = store_of(&vectors, Some(graph_params(100)));
    // Delete two slots in three: enough to purge the dead nodes on the way.
    for slot in (0..1_200u32).filter(|slot| slot % 3 != 0) {
        store.clear(slot);
    }
    assert_eq!(store.len(), 400);
    let graph = store.graph.as_ref().expect("graph");
    assert!(graph.dead() < 400, "purged: {} dead", graph.dead());
    for query in &queries {
        let found = store.nearest(query, 50, -1.0, |_| true);
        assert_eq!(found.len(), 50);
        assert!(found.iter().all(|(slot, _)| slot % 3 == 0), "{found:?}");
    }
    assert!(mean_recall(&store, &queries, 50, |_| true) >= 0.97);
    // Back in, some with their old vector, some moved to another one.
    for slot in (0..1_200u32).filter(|slot| slot % 3 != 0) {
        let vector = if slot % 2 == 0 {
            &vectors[slot as usize]
        } else {
            &vectors[(slot as usize + 7) % 1_200]
        };
        store.set(slot, vector);
    }
    assert_eq!(store.len(), 1_200);
    assert!(mean_recall(&store, &queries, 100, |_| true) >= 0.97);
    // Nodes freed by the purge were reused rather than the store growing past what it
    // held at its fullest plus the moved vectors.
    assert!(
        store.heads.len() <= 1_200 + 400,
        "{} nodes",
        store.heads.len()
    );
}

#[test]
fn a_moved_vector_is_found_where_it_now_is() {
    let vectors = clustered(500, 10, 16, 8);
    let mut store = store_of(&vectors, Some(graph_params(50)));
    let target = clustered(1, 10, 16, 9).remove(0);
    store.set(42, &target);
    let found = store.nearest(&target, 1, -1.0, |_| true);
    assert_eq!(found[0].0, 42);
    assert!(found[0].1 > 0.99);
    let old = store.nearest(&vectors[42], 500, -1.0, |_| true);
    let (_, sim) = old.iter().find(|(slot, _)| *slot == 42).expect("slot 42");
    assert!(*sim < 0.99, "slot 42 moved away from its old vector");
}

#[test]
fn a_filtered_search_returns_k_matches_whenever_k_exist() {
    let dim = 16;
    let vectors = clustered(1_500, 15, dim, 10);
    let queries = clustered(10, 15, dim, 11);
    let store = store_of(&vectors, Some(graph_params(60)));
    // A filter far from every query's neighbourhood: one cluster in fifteen.
    let one_cluster = |slot: u32| slot % 15 == 7;
    // And five slots in all.
    let five = |slot: u32| [3, 400, 777, 1_001, 1_499].contains(&slot);
    for query in &queries {
        let found = store.nearest(query, 5, -1.0, one_cluster);
        assert_eq!(found.len(), 5);
        assert!(found.iter().all(|(slot, _)| one_cluster(*slot)));
        let found = store.nearest(query, 5, -1.0, five);
        assert_eq!(found.len(), 5);
        assert_eq!(found, store.nearest_exact(query, 5, -1.0, five));
        assert_eq!(store.nearest(query, 10, -1.0, five).len(), 5);
    }
    assert!(mean_recall(&store, &queries, 20, one_cluster) >= 0.97);
    // With the default thresholds a filter this selective goes to the exact scan.
    let mut exact_for_filters = graph_params(60);
    exact_for_filters.query.filtered_exact_below = 500;
    let store = store_of(&vectors, Some(exact_for_filters));
    assert!(store.expected_accepted(&one_cluster) < 500);
    for query in &queries {
        assert_eq!(
            store.nearest(query, 20, -1.0, one_cluster),
            store.nearest_exact(query, 20, -1.0, one_cluster)
        );
    }
}

#[test]
fn tiny_stores_answer_like_the_exact_scan() {
    let vectors = clustered(6, 2, 16, 12);
    let query = clustered(1, 2, 16, 13).remove(0);
    for count in 0..=6 {
        let mut store = VectorStore::with_params(16, Some(graph_params(10)));
        for (slot, vector) in vectors.iter().take(count).enumerate() {
            store.set(slot as u32 * 3, vector);
        }
        for k in [1, 3, 10] {
            assert_eq!(
                store.nearest(&query, k, -1.0, |_| true),
                store.nearest_exact(&query, k, -1.0, |_| true),
                "{count} vectors, k {k}"
            );
        }
        for slot in 0..count as u32 {
            store.clear(slot * 3);
        }
        assert!(store.is_empty());
        assert!(store.nearest(&query, 3, -1.0, |_| true).is_empty());
    }
}

#[test]
fn identical_vectors_share_a_node_and_are_all_found() {
    let dim = 16;
    let mut vectors = clustered(400, 8, dim, 14);
    // Every vector three times more, like a catalogue of copies.
    let originals = vectors.clone();
    for _ in 0..3 {
        vectors.extend(originals.iter().cloned());
    }
    let mut store = store_of(&vectors, Some(graph_params(100)));
    assert_eq!(store.len(), 1_600);
    assert_eq!(store.distinct(), 400);
    let query = &originals[17];
    let found = store.nearest(query, 4, -1.0, |_| true);
    assert_eq!(
        found.iter().map(|(slot, _)| *slot).collect::<Vec<_>>(),
        [17, 417, 817, 1_217]
    );
    assert_eq!(store.nearest(query, 100, -1.0, |_| true).len(), 100);
    assert!(mean_recall(&store, &clustered(10, 8, dim, 15), 100, |_| true) >= 0.97);
    // The node lives while one of its slots does.
    for slot in [17, 417, 817] {
        store.clear(slot);
    }
    assert_eq!(store.nearest(query, 1, -1.0, |_| true)[0].0, 1_217);
    assert_eq!(store.distinct(), 400);
    store.clear(1_217);
    assert_eq!(store.distinct(), 399);
    assert!(
        store
            .nearest(query, 10, -1.0, |_| true)
            .iter()
            .all(|(slot, _)| slot % 400 != 17)
    );
}

#[test]
fn a_store_without_a_dimension_builds_its_graph_from_the_first_vector() {
    let vectors = clustered(200, 4, 16, 16);
    let mut store = VectorStore::with_params(0, Some(graph_params(50)));
    assert_eq!(store.dim(), 0);
    assert!(store.nearest(&vectors[0], 5, -1.0, |_| true).is_empty());
    for (slot, vector) in vectors.iter().enumerate() {
        store.set(slot as u32, vector);
    }
    store.set(500, &[1.0, 0.0]);
    assert_eq!(store.dim(), 16);
    assert_eq!(store.len(), 200);
    assert_eq!(store.nearest(&vectors[9], 1, -1.0, |_| true)[0].0, 9);
}

#[test]
fn the_graph_is_built_once_the_store_reaches_its_size() {
    let dim = 16;
    let vectors = clustered(261, 5, dim, 18);
    let queries = clustered(10, 5, dim, 19);
    let mut params = graph_params(100);
    params.query.exact_below = 300;
    let mut store = VectorStore::with_params(dim, Some(params));
    for (slot, vector) in vectors.iter().take(250).enumerate() {
        store.set(slot as u32, vector);
    }
    store.clear(3);
    // Copies of the first 40 vectors: separate nodes until the graph merges them (slot 253
    // holds the only copy of vector 3 left).
    for (slot, vector) in (250..).zip(&vectors[..40]) {
        store.set(slot, vector);
    }
    for (slot, vector) in (290..).zip(&vectors[250..260]) {
        store.set(slot, vector);
    }
    assert_eq!(store.distinct(), 299);
    assert!(store.graph.is_none());
    store.set(300, &vectors[260]);
    assert!(store.graph.is_some());
    assert_eq!(store.distinct(), 261, "copies merged");
    assert_eq!(store.len(), 300);
    assert!(mean_recall(&store, &queries, 50, |_| true) >= 0.97);
    let slots = |found: Vec<(u32, f32)>| found.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
    assert_eq!(
        slots(store.nearest(&vectors[7], 2, -1.0, |_| true)),
        [7, 257]
    );
    store.set(310, &vectors[3]);
    assert_eq!(store.distinct(), 261, "a copy joins its twin");
    assert_eq!(
        slots(store.nearest(&vectors[3], 2, -1.0, |_| true)),
        [253, 310]
    );
}

#[test]
fn a_store_without_a_graph_stays_exact() {
    let vectors = clustered(300, 5, 16, 20);
    let store = store_of(&vectors, None);
    assert!(store.graph.is_none());
    let query = &clustered(1, 5, 16, 21)[0];
    assert_eq!(
        store.nearest(query, 30, -1.0, |_| true),
        store.nearest_exact(query, 30, -1.0, |_| true)
    );
}

#[test]
fn setting_the_same_vector_again_changes_nothing() {
    let vectors = clustered(100, 4, 16, 17);
    let mut store = store_of(&vectors, Some(graph_params(50)));
    let before: Vec<Vec<u32>> = (0..100)
        .map(|node| store.graph.as_ref().expect("graph").links0(node).to_vec())
        .collect();
    for (slot, vector) in vectors.iter().enumerate() {
        store.set(slot as u32, vector);
    }
    let graph = store.graph.as_ref().expect("graph");
    for (node, links) in before.iter().enumerate() {
        assert_eq!(graph.links0(node as u32), links.as_slice());
    }
    assert_eq!(store.distinct(), 100);
}
