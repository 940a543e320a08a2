//! Keyword ranking: BM25 over an in-memory tantivy index of the ACTIVE agents' text fields,
//! with field boosts, English stemming and stop words, and typo tolerance for query terms that
//! occur nowhere in the index.
//!
//! This file keeps the index (its writes, merges and what queries read of each segment) and
//! plans a query; beside it: `schema` (the fields and how words are analysed), `score` (BM25
//! into a dense accumulator), `visit` (the scored matches handed to the search), `typos`
//! (corrections of unknown words), `feedback` (the words pseudo-relevance feedback adds) and
//! `snapshot` (the index saved between runs).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, RwLock};

use arc_swap::ArcSwapOption;
use tantivy::directory::RamDirectory;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::InvertedIndexReader;
use tantivy::index::SegmentId;
use tantivy::postings::TermInfo;
use tantivy::query::{AutomatonWeight, Bm25Weight};
use tantivy::schema::Field;
use tantivy::{
    DocId, Index, IndexReader, IndexSettings, IndexWriter, ReloadPolicy, Searcher, SegmentReader,
    TantivyDocument, Term,
};

mod feedback;
mod schema;
mod score;
mod snapshot;
mod typos;
mod visit;
pub use schema::DocText;
use schema::{ANALYZER, Fields, analyze, analyzer, schema};
use score::{SCRATCH, score};
pub use snapshot::{CommittedFiles, Saved, SavedSlot};
use typos::{RawTerms, Typos};
pub use visit::{MatchVisitor, Matches, SHOWN_VARIANTS, ShownFilter};
use visit::{Parts, SHOWN_DOCS_INLINE, ShownCache};

/// Terms shorter than this are never corrected (too many neighbours at distance 1).
const MIN_FUZZY_CHARS: usize = 4;
const FUZZY_BOOST: f32 = 0.5;
/// The searchable text fields: head, body, queries.
const TEXT_FIELDS: usize = 3;
/// The index of the queries field among them.
const QUERIES: usize = 2;

/// The in-memory BM25 index. Documents are keyed by the search index's slot number.
pub struct TextIndex {
    index: Index,
    /// Where the index's files live (in memory); `committed_files` takes a commit's for a snapshot.
    directory: RamDirectory,
    writer: Mutex<IndexWriter>,
    reader: IndexReader,
    fields: Fields,
    /// What queries read of each segment, gathered once rather than per query.
    cached: Arc<SegmentCache>,
    /// Queries with this many postings or more use both cores (`PARALLEL_POSTINGS`).
    parallel_from: std::sync::atomic::AtomicU64,
    /// Segments with fewer documents get a filter's bits built on the spot (`SHOWN_DOCS_INLINE`).
    shown_inline_below: std::sync::atomic::AtomicUsize,
    /// Commits so far: a saved copy is current while this has not moved.
    commits: std::sync::atomic::AtomicU64,
    /// Background merges not yet finished.
    merges: Arc<Running>,
}

/// One change staged by `TextIndex::stage`: a document for a slot no document has, one for a
/// slot whose document it replaces, or a removal.
pub enum Staged<'a> {
    Add(u32, &'a DocText),
    Replace(u32, &'a DocText),
    Remove(u32),
}

/// Threads indexing a start-up's documents (each writes its share as one segment).
const INDEX_THREADS: usize = 2;

/// In a slot map: the document has no slot (cannot happen; such matches are dropped).
const NO_SLOT: u32 = u32::MAX;
/// Queries whose known words have at least this many postings are scored and visited on two
/// cores, half the documents each (a query of common words at a million agents: several
/// milliseconds on one). Below it, handing half to another thread costs more than it saves.
const PARALLEL_POSTINGS: u64 = 100_000;

/// The text index's size, as `TextIndex::stats` reads it.
#[derive(Debug, Clone, Copy, Default)]
pub struct TextStats {
    pub segments: usize,
    pub stored_docs: u64,
    pub live_docs: u64,
}

/// Why the text index failed; always a bug or resource exhaustion, never bad input.
#[derive(Debug, thiserror::Error)]
#[error("text index: {0}")]
pub struct TextIndexError(#[from] tantivy::TantivyError);

impl TextIndex {
    pub fn new() -> Result<Self, TextIndexError> {
        let (schema, fields) = schema();
        let directory = RamDirectory::create();
        let index = Index::create(directory.clone(), schema, IndexSettings::default())?;
        Self::over(index, directory, fields)
    }

    /// Serve `index`, whose files are in `directory`.
    fn over(index: Index, directory: RamDirectory, fields: Fields) -> Result<Self, TextIndexError> {
        index.tokenizers().register(ANALYZER, analyzer());
        // Two indexing threads nearly halve a start-up's index build (the search bench's 1M
        // agents: 38.7 s → about 20 s), and the memory budget lets each write its whole share
        // as one segment (it did at 1M agents); a full build then merges the two in the
        // background. Every query term is looked up per segment, so segments cost query time
        // (with 20 MB segments, keyword p99 at 100k agents was 3.0 ms against 1.2 ms with one).
        let writer = index.writer_with_num_threads(INDEX_THREADS, 256_000_000)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Self {
            index,
            directory,
            writer: Mutex::new(writer),
            reader,
            fields,
            cached: Arc::default(),
            parallel_from: PARALLEL_POSTINGS.into(),
            shown_inline_below: SHOWN_DOCS_INLINE.into(),
            commits: 0.into(),
            merges: Arc::default(),
        })
    }

    /// Split queries with at least `postings` postings over two cores (the default is
    /// `PARALLEL_POSTINGS`): for tests that need small queries split, and for measuring.
    pub fn set_parallel_from(&self, postings: u64) {
        self.parallel_from
            .store(postings, std::sync::atomic::Ordering::Relaxed);
    }

    /// Build a filter's document bits on the spot for segments of fewer than `docs` documents,
    /// on a thread of their own for larger ones (the default is `SHOWN_DOCS_INLINE`): for tests
    /// of both ways.
    pub fn set_shown_inline_below(&self, docs: usize) {
        self.shown_inline_below
            .store(docs, std::sync::atomic::Ordering::Relaxed);
    }

    fn document(&self, slot: u32, text: &DocText) -> TantivyDocument {
        let mut doc = TantivyDocument::default();
        doc.add_u64(self.fields.slot, u64::from(slot));
        let head = [&text.name, &text.package_name, &text.tags, &text.category];
        let body = [&text.description, &text.capabilities];
        let [(head_field, _), (body_field, _), (queries_field, _)] = self.fields.text;
        for value in head {
            doc.add_text(head_field, value);
        }
        for value in body {
            doc.add_text(body_field, value);
        }
        if !text.queries.is_empty() {
            doc.add_text(queries_field, &text.queries);
        }
        doc
    }

    /// Replace every document, in one commit (tests; the search index stages its own).
    #[cfg(test)]
    pub fn replace_all<'a>(
        &self,
        docs: impl Iterator<Item = (u32, &'a DocText)>,
    ) -> Result<(), TextIndexError> {
        self.stage_clear()?;
        self.stage(docs.map(|(slot, text)| Staged::Add(slot, text)))?;
        self.commit_staged(true)
    }

    /// Stage changes without making them searchable (a start-up's pages, one at a time);
    /// `commit_staged` commits them all.
    pub fn stage<'a>(
        &self,
        changes: impl Iterator<Item = Staged<'a>>,
    ) -> Result<(), TextIndexError> {
        let writer = self.lock_writer();
        for change in changes {
            match change {
                Staged::Add(slot, text) => {
                    writer.add_document(self.document(slot, text))?;
                }
                Staged::Replace(slot, text) => {
                    writer.delete_term(self.slot_term(slot));
                    writer.add_document(self.document(slot, text))?;
                }
                Staged::Remove(slot) => {
                    writer.delete_term(self.slot_term(slot));
                }
            }
        }
        Ok(())
    }

    /// Stage the removal of every document.
    pub fn stage_clear(&self) -> Result<(), TextIndexError> {
        self.lock_writer().delete_all_documents()?;
        Ok(())
    }

    /// Commit what `stage` staged; with `merge`, then merge the segments into one in the
    /// background (after a full build, whose indexing threads wrote one segment each).
    pub fn commit_staged(&self, merge: bool) -> Result<(), TextIndexError> {
        let mut writer = self.lock_writer();
        self.commit(&mut writer)?;
        if merge {
            self.merge_in_background(&mut writer);
        }
        Ok(())
    }

    fn slot_term(&self, slot: u32) -> Term {
        Term::from_field_u64(self.fields.slot, u64::from(slot))
    }

    /// Merge every segment into one on tantivy's merge thread; searches go on over the
    /// segments they have until it is done and the reader reloads.
    fn merge_in_background(&self, writer: &mut IndexWriter) {
        let segments = self.segment_ids();
        if segments.len() < 2 {
            return;
        }
        let merge = writer.merge(&segments);
        let reader = self.reader.clone();
        let cached = Arc::clone(&self.cached);
        let merges = Arc::clone(&self.merges);
        merges.start();
        let waiter = std::thread::Builder::new()
            .name("text-merge".to_owned())
            .spawn(move || {
                match merge.wait() {
                    Ok(_) => {
                        match reader.reload() {
                            Ok(()) => cached.forget_stale(&reader),
                            Err(err) => {
                                tracing::warn!(error = %err, "cannot reload the keyword index after merging");
                            }
                        }
                    }
                    // Another write merged or replaced them first: nothing lost.
                    Err(err) => {
                        tracing::debug!(error = %err, "keyword index segments not merged");
                    }
                }
                merges.end();
            });
        if let Err(err) = waiter {
            self.merges.end();
            tracing::warn!(error = %err, "cannot wait for the keyword index merge");
        }
    }

    /// Wait (at most `timeout`) until no background merge is running; `false` on time-out.
    pub fn wait_for_merges(&self, timeout: std::time::Duration) -> bool {
        self.merges.wait(timeout)
    }

    /// Wait (at most `timeout`) until no document bits are being built for a filter (see
    /// `Segment::shown_docs`); `false` on time-out.
    pub fn wait_for_shown_docs(&self, timeout: std::time::Duration) -> bool {
        self.cached.shown_builds.wait(timeout)
    }

    /// How many commits the index has had: unchanged since a save, the saved copy is current.
    pub fn commits(&self) -> u64 {
        self.commits.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Index (or re-index) one document; searchable when this returns.
    pub fn upsert(&self, slot: u32, text: &DocText) -> Result<(), TextIndexError> {
        self.apply_batch(std::iter::once((slot, Some(text))))
    }

    /// Re-index (`Some`) or remove (`None`) many documents in one commit: a batch of changes
    /// costs one commit, not one each.
    pub fn apply_batch<'a>(
        &self,
        changes: impl Iterator<Item = (u32, Option<&'a DocText>)>,
    ) -> Result<(), TextIndexError> {
        self.stage(changes.map(|(slot, text)| match text {
            Some(text) => Staged::Replace(slot, text),
            None => Staged::Remove(slot),
        }))?;
        self.commit_staged(false)
    }

    pub fn remove(&self, slot: u32) -> Result<(), TextIndexError> {
        self.apply_batch(std::iter::once((slot, None)))
    }

    fn commit(&self, writer: &mut IndexWriter) -> Result<(), TextIndexError> {
        writer.commit()?;
        self.commits
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.reader.reload()?;
        self.cached.forget_stale(&self.reader);
        Ok(())
    }

    /// The segments searches read now.
    fn segment_ids(&self) -> Vec<SegmentId> {
        self.reader
            .searcher()
            .segment_readers()
            .iter()
            .map(SegmentReader::segment_id)
            .collect()
    }

    /// What queries read of each of `searcher`'s segments: gathered by the first query of a
    /// searcher generation, shared by the rest.
    fn prepared(&self, searcher: &Searcher) -> Result<Arc<Prepared>, TextIndexError> {
        let generation = searcher.generation().generation_id();
        if let Some(prepared) = self.cached.prepared.load_full()
            && prepared.generation == generation
        {
            return Ok(prepared);
        }
        let fields = self.fields.text.map(|(field, _)| field);
        let segments = searcher
            .segment_readers()
            .iter()
            .map(|reader| {
                let inverted = fields
                    .iter()
                    .map(|field| reader.inverted_index(*field))
                    .collect::<Result<Vec<_>, _>>()?;
                let norms = fields
                    .iter()
                    .map(|field| reader.get_fieldnorms_reader(*field))
                    .collect::<Result<Vec<_>, _>>()?;
                Ok(PreparedSegment {
                    slots: self.cached.slot_map(reader, fields[QUERIES])?,
                    inverted: per_field(inverted),
                    norms: per_field(norms),
                    shown: Default::default(),
                    shown_builds: Arc::clone(&self.cached.shown_builds),
                    raw_terms: std::sync::OnceLock::new(),
                })
            })
            .collect::<Result<_, TextIndexError>>()?;
        let prepared = Arc::new(Prepared {
            generation,
            segments,
        });
        // A query still on an older searcher does not displace a newer generation.
        self.cached.prepared.rcu(|current| match current {
            Some(current) if current.generation > generation => Some(Arc::clone(current)),
            _ => Some(Arc::clone(&prepared)),
        });
        Ok(prepared)
    }

    /// Segments, and documents stored in them including deleted ones not yet merged away: for
    /// `/metrics`, so that an index that keeps deleted documents shows.
    pub fn stats(&self) -> TextStats {
        let searcher = self.reader.searcher();
        let segments = searcher.segment_readers();
        TextStats {
            segments: segments.len(),
            stored_docs: segments.iter().map(|s| u64::from(s.max_doc())).sum(),
            live_docs: segments.iter().map(|s| u64::from(s.num_docs())).sum(),
        }
    }

    fn lock_writer(&self) -> std::sync::MutexGuard<'_, IndexWriter> {
        self.writer
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Every document matching any query term, as `(slot, bm25 score)`, unordered.
    pub fn search(&self, text: &str) -> Result<Vec<(u32, f32)>, TextIndexError> {
        let mut found = Vec::new();
        self.search_each(text, |slot, score| found.push((slot, score)))?;
        Ok(found)
    }

    /// Call `visit(slot, bm25 score)` once for every document matching any query term, in no
    /// particular order, without collecting them: a query of common words matches most of the
    /// catalogue, and the caller keeps only what its page can show.
    ///
    /// Known terms are scored term by term into one dense accumulator for every segment,
    /// straight from their block postings (the same BM25 as tantivy's `TermQuery`, boosted per field):
    /// every match needs its score for fusion and the total, so there is nothing for a
    /// dynamic-pruning scorer to skip, and a flat loop costs a fraction of a scorer tree. The
    /// accumulator is reused between queries, and a bit per document records which entries a
    /// query touched, so a query reads and resets only those, not the whole segment.
    /// Unknown terms are corrected by a Levenshtein automaton run over the term dictionaries;
    /// their matches score by boost alone, as tantivy's fuzzy query scores them.
    ///
    /// `visit` must not search this thread's text indexes again (it runs while the
    /// accumulator is in use).
    pub fn search_each(
        &self,
        text: &str,
        mut visit: impl FnMut(u32, f32) + Send,
    ) -> Result<(), TextIndexError> {
        self.search_visiting(text, &mut visit)
    }

    /// `search_each` for a visitor that may also look some slots' scores up ahead of the
    /// visits (`MatchVisitor::ahead`): every score is final before the first visit.
    pub fn search_visiting(
        &self,
        text: &str,
        visitor: &mut (impl MatchVisitor + Send),
    ) -> Result<(), TextIndexError> {
        self.search_beside(
            text,
            &[],
            false,
            || (),
            |(), matches| matches.map(|matches| matches.visit(visitor)),
        )
    }

    /// Score `text`'s matches while `beside` runs, then hand `then` its result and the matches
    /// to visit (or why there are none). `expansion` adds analysed terms (`feedback_terms`)
    /// to the query's, each scored at its weight. `beside` runs on the caller's thread; with
    /// `together`, a query with enough postings to be worth it is scored on a pool thread
    /// meanwhile, otherwise after it. `then` is called once, whatever happens. Neither may
    /// search this thread's text indexes again (the accumulator is in use).
    pub fn search_beside<A, R>(
        &self,
        text: &str,
        expansion: &[(String, f32)],
        together: bool,
        beside: impl FnOnce() -> A,
        then: impl FnOnce(A, Result<Matches<'_>, TextIndexError>) -> R,
    ) -> R {
        let mut terms: Vec<(String, f32)> = analyze(&super::analyse::content_text(text))
            .into_iter()
            .map(|term| (term, 1.0))
            .collect();
        for (term, weight) in expansion {
            if !terms.iter().any(|(known, _)| known == term) {
                terms.push((term.clone(), *weight));
            }
        }
        if terms.is_empty() {
            return then(beside(), Ok(Matches::none()));
        }
        let searcher = self.reader.searcher();
        let readers = searcher.segment_readers();
        let prepared = match self.prepared(&searcher) {
            Ok(prepared) => prepared,
            Err(err) => return then(beside(), Err(err)),
        };
        let planned = match self.plan(&terms, readers, &prepared) {
            Ok(planned) => planned,
            Err(err) => return then(beside(), Err(err)),
        };
        let Planned {
            known,
            segments,
            docs,
        } = planned;
        // Enough postings to be worth both cores: each scores and visits half the documents.
        let postings: u64 = known.iter().map(|word| word.frequency).sum();
        let parallel_from = self
            .parallel_from
            .load(std::sync::atomic::Ordering::Relaxed);
        let halves = postings >= parallel_from && docs >= 128;
        SCRATCH.with_borrow_mut(|scratch| {
            let scores = scratch.reset(docs).whole(docs);
            let parts = if halves {
                let (first, second) = scores.halves();
                Parts::Halves(first, second)
            } else {
                Parts::Whole(scores)
            };
            let (found, scored) = if together && postings >= BESIDE_FROM {
                // The caller's thread searches beside while a pool thread scores: one hand-off,
                // not the two of a join from outside the pool.
                let mut scored = None;
                let found = rayon::in_place_scope(|scope| {
                    scope.spawn(|_| scored = Some(score(&segments, &known, parts)));
                    beside()
                });
                let scored = scored.unwrap_or_else(|| unreachable!("a scope waits for its jobs"));
                (found, scored)
            } else {
                let found = beside();
                (found, score(&segments, &known, parts))
            };
            let matches = scored.map(|parts| Matches {
                scored: Some((segments.as_slice(), parts)),
            });
            // Visited or dropped, the matches are clear by now; a panic on the way leaves
            // `in_use` set, and the thread's next query clears everything first.
            let answer = then(found, matches);
            scratch.done();
            answer
        })
    }

    /// The known words of `terms` with their BM25 weights, the corrections of the unknown ones,
    /// and every segment's place in the accumulator.
    fn plan<'s>(
        &self,
        terms: &[(String, f32)],
        readers: &'s [SegmentReader],
        prepared: &'s Prepared,
    ) -> Result<Planned<'s>, TextIndexError> {
        // BM25's statistics as tantivy's `Bm25Weight::for_terms` reads them from the searcher.
        let docs_in_all: u64 = readers.iter().map(|r| u64::from(r.max_doc())).sum();
        // Except for the queries field, whose average length is over the documents that have
        // it: most agents have none, and an average over every agent (a fraction of a word)
        // would make any agent's few queries look hundreds of times too long.
        let average_length = |field: usize| {
            let tokens: u64 = prepared
                .segments
                .iter()
                .map(|part| part.inverted[field].total_num_tokens())
                .sum();
            let docs = if field == QUERIES {
                prepared
                    .segments
                    .iter()
                    .map(|part| part.slots.with_words)
                    .sum()
            } else {
                docs_in_all
            };
            tokens as f32 / docs.max(1) as f32
        };
        let averages: [f32; TEXT_FIELDS] = std::array::from_fn(average_length);
        let mut known: Vec<Known> = Vec::new();
        // Per unknown word, per field: the documents holding a word within its edit distance,
        // each scored the field's boost (times `FUZZY_BOOST`) once.
        let mut fuzzy: Vec<(Arc<Typos>, usize, Field, f32)> = Vec::new();
        for (term, term_weight) in terms {
            // Each segment's entry for the word in each field: one dictionary lookup, for the
            // document frequency and then the postings.
            let mut entries: Vec<(Vec<Option<TermInfo>>, u64)> = Vec::with_capacity(TEXT_FIELDS);
            for (field_index, (field, _)) in self.fields.text.iter().enumerate() {
                let word = Term::from_field_text(*field, term);
                let infos: Vec<Option<TermInfo>> = prepared
                    .segments
                    .iter()
                    .map(|part| part.inverted[field_index].get_term_info(&word))
                    .collect::<Result<_, _>>()
                    .map_err(tantivy::TantivyError::from)?;
                let frequency: u64 = infos.iter().flatten().map(|i| u64::from(i.doc_freq)).sum();
                entries.push((infos, frequency));
            }
            let found = entries.iter().any(|(_, frequency)| *frequency > 0);
            // A word of the queries field is as rare as the catalogue's texts say, not as rare
            // as it is among the few agents that list queries (there, nearly every word is in
            // one agent's queries and would weigh as much as the rarest word of a description).
            let most_frequent = entries.iter().map(|(_, frequency)| *frequency).max();
            for (field_index, (infos, frequency)) in entries.into_iter().enumerate() {
                if frequency == 0 {
                    continue;
                }
                let rarity = if field_index == QUERIES {
                    most_frequent.unwrap_or(frequency)
                } else {
                    frequency
                };
                known.push(Known {
                    field: field_index,
                    weight: Bm25Weight::for_one_term_without_explain(
                        rarity,
                        docs_in_all,
                        averages[field_index],
                    )
                    .boost_by(self.fields.text[field_index].1 * term_weight),
                    infos,
                    frequency,
                });
            }
            if !found && term.chars().count() >= MIN_FUZZY_CHARS {
                // One automaton for every field, built once.
                let typos = Arc::new(Typos::of(term));
                for (field_index, (field, boost)) in self.fields.text.into_iter().enumerate() {
                    let boost = boost * FUZZY_BOOST * term_weight;
                    fuzzy.push((Arc::clone(&typos), field_index, field, boost));
                }
            }
        }
        // Every segment's documents in one accumulator, each segment from a multiple of 64.
        let mut segments: Vec<Segment<'_>> = Vec::new();
        let shown_inline_below = self
            .shown_inline_below
            .load(std::sync::atomic::Ordering::Relaxed);
        let mut docs = 0;
        for (ordinal, (reader, part)) in readers.iter().zip(&prepared.segments).enumerate() {
            // The corrections' words, looked up once per segment (a walk of its dictionary).
            let raw = if fuzzy.is_empty() {
                None
            } else {
                part.raw_terms(&self.index, reader, self.fields.text)
            };
            let corrections = fuzzy
                .iter()
                .map(|(typos, field_index, field, boost)| {
                    let words = match raw {
                        Some(raw) => raw[*field_index]
                            .corrections(typos, &part.inverted[*field_index])
                            .map_err(tantivy::TantivyError::from)?,
                        None => AutomatonWeight::<Typos>::new(*field, Arc::clone(typos))
                            .get_match_term_infos(reader)?,
                    };
                    Ok((words, *field, *boost))
                })
                .collect::<Result<_, TextIndexError>>()?;
            segments.push(Segment {
                ordinal,
                reader,
                base: docs,
                part,
                alive: reader.alive_bitset(),
                corrections,
                shown_inline_below,
            });
            docs += (reader.max_doc() as usize).next_multiple_of(64);
        }
        Ok(Planned {
            known,
            segments,
            docs,
        })
    }
}

/// How many of `segment`'s documents (deleted ones included) have words in `field`.
fn with_words(segment: &SegmentReader, field: Field) -> Result<u64, TextIndexError> {
    if segment.inverted_index(field)?.total_num_tokens() == 0 {
        return Ok(0);
    }
    let norms = segment.get_fieldnorms_reader(field)?;
    Ok((0..segment.max_doc())
        .filter(|doc| norms.fieldnorm_id(*doc) != 0)
        .count() as u64)
}

/// One value per text field, from a list that has one per field.
fn per_field<T>(values: Vec<T>) -> [T; TEXT_FIELDS] {
    match values.try_into() {
        Ok(values) => values,
        Err(_) => unreachable!("one value per text field"),
    }
}

/// Background jobs of one kind under way, and a signal when one ends.
#[derive(Default)]
struct Running {
    count: Mutex<usize>,
    ended: std::sync::Condvar,
}

impl Running {
    fn count(&self) -> std::sync::MutexGuard<'_, usize> {
        self.count
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn start(&self) {
        *self.count() += 1;
    }

    fn end(&self) {
        *self.count() -= 1;
        self.ended.notify_all();
    }

    /// Wait (at most `timeout`) until none is under way; `false` on time-out.
    fn wait(&self, timeout: std::time::Duration) -> bool {
        let (count, _) = self
            .ended
            .wait_timeout_while(self.count(), timeout, |running| *running > 0)
            .unwrap_or_else(|poison| poison.into_inner());
        *count == 0
    }
}

/// What queries read of the segments, kept between queries.
#[derive(Default)]
struct SegmentCache {
    /// Per segment, the slot of each document: segments never change, so this is read from
    /// the `slot` fast field once instead of once per match per query.
    slot_maps: RwLock<HashMap<SegmentId, Arc<SlotMap>>>,
    /// The latest searcher generation's segments, prepared.
    prepared: ArcSwapOption<Prepared>,
    /// Document bits being built for a filter, off the searches' path.
    shown_builds: Arc<Running>,
}

impl SegmentCache {
    /// The slot of every document of `segment`, by document id, and how many of its documents
    /// have words in the `sparse` field.
    fn slot_map(
        &self,
        segment: &SegmentReader,
        sparse: Field,
    ) -> Result<Arc<SlotMap>, TextIndexError> {
        let id = segment.segment_id();
        let known = self
            .slot_maps
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(&id)
            .cloned();
        if let Some(map) = known {
            return Ok(map);
        }
        let column = segment.fast_fields().u64("slot")?;
        let map = Arc::new(SlotMap {
            slots: (0..segment.max_doc())
                .map(|doc| {
                    column
                        .first(doc)
                        .and_then(|slot| u32::try_from(slot).ok())
                        .unwrap_or(NO_SLOT)
                })
                .collect(),
            by_slot: std::sync::OnceLock::new(),
            with_words: with_words(segment, sparse)?,
        });
        self.slot_maps
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(id, Arc::clone(&map));
        Ok(map)
    }

    /// After `reader` reloaded: forget the slot maps of segments it no longer reads (merged
    /// away or emptied), and the prepared segments of its earlier generation, which would
    /// otherwise keep those segments in memory until the next query.
    fn forget_stale(&self, reader: &IndexReader) {
        let searcher = reader.searcher();
        let current: HashSet<SegmentId> = searcher
            .segment_readers()
            .iter()
            .map(SegmentReader::segment_id)
            .collect();
        self.slot_maps
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
            .retain(|id, _| current.contains(id));
        let generation = searcher.generation().generation_id();
        self.prepared.rcu(|prepared| {
            prepared
                .as_ref()
                .filter(|prepared| prepared.generation >= generation)
                .map(Arc::clone)
        });
    }
}

/// What a query reads of each segment of one searcher generation, gathered once for all of
/// the generation's queries: tantivy keeps a segment's inverted indexes behind a lock and a
/// map, the slot maps sit behind another, and every query took them for every segment.
struct Prepared {
    generation: u64,
    segments: Vec<PreparedSegment>,
}

struct PreparedSegment {
    slots: Arc<SlotMap>,
    /// Per text field: its inverted index and document lengths.
    inverted: [Arc<InvertedIndexReader>; TEXT_FIELDS],
    norms: [FieldNormReader; TEXT_FIELDS],
    /// Per `ShownFilter` variant, its documents' bits as of the latest version built.
    shown: [Arc<ShownCache>; SHOWN_VARIANTS],
    /// The index's count of those bits being built.
    shown_builds: Arc<Running>,
    /// Per text field, its term dictionary's FST for typo correction, opened by the first
    /// query that corrects a word (`None` inside: tantivy's own walk answers).
    raw_terms: std::sync::OnceLock<Option<[RawTerms; TEXT_FIELDS]>>,
}

impl PreparedSegment {
    fn raw_terms(
        &self,
        index: &Index,
        reader: &SegmentReader,
        fields: [(Field, f32); TEXT_FIELDS],
    ) -> Option<&[RawTerms; TEXT_FIELDS]> {
        self.raw_terms
            .get_or_init(|| {
                let fields: [(Field, &InvertedIndexReader); TEXT_FIELDS] =
                    std::array::from_fn(|at| (fields[at].0, &*self.inverted[at]));
                RawTerms::open(index, reader, fields)
            })
            .as_ref()
    }
}

/// A query's words and segments, ready to score.
struct Planned<'s> {
    known: Vec<Known>,
    segments: Vec<Segment<'s>>,
    /// Accumulator entries: every segment's documents, each from a multiple of 64.
    docs: usize,
}

/// Postings from which scoring runs beside other work on the second core. Set by estimate, not
/// measured: below it scoring takes a few microseconds, about what handing it to another thread
/// and back costs.
const BESIDE_FROM: u64 = 4_096;

/// A query word the index knows, in one text field.
struct Known {
    /// Index into the text fields.
    field: usize,
    weight: Bm25Weight,
    /// Per segment: where its postings are, if the segment holds it.
    infos: Vec<Option<TermInfo>>,
    /// Documents holding it, in every segment.
    frequency: u64,
}

/// A segment's documents and the slots they index.
struct SlotMap {
    /// By document id.
    slots: Box<[u32]>,
    /// Documents with words in the queries field (deleted ones included, as in tantivy's
    /// statistics).
    with_words: u64,
    /// The document ids ordered by slot, built the first time a slot is looked up.
    by_slot: std::sync::OnceLock<Box<[DocId]>>,
}

impl SlotMap {
    /// The documents indexing `slot` (one, unless deleted ones linger), by binary search.
    fn docs_of(&self, slot: u32) -> impl Iterator<Item = DocId> + '_ {
        let by_slot = self.by_slot.get_or_init(|| {
            let mut docs: Vec<DocId> = (0..self.slots.len() as DocId).collect();
            docs.sort_unstable_by_key(|doc| self.slots[*doc as usize]);
            docs.into_boxed_slice()
        });
        let first = by_slot.partition_point(|doc| self.slots[*doc as usize] < slot);
        by_slot[first..]
            .iter()
            .copied()
            .take_while(move |doc| self.slots[*doc as usize] == slot)
    }
}

/// One segment of a search: its documents start at `base` in the accumulator.
struct Segment<'a> {
    /// Its place among the searcher's segments.
    ordinal: usize,
    reader: &'a SegmentReader,
    base: usize,
    /// Its slot map, inverted indexes and document lengths, gathered once per generation.
    part: &'a PreparedSegment,
    alive: Option<&'a tantivy::fastfield::AliveBitSet>,
    /// Per unknown query word and field: the words it may be a typo of, and their score.
    corrections: Vec<(Vec<TermInfo>, Field, f32)>,
    /// `TextIndex::shown_inline_below` as the search started.
    shown_inline_below: usize,
}

impl Segment<'_> {
    /// Where its documents are in the accumulator.
    fn span(&self) -> std::ops::Range<usize> {
        self.base..self.base + self.reader.max_doc() as usize
    }

    /// The slot of the document at accumulator position `doc`, unless it is deleted.
    #[inline(always)]
    fn slot(&self, doc: usize) -> Option<u32> {
        let local = doc - self.base;
        let slot = self.part.slots.slots.get(local).copied().unwrap_or(NO_SLOT);
        // BM25 and fuzzy scores are positive: a touched document matched.
        (slot != NO_SLOT
            && !self
                .alive
                .is_some_and(|alive| alive.is_deleted(local as DocId)))
        .then_some(slot)
    }
}

#[cfg(test)]
mod tests;
