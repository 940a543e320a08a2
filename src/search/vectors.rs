//! Exact nearest neighbours: unit vectors quantised to int8 (one scale per vector) in one dense
//! slot-indexed matrix, scanned by integer dot product. A quarter of the memory of `f32` and a
//! quarter of the bytes streamed per query, at a ranking cost well under the noise of the
//! embedders (see the tests). The scan is a tight loop the compiler vectorises; an approximate
//! index can replace `VectorStore::nearest` behind the same call.

use std::ops::Range;

/// Unit vectors by slot, int8-quantised.
pub struct VectorStore {
    dim: usize,
    codes: Vec<i8>,
    /// Per slot: the factor that turns codes back into the vector; `None` for empty slots.
    scales: Vec<Option<f32>>,
}

/// A vector as int8 codes and the factor that scales them back.
struct Quantised {
    codes: Vec<i8>,
    scale: f32,
}

fn quantise(vector: &[f32]) -> Quantised {
    let max = vector.iter().fold(0.0f32, |max, x| max.max(x.abs()));
    let scale = if max > 0.0 && max.is_finite() {
        max / 127.0
    } else {
        1.0
    };
    let codes = vector
        .iter()
        .map(|x| (x / scale).round().clamp(-127.0, 127.0) as i8)
        .collect();
    Quantised { codes, scale }
}

/// Stores with at least this many slots are scanned on two cores.
const PARALLEL_ROWS: usize = 32_768;

/// The best `k` of `found`, most similar first; ties go to the lower slot.
fn best(mut found: Vec<(u32, f32)>, k: usize) -> Vec<(u32, f32)> {
    let by_similarity = |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
    if found.len() > k {
        found.select_nth_unstable_by(k - 1, by_similarity);
        found.truncate(k);
    }
    found.sort_unstable_by(by_similarity);
    found
}

impl VectorStore {
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            codes: Vec::new(),
            scales: Vec::new(),
        }
    }

    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Store `vector` at `slot`; a vector of the wrong dimension is dropped. A store made with
    /// dimension 0 (an embedder that learns its dimension from its first answer) adopts the
    /// dimension of the first vector.
    pub fn set(&mut self, slot: u32, vector: &[f32]) {
        let slot = slot as usize;
        if self.dim == 0 && !vector.is_empty() {
            self.dim = vector.len();
        }
        if vector.len() != self.dim {
            self.clear(slot as u32);
            return;
        }
        if self.scales.len() <= slot {
            self.scales.resize(slot + 1, None);
            self.codes.resize((slot + 1) * self.dim, 0);
        }
        let quantised = quantise(vector);
        self.codes[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(&quantised.codes);
        self.scales[slot] = Some(quantised.scale);
    }

    pub fn clear(&mut self, slot: u32) {
        if let Some(scale) = self.scales.get_mut(slot as usize) {
            *scale = None;
        }
    }

    /// The stored (dequantised) vector of `slot`.
    pub fn get(&self, slot: u32) -> Option<Vec<f32>> {
        let slot = slot as usize;
        let scale = self.scales.get(slot).copied().flatten()?;
        let codes = &self.codes[slot * self.dim..(slot + 1) * self.dim];
        Some(codes.iter().map(|c| f32::from(*c) * scale).collect())
    }

    /// The `k` stored vectors most similar to `query` (cosine, since vectors are unit length)
    /// among the slots `accept`ed, at least `min_similarity` similar, most similar first; ties
    /// go to the lower slot.
    pub fn nearest(
        &self,
        query: &[f32],
        k: usize,
        min_similarity: f32,
        accept: impl Fn(u32) -> bool + Sync,
    ) -> Vec<(u32, f32)> {
        if query.len() != self.dim || self.dim == 0 || k == 0 {
            return Vec::new();
        }
        let query = quantise(query);
        let rows = self.scales.len();
        if rows < PARALLEL_ROWS {
            return self.nearest_in(&query, 0..rows, k, min_similarity, &accept);
        }
        // A large store streams more bytes than one core can read quickly: scan its halves on
        // two cores (rayon's pool, sized to the machine) and keep the best of both.
        let middle = rows / 2;
        let (mut found, second) = rayon::join(
            || self.nearest_in(&query, 0..middle, k, min_similarity, &accept),
            || self.nearest_in(&query, middle..rows, k, min_similarity, &accept),
        );
        found.extend(second);
        best(found, k)
    }

    /// `nearest` over the slots in `rows`.
    fn nearest_in(
        &self,
        query: &Quantised,
        rows: Range<usize>,
        k: usize,
        min_similarity: f32,
        accept: &impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        #[cfg(target_arch = "x86_64")]
        if let (0, Some(v3)) = (self.dim % 16, pulp::x86::V3::try_new()) {
            let wide: Vec<[i16; 16]> = sixteens(&query.codes)
                .map(|chunk| chunk.map(i16::from))
                .collect();
            return v3.vectorize(Avx2Scan {
                store: self,
                v3,
                query: &wide,
                query_scale: query.scale,
                rows,
                k,
                min_similarity,
                accept,
            });
        }
        self.scan(query.scale, rows, k, min_similarity, accept, |row| {
            dot_i8(row, &query.codes)
        })
    }

    /// The exact scan behind `nearest`, with the dot product of a row and the query given.
    #[inline(always)]
    fn scan(
        &self,
        query_scale: f32,
        rows: Range<usize>,
        k: usize,
        min_similarity: f32,
        accept: &impl Fn(u32) -> bool,
        dot: impl Fn(&[i8]) -> i32,
    ) -> Vec<(u32, f32)> {
        // Keep at most a few k candidates: when the buffer fills, cut it to the best k and
        // raise the bar to the k-th similarity, so most rows fail on one comparison.
        let budget = k.saturating_mul(4).max(64);
        let mut bar = min_similarity;
        let mut found: Vec<(u32, f32)> = Vec::with_capacity(budget + 1);
        let codes = &self.codes[rows.start * self.dim..rows.end * self.dim];
        for ((row, scale), slot) in codes
            .chunks_exact(self.dim)
            .zip(&self.scales[rows.clone()])
            .zip(rows)
        {
            let Some(scale) = scale else { continue };
            let similarity = dot(row) as f32 * scale * query_scale;
            let slot = slot as u32;
            if similarity >= bar && accept(slot) {
                found.push((slot, similarity));
                if found.len() > budget {
                    found = best(found, k);
                    bar = found.last().map_or(bar, |(_, similarity)| *similarity);
                }
            }
        }
        best(found, k)
    }

    /// Bytes held, for memory reports.
    pub fn memory_bytes(&self) -> usize {
        self.codes.capacity() + self.scales.capacity() * std::mem::size_of::<Option<f32>>()
    }
}

/// One `nearest` call under AVX2, which most x86-64 servers have (detected at run time by
/// `pulp`, whose feature tokens make the intrinsics safe to call): each sixteen codes of a row
/// are widened to 16 bits and multiplied and pair-summed with the pre-widened query in one
/// instruction, four times fewer than the compiler's own vectorisation of `dot_i8` issues.
#[cfg(target_arch = "x86_64")]
struct Avx2Scan<'a, F> {
    store: &'a VectorStore,
    v3: pulp::x86::V3,
    query: &'a [[i16; 16]],
    query_scale: f32,
    rows: Range<usize>,
    k: usize,
    min_similarity: f32,
    accept: &'a F,
}

#[cfg(target_arch = "x86_64")]
impl<F: Fn(u32) -> bool> pulp::NullaryFnOnce for Avx2Scan<'_, F> {
    type Output = Vec<(u32, f32)>;

    #[inline(always)]
    fn call(self) -> Self::Output {
        let Self { v3, query, .. } = self;
        self.store.scan(
            self.query_scale,
            self.rows,
            self.k,
            self.min_similarity,
            self.accept,
            |row| dot_avx2(v3, row, query),
        )
    }
}

/// `dot_i8` for rows whose length is a multiple of 16, against a query widened to 16 bits.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn dot_avx2(v3: pulp::x86::V3, row: &[i8], query: &[[i16; 16]]) -> i32 {
    use pulp::bytemuck::cast;
    use std::arch::x86_64::__m256i;
    let mut sum: __m256i = v3.avx._mm256_setzero_si256();
    for (codes, wide_query) in sixteens(row).zip(query) {
        let wide_row = v3.avx2._mm256_cvtepi8_epi16(cast(codes));
        let products = v3.avx2._mm256_madd_epi16(wide_row, cast(*wide_query));
        sum = v3.avx2._mm256_add_epi32(sum, products);
    }
    cast::<__m256i, [i32; 8]>(sum).iter().sum()
}

/// The whole sixteens of `codes`, as arrays.
#[cfg(target_arch = "x86_64")]
fn sixteens(codes: &[i8]) -> impl Iterator<Item = [i8; 16]> + '_ {
    codes
        .chunks_exact(16)
        .filter_map(|chunk| <[i8; 16]>::try_from(chunk).ok())
}

/// Integer dot product, portable: the compiler vectorises it for the baseline instruction set.
#[inline(always)]
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::search::embed::dot;

    fn unit(values: &[f32]) -> Vec<f32> {
        let norm = dot(values, values).sqrt();
        values.iter().map(|x| x / norm).collect()
    }

    /// A deterministic pseudo-random unit vector.
    fn pseudo_random(seed: u32, dim: usize) -> Vec<f32> {
        let values: Vec<f32> = (0..dim)
            .map(|i| ((seed as f32 * 12.9898 + i as f32 * 78.233).sin() * 43_758.547).fract())
            .collect();
        unit(&values)
    }

    #[test]
    fn integer_dot_matches_the_naive_sum_for_any_length() {
        for len in [0, 1, 15, 16, 17, 33, 384] {
            let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as u8 as i8).collect();
            let b: Vec<i8> = (0..len).map(|i| ((i * 11) % 255) as u8 as i8).collect();
            let naive: i32 = a
                .iter()
                .zip(&b)
                .map(|(x, y)| i32::from(*x) * i32::from(*y))
                .sum();
            assert_eq!(dot_i8(&a, &b), naive, "len {len}");
        }
    }

    #[test]
    fn quantised_similarities_stay_within_a_hundredth_of_exact_ones() {
        let dim = 256;
        let mut store = VectorStore::new(dim);
        let vectors: Vec<Vec<f32>> = (0..200).map(|i| pseudo_random(i, dim)).collect();
        for (slot, vector) in vectors.iter().enumerate() {
            store.set(slot as u32, vector);
        }
        let query = pseudo_random(999, dim);
        for (slot, similarity) in store.nearest(&query, 200, -1.0, |_| true) {
            let exact = dot(&vectors[slot as usize], &query);
            assert!((similarity - exact).abs() < 0.01, "{similarity} vs {exact}");
        }
    }

    #[test]
    fn the_avx2_dot_product_equals_the_portable_one() {
        #[cfg(target_arch = "x86_64")]
        if let Some(v3) = pulp::x86::V3::try_new() {
            for len in [16, 32, 256, 384] {
                let a: Vec<i8> = (0..len).map(|i| ((i * 37) % 255) as u8 as i8).collect();
                let b: Vec<i8> = (0..len).map(|i| ((i * 11 + 3) % 255) as u8 as i8).collect();
                let wide: Vec<[i16; 16]> = sixteens(&b).map(|chunk| chunk.map(i16::from)).collect();
                let extreme = vec![-127i8; len];
                let wide_extreme = vec![[-127i16; 16]; len / 16];
                assert_eq!(dot_avx2(v3, &a, &wide), dot_i8(&a, &b), "len {len}");
                assert_eq!(
                    dot_avx2(v3, &extreme, &wide_extreme),
                    dot_i8(&extreme, &extreme)
                );
            }
        }
    }

    #[test]
    fn a_large_store_scanned_in_halves_finds_what_one_portable_scan_finds() {
        let dim = 32;
        let rows = PARALLEL_ROWS + 1_000;
        let mut store = VectorStore::new(dim);
        for slot in 0..rows {
            store.set(slot as u32, &pseudo_random(slot as u32, dim));
        }
        store.clear(7);
        let query = pseudo_random(123_456, dim);
        let accept = |slot: u32| slot % 3 != 0;
        let halves = store.nearest(&query, 50, -1.0, accept);
        let quantised = quantise(&query);
        let portable = store.scan(quantised.scale, 0..rows, 50, -1.0, &accept, |row| {
            dot_i8(row, &quantised.codes)
        });
        assert_eq!(halves.len(), 50);
        assert_eq!(halves, portable);
    }

    #[test]
    fn nearest_ranks_by_similarity_and_keeps_the_best_k() {
        let mut store = VectorStore::new(2);
        store.set(0, &unit(&[1.0, 0.0]));
        store.set(1, &unit(&[0.0, 1.0]));
        store.set(2, &unit(&[0.8, 0.6]));
        store.set(3, &unit(&[0.6, 0.8]));
        let slots = |found: Vec<(u32, f32)>| found.into_iter().map(|(s, _)| s).collect::<Vec<_>>();
        assert_eq!(
            slots(store.nearest(&[1.0, 0.0], 4, -1.0, |_| true)),
            [0, 2, 3, 1]
        );
        assert_eq!(slots(store.nearest(&[1.0, 0.0], 2, -1.0, |_| true)), [0, 2]);
        assert_eq!(
            slots(store.nearest(&[1.0, 0.0], 4, 0.5, |_| true)),
            [0, 2, 3]
        );
    }

    #[test]
    fn a_store_without_a_dimension_adopts_the_first_vectors() {
        let mut store = VectorStore::new(0);
        store.set(1, &[0.0, 1.0, 0.0]);
        assert_eq!(store.dim(), 3);
        store.set(2, &[1.0]);
        assert_eq!(store.get(2), None);
        let found = store.nearest(&[0.0, 1.0, 0.0], 10, 0.0, |_| true);
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].0, 1);
        assert!((found[0].1 - 1.0).abs() < 1e-6);
    }

    #[test]
    fn nearest_skips_cleared_rejected_and_missing_slots() {
        let mut store = VectorStore::new(2);
        store.set(0, &[1.0, 0.0]);
        store.set(2, &[0.0, 1.0]);
        store.set(3, &[0.6, 0.8]);
        store.clear(2);
        store.set(4, &[1.0]);
        let found = store.nearest(&[1.0, 0.0], 10, -1.0, |slot| slot != 3);
        assert_eq!(found.iter().map(|(s, _)| *s).collect::<Vec<_>>(), [0]);
        let kept = store.get(3).expect("slot 3");
        assert!((kept[0] - 0.6).abs() < 0.01 && (kept[1] - 0.8).abs() < 0.01);
        assert_eq!(store.get(4), None);
        assert!(store.nearest(&[1.0], 10, -1.0, |_| true).is_empty());
    }
}
