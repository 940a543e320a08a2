//! The one typed configuration: every flag also reads `REGISTRY_<FLAG>`, loaded once at start-up.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use url::Url;

mod ard;
mod embedder;
mod mcp;
mod mirror;
mod probe;
mod publishing;
mod signin;
mod upstream;

pub use ard::ArdConfig;
pub use embedder::{EmbedderConfig, EmbedderKind};
pub use mcp::McpConfig;
pub use mirror::MirrorConfig;
pub use probe::ProbeConfig;
pub use publishing::{NamespacePolicy, PublishingConfig, ScanPolicy};
pub use signin::{OidcProviderSpec, SigninConfig};
pub use upstream::UpstreamConfig;

/// Where the registry keeps its data.
#[derive(Args, Clone, Debug)]
pub struct StorageConfig {
    /// Directory for the embedded SQLite database and local state.
    #[arg(long, env = "REGISTRY_DATA_DIR", default_value = "./data")]
    pub data_dir: PathBuf,

    /// A `postgres://` URL selects PostgreSQL instead of the embedded SQLite database.
    #[arg(long, env = "REGISTRY_DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,

    /// This process's name for the leases it takes (mirror sources, probes), the same across
    /// its restarts so that a restarted process resumes its own work at once. Default: the host
    /// name and the data directory (which the process locks). Never give two live processes
    /// the same one.
    #[arg(long, env = "REGISTRY_INSTANCE_ID")]
    pub instance_id: Option<String>,
}

/// Everything `serve` needs.
#[derive(Args, Clone, Debug)]
pub struct Config {
    /// Address to listen on.
    #[arg(long, env = "REGISTRY_BIND", default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,

    #[command(flatten)]
    pub storage: StorageConfig,

    #[command(flatten)]
    pub embedder: EmbedderConfig,

    #[command(flatten)]
    pub upstreams: UpstreamConfig,

    #[command(flatten)]
    pub playground: PlaygroundConfig,

    #[command(flatten)]
    pub connections: ConnectionConfig,

    #[command(flatten)]
    pub limits: RequestLimits,

    #[command(flatten)]
    pub signing: SigningConfig,

    #[command(flatten)]
    pub probe: ProbeConfig,

    #[command(flatten)]
    pub mcp: McpConfig,

    #[command(flatten)]
    pub ard: ArdConfig,

    #[command(flatten)]
    pub mirror: MirrorConfig,

    #[command(flatten)]
    pub publishing: PublishingConfig,

    #[command(flatten)]
    pub signin: SigninConfig,

    /// How many days the audit log keeps its rows (0: forever). Older rows are deleted once an
    /// hour.
    #[arg(long, env = "REGISTRY_AUDIT_RETENTION_DAYS", default_value_t = 365)]
    pub audit_retention_days: u32,

    /// A bearer secret accepted with every scope, for operators. Unset: only CLI-made tokens exist.
    #[arg(long, env = "REGISTRY_MASTER_KEY", hide_env_values = true)]
    pub master_key: Option<String>,

    /// On a first local start (loopback bind, no master key, no token yet), make a token for
    /// owner `local` and print it once, so the web console and playground work at once.
    #[arg(long, env = "REGISTRY_FIRST_RUN_TOKEN", default_value_t = true, action = clap::ArgAction::Set)]
    pub first_run_token: bool,

    /// Public root URL of the service (cards and Location headers use it). Default: http://{bind}.
    #[arg(long, env = "REGISTRY_PUBLIC_URL")]
    pub public_url: Option<Url>,

    /// Requests per minute allowed from one client IP on public paths (0 disables the limit).
    #[arg(long, env = "REGISTRY_RATE_LIMIT_PER_MINUTE", default_value_t = 6000)]
    pub rate_limit_per_minute: u32,

    /// How many requests one client IP may send in a burst above the steady rate.
    #[arg(long, env = "REGISTRY_RATE_LIMIT_BURST", default_value_t = 500)]
    pub rate_limit_burst: u32,

    /// Exempt loopback clients (local tools, a reverse proxy on the same host) from the rate limit.
    #[arg(long, env = "REGISTRY_RATE_LIMIT_EXEMPT_LOOPBACK", default_value_t = true, action = clap::ArgAction::Set)]
    pub rate_limit_exempt_loopback: bool,

    /// How many reverse proxies in front of the registry append to `X-Forwarded-For`: the client
    /// IP is the entry that many places from the right (what the nearest trusted proxy saw).
    /// 0 ignores the header.
    #[arg(long, env = "REGISTRY_TRUSTED_PROXY_HOPS", default_value_t = 0)]
    pub trusted_proxy_hops: u8,

    /// Older spelling of `--trusted-proxy-hops 1`.
    #[arg(long, env = "REGISTRY_TRUST_FORWARDED_FOR", default_value_t = false, action = clap::ArgAction::Set)]
    pub trust_forwarded_for: bool,

    /// Requests per minute one token may make on authenticated paths (0 disables the limit; the
    /// master key is not limited).
    #[arg(
        long,
        env = "REGISTRY_TOKEN_RATE_LIMIT_PER_MINUTE",
        default_value_t = 1200
    )]
    pub token_rate_limit_per_minute: u32,

    /// How many requests one token may send in a burst above the steady rate.
    #[arg(long, env = "REGISTRY_TOKEN_RATE_LIMIT_BURST", default_value_t = 200)]
    pub token_rate_limit_burst: u32,

    /// Seconds before a request is answered with 408/504 and abandoned.
    #[arg(long, env = "REGISTRY_REQUEST_TIMEOUT_SECS", default_value_t = 60)]
    pub request_timeout_secs: u64,

    /// Agents per page of `/.well-known/ai-catalog.json`; more are in nested catalogue pages.
    #[arg(long, env = "REGISTRY_AI_CATALOG_PAGE_SIZE", default_value_t = 1000,
          value_parser = clap::value_parser!(u64).range(10..=10_000))]
    pub ai_catalog_page_size: u64,

    /// Log format: `text` for people, `json` for log collectors.
    #[arg(long, env = "REGISTRY_LOG_FORMAT", default_value = "text")]
    pub log_format: LogFormat,
}

/// The key the registry signs the agent cards it serves with.
#[derive(Args, Clone, Debug, Default)]
pub struct SigningConfig {
    /// PKCS#8 PEM private key (Ed25519 or ECDSA P-256) that signs served cards. Default:
    /// `card-signing-key.pem` in the data directory, made (Ed25519) on first start. Processes
    /// serving one registry must share it.
    #[arg(long, env = "REGISTRY_CARD_SIGNING_KEY")]
    pub card_signing_key: Option<PathBuf>,

    /// Earlier signing keys (PEM files, comma-separated) whose public keys stay published in
    /// `/.well-known/jwks.json`, so cards they signed keep verifying; drop one to retire it.
    #[arg(
        long,
        env = "REGISTRY_CARD_SIGNING_PREVIOUS_KEYS",
        value_delimiter = ','
    )]
    pub card_signing_previous_keys: Vec<PathBuf>,
}

/// Playground sessions.
#[derive(Args, Clone, Debug)]
pub struct PlaygroundConfig {
    /// Seconds a playground session lives without being used before it expires (24 h).
    #[arg(long, env = "REGISTRY_PLAYGROUND_IDLE_TTL_SECS", default_value_t = 86_400,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub playground_idle_ttl_secs: u64,

    /// Seconds one playground execution of a remote agent may take in total (card and call).
    #[arg(long, env = "REGISTRY_PLAYGROUND_CALL_TIMEOUT_SECS", default_value_t = 30,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub playground_call_timeout_secs: u64,
}

/// Limits on connections, so one client cannot hold the server.
#[derive(Args, Clone, Debug)]
pub struct ConnectionConfig {
    /// Seconds a client has to send a request's whole head (request line and headers).
    #[arg(long, env = "REGISTRY_HEADER_READ_TIMEOUT_SECS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=300))]
    pub header_read_timeout_secs: u64,

    /// Seconds a connection may stay open with no bytes moving (never less than the request
    /// timeout plus 5 s, so a running request is not cut).
    #[arg(long, env = "REGISTRY_IDLE_TIMEOUT_SECS", default_value_t = 75)]
    pub idle_timeout_secs: u64,

    /// Most header fields in one request (more: 431).
    #[arg(long, env = "REGISTRY_MAX_HEADERS", default_value_t = 100)]
    pub max_headers: usize,

    /// Most bytes in one request's head (more: 431).
    #[arg(long, env = "REGISTRY_MAX_HEADER_BYTES", default_value_t = 65_536)]
    pub max_header_bytes: usize,

    /// Most connections open at once; more wait to be accepted. 0: three quarters of the
    /// process's open-file limit, at most 10,000 (a configured value is also held below it).
    #[arg(long, env = "REGISTRY_MAX_CONNECTIONS", default_value_t = 0)]
    pub max_connections: usize,
}

/// Limits on what one request may ask for.
#[derive(Args, Clone, Debug)]
pub struct RequestLimits {
    /// Most calls in one JSON-RPC batch (more: a -32600 error for the whole batch).
    #[arg(long, env = "REGISTRY_JSONRPC_MAX_BATCH", default_value_t = 20,
          value_parser = clap::value_parser!(u64).range(1..=1000))]
    pub jsonrpc_max_batch: u64,
}

/// How logs are written.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum LogFormat {
    Text,
    Json,
}

impl Config {
    /// The configuration with every default, storing data in `data_dir` (used by tests and tools).
    pub fn with_data_dir(data_dir: impl Into<PathBuf>) -> Self {
        let mut config = <Self as clap::FromArgMatches>::from_arg_matches(
            &<Self as clap::Args>::augment_args(clap::Command::new("defaults"))
                .no_binary_name(true)
                .get_matches_from(Vec::<String>::new()),
        )
        .expect("defaults parse");
        config.storage.data_dir = data_dir.into();
        config
    }

    /// How many trusted proxies append to `X-Forwarded-For` (the older boolean flag means one).
    pub fn proxy_hops(&self) -> usize {
        usize::from(self.trusted_proxy_hops).max(usize::from(self.trust_forwarded_for))
    }

    /// The public root URL without a trailing slash.
    pub fn base_url(&self) -> String {
        match &self.public_url {
            Some(url) => url.as_str().trim_end_matches('/').to_owned(),
            None => format!("http://{}", self.bind),
        }
    }
}
