//! The vector index alone, on the static embedder's vectors of the bench's agents: the exact scan
//! against the HNSW graph (`compare`), and the measurements the graph's parameters were chosen
//! by (`sweep`). Recall@k is measured against the exact scan of the same store, counting a
//! result as found when it is at least as similar as the exact k-th (so that ties do not count
//! against either).

use std::time::{Duration, Instant};

use agent_registry::embed::{self, Embedder, EmbedderKind};
use agent_registry::search::duplicates::{Groups, Rank, group_key};
use agent_registry::search::facets::SlotSet;
use agent_registry::search::vectors::{IndexParams, QueryParams, VectorStore};
use agent_registry::store::Agent;

use super::{FILTER_TAGS, embedder_config, micros, percentile};

/// As the search asks: the 100 nearest at least 0.2 similar.
const K: usize = 100;
const MIN_SIMILARITY: f32 = 0.2;
const BATCH: usize = 2_048;

/// What the registry embeds of an agent (`embedding_text` in src/search/catalog.rs).
fn embedding_text(agent: &Agent) -> String {
    let draft = &agent.draft;
    let mut parts = vec![draft.name.clone(), draft.description.clone()];
    if !draft.tags.is_empty() {
        parts.push(draft.tags.join(" "));
    }
    if let Some(category) = draft.category.as_ref().filter(|c| !c.is_empty()) {
        parts.push(category.clone());
    }
    let capabilities: Vec<String> = draft
        .capabilities
        .iter()
        .map(|c| format!("{} {}", c.name.replace('_', " "), c.description))
        .collect();
    if !capabilities.is_empty() {
        parts.push(capabilities.join("\n"));
    }
    parts.join("\n")
}

fn static_embedder() -> std::sync::Arc<dyn Embedder> {
    embed::from_config(&embedder_config(EmbedderKind::Static))
        .expect("embedder")
        .expect("the static embedder")
}

/// The stores for the first `size` agents: each given its vectors in batches, as the index's
/// start-up does, timed.
struct Built {
    stores: Vec<VectorStore>,
    seconds: Vec<f64>,
    /// Per slot: whether the agent carries one of the filter's tags.
    tagged: Vec<bool>,
    /// Per slot: whether collapsing duplicates hides the agent (as the search's default does).
    hidden: Vec<bool>,
}

async fn build(embedder: &dyn Embedder, agents: &[Agent], params: &[Option<IndexParams>]) -> Built {
    let mut stores: Vec<VectorStore> = params
        .iter()
        .map(|p| VectorStore::with_params(embedder.dim(), *p))
        .collect();
    let mut seconds = vec![0.0; params.len()];
    for (batch_index, batch) in agents.chunks(BATCH).enumerate() {
        let texts: Vec<String> = batch.iter().map(embedding_text).collect();
        let vectors = embedder.embed(&texts).await.expect("embed");
        for (store, seconds) in stores.iter_mut().zip(&mut seconds) {
            let started = Instant::now();
            for (i, vector) in vectors.iter().enumerate() {
                store.set((batch_index * BATCH + i) as u32, vector);
            }
            *seconds += started.elapsed().as_secs_f64();
        }
    }
    let mut groups = Groups::default();
    for (slot, agent) in agents.iter().enumerate() {
        if let Some(key) = group_key(agent) {
            groups.insert(&key, slot as u32, Rank::of(agent, agent.id.as_str().into()));
        }
    }
    let hidden = (0..agents.len() as u32)
        .map(|slot| groups.hidden().contains(slot))
        .collect();
    let tagged = agents
        .iter()
        .map(|agent| {
            agent
                .draft
                .tags
                .iter()
                .any(|tag| FILTER_TAGS.contains(&tag.to_lowercase().as_str()))
        })
        .collect();
    Built {
        stores,
        seconds,
        tagged,
        hidden,
    }
}

async fn query_vectors(embedder: &dyn Embedder, queries: &[String]) -> Vec<Vec<f32>> {
    let mut vectors = Vec::with_capacity(queries.len());
    for batch in queries.chunks(BATCH) {
        vectors.extend(embedder.embed(batch).await.expect("embed"));
    }
    vectors
}

/// Share of the exact answer reached (see the module docs).
fn recall(found: &[(u32, f32)], exact: &[(u32, f32)]) -> f64 {
    let Some(&(_, kth)) = exact.last() else {
        return 1.0;
    };
    let reached = found.iter().filter(|(_, sim)| *sim >= kth).count();
    reached.min(exact.len()) as f64 / exact.len() as f64
}

/// Latencies of `search` over every query, and its answers.
fn timed(
    queries: &[Vec<f32>],
    mut search: impl FnMut(&[f32]) -> Vec<(u32, f32)>,
) -> (Vec<Duration>, Vec<Vec<(u32, f32)>>) {
    for query in queries.iter().take(100) {
        search(query);
    }
    let mut latencies = Vec::with_capacity(queries.len());
    let mut answers = Vec::with_capacity(queries.len());
    for query in queries {
        let started = Instant::now();
        let answer = search(query);
        latencies.push(started.elapsed());
        answers.push(answer);
    }
    latencies.sort();
    (latencies, answers)
}

fn p50_p99(latencies: &[Duration]) -> String {
    format!(
        "{} / {}",
        micros(percentile(latencies, 0.50)),
        micros(percentile(latencies, 0.99))
    )
}

fn mean_recall(found: &[Vec<(u32, f32)>], exact: &[Vec<(u32, f32)>], k: usize) -> f64 {
    let total: f64 = found
        .iter()
        .zip(exact)
        .map(|(found, exact)| {
            let cut = |answer: &[(u32, f32)]| answer[..answer.len().min(k)].to_vec();
            recall(&cut(found), &cut(exact))
        })
        .sum();
    total / found.len().max(1) as f64
}

fn mib(bytes: usize) -> String {
    format!("{:.0}", bytes as f64 / (1024.0 * 1024.0))
}

/// Exact scan against the graph with the default parameters, at each size: the production call
/// (`nearest`, 100 nearest at least 0.2 similar), unfiltered and with the bench's tag filter.
pub async fn compare(agents: &[Agent], sizes: &[usize], queries: &[String]) {
    let embedder = static_embedder();
    let query_vectors = query_vectors(embedder.as_ref(), queries).await;
    println!(
        "Vector index alone (static vectors, dim {}, k {K}, similarity ≥ {MIN_SIMILARITY}; \
         p50 / p99 µs per query):",
        embedder.dim()
    );
    println!();
    println!(
        "| agents | distinct | build s exact / HNSW | MiB exact / HNSW | exact | HNSW | \
         exact, filtered | HNSW, filtered | recall@100 | recall@10 | filtered recall@100 |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &size in sizes {
        let agents = &agents[..size.min(agents.len())];
        let built = build(
            embedder.as_ref(),
            agents,
            &[None, Some(IndexParams::default())],
        )
        .await;
        let [exact, graph] = &built.stores[..] else {
            unreachable!("two stores")
        };
        let tagged = &built.tagged;
        let filter = |slot: u32| tagged[slot as usize];
        let (exact_times, exact_found) = timed(&query_vectors, |q| {
            exact.nearest(q, K, MIN_SIMILARITY, |_| true)
        });
        let (graph_times, graph_found) = timed(&query_vectors, |q| {
            graph.nearest(q, K, MIN_SIMILARITY, |_| true)
        });
        let (exact_filtered_times, exact_filtered) = timed(&query_vectors, |q| {
            exact.nearest(q, K, MIN_SIMILARITY, filter)
        });
        let (graph_filtered_times, graph_filtered) = timed(&query_vectors, |q| {
            graph.nearest(q, K, MIN_SIMILARITY, filter)
        });
        let passing = tagged.iter().filter(|t| **t).count();
        println!(
            "| {} | {} | {:.1} / {:.1} | {} / {} | {} | {} | {} | {} | {:.3} | {:.3} | {:.3} |",
            agents.len(),
            graph.distinct(),
            built.seconds[0],
            built.seconds[1],
            mib(exact.memory_bytes()),
            mib(graph.memory_bytes()),
            p50_p99(&exact_times),
            p50_p99(&graph_times),
            p50_p99(&exact_filtered_times),
            p50_p99(&graph_filtered_times),
            mean_recall(&graph_found, &exact_found, K),
            mean_recall(&graph_found, &exact_found, 10),
            mean_recall(&graph_filtered, &exact_filtered, K),
        );
        eprintln!(
            "{} agents: the filter lets {passing} through ({:.0}%)",
            agents.len(),
            100.0 * passing as f64 / agents.len().max(1) as f64
        );
        shown_filter(graph, &built.hidden, &query_vectors);
    }
}

/// The graph under the filter every default search applies (duplicates hidden) and under
/// filters letting a half, a quarter and an eighth through, at each width of
/// `REGISTRY_BENCH_SHOWN_EF` (none by default) and at the width `nearest` chooses: recall
/// against the exact scan under the same filter, and latency.
fn shown_filter(graph: &VectorStore, hidden: &[bool], query_vectors: &[Vec<f32>]) {
    let efs = list("REGISTRY_BENCH_SHOWN_EF", &[]);
    if efs.is_empty() || !graph.searches_long() {
        return;
    }
    let shown = |slot: u32| !hidden[slot as usize];
    let every_second = |slot: u32| slot.is_multiple_of(2);
    let every_fourth = |slot: u32| slot.is_multiple_of(4);
    let every_eighth = |slot: u32| slot.is_multiple_of(8);
    let share = hidden.iter().filter(|h| !**h).count() as f64 / hidden.len().max(1) as f64;
    let duplicates = format!("Duplicates hidden ({:.0}% shown)", 100.0 * share);
    let filters: [(&str, &(dyn Fn(u32) -> bool + Sync)); 4] = [
        (&duplicates, &shown),
        ("Every second agent", &every_second),
        ("Every fourth agent", &every_fourth),
        ("Every eighth agent", &every_eighth),
    ];
    for (name, filter) in filters {
        let exact: Vec<Vec<(u32, f32)>> = query_vectors
            .iter()
            .map(|q| graph.nearest_exact(q, K, MIN_SIMILARITY, filter))
            .collect();
        println!();
        println!("{name}:");
        println!();
        println!("| ef_search | p50 / p99 µs | recall@100 | recall@10 |");
        println!("|---|---|---|---|");
        for &ef in &efs {
            let (times, found) = timed(query_vectors, |q| {
                graph.nearest_approximate(q, K, ef, MIN_SIMILARITY, filter)
            });
            println!(
                "| {ef} | {} | {:.3} | {:.3} |",
                p50_p99(&times),
                mean_recall(&found, &exact, K),
                mean_recall(&found, &exact, 10),
            );
        }
        // As the search asks: the width set by the filter's share, or the exact scan.
        let (times, found) = timed(query_vectors, |q| {
            graph.nearest(q, K, MIN_SIMILARITY, filter)
        });
        println!(
            "| default | {} | {:.3} | {:.3} |",
            p50_p99(&times),
            mean_recall(&found, &exact, K),
            mean_recall(&found, &exact, 10),
        );
    }
}

fn list(name: &str, default: &[usize]) -> Vec<usize> {
    std::env::var(name).map_or_else(
        |_| default.to_vec(),
        |list| {
            list.split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect()
        },
    )
}

/// The measurements behind the default parameters, at each size:
///
/// 1. for each M and ef_construction (`REGISTRY_BENCH_M`, `REGISTRY_BENCH_EFC`): build time,
///    graph memory, and for each ef_search (`REGISTRY_BENCH_EF`) recall@100 and latency of the
///    graph alone (no filter, no threshold);
/// 2. the exact scan at the same size, for the size threshold;
/// 3. filters letting 1/2 … 1/256 of the slots through: the graph with the filter applied during
///    the search against the exact scan of the slots it lets through, for the filter threshold
///    (skipped with `REGISTRY_BENCH_SWEEP=graph`; `REGISTRY_BENCH_SWEEP=filters` skips 1).
pub async fn sweep(agents: &[Agent], sizes: &[usize], queries: &[String]) {
    let embedder = static_embedder();
    let query_vectors = query_vectors(embedder.as_ref(), queries).await;
    let ms = list("REGISTRY_BENCH_M", &[8, 12, 16, 24]);
    let efcs = list("REGISTRY_BENCH_EFC", &[100, 200]);
    let efs = list("REGISTRY_BENCH_EF", &[100, 150, 200, 300, 400]);
    // Pruning slack, in hundredths.
    let alphas = list("REGISTRY_BENCH_ALPHA", &[100]);
    let keeps = list(
        "REGISTRY_BENCH_KEEP_PRUNED",
        &[usize::from(IndexParams::default().graph.keep_pruned)],
    );
    // The graph from the first vector, whatever the size: the sweep measures it below the size
    // at which the store would build it too.
    let mut defaults = IndexParams::default();
    defaults.query.exact_below = 0;
    for &size in sizes {
        let agents = &agents[..size.min(agents.len())];
        println!("### {} agents", agents.len());
        println!();
        println!(
            "| M | ef_construction | alpha | keep pruned | build s | graph MiB | ef_search | recall@100 | \
             recall@10 | p50 µs | p99 µs |"
        );
        println!("|---|---|---|---|---|---|---|---|---|---|---|");
        let built = build(embedder.as_ref(), agents, &[None]).await;
        let exact = &built.stores[0];
        let (exact_times, exact_found) = timed(&query_vectors, |q| {
            exact.nearest(q, K, MIN_SIMILARITY, |_| true)
        });
        let only_filters = std::env::var("REGISTRY_BENCH_SWEEP").is_ok_and(|s| s == "filters");
        for (&m, &ef_construction, &alpha, &keep) in ms
            .iter()
            .flat_map(|m| efcs.iter().map(move |efc| (m, efc)))
            .flat_map(|(m, efc)| alphas.iter().map(move |alpha| (m, efc, alpha)))
            .flat_map(|(m, efc, alpha)| keeps.iter().map(move |keep| (m, efc, alpha, keep)))
            .filter(|_| !only_filters)
        {
            {
                let mut params = defaults;
                params.graph.m = m;
                params.graph.ef_construction = ef_construction;
                params.graph.alpha = alpha as f32 / 100.0;
                params.graph.keep_pruned = keep != 0;
                let built = build(embedder.as_ref(), agents, &[Some(params)]).await;
                let graph = &built.stores[0];
                for &ef in &efs {
                    let (times, found) = timed(&query_vectors, |q| {
                        graph.nearest_approximate(q, K, ef, MIN_SIMILARITY, |_| true)
                    });
                    println!(
                        "| {m} | {ef_construction} | {:.2} | {keep} | {:.1} | {} | {ef} | {:.3} | {:.3} | {} | {} |",
                        params.graph.alpha,
                        built.seconds[0],
                        mib(graph.graph_memory_bytes()),
                        mean_recall(&found, &exact_found, K),
                        mean_recall(&found, &exact_found, 10),
                        micros(percentile(&times, 0.50)),
                        micros(percentile(&times, 0.99)),
                    );
                }
            }
        }
        println!();
        println!(
            "Exact scan at {} agents: p50 / p99 {} µs.",
            agents.len(),
            p50_p99(&exact_times)
        );
        println!();
        if std::env::var("REGISTRY_BENCH_SWEEP").is_ok_and(|sweep| sweep == "graph") {
            continue;
        }
        // Filters: the default graph, every `every`-th slot accepted.
        let mut built = build(embedder.as_ref(), agents, &[Some(defaults)]).await;
        let graph = &mut built.stores[0];
        println!(
            "| filter lets through | slots | HNSW p50 / p99 µs | recall@100 | exact scan of those \
             slots p50 / p99 µs | the same, given them as a set |"
        );
        println!("|---|---|---|---|---|---|");
        for every in [2u32, 4, 8, 16, 32, 64, 128, 256] {
            let filter = move |slot: u32| slot.is_multiple_of(every);
            let exact_answers: Vec<Vec<(u32, f32)>> = query_vectors
                .iter()
                .map(|q| graph.nearest_exact(q, K, MIN_SIMILARITY, filter))
                .collect();
            graph.set_query_params(QueryParams {
                filtered_exact_below: 0,
                exact_below: 0,
                ..defaults.query
            });
            let (graph_times, graph_found) = timed(&query_vectors, |q| {
                graph.nearest(q, K, MIN_SIMILARITY, filter)
            });
            graph.set_query_params(QueryParams {
                filtered_exact_below: usize::MAX,
                exact_below: 0,
                ..defaults.query
            });
            let (scan_times, _) = timed(&query_vectors, |q| {
                graph.nearest(q, K, MIN_SIMILARITY, filter)
            });
            // The same scan when the filter's slots are known as a set, as the search's facet
            // filters are: only those slots are read.
            let mut within = SlotSet::default();
            for slot in (0..agents.len() as u32).filter(|slot| filter(*slot)) {
                within.insert(slot);
            }
            let (within_times, _) = timed(&query_vectors, |q| {
                graph.nearest_within(q, K, MIN_SIMILARITY, Some(&within), filter)
            });
            println!(
                "| 1/{every} | {} | {} | {:.3} | {} | {} |",
                agents.len() / every as usize,
                p50_p99(&graph_times),
                mean_recall(&graph_found, &exact_answers, K),
                p50_p99(&scan_times),
                p50_p99(&within_times),
            );
        }
        println!();
    }
}
