//! Keyword ranking: BM25 over an in-memory tantivy index of the ACTIVE agents' text fields,
//! with field boosts, English stemming and stop words, and typo tolerance for query terms that
//! occur nowhere in the index.

use std::sync::Mutex;

use tantivy::collector::{Collector, SegmentCollector};
use tantivy::columnar::Column;
use tantivy::query::{BooleanQuery, BoostQuery, FuzzyTermQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, TokenStream,
};
use tantivy::{
    DocId, Index, IndexReader, IndexWriter, ReloadPolicy, Score, SegmentOrdinal, SegmentReader,
    TantivyDocument, Term,
};

const ANALYZER: &str = "registry_en";
/// Query terms beyond this are ignored (a query is a sentence, not a document).
const MAX_QUERY_TERMS: usize = 32;
/// Terms shorter than this are never corrected (too many neighbours at distance 1).
const MIN_FUZZY_CHARS: usize = 4;
const FUZZY_BOOST: f32 = 0.5;

/// The text of one agent, field by field.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DocText {
    pub name: String,
    pub package_name: String,
    pub tags: String,
    pub category: String,
    pub description: String,
    pub capabilities: String,
}

struct Fields {
    slot: Field,
    /// (field, boost) for every searchable text field.
    text: [(Field, f32); 2],
}

/// The in-memory BM25 index. Documents are keyed by the search index's slot number.
pub struct TextIndex {
    writer: Mutex<IndexWriter>,
    reader: IndexReader,
    fields: Fields,
}

/// Why the text index failed; always a bug or resource exhaustion, never bad input.
#[derive(Debug, thiserror::Error)]
#[error("text index: {0}")]
pub struct TextIndexError(#[from] tantivy::TantivyError);

impl TextIndex {
    pub fn new() -> Result<Self, TextIndexError> {
        let mut builder = Schema::builder();
        let slot = builder.add_u64_field("slot", INDEXED | FAST);
        let options = TextOptions::default().set_indexing_options(
            TextFieldIndexing::default()
                .set_tokenizer(ANALYZER)
                .set_index_option(IndexRecordOption::WithFreqsAndPositions),
        );
        let mut text =
            |name: &str, boost: f32| (builder.add_text_field(name, options.clone()), boost);
        // Two fields, not one per source: each query term reads two posting lists instead of
        // six. The short fields that name an agent weigh more than the prose describing it.
        let fields = [text("head", 2.5), text("body", 1.0)];
        let index = Index::create_in_ram(builder.build());
        index.tokenizers().register(ANALYZER, analyzer());
        let writer = index.writer_with_num_threads(1, 20_000_000)?;
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Self {
            writer: Mutex::new(writer),
            reader,
            fields: Fields { slot, text: fields },
        })
    }

    fn document(&self, slot: u32, text: &DocText) -> TantivyDocument {
        let mut doc = TantivyDocument::default();
        doc.add_u64(self.fields.slot, u64::from(slot));
        let head = [&text.name, &text.package_name, &text.tags, &text.category];
        let body = [&text.description, &text.capabilities];
        let [(head_field, _), (body_field, _)] = self.fields.text;
        for value in head {
            doc.add_text(head_field, value);
        }
        for value in body {
            doc.add_text(body_field, value);
        }
        doc
    }

    /// Replace every document (start-up), in one commit.
    pub fn replace_all<'a>(
        &self,
        docs: impl Iterator<Item = (u32, &'a DocText)>,
    ) -> Result<(), TextIndexError> {
        let mut writer = self.lock_writer();
        writer.delete_all_documents()?;
        for (slot, text) in docs {
            writer.add_document(self.document(slot, text))?;
        }
        self.commit(&mut writer)
    }

    /// Index (or re-index) one document; searchable when this returns.
    pub fn upsert(&self, slot: u32, text: &DocText) -> Result<(), TextIndexError> {
        let mut writer = self.lock_writer();
        writer.delete_term(Term::from_field_u64(self.fields.slot, u64::from(slot)));
        writer.add_document(self.document(slot, text))?;
        self.commit(&mut writer)
    }

    pub fn remove(&self, slot: u32) -> Result<(), TextIndexError> {
        let mut writer = self.lock_writer();
        writer.delete_term(Term::from_field_u64(self.fields.slot, u64::from(slot)));
        self.commit(&mut writer)
    }

    fn commit(&self, writer: &mut IndexWriter) -> Result<(), TextIndexError> {
        writer.commit()?;
        self.reader.reload()?;
        Ok(())
    }

    fn lock_writer(&self) -> std::sync::MutexGuard<'_, IndexWriter> {
        self.writer
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Every document matching any query term, as `(slot, bm25 score)`, unordered.
    pub fn search(&self, text: &str) -> Result<Vec<(u32, f32)>, TextIndexError> {
        let terms = analyze(text);
        if terms.is_empty() {
            return Ok(Vec::new());
        }
        let searcher = self.reader.searcher();
        let mut clauses: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for term in &terms {
            let exact: Vec<(Term, f32)> = self
                .fields
                .text
                .iter()
                .map(|(field, boost)| (Term::from_field_text(*field, term), *boost))
                .collect();
            let known = exact
                .iter()
                .any(|(t, _)| searcher.doc_freq(t).is_ok_and(|freq| freq > 0));
            for (t, boost) in exact {
                if known {
                    let query = TermQuery::new(t, IndexRecordOption::WithFreqs);
                    clauses.push((
                        Occur::Should,
                        Box::new(BoostQuery::new(Box::new(query), boost)),
                    ));
                } else if term.chars().count() >= MIN_FUZZY_CHARS {
                    let distance = if term.chars().count() >= 8 { 2 } else { 1 };
                    let query = FuzzyTermQuery::new(t, distance, true);
                    clauses.push((
                        Occur::Should,
                        Box::new(BoostQuery::new(Box::new(query), boost * FUZZY_BOOST)),
                    ));
                }
            }
        }
        if clauses.is_empty() {
            return Ok(Vec::new());
        }
        let query = BooleanQuery::new(clauses);
        Ok(searcher.search(&query, &AllMatches)?)
    }
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

/// The distinct analysed terms of a query, in order.
fn analyze(text: &str) -> Vec<String> {
    let mut analyzer = analyzer();
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

/// Collects every match with its score.
struct AllMatches;

struct SegmentMatches {
    slots: Column<u64>,
    matches: Vec<(u32, f32)>,
}

impl Collector for AllMatches {
    type Fruit = Vec<(u32, f32)>;
    type Child = SegmentMatches;

    fn for_segment(
        &self,
        _segment: SegmentOrdinal,
        reader: &SegmentReader,
    ) -> tantivy::Result<SegmentMatches> {
        Ok(SegmentMatches {
            slots: reader.fast_fields().u64("slot")?,
            matches: Vec::new(),
        })
    }

    fn requires_scoring(&self) -> bool {
        true
    }

    fn merge_fruits(&self, fruits: Vec<Vec<(u32, f32)>>) -> tantivy::Result<Vec<(u32, f32)>> {
        Ok(fruits.into_iter().flatten().collect())
    }
}

impl SegmentCollector for SegmentMatches {
    type Fruit = Vec<(u32, f32)>;

    fn collect(&mut self, doc: DocId, score: Score) {
        if let Some(slot) = self.slots.first(doc).and_then(|s| u32::try_from(s).ok()) {
            self.matches.push((slot, score));
        }
    }

    fn harvest(self) -> Vec<(u32, f32)> {
        self.matches
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn names_outrank_descriptions() {
        let index = TextIndex::new().expect("index");
        let docs = [
            doc("Helper", "A weather helper."),
            doc("Weather", "A helper."),
        ];
        index
            .replace_all(docs.iter().enumerate().map(|(i, d)| (i as u32, d)))
            .expect("replace");
        assert_eq!(slots(&index, "weather"), [1, 0]);
    }

    #[test]
    fn unknown_terms_are_corrected_within_an_edit_or_two() {
        let index = sample();
        assert_eq!(slots(&index, "wether forcast"), [0]);
        assert_eq!(slots(&index, "kubernets"), [2]);
        assert!(slots(&index, "zzzzzz").is_empty());
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
}
