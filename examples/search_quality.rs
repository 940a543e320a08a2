//! The search-quality harness: NDCG@10, MRR and recall@10 of the labelled queries in
//! `eval/queries.jsonl` over the public data set `agents-real.jsonl` (`--data`), for keyword-only, each embedder
//! alone, and hybrid ranking.
//!
//! ```sh
//! cargo run --release --example search_quality                 # static embedder
//! scripts/fetch-minilm.sh && cargo run --release --example search_quality -- --minilm
//! ```

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use agent_registry::embed::{self, EmbedderConfig, EmbedderKind};
use agent_registry::search::{Feedback, FeedbackRule, Filters, Mode, SearchIndex, SearchRequest};
use agent_registry::store::sqlite::SqliteStore;
use agent_registry::store::{Agent, Store};
use clap::Parser;
use serde::Deserialize;

/// The server's allocator, so that the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/corpus.rs"]
mod corpus;
#[path = "support/quality.rs"]
mod quality;

use quality::{ndcg_at, recall_at, reciprocal_rank};

/// Print search-quality metrics for every ranking mode.
#[derive(Parser)]
struct Args {
    /// The agents to search: one file, or several separated by commas (a labelled addition
    /// beside the catalogue, such as `eval/hard/representative/agents.jsonl`).
    #[arg(
        long,
        env = "REGISTRY_BENCH_DATA",
        default_value = "bench-data/agents-real.jsonl",
        value_delimiter = ','
    )]
    data: Vec<PathBuf>,
    /// The labelled queries: one file, or several separated by commas (each file's figures are
    /// then printed as well).
    #[arg(long, default_value = "eval/queries.jsonl", value_delimiter = ',')]
    queries: Vec<PathBuf>,
    /// Also evaluate the full MiniLM model (weights from scripts/fetch-minilm.sh).
    #[arg(long)]
    minilm: bool,
    /// Also evaluate the retrieval model bge-small (from the models directory; see
    /// `agent-registry models fetch`).
    #[arg(long)]
    bge: bool,
    /// Fuse the models' rankings (not the static table's) at these weights against the
    /// keyword ranking's 1, one hybrid row each, instead of at the embedder's own weight.
    #[arg(long, value_delimiter = ',')]
    fusion_weight: Vec<f64>,
    /// Also rank each embedder's hybrid row with pseudo-relevance feedback for sentence queries
    /// set otherwise than by default (a model's vectors: on; the static table's: off), one row
    /// per setting `docs:terms:weight` (e.g. `5:8:0.3`; see `search::Feedback`) or `off`.
    #[arg(long, value_delimiter = ',', value_parser = parse_feedback)]
    feedback: Vec<Option<Feedback>>,
    /// Skip the keyword and static-table rows (when only a model's rows are wanted).
    #[arg(long)]
    models_only: bool,
    /// Ask every query once before the timed search: the latency columns then measure a
    /// repeated query (its vector from the query cache).
    #[arg(long)]
    repeat: bool,
    /// Print the per-query NDCG@10 of the last mode as well.
    #[arg(long)]
    per_query: bool,
    /// Write every mode's top `--depth` of every query to this JSON Lines file (for pooling
    /// candidates when labelling new queries).
    #[arg(long)]
    dump: Option<PathBuf>,
    /// How many results each query fetches (metrics still read the first 10).
    #[arg(long, default_value_t = 10)]
    depth: usize,
    /// Show one agent per duplicate group, as the search paths do by default.
    #[arg(long)]
    collapse: bool,
    /// Also rank each embedder's hybrid row with these similarity floors (matches by meaning
    /// at least this similar), one row each, instead of the embedder's own.
    /// `none`: neighbours only re-rank the keyword matches.
    #[arg(long, value_delimiter = ',', value_parser = parse_floor)]
    floor: Vec<Option<f32>>,
    /// Write, for every query and embedder, the 100 nearest agents by meaning with their
    /// similarity and grade to this JSON Lines file (what the similarity floors are calibrated
    /// on).
    #[arg(long)]
    similarities: Option<PathBuf>,
    /// Keep the store (and so every embedder's vectors) in this directory between runs.
    #[arg(long)]
    store_dir: Option<PathBuf>,
    #[command(flatten)]
    embedder: EmbedderConfig,
}

#[derive(Deserialize)]
struct Labelled {
    id: String,
    query: String,
    #[serde(default)]
    kind: String,
    #[serde(default)]
    relevant: HashMap<String, u8>,
    /// The file it came from.
    #[serde(skip)]
    set: String,
}

#[derive(Default)]
struct Totals {
    ndcg: f64,
    mrr: f64,
    recall: f64,
    count: usize,
    micros: Vec<u64>,
    /// How many agents each query matched (the `total` a search reports).
    matched: Vec<usize>,
}

impl Totals {
    fn add(
        &mut self,
        ranking: &[String],
        grades: &HashMap<String, u8>,
        micros: u64,
        matched: usize,
    ) -> f64 {
        self.matched.push(matched);
        let ndcg = ndcg_at(10, ranking, grades);
        self.ndcg += ndcg;
        self.mrr += reciprocal_rank(ranking, grades);
        self.recall += recall_at(10, ranking, grades);
        self.count += 1;
        self.micros.push(micros);
        ndcg
    }

    fn percentile(&self, p: f64) -> f64 {
        let mut sorted = self.micros.clone();
        sorted.sort_unstable();
        let Some(last) = sorted.len().checked_sub(1) else {
            return 0.0;
        };
        sorted[((last as f64) * p).round() as usize] as f64 / 1000.0
    }

    fn row(&self, label: &str) -> String {
        let n = self.count.max(1) as f64;
        let mut matched = self.matched.clone();
        matched.sort_unstable();
        let median = matched.get(matched.len() / 2).copied().unwrap_or_default();
        let none = matched.iter().filter(|count| **count == 0).count();
        format!(
            "| {label} | {:.3} | {:.3} | {:.3} | {} | {:.2} | {:.2} | {median} | {none} |",
            self.ndcg / n,
            self.mrr / n,
            self.recall / n,
            self.count,
            self.percentile(0.5),
            self.percentile(0.99),
        )
    }
}

fn load_queries(path: &Path) -> anyhow::Result<Vec<Labelled>> {
    std::fs::read_to_string(path)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| {
            let mut labelled: Labelled = serde_json::from_str(line)?;
            labelled.set = path.display().to_string();
            Ok(labelled)
        })
        .collect()
}

/// What every evaluation shares.
struct Run<'a> {
    agents: &'a [Agent],
    store: Arc<dyn Store>,
    queries: &'a [Labelled],
    args: &'a Args,
    dump: Option<std::fs::File>,
    similarities: Option<std::fs::File>,
}

impl Run<'_> {
    /// Evaluate one ranking; `store` keeps the vectors between evaluations, so each embedder
    /// embeds the corpus once.
    async fn evaluate(
        &mut self,
        label: &str,
        embedder: Option<Arc<dyn embed::Embedder>>,
        mode: Mode,
        feedback: FeedbackRule,
        per_query: bool,
        floor: Option<Option<f32>>,
    ) -> anyhow::Result<()> {
        let mut index = SearchIndex::new(self.store.clone(), embedder)?
            .with_mode(mode)
            .with_feedback(feedback);
        if let Some(floor) = floor {
            index = index.with_similarity_floor(floor);
        }
        index.rebuild(self.agents).await?;
        if let Some(file) = self.similarities.as_mut()
            && mode == Mode::Hybrid
            && floor.is_none()
            && let Some(embedder) = index.embedder_id()
        {
            for labelled in self.queries {
                let nearest: Vec<(String, f32, u8)> = index
                    .nearest_by_meaning(&labelled.query, 100)
                    .await
                    .into_iter()
                    .map(|(listing, similarity)| {
                        let package = listing.package_name().to_owned();
                        let grade = labelled.relevant.get(&package).copied().unwrap_or(0);
                        (package, similarity, grade)
                    })
                    .collect();
                let line = serde_json::json!({"embedder": embedder, "id": labelled.id,
                    "kind": labelled.kind, "nearest": nearest});
                writeln!(file, "{line}")?;
            }
        }
        let mut overall = Totals::default();
        let mut by_kind: HashMap<String, Totals> = HashMap::new();
        let mut by_set: Vec<(String, Totals, HashMap<String, Totals>)> = Vec::new();
        let mut per: Vec<(String, f64)> = Vec::new();
        for labelled in self.queries {
            let request = SearchRequest {
                text: labelled.query.clone(),
                filters: Filters {
                    collapse_duplicates: self.args.collapse,
                    ..Filters::default()
                },
                sort: None,
                limit: self.args.depth.max(10),
                cursor: None,
                offset: 0,
                facets: false,
                viewer: Default::default(),
            };
            if self.args.repeat {
                index.search(&request).await?;
            }
            let started = Instant::now();
            let page = index.search(&request).await?;
            let micros = started.elapsed().as_micros() as u64;
            let ranking: Vec<String> = page
                .hits
                .iter()
                .map(|hit| hit.listing.package_name().to_owned())
                .collect();
            let scores: Vec<f64> = page.hits.iter().filter_map(|hit| hit.score).collect();
            let matched = page.total;
            let ndcg = overall.add(&ranking, &labelled.relevant, micros, matched);
            by_kind.entry(labelled.kind.clone()).or_default().add(
                &ranking,
                &labelled.relevant,
                micros,
                matched,
            );
            if by_set.last().is_none_or(|(set, _, _)| *set != labelled.set) {
                by_set.push((labelled.set.clone(), Totals::default(), HashMap::new()));
            }
            if let Some((_, totals, kinds)) = by_set.last_mut() {
                totals.add(&ranking, &labelled.relevant, micros, matched);
                kinds.entry(labelled.kind.clone()).or_default().add(
                    &ranking,
                    &labelled.relevant,
                    micros,
                    matched,
                );
            }
            per.push((format!("{} {}", labelled.id, labelled.query), ndcg));
            if let Some(file) = self.dump.as_mut() {
                let line = serde_json::json!({
                    "id": labelled.id,
                    "ranker": format!("registry {label}"),
                    "ranking": ranking,
                    "scores": scores,
                });
                writeln!(file, "{line}")?;
            }
        }
        let print_kinds = |label: &str, by_kind: HashMap<String, Totals>| {
            let mut kinds: Vec<_> = by_kind.into_iter().collect();
            kinds.sort_by(|a, b| a.0.cmp(&b.0));
            for (kind, totals) in kinds {
                println!("{}", totals.row(&format!("  {label}, {kind} queries")));
            }
        };
        println!("{}", overall.row(label));
        print_kinds(label, by_kind);
        if by_set.len() > 1 {
            for (set, totals, kinds) in by_set {
                let label = format!("{label}, {set}");
                println!("{}", totals.row(&format!("  {label}")));
                print_kinds(&label, kinds);
            }
        }
        if per_query {
            for (query, ndcg) in per {
                println!("    {ndcg:.3}  {query}");
            }
        }
        Ok(())
    }
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let mut agents = Vec::new();
    for data in &args.data {
        agents.extend(corpus::agents_from_jsonl(data, "eval", 1)?);
    }
    let mut queries = Vec::new();
    for path in &args.queries {
        queries.extend(load_queries(path)?);
    }
    let shown = |paths: &[PathBuf]| {
        paths
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    };
    println!(
        "{} labelled queries ({}) over {} agents ({})\n",
        queries.len(),
        shown(&args.queries),
        agents.len(),
        shown(&args.data)
    );
    let temporary = tempfile::tempdir()?;
    let dir = args
        .store_dir
        .clone()
        .unwrap_or_else(|| temporary.path().to_owned());
    std::fs::create_dir_all(&dir)?;
    let store = Arc::new(SqliteStore::open_dir(&dir).await?);
    // Stored agents let the store keep their vectors (embeddings reference agents); a kept
    // store (`--store-dir`) already has them, with the ids its vectors reference.
    let existing = store.all_agents(None).await?;
    let agents = if existing.is_empty() {
        for agent in &agents {
            store.insert_agent(agent).await?;
        }
        agents
    } else {
        existing
    };
    let dump = match &args.dump {
        Some(path) => Some(std::fs::File::create(path)?),
        None => None,
    };
    let similarities = match &args.similarities {
        Some(path) => Some(std::fs::File::create(path)?),
        None => None,
    };
    let mut run = Run {
        agents: &agents,
        store: store as Arc<dyn Store>,
        queries: &queries,
        args: &args,
        dump,
        similarities,
    };
    println!(
        "| ranking | NDCG@10 | MRR | recall@10 | queries | p50 ms | p99 ms | matches (median) | queries matching nothing |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    let mut embedders = Vec::new();
    if !args.models_only {
        run.evaluate(
            "keyword (BM25)",
            None,
            Mode::Keyword,
            FeedbackRule::ByEmbedder,
            false,
            None,
        )
        .await?;
        embedders.push(("static", EmbedderKind::Static));
    }
    if args.minilm {
        embedders.push(("minilm", EmbedderKind::MiniLm));
    }
    if args.bge {
        embedders.push(("bge-small", EmbedderKind::BgeSmall));
    }
    for (name, kind) in embedders {
        let mut config = args.embedder.clone();
        config.kind = kind;
        let embedder = embed::from_config(&config)?;
        run.evaluate(
            &format!("vector ({name})"),
            embedder.clone(),
            Mode::Vector,
            FeedbackRule::ByEmbedder,
            false,
            None,
        )
        .await?;
        let weights = match embedder.as_ref() {
            Some(model) if !model.is_bag_of_words() && !args.fusion_weight.is_empty() => {
                args.fusion_weight.clone()
            }
            _ => vec![f64::NAN],
        };
        for weight in weights {
            let (label, embedder) = match embedder.clone() {
                Some(inner) if !weight.is_nan() => (
                    format!("hybrid ({name}, weight {weight})"),
                    Some(Arc::new(Weighted { inner, weight }) as Arc<dyn embed::Embedder>),
                ),
                embedder => (format!("hybrid ({name})"), embedder),
            };
            run.evaluate(
                &label,
                embedder.clone(),
                Mode::Hybrid,
                FeedbackRule::ByEmbedder,
                args.per_query,
                None,
            )
            .await?;
            for floor in &args.floor {
                let shown = floor.map_or("none (re-rank only)".to_owned(), |f| f.to_string());
                run.evaluate(
                    &format!("{label}, similarity floor {shown}"),
                    embedder.clone(),
                    Mode::Hybrid,
                    FeedbackRule::ByEmbedder,
                    args.per_query,
                    Some(*floor),
                )
                .await?;
            }
            for feedback in &args.feedback {
                let shown = match feedback {
                    Some(Feedback {
                        docs,
                        terms,
                        weight,
                    }) => format!("feedback {docs} docs, {terms} terms at {weight}"),
                    None => "no feedback".to_owned(),
                };
                run.evaluate(
                    &format!("{label}, {shown}"),
                    embedder.clone(),
                    Mode::Hybrid,
                    FeedbackRule::Fixed(*feedback),
                    args.per_query,
                    None,
                )
                .await?;
            }
        }
    }
    Ok(())
}

/// A similarity, or `none`, as `--floor` takes it.
fn parse_floor(setting: &str) -> Result<Option<f32>, String> {
    if setting == "none" {
        return Ok(None);
    }
    setting
        .parse()
        .map(Some)
        .map_err(|e| format!("{setting}: {e}"))
}

/// `docs:terms:weight` or `off`, as `--feedback` takes it.
fn parse_feedback(setting: &str) -> Result<Option<Feedback>, String> {
    if setting == "off" {
        return Ok(None);
    }
    let parts: Vec<&str> = setting.split(':').collect();
    let [docs, terms, weight] = parts[..] else {
        return Err(format!("{setting}: expected docs:terms:weight"));
    };
    let number = |part: &str| part.parse::<f32>().map_err(|e| format!("{setting}: {e}"));
    Ok(Some(Feedback {
        docs: docs.parse().map_err(|e| format!("{setting}: {e}"))?,
        terms: terms.parse().map_err(|e| format!("{setting}: {e}"))?,
        weight: number(weight)?,
    }))
}

/// An embedder whose ranking is fused at `weight` (the vectors are the inner embedder's, under
/// its id, so they are read from the store rather than computed again).
struct Weighted {
    inner: Arc<dyn embed::Embedder>,
    weight: f64,
}

#[async_trait::async_trait]
impl embed::Embedder for Weighted {
    fn id(&self) -> &str {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn query_instruction(&self) -> &str {
        self.inner.query_instruction()
    }

    fn is_bag_of_words(&self) -> bool {
        self.inner.is_bag_of_words()
    }

    fn fusion_weight(&self) -> f64 {
        self.weight
    }

    fn min_similarity(&self) -> Option<f32> {
        self.inner.min_similarity()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, embed::EmbedError> {
        self.inner.embed(texts).await
    }
}
