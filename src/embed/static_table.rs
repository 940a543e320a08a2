//! The built-in static embedder: a token-embedding table compiled into the binary.
//!
//! A text is tokenised exactly as the model would tokenise it, each token's int8 row is scaled
//! and summed, and the sum is L2-normalised. Token weights are folded into the row scales, so a
//! weighted mean costs nothing extra and tokens with weight 0 (`[UNK]`, `[CLS]`, …) are skipped.
//! The built-in table is potion-base-8M (a static model distilled from bge-base-en-v1.5, MIT),
//! written in this format by `scripts/static-table/potion_table.py`; `examples/distill_static.rs`
//! makes tables of the same format from a transformer (the previous built-in was distilled from
//! all-MiniLM-L6-v2 that way).
//!
//! Asset format (all integers little-endian):
//!
//! | bytes            | content                                                          |
//! |------------------|------------------------------------------------------------------|
//! | 4                | magic `ARSE`                                                     |
//! | 2                | format version (1)                                               |
//! | 2                | flags (0)                                                        |
//! | 4                | rows: vocabulary size                                            |
//! | 4                | dims                                                             |
//! | 4                | vocab_len: bytes of the vocabulary block                         |
//! | vocab_len        | the vocabulary in id order, UTF-8, one token per `\n`-ended line |
//! | 4 × rows         | per-row f32 scale (quantisation step × token weight)             |
//! | rows × dims      | int8 values, row-major                                           |

use std::sync::{Arc, OnceLock};

use sha2::{Digest, Sha256};

use super::wordpiece::WordPiece;
use super::{EmbedError, Embedder, l2_normalize};

/// The table compiled into the binary.
const BUILTIN_ASSET: &[u8] = include_bytes!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/assets/static-embeddings/potion-base-8m.bin"
));

/// The built-in table's name in its embedder's id.
const BUILTIN_NAME: &str = "potion-base-8m";

/// Bump when the runtime (tokenisation, pooling) changes the vectors made from the same asset.
const RUNTIME_REVISION: u32 = 1;

const MAGIC: [u8; 4] = *b"ARSE";
const FORMAT_VERSION: u16 = 1;
const HEADER_LEN: usize = 20;

/// Batches larger than this are embedded on the blocking pool instead of the async worker.
const INLINE_BATCH: usize = 32;

/// A quantised token-embedding table: one int8 row and one scale per vocabulary token.
#[derive(Debug, Clone, PartialEq)]
pub struct StaticTable {
    /// The vocabulary, in id order.
    pub tokens: Vec<String>,
    /// Per-row multiplier turning int8 values into the (weighted) embedding; 0 skips the token.
    pub scales: Vec<f32>,
    /// `tokens.len() × dims` int8 values, row-major.
    pub values: Vec<i8>,
    /// Width of a row.
    pub dims: usize,
}

impl StaticTable {
    /// Serialises the table in the asset format described in the module docs.
    pub fn to_bytes(&self) -> Result<Vec<u8>, EmbedError> {
        self.check_shape()?;
        let mut vocab = String::new();
        for token in &self.tokens {
            if token.contains('\n') {
                return Err(EmbedError::Model(format!(
                    "token {token:?} holds a newline"
                )));
            }
            vocab.push_str(token);
            vocab.push('\n');
        }
        let mut out = Vec::with_capacity(HEADER_LEN + vocab.len() + self.values.len() * 2);
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&to_u32(self.tokens.len())?.to_le_bytes());
        out.extend_from_slice(&to_u32(self.dims)?.to_le_bytes());
        out.extend_from_slice(&to_u32(vocab.len())?.to_le_bytes());
        out.extend_from_slice(vocab.as_bytes());
        for scale in &self.scales {
            out.extend_from_slice(&scale.to_le_bytes());
        }
        out.extend(self.values.iter().map(|value| value.to_le_bytes()[0]));
        Ok(out)
    }

    /// Parses a table in the asset format, refusing anything malformed.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, EmbedError> {
        let mut reader = Reader { bytes, at: 0 };
        if reader.take(4)? != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let version = u16::from_le_bytes(reader.array()?);
        if version != FORMAT_VERSION {
            return Err(corrupt(&format!("unsupported format version {version}")));
        }
        let _flags = u16::from_le_bytes(reader.array()?);
        let rows = reader.length()?;
        let dims = reader.length()?;
        let vocab_len = reader.length()?;
        let tokens = parse_vocab(reader.take(vocab_len)?, rows)?;
        let scale_bytes = reader.take(rows.checked_mul(4).ok_or_else(|| corrupt("rows"))?)?;
        let scales = scale_bytes
            .chunks_exact(4)
            .map(|chunk| f32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
            .collect();
        let value_count = rows.checked_mul(dims).ok_or_else(|| corrupt("dims"))?;
        let values = reader
            .take(value_count)?
            .iter()
            .map(|byte| i8::from_le_bytes([*byte]))
            .collect();
        if reader.at != bytes.len() {
            return Err(corrupt("trailing bytes"));
        }
        Ok(Self {
            tokens,
            scales,
            values,
            dims,
        })
    }

    fn check_shape(&self) -> Result<(), EmbedError> {
        let rows = self.tokens.len();
        if self.scales.len() != rows || self.values.len() != rows * self.dims || self.dims == 0 {
            return Err(EmbedError::Model(format!(
                "table shape mismatch: {rows} tokens, {} scales, {} values, {} dims",
                self.scales.len(),
                self.values.len(),
                self.dims
            )));
        }
        Ok(())
    }

    /// Adds `scale × row` of token `id` to `sum`; unknown ids and zero-weight rows add nothing.
    fn accumulate(&self, id: u32, sum: &mut [f32]) -> bool {
        let row = id as usize;
        let scale = match self.scales.get(row) {
            Some(scale) if *scale != 0.0 => *scale,
            _ => return false,
        };
        let values = &self.values[row * self.dims..(row + 1) * self.dims];
        for (total, value) in sum.iter_mut().zip(values) {
            *total += scale * f32::from(*value);
        }
        true
    }
}

/// A cursor over the asset bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Result<&'a [u8], EmbedError> {
        let end = self.at.checked_add(len).ok_or_else(|| corrupt("length"))?;
        let slice = self
            .bytes
            .get(self.at..end)
            .ok_or_else(|| corrupt("truncated"))?;
        self.at = end;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], EmbedError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    fn length(&mut self) -> Result<usize, EmbedError> {
        usize::try_from(u32::from_le_bytes(self.array()?)).map_err(|_| corrupt("length"))
    }
}

fn parse_vocab(block: &[u8], rows: usize) -> Result<Vec<String>, EmbedError> {
    let text = std::str::from_utf8(block).map_err(|_| corrupt("vocabulary is not UTF-8"))?;
    let body = text
        .strip_suffix('\n')
        .ok_or_else(|| corrupt("vocabulary block"))?;
    let tokens: Vec<String> = body.split('\n').map(str::to_owned).collect();
    if tokens.len() != rows {
        return Err(corrupt(&format!("{} tokens for {rows} rows", tokens.len())));
    }
    Ok(tokens)
}

fn corrupt(what: &str) -> EmbedError {
    EmbedError::Model(format!("static embedding table is corrupt: {what}"))
}

fn to_u32(value: usize) -> Result<u32, EmbedError> {
    u32::try_from(value).map_err(|_| EmbedError::Model(format!("{value} does not fit the format")))
}

/// The static embedder: tokenise, sum the weighted rows, normalise. Cheap to clone.
#[derive(Clone)]
pub struct StaticEmbedder {
    inner: Arc<Inner>,
}

struct Inner {
    id: String,
    tokenizer: WordPiece,
    table: StaticTable,
}

impl StaticEmbedder {
    /// The table compiled into the binary (parsed once per process).
    pub fn builtin() -> Result<Self, EmbedError> {
        static BUILTIN: OnceLock<Result<StaticEmbedder, String>> = OnceLock::new();
        BUILTIN
            .get_or_init(|| {
                Self::from_named_asset(BUILTIN_ASSET, BUILTIN_NAME)
                    .map_err(|error| error.to_string())
            })
            .clone()
            .map_err(EmbedError::Model)
    }

    /// An embedder over a table in the asset format (an operator's `--static-table`); its id
    /// names the table's content.
    pub fn from_asset(bytes: &[u8]) -> Result<Self, EmbedError> {
        Self::from_named_asset(bytes, "table")
    }

    fn from_named_asset(bytes: &[u8], name: &str) -> Result<Self, EmbedError> {
        let table = StaticTable::from_bytes(bytes)?;
        let digest = hex::encode(Sha256::digest(bytes));
        let id = format!(
            "static-{name}-{}d-i8@{RUNTIME_REVISION}.{}",
            table.dims,
            &digest[..12]
        );
        Self::from_table(table, id)
    }

    /// An embedder over an in-memory table, under the given id.
    pub fn from_table(table: StaticTable, id: String) -> Result<Self, EmbedError> {
        table.check_shape()?;
        let tokenizer = WordPiece::from_tokens(table.tokens.iter().map(String::as_str))?;
        let inner = Inner {
            id,
            tokenizer,
            table,
        };
        Ok(Self {
            inner: Arc::new(inner),
        })
    }

    /// The tokeniser built from the table's vocabulary.
    pub fn tokenizer(&self) -> &WordPiece {
        &self.inner.tokenizer
    }

    /// The L2-normalised vector of one text; the zero vector when no token has a row.
    pub fn embed_text(&self, text: &str) -> Vec<f32> {
        let ids = self.inner.tokenizer.encode(text);
        let mut sum = vec![0.0; self.inner.table.dims];
        for id in ids {
            self.inner.table.accumulate(id, &mut sum);
        }
        l2_normalize(&mut sum);
        sum
    }

    fn embed_all(&self, texts: &[String]) -> Vec<Vec<f32>> {
        texts.iter().map(|text| self.embed_text(text)).collect()
    }
}

#[async_trait::async_trait]
impl Embedder for StaticEmbedder {
    fn id(&self) -> &str {
        &self.inner.id
    }

    /// A sum of word vectors places a query of words no agent uses as near the catalogue as a
    /// real one (measured: no floor separates them, `docs/search.md`), so its neighbours only
    /// re-rank the keyword matches; the hard dev set scores the same (0.374 NDCG@10).
    fn min_similarity(&self) -> Option<f32> {
        None
    }

    fn is_bag_of_words(&self) -> bool {
        true
    }

    fn dim(&self) -> usize {
        self.inner.table.dims
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        if texts.len() <= INLINE_BATCH {
            return Ok(self.embed_all(texts));
        }
        let embedder = self.clone();
        let owned = texts.to_vec();
        tokio::task::spawn_blocking(move || embedder.embed_all(&owned))
            .await
            .map_err(|error| EmbedError::Model(format!("embedding task failed: {error}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::dot;

    fn builtin() -> StaticEmbedder {
        StaticEmbedder::builtin().expect("the built-in table parses")
    }

    fn tiny_table() -> StaticTable {
        StaticTable {
            tokens: ["[UNK]", "hello", "world", "##s"]
                .map(String::from)
                .to_vec(),
            scales: vec![0.0, 0.5, 0.25, 1.0],
            values: vec![0, 0, 1, 2, -3, 4, 127, -128],
            dims: 2,
        }
    }

    #[test]
    fn a_table_survives_a_round_trip_through_the_asset_format() {
        let table = tiny_table();
        let bytes = table.to_bytes().expect("serialises");
        assert_eq!(StaticTable::from_bytes(&bytes).expect("parses"), table);
    }

    #[test]
    fn a_truncated_or_foreign_asset_is_refused() {
        let bytes = tiny_table().to_bytes().expect("serialises");
        assert!(StaticTable::from_bytes(&bytes[..bytes.len() - 1]).is_err());
        let mut foreign = bytes.clone();
        foreign[0] = b'X';
        assert!(StaticTable::from_bytes(&foreign).is_err());
        let mut longer = bytes;
        longer.push(0);
        assert!(StaticTable::from_bytes(&longer).is_err());
    }

    #[test]
    fn a_text_is_the_normalised_weighted_sum_of_its_token_rows() {
        let embedder = StaticEmbedder::from_table(tiny_table(), "tiny".into()).expect("valid");
        // hello = 0.5 × (1, 2), world = 0.25 × (-3, 4): sum (-0.25, 2.0).
        let vector = embedder.embed_text("Hello world");
        let norm = (0.25f32 * 0.25 + 4.0).sqrt();
        assert!((vector[0] + 0.25 / norm).abs() < 1e-6 && (vector[1] - 2.0 / norm).abs() < 1e-6);
    }

    #[test]
    fn the_builtin_table_ranks_related_intents_above_unrelated_ones() {
        let embedder = builtin();
        let bitcoin = embedder.embed_text("current price of bitcoin");
        let crypto = embedder.embed_text("crypto market quotes");
        let weather = embedder.embed_text("weather forecast for Paris");
        assert!(dot(&bitcoin, &crypto) > dot(&bitcoin, &weather) + 0.1);
        assert!(dot(&bitcoin, &crypto) > dot(&crypto, &weather) + 0.1);
    }

    #[test]
    fn the_builtin_table_matches_paraphrased_agent_descriptions() {
        let embedder = builtin();
        let query = embedder.embed_text("translate a document into Spanish");
        let hit = embedder.embed_text("Multilingual translation agent for texts and files");
        let miss = embedder.embed_text("Kubernetes cluster monitoring and alerting");
        assert!(dot(&query, &hit) > dot(&query, &miss));
    }

    #[test]
    fn texts_of_unknown_tokens_only_embed_to_the_zero_vector() {
        let embedder = builtin();
        for text in ["🚀🔥", "[CLS] [SEP]"] {
            assert!(
                embedder.embed_text(text).iter().all(|value| *value == 0.0),
                "{text:?}"
            );
        }
    }

    #[test]
    fn the_builtin_table_matches_an_independent_reference_implementation() {
        // scripts/embed-testdata/make_static_reference.py: Hugging Face `tokenizers` and numpy.
        let reference =
            crate::embed::reference::parse(include_str!("testdata/static_reference.json"));
        let embedder = builtin();
        for case in &reference.cases {
            assert_eq!(
                embedder.tokenizer().encode(&case.text),
                case.ids,
                "{}",
                case.text
            );
            let vector = embedder.embed_text(&case.text);
            let worst = crate::embed::reference::largest_difference(&vector, &case.vector);
            assert!(worst < 1e-5, "{}: off by {worst}", case.text);
        }
    }

    #[test]
    fn the_builtin_id_names_the_dimensions_and_the_table_content() {
        let embedder = builtin();
        let id = embedder.id();
        assert!(id.starts_with(&format!("static-potion-base-8m-{}d-i8@1.", embedder.dim())));
        let table = StaticTable::from_bytes(BUILTIN_ASSET).expect("parses");
        let other = StaticEmbedder::from_asset(&table.to_bytes().expect("serialises"))
            .expect("the same table from a file");
        assert!(
            other.id().starts_with("static-table-256d-i8@1."),
            "{}",
            other.id()
        );
    }
}
