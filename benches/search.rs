//! `cargo bench --bench search`: latency percentiles of the one search function over real agent
//! descriptions at 1k, 10k and 100k agents, keyword-only and hybrid with the static embedder
//! (its vectors ranked by the exact scan and by the HNSW graph), plus index build time and
//! resident memory; then the vector index alone: exact scan against graph, build time, memory
//! and recall. Writes nothing; prints Markdown tables.
//!
//! `REGISTRY_BENCH_SIZES=10000` and `REGISTRY_BENCH_RANKINGS=keyword` narrow a run (for profiling;
//! the rankings are `keyword`, `exact`, `ann` (or `hybrid`) and `vectors`, the last being the
//! vector index alone; `bge`, not run by default, adds hybrid search with the retrieval model
//! from `REGISTRY_MODELS_DIR`, each query embedded anew, and `bge-repeated` the same with every
//! query asked once before it is timed, its vector then from the query cache);
//! `REGISTRY_BENCH_SLOWEST=10` prints the ten slowest queries of each
//! measurement; `REGISTRY_BENCH_ROUNDS=5` runs the query set five times over and also prints the
//! mean (to compare two builds).
//! `REGISTRY_BENCH_FACETS=1` also runs every query asking for facet counts (`facets=true`) and
//! reports those latencies in a row of their own.
//! `REGISTRY_BENCH_SHOWN_EF=175,230,300,400` adds to the vector index's rows, at each of those
//! widths, the graph under the filter of every default search (duplicates hidden) and under
//! filters letting a half, a quarter and an eighth through, with the width chosen by default.
//! `REGISTRY_BENCH_SWEEP=1` instead measures the graph's parameters (`benches/support/vectors.rs`);
//! `REGISTRY_BENCH_ORIGINALS=n` builds every size from the first n real agents only, so that a
//! small set has the copies-per-agent of a large one.
//! `REGISTRY_BENCH_WRITES=n` changes one agent's description before every n-th query (the
//! write itself is not timed), to measure searching while agents are published and updated.
//! `REGISTRY_BENCH_PRIVATE=10` makes every tenth agent private, owned by one of 20
//! organisations; the searches are anonymous unless `REGISTRY_BENCH_VIEWER=member`, which
//! searches as a member of one of them (who sees its private agents beside the public ones) or
//! `master` (every agent).
//!
//! Queries: at least 1,000 distinct ones (the labelled set plus phrases cut from the data with a
//! fixed seed), each run once per measurement, so no cache can make repeats the common case.
//!
//! Agents beyond the real catalogue are its agents again with renamed packages and, so that each
//! is a distinct vector as in a real catalogue, a description of their own: a quarter of the
//! words dropped and a few words of another agent added (`distinguish_copies`).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_registry::domain::access::Viewer;
use agent_registry::domain::agent::Visibility;
use agent_registry::embed;
use agent_registry::embed::{EmbedderConfig, EmbedderKind};
use agent_registry::search::filters::RawFilters;
use agent_registry::search::{Filters, SearchIndex, SearchRequest};
use agent_registry::store::Agent;
use agent_registry::store::sqlite::SqliteStore;

#[path = "../examples/support/corpus.rs"]
mod corpus;
#[path = "support/vectors.rs"]
mod vectors;

const SIZES: [usize; 3] = [1_000, 10_000, 100_000];
const QUERIES: usize = 1_200;
const WARMUP: usize = 200;

fn data_path() -> PathBuf {
    std::env::var_os("REGISTRY_BENCH_DATA").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("bench-data/agents-real.jsonl"),
        PathBuf::from,
    )
}

/// A deterministic xorshift generator: the same queries on every run and machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// The labelled queries of both sets (the hard set's are sentences of up to 30 words), then
/// 2–5 word phrases cut from descriptions, until `count` distinct.
fn queries(agents: &[Agent], count: usize) -> Vec<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut queries: Vec<String> = [
        "eval/queries.jsonl",
        "eval/hard/dev.jsonl",
        "eval/hard/test.jsonl",
    ]
    .iter()
    .flat_map(|file| {
        std::fs::read_to_string(root.join(file))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter_map(|q| q["query"].as_str().map(str::to_owned))
            .collect::<Vec<_>>()
    })
    .collect();
    let mut rng = Rng(0x5eed_cafe_f00d_beef);
    let mut seen: std::collections::HashSet<String> = queries.iter().cloned().collect();
    while queries.len() < count {
        let agent = &agents[rng.below(agents.len())];
        let words: Vec<&str> = agent
            .draft
            .description
            .split_whitespace()
            .filter(|w| w.chars().all(char::is_alphanumeric))
            .collect();
        if words.len() < 5 {
            continue;
        }
        let len = 2 + rng.below(4);
        let start = rng.below(words.len() - len);
        let phrase = words[start..start + len].join(" ").to_lowercase();
        if seen.insert(phrase.clone()) {
            queries.push(phrase);
        }
    }
    queries.truncate(count);
    queries
}

/// Give every renamed copy a description of its own: without it a copy embeds to the very
/// vector of its original, and 100k agents would be 20k distinct vectors five times over.
fn distinguish_copies(agents: &mut [Agent]) {
    let descriptions: Vec<Vec<String>> = agents
        .iter()
        .filter(|agent| !agent.package_name().contains(".copy"))
        .map(|agent| {
            agent
                .draft
                .description
                .split_whitespace()
                .map(str::to_owned)
                .collect()
        })
        .collect();
    let mut rng = Rng(0x000d_1571_c7c0_b1e5);
    for agent in agents
        .iter_mut()
        .filter(|agent| agent.package_name().contains(".copy"))
    {
        let mut words: Vec<&str> = agent
            .draft
            .description
            .split_whitespace()
            .filter(|_| rng.below(4) != 0)
            .collect();
        let other = &descriptions[rng.below(descriptions.len())];
        let extra = 3 + rng.below(6);
        let start = rng.below(other.len().saturating_sub(extra) + 1);
        words.extend(other.iter().skip(start).take(extra).map(String::as_str));
        agent.draft.description = words.join(" ");
    }
}

/// The tags every fifth request filters by.
pub const FILTER_TAGS: [&str; 3] = ["mcp", "ai", "api"];

/// Every fifth request also filters by a frequent tag, the way clients narrow a search.
fn request(query: &str, index: usize, facets: bool) -> SearchRequest {
    let raw = RawFilters {
        tags: (index % 5 == 4).then(|| FILTER_TAGS.join(",")),
        ..RawFilters::default()
    };
    SearchRequest {
        text: query.to_owned(),
        filters: Filters::parse(&raw).expect("valid filters"),
        sort: None,
        limit: 10,
        cursor: None,
        offset: 0,
        facets,
        viewer: viewer().clone(),
    }
}

/// Who the timed searches run as (`REGISTRY_BENCH_VIEWER`): anonymous by default.
fn viewer() -> &'static Viewer {
    static VIEWER: std::sync::OnceLock<Viewer> = std::sync::OnceLock::new();
    VIEWER.get_or_init(|| match std::env::var("REGISTRY_BENCH_VIEWER").as_deref() {
        Ok("member") => Viewer::of_owners(vec!["bench".to_owned(), "org:team0".to_owned()]),
        Ok("master") => Viewer::Everyone,
        _ => Viewer::Anonymous,
    })
}

/// `REGISTRY_BENCH_PRIVATE=p`: every (100/p)-th agent private, owned by one of 20 organisations.
fn make_private(agents: &mut [Agent]) {
    let Some(percent) = std::env::var("REGISTRY_BENCH_PRIVATE")
        .ok()
        .and_then(|p| p.parse::<usize>().ok())
        .filter(|p| (1..=100).contains(p))
    else {
        return;
    };
    let every = 100 / percent;
    for (i, agent) in agents.iter_mut().enumerate() {
        if i % every == 0 {
            agent.draft.visibility = Some(Visibility::Private);
            agent.owner = format!("org:team{}", (i / every) % 20);
        }
    }
    eprintln!(
        "every {every}th agent is private; searching as {:?}",
        viewer()
    );
}

pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let rank = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

pub fn micros(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}

fn resident_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find(|l| l.starts_with("VmRSS:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

pub fn embedder_config(kind: EmbedderKind) -> EmbedderConfig {
    use clap::Parser;
    #[derive(Parser)]
    struct Wrapper {
        #[command(flatten)]
        embedder: EmbedderConfig,
    }
    let mut config = Wrapper::parse_from(["bench"]).embedder;
    config.kind = kind;
    config
}

/// Whether a measurement's queries find their vectors in the query cache.
#[derive(Clone, Copy, PartialEq)]
enum Repeats {
    /// The cache off: every query embedded (a model's measurement).
    Never,
    /// As the index runs by default (the static table's embedding costs less than a lookup).
    Default,
    /// Every query asked once, untimed, before the timed run: a repeated query.
    Always,
}

async fn measure(
    label: &str,
    agents: &[Agent],
    kind: EmbedderKind,
    queries: &[String],
    repeats: Repeats,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let store = Arc::new(SqliteStore::open_dir(dir.path()).await.expect("store"));
    let embedder = embed::from_config(&embedder_config(kind)).expect("embedder");
    let mut index = SearchIndex::new(store, embedder).expect("index");
    if repeats == Repeats::Never {
        index = index.without_query_cache();
    }
    let rss_before = resident_mib();
    let started = Instant::now();
    index.rebuild(agents).await.expect("rebuild");
    let build = started.elapsed();
    let rss_after = resident_mib();
    let text = index.text_stats();
    // The build's segments are merged into one in the background; time the steady state.
    let merging = Instant::now();
    while index.text_stats().segments > 1 && merging.elapsed() < Duration::from_secs(120) {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    eprintln!(
        "{} agents: keyword index built in {} segments, {} after {:.1} s of merging",
        agents.len(),
        text.segments,
        index.text_stats().segments,
        merging.elapsed().as_secs_f64()
    );

    // `REGISTRY_BENCH_FACETS=1`: each query is also run asking for facet counts, the two runs
    // alternating which goes first, and both are reported.
    let with_facets = std::env::var_os("REGISTRY_BENCH_FACETS").is_some();
    if repeats == Repeats::Always {
        for (i, query) in queries.iter().enumerate() {
            index
                .search(&request(query, i, with_facets))
                .await
                .expect("search");
        }
    }
    for (i, query) in queries.iter().take(WARMUP).enumerate() {
        index
            .search(&request(query, i, with_facets))
            .await
            .expect("search");
    }
    let mut timed = Vec::with_capacity(queries.len());
    let mut timed_facets = Vec::with_capacity(queries.len());
    let mut hits = 0usize;
    // `REGISTRY_BENCH_ROUNDS=n`: the whole query set n times over (each round runs every query
    // once), for a mean steady enough to compare two builds by.
    let rounds: usize = std::env::var("REGISTRY_BENCH_ROUNDS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1)
        .max(1);
    // `REGISTRY_BENCH_WRITES=n`: before every n-th query, one agent's description changes (not
    // timed), as a registry serving searches sees publishes and updates meanwhile.
    let writes_every: usize = std::env::var("REGISTRY_BENCH_WRITES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    let mut writes = 0usize;
    for (i, query) in (0..rounds).flat_map(|_| queries.iter().enumerate()) {
        if writes_every > 0 && i % writes_every == 0 {
            let mut agent = agents[writes * 7919 % agents.len()].clone();
            agent
                .draft
                .description
                .push_str(&format!(" (revised {writes})"));
            index.apply(&agent).await;
            writes += 1;
        }
        let order: &[bool] = match (with_facets, i % 2) {
            (false, _) => &[false],
            (true, 0) => &[false, true],
            (true, _) => &[true, false],
        };
        for &facets in order {
            let request = request(query, i, facets);
            let started = Instant::now();
            let page = index.search(&request).await.expect("search");
            let elapsed = started.elapsed();
            if facets {
                timed_facets.push((elapsed, i));
            } else {
                timed.push((elapsed, i));
                hits += usize::from(!page.hits.is_empty());
            }
        }
    }
    let hit_share = format!(
        "{:.0}%",
        100.0 * hits as f64 / (queries.len() * rounds) as f64
    );
    if writes > 0 {
        // The searches right after a write against the rest: what a write costs the searches.
        let mut after_write: [Vec<Duration>; 3] = Default::default();
        for (elapsed, i) in &timed {
            let since = i % writes_every;
            after_write[match since {
                0 => 0,
                1..4 => 1,
                _ => 2,
            }]
            .push(*elapsed);
        }
        let summary: Vec<String> = after_write
            .iter_mut()
            .zip(["the first after a write", "the next three", "the others"])
            .filter(|(latencies, _)| !latencies.is_empty())
            .map(|(latencies, which)| {
                latencies.sort();
                format!(
                    "{which} p50 / p99 {} / {} µs",
                    micros(percentile(latencies, 0.50)),
                    micros(percentile(latencies, 0.99))
                )
            })
            .collect();
        eprintln!(
            "{label}: {writes} agents changed between the queries; {}",
            summary.join("; ")
        );
    }
    if rounds > 1 {
        let mean = timed.iter().map(|(elapsed, _)| *elapsed).sum::<Duration>() / timed.len() as u32;
        eprintln!(
            "{label}: mean {:.1} µs over {rounds} rounds",
            mean.as_secs_f64() * 1e6
        );
    }
    let row = |label: &str, mut timed: Vec<(Duration, usize)>, hit_share: &str| {
        let runs = timed.len();
        timed.sort();
        let slowest: usize = std::env::var("REGISTRY_BENCH_SLOWEST")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        for (elapsed, i) in timed.iter().rev().take(slowest) {
            eprintln!("{label}: {} µs  {:?}", micros(*elapsed), queries[*i]);
        }
        let latencies: Vec<Duration> = timed.into_iter().map(|(elapsed, _)| elapsed).collect();
        println!(
            "| {label} | {} | {} | {} | {} | {} | {runs} | {:.1} | {:.0} | {hit_share} |",
            agents.len(),
            micros(percentile(&latencies, 0.50)),
            micros(percentile(&latencies, 0.95)),
            micros(percentile(&latencies, 0.99)),
            micros(*latencies.last().expect("latencies")),
            build.as_secs_f64(),
            rss_after - rss_before,
        );
    };
    row(label, timed, &hit_share);
    if with_facets {
        row(&format!("{label}, facets=true"), timed_facets, &hit_share);
        // The most a count can cost: no query text and no filter match every agent.
        let mut all = Vec::new();
        let mut all_facets = Vec::new();
        for i in 0..LIST_ALL_RUNS {
            for facets in [i % 2 == 0, i % 2 == 1] {
                let request = request("", 0, facets);
                let started = Instant::now();
                index.search(&request).await.expect("search");
                let elapsed = (started.elapsed(), 0);
                if facets {
                    all_facets.push(elapsed);
                } else {
                    all.push(elapsed);
                }
            }
        }
        row(&format!("{label}, every agent"), all, "100%");
        row(
            &format!("{label}, every agent, facets=true"),
            all_facets,
            "100%",
        );
    }
}

/// Runs of the search that matches every agent, with and without facets.
const LIST_ALL_RUNS: usize = 50;

fn main() {
    // `cargo test --benches` runs this binary with `--bench` absent: stay quick then.
    let benching = std::env::args().any(|arg| arg == "--bench");
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let path = data_path();
        let sizes: Vec<usize> = match std::env::var("REGISTRY_BENCH_SIZES") {
            Ok(list) => list
                .split(',')
                .filter_map(|n| n.trim().parse().ok())
                .collect(),
            Err(_) if benching => SIZES.to_vec(),
            Err(_) => vec![1_000],
        };
        let real = corpus::agents_from_jsonl(&path, "bench", 1)
            .expect("corpus")
            .len();
        let largest = sizes.iter().copied().max().unwrap_or(0);
        let originals: usize = std::env::var("REGISTRY_BENCH_ORIGINALS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(real)
            .clamp(1, real.max(1));
        let copies = largest.div_ceil(originals).max(1);
        let mut all = corpus::agents_from_jsonl(&path, "bench", copies).expect("corpus");
        distinguish_copies(&mut all);
        make_private(&mut all);
        let queries = queries(&all[..real], if benching { QUERIES } else { 50 });
        // `REGISTRY_BENCH_ORIGINALS=n`: only the first n real agents and their copies, so that a
        // small set has the cluster structure of a large one (as many copies per agent).
        if let Some(originals) = std::env::var("REGISTRY_BENCH_ORIGINALS")
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
        {
            let kept: std::collections::HashSet<String> = all[..originals.min(real)]
                .iter()
                .map(|agent| agent.package_name().to_owned())
                .collect();
            all.retain(|agent| {
                let name = agent.package_name();
                kept.contains(name.split(".copy").next().unwrap_or(name))
            });
        }
        let rankings = std::env::var("REGISTRY_BENCH_RANKINGS")
            .unwrap_or_else(|_| "keyword,exact,ann,vectors".to_owned());
        let wants = |name: &str| rankings.split(',').any(|ranking| ranking.trim() == name);
        println!("data: {} ({} agents available)", path.display(), all.len());
        println!();
        if std::env::var_os("REGISTRY_BENCH_SWEEP").is_some() {
            vectors::sweep(&all, &sizes, &queries).await;
            return;
        }
        println!("| ranking | agents | p50 µs | p95 µs | p99 µs | max µs | queries | build s | index MiB | queries with hits |");
        println!("|---|---|---|---|---|---|---|---|---|---|");
        for &size in &sizes {
            let agents = &all[..size.min(all.len())];
            if wants("keyword") {
                measure(
                    "keyword",
                    agents,
                    EmbedderKind::None,
                    &queries,
                    Repeats::Default,
                )
                .await;
            }
            if wants("exact") {
                agent_registry::search::vectors::set_graph_enabled(false);
                measure(
                    "hybrid (static, exact)",
                    agents,
                    EmbedderKind::Static,
                    &queries,
                    Repeats::Default,
                )
                .await;
                agent_registry::search::vectors::set_graph_enabled(true);
            }
            // `hybrid`, the name before the graph, is the search as it runs by default.
            if wants("ann") || wants("hybrid") {
                measure(
                    "hybrid (static, HNSW)",
                    agents,
                    EmbedderKind::Static,
                    &queries,
                    Repeats::Default,
                )
                .await;
            }
            // `bge`: hybrid with the retrieval model (from `REGISTRY_MODELS_DIR`), every query
            // embedded (its query cache off); the catalogue's embedding is in the build time.
            if wants("bge") {
                measure(
                    "hybrid (bge-small, HNSW)",
                    agents,
                    EmbedderKind::BgeSmall,
                    &queries,
                    Repeats::Never,
                )
                .await;
            }
            if wants("bge-repeated") {
                measure(
                    "hybrid (bge-small, HNSW), repeated query",
                    agents,
                    EmbedderKind::BgeSmall,
                    &queries,
                    Repeats::Always,
                )
                .await;
            }
        }
        if wants("vectors") {
            println!();
            vectors::compare(&all, &sizes, &queries).await;
        }
    });
}
