use clap::Parser;
use tracing_subscriber::EnvFilter;

use agent_registry::cli::{Cli, Command};
use agent_registry::config::{Config, LogFormat};

/// mimalloc instead of the system allocator: under a steady mix of writes, glibc's per-thread
/// arenas kept the memory that index merges on other threads freed, and the resident size
/// doubled in minutes (a soak went from 181 to 373 MB); with one arena, or with mimalloc, it
/// stays flat.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        None => serve(cli.serve).await,
        Some(Command::Serve(config)) => serve(*config).await,
        Some(command) => {
            // A command's own output says what it did (an import's progress bar counts the
            // agents it embeds); the search index's progress lines would only interleave.
            init_tracing(LogFormat::Text, ",agent_registry::search=warn");
            agent_registry::cli::run(command).await
        }
    }
}

async fn serve(config: Config) -> anyhow::Result<()> {
    init_tracing(config.log_format, "");
    agent_registry::serve(config).await
}

/// `quieter`: directives added to the default filter (`RUST_LOG` replaces both).
fn init_tracing(format: LogFormat, quieter: &str) {
    // Libraries log at `warn`, so the log says what the registry did. tantivy's segment manager
    // warns each time a background merge finishes after a newer commit already replaced the
    // segments it merged; the merge is dropped and nothing is lost, so that one is `error`.
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        EnvFilter::new(format!(
            "info,sqlx=warn,tantivy=warn,tantivy::indexer::segment_manager=error,hyper=warn,\
             tower_http=info{quieter}"
        ))
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}
