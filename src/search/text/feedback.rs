//! Pseudo-relevance feedback: the words a query's nearest agents by meaning share, to add to
//! its keyword query.

use std::collections::HashMap;

use tantivy::Term;
use tantivy::tokenizer::TokenStream;

use super::TextIndex;
use super::schema::{QUERY_ANALYZER, analyze};

/// Pseudo-relevance feedback reads at most this many words of each document.
const FEEDBACK_WORDS: usize = 256;
impl TextIndex {
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
        let query = analyze(&super::super::analyse::content_text(text));
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
}
