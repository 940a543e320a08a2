//! BAAI bge-small-en-v1.5, a retrieval-trained BERT (12 layers × 384), from its dynamic-int8
//! ONNX export, run in plain Rust.
//!
//! The ONNX file keeps each dense layer's weights as int8 with a scale per output column, and
//! quantises each layer's input on the fly (`DynamicQuantizeLinear`: one scale and zero point
//! over the whole input, rounded to uint8) before an integer matrix product. This module reads
//! those weights (`onnx`), keeps them int8, and does the same arithmetic: each text's input is
//! rounded to its uint8 grid, multiplied exactly in integers (`int8`: AVX-512 VNNI or AVX2 when
//! the CPU has them), and scaled back. So its vectors follow the reference runtime's (see the
//! test for how closely), and do not depend on which texts share a batch. The rest (attention,
//! layer norm, GELU) runs in f32 loops in the graph's order of operations, compiled for AVX2
//! where the CPU has it; attention reads only each text's real tokens.
//!
//! Pooling is the `[CLS]` token's last hidden state, L2-normalised. Queries carry the model's
//! retrieval instruction ([`QUERY_INSTRUCTION`]); descriptions do not.

use std::path::Path;

use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::EmbedError;
use super::int8::PackedWeights;
use super::onnx::{self, Graph};
use super::transformer::{Local, Transformer, Vocabulary};

/// The embedder id; bump the revision whenever preprocessing or pooling changes.
pub const BGE_ID: &str = "bge-small-en-v1.5-int8@1";

/// What bge's model card prepends to a query that retrieves passages.
pub const QUERY_INSTRUCTION: &str = "Represent this sentence for searching relevant passages: ";

/// Longest input, in tokens including `[CLS]` and `[SEP]`; longer texts are truncated. The
/// model reads 512; a description's first 256 tokens say what it does, at half the cost.
pub const MAX_TOKENS: usize = 256;

/// Texts per forward pass.
const BATCH: usize = 16;

/// The files the model is read from, each with the sha256 it must have (pinned where the
/// model is published: `models::BGE_SMALL`).
pub const FILES: &[(&str, &str)] = crate::models::BGE_SMALL.files;

/// How a sequence's last hidden states become one vector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pooling {
    /// The `[CLS]` token's state: what the model was trained to produce, and what it embeds with.
    Cls,
    /// The mean over the sequence's real tokens, `[CLS]` and `[SEP]` included.
    Mean,
    /// The mean over the tokens between `[CLS]` and `[SEP]`.
    Inner,
}

/// The loaded network and its tokeniser.
pub struct Bge {
    vocab: Vocabulary,
    words: Table,
    positions: Table,
    types: Table,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
}

/// The parts of `config.json` the network's shape comes from.
#[derive(Deserialize)]
struct Config {
    hidden_size: usize,
    num_attention_heads: usize,
    num_hidden_layers: usize,
    intermediate_size: usize,
    layer_norm_eps: f64,
    max_position_embeddings: usize,
}

/// An embedding table kept as its uint8 values, dequantised row by row when looked up.
struct Table {
    values: Vec<u8>,
    width: usize,
    scale: f32,
    zero: f32,
}

impl Table {
    #[inline(always)]
    fn row(&self, index: usize, out: &mut [f32]) -> Result<(), EmbedError> {
        let row = self
            .values
            .get(index * self.width..(index + 1) * self.width)
            .ok_or_else(|| EmbedError::Model(format!("token {index} is outside the table")))?;
        for (slot, value) in out.iter_mut().zip(row) {
            *slot += (f32::from(*value) - self.zero) * self.scale;
        }
        Ok(())
    }
}

struct Norm {
    weight: Vec<f32>,
    bias: Vec<f32>,
    eps: f32,
}

impl Norm {
    /// Layer norm of each row of `a + b` (`b` absent: of `a`), as the graph computes it: the
    /// mean, then the variance around it (the one-pass formula, mean of squares less squared
    /// mean, loses digits on BERT's large activations), then divided by its root.
    #[inline(always)]
    fn add_and_norm(&self, a: &[f32], b: Option<&[f32]>) -> Vec<f32> {
        let width = self.weight.len();
        let mut out = Vec::with_capacity(a.len());
        let mut row = vec![0.0f32; width];
        for (index, chunk) in a.chunks_exact(width).enumerate() {
            match b {
                Some(b) => {
                    for ((slot, x), y) in row.iter_mut().zip(chunk).zip(&b[index * width..]) {
                        *slot = x + y;
                    }
                }
                None => row.copy_from_slice(chunk),
            }
            let mean = row.iter().sum::<f32>() / width as f32;
            let variance = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / width as f32;
            let root = (variance + self.eps).sqrt();
            out.extend(
                row.iter()
                    .zip(&self.weight)
                    .zip(&self.bias)
                    .map(|((v, w), b)| (v - mean) / root * w + b),
            );
        }
        out
    }
}

/// A dense layer as the ONNX graph computes it: uint8 input × int8 weight, scaled back.
struct QuantLinear {
    /// `[in, out]`, zero point taken out.
    weights: PackedWeights,
    /// The weight's scale per output column.
    scale: Vec<f32>,
    bias: Vec<f32>,
}

/// A layer's input rounded to its uint8 grid, `[rows, features]`, with the zero point and the
/// scale of the text each row belongs to.
struct Quantised {
    bytes: Vec<u8>,
    zero: Vec<i32>,
    scale: Vec<f32>,
    rows: usize,
}

impl QuantLinear {
    /// `[rows, outputs]`, each value passed through `then`.
    #[inline(always)]
    fn forward(&self, x: &Quantised, then: impl Fn(f32) -> f32) -> Vec<f32> {
        let outputs = self.weights.outputs();
        // The integer products are written into the output's own memory, then each is turned
        // into its float where it lies: one buffer, one pass.
        let mut out = vec![0.0f32; x.rows * outputs];
        self.weights
            .product_to(&x.bytes, x.rows, pulp::bytemuck::cast_slice_mut(&mut out));
        let column_sums = self.weights.column_sums();
        for (row, values) in out.chunks_exact_mut(outputs).enumerate() {
            let (zero, scale) = (x.zero[row], x.scale[row]);
            for (((value, column_sum), column_scale), bias) in values
                .iter_mut()
                .zip(column_sums)
                .zip(&self.scale)
                .zip(&self.bias)
            {
                // As the graph does: the exact integer product, cast, times both scales
                // (multiplied first), plus the bias.
                let sum = value.to_bits() as i32;
                let product = (sum - zero * column_sum) as f32;
                *value = then(product * (scale * column_scale) + bias);
            }
        }
        out
    }
}

struct Layer {
    query: QuantLinear,
    key: QuantLinear,
    value: QuantLinear,
    attention_out: QuantLinear,
    attention_norm: Norm,
    intermediate: QuantLinear,
    output: QuantLinear,
    output_norm: Norm,
}

impl Transformer for Bge {
    const ID: &'static str = BGE_ID;
    /// Where a neighbour becomes more likely relevant than not on the hard dev set's labels
    /// (`docs/search.md`): under 0.70, fewer than half of bge-small's neighbours are.
    const MIN_SIMILARITY: f32 = 0.70;
    const QUERY_INSTRUCTION: &'static str = QUERY_INSTRUCTION;
    const MAX_TOKENS: usize = MAX_TOKENS;
    const BATCH: usize = BATCH;
    /// One forward pass is one thread: batches of similar length, one per core at a time.
    const BATCHES_ON_EVERY_CORE: bool = true;

    fn load(dir: &Path) -> Result<Self, EmbedError> {
        Self::read(dir)
    }

    fn vocab(&self) -> &Vocabulary {
        &self.vocab
    }

    fn hidden_size(&self) -> usize {
        self.hidden
    }

    fn forward_framed(&self, batch: &[Vec<u32>]) -> Result<Vec<Vec<f32>>, EmbedError> {
        self.forward(batch, Pooling::Cls)
    }
}

impl Bge {
    /// Reads `model.onnx`, `tokenizer.json` and `config.json` from `dir`, each refused unless its
    /// sha256 is the pinned one ([`FILES`]).
    fn read(dir: &Path) -> Result<Self, EmbedError> {
        let read = |name: &str| {
            let pinned = FILES.iter().find(|(file, _)| *file == name);
            read_checked(dir, name, pinned.map_or("", |(_, sha256)| *sha256))
        };
        let model = read("model.onnx")?;
        let tokenizer = read("tokenizer.json")?;
        let config = read("config.json")?;
        let config: Config = serde_json::from_slice(&config)
            .map_err(|error| EmbedError::Model(format!("config.json: {error}")))?;
        let vocab = Vocabulary::from_tokenizer_json(&tokenizer)?;
        let graph =
            onnx::read_graph(&model).map_err(|e| EmbedError::Model(format!("model.onnx: {e}")))?;
        drop(model);
        let weights = Weights {
            graph: &graph,
            eps: config.layer_norm_eps as f32,
        };
        let linears = weights.quantised_linears(config.num_hidden_layers)?;
        let mut layers = Vec::with_capacity(config.num_hidden_layers);
        for (index, mut parts) in linears.into_iter().enumerate() {
            let prefix = format!("encoder.layer.{index}.");
            let mut take = |role: usize| parts[role].take().expect("checked by quantised_linears");
            layers.push(Layer {
                query: take(0),
                key: take(1),
                value: take(2),
                attention_out: take(3),
                intermediate: take(4),
                output: take(5),
                attention_norm: weights.norm(&format!("{prefix}attention.output.LayerNorm"))?,
                output_norm: weights.norm(&format!("{prefix}output.LayerNorm"))?,
            });
        }
        let bge = Self {
            vocab,
            words: weights.table("embeddings.word_embeddings")?,
            positions: weights.table("embeddings.position_embeddings")?,
            types: weights.table("embeddings.token_type_embeddings")?,
            embedding_norm: weights.norm("embeddings.LayerNorm")?,
            layers,
            heads: config.num_attention_heads,
            hidden: config.hidden_size,
        };
        let shapes_agree = bge.words.width == config.hidden_size
            && bge.positions.values.len() == config.max_position_embeddings * config.hidden_size
            && bge.layers.iter().all(|layer| {
                layer.intermediate.weights.inputs() == config.hidden_size
                    && layer.intermediate.weights.outputs() == config.intermediate_size
            })
            && config
                .hidden_size
                .is_multiple_of(config.num_attention_heads)
            && (config.hidden_size / config.num_attention_heads).is_multiple_of(8)
            && config.max_position_embeddings >= MAX_TOKENS;
        if !shapes_agree {
            return Err(EmbedError::Model(
                "model.onnx does not have the shapes config.json gives".into(),
            ));
        }
        Ok(bge)
    }

    /// Pooled, not normalised, last hidden states of framed id sequences (see [`Transformer::frame`]),
    /// in one forward pass: what distilling a static table from this model needs.
    pub fn pool(&self, batch: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>, EmbedError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        self.forward(batch, pooling)
    }

    /// The pooled hidden states of each framed sequence, in one forward pass; with AVX2 where
    /// the CPU has it (the same arithmetic: the compiler may only use wider registers and
    /// the rounding instruction, never reorder a sum or fuse a multiply-add).
    fn forward(&self, batch: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>, EmbedError> {
        #[cfg(target_arch = "x86_64")]
        if let Some(v3) = pulp::x86::V3::try_new() {
            return v3.vectorize(Forward {
                bge: self,
                batch,
                pooling,
            });
        }
        self.forward_rows(batch, pooling)
    }

    #[inline(always)]
    fn forward_rows(
        &self,
        batch: &[Vec<u32>],
        pooling: Pooling,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        let (count, width, hidden) = (
            batch.len(),
            batch.iter().map(Vec::len).max().unwrap_or(0),
            self.hidden,
        );
        let lengths: Vec<usize> = batch.iter().map(Vec::len).collect();
        let mut embedded = vec![0.0f32; count * width * hidden];
        for (sequence, ids) in batch.iter().enumerate() {
            for position in 0..width {
                let id = ids.get(position).copied().unwrap_or(self.vocab.pad) as usize;
                let row = &mut embedded[(sequence * width + position) * hidden..][..hidden];
                self.words.row(id, row)?;
                self.types.row(0, row)?;
                self.positions.row(position, row)?;
            }
        }
        let mut x = self.embedding_norm.add_and_norm(&embedded, None);
        drop(embedded);
        for layer in &self.layers {
            x = self.layer(layer, &x, &lengths);
        }
        let pooled = (0..count)
            .map(|text| {
                let rows = &x[text * width * hidden..][..lengths[text] * hidden];
                let averaged = match pooling {
                    Pooling::Cls => return rows[..hidden].to_vec(),
                    Pooling::Mean => rows,
                    Pooling::Inner if rows.len() > 2 * hidden => &rows[hidden..rows.len() - hidden],
                    Pooling::Inner => rows,
                };
                let mut mean = vec![0.0f32; hidden];
                for row in averaged.chunks_exact(hidden) {
                    for (total, value) in mean.iter_mut().zip(row) {
                        *total += value;
                    }
                }
                let count = (averaged.len() / hidden) as f32;
                mean.iter_mut().for_each(|total| *total /= count);
                mean
            })
            .collect();
        Ok(pooled)
    }

    /// One encoder layer over the rows `x` (`[texts × width, hidden]`).
    #[inline(always)]
    fn layer(&self, layer: &Layer, x: &[f32], lengths: &[usize]) -> Vec<f32> {
        let (count, hidden) = (lengths.len(), self.hidden);
        let width = x.len() / hidden / count.max(1);
        let input = quantise(x, width, hidden, lengths);
        let query = layer.query.forward(&input, |v| v);
        let key = layer.key.forward(&input, |v| v);
        let value = layer.value.forward(&input, |v| v);
        let context = attention(
            Heads {
                query: &query,
                key: &key,
                value: &value,
            },
            width,
            hidden,
            self.heads,
            lengths,
        );
        let attended = layer
            .attention_out
            .forward(&quantise(&context, width, hidden, lengths), |v| v);
        let x = layer.attention_norm.add_and_norm(&attended, Some(x));
        let inner = layer
            .intermediate
            .forward(&quantise(&x, width, hidden, lengths), gelu);
        let features = inner.len() / (count * width).max(1);
        let out = layer
            .output
            .forward(&quantise(&inner, width, features, lengths), |v| v);
        layer.output_norm.add_and_norm(&out, Some(&x))
    }
}

/// The forward pass, compiled with AVX2 (`Bge::forward`).
#[cfg(target_arch = "x86_64")]
struct Forward<'a> {
    bge: &'a Bge,
    batch: &'a [Vec<u32>],
    pooling: Pooling,
}

#[cfg(target_arch = "x86_64")]
impl pulp::NullaryFnOnce for Forward<'_> {
    type Output = Result<Vec<Vec<f32>>, EmbedError>;

    #[inline(always)]
    fn call(self) -> Self::Output {
        self.bge.forward_rows(self.batch, self.pooling)
    }
}

/// A layer's query, key and value rows, `[texts × width, hidden]` each.
struct Heads<'a> {
    query: &'a [f32],
    key: &'a [f32],
    value: &'a [f32],
}

/// Scaled dot-product self-attention, head by head, over each text's real tokens: the
/// softmax of `q · k / √size` over the keys, times the values. Padding takes no part (the
/// graph's mask gives it a weight of exactly 0) and its rows come out 0 (no real token reads
/// them). Sums run in token and feature order, as a plain matrix product does.
#[inline(always)]
fn attention(
    heads: Heads<'_>,
    width: usize,
    hidden: usize,
    head_count: usize,
    lengths: &[usize],
) -> Vec<f32> {
    let size = hidden / head_count;
    let root = (size as f32).sqrt();
    let mut context = vec![0.0f32; heads.query.len()];
    let mut keys: Vec<[f32; 8]> = Vec::new();
    let mut scores = vec![0.0f32; width.div_ceil(8) * 8];
    for (text, length) in lengths.iter().enumerate() {
        let length = (*length).min(width);
        let blocks = length.div_ceil(8);
        let row = |token: usize, head: usize| (text * width + token) * hidden + head * size;
        for head in 0..head_count {
            // The keys in blocks of eight tokens, `[blocks, size, 8]`: a block's eight scores
            // then stay in one register while the features are summed.
            keys.clear();
            keys.resize(blocks * size, [0.0; 8]);
            for token in 0..length {
                let key = &heads.key[row(token, head)..][..size];
                let block = &mut keys[token / 8 * size..][..size];
                for (lanes, k) in block.iter_mut().zip(key) {
                    lanes[token % 8] = *k;
                }
            }
            for token in 0..length {
                let query = &heads.query[row(token, head)..][..size];
                let blocks_of_scores = &mut scores.as_chunks_mut::<8>().0[..blocks];
                let mut block = 0;
                while block < blocks {
                    if blocks - block >= 4 {
                        score_blocks::<4>(query, &keys, size, block, blocks_of_scores);
                        block += 4;
                    } else {
                        score_blocks::<1>(query, &keys, size, block, blocks_of_scores);
                        block += 1;
                    }
                }
                let scores = &mut scores[..length];
                let mut max = f32::MIN;
                for score in scores.iter_mut() {
                    *score /= root;
                    max = if *score > max { *score } else { max };
                }
                for score in scores.iter_mut() {
                    *score = exp(*score - max);
                }
                let sum: f32 = scores.iter().sum();
                for score in scores.iter_mut() {
                    *score /= sum;
                }
                let out = &mut context[row(token, head)..][..size];
                let values = |other: usize| &heads.value[row(other, head)..][..size];
                let mut eight = 0;
                while eight < size / 8 {
                    if size / 8 - eight >= 4 {
                        weigh_values::<4>(scores, values, eight, out);
                        eight += 4;
                    } else {
                        weigh_values::<1>(scores, values, eight, out);
                        eight += 1;
                    }
                }
            }
        }
    }
    context
}

/// The scores of `query` against key blocks `block..block + B` (`keys`: `[blocks, size, 8]`).
/// `B` blocks at once keep `B` independent sums in flight: one alone waits on its own
/// additions. Each score is summed in feature order.
#[inline(always)]
fn score_blocks<const B: usize>(
    query: &[f32],
    keys: &[[f32; 8]],
    size: usize,
    block: usize,
    scores: &mut [[f32; 8]],
) {
    let keys: [&[[f32; 8]]; B] = std::array::from_fn(|b| &keys[(block + b) * size..][..size]);
    let mut sums = [[0.0f32; 8]; B];
    for (feature, q) in query.iter().enumerate() {
        for b in 0..B {
            for lane in 0..8 {
                sums[b][lane] += q * keys[b][feature][lane];
            }
        }
    }
    scores[block..block + B].copy_from_slice(&sums);
}

/// Features `eight · 8 .. (eight + E) · 8` of the weighted sum of the value rows (`values(t)`
/// is token `t`'s), summed over the tokens in order, `E` registers at once.
#[inline(always)]
fn weigh_values<'a, const E: usize>(
    weights: &[f32],
    values: impl Fn(usize) -> &'a [f32],
    eight: usize,
    out: &mut [f32],
) {
    let mut sums = [[0.0f32; 8]; E];
    for (other, weight) in weights.iter().enumerate() {
        let value = &values(other)[eight * 8..][..E * 8];
        for e in 0..E {
            for lane in 0..8 {
                sums[e][lane] += weight * value[e * 8 + lane];
            }
        }
    }
    for (e, sums) in sums.iter().enumerate() {
        out[(eight + e) * 8..][..8].copy_from_slice(sums);
    }
}

/// `e^x` for `x ≤ 0` (a softmax's shifted scores), within about two units in the last place:
/// `2^k · e^r` with `k` the nearest integer to `x / ln 2` and `|r| ≤ ln 2 / 2`, `e^r` by its
/// degree-6 Taylor polynomial (Horner), ln 2 split in two so that `r` is exact. Below −87 the
/// result is 0 (`e^-87` is 1.6 · 10⁻³⁸, under a softmax's resolution). Branch-free, so loops
/// of it vectorise; the library's `expf` was a tenth of the embedding time.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LN2_HIGH: f32 = 0.693_359_4;
    const LN2_LOW: f32 = -2.121_944_4e-4;
    let tiny = x < -87.0;
    let x = x.max(-87.0);
    // The nearest integer (ties up) to x / ln 2 ≤ 0, by truncation: a single instruction.
    let k = ((x * std::f32::consts::LOG2_E - 0.5) as i32) as f32;
    let r = x - k * LN2_HIGH - k * LN2_LOW;
    let mut p = r * (1.0 / 720.0) + 1.0 / 120.0;
    p = r * p + 1.0 / 24.0;
    p = r * p + 1.0 / 6.0;
    p = r * p + 0.5;
    p = r * p + 1.0;
    p = r * p + 1.0;
    let scale = f32::from_bits((((k as i32) + 127) as u32) << 23);
    if tiny { 0.0 } else { p * scale }
}

/// GELU with the exact error function, in the graph's order of operations: quantisation
/// rounds what comes out, so the last bit of each value matters.
#[inline(always)]
fn gelu(x: f32) -> f32 {
    x * (erf(x / std::f32::consts::SQRT_2) + 1.0) * 0.5
}

/// The error function in single precision: a rational approximation on [-4, 4] (odd degree-13
/// numerator, even degree-8 denominator; the coefficients are the ones Eigen and XLA use),
/// ±1 outside. Within 5 · 10⁻⁷ of the exact value, branch-free, so loops of it vectorise;
/// the library's `erff` was a tenth of the embedding time. (Plain multiply-adds: `mul_add` is
/// a library call where the build's baseline has no FMA instruction.)
#[inline(always)]
fn erf(x: f32) -> f32 {
    let x = x.clamp(-4.0, 4.0);
    let x2 = x * x;
    let mut p = x2 * -2.726_142_3e-10 + 2.770_681_4e-8;
    p = x2 * p + -2.101_024e-6;
    p = x2 * p + -5.692_506_4e-5;
    p = x2 * p + -7.349_906_3e-4;
    p = x2 * p + -2.954_6e-3;
    p = x2 * p + -1.609_603_3e-2;
    let mut q = x2 * -1.456_607_2e-5 + -2.133_740_6e-4;
    q = x2 * q + -1.682_827e-3;
    q = x2 * q + -7.373_329e-3;
    q = x2 * q + -1.426_474e-2;
    x * p / q
}

/// ONNX `DynamicQuantizeLinear` of each text's rows of `x` (`[texts, width, features]`), as the
/// reference runtime computes it for one text alone: the range over the text's real tokens,
/// widened to include 0, split into 255 steps; values rounded half to even onto that grid.
/// Padding rows share their text's grid (their values never reach a real token).
/// (Rounding is one instruction where the pass runs with AVX2, a library call otherwise.)
#[inline(always)]
fn quantise(values: &[f32], width: usize, features: usize, lengths: &[usize]) -> Quantised {
    let count = lengths.len();
    let mut bytes = Vec::with_capacity(values.len());
    let (mut zeros, mut scales) = (
        Vec::with_capacity(count * width),
        Vec::with_capacity(count * width),
    );
    for (text, rows) in values.chunks(width * features).enumerate() {
        let real = &rows[..lengths[text].min(width) * features];
        let (low, high) = range(real);
        let scale = (high - low) / 255.0;
        let zero =
            if scale == 0.0 {
                bytes.extend(std::iter::repeat_n(0u8, rows.len()));
                0.0
            } else {
                let zero = (-low / scale).round_ties_even().clamp(0.0, 255.0);
                bytes.extend(rows.iter().map(|value| {
                    ((*value / scale).round_ties_even() + zero).clamp(0.0, 255.0) as u8
                }));
                zero
            };
        zeros.extend(std::iter::repeat_n(zero as i32, width));
        scales.extend(std::iter::repeat_n(scale, width));
    }
    Quantised {
        bytes,
        zero: zeros,
        scale: scales,
        rows: count * width,
    }
}

/// The smallest and the largest of `values`, and 0, in eight lanes so that the loop vectorises.
#[inline(always)]
fn range(values: &[f32]) -> (f32, f32) {
    let (mut low, mut high) = ([0.0f32; 8], [0.0f32; 8]);
    let (eights, rest) = values.as_chunks::<8>();
    for eight in eights {
        for lane in 0..8 {
            low[lane] = if eight[lane] < low[lane] {
                eight[lane]
            } else {
                low[lane]
            };
            high[lane] = if eight[lane] > high[lane] {
                eight[lane]
            } else {
                high[lane]
            };
        }
    }
    let lanes = low.iter().zip(&high).map(|(l, h)| (*l, *h));
    lanes
        .chain(rest.iter().map(|v| (*v, *v)))
        .fold((0.0f32, 0.0f32), |(low, high), (l, h)| {
            (low.min(l), high.max(h))
        })
}

/// Reads weights out of the graph by the names the export gave them.
struct Weights<'a> {
    graph: &'a Graph,
    eps: f32,
}

/// The dense layers of each encoder layer, in this order; the export names each integer matrix
/// product's output after the layer it computes.
const ROLES: [&str; 6] = [
    "attention/self/query",
    "attention/self/key",
    "attention/self/value",
    "attention/output/dense",
    "intermediate/dense",
    "output/dense",
];

impl Weights<'_> {
    fn tensor(&self, name: &str) -> Result<&onnx::TensorData, EmbedError> {
        self.graph
            .initializers
            .get(name)
            .ok_or_else(|| EmbedError::Model(format!("model.onnx has no tensor {name}")))
    }

    fn floats(&self, name: &str) -> Result<Vec<f32>, EmbedError> {
        self.tensor(name)?
            .to_f32()
            .map_err(|e| EmbedError::Model(format!("model.onnx {name}: {e}")))
    }

    fn ints(&self, name: &str) -> Result<Vec<i32>, EmbedError> {
        self.tensor(name)?
            .to_i32()
            .map_err(|e| EmbedError::Model(format!("model.onnx {name}: {e}")))
    }

    fn norm(&self, prefix: &str) -> Result<Norm, EmbedError> {
        let weight = self.floats(&format!("{prefix}.weight"))?;
        let bias = self.floats(&format!("{prefix}.bias"))?;
        if weight.len() != bias.len() {
            return Err(EmbedError::Model(format!(
                "model.onnx {prefix}: weight and bias differ"
            )));
        }
        Ok(Norm {
            weight,
            bias,
            eps: self.eps,
        })
    }

    fn table(&self, prefix: &str) -> Result<Table, EmbedError> {
        let quantised = self.tensor(&format!("{prefix}.weight_quantized"))?;
        let [rows, width] = quantised.dims[..] else {
            return Err(EmbedError::Model(format!(
                "model.onnx {prefix} is not a matrix"
            )));
        };
        let values = self.ints(&format!("{prefix}.weight_quantized"))?;
        let values = values
            .into_iter()
            .map(|v| {
                u8::try_from(v)
                    .map_err(|_| EmbedError::Model(format!("model.onnx {prefix}: not uint8")))
            })
            .collect::<Result<Vec<u8>, _>>()?;
        let scalar = |values: Vec<f32>| values.first().copied().filter(|_| values.len() == 1);
        let scale = scalar(self.floats(&format!("{prefix}.weight_scale"))?);
        let zero = self.ints(&format!("{prefix}.weight_zero_point"))?;
        match (scale, zero.as_slice()) {
            (Some(scale), &[zero]) if values.len() == rows * width => Ok(Table {
                values,
                width,
                scale,
                zero: zero as f32,
            }),
            _ => Err(EmbedError::Model(format!(
                "model.onnx {prefix}: not a per-tensor uint8 table"
            ))),
        }
    }

    /// Every integer matrix product of the encoder, placed by layer and role ([`ROLES`]); fails
    /// unless each of `layers` × 6 is found exactly once.
    fn quantised_linears(
        &self,
        layers: usize,
    ) -> Result<Vec<[Option<QuantLinear>; 6]>, EmbedError> {
        let mut found: Vec<[Option<QuantLinear>; 6]> =
            (0..layers).map(|_| Default::default()).collect();
        for node in self
            .graph
            .nodes
            .iter()
            .filter(|n| n.op_type == "MatMulInteger")
        {
            let output = node.outputs.first().map(String::as_str).unwrap_or_default();
            let place = output.strip_prefix("/encoder/layer.").and_then(|rest| {
                let (index, role) = rest.split_once('/')?;
                let role = role.strip_suffix("/MatMul_output_0_output_quantized")?;
                Some((
                    index.parse::<usize>().ok()?,
                    ROLES.iter().position(|r| *r == role)?,
                ))
            });
            let (Some((index, role)), [_, weight, _, _]) = (place, &node.inputs[..]) else {
                return Err(EmbedError::Model(format!(
                    "model.onnx: unexpected integer product {output}"
                )));
            };
            let slot = found
                .get_mut(index)
                .map(|parts| &mut parts[role])
                .filter(|slot| slot.is_none())
                .ok_or_else(|| {
                    EmbedError::Model(format!("model.onnx: unexpected integer product {output}"))
                })?;
            let bias = format!(
                "encoder.layer.{index}.{}.bias",
                ROLES[role].replace('/', ".")
            );
            *slot = Some(self.quantised_linear(weight, &bias)?);
        }
        if found.iter().flatten().any(Option::is_none) {
            return Err(EmbedError::Model(
                "model.onnx lacks some of the encoder's dense layers".into(),
            ));
        }
        Ok(found)
    }

    fn quantised_linear(&self, weight: &str, bias: &str) -> Result<QuantLinear, EmbedError> {
        let stem = weight.strip_suffix("_quantized").unwrap_or(weight);
        let matrix = self.tensor(weight)?;
        let [inputs, outputs] = matrix.dims[..] else {
            return Err(EmbedError::Model(format!(
                "model.onnx {weight} is not a matrix"
            )));
        };
        let values = self.ints(weight)?;
        let zeros = self.ints(&format!("{stem}_zero_point"))?;
        let scale = self.floats(&format!("{stem}_scale"))?;
        let bias = self.floats(bias)?;
        if zeros.len() != outputs || scale.len() != outputs || bias.len() != outputs {
            return Err(EmbedError::Model(format!(
                "model.onnx {stem}: not one scale per column"
            )));
        }
        let weights = values
            .iter()
            .enumerate()
            .map(|(at, value)| i8::try_from(value - zeros[at % outputs]))
            .collect::<Result<Vec<i8>, _>>()
            .map_err(|_| EmbedError::Model(format!("model.onnx {stem}: weights beyond int8")))?;
        Ok(QuantLinear {
            weights: PackedWeights::new(&weights, inputs, outputs),
            scale,
            bias,
        })
    }
}

fn read_checked(dir: &Path, name: &str, sha256: &str) -> Result<Vec<u8>, EmbedError> {
    let path = dir.join(name);
    let bytes = std::fs::read(&path).map_err(|error| {
        EmbedError::Model(format!(
            "cannot read {}: {error} (run `agent-registry models fetch`)",
            path.display()
        ))
    })?;
    let actual = hex::encode(Sha256::digest(&bytes));
    if actual != sha256 {
        return Err(EmbedError::Model(format!(
            "{} has sha256 {actual}, expected {sha256} (run `agent-registry models fetch`)",
            path.display()
        )));
    }
    Ok(bytes)
}

/// bge-small behind the [`Embedder`](super::Embedder) seam.
pub type BgeEmbedder = Local<Bge>;

/// For tests: the directory `REGISTRY_BGE_DIR` names, else `models/bge-small-en-v1.5` (where
/// `agent-registry models fetch --models-dir models` puts it); `None` (skip) only when the
/// model is absent and `REGISTRY_SKIP_MODEL_TESTS=1`, a failure otherwise.
#[cfg(test)]
pub(crate) fn fetched_dir() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("REGISTRY_BGE_DIR").map_or_else(
        || "models/bge-small-en-v1.5".into(),
        std::path::PathBuf::from,
    );
    super::transformer::test_model_dir(
        dir,
        "model.onnx",
        "REGISTRY_SKIP_MODEL_TESTS",
        "run `cargo run --release -- models fetch --models-dir models`",
    )
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;
    use crate::embed::{dot, l2_normalize};

    /// The model loaded once per test binary from [`fetched_dir`]; `None`: skipped.
    fn model() -> Option<&'static Bge> {
        static MODEL: OnceLock<Option<Bge>> = OnceLock::new();
        crate::embed::transformer::load_once(&MODEL, fetched_dir)
    }

    use crate::embed::transformer::embed_strs as embed;

    #[test]
    fn bge_matches_the_reference_runtime_on_the_shipped_graph() {
        let Some(model) = model() else { return };
        let reference = crate::embed::reference::parse(include_str!("testdata/bge_reference.json"));
        let texts: Vec<String> = reference
            .cases
            .iter()
            .map(|case| case.text.clone())
            .collect();
        let vectors = model.embed_texts(&texts).expect("embeds");
        // Rounding each layer's input to a uint8 grid turns last-bit differences in the float
        // operations between it (summation order, exp, erf) into whole steps now and then: the
        // reference runtime's own optimised and unoptimised graphs differ by up to 3e-4 on
        // these texts. Per text 0.998, on average 0.9995.
        let mut total = 0.0;
        for (case, vector) in reference.cases.iter().zip(&vectors) {
            assert_eq!(
                model.frame(&model.tokenizer().encode(&case.text)),
                case.ids,
                "{}",
                case.text
            );
            let cosine = dot(vector, &case.vector);
            eprintln!("cosine {cosine:.6}: {}", case.text);
            assert!(cosine >= 0.998, "{}: cosine {cosine}", case.text);
            total += cosine;
        }
        let mean = total / reference.cases.len() as f32;
        assert!(mean >= 0.9995, "mean cosine {mean}");
    }

    #[test]
    fn a_weather_question_is_nearer_a_weather_agent_than_a_trading_one() {
        let Some(model) = model() else { return };
        let v = embed(
            model,
            &[
                &format!("{QUERY_INSTRUCTION}will it rain in Paris tomorrow"),
                "Weather forecasts and current conditions for any city.",
                "Place limit orders and track positions on crypto exchanges.",
            ],
        );
        assert!(dot(&v[0], &v[1]) > dot(&v[0], &v[2]) + 0.1);
    }

    #[test]
    fn cls_pooling_is_the_embedding_and_the_means_differ_from_it() {
        let Some(model) = model() else { return };
        let text = "invoice payment reminders";
        let framed = model.frame(&model.tokenizer().encode(text));
        let pooled: Vec<Vec<f32>> = [Pooling::Cls, Pooling::Mean, Pooling::Inner]
            .into_iter()
            .map(|pooling| {
                let mut vector = model
                    .pool(std::slice::from_ref(&framed), pooling)
                    .expect("pools");
                l2_normalize(&mut vector[0]);
                vector.remove(0)
            })
            .collect();
        assert!(dot(&pooled[0], &embed(model, &[text])[0]) > 0.99999);
        assert!(dot(&pooled[0], &pooled[1]) < 0.999);
        assert!(dot(&pooled[1], &pooled[2]) < 0.999);
        assert!(model.pool(&[], Pooling::Mean).expect("pools").is_empty());
    }

    #[test]
    fn overlong_texts_are_truncated() {
        let Some(model) = model() else { return };
        let long = "invoice payment reminder ".repeat(200);
        assert_eq!(
            model.frame(&model.tokenizer().encode(&long)).len(),
            MAX_TOKENS
        );
        let vector = &embed(model, &[&long])[0];
        assert!((dot(vector, vector) - 1.0).abs() < 1e-5);
    }

    #[test]
    fn the_error_function_is_within_six_ten_millionths() {
        let mut worst = 0.0f64;
        for step in -60_000..=60_000 {
            let x = step as f64 / 10_000.0;
            let exact = libm_erf(x);
            worst = worst.max((f64::from(erf(x as f32)) - exact).abs());
        }
        assert!(worst < 6e-7, "worst error {worst}");
        assert_eq!(erf(0.0), 0.0);
        assert!((erf(-9.0) + 1.0).abs() < 1e-6);
        let mut worst = 0.0f64;
        for step in 0..=87_000 {
            let x = -(step as f32) / 1_000.0;
            let exact = f64::from(x).exp();
            worst = worst.max((f64::from(exp(x)) - exact).abs() / exact);
        }
        assert!(worst < 4e-7, "worst relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(-90.0), 0.0);
        assert_eq!(exp(f32::MIN), 0.0);
    }

    /// erf in double precision (Abramowitz and Stegun 7.1.26 is too coarse; a series and a
    /// continued fraction are exact enough for a reference).
    fn libm_erf(x: f64) -> f64 {
        if x.abs() < 2.5 {
            // Maclaurin series.
            let (mut term, mut sum, mut n) = (x, x, 0.0);
            while term.abs() > 1e-17 {
                n += 1.0;
                term *= -x * x / n;
                sum += term / (2.0 * n + 1.0);
            }
            sum * 2.0 / std::f64::consts::PI.sqrt()
        } else {
            // Continued fraction for erfc.
            let z = x.abs();
            let mut fraction = 0.0;
            for k in (1..=60).rev() {
                fraction = f64::from(k) / 2.0 / (z + fraction);
            }
            let erfc = (-z * z).exp() / std::f64::consts::PI.sqrt() / (z + fraction);
            (1.0 - erfc).copysign(x)
        }
    }

    #[test]
    fn a_file_with_the_wrong_checksum_is_refused_by_name() {
        let dir = tempfile::tempdir().expect("temp dir");
        for (name, _) in FILES {
            std::fs::write(dir.path().join(name), b"not the model").expect("write");
        }
        let Err(error) = Bge::load(dir.path()) else {
            panic!("a wrong checksum must be refused");
        };
        let message = error.to_string();
        assert!(
            message.contains("model.onnx") && message.contains(FILES[0].1),
            "{message}"
        );
    }
}
