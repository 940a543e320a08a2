//! BAAI bge-small-en-v1.5, a retrieval-trained BERT (12 layers × 384), from its dynamic-int8
//! ONNX export, run in candle.
//!
//! The ONNX file keeps each dense layer's weights as int8 with a scale per output column, and
//! quantises each layer's input on the fly (`DynamicQuantizeLinear`: one scale and zero point
//! over the whole input, rounded to uint8) before an integer matrix product. This module reads
//! those weights (`onnx`), keeps them int8, and does the same arithmetic: each text's input is
//! rounded to its uint8 grid, multiplied exactly in integers (`int8`: AVX2 when the CPU has it),
//! and scaled back. So its vectors follow the reference runtime's (see the test for how
//! closely), and do not depend on which texts share a batch. The rest (attention, layer norm,
//! GELU) runs in f32 in candle, in the graph's order of operations.
//!
//! Pooling is the `[CLS]` token's last hidden state, L2-normalised. Queries carry the model's
//! retrieval instruction ([`QUERY_INSTRUCTION`]); descriptions do not.

use std::path::Path;
use std::sync::Arc;

use candle_core::{Device, Tensor};
use serde::Deserialize;
use sha2::{Digest, Sha256};

use super::int8::PackedWeights;
use super::onnx::{self, Graph};
use super::wordpiece::WordPiece;
use super::{EmbedError, Embedder, l2_normalize};

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
    vocabulary: Vec<String>,
    tokenizer: WordPiece,
    cls: u32,
    sep: u32,
    pad: u32,
    words: Table,
    positions: Table,
    types: Table,
    embedding_norm: Norm,
    layers: Vec<Layer>,
    heads: usize,
    hidden: usize,
    device: Device,
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
    fn forward(&self, x: &Quantised, then: impl Fn(f32) -> f32) -> Vec<f32> {
        let outputs = self.weights.outputs();
        let mut out = self.weights.product(&x.bytes, x.rows);
        let column_sums = self.weights.column_sums();
        for (row, sums) in out.chunks_exact_mut(outputs).enumerate() {
            let (zero, scale) = (x.zero[row], x.scale[row]);
            for (column, sum) in sums.iter_mut().enumerate() {
                // As the graph does: the exact integer product, cast, times both scales
                // (multiplied first), plus the bias. Written back over the integer.
                let product = (*sum - zero * column_sums[column]) as f32;
                let value = then(product * (scale * self.scale[column]) + self.bias[column]);
                *sum = value.to_bits() as i32;
            }
        }
        out.into_iter()
            .map(|bits| f32::from_bits(bits as u32))
            .collect()
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

impl Bge {
    /// Reads `model.onnx`, `tokenizer.json` and `config.json` from `dir`, each refused unless its
    /// sha256 is the pinned one ([`FILES`]).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        let read = |name: &str| {
            let pinned = FILES.iter().find(|(file, _)| *file == name);
            read_checked(dir, name, pinned.map_or("", |(_, sha256)| *sha256))
        };
        let model = read("model.onnx")?;
        let tokenizer = read("tokenizer.json")?;
        let config = read("config.json")?;
        let config: Config = serde_json::from_slice(&config)
            .map_err(|error| EmbedError::Model(format!("config.json: {error}")))?;
        let vocabulary = super::minilm::read_vocabulary(&tokenizer)?;
        let tokenizer = WordPiece::from_tokens(vocabulary.iter().map(String::as_str))?;
        let special = |token: &str| {
            tokenizer
                .id(token)
                .ok_or_else(|| EmbedError::Model(format!("tokenizer.json has no {token} token")))
        };
        let (cls, sep, pad) = (special("[CLS]")?, special("[SEP]")?, special("[PAD]")?);
        let graph =
            onnx::read_graph(&model).map_err(|e| EmbedError::Model(format!("model.onnx: {e}")))?;
        drop(model);
        let device = Device::Cpu;
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
            vocabulary,
            tokenizer,
            cls,
            sep,
            pad,
            words: weights.table("embeddings.word_embeddings")?,
            positions: weights.table("embeddings.position_embeddings")?,
            types: weights.table("embeddings.token_type_embeddings")?,
            embedding_norm: weights.norm("embeddings.LayerNorm")?,
            layers,
            heads: config.num_attention_heads,
            hidden: config.hidden_size,
            device,
        };
        let shapes_agree = bge.words.width == config.hidden_size
            && bge.positions.values.len() == config.max_position_embeddings * config.hidden_size
            && bge.layers.iter().all(|layer| {
                layer.intermediate.weights.inputs() == config.hidden_size
                    && layer.intermediate.weights.outputs() == config.intermediate_size
            })
            && config.hidden_size % config.num_attention_heads == 0
            && config.max_position_embeddings >= MAX_TOKENS;
        if !shapes_agree {
            return Err(EmbedError::Model(
                "model.onnx does not have the shapes config.json gives".into(),
            ));
        }
        Ok(bge)
    }

    /// Width of the output vectors (384).
    pub fn hidden_size(&self) -> usize {
        self.hidden
    }

    /// The vocabulary of `tokenizer.json`, in id order.
    pub fn vocabulary(&self) -> &[String] {
        &self.vocabulary
    }

    /// The WordPiece tokeniser over this model's vocabulary.
    pub fn tokenizer(&self) -> &WordPiece {
        &self.tokenizer
    }

    /// `[CLS] tokens [SEP]`, truncated to [`MAX_TOKENS`].
    pub fn frame(&self, tokens: &[u32]) -> Vec<u32> {
        let kept = &tokens[..tokens.len().min(MAX_TOKENS - 2)];
        let mut ids = Vec::with_capacity(kept.len() + 2);
        ids.push(self.cls);
        ids.extend_from_slice(kept);
        ids.push(self.sep);
        ids
    }

    /// L2-normalised embeddings of `texts`, batched by similar length. A text without a single
    /// token (empty, whitespace) gets the zero vector.
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
        // Batches of similar length, one per core at a time.
        use rayon::prelude::*;
        let pooled: Vec<Vec<Vec<f32>>> = order
            .par_chunks(BATCH)
            .map(|chunk| {
                let framed: Vec<Vec<u32>> =
                    chunk.iter().map(|i| self.frame(&encoded[*i])).collect();
                self.forward(&framed, Pooling::Cls).map_err(model_error)?
            })
            .collect::<Result<_, EmbedError>>()?;
        for (index, mut vector) in order.iter().zip(pooled.into_iter().flatten()) {
            l2_normalize(&mut vector);
            out[*index] = vector;
        }
        Ok(out)
    }

    /// Pooled, not normalised, last hidden states of framed id sequences (see [`Bge::frame`]),
    /// in one forward pass: what distilling a static table from this model needs.
    pub fn pool(&self, batch: &[Vec<u32>], pooling: Pooling) -> Result<Vec<Vec<f32>>, EmbedError> {
        if batch.is_empty() {
            return Ok(Vec::new());
        }
        self.forward(batch, pooling).map_err(model_error)?
    }

    /// The pooled hidden states of each framed sequence, in one forward pass.
    fn forward(
        &self,
        batch: &[Vec<u32>],
        pooling: Pooling,
    ) -> candle_core::Result<Result<Vec<Vec<f32>>, EmbedError>> {
        let (count, width, hidden) = (
            batch.len(),
            batch.iter().map(Vec::len).max().unwrap_or(0),
            self.hidden,
        );
        let lengths: Vec<usize> = batch.iter().map(Vec::len).collect();
        let mut embedded = vec![0.0f32; count * width * hidden];
        for (sequence, ids) in batch.iter().enumerate() {
            for position in 0..width {
                let id = ids.get(position).copied().unwrap_or(self.pad) as usize;
                let row = &mut embedded[(sequence * width + position) * hidden..][..hidden];
                let looked_up = self
                    .words
                    .row(id, row)
                    .and_then(|()| self.types.row(0, row))
                    .and_then(|()| self.positions.row(position, row));
                if let Err(error) = looked_up {
                    return Ok(Err(error));
                }
            }
        }
        let mut x = self.embedding_norm.add_and_norm(&embedded, None);
        drop(embedded);
        // 0 where a token is real, the lowest float where it is padding.
        let mask: Vec<f32> = batch
            .iter()
            .flat_map(|ids| (0..width).map(move |p| if p < ids.len() { 0.0 } else { f32::MIN }))
            .collect();
        let mask = Tensor::from_vec(mask, (count, 1, 1, width), &self.device)?;
        for layer in &self.layers {
            x = self.layer(layer, &x, &mask, &lengths)?;
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
        Ok(Ok(pooled))
    }

    /// One encoder layer over the rows `x` (`[texts × width, hidden]`); attention runs in
    /// candle, the rest on the rows.
    fn layer(
        &self,
        layer: &Layer,
        x: &[f32],
        mask: &Tensor,
        lengths: &[usize],
    ) -> candle_core::Result<Vec<f32>> {
        let (count, hidden) = (lengths.len(), self.hidden);
        let width = x.len() / hidden / count.max(1);
        let size = hidden / self.heads;
        let input = quantise(x, width, hidden, lengths);
        let heads = |rows: Vec<f32>| -> candle_core::Result<Tensor> {
            Tensor::from_vec(rows, (count, width, self.heads, size), &self.device)?
                .transpose(1, 2)?
                .contiguous()
        };
        let query = heads(layer.query.forward(&input, |v| v))?;
        let key = heads(layer.key.forward(&input, |v| v))?;
        let value = heads(layer.value.forward(&input, |v| v))?;
        let root = Tensor::new(&[(size as f32).sqrt()], &self.device)?;
        let scores = query
            .matmul(&key.t()?.contiguous()?)?
            .broadcast_div(&root)?
            .broadcast_add(mask)?;
        let attention = candle_nn::ops::softmax_last_dim(&scores)?;
        let context = attention
            .matmul(&value)?
            .transpose(1, 2)?
            .flatten_all()?
            .to_vec1::<f32>()?;
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
        Ok(layer.output_norm.add_and_norm(&out, Some(&x)))
    }
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
fn quantise(values: &[f32], width: usize, features: usize, lengths: &[usize]) -> Quantised {
    let count = lengths.len();
    let mut bytes = Vec::with_capacity(values.len());
    let (mut zeros, mut scales) = (
        Vec::with_capacity(count * width),
        Vec::with_capacity(count * width),
    );
    for (text, rows) in values.chunks(width * features).enumerate() {
        let real = &rows[..lengths[text].min(width) * features];
        let (low, high) = real.iter().fold((0.0f32, 0.0f32), |(low, high), v| {
            (low.min(*v), high.max(*v))
        });
        let scale = (high - low) / 255.0;
        let zero = if scale == 0.0 {
            bytes.extend(std::iter::repeat_n(0u8, rows.len()));
            0.0
        } else {
            let zero = round_even(-low / scale).clamp(0.0, 255.0);
            bytes.extend(
                rows.iter()
                    .map(|value| (round_even(*value / scale) + zero).clamp(0.0, 255.0) as u8),
            );
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

/// `value` rounded to the nearest integer, halves to even, for |value| < 2³¹: truncated, then
/// moved by one where the remainder is over a half, or exactly a half and the truncation odd.
/// (`round_ties_even`, and the add-and-subtract-2²³ idiom, which the compiler recognises as
/// it, are library calls on the x86-64 baseline: an eighth of a query's embedding time.)
/// Quantised values are within ±255 · 2, far inside the range.
#[inline(always)]
fn round_even(value: f32) -> f32 {
    let truncated = value as i32;
    let rest = value - truncated as f32;
    let odd = truncated & 1 != 0;
    let step = if rest > 0.5 || (rest == 0.5 && odd) {
        1
    } else if rest < -0.5 || (rest == -0.5 && odd) {
        -1
    } else {
        0
    };
    (truncated + step) as f32
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

fn model_error(error: candle_core::Error) -> EmbedError {
    EmbedError::Model(format!("bge-small-en-v1.5: {error}"))
}

/// The bge embedder behind the [`Embedder`] seam; inference runs on the blocking pool.
#[derive(Clone)]
pub struct BgeEmbedder {
    model: Arc<Bge>,
}

impl BgeEmbedder {
    /// Loads the model from `dir` (see [`Bge::load`]).
    pub fn load(dir: &Path) -> Result<Self, EmbedError> {
        Ok(Self {
            model: Arc::new(Bge::load(dir)?),
        })
    }

    /// The loaded model, for tools that need more than [`Embedder::embed`].
    pub fn model(&self) -> &Bge {
        &self.model
    }
}

#[async_trait::async_trait]
impl Embedder for BgeEmbedder {
    fn id(&self) -> &str {
        BGE_ID
    }

    fn dim(&self) -> usize {
        self.model.hidden_size()
    }

    fn query_instruction(&self) -> &str {
        QUERY_INSTRUCTION
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let model = Arc::clone(&self.model);
        let owned = texts.to_vec();
        super::on_blocking_pool(move || model.embed_texts(&owned)).await
    }
}

/// For tests: the directory `REGISTRY_BGE_DIR` names, else `models/bge-small-en-v1.5` (where
/// `agent-registry models fetch --models-dir models` puts it); `None` (skip) only when the
/// model is absent and `REGISTRY_SKIP_MODEL_TESTS=1`, a failure otherwise.
#[cfg(test)]
pub(crate) fn fetched_dir() -> Option<std::path::PathBuf> {
    let dir = std::env::var_os("REGISTRY_BGE_DIR").map_or_else(
        || std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("models/bge-small-en-v1.5"),
        std::path::PathBuf::from,
    );
    if dir.join("model.onnx").exists() {
        return Some(dir);
    }
    let skip = std::env::var("REGISTRY_SKIP_MODEL_TESTS").is_ok_and(|v| v == "1");
    assert!(
        skip,
        "bge-small is missing at {}: run `cargo run --release -- models fetch --models-dir \
         models` (or set REGISTRY_SKIP_MODEL_TESTS=1 to skip)",
        dir.display()
    );
    None
}

#[cfg(test)]
mod tests {
    use std::sync::OnceLock;

    use super::*;
    use crate::search::embed::dot;

    /// The model loaded once per test binary from [`fetched_dir`]; `None`: skipped.
    fn model() -> Option<&'static Bge> {
        static MODEL: OnceLock<Option<Bge>> = OnceLock::new();
        MODEL
            .get_or_init(|| Some(Bge::load(&fetched_dir()?).expect("the fetched model loads")))
            .as_ref()
    }

    fn embed(model: &Bge, texts: &[&str]) -> Vec<Vec<f32>> {
        let owned: Vec<String> = texts.iter().map(|text| (*text).to_owned()).collect();
        model.embed_texts(&owned).expect("embeds")
    }

    #[test]
    fn bge_matches_the_reference_runtime_on_the_shipped_graph() {
        let Some(model) = model() else { return };
        let reference =
            crate::search::embed::reference::parse(include_str!("testdata/bge_reference.json"));
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
    fn vectors_do_not_depend_on_the_batch() {
        let Some(model) = model() else { return };
        let texts = [
            "short",
            "a somewhat longer sentence about invoices and payments",
            "北京",
        ];
        let batch = embed(model, &texts);
        for (text, batched) in texts.iter().zip(&batch) {
            let alone = &embed(model, &[text])[0];
            assert!(dot(alone, batched) > 0.99999, "{text}");
        }
    }

    #[test]
    fn empty_and_overlong_texts() {
        let Some(model) = model() else { return };
        let long = "invoice payment reminder ".repeat(200);
        assert_eq!(
            model.frame(&model.tokenizer().encode(&long)).len(),
            MAX_TOKENS
        );
        let vectors = embed(model, &["", " \n", &long]);
        assert!(
            vectors[0]
                .iter()
                .chain(&vectors[1])
                .all(|value| *value == 0.0)
        );
        assert!((dot(&vectors[2], &vectors[2]) - 1.0).abs() < 1e-5);
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
        assert_eq!(round_even(2.5), 2.0);
        assert_eq!(round_even(3.5), 4.0);
        assert_eq!(round_even(-0.5), 0.0);
        assert_eq!(round_even(-254.6), -255.0);
        assert_eq!(round_even(-1.5), -2.0);
        assert_eq!(round_even(0.49999997), 0.0);
        for step in -20_000..20_000 {
            let value = step as f32 / 37.0;
            assert_eq!(round_even(value), value.round_ties_even(), "{value}");
        }
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
