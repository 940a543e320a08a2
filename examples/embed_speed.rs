//! How fast bge-small embeds: agents per second over the first `--agents` agents of a catalogue
//! (the texts the index embeds, in the index's batches), and one query at a time, p50 and p99
//! (with the query instruction, no cache).
//!
//! ```sh
//! cargo run --release --example embed_speed -- --models-dir models \
//!     --data bench-data/agents-real.jsonl --queries eval/hard/dev.jsonl
//! ```
//!
//! `REGISTRY_NO_VNNI=1` keeps the AVX2 kernel on a CPU that has AVX-512 VNNI, to compare both
//! on one machine.

use std::io::BufRead;
use std::path::PathBuf;
use std::time::Instant;

use agent_registry::embed::Embedder;
use agent_registry::embed::bge::BgeEmbedder;
use clap::Parser;

/// The server's allocator, so that the figures are the server's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[path = "support/corpus.rs"]
mod corpus;

#[derive(Parser)]
struct Args {
    /// Where `agent-registry models fetch` put the model.
    #[arg(long, default_value = "models")]
    models_dir: PathBuf,
    /// The agents whose texts are embedded (JSON Lines of publish bodies).
    #[arg(long, default_value = "bench-data/agents-real.jsonl")]
    data: PathBuf,
    /// How many of them.
    #[arg(long, default_value_t = 2000)]
    agents: usize,
    /// JSON Lines with a `query` field: each is embedded alone, as a search does.
    #[arg(long)]
    queries: Option<PathBuf>,
    /// How many times each query is embedded.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
}

/// Texts per call, as the index's fill hands them to the embedder.
const BATCH: usize = 64;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let started = Instant::now();
    let embedder = BgeEmbedder::load(&args.models_dir.join("bge-small-en-v1.5"))?;
    println!("loaded in {:.2} s", started.elapsed().as_secs_f64());

    if let Some(path) = &args.queries {
        let queries: Vec<String> = std::io::BufReader::new(std::fs::File::open(path)?)
            .lines()
            .map_while(Result::ok)
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(&line).ok())
            .filter_map(|value| value["query"].as_str().map(str::to_owned))
            .collect();
        let mut times = Vec::new();
        for round in 0..=args.rounds {
            for query in &queries {
                let text = format!("{}{query}", embedder.query_instruction());
                let start = Instant::now();
                embedder.embed(std::slice::from_ref(&text)).await?;
                if round > 0 {
                    times.push(start.elapsed().as_secs_f64() * 1e3);
                }
            }
        }
        times.sort_by(f64::total_cmp);
        let at = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
        println!(
            "query embedding ({} queries × {} rounds): p50 {:.2} ms, p99 {:.2} ms",
            queries.len(),
            args.rounds,
            at(0.5),
            at(0.99)
        );
    }

    let agents = corpus::agents_from_jsonl(&args.data, "bench", 1)?;
    let texts: Vec<String> = agents
        .iter()
        .take(args.agents)
        .map(agent_registry::search::embedding_text)
        .collect();
    let start = Instant::now();
    for chunk in texts.chunks(BATCH) {
        embedder.embed(chunk).await?;
    }
    let seconds = start.elapsed().as_secs_f64();
    println!(
        "catalogue: {} agents in {seconds:.1} s, {:.1} agents/s",
        texts.len(),
        texts.len() as f64 / seconds
    );
    Ok(())
}
