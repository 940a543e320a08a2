//! Typo correction: the words of a segment's term dictionary within a few edits of an unknown
//! query word.
//!
//! The words are found by walking the dictionary's FST with a Levenshtein automaton. tantivy's
//! own walk (`AutomatonWeight::get_match_term_infos`) decodes every child of a node it enters
//! and copies it onto its stack, with the key and output so far, before asking the automaton
//! whether it can still match: one walk at 10,000 agents cost about 1.4 million instructions,
//! and the corrections were half of a plain keyword search's instructions over the bench's
//! query set. The walk here asks the automaton about a transition's byte first and decodes only
//! the children it can still accept (about 0.54 million instructions a walk). It reads the same
//! FST bytes tantivy reads (found from the segment's term file, no copy), and finds the same
//! words: a test holds the two walks equal.

use std::io;
use std::sync::LazyLock;

use levenshtein_automata::LevenshteinAutomatonBuilder;
use tantivy::directory::{Directory, OwnedBytes};
use tantivy::index::InvertedIndexReader;
use tantivy::postings::TermInfo;
use tantivy::{Index, SegmentReader};
use tantivy_fst::Automaton;
use tantivy_fst::raw::Fst;

/// The words within a few edits of an unknown query word: one edit from 4 characters, two
/// from 8 (a transposition counts as one).
pub(super) struct Typos(levenshtein_automata::DFA);

impl Typos {
    pub(super) fn of(word: &str) -> Self {
        static ONE: LazyLock<LevenshteinAutomatonBuilder> =
            LazyLock::new(|| LevenshteinAutomatonBuilder::new(1, true));
        static TWO: LazyLock<LevenshteinAutomatonBuilder> =
            LazyLock::new(|| LevenshteinAutomatonBuilder::new(2, true));
        let builder = if word.chars().count() >= 8 {
            &TWO
        } else {
            &ONE
        };
        Self(builder.build_dfa(word))
    }
}

impl Automaton for Typos {
    type State = u32;

    fn start(&self) -> u32 {
        self.0.initial_state()
    }

    fn is_match(&self, state: &u32) -> bool {
        matches!(
            self.0.distance(*state),
            levenshtein_automata::Distance::Exact(_)
        )
    }

    fn can_match(&self, state: &u32) -> bool {
        *state != levenshtein_automata::SINK_STATE
    }

    fn accept(&self, state: &u32, byte: u8) -> u32 {
        self.0.transition(*state, byte)
    }
}

/// A segment field's term dictionary as the FST tantivy stores it; its outputs are term
/// ordinals. `None` for a field with no words in the segment (tantivy writes no dictionary for
/// it): nothing is within an edit of anything there.
pub(super) struct RawTerms(Option<Fst<OwnedBytes>>);

impl RawTerms {
    /// The FSTs of `fields`' term dictionaries in `segment`, in that order, or `None` when the
    /// term file cannot be read as expected (then tantivy's own walk answers): each must hold
    /// as many terms as tantivy's dictionary for the field. A field the file has no part for
    /// must have no terms (a segment none of whose documents has words in that field).
    pub(super) fn open<const N: usize>(
        index: &Index,
        segment: &SegmentReader,
        fields: [(tantivy::schema::Field, &InvertedIndexReader); N],
    ) -> Option<[RawTerms; N]> {
        // tantivy names a segment's files by its id and component (`SegmentMeta::relative_path`).
        let path = format!("{}.term", segment.segment_id().uuid_string());
        let bytes = index
            .directory()
            .open_read(std::path::Path::new(&path))
            .ok()?
            .read_bytes()
            .ok()?;
        let parts = composite_parts(&bytes).ok()?;
        let open = |(field, inverted): (tantivy::schema::Field, &InvertedIndexReader)| {
            let Some((_, _, range)) = parts
                .iter()
                .find(|(id, idx, _)| *id == field.field_id() && *idx == 0)
            else {
                return (inverted.terms().num_terms() == 0).then_some(RawTerms(None));
            };
            let fst = term_fst(bytes.slice(range.clone())).ok()?;
            (fst.len() == inverted.terms().num_terms()).then_some(RawTerms(Some(fst)))
        };
        let opened: Vec<RawTerms> = fields.into_iter().map(open).collect::<Option<_>>()?;
        opened.try_into().ok()
    }

    /// The term infos of every word `typos` accepts, in the dictionary's order.
    pub(super) fn corrections(
        &self,
        typos: &Typos,
        inverted: &InvertedIndexReader,
    ) -> io::Result<Vec<TermInfo>> {
        let terms = inverted.terms();
        let mut found = Vec::new();
        let mut failed = None;
        self.walk(typos, |word| match terms.get(word) {
            Ok(Some(info)) => found.push(info),
            Ok(None) => failed = Some(io::Error::from(io::ErrorKind::InvalidData)),
            Err(err) => failed = Some(err),
        });
        failed.map_or(Ok(found), Err)
    }

    /// Call `found` with every word `automaton` accepts, depth first. A transition is followed
    /// only when the automaton can still match after its byte.
    fn walk<A: Automaton>(&self, automaton: &A, mut found: impl FnMut(&[u8])) {
        let Some(fst) = &self.0 else {
            return;
        };
        let root = fst.root();
        let start = automaton.start();
        if !automaton.can_match(&start) {
            return;
        }
        if root.is_final() && automaton.is_match(&start) {
            found(&[]);
        }
        // Per depth: the node, its next transition and the automaton's state; `word` holds the
        // bytes that led to the deepest.
        let mut stack = vec![(root, 0usize, start)];
        let mut word = Vec::new();
        while let Some((node, next, state)) = stack.last_mut() {
            if *next >= node.len() {
                stack.pop();
                word.pop();
                continue;
            }
            let transition = node.transition(*next);
            *next += 1;
            let after = automaton.accept(state, transition.inp);
            if !automaton.can_match(&after) {
                continue;
            }
            let child = fst.node(transition.addr);
            word.push(transition.inp);
            if child.is_final() && automaton.is_match(&after) {
                found(&word);
            }
            stack.push((child, 0, after));
        }
    }
}

/// The parts of a composite file (one per field and index): field id, index and byte range.
/// Its footer, at the end: the parts' count, then per part the offset from the previous one
/// and its address (field id as a little-endian `u32`, index), all as tantivy's variable-length
/// integers, then the footer's own length as a little-endian `u32`.
fn composite_parts(bytes: &[u8]) -> io::Result<Vec<(u32, u64, std::ops::Range<usize>)>> {
    let invalid = || io::Error::from(io::ErrorKind::InvalidData);
    let end = bytes.len().checked_sub(4).ok_or_else(invalid)?;
    let footer_len = u32::from_le_bytes(bytes[end..].try_into().map_err(|_| invalid())?) as usize;
    let footer_start = end.checked_sub(footer_len).ok_or_else(invalid)?;
    let mut footer = &bytes[footer_start..end];
    let count = vint(&mut footer)?;
    let mut starts = Vec::new();
    let mut offset = 0usize;
    for _ in 0..count {
        offset = offset
            .checked_add(usize::try_from(vint(&mut footer)?).map_err(|_| invalid())?)
            .ok_or_else(invalid)?;
        let (id, rest) = footer.split_first_chunk::<4>().ok_or_else(invalid)?;
        footer = rest;
        let idx = vint(&mut footer)?;
        starts.push((u32::from_le_bytes(*id), idx, offset));
    }
    let mut parts = Vec::with_capacity(starts.len());
    for (i, (id, idx, start)) in starts.iter().enumerate() {
        let stop = starts.get(i + 1).map_or(footer_start, |next| next.2);
        if *start > stop || stop > footer_start {
            return Err(invalid());
        }
        parts.push((*id, *idx, *start..stop));
    }
    Ok(parts)
}

/// tantivy's variable-length integer: 7 bits a byte, low first, the last byte's high bit set.
fn vint(bytes: &mut &[u8]) -> io::Result<u64> {
    let mut value = 0u64;
    for shift in (0..64).step_by(7) {
        let (&byte, rest) = bytes
            .split_first()
            .ok_or_else(|| io::Error::from(io::ErrorKind::UnexpectedEof))?;
        *bytes = rest;
        value |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 != 0 {
            return Ok(value);
        }
    }
    Err(io::Error::from(io::ErrorKind::InvalidData))
}

/// The FST of one field's term dictionary: the dictionary ends with the length of its term
/// infos (`u64`), the FST dictionary's format version (`u32`, 1) and the dictionary's kind
/// (`u32`, 1 for an FST), and the FST comes before those infos.
fn term_fst(dictionary: OwnedBytes) -> io::Result<Fst<OwnedBytes>> {
    let invalid = || io::Error::from(io::ErrorKind::InvalidData);
    let len = dictionary.len();
    let footer = len.checked_sub(16).ok_or_else(invalid)?;
    if dictionary.as_slice()[footer + 8..] != [1, 0, 0, 0, 1, 0, 0, 0] {
        return Err(invalid());
    }
    let infos = u64::from_le_bytes(
        dictionary.as_slice()[footer..footer + 8]
            .try_into()
            .map_err(|_| invalid())?,
    );
    let fst_end = footer
        .checked_sub(usize::try_from(infos).map_err(|_| invalid())?)
        .ok_or_else(invalid)?;
    Fst::new(dictionary.slice(0..fst_end)).map_err(|_| invalid())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A composite file's footer for parts at `offsets` (field ids 0, 1, …), over `body` bytes.
    fn composite(body: usize, offsets: &[u8]) -> Vec<u8> {
        let mut bytes = vec![0u8; body];
        let footer_start = bytes.len();
        bytes.push(0x80 | offsets.len() as u8);
        let mut previous = 0;
        for (field, offset) in offsets.iter().enumerate() {
            bytes.push(0x80 | (offset - previous));
            bytes.extend_from_slice(&(field as u32).to_le_bytes());
            bytes.push(0x80);
            previous = *offset;
        }
        let footer_len = (bytes.len() - footer_start) as u32;
        bytes.extend_from_slice(&footer_len.to_le_bytes());
        bytes
    }

    #[test]
    fn a_composite_footer_reads_into_parts_and_a_broken_one_is_refused() {
        let parts = composite_parts(&composite(10, &[0, 4])).expect("parts");
        assert_eq!(parts, [(0, 0, 0..4), (1, 0, 4..10)]);
        // A part past the footer, a footer longer than the file, too short a file, or an
        // integer without its last byte: refused, never a panic.
        assert!(composite_parts(&composite(10, &[0, 12])).is_err());
        let mut long = composite(10, &[0]);
        let at = long.len() - 4;
        long[at..].copy_from_slice(&1000u32.to_le_bytes());
        assert!(composite_parts(&long).is_err());
        assert!(composite_parts(&[1, 2]).is_err());
        assert!(vint(&mut &[0x01u8, 0x02][..]).is_err());
    }
}
