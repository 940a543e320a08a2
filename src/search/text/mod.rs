//! Keyword ranking: BM25 over an in-memory tantivy index of the ACTIVE agents' text fields,
//! with field boosts, English stemming and stop words, and typo tolerance for query terms that
//! occur nowhere in the index.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use arc_swap::ArcSwapOption;
use tantivy::directory::RamDirectory;
use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::InvertedIndexReader;
use tantivy::index::SegmentId;
use tantivy::postings::TermInfo;
use tantivy::query::{AutomatonWeight, Bm25Weight};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, TokenStream,
};
use tantivy::{
    DocId, Index, IndexReader, IndexSettings, IndexWriter, ReloadPolicy, Searcher, SegmentReader,
    TantivyDocument, Term,
};

mod snapshot;
mod typos;
use super::facets::SlotSet;
pub use snapshot::{CommittedFiles, Saved, SavedSlot};
use typos::{RawTerms, Typos};

const ANALYZER: &str = "registry_en";
/// Query terms beyond this are ignored (a query is a sentence, not a document).
const MAX_QUERY_TERMS: usize = 32;
/// Pseudo-relevance feedback reads at most this many words of each document.
const FEEDBACK_WORDS: usize = 256;
/// Terms shorter than this are never corrected (too many neighbours at distance 1).
const MIN_FUZZY_CHARS: usize = 4;
const FUZZY_BOOST: f32 = 0.5;
/// The weight of the head field (name, package name, tags, category) against the body.
const HEAD_BOOST: f32 = 0.25;
/// The weight of the queries field (representative queries, or the card's skill examples)
/// against the body.
const QUERIES_BOOST: f32 = 1.0;
/// The searchable text fields: head, body, queries.
const TEXT_FIELDS: usize = 3;
/// The index of the queries field among them.
const QUERIES: usize = 2;

/// The text of one agent, field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocText {
    pub name: String,
    pub package_name: String,
    pub tags: String,
    pub category: String,
    pub description: String,
    pub capabilities: String,
    /// Requests the agent serves, in its users' words (its representative queries), one a
    /// line.
    pub queries: String,
}

struct Fields {
    slot: Field,
    /// (field, boost) for every searchable text field.
    text: [(Field, f32); TEXT_FIELDS],
}

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

/// The index's fields: each agent's slot, and its text in three fields.
fn schema() -> (Schema, Fields) {
    let mut builder = Schema::builder();
    let slot = builder.add_u64_field("slot", INDEXED | FAST);
    let options = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(ANALYZER)
            .set_index_option(IndexRecordOption::WithFreqsAndPositions),
    );
    let mut text = |name: &str, boost: f32| (builder.add_text_field(name, options.clone()), boost);
    // Three fields, not one per source: each query term reads three posting lists instead
    // of seven. The head (name, tags, category) is short, so BM25's length normalisation already
    // scores a word found there high; a boost above 1 let any incidental word of a name
    // outrank the description that says what an agent does (measured on the hard dev set:
    // head boost 2.5 → 0.259 NDCG@10, 1.0 → 0.315, 0.25 → 0.368, 0.1 → 0.374).
    // Representative queries get a field of their own: they are requests in users' words,
    // not a description, and a field none of an agent's words are in costs it nothing (an
    // agent without queries has no postings there, so the common case reads an empty list).
    let fields = [
        text("head", HEAD_BOOST),
        text("body", 1.0),
        text("queries", QUERIES_BOOST),
    ];
    (builder.build(), Fields { slot, text: fields })
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

    /// Pseudo-relevance feedback: the `count` terms that best say what `documents` (the texts
    /// of a query's strongest matches by meaning) have in common and the query `text` does not
    /// hold, the strongest at `weight` and the rest in proportion. A term scores its share of
    /// each document's words, summed over the documents, times its rarity in the catalogue
    /// (in the field where it is commonest); a term fewer than two of the documents hold says
    /// nothing shared (one agent's product name) and is left out.
    pub fn feedback_terms(
        &self,
        text: &str,
        documents: &[String],
        count: usize,
        weight: f32,
    ) -> Vec<(String, f32)> {
        let query = analyze(&super::analyse::content_text(text));
        let mut shares: HashMap<String, (f32, usize)> = HashMap::new();
        for document in documents {
            let mut analyzer = QUERY_ANALYZER.clone();
            let mut stream = analyzer.token_stream(document);
            let mut counts: HashMap<String, usize> = HashMap::new();
            let mut length = 0usize;
            while length < FEEDBACK_WORDS && stream.advance() {
                *counts.entry(stream.token().text.clone()).or_default() += 1;
                length += 1;
            }
            for (term, times) in counts {
                let entry = shares.entry(term).or_default();
                entry.0 += times as f32 / length as f32;
                entry.1 += 1;
            }
        }
        let searcher = self.reader.searcher();
        let docs = searcher.num_docs().max(1) as f32;
        let mut scored: Vec<(String, f32)> = shares
            .into_iter()
            .filter(|(term, (_, held))| {
                *held >= 2 && term.chars().count() > 2 && !query.contains(term)
            })
            .filter_map(|(term, (share, _))| {
                let frequency = self
                    .fields
                    .text
                    .iter()
                    .filter_map(|(field, _)| {
                        searcher
                            .doc_freq(&Term::from_field_text(*field, &term))
                            .ok()
                    })
                    .max()
                    .unwrap_or(0);
                (frequency > 0).then(|| {
                    let rarity = (1.0 + docs / frequency as f32).ln();
                    (term, share * rarity)
                })
            })
            .collect();
        scored.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        scored.truncate(count);
        let strongest = scored.first().map_or(1.0, |(_, score)| *score);
        scored
            .into_iter()
            .map(|(term, score)| (term, weight * score / strongest))
            .collect()
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

/// A query's scored matches, to visit once (see `TextIndex::search_beside`); left unvisited,
/// they are cleared when dropped.
pub struct Matches<'a> {
    scored: Option<(&'a [Segment<'a>], Parts<'a>)>,
}

/// The accumulator scored whole, or as two halves each visited on a core of its own.
enum Parts<'a> {
    Whole(Scores<'a>),
    Halves(Scores<'a>, Scores<'a>),
}

impl Matches<'_> {
    fn none() -> Self {
        Self { scored: None }
    }

    /// Give `visitor` the scores it asks for ahead, then every match.
    pub fn visit<V: MatchVisitor + Send>(mut self, visitor: &mut V) {
        let Some((segments, parts)) = self.scored.take() else {
            return;
        };
        match parts {
            Parts::Whole(mut scores) => {
                look_ahead(segments, &[&scores], visitor);
                visit(segments, &mut scores, visitor);
            }
            Parts::Halves(mut first, mut second) => {
                look_ahead(segments, &[&first, &second], visitor);
                let Some(mut other) = visitor.split() else {
                    visit(segments, &mut first, visitor);
                    visit(segments, &mut second, visitor);
                    return;
                };
                rayon::join(
                    || visit(segments, &mut first, visitor),
                    || visit(segments, &mut second, &mut other),
                );
                visitor.merge(other);
            }
        }
    }
}

impl Drop for Matches<'_> {
    fn drop(&mut self) {
        if let Some((_, parts)) = &mut self.scored {
            parts.clear();
        }
    }
}

impl Parts<'_> {
    /// Leave every entry clear.
    fn clear(&mut self) {
        match self {
            Parts::Whole(scores) => scores.drain_all(),
            Parts::Halves(first, second) => {
                first.drain_all();
                second.drain_all();
            }
        }
    }
}

/// Score `parts`; a failed scoring leaves them clear for the next query.
fn score<'a>(
    segments: &[Segment<'_>],
    known: &[Known],
    mut parts: Parts<'a>,
) -> Result<Parts<'a>, TextIndexError> {
    let scored = match &mut parts {
        Parts::Whole(scores) => score_all(segments, known, scores),
        Parts::Halves(first, second) => {
            let (a, b) = rayon::join(
                || score_all(segments, known, first),
                || score_all(segments, known, second),
            );
            a.and(b)
        }
    };
    match scored {
        Ok(()) => Ok(parts),
        Err(err) => {
            parts.clear();
            Err(err)
        }
    }
}

/// Score every segment's documents that `scores` holds.
fn score_all(
    segments: &[Segment<'_>],
    known: &[Known],
    scores: &mut Scores<'_>,
) -> Result<(), TextIndexError> {
    segments
        .iter()
        .try_for_each(|segment| score_segment(segment, known, scores))
}

/// Score the documents of `segment` that `scores` holds.
fn score_segment(
    segment: &Segment<'_>,
    known: &[Known],
    scores: &mut Scores<'_>,
) -> Result<(), TextIndexError> {
    let Some(docs) = scores.docs_of(segment) else {
        return Ok(());
    };
    scores.base = segment.base;
    for word in known {
        if let Some(info) = &word.infos[segment.ordinal] {
            accumulate(
                segment,
                word.field,
                info,
                &word.weight,
                docs.clone(),
                scores,
            )?;
        }
    }
    for (words, field, boost) in &segment.corrections {
        correct(segment.reader, words, *field, *boost, docs.clone(), scores)?;
    }
    Ok(())
}

/// Give the visitor the scores of the slots it asks for ahead, if any, from the `parts` of
/// the accumulator.
fn look_ahead(segments: &[Segment<'_>], parts: &[&Scores<'_>], visitor: &mut impl MatchVisitor) {
    let wanted = visitor.ahead();
    if wanted.is_empty() {
        return;
    }
    let mut found = Vec::with_capacity(wanted.len());
    for slot in wanted {
        for segment in segments {
            for doc in segment.part.slots.docs_of(*slot) {
                if segment.alive.is_some_and(|alive| alive.is_deleted(doc)) {
                    continue;
                }
                let at = segment.base + doc as usize;
                if let Some(score) = parts.iter().find_map(|part| part.score_at(at)) {
                    found.push((*slot, score));
                }
            }
        }
    }
    let matches = parts.iter().map(|part| part.touched_count()).sum();
    visitor.scored_ahead(found, matches);
}

/// Visit the matches `scores` holds, leaving it clear.
fn visit(segments: &[Segment<'_>], scores: &mut Scores<'_>, visitor: &mut impl MatchVisitor) {
    for segment in segments {
        let shown = visitor
            .shown_filter()
            .and_then(|filter| segment.shown_docs(&filter));
        match shown {
            Some(shown) => visit_shown(segment, scores, &shown.bits, visitor),
            None => scores.drain(segment, |doc, score| {
                if let Some(slot) = segment.slot(doc) {
                    visitor.visit(slot, score);
                }
            }),
        }
    }
}

/// `visit` for a visitor with a `shown_filter`: the shown matches are counted 64 documents
/// at a time from the filter's document bits (`shown`), and only those scoring at least the
/// visitor's floor are visited. Most matches of a common word are counted, never visited.
fn visit_shown(
    segment: &Segment<'_>,
    scores: &mut Scores<'_>,
    shown: &[u64],
    visitor: &mut impl MatchVisitor,
) {
    let words = scores.words_of(segment);
    // This part's word `w` is the segment's word `first + w - base` (counted in words: parts
    // and segments start at multiples of 64 documents).
    let (first, base) = (scores.first / 64, segment.base / 64);
    let (mut counted, mut below) = (0, 0);
    for word in words {
        let touched = std::mem::take(&mut scores.touched[word]);
        if touched == 0 {
            continue;
        }
        let shown_word = (first + word)
            .checked_sub(base)
            .and_then(|at| shown.get(at).copied());
        let mut hits = touched & shown_word.unwrap_or(0);
        counted += hits.count_ones() as usize;
        let floor = visitor.floor();
        while hits != 0 {
            let bit = hits.trailing_zeros() as usize;
            hits &= hits - 1;
            let at = word * 64 + bit;
            let score = scores.scores[at];
            if f64::from(score) < floor {
                below += 1;
                continue;
            }
            let local = scores.first + at - segment.base;
            if let Some(&slot) = segment.part.slots.slots.get(local) {
                visitor.visit_shown(slot, score);
            }
        }
        // Every touched score back to zero, shown or not.
        let end = (word * 64 + 64).min(scores.scores.len());
        let scores = &mut scores.scores[word * 64..end];
        if touched.count_ones() > 16 {
            scores.fill(0.0);
        } else {
            let mut touched = touched;
            while touched != 0 {
                scores[touched.trailing_zeros() as usize] = 0.0;
                touched &= touched - 1;
            }
        }
    }
    visitor.counted(counted, below);
}

/// What a search does with its matches (any `FnMut(slot, score)` visits them).
pub trait MatchVisitor {
    /// Slots whose scores the visitor needs before its first visit.
    fn ahead(&self) -> &[u32] {
        &[]
    }

    /// The `ahead` slots that match, with their scores (the same `visit` will get), and about
    /// how many matches there are (deleted documents may count).
    fn scored_ahead(&mut self, _found: Vec<(u32, f32)>, _matches: usize) {}

    /// A match: once per matching document, in no particular order.
    fn visit(&mut self, slot: u32, score: f32);

    /// `Some` when what a match does depends only on whether the filter it names shows its
    /// slot (shown matches are counted) and, for a shown one, on whether its score reaches
    /// `floor()`. The search may then count the shown matches from a bit set over the
    /// documents, and hand `visit_shown` only those at the floor or above.
    fn shown_filter(&self) -> Option<ShownFilter<'_>> {
        None
    }

    /// Scores under this cannot change what the visitor keeps (with a `shown_filter`).
    fn floor(&self) -> f64 {
        f64::NEG_INFINITY
    }

    /// A match its `shown_filter` shows, already counted by `counted`, scoring at least the
    /// floor.
    fn visit_shown(&mut self, slot: u32, score: f32) {
        self.visit(slot, score);
    }

    /// Shown matches counted without a visit: `shown` in all, `below` of them under the floor.
    fn counted(&mut self, _shown: usize, _below: usize) {}

    /// For a large search: a visitor for part of the matches, visited on another thread at
    /// the same time, then given to `merge`. `None`: this one visits them all.
    fn split(&self) -> Option<Self>
    where
        Self: Sized,
    {
        None
    }

    /// Take in what a visitor from `split` found.
    fn merge(&mut self, _other: Self)
    where
        Self: Sized,
    {
    }
}

/// Which slots a visitor's matches are counted for (`MatchVisitor::shown_filter`).
#[derive(Clone, Copy)]
pub struct ShownFilter<'a> {
    /// Which of the (two) filters a search can name: each keeps its own document bit sets.
    pub variant: usize,
    /// Changes whenever the filter may show a different set of slots.
    pub version: u64,
    /// It shows the slots of `live` that `hidden` does not hold.
    pub live: &'a SlotSet,
    pub hidden: Option<&'a SlotSet>,
}

impl ShownFilter<'_> {
    fn shows(&self, slot: u32) -> bool {
        self.live.contains(slot) && self.hidden.is_none_or(|hidden| !hidden.contains(slot))
    }
}

/// How many filters get document bit sets of their own (`ShownFilter::variant`).
pub const SHOWN_VARIANTS: usize = 2;

/// The documents of one segment a filter shows (alive, with a slot, and shown), one bit each.
struct ShownDocs {
    version: u64,
    bits: Box<[u64]>,
}

/// Segments with fewer documents than this get their `ShownDocs` built by the search that
/// finds them stale (under 0.1 ms), not by a thread started for it.
const SHOWN_DOCS_INLINE: usize = 16_384;

/// One segment's `ShownDocs` for one filter variant, and whether a build of newer ones is under
/// way.
#[derive(Default)]
struct ShownCache {
    docs: ArcSwapOption<ShownDocs>,
    building: std::sync::atomic::AtomicBool,
}

impl ShownCache {
    /// Keep `docs` unless a newer version is already here.
    fn offer(&self, docs: Arc<ShownDocs>) {
        self.docs.rcu(|current| match current {
            Some(current) if current.version > docs.version => Some(Arc::clone(current)),
            _ => Some(Arc::clone(&docs)),
        });
    }
}

/// A build of `ShownDocs` under way: when dropped, it is over.
struct EndBuild(Arc<ShownCache>, Arc<Running>);

impl Drop for EndBuild {
    fn drop(&mut self) {
        self.0
            .building
            .store(false, std::sync::atomic::Ordering::Release);
        self.1.end();
    }
}

/// The bits of the documents of a segment (`slots`, `alive`) that `filter` shows.
fn build_shown_docs(
    slots: &SlotMap,
    alive: Option<&tantivy::fastfield::AliveBitSet>,
    filter: &ShownFilter<'_>,
) -> ShownDocs {
    let mut bits = vec![0u64; slots.slots.len().div_ceil(64)].into_boxed_slice();
    for (doc, &slot) in slots.slots.iter().enumerate() {
        if slot != NO_SLOT
            && !alive.is_some_and(|alive| alive.is_deleted(doc as DocId))
            && filter.shows(slot)
        {
            bits[doc / 64] |= 1 << (doc % 64);
        }
    }
    ShownDocs {
        version: filter.version,
        bits,
    }
}

impl<F: FnMut(u32, f32)> MatchVisitor for F {
    #[inline(always)]
    fn visit(&mut self, slot: u32, score: f32) {
        self(slot, score)
    }
}

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

    /// The documents `filter` shows, one bit each by document id, if they are built for its
    /// version (and this searcher generation, which a change of the documents makes new).
    /// Otherwise `None`, and the search visits every match: a catalogue change makes every
    /// segment's bits stale, and rebuilding them is a pass over all its documents (5 ms at a
    /// million agents), which no search of a large segment waits for. The first search to find
    /// them stale starts one build on a thread of its own, with copies of the filter's slot
    /// sets; while it runs, more searches find it under way and start none. A small segment's
    /// bits are built on the spot.
    fn shown_docs(&self, filter: &ShownFilter<'_>) -> Option<Arc<ShownDocs>> {
        let cache = self.part.shown.get(filter.variant)?;
        if let Some(docs) = cache.docs.load_full()
            && docs.version == filter.version
        {
            return Some(docs);
        }
        if self.part.slots.slots.len() < self.shown_inline_below {
            let docs = Arc::new(build_shown_docs(&self.part.slots, self.alive, filter));
            cache.offer(Arc::clone(&docs));
            return Some(docs);
        }
        if cache
            .building
            .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return None;
        }
        let (slots, builds) = (
            Arc::clone(&self.part.slots),
            Arc::clone(&self.part.shown_builds),
        );
        let (alive, live, hidden) = (
            self.alive.cloned(),
            filter.live.clone(),
            filter.hidden.cloned(),
        );
        let (variant, version) = (filter.variant, filter.version);
        builds.start();
        // Ends the build however the thread ends, or when it cannot start.
        let end = EndBuild(Arc::clone(cache), builds);
        let started = std::thread::Builder::new()
            .name("shown-docs".to_owned())
            .spawn(move || {
                let filter = ShownFilter {
                    variant,
                    version,
                    live: &live,
                    hidden: hidden.as_ref(),
                };
                let docs = build_shown_docs(&slots, alive.as_ref(), &filter);
                end.0.offer(Arc::new(docs));
            });
        if let Err(err) = started {
            tracing::warn!(error = %err, "cannot build a filter's document bits");
        }
        None
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

/// Scores of every segment's documents for one query, and which of them the query touched.
/// Between queries every score is zero and every bit clear.
#[derive(Default)]
struct Accumulator {
    scores: Vec<f32>,
    touched: Vec<u64>,
    /// A query is using it, or was when it panicked (so some entries may be left touched).
    in_use: bool,
}

impl Accumulator {
    /// Ready for `docs` documents (a multiple of 64), for a query that calls `done` when it is
    /// finished with them.
    fn reset(&mut self, docs: usize) -> &mut Self {
        debug_assert_eq!(docs % 64, 0);
        if std::mem::replace(&mut self.in_use, true) {
            // Not by the touched bits: a visit clears a word's bits before its entries.
            self.scores.fill(0.0);
            self.touched.fill(0);
        }
        if self.scores.len() < docs {
            self.scores.resize(docs, 0.0);
            self.touched.resize(docs.div_ceil(64), 0);
        }
        self
    }

    /// Every entry is clear again.
    fn done(&mut self) {
        self.in_use = false;
    }

    /// The first `docs` documents (a multiple of 64).
    fn whole(&mut self, docs: usize) -> Scores<'_> {
        Scores {
            scores: &mut self.scores[..docs],
            touched: &mut self.touched[..docs / 64],
            first: 0,
            base: 0,
        }
    }
}

/// Part of the accumulator: the documents from `first` (a multiple of 64) on.
struct Scores<'a> {
    scores: &'a mut [f32],
    touched: &'a mut [u64],
    first: usize,
    /// Where the segment being scored starts.
    base: usize,
}

impl Scores<'_> {
    /// Two parts, the first with half the documents (rounded to a multiple of 64).
    fn halves(self) -> (Self, Self) {
        let words = self.touched.len() / 2;
        let (touched_a, touched_b) = self.touched.split_at_mut(words);
        let (scores_a, scores_b) = self.scores.split_at_mut(words * 64);
        (
            Scores {
                scores: scores_a,
                touched: touched_a,
                first: self.first,
                base: 0,
            },
            Scores {
                scores: scores_b,
                touched: touched_b,
                first: self.first + words * 64,
                base: 0,
            },
        )
    }

    /// The accumulator positions of `segment`'s documents that this part holds.
    fn within(&self, segment: &Segment<'_>) -> std::ops::Range<usize> {
        let span = segment.span();
        let end = self.first + self.scores.len();
        let start = span.start.clamp(self.first, end);
        start..span.end.clamp(start, end)
    }

    /// The documents of `segment` in this part, numbered within the segment.
    fn docs_of(&self, segment: &Segment<'_>) -> Option<std::ops::Range<DocId>> {
        let within = self.within(segment);
        let base = segment.base;
        (!within.is_empty()).then(|| (within.start - base) as DocId..(within.end - base) as DocId)
    }

    /// Add to the score of document `doc` of the segment being scored (one this part holds).
    #[inline(always)]
    fn add(&mut self, doc: DocId, score: f32) {
        let index = (self.base + doc as usize).wrapping_sub(self.first);
        if let Some(total) = self.scores.get_mut(index) {
            *total += score;
            self.touched[index / 64] |= 1 << (index % 64);
        }
    }

    /// The score of the document at accumulator position `at`, if this part holds it and the
    /// query touched it.
    fn score_at(&self, at: usize) -> Option<f32> {
        let index = at.checked_sub(self.first)?;
        let touched = self.touched.get(index / 64)? & (1 << (index % 64)) != 0;
        touched.then(|| self.scores[index])
    }

    /// How many documents the query touched in this part.
    fn touched_count(&self) -> usize {
        self.touched
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    /// This part's words of `segment`'s documents, as a range of `touched`.
    fn words_of(&self, segment: &Segment<'_>) -> std::ops::Range<usize> {
        let within = self.within(segment);
        (within.start - self.first) / 64..(within.end - self.first).div_ceil(64)
    }

    /// Every touched document of `segment` in this part with its score (by position in the
    /// accumulator), ascending, leaving them clear.
    #[inline(always)]
    fn drain(&mut self, segment: &Segment<'_>, visit: impl FnMut(usize, f32)) {
        let words = self.words_of(segment);
        self.drain_words(words, visit);
    }

    fn drain_all(&mut self) {
        let words = 0..self.touched.len();
        self.drain_words(words, |_, _| {});
    }

    #[inline(always)]
    fn drain_words(&mut self, words: std::ops::Range<usize>, mut visit: impl FnMut(usize, f32)) {
        let start = words.start;
        for (index, word) in self.touched[words].iter_mut().enumerate() {
            let mut bits = std::mem::take(word);
            while bits != 0 {
                let at = (start + index) * 64 + bits.trailing_zeros() as usize;
                bits &= bits - 1;
                visit(self.first + at, std::mem::take(&mut self.scores[at]));
            }
        }
    }
}

thread_local! {
    /// One accumulator per thread, kept between queries: a fresh one per query allocated and
    /// zeroed four bytes per document of every segment.
    static SCRATCH: std::cell::RefCell<Accumulator> = std::cell::RefCell::default();
}

/// The analyzer of indexed text and queries alike.
fn analyzer() -> TextAnalyzer {
    TextAnalyzer::builder(SimpleTokenizer::default())
        .filter(RemoveLongFilter::limit(40))
        .filter(LowerCaser)
        .filter(AsciiFoldingFilter)
        .filter(
            StopWordFilter::new(Language::English)
                .unwrap_or_else(|| StopWordFilter::remove(Vec::new())),
        )
        .filter(Stemmer::new(Language::English))
        .build()
}

/// Built once: the stop-word set is a hash set, which `analyzer()` would build per query.
static QUERY_ANALYZER: LazyLock<TextAnalyzer> = LazyLock::new(analyzer);

/// The distinct analysed terms of a query, in order.
fn analyze(text: &str) -> Vec<String> {
    let mut analyzer = QUERY_ANALYZER.clone();
    let mut stream = analyzer.token_stream(text);
    let mut terms: Vec<String> = Vec::new();
    while stream.advance() {
        let term = &stream.token().text;
        if !terms.contains(term) {
            terms.push(term.clone());
        }
        if terms.len() >= MAX_QUERY_TERMS {
            break;
        }
    }
    terms
}

/// Add `score` once to every document of `segment` in `docs` holding in `field` any of
/// `words` (a query word's corrections).
fn correct(
    segment: &SegmentReader,
    words: &[TermInfo],
    field: Field,
    score: f32,
    docs: std::ops::Range<DocId>,
    scores: &mut Scores<'_>,
) -> Result<(), TextIndexError> {
    let inverted = segment.inverted_index(field)?;
    // A document holding two of the words still counts once.
    let mut seen = (words.len() > 1).then(|| vec![0u64; (docs.end as usize).div_ceil(64)]);
    for info in words {
        let mut postings = inverted
            .read_block_postings_from_terminfo(info, IndexRecordOption::Basic)
            .map_err(tantivy::TantivyError::from)?;
        if docs.start > 0 {
            postings.seek(docs.start);
        }
        'blocks: loop {
            let block = postings.docs();
            if block.is_empty() {
                break;
            }
            for doc in block {
                if *doc < docs.start {
                    continue;
                }
                if *doc >= docs.end {
                    break 'blocks;
                }
                let first = seen.as_mut().is_none_or(|seen| {
                    let word = &mut seen[*doc as usize / 64];
                    let bit = 1 << (doc % 64);
                    let first = *word & bit == 0;
                    *word |= bit;
                    first
                });
                if first {
                    scores.add(*doc, score);
                }
            }
            postings.advance();
        }
    }
    Ok(())
}

/// Add `weight`'s BM25 score of a word to `scores` for every document of `segment` in `docs`
/// that holds it in text field `field` (its postings at `info`), reading the postings a block
/// at a time.
fn accumulate(
    segment: &Segment<'_>,
    field: usize,
    info: &TermInfo,
    weight: &Bm25Weight,
    docs: std::ops::Range<DocId>,
    scores: &mut Scores<'_>,
) -> Result<(), TextIndexError> {
    let norms = &segment.part.norms[field];
    let mut postings = segment.part.inverted[field]
        .read_block_postings_from_terminfo(info, IndexRecordOption::WithFreqs)
        .map_err(tantivy::TantivyError::from)?;
    if docs.start > 0 {
        postings.seek(docs.start);
    }
    loop {
        let block = postings.docs();
        if block.is_empty() {
            return Ok(());
        }
        let last = block[block.len() - 1];
        if last < docs.end && block[0] >= docs.start {
            // The whole block is in range: the common case, without a test per document.
            for (doc, freq) in block.iter().zip(postings.freqs()) {
                scores.add(*doc, weight.score(norms.fieldnorm_id(*doc), *freq));
            }
        } else {
            for (doc, freq) in block.iter().zip(postings.freqs()) {
                if docs.contains(doc) {
                    scores.add(*doc, weight.score(norms.fieldnorm_id(*doc), *freq));
                }
            }
            if last >= docs.end {
                return Ok(());
            }
        }
        postings.advance();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tantivy::collector::{Collector, SegmentCollector};
    use tantivy::query::{BooleanQuery, BoostQuery, FuzzyTermQuery, Occur, Query};
    use tantivy::{Score, SegmentOrdinal};

    /// Collects every match with its score, by segment.
    struct SegmentScores;

    struct SegmentMatches {
        segment: SegmentOrdinal,
        matches: Vec<(DocId, Score)>,
    }

    impl Collector for SegmentScores {
        type Fruit = Vec<(SegmentOrdinal, Vec<(DocId, Score)>)>;
        type Child = SegmentMatches;

        fn for_segment(
            &self,
            segment: SegmentOrdinal,
            _reader: &SegmentReader,
        ) -> tantivy::Result<SegmentMatches> {
            Ok(SegmentMatches {
                segment,
                matches: Vec::new(),
            })
        }

        fn requires_scoring(&self) -> bool {
            true
        }

        fn merge_fruits(
            &self,
            fruits: Vec<(SegmentOrdinal, Vec<(DocId, Score)>)>,
        ) -> tantivy::Result<Self::Fruit> {
            Ok(fruits)
        }
    }

    impl SegmentCollector for SegmentMatches {
        type Fruit = (SegmentOrdinal, Vec<(DocId, Score)>);

        fn collect(&mut self, doc: DocId, score: Score) {
            self.matches.push((doc, score));
        }

        fn harvest(self) -> Self::Fruit {
            (self.segment, self.matches)
        }
    }

    fn doc(name: &str, description: &str) -> DocText {
        DocText {
            name: name.to_owned(),
            description: description.to_owned(),
            ..DocText::default()
        }
    }

    fn slots(index: &TextIndex, query: &str) -> Vec<u32> {
        let mut found = index.search(query).expect("search");
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found.into_iter().map(|(slot, _)| slot).collect()
    }

    fn sample() -> TextIndex {
        let index = TextIndex::new().expect("index");
        let docs = [
            doc(
                "Weather Agent",
                "Forecasts and current conditions for any city.",
            ),
            doc(
                "Crypto Prices",
                "Current prices of bitcoin and other cryptocurrencies.",
            ),
            doc(
                "Kubernetes Helper",
                "Troubleshoot pods and deployments in a cluster.",
            ),
        ];
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        index
    }

    #[test]
    fn stemming_and_stop_words_let_natural_phrasing_match() {
        let index = sample();
        assert_eq!(slots(&index, "the price of a bitcoin"), [1]);
        assert_eq!(slots(&index, "forecasting"), [0]);
    }

    #[test]
    fn feedback_terms_are_what_the_documents_share_and_the_query_lacks() {
        let index = sample();
        let documents = [
            "Weather Agent\nForecasts and current conditions for any city.".to_owned(),
            "Rain Radar\nForecasts of rain and current conditions near you.".to_owned(),
        ];
        let terms = index.feedback_terms("will it rain in Paris tomorrow", &documents, 8, 0.5);
        let words: Vec<&str> = terms.iter().map(|(term, _)| term.as_str()).collect();
        // Shared and indexed: "forecast", "current", "condit"; not "rain" (the query's own
        // word), not "citi" or "radar" (one document's), not "any" (a stop word).
        assert_eq!(words.len(), 3, "{terms:?}");
        for word in ["forecast", "current", "condit"] {
            assert!(words.contains(&word), "{word} in {terms:?}");
        }
        // The strongest at the weight given, the rest below it.
        assert_eq!(terms[0].1, 0.5);
        assert!(
            terms
                .iter()
                .all(|(_, weight)| *weight > 0.0 && *weight <= 0.5)
        );
        // Expanded, the query matches what its own words do not.
        let mut found = Vec::new();
        index.search_beside(
            "will it rain in Paris tomorrow",
            &terms,
            false,
            || (),
            |(), matches| {
                if let Ok(matches) = matches {
                    matches.visit(&mut |slot: u32, _score: f32| found.push(slot));
                }
            },
        );
        found.sort_unstable();
        // The weather agent by "forecast" and "condit", the crypto one by "current" alone.
        assert_eq!(found, [0, 1]);
        assert!(slots(&index, "will it rain in Paris tomorrow").is_empty());
        assert!(index.feedback_terms("weather", &[], 8, 0.5).is_empty());
    }

    #[test]
    fn a_word_of_a_name_does_not_outrank_what_a_description_says_an_agent_does() {
        let index = TextIndex::new().expect("index");
        let docs = [
            doc("Helper", "A weather helper."),
            doc("Weather", "A helper."),
        ];
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        // Both are found; the name alone still counts, just not above the description.
        assert_eq!(slots(&index, "weather"), [0, 1]);
    }

    #[test]
    fn a_request_an_agent_lists_among_its_queries_ranks_it_above_the_same_words_elsewhere() {
        let index = TextIndex::new().expect("index");
        let mut translator = doc("Lingo", "Translation for travellers.");
        translator.queries = "translate a restaurant menu into Japanese\n\
            what does this street sign say in Korean"
            .to_owned();
        let docs = [
            doc(
                "Menu Maker",
                "Design a restaurant menu and translate its prices into any currency.",
            ),
            doc(
                "Japanese Restaurant Guide",
                "Reviews of restaurants in Japan, with their menus.",
            ),
            translator,
        ];
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        let found = slots(&index, "translate this restaurant menu into Japanese");
        assert_eq!(found.len(), 3);
        assert_eq!(found[0], 2);
        // The queries field is searched like the others, typos included.
        assert_eq!(slots(&index, "korean"), [2]);
        assert_eq!(slots(&index, "streat"), [2]);
    }

    #[test]
    fn a_conversational_query_ranks_by_its_task_not_by_its_fillers() {
        let index = TextIndex::new().expect("index");
        let docs = [
            doc("Take Five", "A jazz trivia quiz."),
            doc("How Long", "A countdown timer for your week."),
            doc(
                "Shipment Status",
                "Where is my parcel: tracking for every courier.",
            ),
        ];
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        let query = "can you tell me how long my parcel will take to arrive this week?";
        assert_eq!(slots(&index, query), [2]);
        // The same words typed as keywords still find the names.
        assert_eq!(slots(&index, "how long"), [1]);
        assert_eq!(slots(&index, "take five"), [0]);
    }

    #[test]
    fn typo_walk_finds_the_words_tantivys_walk_finds() {
        // Words from a small alphabet (with a two-byte letter) share prefixes, as a real
        // dictionary's do, so that automata of one and two edits accept many of them.
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move |below: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % below as u64) as usize
        };
        let letters: Vec<char> = "abcdeorstzé".chars().collect();
        let word = |next: &mut dyn FnMut(usize) -> usize, len: usize| -> String {
            (0..len).map(|_| letters[next(letters.len())]).collect()
        };
        let words: Vec<String> = (0..600).map(|i| word(&mut next, 1 + i % 11)).collect();
        let index = TextIndex::new().expect("index");
        let text = |i: usize| -> String {
            (0..5)
                .map(|j| words[(i * 31 + j * 7) % words.len()].as_str())
                .collect::<Vec<_>>()
                .join(" ")
        };
        index
            .replace_all(
                (0..200u32)
                    .map(|i| (i, doc(&text(i as usize), &text(i as usize + 100))))
                    .collect::<Vec<_>>()
                    .iter()
                    .map(|(i, d)| (*i, d)),
            )
            .expect("replace");
        // The later segments have words in the queries field, the first none (tantivy
        // writes no dictionary for a field without words).
        for slot in (0..200).step_by(9) {
            let mut rewritten = doc(&text(slot as usize + 7), &text(slot as usize + 50));
            rewritten.queries = text(slot as usize + 150);
            index.upsert(slot, &rewritten).expect("upsert");
        }
        // A merge finishing in the background removes its segments' files, and a searcher
        // taken before cannot open their term files any more (searches then fall back to
        // tantivy's walk for that generation): take a fresh searcher until every segment's
        // files open, a bounded number of times.
        let opened = (0..50).find_map(|_| {
            index.wait_for_merges(std::time::Duration::from_secs(10));
            index.reader.reload().expect("reload");
            let searcher = index.reader.searcher();
            let prepared = index.prepared(&searcher).expect("prepared");
            let open = searcher
                .segment_readers()
                .iter()
                .zip(&prepared.segments)
                .all(|(reader, part)| {
                    part.raw_terms(&index.index, reader, index.fields.text)
                        .is_some()
                });
            if !open {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            open.then_some((searcher, prepared))
        });
        let (searcher, prepared) = opened.expect("the term files read as tantivy writes them");
        assert!(searcher.segment_readers().len() > 1);
        // Query words: dictionary words with up to three random edits, and random ones.
        let mut queries: Vec<String> = Vec::new();
        for i in 0..300 {
            let mut chars: Vec<char> = if i % 4 == 0 {
                word(&mut next, 4 + i % 9).chars().collect()
            } else {
                words[(i * 13) % words.len()].chars().collect()
            };
            for _ in 0..i % 4 {
                let at = next(chars.len() + 1);
                match next(4) {
                    0 => chars.insert(at, letters[next(letters.len())]),
                    1 if at < chars.len() => {
                        chars.remove(at);
                    }
                    2 if at + 1 < chars.len() => chars.swap(at, at + 1),
                    _ if at < chars.len() => chars[at] = letters[next(letters.len())],
                    _ => {}
                }
            }
            queries.push(chars.into_iter().collect());
        }
        let mut found_some = 0;
        for (reader, part) in searcher.segment_readers().iter().zip(&prepared.segments) {
            let raw = part
                .raw_terms(&index.index, reader, index.fields.text)
                .expect("opened above");
            for query in queries
                .iter()
                .filter(|q| q.chars().count() >= MIN_FUZZY_CHARS)
            {
                let typos = Arc::new(Typos::of(query));
                for (field_index, (field, _)) in index.fields.text.into_iter().enumerate() {
                    let ours = raw[field_index]
                        .corrections(&typos, &part.inverted[field_index])
                        .expect("walk");
                    let theirs = AutomatonWeight::<Typos>::new(field, Arc::clone(&typos))
                        .get_match_term_infos(reader)
                        .expect("tantivy's walk");
                    assert_eq!(ours, theirs, "{query}");
                    found_some += usize::from(!ours.is_empty());
                }
            }
        }
        assert!(found_some > 100, "{found_some}");
    }

    #[test]
    fn unknown_terms_are_corrected_within_an_edit_or_two() {
        let index = sample();
        assert_eq!(slots(&index, "wether forcast"), [0]);
        assert_eq!(slots(&index, "kubernets"), [2]);
        assert!(slots(&index, "zzzzzz").is_empty());
    }

    /// The same query as a tree of tantivy's own scorers (its fuzzy query for unknown words):
    /// what `search` must agree with.
    fn reference(index: &TextIndex, query: &str) -> Vec<(u32, f32)> {
        use tantivy::postings::Postings;
        use tantivy::query::{Bm25StatisticsProvider, TermQuery};
        use tantivy::{DocSet, TERMINATED};
        let searcher = index.reader.searcher();
        // The queries field's known words are scored by tantivy's BM25 weight over its postings,
        // with the field's average length over the documents that have it (tantivy's own is
        // over every one) and the word's rarity where it is most frequent.
        let (queries_field, queries_boost) = index.fields.text[QUERIES];
        let with_words: u64 = searcher
            .segment_readers()
            .iter()
            .map(|reader| {
                let norms = reader.get_fieldnorms_reader(queries_field).expect("norms");
                (0..reader.max_doc())
                    .filter(|doc| norms.fieldnorm_id(*doc) != 0)
                    .count() as u64
            })
            .sum();
        let average = searcher.total_num_tokens(queries_field).expect("tokens") as f32
            / with_words.max(1) as f32;
        let mut queries_scores: HashMap<(SegmentOrdinal, DocId), f32> = HashMap::new();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for term in analyze(query) {
            let known = index.fields.text.iter().any(|(field, _)| {
                searcher
                    .doc_freq(&Term::from_field_text(*field, &term))
                    .expect("doc freq")
                    > 0
            });
            for (field, boost) in index.fields.text {
                let word = Term::from_field_text(field, &term);
                if known && field == queries_field {
                    if searcher.doc_freq(&word).expect("doc freq") == 0 {
                        continue;
                    }
                    // As rare as in the field where it is most frequent.
                    let frequency = index
                        .fields
                        .text
                        .iter()
                        .map(|(field, _)| {
                            searcher
                                .doc_freq(&Term::from_field_text(*field, &term))
                                .expect("doc freq")
                        })
                        .max()
                        .unwrap_or(0);
                    let weight = Bm25Weight::for_one_term(
                        frequency,
                        searcher.total_num_docs().expect("docs"),
                        average,
                    )
                    .boost_by(queries_boost);
                    for (ordinal, reader) in searcher.segment_readers().iter().enumerate() {
                        let Some(mut postings) = reader
                            .inverted_index(field)
                            .expect("inverted")
                            .read_postings(&word, IndexRecordOption::WithFreqs)
                            .expect("postings")
                        else {
                            continue;
                        };
                        let norms = reader.get_fieldnorms_reader(field).expect("norms");
                        while postings.doc() != TERMINATED {
                            let doc = postings.doc();
                            if !reader.is_deleted(doc) {
                                *queries_scores
                                    .entry((ordinal as SegmentOrdinal, doc))
                                    .or_default() +=
                                    weight.score(norms.fieldnorm_id(doc), postings.term_freq());
                            }
                            postings.advance();
                        }
                    }
                    continue;
                }
                let query: Box<dyn Query> = if known {
                    Box::new(BoostQuery::new(
                        Box::new(TermQuery::new(word, IndexRecordOption::WithFreqs)),
                        boost,
                    ))
                } else if term.chars().count() >= MIN_FUZZY_CHARS {
                    let distance = if term.chars().count() >= 8 { 2 } else { 1 };
                    Box::new(BoostQuery::new(
                        Box::new(FuzzyTermQuery::new(word, distance, true)),
                        boost * FUZZY_BOOST,
                    ))
                } else {
                    continue;
                };
                clauses.push((Occur::Should, query));
            }
        }
        let by_segment = searcher
            .search(&BooleanQuery::new(clauses), &SegmentScores)
            .expect("search");
        for (ordinal, matches) in by_segment {
            for (doc, score) in matches {
                *queries_scores.entry((ordinal, doc)).or_default() += score;
            }
        }
        let mut found = Vec::new();
        for ((ordinal, doc), score) in queries_scores {
            let slots = searcher
                .segment_reader(ordinal)
                .fast_fields()
                .u64("slot")
                .expect("slots");
            found.push((slots.first(doc).expect("slot") as u32, score));
        }
        found.sort_by_key(|(slot, _)| *slot);
        found
    }

    #[test]
    fn scores_equal_tantivys_own_scorers_across_segments_and_deletions() {
        let index = TextIndex::new().expect("index");
        let words = [
            "weather", "forecast", "price", "crypto", "search", "agent", "data", "city", "api",
        ];
        let text = |i: usize, len: usize| -> String {
            (0..len)
                .map(|j| words[(i * 7 + j * 3 + j * j) % words.len()])
                .collect::<Vec<_>>()
                .join(" ")
        };
        let docs: Vec<DocText> = (0..300)
            .map(|i| DocText {
                name: text(i, 1 + i % 3),
                description: text(i + 1, 3 + i % 17),
                // A third of them with representative queries.
                queries: if i % 3 == 0 {
                    text(i + 2, 4 + i % 5)
                } else {
                    String::new()
                },
                ..DocText::default()
            })
            .collect();
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        // Later writes land in new segments and delete documents from old ones.
        for slot in (0..300).step_by(13) {
            index
                .upsert(slot, &doc(&text(slot as usize, 2), "weather api"))
                .expect("upsert");
        }
        index.remove(5).expect("remove");
        assert!(index.reader.searcher().segment_readers().len() > 1);
        // On one core, and split over two (each half scoring and visiting its documents).
        for (query, parallel_from) in [
            "weather",
            "crypto price",
            "city data api agent",
            "search forecast",
            // Corrected words: "forcast" and "serch" are one edit away, "whaether" two.
            "forcast serch",
            "whaether crypto",
        ]
        .into_iter()
        .flat_map(|query| [(query, u64::MAX), (query, 0)])
        {
            index.set_parallel_from(parallel_from);
            let mut found = index.search(query).expect("search");
            found.sort_by_key(|(slot, _)| *slot);
            let expected = reference(&index, query);
            assert!(!expected.is_empty(), "{query}");
            assert_eq!(found.len(), expected.len(), "{query}");
            for ((slot, score), (want_slot, want)) in found.iter().zip(&expected) {
                assert_eq!(slot, want_slot, "{query}");
                assert!(
                    (score - want).abs() <= want.abs() * 1e-5,
                    "{query}: {score} vs {want}"
                );
            }
        }
    }

    /// Records what a search shows it, splitting when asked to.
    #[derive(Default)]
    struct Recorder {
        ahead: Vec<u32>,
        found: Option<(Vec<(u32, f32)>, usize)>,
        visited: Vec<(u32, f32)>,
        /// Whether the scores ahead had come when this part was split off.
        found_when_split: bool,
        parts: usize,
    }

    impl MatchVisitor for Recorder {
        fn ahead(&self) -> &[u32] {
            &self.ahead
        }

        fn scored_ahead(&mut self, found: Vec<(u32, f32)>, matches: usize) {
            assert!(self.visited.is_empty(), "looked ahead after a visit");
            assert!(self.found.is_none(), "told twice");
            self.found = Some((found, matches));
        }

        fn visit(&mut self, slot: u32, score: f32) {
            self.visited.push((slot, score));
        }

        fn split(&self) -> Option<Self> {
            Some(Self {
                found_when_split: self.found.is_some(),
                ..Self::default()
            })
        }

        fn merge(&mut self, other: Self) {
            self.visited.extend(other.visited);
            self.parts += 1 + other.parts;
            assert_eq!(other.found_when_split, !self.ahead.is_empty());
        }
    }

    #[test]
    fn a_split_search_looks_ahead_before_its_parts_visit_every_match_once() {
        let index = TextIndex::new().expect("index");
        let docs: Vec<DocText> = (0..2_000)
            .map(|i| doc(&format!("Agent {i}"), &format!("weather {} data", i % 7)))
            .collect();
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        // A later segment: slot 3 no longer matches, slot 4 matches from the new segment.
        index.upsert(3, &doc("Agent 3", "tides")).expect("upsert");
        index
            .upsert(4, &doc("Agent 4", "weather weather"))
            .expect("upsert");
        let mut whole = index.search("weather").expect("search");
        whole.sort_by_key(|a| a.0);
        assert_eq!(whole.len(), 1_999);
        let score_of = |slot: u32| whole.iter().find(|(s, _)| *s == slot).map(|(_, s)| *s);
        for (ahead, parallel_from) in [
            (vec![], 0),
            (vec![1_999, 3, 4, 0, 7_000], 0),
            (vec![4, 3, 500], u64::MAX),
        ] {
            index.set_parallel_from(parallel_from);
            let mut recorder = Recorder {
                ahead: ahead.clone(),
                ..Recorder::default()
            };
            index
                .search_visiting("weather", &mut recorder)
                .expect("search");
            assert_eq!(recorder.parts, usize::from(parallel_from == 0));
            let mut visited = recorder.visited;
            visited.sort_by_key(|a| a.0);
            assert_eq!(visited, whole);
            match recorder.found {
                None => assert!(ahead.is_empty()),
                Some((found, matches)) => {
                    let expected: Vec<(u32, f32)> = ahead
                        .iter()
                        .filter_map(|slot| score_of(*slot).map(|score| (*slot, score)))
                        .collect();
                    assert_eq!(found, expected);
                    assert!(matches >= 1_999, "{matches}");
                }
            }
        }
    }

    #[test]
    fn a_search_beside_other_work_visits_the_same_and_an_unvisited_one_leaves_no_trace() {
        let index = TextIndex::new().expect("index");
        // Enough postings of "weather" for the scoring to go to another thread.
        let docs: Vec<DocText> = (0..5_000)
            .map(|i| {
                let tides = if i % 250 == 0 { " tides" } else { "" };
                doc(
                    &format!("Agent {i}"),
                    &format!("weather {} data{tides}", i % 7),
                )
            })
            .collect();
        assert!(docs.len() as u64 > BESIDE_FROM);
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        let sorted = |mut found: Vec<(u32, f32)>| {
            found.sort_by_key(|a| a.0);
            found
        };
        let weather = sorted(index.search("weather").expect("search"));
        let tides = sorted(index.search("tides").expect("search"));
        assert_eq!((weather.len(), tides.len()), (5_000, 20));
        let caller = std::thread::current().id();
        for (together, parallel_from) in [(true, u64::MAX), (true, 0), (false, u64::MAX)] {
            index.set_parallel_from(parallel_from);
            let (beside, recorder) = index.search_beside(
                "weather",
                &[],
                together,
                || (std::thread::current().id(), 42),
                |beside, matches| {
                    let mut recorder = Recorder {
                        ahead: vec![4_999, 7],
                        ..Recorder::default()
                    };
                    matches.expect("matches").visit(&mut recorder);
                    (beside, recorder)
                },
            );
            // The other work runs on the caller's thread, and its answer is handed on.
            assert_eq!(beside, (caller, 42));
            assert_eq!(
                sorted(recorder.visited),
                weather,
                "{together} {parallel_from}"
            );
            let (found, matches) = recorder.found.expect("scores ahead");
            let ahead: Vec<u32> = found.iter().map(|(slot, _)| *slot).collect();
            assert_eq!(ahead, [4_999, 7]);
            assert!(matches >= 5_000);
            // Matches handed on but never visited are cleared: the next search sees none of
            // them.
            index.search_beside("weather", &[], together, || (), |(), _matches| ());
            assert_eq!(sorted(index.search("tides").expect("search")), tides);
        }
        // A visit that panics halfway leaves the rest touched; the next query clears it.
        let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut visits = 0;
            index.search_each("weather", |_, _| {
                visits += 1;
                assert!(visits < 100, "a visitor that fails");
            })
        }));
        assert!(panicked.is_err());
        assert_eq!(sorted(index.search("tides").expect("search")), tides);
        assert_eq!(sorted(index.search("weather").expect("search")), weather);
    }

    #[test]
    fn a_rebuilt_index_is_merged_into_one_segment_and_answers_the_same() {
        let index = TextIndex::new().expect("index");
        let docs: Vec<DocText> = (0..20_000)
            .map(|i| {
                doc(
                    &format!("Agent {i}"),
                    &format!("weather {} forecasts", i % 97),
                )
            })
            .collect();
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        let mut before = index.search("weather forecasts 42").expect("search");
        before.sort_by_key(|(slot, _)| *slot);
        // The merge runs on tantivy's thread; wait for it (generously: CI machines are slow).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while index.stats().segments > 1 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        assert_eq!(index.stats().segments, 1);
        assert_eq!(index.stats().live_docs, 20_000);
        let mut after = index.search("weather forecasts 42").expect("search");
        after.sort_by_key(|(slot, _)| *slot);
        assert_eq!(after.len(), before.len());
        for ((slot, score), (want_slot, want)) in after.iter().zip(&before) {
            assert_eq!(slot, want_slot);
            assert!((score - want).abs() <= want.abs() * 1e-5);
        }
    }

    #[test]
    fn upserts_and_removals_are_visible_at_once() {
        let index = sample();
        index
            .upsert(0, &doc("Tide Agent", "Tides for any harbour."))
            .expect("upsert");
        assert!(slots(&index, "weather").is_empty());
        assert_eq!(slots(&index, "tides"), [0]);
        index.remove(0).expect("remove");
        assert!(slots(&index, "tides").is_empty());
    }

    #[test]
    fn queries_of_only_stop_words_or_punctuation_match_nothing() {
        let index = sample();
        assert!(slots(&index, "the of and").is_empty());
        assert!(slots(&index, "?!…").is_empty());
        assert!(slots(&index, "").is_empty());
    }

    /// Every slot of `index` with its score for `query`, best first.
    fn scored(index: &TextIndex, query: &str) -> Vec<(u32, f32)> {
        let mut found = index.search(query).expect("search");
        found.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        found
    }

    fn saved_slots(slots: &[u32]) -> Vec<SavedSlot> {
        slots
            .iter()
            .map(|slot| SavedSlot {
                slot: *slot,
                agent_id: format!("agt_{slot}"),
                text_hash: [*slot as u8; 32],
            })
            .collect()
    }

    #[test]
    fn a_saved_index_loads_with_its_slots_and_scores_and_takes_writes() {
        let index = sample();
        index
            .upsert(7, &doc("Weather Maps", "Radar maps"))
            .expect("upsert");
        index.remove(2).expect("remove");
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("text.snapshot");
        let table = saved_slots(&[0, 1, 7]);
        index
            .committed_files()
            .expect("files")
            .save(&path, 42, &table)
            .expect("save");
        let saved = TextIndex::load(&path).expect("load");
        assert_eq!(saved.slots, table);
        assert_eq!(saved.change_seq, 42);
        for query in ["weather", "current prices", "radar city", "pods", "whether"] {
            assert_eq!(
                scored(&saved.index, query),
                scored(&index, query),
                "{query}"
            );
        }
        // The loaded index is a working one.
        saved
            .index
            .upsert(8, &doc("Pod Doctor", "Fixes pods"))
            .expect("upsert");
        assert_eq!(slots(&saved.index, "pods"), vec![8]);
    }

    #[test]
    fn a_damaged_or_mismatched_snapshot_is_refused() {
        let index = sample();
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("text.snapshot");
        let files = index.committed_files().expect("files");
        files
            .save(&path, 1, &saved_slots(&[0, 1, 2]))
            .expect("save");
        let whole = std::fs::read(&path).expect("read");
        assert!(TextIndex::load(&path).is_ok());

        let truncated = dir.path().join("truncated.snapshot");
        std::fs::write(&truncated, &whole[..whole.len() - 40]).expect("write");
        assert!(TextIndex::load(&truncated).is_err());

        let flipped = dir.path().join("flipped.snapshot");
        let mut bytes = whole.clone();
        bytes[whole.len() / 3] ^= 1;
        std::fs::write(&flipped, bytes).expect("write");
        assert!(TextIndex::load(&flipped).is_err());

        // A slot table that does not match the documents.
        let short = dir.path().join("short.snapshot");
        files.save(&short, 1, &saved_slots(&[0, 1])).expect("save");
        let refused = TextIndex::load(&short).err().expect("refused");
        assert!(refused.contains("saved slots"), "{refused}");

        assert!(TextIndex::load(&dir.path().join("missing.snapshot")).is_err());
    }
}
