//! BM25 scoring: every known word's postings, and every unknown word's corrections, added
//! block by block into one dense accumulator per thread, whole or in two halves on two cores.

use tantivy::postings::TermInfo;
use tantivy::query::Bm25Weight;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocId, SegmentReader};

use super::visit::Parts;
use super::{Known, Segment, TextIndexError};

/// Score `parts`; a failed scoring leaves them clear for the next query.
pub(super) fn score<'a>(
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

/// Scores of every segment's documents for one query, and which of them the query touched.
/// Between queries every score is zero and every bit clear.
#[derive(Default)]
pub(super) struct Accumulator {
    scores: Vec<f32>,
    touched: Vec<u64>,
    /// A query is using it, or was when it panicked (so some entries may be left touched).
    in_use: bool,
}

impl Accumulator {
    /// Ready for `docs` documents (a multiple of 64), for a query that calls `done` when it is
    /// finished with them.
    pub(super) fn reset(&mut self, docs: usize) -> &mut Self {
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
    pub(super) fn done(&mut self) {
        self.in_use = false;
    }

    /// The first `docs` documents (a multiple of 64).
    pub(super) fn whole(&mut self, docs: usize) -> Scores<'_> {
        Scores {
            scores: &mut self.scores[..docs],
            touched: &mut self.touched[..docs / 64],
            first: 0,
            base: 0,
        }
    }
}

/// Part of the accumulator: the documents from `first` (a multiple of 64) on.
pub(super) struct Scores<'a> {
    pub(super) scores: &'a mut [f32],
    pub(super) touched: &'a mut [u64],
    pub(super) first: usize,
    /// Where the segment being scored starts.
    pub(super) base: usize,
}

impl Scores<'_> {
    /// Two parts, the first with half the documents (rounded to a multiple of 64).
    pub(super) fn halves(self) -> (Self, Self) {
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
    pub(super) fn score_at(&self, at: usize) -> Option<f32> {
        let index = at.checked_sub(self.first)?;
        let touched = self.touched.get(index / 64)? & (1 << (index % 64)) != 0;
        touched.then(|| self.scores[index])
    }

    /// How many documents the query touched in this part.
    pub(super) fn touched_count(&self) -> usize {
        self.touched
            .iter()
            .map(|word| word.count_ones() as usize)
            .sum()
    }

    /// This part's words of `segment`'s documents, as a range of `touched`.
    pub(super) fn words_of(&self, segment: &Segment<'_>) -> std::ops::Range<usize> {
        let within = self.within(segment);
        (within.start - self.first) / 64..(within.end - self.first).div_ceil(64)
    }

    /// Every touched document of `segment` in this part with its score (by position in the
    /// accumulator), ascending, leaving them clear.
    #[inline(always)]
    pub(super) fn drain(&mut self, segment: &Segment<'_>, visit: impl FnMut(usize, f32)) {
        let words = self.words_of(segment);
        self.drain_words(words, visit);
    }

    pub(super) fn drain_all(&mut self) {
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
    pub(super) static SCRATCH: std::cell::RefCell<Accumulator> = std::cell::RefCell::default();
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
