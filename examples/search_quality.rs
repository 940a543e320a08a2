//! The search-quality harness: NDCG@10, MRR and recall@10 of the labelled queries in
//! `eval/queries.jsonl` over `shared/data/agents-real.jsonl`, for keyword-only, each embedder
//! alone, and hybrid ranking.
//!
//! ```sh
//! cargo run --release --example search_quality                 # static embedder
//! scripts/fetch-minilm.sh && cargo run --release --example search_quality -- --minilm
//! ```

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_registry::search::embed::{self, EmbedderConfig, EmbedderKind};
use agent_registry::search::quality::{ndcg_at, recall_at, reciprocal_rank};
use agent_registry::search::{Filters, Mode, SearchIndex, SearchRequest, corpus};
use agent_registry::store::sqlite::SqliteStore;
use agent_registry::store::{Agent, Store};
use clap::Parser;
use serde::Deserialize;

/// Print search-quality metrics for every ranking mode.
#[derive(Parser)]
struct Args {
    /// The agents to search.
    #[arg(long, default_value = "../shared/data/agents-real.jsonl")]
    data: PathBuf,
    /// The labelled queries.
    #[arg(long, default_value = "eval/queries.jsonl")]
    queries: PathBuf,
    /// Also evaluate the full MiniLM model (weights from scripts/fetch-minilm.sh).
    #[arg(long)]
    minilm: bool,
    /// Print the per-query NDCG@10 of the last mode as well.
    #[arg(long)]
    per_query: bool,
    #[command(flatten)]
    embedder: EmbedderConfig,
}

#[derive(Deserialize)]
struct Labelled {
    id: String,
    query: String,
    #[serde(default)]
    kind: String,
    relevant: HashMap<String, u8>,
}

#[derive(Default)]
struct Totals {
    ndcg: f64,
    mrr: f64,
    recall: f64,
    count: usize,
}

impl Totals {
    fn add(&mut self, ranking: &[String], grades: &HashMap<String, u8>) -> f64 {
        let ndcg = ndcg_at(10, ranking, grades);
        self.ndcg += ndcg;
        self.mrr += reciprocal_rank(ranking, grades);
        self.recall += recall_at(10, ranking, grades);
        self.count += 1;
        ndcg
    }

    fn row(&self, label: &str) -> String {
        let n = self.count.max(1) as f64;
        format!(
            "| {label} | {:.3} | {:.3} | {:.3} | {} |",
            self.ndcg / n,
            self.mrr / n,
            self.recall / n,
            self.count
        )
    }
}

fn load_queries(path: &Path) -> anyhow::Result<Vec<Labelled>> {
    std::fs::read_to_string(path)?
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| Ok(serde_json::from_str(line)?))
        .collect()
}

/// `store` keeps the vectors between evaluations, so each embedder embeds the corpus once.
async fn evaluate(
    label: &str,
    agents: &[Agent],
    store: Arc<SqliteStore>,
    embedder: Option<Arc<dyn embed::Embedder>>,
    mode: Mode,
    queries: &[Labelled],
    per_query: bool,
) -> anyhow::Result<()> {
    let index = SearchIndex::new("http://eval.local", store, embedder)?.with_mode(mode);
    index.rebuild(agents).await?;
    let mut overall = Totals::default();
    let mut by_kind: HashMap<String, Totals> = HashMap::new();
    let mut per: Vec<(String, f64)> = Vec::new();
    for labelled in queries {
        let request = SearchRequest {
            text: labelled.query.clone(),
            filters: Filters::default(),
            sort: None,
            limit: 10,
            cursor: None,
        };
        let page = index.search(&request).await?;
        let ranking: Vec<String> = page
            .agents
            .iter()
            .map(|hit| hit.agent.package_name.clone())
            .collect();
        let ndcg = overall.add(&ranking, &labelled.relevant);
        by_kind
            .entry(labelled.kind.clone())
            .or_default()
            .add(&ranking, &labelled.relevant);
        per.push((format!("{} {}", labelled.id, labelled.query), ndcg));
    }
    println!("{}", overall.row(label));
    let mut kinds: Vec<_> = by_kind.into_iter().collect();
    kinds.sort_by(|a, b| a.0.cmp(&b.0));
    for (kind, totals) in kinds {
        println!("{}", totals.row(&format!("  {label}, {kind} queries")));
    }
    if per_query {
        for (query, ndcg) in per {
            println!("    {ndcg:.3}  {query}");
        }
    }
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let agents = corpus::agents_from_jsonl(&args.data, "eval", 1)?;
    let queries = load_queries(&args.queries)?;
    println!(
        "{} labelled queries over {} agents ({})\n",
        queries.len(),
        agents.len(),
        args.data.display()
    );
    let dir = tempfile::tempdir()?;
    let store = Arc::new(SqliteStore::open_dir(dir.path()).await?);
    // Stored agents let the store keep their vectors (embeddings reference agents).
    for agent in &agents {
        store.insert_agent(agent).await?;
    }
    println!("| ranking | NDCG@10 | MRR | recall@10 | queries |");
    println!("|---|---|---|---|---|");
    evaluate(
        "keyword (BM25)",
        &agents,
        Arc::clone(&store),
        None,
        Mode::Keyword,
        &queries,
        false,
    )
    .await?;
    let mut embedders = vec![("static", EmbedderKind::Static)];
    if args.minilm {
        embedders.push(("minilm", EmbedderKind::MiniLm));
    }
    for (name, kind) in embedders {
        let mut config = args.embedder.clone();
        config.kind = kind;
        let embedder = embed::from_config(&config)?;
        evaluate(
            &format!("vector ({name})"),
            &agents,
            Arc::clone(&store),
            embedder.clone(),
            Mode::Vector,
            &queries,
            false,
        )
        .await?;
        evaluate(
            &format!("hybrid ({name})"),
            &agents,
            Arc::clone(&store),
            embedder,
            Mode::Hybrid,
            &queries,
            args.per_query,
        )
        .await?;
    }
    Ok(())
}
