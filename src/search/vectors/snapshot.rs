//! A vector store on disk, so a restart loads its graph instead of rebuilding it (minutes at a
//! million agents).
//!
//! The file holds the store as it was (codes, scales, slot lists, the HNSW graph) and, for
//! every slot with a vector, the agent's id and the content hash of the text the vector was
//! made from. Loading maps each saved slot to the agent's slot in the new index when the agent
//! is still there with the same text, and drops the rest; agents written since the snapshot
//! was saved are thereby found and given their vectors anew. A file that is missing, of
//! another embedder or index configuration, truncated, or whose checksum fails is not used:
//! the store is built from scratch instead.
//!
//! Format (little-endian): magic, format version, the embedder id, the change-log position at
//! which the index was saved (informational), the store, the slot table, and a SHA-256 of
//! everything before it.

use std::io::{Read, Write};
use std::path::Path;

use super::hnsw::Graph;
use super::{IndexParams, NONE, VectorStore};

use crate::search::codec::{Decoded, Decoder, Encoder};

const MAGIC: &[u8; 8] = b"ARVECSNP";
const FORMAT: u32 = 1;

/// A snapshot as read, its vectors moved to the slots the caller placed them in.
pub struct Loaded {
    pub store: VectorStore,
    /// Saved slots placed, with their vectors.
    pub restored: usize,
    /// Saved slots not placed: their vectors were dropped.
    pub dropped: usize,
    pub change_seq: i64,
}

/// Every slot list refers to nodes and slots that exist, and none loops.
fn check_links(store: &VectorStore) -> Decoded<()> {
    let nodes = store.heads.len();
    let slots = store.slot_nodes.len();
    let within = |value: u32, bound: usize| value == NONE || (value as usize) < bound;
    if store.codes.len() != nodes * store.dim || store.scales.len() != nodes {
        return Err("codes or scales do not match the nodes".to_owned());
    }
    if store.next_slot.len() != slots {
        return Err("slot lists do not match the slots".to_owned());
    }
    if !store.heads.iter().all(|head| within(*head, slots))
        || !store.slot_nodes.iter().all(|node| within(*node, nodes))
        || !store.next_slot.iter().all(|next| within(*next, slots))
        || !store.free.iter().all(|node| (*node as usize) < nodes)
    {
        return Err("a link points past the end".to_owned());
    }
    let (mut live_nodes, mut live_slots) = (0, 0);
    for (node, head) in store.heads.iter().enumerate() {
        let mut slot = *head;
        if slot != NONE {
            live_nodes += 1;
        }
        while slot != NONE {
            if store.slot_nodes[slot as usize] != node as u32 || live_slots > slots {
                return Err("a slot list is inconsistent".to_owned());
            }
            live_slots += 1;
            slot = store.next_slot[slot as usize];
        }
    }
    if live_nodes != store.live_nodes || live_slots != store.live_slots {
        return Err("the live counts do not match the lists".to_owned());
    }
    if store
        .graph
        .as_ref()
        .is_some_and(|graph| graph.nodes() > nodes)
    {
        return Err("the graph has more nodes than the store".to_owned());
    }
    Ok(())
}

fn write_params<W: Write>(out: &mut Encoder<W>, params: &IndexParams) -> std::io::Result<()> {
    let graph = &params.graph;
    out.len(graph.m)?;
    out.len(graph.ef_construction)?;
    out.f32(graph.alpha)?;
    out.u8(u8::from(graph.keep_pruned))?;
    out.u64(graph.seed)
}

fn same_params<R: Read>(input: &mut Decoder<R>, params: &IndexParams) -> Decoded<bool> {
    let graph = &params.graph;
    let saved = (
        input.u64()?,
        input.u64()?,
        input.f32()?,
        input.u8()? == 1,
        input.u64()?,
    );
    Ok(saved
        == (
            graph.m as u64,
            graph.ef_construction as u64,
            graph.alpha,
            graph.keep_pruned,
            graph.seed,
        ))
}

impl VectorStore {
    /// Save the store to `path` (through a temporary file renamed into place, so a reader never
    /// sees half a file), with `keys(slot)` naming the agent and content hash of each slot that
    /// holds a vector.
    pub fn save(
        &self,
        path: &Path,
        embedder_id: &str,
        change_seq: i64,
        keys: impl Fn(u32) -> Option<(String, String)>,
    ) -> std::io::Result<()> {
        let (mut out, partial) = Encoder::create(path)?;
        out.bytes(MAGIC)?;
        out.u32(FORMAT)?;
        out.str(embedder_id)?;
        out.u64(change_seq as u64)?;
        out.len(self.dim)?;
        out.u8(u8::from(self.graph_wanted))?;
        write_params(&mut out, &self.params)?;
        out.i8s(&self.codes)?;
        out.f32s(&self.scales)?;
        out.u32s(&self.heads)?;
        out.u32s(&self.free)?;
        out.len(self.live_nodes)?;
        out.u32s(&self.slot_nodes)?;
        out.u32s(&self.next_slot)?;
        out.len(self.live_slots)?;
        match &self.graph {
            None => out.u8(0)?,
            Some(graph) => {
                out.u8(1)?;
                graph.write(&mut out)?;
            }
        }
        // The table is written as it is made, not held whole (a million keys), so the slots
        // are walked twice: to count the keyed ones, then to write them.
        let held = || {
            (0..self.slot_nodes.len() as u32)
                .filter(|slot| self.slot_nodes[*slot as usize] != NONE)
                .filter_map(|slot| Some((slot, keys(slot)?)))
        };
        out.len(held().count())?;
        for (slot, (agent_id, content_hash)) in held() {
            out.u32(slot)?;
            out.str(&agent_id)?;
            out.str(&content_hash)?;
        }
        out.finish(&partial, path)
    }

    /// Read a snapshot saved by `save` for `embedder_id`, if it was made with the same
    /// dimension and index parameters as `like`, moving each saved slot's vector to the slot
    /// `place(saved slot, agent id, content hash)` gives it (dropped where it gives none). The
    /// saved keys are placed as they are read, never held all at once. `Err` says why the file
    /// cannot be used.
    pub fn load(
        path: &Path,
        embedder_id: &str,
        like: &VectorStore,
        mut place: impl FnMut(u32, &str, &str) -> Option<u32>,
    ) -> Decoded<Loaded> {
        let mut input = Decoder::open(path)?;
        let mut magic = [0u8; 8];
        input.fill(&mut magic)?;
        if &magic != MAGIC || input.u32()? != FORMAT {
            return Err("not a vector snapshot of this format".to_owned());
        }
        let saved_embedder = input.str()?;
        if saved_embedder != embedder_id {
            return Err(format!("made with embedder {saved_embedder}"));
        }
        let change_seq = input.u64()? as i64;
        let dim = input.len()?;
        let graph_wanted = input.u8()? == 1;
        if (like.dim != 0 && dim != like.dim)
            || graph_wanted != like.graph_wanted
            || !same_params(&mut input, &like.params)?
        {
            return Err("made with another dimension or index configuration".to_owned());
        }
        let mut store = like.empty_like();
        store.dim = dim;
        store.codes = input.i8s()?;
        store.scales = input.f32s()?;
        store.heads = input.u32s()?;
        store.free = input.u32s()?;
        store.live_nodes = input.len()?;
        store.slot_nodes = input.u32s()?;
        store.next_slot = input.u32s()?;
        store.live_slots = input.len()?;
        store.graph = match input.u8()? {
            0 => None,
            _ => Some(Graph::read(&mut input, like.params.graph)?),
        };
        check_links(&store)?;
        // Where each saved slot goes (`NONE`: nowhere), and which the table has named.
        let mut moves = vec![NONE; store.slot_nodes.len()];
        let mut named = vec![false; store.slot_nodes.len()];
        for _ in 0..input.len()? {
            let slot = input.u32()?;
            let agent_id = input.str()?;
            let content_hash = input.str()?;
            let index = slot as usize;
            if store.slot_nodes.get(index).is_none_or(|n| *n == NONE) {
                return Err("the slot table names a slot without a vector".to_owned());
            }
            if std::mem::replace(&mut named[index], true) {
                return Err(format!("the slot table names slot {slot} twice"));
            }
            moves[index] = place(slot, &agent_id, &content_hash).unwrap_or(NONE);
        }
        input.finish()?;
        drop(named);
        let saved = store.live_slots;
        store.relabel(|slot| moves.get(slot as usize).copied().filter(|to| *to != NONE));
        Ok(Loaded {
            restored: store.live_slots,
            dropped: saved - store.live_slots,
            store,
            change_seq,
        })
    }

    /// Whether `slot` holds a vector.
    pub fn holds(&self, slot: u32) -> bool {
        self.slot_nodes
            .get(slot as usize)
            .is_some_and(|node| *node != NONE)
    }

    /// Move every slot's vector to slot `map(slot)`; slots mapped to `None` lose their vector
    /// (a node left with no slot stays in the graph as a way through, as after `clear`).
    pub fn relabel(&mut self, map: impl Fn(u32) -> Option<u32>) {
        let old: Vec<(u32, u32)> = (0..self.slot_nodes.len() as u32)
            .filter_map(|slot| {
                let node = self.slot_nodes[slot as usize];
                (node != NONE).then_some((slot, node))
            })
            .collect();
        for (slot, _) in &old {
            if map(*slot).is_none() {
                self.clear(*slot);
            }
        }
        let kept: Vec<(u32, u32)> = old
            .into_iter()
            .filter_map(|(slot, node)| {
                let new = map(slot)?;
                // Only slots whose node survived the clears above.
                (self.slot_nodes[slot as usize] == node).then_some((new, node))
            })
            .collect();
        for head in &mut self.heads {
            *head = NONE;
        }
        let size = kept
            .iter()
            .map(|(slot, _)| *slot as usize + 1)
            .max()
            .unwrap_or(0);
        self.slot_nodes = vec![NONE; size];
        self.next_slot = vec![NONE; size];
        self.live_slots = 0;
        for (slot, node) in kept {
            let index = slot as usize;
            if self.slot_nodes[index] != NONE {
                continue;
            }
            self.next_slot[index] = self.heads[node as usize];
            self.heads[node as usize] = slot;
            self.slot_nodes[index] = node;
            self.live_slots += 1;
        }
        // Nodes whose slots all moved away already were cleared; recount what holds a slot.
        self.live_nodes = self.heads.iter().filter(|head| **head != NONE).count();
    }
}

#[cfg(test)]
mod tests {
    use super::super::{GraphParams, QueryParams};
    use super::*;

    fn params() -> IndexParams {
        IndexParams {
            graph: GraphParams {
                m: 8,
                ef_construction: 40,
                alpha: 1.0,
                keep_pruned: true,
                seed: 7,
            },
            query: QueryParams {
                ef_search: 64,
                wider_from: usize::MAX,
                // A graph from the first vector on, so the snapshot carries one.
                exact_below: 1,
                filtered_exact_below: 0,
            },
        }
    }

    fn vector(seed: u64, dim: usize) -> Vec<f32> {
        let mut state = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let raw: Vec<f32> = (0..dim)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % 2_000) as f32 / 1_000.0 - 1.0
            })
            .collect();
        let norm = raw.iter().map(|x| x * x).sum::<f32>().sqrt().max(1e-6);
        raw.into_iter().map(|x| x / norm).collect()
    }

    fn store_of(count: u32) -> VectorStore {
        let mut store = VectorStore::with_params(16, Some(params()));
        for slot in 0..count {
            store.set(slot, &vector(u64::from(slot), 16));
        }
        // Some churn: a changed vector and a cleared slot leave dead nodes behind.
        store.set(3, &vector(1_003, 16));
        store.clear(5);
        store
    }

    fn key(slot: u32) -> Option<(String, String)> {
        Some((format!("agt_{slot}"), format!("hash{slot}")))
    }

    /// Every saved slot stays where it was.
    fn same(slot: u32, _: &str, _: &str) -> Option<u32> {
        Some(slot)
    }

    fn nearest(store: &VectorStore, seed: u64) -> Vec<(u32, f32)> {
        store.nearest(&vector(seed, 16), 10, -1.0, |_| true)
    }

    #[test]
    fn a_saved_store_loads_back_and_answers_the_same() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("vectors.snapshot");
        let store = store_of(300);
        assert!(store.graph.is_some());
        store.save(&path, "static@1", 42, key).expect("save");
        let mut keys_seen = 0;
        let loaded = VectorStore::load(&path, "static@1", &store.empty_like(), |slot, id, hash| {
            keys_seen += 1;
            assert_eq!(
                (id, hash),
                (&*format!("agt_{slot}"), &*format!("hash{slot}"))
            );
            Some(slot)
        })
        .expect("load");
        assert_eq!(loaded.change_seq, 42);
        assert_eq!(keys_seen, 299);
        assert_eq!((loaded.restored, loaded.dropped), (299, 0));
        assert_eq!(loaded.store.len(), store.len());
        assert_eq!(loaded.store.distinct(), store.distinct());
        for seed in 10_000..10_020 {
            assert_eq!(nearest(&loaded.store, seed), nearest(&store, seed));
        }
        // It goes on as a live store.
        let mut loaded = loaded.store;
        loaded.set(400, &vector(9_999, 16));
        assert_eq!(nearest(&loaded, 9_999)[0].0, 400);
    }

    #[test]
    fn a_load_moves_each_saved_slot_where_it_is_placed_and_drops_the_unplaced() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("vectors.snapshot");
        let store = store_of(200);
        store.save(&path, "static@1", 1, key).expect("save");
        // Every tenth agent is gone; the others moved up by 1,000.
        let place =
            |slot: u32, _: &str, _: &str| (!slot.is_multiple_of(10)).then_some(slot + 1_000);
        let loaded =
            VectorStore::load(&path, "static@1", &store.empty_like(), place).expect("load");
        // 199 saved (slot 5 was cleared), 20 of them on a multiple of ten.
        assert_eq!((loaded.restored, loaded.dropped), (179, 20));
        assert_eq!(loaded.store.len(), 179);
        assert_eq!(loaded.store.get(1_011), store.get(11));
        assert!(loaded.store.holds(1_011) && !loaded.store.holds(11));
        assert!(!loaded.store.holds(1_010) && !loaded.store.holds(1_005));
        let found = loaded.store.nearest(&vector(42, 16), 1, -1.0, |_| true);
        assert_eq!(found[0].0, 1_042);
    }

    #[test]
    fn relabelled_slots_keep_their_vectors_and_unmapped_ones_lose_them() {
        let mut store = store_of(100);
        let before = store.get(10).expect("vector");
        // Slots move up by 1,000; slot 20 is dropped.
        store.relabel(|slot| (slot != 20).then_some(slot + 1_000));
        assert_eq!(store.get(10), None);
        assert_eq!(store.get(1_010), Some(before));
        assert_eq!(store.get(1_020), None);
        assert_eq!(store.len(), 98);
        let found = store.nearest(&vector(42, 16), 1, -1.0, |_| true);
        assert_eq!(found[0].0, 1_042);
    }

    #[test]
    fn damaged_or_foreign_snapshots_are_refused() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("vectors.snapshot");
        let store = store_of(120);
        store.save(&path, "static@1", 1, key).expect("save");
        let like = store.empty_like();
        let other = VectorStore::load(&path, "minilm@1", &like, same)
            .err()
            .expect("embedder");
        assert!(other.contains("embedder"), "{other}");
        let mut wider = params();
        wider.graph.m = 12;
        let unlike = VectorStore::with_params(16, Some(wider));
        assert!(VectorStore::load(&path, "static@1", &unlike, same).is_err());
        let bytes = std::fs::read(&path).expect("read");
        let mut flipped = bytes.clone();
        let middle = flipped.len() / 2;
        flipped[middle] ^= 0x40;
        std::fs::write(&path, &flipped).expect("write");
        assert!(VectorStore::load(&path, "static@1", &like, same).is_err());
        std::fs::write(&path, &bytes[..bytes.len() - 40]).expect("write");
        assert!(VectorStore::load(&path, "static@1", &like, same).is_err());
        std::fs::write(&path, b"not a snapshot").expect("write");
        assert!(VectorStore::load(&path, "static@1", &like, same).is_err());
        assert!(VectorStore::load(&dir.path().join("absent"), "static@1", &like, same).is_err());
    }
}
