//! How the registry embeds agent descriptions and queries (the `--embedder` flags).

use std::fmt;
use std::path::PathBuf;

use url::Url;

/// Which embedder ranks search results by intent.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmbedderKind {
    /// bge-small when its files are in the models directory; otherwise the static table, and
    /// `serve` fetches bge-small in the background and switches to it once every agent has its
    /// vector (unless `--offline`).
    Auto,
    /// The retrieval model bge-small-en-v1.5 (int8), from the models directory; fetched first
    /// when missing (unless `--offline`).
    #[value(name = "bge-small")]
    BgeSmall,
    /// The token table built into the binary (potion-base-8M, distilled from bge-base-en-v1.5):
    /// no download.
    Static,
    /// The full all-MiniLM-L6-v2 model, weights read from `--minilm-dir`.
    #[value(name = "minilm")]
    MiniLm,
    /// An OpenAI-compatible `/v1/embeddings` service (Ollama, TEI, vLLM, OpenAI).
    #[value(name = "openai")]
    OpenAi,
    /// No embedder: keyword search only.
    None,
}

/// How the registry embeds agent descriptions and queries.
#[derive(clap::Args, Clone)]
pub struct EmbedderConfig {
    /// Embedder for intent ranking: auto (bge-small, the static table until it is there),
    /// bge-small, static (built in), minilm (local model), openai (remote), none.
    #[arg(
        long = "embedder",
        env = "REGISTRY_EMBEDDER",
        value_enum,
        default_value_t = EmbedderKind::Auto
    )]
    pub kind: EmbedderKind,

    /// Directory for downloaded models [default: the user's cache directory,
    /// e.g. ~/.cache/agent-registry/models].
    #[arg(long = "models-dir", env = "REGISTRY_MODELS_DIR")]
    pub models_dir: Option<PathBuf>,

    /// Python package index (simple API) that models are fetched from; a mirror's URL works.
    #[arg(
        long = "models-index",
        env = "REGISTRY_MODELS_INDEX",
        default_value = crate::models::DEFAULT_INDEX
    )]
    pub models_index: Url,

    /// Never download a model: `auto` keeps the static table when bge-small is not there.
    #[arg(long = "offline", env = "REGISTRY_OFFLINE", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub offline: bool,

    /// Directory with the all-MiniLM-L6-v2 weights (config.json, model.safetensors, tokenizer.json); see scripts/fetch-minilm.sh.
    #[arg(
        long = "minilm-dir",
        env = "REGISTRY_MINILM_DIR",
        default_value = "./models/all-MiniLM-L6-v2"
    )]
    pub minilm_dir: PathBuf,

    /// Origin of the OpenAI-compatible embeddings API (e.g. http://127.0.0.1:11434); `/v1/embeddings` is appended.
    #[arg(long = "embedder-url", env = "REGISTRY_EMBEDDER_URL")]
    pub url: Option<Url>,

    /// Model name sent to the embeddings API (e.g. nomic-embed-text, text-embedding-3-small).
    #[arg(long = "embedder-model", env = "REGISTRY_EMBEDDER_MODEL")]
    pub model: Option<String>,

    /// Bearer key for the embeddings API, if it needs one.
    #[arg(
        long = "embedder-api-key",
        env = "REGISTRY_EMBEDDER_API_KEY",
        hide_env_values = true
    )]
    pub api_key: Option<String>,

    /// Output dimensions to request from the embeddings API (models that support shortening).
    #[arg(long = "embedder-dimensions", env = "REGISTRY_EMBEDDER_DIMENSIONS")]
    pub dimensions: Option<u32>,

    /// A static table file to use instead of the built-in one (same format; see docs/embeddings.md).
    #[arg(long = "static-table", env = "REGISTRY_STATIC_TABLE")]
    pub static_table: Option<PathBuf>,
}

impl fmt::Debug for EmbedderConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EmbedderConfig")
            .field("kind", &self.kind)
            .field("models_dir", &self.models_dir)
            .field("models_index", &self.models_index.as_str())
            .field("offline", &self.offline)
            .field("minilm_dir", &self.minilm_dir)
            .field("url", &self.url.as_ref().map(Url::as_str))
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("dimensions", &self.dimensions)
            .field("static_table", &self.static_table)
            .finish()
    }
}

impl EmbedderConfig {
    /// The models directory: `--models-dir`, else the user's cache directory.
    pub fn models_dir(&self) -> PathBuf {
        self.models_dir
            .clone()
            .unwrap_or_else(crate::models::default_dir)
    }
}
