//! Text → vector embedders for intent ranking: the built-in static table, MiniLM, bge-small, or a
//! remote service. Search embeds queries and agents with them; they know nothing of search.
//!
//! Every embedder returns L2-normalised vectors, so the dot product of two of them is their cosine.
//! Stored vectors are keyed by [`Embedder::id`], which changes whenever the output would.

use std::sync::Arc;

use anyhow::Context;

pub mod bge;
mod int8;
pub mod minilm;
mod onnx;
pub mod openai;
pub mod static_table;
pub mod transformer;
pub mod wordpiece;

pub use crate::config::{EmbedderConfig, EmbedderKind};
pub use bge::BgeEmbedder;
pub use minilm::MiniLmEmbedder;
pub use openai::{OpenAiEmbedder, OpenAiSettings};
pub use static_table::StaticEmbedder;
pub use transformer::Transformer;

/// Turns texts into L2-normalised vectors; one implementation per model or service.
#[async_trait::async_trait]
pub trait Embedder: Send + Sync {
    /// Stable identity of the model and its preprocessing (e.g. "static-potion-base-8m-256d-i8@1.<hex>", "minilm-l6-v2@1", "openai:<model>@<dims>"); stored vectors are keyed by it, so change it whenever output changes.
    fn id(&self) -> &str;

    /// Length of every vector. A remote embedder without configured dimensions learns it from its
    /// first answer and reports 0 until then; the vectors themselves always carry their length.
    fn dim(&self) -> usize;

    /// One L2-normalised vector per text, in order. The local embedders give a text with nothing
    /// to embed (empty, or only unknown tokens for the static table) the zero vector, whose
    /// cosine with anything is 0.
    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// Whether a text's vector is a weighted sum of its words' (the static table). Such an
    /// embedder is given queries without their conversational fillers (the search's query
    /// analysis): every word it sees moves the vector, while a model reads a sentence as a
    /// whole.
    fn is_bag_of_words(&self) -> bool {
        false
    }

    /// What a query is prefixed with before it is embedded (descriptions never are): a
    /// retrieval model trained with an instruction on the query side reads queries through it.
    fn query_instruction(&self) -> &str {
        ""
    }

    /// How much this embedder's ranking counts against the keyword ranking in hybrid fusion
    /// (the keyword ranking counts 1). A model reads sentences well enough to count as much as
    /// the keywords; the static table, a sum of word vectors, re-orders them at half weight
    /// (both measured on the hard dev set: docs/search.md).
    fn fusion_weight(&self) -> f64 {
        if self.is_bag_of_words() { 0.5 } else { 1.0 }
    }

    /// The least cosine similarity at which an agent matches a query by meaning; `None`: this
    /// embedder's neighbours are never matches by themselves, they only re-rank the keyword
    /// matches. Every query has nearest neighbours, and an embedder places unrelated texts
    /// well above zero, so each embedder's rule is calibrated on the evaluation sets
    /// (`docs/search.md`): a neighbour under it is not a match, is not counted, and a query
    /// nothing relates to finds nothing. An embedder not calibrated here (a remote service)
    /// keeps [`DEFAULT_MIN_SIMILARITY`].
    fn min_similarity(&self) -> Option<f32> {
        Some(DEFAULT_MIN_SIMILARITY)
    }
}

/// The similarity floor of an embedder that was not calibrated (see
/// [`Embedder::min_similarity`]).
pub const DEFAULT_MIN_SIMILARITY: f32 = 0.2;

/// Why texts could not be embedded.
#[derive(Debug, thiserror::Error)]
pub enum EmbedError {
    /// The embedding service could not be reached (connection refused, DNS, TLS).
    #[error("embedding service unreachable: {0}")]
    Unreachable(String),
    /// The embedding service did not answer in time.
    #[error("embedding service timed out: {0}")]
    Timeout(String),
    /// The embedding service answered with an HTTP error status.
    #[error("embedding service answered {status}: {message}")]
    UpstreamStatus {
        /// The HTTP status code.
        status: u16,
        /// The start of the response body.
        message: String,
    },
    /// The embedding service answered 2xx with a body we cannot use (bad JSON, wrong count or size).
    #[error("embedding service sent a bad response: {0}")]
    BadResponse(String),
    /// The local model failed (weights, tokeniser, inference) or the built-in table is corrupt.
    #[error("embedding model error: {0}")]
    Model(String),
}

/// The configured embedder, or `None` for keyword-only search. Fails fast, naming the flag and
/// variable to fix, when MiniLM weights are missing or the remote service is not configured.
pub fn from_config(config: &EmbedderConfig) -> anyhow::Result<Option<Arc<dyn Embedder>>> {
    let embedder: Arc<dyn Embedder> = match config.kind {
        EmbedderKind::None => return Ok(None),
        EmbedderKind::Static => Arc::new(match &config.static_table {
            None => StaticEmbedder::builtin()?,
            Some(path) => {
                let bytes = std::fs::read(path).with_context(|| {
                    format!(
                        "cannot read the static table {} (--static-table / REGISTRY_STATIC_TABLE)",
                        path.display()
                    )
                })?;
                StaticEmbedder::from_asset(&bytes)
                    .with_context(|| format!("bad static table {}", path.display()))?
            }
        }),
        EmbedderKind::Auto => {
            let dir = crate::models::package_dir(&config.models_dir(), &crate::models::BGE_SMALL);
            // The loader checks the files' hashes: hashing them here too would read 34 MB twice.
            match crate::models::is_present(&config.models_dir(), &crate::models::BGE_SMALL) {
                true => match BgeEmbedder::load(&dir) {
                    Ok(bge) => Arc::new(bge),
                    Err(error) => {
                        tracing::warn!(%error, "cannot load bge-small; ranking with the static table");
                        Arc::new(StaticEmbedder::builtin()?)
                    }
                },
                false => Arc::new(StaticEmbedder::builtin()?),
            }
        }
        EmbedderKind::BgeSmall => {
            let dir = crate::models::package_dir(&config.models_dir(), &crate::models::BGE_SMALL);
            Arc::new(BgeEmbedder::load(&dir).with_context(|| {
                format!(
                    "cannot load bge-small-en-v1.5 from {} (run `agent-registry models fetch`, \
                     set --models-dir / REGISTRY_MODELS_DIR, or use --embedder auto)",
                    dir.display()
                )
            })?)
        }
        EmbedderKind::MiniLm => Arc::new(load_minilm(config)?),
        EmbedderKind::OpenAi => Arc::new(openai_from_config(config)?),
    };
    tracing::info!(
        embedder.id = embedder.id(),
        embedder.dim = embedder.dim(),
        "embedder ready"
    );
    Ok(Some(embedder))
}

fn load_minilm(config: &EmbedderConfig) -> anyhow::Result<MiniLmEmbedder> {
    MiniLmEmbedder::load(&config.minilm_dir).with_context(|| {
        format!(
            "cannot load all-MiniLM-L6-v2 from {} (set --minilm-dir / REGISTRY_MINILM_DIR, \
             or run scripts/fetch-minilm.sh)",
            config.minilm_dir.display()
        )
    })
}

fn openai_from_config(config: &EmbedderConfig) -> anyhow::Result<OpenAiEmbedder> {
    let url = config.url.clone().context(
        "--embedder openai needs the API origin: set --embedder-url / REGISTRY_EMBEDDER_URL",
    )?;
    let model = config
        .model
        .clone()
        .filter(|model| !model.trim().is_empty())
        .context(
            "--embedder openai needs a model: set --embedder-model / REGISTRY_EMBEDDER_MODEL",
        )?;
    let settings = OpenAiSettings {
        api_key: config.api_key.clone().filter(|key| !key.is_empty()),
        dimensions: config.dimensions,
        ..OpenAiSettings::new(url, model)
    };
    Ok(OpenAiEmbedder::new(settings)?)
}

/// Run a local model's `work` on tokio's blocking pool: inference is CPU-bound.
pub(crate) async fn on_blocking_pool<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, EmbedError> + Send + 'static,
) -> Result<T, EmbedError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|error| EmbedError::Model(format!("embedding task failed: {error}")))?
}

/// Dot product of two vectors of the same length (the cosine, for normalised vectors).
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    a.iter().zip(b).map(|(x, y)| x * y).sum()
}

/// Cosine similarity; 0 when either vector is zero.
pub fn cosine(a: &[f32], b: &[f32]) -> f32 {
    let norms = dot(a, a).sqrt() * dot(b, b).sqrt();
    if norms > 0.0 { dot(a, b) / norms } else { 0.0 }
}

/// Scales `vector` to unit length in place; a zero vector stays zero.
pub fn l2_normalize(vector: &mut [f32]) {
    let norm = dot(vector, vector).sqrt();
    if norm > 0.0 {
        for value in vector.iter_mut() {
            *value /= norm;
        }
    }
}

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod fake_service;

/// Vectors computed by an independent implementation (the Python generators in `testdata/`),
/// which the embedders' tests must reproduce.
#[cfg(test)]
pub(crate) mod reference {
    #[derive(serde::Deserialize)]
    pub struct Reference {
        pub cases: Vec<ReferenceCase>,
    }

    #[derive(serde::Deserialize)]
    pub struct ReferenceCase {
        pub text: String,
        pub ids: Vec<u32>,
        pub vector: Vec<f32>,
    }

    /// Parses one of the `testdata/*_reference.json` files.
    pub fn parse(json: &str) -> Reference {
        serde_json::from_str(json).expect("a reference file")
    }

    /// The largest difference between a computed vector and the reference's, component by
    /// component.
    pub fn largest_difference(computed: &[f32], reference: &[f32]) -> f32 {
        computed
            .iter()
            .zip(reference)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;
    use std::path::PathBuf;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        embedder: EmbedderConfig,
    }

    fn parse(args: &[&str]) -> EmbedderConfig {
        let argv = std::iter::once("test").chain(args.iter().copied());
        Cli::try_parse_from(argv).expect("arguments parse").embedder
    }

    #[test]
    fn auto_is_the_default() {
        let config = parse(&[]);
        assert_eq!(config.kind, EmbedderKind::Auto);
        assert_eq!(config.models_index.as_str(), crate::models::DEFAULT_INDEX);
        // (Whether offline is the default depends on REGISTRY_OFFLINE, which the test
        // script sets for every server the suites start.)
        assert!(parse(&["--offline"]).offline);
        assert!(parse(&["--offline", "true"]).offline);
        assert!(!parse(&["--offline", "false"]).offline);
        assert_eq!(
            config.minilm_dir,
            PathBuf::from("./models/all-MiniLM-L6-v2")
        );
    }

    #[test]
    fn auto_without_the_model_ranks_with_the_static_table() {
        let dir = tempfile::tempdir().expect("dir");
        let models = dir.path().to_str().expect("utf-8");
        let embedder = from_config(&parse(&["--models-dir", models]))
            .expect("auto is valid")
            .expect("an embedder");
        assert!(embedder.is_bag_of_words(), "{}", embedder.id());
        let error = from_config(&parse(&["--embedder", "bge-small", "--models-dir", models]))
            .err()
            .expect("bge-small needs its files");
        assert!(format!("{error:#}").contains("models fetch"), "{error:#}");
    }

    #[test]
    fn auto_with_a_corrupt_model_ranks_with_the_static_table() {
        let dir = tempfile::tempdir().expect("dir");
        let model = dir.path().join("bge-small-en-v1.5");
        std::fs::create_dir_all(&model).expect("dir");
        for (name, _) in crate::models::BGE_SMALL.files {
            std::fs::write(model.join(name), b"not the model").expect("write");
        }
        let models = dir.path().to_str().expect("utf-8");
        let embedder = from_config(&parse(&["--models-dir", models]))
            .expect("auto is valid")
            .expect("an embedder");
        assert!(embedder.is_bag_of_words(), "{}", embedder.id());
    }

    #[test]
    fn none_means_keyword_search_without_an_embedder() {
        let embedder = from_config(&parse(&["--embedder", "none"])).expect("none is valid");
        assert!(embedder.is_none());
    }

    #[test]
    fn openai_without_a_url_fails_naming_the_variable() {
        let error = from_config(&parse(&["--embedder", "openai", "--embedder-model", "m"]))
            .err()
            .expect("a url is required");
        assert!(
            error.to_string().contains("REGISTRY_EMBEDDER_URL"),
            "{error}"
        );
    }

    #[test]
    fn openai_without_a_model_fails_naming_the_variable() {
        let args = [
            "--embedder",
            "openai",
            "--embedder-url",
            "http://127.0.0.1:9",
        ];
        let error = from_config(&parse(&args))
            .err()
            .expect("a model is required");
        assert!(
            error.to_string().contains("REGISTRY_EMBEDDER_MODEL"),
            "{error}"
        );
    }

    #[test]
    fn minilm_without_weights_fails_naming_the_flag_and_the_script() {
        let args = [
            "--embedder",
            "minilm",
            "--minilm-dir",
            "/nonexistent/minilm",
        ];
        let error = from_config(&parse(&args))
            .err()
            .expect("weights are required");
        let message = format!("{error:#}");
        assert!(message.contains("--minilm-dir"), "{message}");
        assert!(message.contains("scripts/fetch-minilm.sh"), "{message}");
    }

    #[test]
    fn the_api_key_never_appears_in_debug_output() {
        let config = parse(&["--embedder-api-key", "sk-secret"]);
        assert!(!format!("{config:?}").contains("sk-secret"));
    }

    #[test]
    fn cosine_with_a_zero_vector_is_zero() {
        assert_eq!(cosine(&[0.0, 0.0], &[1.0, 0.0]), 0.0);
        assert!((cosine(&[2.0, 0.0], &[1.0, 0.0]) - 1.0).abs() < 1e-6);
    }

    #[test]
    fn normalising_keeps_direction_and_leaves_zero_alone() {
        let mut vector = [3.0, 4.0];
        l2_normalize(&mut vector);
        assert_eq!(vector, [0.6, 0.8]);
        let mut zero = [0.0, 0.0];
        l2_normalize(&mut zero);
        assert_eq!(zero, [0.0, 0.0]);
    }
}
