//! What the keyword index holds of an agent, and how its words and a query's are analysed:
//! three text fields (head, body, queries) with their boosts, English stemming and stop words.

use std::sync::LazyLock;

use tantivy::schema::{
    FAST, Field, INDEXED, IndexRecordOption, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::{
    AsciiFoldingFilter, Language, LowerCaser, RemoveLongFilter, SimpleTokenizer, Stemmer,
    StopWordFilter, TextAnalyzer, TokenStream,
};

use super::TEXT_FIELDS;

pub(super) const ANALYZER: &str = "registry_en";
/// Query terms beyond this are ignored (a query is a sentence, not a document).
const MAX_QUERY_TERMS: usize = 32;
/// The weight of the head field (name, package name, tags, category) against the body.
const HEAD_BOOST: f32 = 0.25;
/// The weight of the queries field (representative queries, or the card's skill examples)
/// against the body.
const QUERIES_BOOST: f32 = 1.0;
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

pub(super) struct Fields {
    pub(super) slot: Field,
    /// (field, boost) for every searchable text field.
    pub(super) text: [(Field, f32); TEXT_FIELDS],
}

/// The index's fields: each agent's slot, and its text in three fields.
pub(super) fn schema() -> (Schema, Fields) {
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

/// The analyzer of indexed text and queries alike.
pub(super) fn analyzer() -> TextAnalyzer {
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
pub(super) static QUERY_ANALYZER: LazyLock<TextAnalyzer> = LazyLock::new(analyzer);

/// The distinct analysed terms of a query, in order.
pub(super) fn analyze(text: &str) -> Vec<String> {
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
