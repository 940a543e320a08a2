//! Exact nearest neighbours: unit vectors in one dense slot-indexed matrix, scanned by dot
//! product (cosine, since every vector is normalised). The scan is a tight loop the compiler
//! vectorises; an approximate index can replace `VectorStore::nearest` behind the same call.

/// Unit vectors by slot.
pub struct VectorStore {
    dim: usize,
    data: Vec<f32>,
    present: Vec<bool>,
}

impl VectorStore {
    pub fn new(dim: usize) -> Self {
        Self {
            dim,
            data: Vec::new(),
            present: Vec::new(),
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
        if self.present.len() <= slot {
            self.present.resize(slot + 1, false);
            self.data.resize((slot + 1) * self.dim, 0.0);
        }
        self.data[slot * self.dim..(slot + 1) * self.dim].copy_from_slice(vector);
        self.present[slot] = true;
    }

    pub fn clear(&mut self, slot: u32) {
        if let Some(present) = self.present.get_mut(slot as usize) {
            *present = false;
        }
    }

    pub fn get(&self, slot: u32) -> Option<&[f32]> {
        let slot = slot as usize;
        self.present
            .get(slot)
            .copied()
            .unwrap_or(false)
            .then(|| &self.data[slot * self.dim..(slot + 1) * self.dim])
    }

    /// Cosine similarity of `query` with every stored vector whose slot `accept`s, as
    /// `(slot, similarity)`, unordered.
    pub fn similarities(&self, query: &[f32], accept: impl Fn(u32) -> bool) -> Vec<(u32, f32)> {
        if query.len() != self.dim || self.dim == 0 {
            return Vec::new();
        }
        self.data
            .chunks_exact(self.dim)
            .zip(&self.present)
            .enumerate()
            .filter(|(slot, (_, present))| **present && accept(*slot as u32))
            .map(|(slot, (row, _))| (slot as u32, dot(row, query)))
            .collect()
    }

    /// Bytes held, for memory reports.
    pub fn memory_bytes(&self) -> usize {
        self.data.capacity() * std::mem::size_of::<f32>() + self.present.capacity()
    }
}

/// Dot product in eight independent lanes so the compiler emits SIMD code.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut lanes = [0.0f32; 8];
    let chunks_a = a.chunks_exact(8);
    let chunks_b = b.chunks_exact(8);
    let tail: f32 = chunks_a
        .remainder()
        .iter()
        .zip(chunks_b.remainder())
        .map(|(x, y)| x * y)
        .sum();
    for (x, y) in chunks_a.zip(chunks_b) {
        for lane in 0..8 {
            lanes[lane] += x[lane] * y[lane];
        }
    }
    lanes.iter().sum::<f32>() + tail
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_matches_the_naive_sum_for_any_length() {
        for len in [0, 1, 7, 8, 9, 31, 384] {
            let a: Vec<f32> = (0..len).map(|i| (i as f32 * 0.37).sin()).collect();
            let b: Vec<f32> = (0..len).map(|i| (i as f32 * 0.11).cos()).collect();
            let naive: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
            assert!((dot(&a, &b) - naive).abs() < 1e-4, "len {len}");
        }
    }

    #[test]
    fn a_store_without_a_dimension_adopts_the_first_vectors() {
        let mut store = VectorStore::new(0);
        store.set(1, &[0.0, 1.0, 0.0]);
        assert_eq!(store.dim(), 3);
        store.set(2, &[1.0]);
        assert_eq!(store.get(2), None);
        assert_eq!(
            store.similarities(&[0.0, 1.0, 0.0], |_| true),
            vec![(1, 1.0)]
        );
    }

    #[test]
    fn similarities_skip_cleared_rejected_and_missing_slots() {
        let mut store = VectorStore::new(2);
        store.set(0, &[1.0, 0.0]);
        store.set(2, &[0.0, 1.0]);
        store.set(3, &[0.6, 0.8]);
        store.clear(2);
        store.set(4, &[1.0]);
        let mut found = store.similarities(&[1.0, 0.0], |slot| slot != 3);
        found.sort_by_key(|(slot, _)| *slot);
        assert_eq!(found, vec![(0, 1.0)]);
        assert_eq!(store.get(3), Some(&[0.6, 0.8][..]));
        assert_eq!(store.get(4), None);
        assert!(store.similarities(&[1.0], |_| true).is_empty());
    }
}
