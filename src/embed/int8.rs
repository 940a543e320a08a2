//! The integer matrix product of a dynamically quantised dense layer: uint8 activations times
//! int8 weights, summed exactly in 32 bits, as the ONNX `MatMulInteger` operator defines it.
//!
//! With AVX2 (detected at run time, through `pulp`'s safe intrinsics) `maddubs` multiplies 32
//! unsigned activation bytes by 32 signed weight bytes and adds pairs into 16 bits; `madd` by
//! ones adds those pairs into 32-bit lanes. Pairs cannot saturate when every weight is within
//! ±64 (2 · 255 · 64 = 32,640 ≤ 32,767), which [`PackedWeights::new`] checks: weights
//! quantised with the "reduced range" that int8 exporters use for this very instruction. Other
//! weights, and CPUs without AVX2, take the portable loop, which gives the same integers.
//!
//! Weights are packed once: for each eight output columns and each four inputs, the 32 bytes
//! one instruction reads, so the kernel walks memory in order. A broadcast of four activation
//! bytes meets eight columns' four weights; four rows and sixteen columns are kept in
//! registers at a time, and large products split their rows across the cores.
//!
//! Where the CPU has AVX-512 VNNI, `vpdpbusd` does the multiply and both additions in one
//! instruction on the same blocks (`vnni`). Its intrinsics are not among `pulp`'s safe
//! wrappers, so reaching them takes the crate's one `unsafe` call, made once the CPU is known to
//! have every feature the kernel is compiled for.

/// An int8 weight matrix `[inputs, outputs]`, packed for the kernel, with each column's sum
/// (which takes the activations' zero point out of the product).
pub struct PackedWeights {
    inputs: usize,
    outputs: usize,
    /// `[outputs / 8][inputs / 4]` blocks of 8 columns × 4 inputs.
    blocks: Vec<[i8; 32]>,
    /// The weights as given, row-major, for the portable path.
    plain: Vec<i8>,
    column_sums: Vec<i32>,
    /// Whether the AVX2 kernel may run: shapes in multiples of 4 × 8, weights within ±64.
    packed_ok: bool,
}

/// Rows of activations per parallel task.
const ROWS_PER_TASK: usize = 16;

/// Below this many multiply-adds a product runs on one core.
const PARALLEL_FROM: usize = 1 << 20;

/// Below this many rows (a query's tokens) a product runs on one core: waking the pool's
/// threads for a few tasks cost more than the second core gave (a query's embedding, p50:
/// 16.9 ms split across two cores, 14.1–14.9 ms on one).
const PARALLEL_ROWS: usize = 64;

impl PackedWeights {
    /// Packs `weights` (`[inputs, outputs]`, row-major, zero point already taken out).
    pub fn new(weights: &[i8], inputs: usize, outputs: usize) -> Self {
        assert_eq!(weights.len(), inputs * outputs, "weights match their shape");
        let packed_ok = inputs.is_multiple_of(4)
            && outputs.is_multiple_of(8)
            && weights.iter().all(|w| (-64..=64).contains(w));
        let mut blocks = Vec::new();
        if packed_ok {
            blocks.reserve(outputs / 8 * inputs / 4);
            for block in 0..outputs / 8 {
                for four in 0..inputs / 4 {
                    let mut bytes = [0i8; 32];
                    for column in 0..8 {
                        for j in 0..4 {
                            bytes[column * 4 + j] =
                                weights[(four * 4 + j) * outputs + block * 8 + column];
                        }
                    }
                    blocks.push(bytes);
                }
            }
        }
        let mut column_sums = vec![0i32; outputs];
        for row in weights.chunks_exact(outputs) {
            for (sum, w) in column_sums.iter_mut().zip(row) {
                *sum += i32::from(*w);
            }
        }
        Self {
            inputs,
            outputs,
            blocks,
            plain: if packed_ok {
                Vec::new()
            } else {
                weights.to_vec()
            },
            column_sums,
            packed_ok,
        }
    }

    pub fn inputs(&self) -> usize {
        self.inputs
    }

    pub fn outputs(&self) -> usize {
        self.outputs
    }

    /// Each column's sum of weights.
    pub fn column_sums(&self) -> &[i32] {
        &self.column_sums
    }

    /// `out[r][c] = Σ_k a[r][k] · w[k][c]` for the `rows` rows of `a` (`[rows, inputs]`).
    #[cfg(test)]
    pub fn product(&self, a: &[u8], rows: usize) -> Vec<i32> {
        let mut out = vec![0i32; rows * self.outputs];
        self.product_to(a, rows, &mut out);
        out
    }

    /// [`Self::product`] written over `out` (`[rows, outputs]`).
    pub fn product_to(&self, a: &[u8], rows: usize, out: &mut [i32]) {
        assert_eq!(a.len(), rows * self.inputs, "activations match their shape");
        assert_eq!(
            out.len(),
            rows * self.outputs,
            "the output matches its shape"
        );
        if rows * self.inputs * self.outputs >= PARALLEL_FROM && rows >= PARALLEL_ROWS {
            use rayon::prelude::*;
            out.par_chunks_mut(ROWS_PER_TASK * self.outputs)
                .zip(a.par_chunks(ROWS_PER_TASK * self.inputs))
                .for_each(|(out, a)| self.product_into(a, out));
        } else {
            self.product_into(a, out);
        }
    }

    fn product_into(&self, a: &[u8], out: &mut [i32]) {
        self.product_with(Kernel::best(self), a, out);
    }

    fn product_with(&self, kernel: Kernel, a: &[u8], out: &mut [i32]) {
        match kernel {
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => {
                assert!(
                    self.packed_ok && vnni::available(),
                    "the VNNI kernel can run"
                );
                // SAFETY: `vnni::product` is compiled for AVX2, AVX-512F, AVX-512VL and
                // AVX-512 VNNI, and `vnni::available` found every one of them on this CPU.
                // Its body is safe code (no pointer is read or written): this call is the only
                // obligation.
                #[allow(unsafe_code)]
                unsafe {
                    vnni::product(self, a, out)
                };
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => {
                let v3 = pulp::x86::V3::try_new().expect("the AVX2 kernel can run");
                assert!(self.packed_ok, "the AVX2 kernel can run");
                v3.vectorize(Avx2Product {
                    v3,
                    weights: self,
                    a,
                    out,
                });
            }
            Kernel::Portable => self.portable(a, out),
        }
    }

    fn portable(&self, a: &[u8], out: &mut [i32]) {
        let (inputs, outputs) = (self.inputs, self.outputs);
        let plain: std::borrow::Cow<'_, [i8]> = if self.plain.is_empty() {
            std::borrow::Cow::Owned(self.unpacked())
        } else {
            std::borrow::Cow::Borrowed(&self.plain)
        };
        for (row, out) in a.chunks_exact(inputs).zip(out.chunks_exact_mut(outputs)) {
            for (k, x) in row.iter().enumerate() {
                let x = i32::from(*x);
                if x == 0 {
                    continue;
                }
                for (sum, w) in out.iter_mut().zip(&plain[k * outputs..(k + 1) * outputs]) {
                    *sum += x * i32::from(*w);
                }
            }
        }
    }

    /// The weights back in row-major order, from the packed blocks.
    fn unpacked(&self) -> Vec<i8> {
        let (inputs, outputs) = (self.inputs, self.outputs);
        let mut plain = vec![0i8; inputs * outputs];
        let fours = inputs / 4;
        for (index, bytes) in self.blocks.iter().enumerate() {
            let (block, four) = (index / fours, index % fours);
            for column in 0..8 {
                for j in 0..4 {
                    plain[(four * 4 + j) * outputs + block * 8 + column] = bytes[column * 4 + j];
                }
            }
        }
        plain
    }
}

/// Which loop multiplies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kernel {
    /// Any CPU, any weights.
    Portable,
    /// AVX2, weights within ±64.
    #[cfg(target_arch = "x86_64")]
    Avx2,
    /// AVX-512 VNNI (with AVX-512VL), the same packing.
    #[cfg(target_arch = "x86_64")]
    Vnni,
}

impl Kernel {
    /// Every kernel, fastest first.
    const ALL: &[Kernel] = &[
        #[cfg(target_arch = "x86_64")]
        Kernel::Vnni,
        #[cfg(target_arch = "x86_64")]
        Kernel::Avx2,
        Kernel::Portable,
    ];

    /// Whether this CPU runs this kernel for `weights`.
    fn runs(self, weights: &PackedWeights) -> bool {
        match self {
            // (`weights` is read only by the x86 kernels' arms.)
            Kernel::Portable => {
                let _ = weights;
                true
            }
            #[cfg(target_arch = "x86_64")]
            Kernel::Avx2 => weights.packed_ok && pulp::x86::V3::try_new().is_some(),
            #[cfg(target_arch = "x86_64")]
            Kernel::Vnni => weights.packed_ok && vnni::available(),
        }
    }

    /// Every kernel this CPU runs for `weights`, fastest first.
    #[cfg(test)]
    fn available(weights: &PackedWeights) -> Vec<Kernel> {
        Self::ALL
            .iter()
            .copied()
            .filter(|kernel| kernel.runs(weights))
            .collect()
    }

    fn best(weights: &PackedWeights) -> Kernel {
        Self::ALL
            .iter()
            .copied()
            .find(|kernel| kernel.runs(weights))
            .unwrap_or(Kernel::Portable)
    }
}

#[cfg(target_arch = "x86_64")]
struct Avx2Product<'a> {
    v3: pulp::x86::V3,
    weights: &'a PackedWeights,
    a: &'a [u8],
    out: &'a mut [i32],
}

#[cfg(target_arch = "x86_64")]
impl pulp::NullaryFnOnce for Avx2Product<'_> {
    type Output = ();

    #[inline(always)]
    fn call(self) {
        let Self {
            v3,
            weights,
            a,
            out,
        } = self;
        let (inputs, outputs) = (weights.inputs, weights.outputs);
        let rows = a.len() / inputs;
        let mut row = 0;
        while row < rows {
            let take = (rows - row).min(4);
            let mut block = 0;
            while block < outputs / 8 {
                let pair = (outputs / 8 - block).min(2);
                match (take, pair) {
                    (4, 2) => tile::<4, 2>(v3, weights, a, out, row, block),
                    (4, _) => tile::<4, 1>(v3, weights, a, out, row, block),
                    (_, 2) => {
                        for r in row..row + take {
                            tile::<1, 2>(v3, weights, a, out, r, block);
                        }
                    }
                    _ => {
                        for r in row..row + take {
                            tile::<1, 1>(v3, weights, a, out, r, block);
                        }
                    }
                }
                block += pair;
            }
            row += take;
        }
    }
}

/// A tile's activation rows (four bytes a word) and weight column blocks.
#[cfg(target_arch = "x86_64")]
type TileOperands<'a, const R: usize, const B: usize> = ([&'a [[u8; 4]]; R], [&'a [[i8; 32]]; B]);

/// What one tile reads: rows `row..row + R` of the activations as groups of four bytes (what
/// one broadcast carries) and column blocks `block..block + B` of the packed weights, each
/// exactly `inputs / 4` long, so the kernels' loops index them without bounds checks.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tile_operands<'a, const R: usize, const B: usize>(
    weights: &'a PackedWeights,
    a: &'a [u8],
    row: usize,
    block: usize,
) -> TileOperands<'a, R, B> {
    let fours = weights.inputs / 4;
    let (words, _) = a.as_chunks::<4>();
    (
        std::array::from_fn(|r| &words[(row + r) * fours..][..fours]),
        std::array::from_fn(|b| &weights.blocks[(block + b) * fours..][..fours]),
    )
}

/// A finished tile's sums, written to their rows and columns of `out`.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn write_tile<const R: usize, const B: usize>(
    sums: &[[std::arch::x86_64::__m256i; B]; R],
    out: &mut [i32],
    outputs: usize,
    row: usize,
    block: usize,
) {
    for (r, sums) in sums.iter().enumerate() {
        for (b, sum) in sums.iter().enumerate() {
            let lanes: [i32; 8] = pulp::bytemuck::cast(*sum);
            let at = (row + r) * outputs + (block + b) * 8;
            out[at..at + 8].copy_from_slice(&lanes);
        }
    }
}

/// `R` rows × `B` blocks of eight columns, starting at `row` and `block`, kept in registers
/// over all inputs.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn tile<const R: usize, const B: usize>(
    v3: pulp::x86::V3,
    weights: &PackedWeights,
    a: &[u8],
    out: &mut [i32],
    row: usize,
    block: usize,
) {
    use pulp::bytemuck::cast;
    use std::arch::x86_64::__m256i;
    let ones = v3.avx._mm256_set1_epi16(1);
    let mut sums: [[__m256i; B]; R] = [[v3.avx._mm256_setzero_si256(); B]; R];
    let (rows, columns) = tile_operands::<R, B>(weights, a, row, block);
    for four in 0..weights.inputs / 4 {
        let w: [__m256i; B] = std::array::from_fn(|b| cast(columns[b][four]));
        for r in 0..R {
            let x = v3.avx._mm256_set1_epi32(i32::from_le_bytes(rows[r][four]));
            for b in 0..B {
                let pairs = v3.avx2._mm256_maddubs_epi16(x, w[b]);
                sums[r][b] = v3
                    .avx2
                    ._mm256_add_epi32(sums[r][b], v3.avx2._mm256_madd_epi16(pairs, ones));
            }
        }
    }
    write_tile(&sums, out, weights.outputs, row, block);
}

/// The same product with AVX-512 VNNI's `vpdpbusd`, which multiplies four unsigned activation
/// bytes by four signed weight bytes and adds them into a 32-bit lane in one instruction (the
/// AVX2 path needs three: `maddubs`, `madd`, `add`). It reads the same packed blocks, on
/// 256-bit registers: on the CPUs that have it, two 256-bit ones issue per cycle where one
/// 512-bit one does, and the packing stays the AVX2 one. AVX-512VL's 32 registers hold a tile
/// of four rows by four blocks (sixteen accumulators).
#[cfg(target_arch = "x86_64")]
mod vnni {
    use std::arch::x86_64::{
        __m256i, _mm256_dpbusd_epi32, _mm256_set1_epi32, _mm256_setzero_si256,
    };
    use std::sync::LazyLock;

    use pulp::bytemuck::cast;

    use super::PackedWeights;

    static AVAILABLE: LazyLock<bool> = LazyLock::new(|| {
        std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512vl")
            && std::arch::is_x86_feature_detected!("avx512vnni")
            && std::env::var_os("REGISTRY_NO_VNNI").is_none()
    });

    /// Whether this CPU runs [`product`] (`REGISTRY_NO_VNNI` set: never, to measure the AVX2
    /// path on the same machine).
    pub(super) fn available() -> bool {
        *AVAILABLE
    }

    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    pub(super) fn product(weights: &PackedWeights, a: &[u8], out: &mut [i32]) {
        let (inputs, outputs) = (weights.inputs, weights.outputs);
        let (rows, blocks) = (a.len() / inputs, outputs / 8);
        let mut row = 0;
        while row < rows {
            let take = (rows - row).min(4);
            let mut block = 0;
            while block < blocks {
                let width = (blocks - block).min(4);
                match (take, width) {
                    (4, 4) => tile::<4, 4>(weights, a, out, row, block),
                    (4, _) => {
                        for b in block..block + width {
                            tile::<4, 1>(weights, a, out, row, b);
                        }
                    }
                    (_, 4) => {
                        for r in row..row + take {
                            tile::<1, 4>(weights, a, out, r, block);
                        }
                    }
                    _ => {
                        for r in row..row + take {
                            for b in block..block + width {
                                tile::<1, 1>(weights, a, out, r, b);
                            }
                        }
                    }
                }
                block += width;
            }
            row += take;
        }
    }

    /// `R` rows × `B` blocks of eight columns, starting at `row` and `block`, kept in registers
    /// over all inputs.
    #[target_feature(enable = "avx2,avx512f,avx512vl,avx512vnni")]
    #[inline]
    fn tile<const R: usize, const B: usize>(
        weights: &PackedWeights,
        a: &[u8],
        out: &mut [i32],
        row: usize,
        block: usize,
    ) {
        let mut sums: [[__m256i; B]; R] = [[_mm256_setzero_si256(); B]; R];
        let (rows, columns) = super::tile_operands::<R, B>(weights, a, row, block);
        for four in 0..weights.inputs / 4 {
            let w: [__m256i; B] = std::array::from_fn(|b| cast(columns[b][four]));
            for r in 0..R {
                let x = _mm256_set1_epi32(i32::from_le_bytes(rows[r][four]));
                for b in 0..B {
                    sums[r][b] = _mm256_dpbusd_epi32(sums[r][b], x, w[b]);
                }
            }
        }
        super::write_tile(&sums, out, weights.outputs, row, block);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(a: &[u8], w: &[i8], rows: usize, inputs: usize, outputs: usize) -> Vec<i32> {
        let mut out = vec![0; rows * outputs];
        for r in 0..rows {
            for c in 0..outputs {
                out[r * outputs + c] = (0..inputs)
                    .map(|k| i32::from(a[r * inputs + k]) * i32::from(w[k * outputs + c]))
                    .sum();
            }
        }
        out
    }

    /// Deterministic bytes spanning the whole ranges, extremes included.
    fn data(len: usize, seed: u32, f: impl Fn(u32) -> i32) -> Vec<i32> {
        let mut x = seed;
        (0..len)
            .map(|_| {
                x = x.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
                f(x >> 8)
            })
            .collect()
    }

    #[test]
    fn the_kernel_gives_the_exact_integers_for_every_shape() {
        for (rows, inputs, outputs) in [
            (1, 4, 8),
            (3, 8, 24),
            (7, 384, 40),
            (37, 64, 64),
            (5, 12, 16),
        ] {
            let a: Vec<u8> = data(rows * inputs, 7, |v| {
                if v % 5 == 0 { 255 } else { (v % 256) as i32 }
            })
            .into_iter()
            .map(|v| v as u8)
            .collect();
            let w: Vec<i8> = data(inputs * outputs, 11, |v| {
                if v % 7 == 0 {
                    64
                } else {
                    (v % 129) as i32 - 64
                }
            })
            .into_iter()
            .map(|v| v as i8)
            .collect();
            let packed = PackedWeights::new(&w, inputs, outputs);
            assert!(packed.packed_ok);
            let expected = naive(&a, &w, rows, inputs, outputs);
            assert_eq!(packed.product(&a, rows), expected);
            for kernel in Kernel::available(&packed) {
                let mut out = vec![0; rows * outputs];
                packed.product_with(kernel, &a, &mut out);
                assert_eq!(out, expected, "{kernel:?} on {rows}×{inputs}×{outputs}");
            }
            assert_eq!(
                packed.column_sums()[0],
                (0..inputs).map(|k| i32::from(w[k * outputs])).sum::<i32>()
            );
        }
    }

    #[test]
    fn full_range_weights_and_odd_shapes_take_the_portable_path_exactly() {
        let (rows, inputs, outputs) = (3, 6, 5);
        let a: Vec<u8> = (0..rows * inputs).map(|i| (i * 37 % 256) as u8).collect();
        let w: Vec<i8> = (0..inputs * outputs)
            .map(|i| if i % 2 == 0 { -128 } else { 127 })
            .collect();
        let packed = PackedWeights::new(&w, inputs, outputs);
        assert!(!packed.packed_ok);
        assert_eq!(
            packed.product(&a, rows),
            naive(&a, &w, rows, inputs, outputs)
        );
    }

    #[test]
    fn a_large_product_split_across_cores_is_the_same() {
        let (rows, inputs, outputs) = (100, 384, 96);
        let a: Vec<u8> = (0..rows * inputs).map(|i| (i * 13 % 256) as u8).collect();
        let w: Vec<i8> = (0..inputs * outputs)
            .map(|i| ((i * 7 % 129) as i32 - 64) as i8)
            .collect();
        let packed = PackedWeights::new(&w, inputs, outputs);
        assert!(rows * inputs * outputs >= PARALLEL_FROM / 2);
        assert_eq!(
            packed.product(&a, rows),
            naive(&a, &w, rows, inputs, outputs)
        );
        assert_eq!(packed.unpacked(), w);
    }
}
