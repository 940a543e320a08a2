//! Exact nearest neighbours: unit vectors quantised to int8 (one scale per vector) in one dense
//! slot-indexed matrix, scanned by integer dot product. A quarter of the memory of `f32` and a
//! quarter of the bytes streamed per query, at a ranking cost well under the noise of the
//! embedders (see the tests). The scan is a tight loop the compiler vectorises; an approximate
//! index can replace `VectorStore::nearest` behind the same call.

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
        accept: impl Fn(u32) -> bool,
    ) -> Vec<(u32, f32)> {
        if query.len() != self.dim || self.dim == 0 || k == 0 {
            return Vec::new();
        }
        let query = quantise(query);
        let by_similarity =
            |a: &(u32, f32), b: &(u32, f32)| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0));
        // Keep at most a few k candidates: when the buffer fills, cut it to the best k and
        // raise the bar to the k-th similarity, so most rows fail on one comparison.
        let budget = k.saturating_mul(4).max(64);
        let mut bar = min_similarity;
        let mut found: Vec<(u32, f32)> = Vec::with_capacity(budget + 1);
        for (slot, (row, scale)) in self
            .codes
            .chunks_exact(self.dim)
            .zip(&self.scales)
            .enumerate()
        {
            let Some(scale) = scale else { continue };
            let similarity = dot_i8(row, &query.codes) as f32 * scale * query.scale;
            let slot = slot as u32;
            if similarity >= bar && accept(slot) {
                found.push((slot, similarity));
                if found.len() > budget {
                    found.select_nth_unstable_by(k - 1, by_similarity);
                    found.truncate(k);
                    bar = found.iter().fold(f32::INFINITY, |min, (_, s)| min.min(*s));
                }
            }
        }
        if found.len() > k {
            found.select_nth_unstable_by(k - 1, by_similarity);
            found.truncate(k);
        }
        found.sort_unstable_by(by_similarity);
        found
    }

    /// Bytes held, for memory reports.
    pub fn memory_bytes(&self) -> usize {
        self.codes.capacity() + self.scales.capacity() * std::mem::size_of::<Option<f32>>()
    }
}

/// Integer dot product in sixteen independent lanes so the compiler emits SIMD code. Each
/// product fits an `i16` (127² < 2¹⁵), which lets baseline x86-64 (SSE2, no 32-bit multiply)
/// use its 16-bit multiply-add.
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut lanes = [0i32; 16];
    let chunks_a = a.chunks_exact(16);
    let chunks_b = b.chunks_exact(16);
    let tail: i32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| i32::from(i16::from(*x) * i16::from(*y)))
        .sum();
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..16 {
            lanes[lane] += i32::from(i16::from(x[lane]) * i16::from(y[lane]));
        }
    }
    lanes.iter().sum::<i32>() + tail
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
