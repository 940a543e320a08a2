//! What the two local transformers (MiniLM, bge-small) share: the BERT-uncased vocabulary of
//! their `tokenizer.json` and the ids that frame a sequence, embedding texts in batches of
//! similar length, and the [`Embedder`] seam over a loaded model.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;

use super::wordpiece::WordPiece;
use super::{EmbedError, Embedder, l2_normalize};

/// A `tokenizer.json`'s vocabulary in id order, the tokeniser over it, and its framing ids.
pub struct Vocabulary {
    tokens: Vec<String>,
    tokenizer: WordPiece,
    /// `[CLS]`, which opens a sequence.
    pub cls: u32,
    /// `[SEP]`, which closes it.
    pub sep: u32,
    /// `[PAD]`, which fills a batch's shorter sequences.
    pub pad: u32,
}

impl Vocabulary {
    /// Reads `tokenizer.json`, refused unless it describes the BERT-uncased WordPiece that
    /// [`WordPiece`] implements and names the framing tokens.
    pub fn from_tokenizer_json(json: &[u8]) -> Result<Self, EmbedError> {
        let tokens = read_vocabulary(json)?;
        let tokenizer = WordPiece::from_tokens(tokens.iter().map(String::as_str))?;
        let special = |token: &str| {
            tokenizer
                .id(token)
                .ok_or_else(|| EmbedError::Model(format!("tokenizer.json has no {token} token")))
        };
        let (cls, sep, pad) = (special("[CLS]")?, special("[SEP]")?, special("[PAD]")?);
        Ok(Self {
            tokens,
            tokenizer,
            cls,
            sep,
            pad,
        })
    }
}

/// A loaded local transformer: what it must say of itself, and what it gets for that.
pub trait Transformer: Send + Sync + Sized + 'static {
    /// [`Embedder::id`].
    const ID: &'static str;
    /// [`Embedder::min_similarity`].
    const MIN_SIMILARITY: f32;
    /// [`Embedder::query_instruction`].
    const QUERY_INSTRUCTION: &'static str = "";
    /// The longest framed sequence; longer texts are truncated.
    const MAX_TOKENS: usize;
    /// Texts one forward pass takes.
    const BATCH: usize;
    /// Whether batches run one per core at a time (a model whose forward pass is one thread),
    /// or in turn (a model that spreads one pass over the cores itself).
    const BATCHES_ON_EVERY_CORE: bool;

    /// Loads the model from `dir`, checking its files.
    fn load(dir: &Path) -> Result<Self, EmbedError>;

    /// Its `tokenizer.json`.
    fn vocab(&self) -> &Vocabulary;

    /// Width of the output vectors.
    fn hidden_size(&self) -> usize;

    /// The pooled, not normalised, embeddings of framed sequences, in one forward pass.
    fn forward_framed(&self, batch: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError>;

    /// The vocabulary of `tokenizer.json`, in id order.
    fn vocabulary(&self) -> &[String] {
        &self.vocab().tokens
    }

    /// The WordPiece tokeniser over this model's vocabulary.
    fn tokenizer(&self) -> &WordPiece {
        &self.vocab().tokenizer
    }

    /// `[CLS] tokens [SEP]`, truncated to [`Transformer::MAX_TOKENS`].
    fn frame(&self, tokens: &[u32]) -> Vec<u32> {
        let vocab = self.vocab();
        super::wordpiece::frame(tokens, vocab.cls, vocab.sep, Self::MAX_TOKENS)
    }

    /// L2-normalised embeddings of `texts`, batched by similar length. A text without a single
    /// token (empty, whitespace) gets the zero vector, as with the static embedder.
    fn embed_texts(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        use rayon::prelude::*;
        let encoded: Vec<Vec<u32>> = texts
            .iter()
            .map(|text| self.tokenizer().encode(text))
            .collect();
        let mut order: Vec<usize> = (0..texts.len())
            .filter(|i| !encoded[*i].is_empty())
            .collect();
        order.sort_by_key(|i| encoded[*i].len());
        let forward = |chunk: &[usize]| {
            let framed: Vec<Vec<u32>> = chunk.iter().map(|i| self.frame(&encoded[*i])).collect();
            self.forward_framed(&framed)
        };
        let pooled: Result<Vec<Vec<Vec<f32>>>, EmbedError> = if Self::BATCHES_ON_EVERY_CORE {
            order.par_chunks(Self::BATCH).map(forward).collect()
        } else {
            order.chunks(Self::BATCH).map(forward).collect()
        };
        let mut out = vec![vec![0.0; self.hidden_size()]; texts.len()];
        for (index, mut vector) in order.iter().zip(pooled?.into_iter().flatten()) {
            l2_normalize(&mut vector);
            out[*index] = vector;
        }
        Ok(out)
    }
}

/// A local transformer behind the [`Embedder`] seam; inference runs on the blocking pool.
pub struct Local<M> {
    model: Arc<M>,
}

impl<M> Clone for Local<M> {
    fn clone(&self) -> Self {
        Self {
            model: Arc::clone(&self.model),
        }
    }
}

impl<M: Transformer> Local<M> {
    /// Loads the model from `dir` (see [`Transformer::load`]).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Ok(Self {
            model: Arc::new(M::load(dir)?),
        })
    }

    /// The loaded model, for tools that need more than [`Embedder::embed`].
    pub fn model(&self) -> &M {
        &self.model
    }
}

#[async_trait::async_trait]
impl<M: Transformer> Embedder for Local<M> {
    fn id(&self) -> &str {
        M::ID
    }

    fn dim(&self) -> usize {
        self.model.hidden_size()
    }

    fn min_similarity(&self) -> Option<f32> {
        Some(M::MIN_SIMILARITY)
    }

    fn query_instruction(&self) -> &str {
        M::QUERY_INSTRUCTION
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = Arc::clone(&self.model);
        let owned = texts.to_vec();
        super::on_blocking_pool(move || model.embed_texts(&owned)).await
    }
}

/// For tests: where a model's files are, or `None` (skip) when they are absent and `skip_var`
/// is `1`; a failure otherwise, saying how to fetch them. `dir` is relative to the crate.
#[cfg(test)]
pub(crate) fn test_model_dir(
    dir: std::path::PathBuf,
    marker: &str,
    skip_var: &str,
    fetch: &str,
) -> Option<std::path::PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    if dir.join(marker).exists() {
        return Some(dir);
    }
    let skip = std::env::var(skip_var).is_ok_and(|v| v == "1");
    assert!(
        skip,
        "{} is missing from {}: {fetch} (or set {skip_var}=1 to skip these tests)",
        marker,
        dir.display()
    );
    eprintln!("skipping: no {marker} in {}", dir.display());
    None
}

/// For tests: the model in `dir()`, loaded once into `cell`; `None` when the test is skipped.
#[cfg(test)]
pub(crate) fn load_once<M: Transformer>(
    cell: &'static std::sync::OnceLock<Option<M>>,
    dir: fn() -> Option<std::path::PathBuf>,
) -> Option<&'static M> {
    cell.get_or_init(|| Some(M::load(&dir()?).expect("the fetched model loads")))
        .as_ref()
}

/// For tests: `texts` embedded by `model`.
#[cfg(test)]
pub(crate) fn embed_strs<M: Transformer>(model: &M, texts: &[&str]) -> Vec<Vec<f32>> {
    let owned: Vec<String> = texts.iter().map(|text| (*text).to_owned()).collect();
    model.embed_texts(&owned).expect("embeds")
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
fn read_vocabulary(json: &[u8]) -> Result<Vec<String>, EmbedError> {
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
