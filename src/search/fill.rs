//! Every agent's vector: restored from the vector snapshot or the store when its text is
//! unchanged, the rest embedded in batches and stored; and the vector graph, built aside once
//! the catalogue is large enough for one.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::SearchIndex;
use super::catalog::{ContentHash, Doc, Read, doc_text, embedding_text};
use super::vectors::VectorStore;
use crate::embed::Embedder;
use crate::store::{Agent, StoredEmbedding};

/// Agents embedded per embedder call at start-up.
const EMBED_BATCH: usize = 64;

/// Where `fill_vectors` reads the text of the agents it embeds (the index keeps none).
pub(super) enum Texts<'a> {
    /// The store, by id.
    Store,
    /// The agents `rebuild` was given, by id (they need not be in the store).
    Given(HashMap<&'a str, &'a Agent>),
}

/// Where a vector snapshot's saved slot goes among the documents `by_slot`: the slot of the
/// same agent, if its text is the one the vector was made from. A restart from the keyword
/// snapshot keeps every agent's slot, so the saved slot is nearly always the one; the others
/// are looked up by id, in a table sorted on the first miss.
pub(super) fn place_saved(
    by_slot: &[Option<Arc<Doc>>],
) -> impl FnMut(u32, &str, &str) -> Option<u32> + '_ {
    let mut by_id: Option<Vec<(&str, u32)>> = None;
    move |saved, agent_id, content_hash| {
        let slot = match by_slot.get(saved as usize).and_then(Option::as_ref) {
            Some(doc) if &*doc.id == agent_id => saved,
            _ => {
                let ids = by_id.get_or_insert_with(|| {
                    let mut ids: Vec<(&str, u32)> = by_slot
                        .iter()
                        .enumerate()
                        .filter_map(|(slot, doc)| Some((&*doc.as_ref()?.id, slot as u32)))
                        .collect();
                    ids.sort_unstable();
                    ids
                });
                let at = ids.binary_search_by(|(id, _)| (*id).cmp(agent_id)).ok()?;
                ids[at].1
            }
        };
        let doc = by_slot.get(slot as usize)?.as_ref()?;
        doc.content_hash.is(content_hash).then_some(slot)
    }
}

impl SearchIndex {
    /// Give every indexed agent its vector: stored ones whose content hash still matches, the
    /// rest embedded (in batches) and saved. Then intent ranking joins.
    ///
    /// The vector index (at scale, an HNSW graph: minutes at a million agents) is built beside
    /// the serving one, outside the catalog's lock, so searches go on meanwhile; writes landing
    /// in between are noted by slot and carried over when the new index is swapped in.
    pub async fn fill_vectors(&self) -> anyhow::Result<()> {
        self.fill_vectors_from(&Texts::Store).await
    }

    /// `fill_vectors`, reading the texts to embed from `texts`.
    pub(super) async fn fill_vectors_from(&self, texts: &Texts<'_>) -> anyhow::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let _fill = self.fills.lock().await;
        let Some(embedder) = self.embedder() else {
            self.vectors_ready.store(true, Relaxed);
            return Ok(());
        };
        let (by_slot, template) = {
            let mut catalog = self.write_catalog();
            catalog.filling = Some(HashSet::new());
            (
                catalog.docs.clone(),
                catalog.vectors.as_ref().map(VectorStore::empty_like),
            )
        };
        let built = match template {
            Some(template) => {
                self.restore_and_build(embedder.as_ref(), by_slot, template, texts)
                    .await
            }
            None => Ok(None),
        };
        let mut catalog = self.write_catalog();
        let written = catalog.filling.take().unwrap_or_default();
        let mut fresh = match built {
            Ok(Some(fresh)) => fresh,
            Ok(None) => {
                drop(catalog);
                self.vectors_ready.store(true, Relaxed);
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        if let Some(serving) = &catalog.vectors {
            for slot in written {
                match serving.get(slot) {
                    Some(vector) => fresh.set(slot, &vector),
                    None => fresh.clear(slot),
                }
            }
        }
        fresh.defer_graph();
        catalog.vectors = Some(fresh);
        catalog.vectors_generation += 1;
        drop(catalog);
        self.vectors_ready.store(true, Relaxed);
        Ok(())
    }

    /// The vector index over the documents `by_slot` (the catalog's, as they were when the
    /// fill began): the snapshot's vectors for agents whose text has not changed since it was
    /// saved, then `build_vectors` for the rest; a new snapshot is saved when anything had to
    /// be added or dropped.
    async fn restore_and_build(
        &self,
        embedder: &dyn Embedder,
        by_slot: Vec<Option<Arc<Doc>>>,
        template: VectorStore,
        texts: &Texts<'_>,
    ) -> anyhow::Result<Option<VectorStore>> {
        use std::sync::atomic::Ordering::Relaxed;
        let docs: Vec<(u32, Arc<Doc>)> = by_slot
            .iter()
            .enumerate()
            .filter_map(|(slot, doc)| Some((slot as u32, Arc::clone(doc.as_ref()?))))
            .collect();
        let Some(path) = self.snapshot_path(embedder.id()) else {
            return self.build_vectors(embedder, docs, template, texts).await;
        };
        let change_seq = self.store.latest_change().await?;
        // `by_slot` places the snapshot's vectors, and keys a new snapshot.
        let started = std::time::Instant::now();
        let (loaded, by_slot) = {
            let (path, embedder_id) = (path.clone(), embedder.id().to_owned());
            let like = template.empty_like();
            tokio::task::spawn_blocking(move || {
                let loaded = VectorStore::load(&path, &embedder_id, &like, place_saved(&by_slot));
                (loaded, by_slot)
            })
            .await
            .map_err(|err| anyhow::anyhow!("reading the vector snapshot failed: {err}"))?
        };
        let (mut fresh, rest, dropped) = match loaded {
            Ok(loaded) => {
                let rest: Vec<(u32, Arc<Doc>)> = docs
                    .into_iter()
                    .filter(|(slot, _)| !loaded.store.holds(*slot))
                    .collect();
                self.vectors_filled.fetch_add(loaded.restored, Relaxed);
                tracing::info!(
                    restored = loaded.restored,
                    to_add = rest.len(),
                    dropped = loaded.dropped,
                    saved_at_change = loaded.change_seq,
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "vector index restored from its snapshot"
                );
                (loaded.store, rest, loaded.dropped)
            }
            Err(reason) => {
                if path.exists() {
                    tracing::warn!(%reason, path = %path.display(), "vector snapshot not used; building the index");
                }
                (template, docs, 0)
            }
        };
        let changed = !rest.is_empty() || dropped > 0 || !path.exists();
        fresh = match self.build_vectors(embedder, rest, fresh, texts).await? {
            Some(fresh) => fresh,
            None => return Ok(None),
        };
        if changed {
            let embedder_id = embedder.id().to_owned();
            let saved = tokio::task::spawn_blocking(move || {
                let key = |slot: u32| {
                    let doc = by_slot.get(slot as usize)?.as_ref()?;
                    Some((doc.id.to_string(), doc.content_hash.hex()))
                };
                let result = fresh.save(&path, &embedder_id, change_seq, key);
                (fresh, result, path)
            })
            .await
            .map_err(|err| anyhow::anyhow!("writing the vector snapshot failed: {err}"))?;
            fresh = saved.0;
            match saved.1 {
                Ok(()) => tracing::info!(path = %saved.2.display(), "vector snapshot saved"),
                Err(err) => tracing::warn!(error = %err, "cannot save the vector snapshot"),
            }
        }
        Ok(Some(fresh))
    }

    /// A vector index over `docs` (slot and document), started from the empty `fresh`: stored
    /// vectors whose content hash matches, the rest embedded and saved. Built on the blocking
    /// pool, never under the catalog's lock.
    async fn build_vectors(
        &self,
        embedder: &dyn Embedder,
        docs: Vec<(u32, Arc<Doc>)>,
        mut fresh: VectorStore,
        texts: &Texts<'_>,
    ) -> anyhow::Result<Option<VectorStore>> {
        use std::sync::atomic::Ordering::Relaxed;
        let usable = |doc: &Doc, stored: &StoredEmbedding| {
            doc.content_hash.is(&stored.content_hash)
                && (embedder.dim() == 0 || stored.vector.len() == embedder.dim())
        };
        // Stored vectors whose agent's text is unchanged go in as they are read: a few agents'
        // (those a snapshot lacked) one by one; many agents', a page of every stored vector
        // at a time (all at once, a million of them would take gigabytes as `f32`s).
        let mut missing = Vec::new();
        if docs.len() < LOOKUPS_ONE_BY_ONE {
            let mut current = Vec::new();
            for (slot, doc) in docs {
                match self.store.find_embedding(&doc.id, embedder.id()).await? {
                    Some(stored) if usable(&doc, &stored) => current.push((slot, stored.vector)),
                    _ => missing.push((slot, doc)),
                }
            }
            let added = current.len();
            fresh = add_vectors(fresh, current).await?;
            self.vectors_filled.fetch_add(added, Relaxed);
        } else {
            let mut docs = docs;
            docs.sort_unstable_by(|(_, a), (_, b)| a.id.cmp(&b.id));
            let mut found = vec![false; docs.len()];
            let mut after: Option<String> = None;
            loop {
                let page = self
                    .store
                    .embeddings_page(embedder.id(), after.as_deref(), STORED_PAGE)
                    .await?;
                let full = page.len() == STORED_PAGE as usize;
                after = page.last().map(|stored| stored.agent_id.clone());
                let mut current = Vec::with_capacity(page.len());
                for stored in page {
                    let Ok(at) = docs.binary_search_by(|(_, doc)| (*doc.id).cmp(&stored.agent_id))
                    else {
                        continue;
                    };
                    let (slot, doc) = &docs[at];
                    if usable(doc, &stored) {
                        found[at] = true;
                        current.push((*slot, stored.vector));
                    }
                }
                let added = current.len();
                fresh = add_vectors(fresh, current).await?;
                self.vectors_filled.fetch_add(added, Relaxed);
                if !full {
                    break;
                }
            }
            missing.extend(
                docs.into_iter()
                    .zip(found)
                    .filter_map(|(doc, found)| (!found).then_some(doc)),
            );
            missing.sort_unstable_by_key(|(slot, _)| *slot);
        }
        if !missing.is_empty() {
            tracing::info!(
                embedder = embedder.id(),
                stored = self.vectors_filled.load(Relaxed),
                to_embed = missing.len(),
                "embedding agents; searches rank without their vectors until they are done"
            );
        }
        let started = std::time::Instant::now();
        let mut reported = started;
        for (done, batch) in missing.chunks(EMBED_BATCH).enumerate() {
            // The index keeps no text: it is read again. An agent whose text changed since
            // it was catalogued is left out; applying its newer version embeds it.
            let (batch, batch_texts) = self.texts_of(batch, texts).await?;
            if batch.is_empty() {
                continue;
            }
            let vectors = embedder.embed(&batch_texts).await?;
            let fresh_embeddings: Vec<StoredEmbedding> = batch
                .iter()
                .zip(vectors)
                .map(|((_, doc), vector)| StoredEmbedding {
                    agent_id: doc.id.to_string(),
                    content_hash: doc.content_hash.hex(),
                    vector,
                })
                .collect();
            self.store
                .save_embeddings(embedder.id(), &fresh_embeddings)
                .await?;
            let slotted: Vec<(u32, Vec<f32>)> = batch
                .iter()
                .zip(fresh_embeddings)
                .map(|((slot, _), embedding)| (*slot, embedding.vector))
                .collect();
            fresh = add_vectors(fresh, slotted).await?;
            self.vectors_filled.fetch_add(batch.len(), Relaxed);
            if reported.elapsed() >= std::time::Duration::from_secs(10) {
                reported = std::time::Instant::now();
                tracing::info!(
                    embedded = (done + 1) * EMBED_BATCH,
                    of = missing.len(),
                    "embedding agents"
                );
            }
        }
        if !missing.is_empty() {
            tracing::info!(
                embedded = missing.len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "every agent has its vector; intent ranking is on"
            );
        }
        Ok(Some(fresh))
    }

    /// The embedding texts of `docs`, read from the store, for those whose text is still the
    /// one catalogued (same content hash); the others are left out.
    async fn texts_of(
        &self,
        docs: &[(u32, Arc<Doc>)],
        source: &Texts<'_>,
    ) -> anyhow::Result<(Vec<(u32, Arc<Doc>)>, Vec<String>)> {
        let text = |agent: &Agent| (agent.id.clone(), embedding_text(&doc_text(agent)));
        let mut texts: HashMap<String, String> = match source {
            Texts::Store => {
                let ids: Vec<String> = docs.iter().map(|(_, doc)| doc.id.to_string()).collect();
                self.store
                    .find_agents_by_id(&ids)
                    .await?
                    .iter()
                    .map(text)
                    .collect()
            }
            Texts::Given(agents) => docs
                .iter()
                .filter_map(|(_, doc)| agents.get(&*doc.id).map(|agent| text(agent)))
                .collect(),
        };
        let mut kept = Vec::with_capacity(docs.len());
        let mut kept_texts = Vec::with_capacity(docs.len());
        for (slot, doc) in docs {
            let Some(text) = texts.remove(&*doc.id) else {
                continue;
            };
            if ContentHash::of(&text) == doc.content_hash {
                kept.push((*slot, Arc::clone(doc)));
                kept_texts.push(text);
            }
        }
        Ok((kept, kept_texts))
    }

    /// The catalogue has grown to the size that wants a vector graph: build it on a copy of the
    /// store, outside the catalog's lock, and swap it in. The caller holds `writes`, so no write
    /// lands in between; searches go on with the exact scan meanwhile.
    pub(super) async fn build_graph_aside(&self) {
        let (copy, generation) = {
            let catalog = self.read_catalog();
            let copy = catalog
                .vectors
                .as_ref()
                .and_then(VectorStore::copy_without_graph);
            (copy, catalog.vectors_generation)
        };
        let Some(copy) = copy else {
            return;
        };
        let started = std::time::Instant::now();
        let built = tokio::task::spawn_blocking(move || {
            let mut copy = copy;
            copy.build_graph();
            copy
        })
        .await;
        match built {
            Ok(built) => {
                tracing::info!(
                    vectors = built.distinct(),
                    elapsed_ms = started.elapsed().as_millis() as u64,
                    "vector graph built"
                );
                let mut catalog = self.write_catalog();
                // A start-up fill that swapped in its own store meanwhile wins; its store
                // builds its graph itself.
                if catalog.vectors_generation == generation {
                    catalog.vectors = Some(built);
                }
            }
            Err(err) => tracing::error!(error = %err, "cannot build the vector graph"),
        }
    }

    /// Rank by `embedder` from now on. Every agent's vector by it is restored (its snapshot,
    /// the store) or computed beside the serving ones, while searches and writes go on with
    /// the embedder in use; then the writes that landed meanwhile are embedded again, and the
    /// embedder and its vectors replace the old ones at once, writes held for that moment.
    pub async fn switch_embedder(&self, embedder: Arc<dyn Embedder>) -> anyhow::Result<()> {
        use std::sync::atomic::Ordering::Relaxed;
        let _fill = self.fills.lock().await;
        let by_slot = {
            let mut catalog = self.write_catalog();
            catalog.filling = Some(HashSet::new());
            catalog.docs.clone()
        };
        self.vectors_filled.store(0, Relaxed);
        let built = self
            .restore_and_build(
                embedder.as_ref(),
                by_slot,
                serving_store(embedder.dim()),
                &Texts::Store,
            )
            .await;
        let mut fresh = match built {
            Ok(Some(fresh)) => fresh,
            failed => {
                self.write_catalog().filling = None;
                failed?;
                anyhow::bail!("no vector store was built for {}", embedder.id());
            }
        };
        let _writes = self.writes.lock().await;
        let written: Vec<(u32, Option<Arc<Doc>>)> = {
            let mut catalog = self.write_catalog();
            let written = catalog.filling.take().unwrap_or_default();
            written
                .into_iter()
                .map(|slot| (slot, catalog.doc(slot).map(Arc::clone)))
                .collect()
        };
        for (slot, _) in &written {
            fresh.clear(*slot);
        }
        let again: Vec<(u32, Arc<Doc>)> = written
            .into_iter()
            .filter_map(|(slot, doc)| Some((slot, doc?)))
            .collect();
        let again_count = again.len();
        let mut fresh = match self
            .build_vectors(embedder.as_ref(), again, fresh, &Texts::Store)
            .await?
        {
            Some(fresh) => fresh,
            None => anyhow::bail!("no vector store was built for {}", embedder.id()),
        };
        fresh.defer_graph();
        let graph_due = {
            let mut catalog = self.write_catalog();
            catalog.vectors = Some(fresh);
            catalog.vectors_generation += 1;
            *self
                .embedder
                .write()
                .unwrap_or_else(|poison| poison.into_inner()) = Some(Arc::clone(&embedder));
            catalog.vectors.as_ref().is_some_and(VectorStore::graph_due)
        };
        self.vectors_ready.store(true, Relaxed);
        tracing::info!(
            embedder = embedder.id(),
            dim = embedder.dim(),
            written_meanwhile = again_count,
            "switched the embedder"
        );
        if graph_due {
            self.build_graph_aside().await;
        }
        Ok(())
    }

    /// The vectors of `docs` by `embedder` (see `vector_for`), the missing ones embedded in
    /// batches; none without an embedder.
    pub(super) async fn vectors_for(
        &self,
        embedder: Option<&Arc<dyn Embedder>>,
        docs: &[Read],
    ) -> Vec<Option<Vec<f32>>> {
        let Some(embedder) = embedder else {
            return vec![None; docs.len()];
        };
        let mut vectors = Vec::with_capacity(docs.len());
        let mut missing = Vec::new();
        for (i, (doc, _)) in docs.iter().enumerate() {
            let known = {
                let catalog = self.read_catalog();
                catalog.slots.get(&doc.id).and_then(|slot| {
                    let same = catalog
                        .doc(*slot)
                        .is_some_and(|d| d.content_hash == doc.content_hash);
                    same.then(|| catalog.vectors.as_ref()?.get(*slot)).flatten()
                })
            };
            let known = match known {
                Some(vector) => Some(vector),
                None => match self.store.find_embedding(&doc.id, embedder.id()).await {
                    Ok(Some(stored)) if doc.content_hash.is(&stored.content_hash) => {
                        Some(stored.vector)
                    }
                    _ => None,
                },
            };
            if known.is_none() {
                missing.push(i);
            }
            vectors.push(known);
        }
        for chunk in missing.chunks(EMBED_BATCH) {
            let texts: Vec<String> = chunk.iter().map(|&i| embedding_text(&docs[i].1)).collect();
            let embedded = match embedder.embed(&texts).await {
                Ok(embedded) if embedded.len() == chunk.len() => embedded,
                Ok(_) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, "cannot embed agents; keyword search only");
                    continue;
                }
            };
            let fresh: Vec<StoredEmbedding> = chunk
                .iter()
                .zip(embedded)
                .map(|(&i, vector)| StoredEmbedding {
                    agent_id: docs[i].0.id.to_string(),
                    content_hash: docs[i].0.content_hash.hex(),
                    vector,
                })
                .collect();
            if let Err(err) = self.store.save_embeddings(embedder.id(), &fresh).await {
                tracing::warn!(error = %err, "cannot store embeddings");
            }
            for (&i, stored) in chunk.iter().zip(fresh) {
                vectors[i] = Some(stored.vector);
            }
        }
        vectors
    }
}

/// The vector store a serving index writes into: it leaves the graph's one-off build to
/// `build_graph_aside`, which runs it outside the catalog's lock.
pub(super) fn serving_store(dim: usize) -> VectorStore {
    let mut store = VectorStore::new(dim);
    store.defer_graph();
    store
}

/// Below this many agents without a vector, their stored vectors are read one by one rather
/// than page by page through every stored vector. (Tests take both ways with a few agents.)
pub(super) const LOOKUPS_ONE_BY_ONE: usize = if cfg!(test) { 5 } else { 2_000 };

/// Stored vectors read (and added to a starting index) per page: a few megabytes of `f32`s.
pub(super) const STORED_PAGE: u32 = if cfg!(test) { 4 } else { 4_096 };

/// `store` with `vectors` set, on the blocking pool: inserting into a graph is CPU work that
/// must not hold up the runtime's threads.
async fn add_vectors(
    store: VectorStore,
    vectors: Vec<(u32, Vec<f32>)>,
) -> anyhow::Result<VectorStore> {
    tokio::task::spawn_blocking(move || {
        let mut store = store;
        for (slot, vector) in &vectors {
            store.set(*slot, vector);
        }
        store
    })
    .await
    .map_err(|err| anyhow::anyhow!("building the vector index failed: {err}"))
}
