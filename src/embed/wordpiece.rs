//! BERT-uncased tokenisation (normalise, split, WordPiece), identical to the model's `tokenizer.json`.
//!
//! Mirrors Hugging Face `tokenizers`: `BertNormalizer` (drop control characters, map whitespace to
//! a space, isolate CJK ideographs, NFD and drop non-spacing marks, lowercase), `BertPreTokenizer`
//! (split on whitespace, isolate punctuation), then greedy longest-match WordPiece with `##`
//! continuations and `[UNK]` for a word that cannot be pieced. The special tokens written
//! literally in the text (`[CLS]`, `[SEP]`, …) match first, as the reference's added tokens do.
//! Character classes come from `unicode_categories`, the same tables the reference uses, so the
//! two agree even on characters that newer Unicode versions reclassified.

use std::collections::HashMap;

use unicode_categories::UnicodeCategories;
use unicode_normalization::UnicodeNormalization;

use super::EmbedError;

/// Longest word (in characters) that WordPiece splits; a longer one becomes `[UNK]`.
const MAX_INPUT_CHARS_PER_WORD: usize = 100;

/// The special tokens of the BERT vocabulary, matched verbatim in the input text.
pub const SPECIAL_TOKENS: [&str; 5] = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"];

/// A WordPiece vocabulary and the BERT-uncased rules around it.
#[derive(Debug, Clone)]
pub struct WordPiece {
    /// Pieces that may start a word, by text.
    starts: HashMap<Box<str>, u32>,
    /// `##` pieces, keyed without the `##` prefix (so lookups need no allocation).
    continuations: HashMap<Box<str>, u32>,
    /// Special tokens present in the vocabulary, with their ids.
    specials: Vec<(&'static str, u32)>,
    unk: u32,
    len: usize,
}

/// `[CLS] tokens [SEP]`, the tokens truncated so the whole is at most `max` ids: how a BERT-style
/// model (MiniLM, bge-small) reads a text.
pub fn frame(tokens: &[u32], cls: u32, sep: u32, max: usize) -> Vec<u32> {
    let kept = &tokens[..tokens.len().min(max.saturating_sub(2))];
    let mut ids = Vec::with_capacity(kept.len() + 2);
    ids.push(cls);
    ids.extend_from_slice(kept);
    ids.push(sep);
    ids
}

impl WordPiece {
    /// Builds the tokeniser from the vocabulary in id order (line `i` of `vocab.txt` is id `i`).
    pub fn from_tokens<'a>(tokens: impl IntoIterator<Item = &'a str>) -> Result<Self, EmbedError> {
        let mut starts = HashMap::new();
        let mut continuations = HashMap::new();
        let mut len = 0usize;
        for (id, token) in tokens.into_iter().enumerate() {
            let id = u32::try_from(id)
                .map_err(|_| EmbedError::Model("vocabulary has more than 2^32 tokens".into()))?;
            match token.strip_prefix("##") {
                Some(rest) => continuations.insert(rest.into(), id),
                None => starts.insert(token.into(), id),
            };
            len += 1;
        }
        let specials: Vec<(&'static str, u32)> = SPECIAL_TOKENS
            .iter()
            .filter_map(|special| starts.get(*special).map(|id| (*special, *id)))
            .collect();
        let unk = *starts
            .get("[UNK]")
            .ok_or_else(|| EmbedError::Model("vocabulary has no [UNK] token".into()))?;
        Ok(Self {
            starts,
            continuations,
            specials,
            unk,
            len,
        })
    }

    /// Number of tokens in the vocabulary.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the vocabulary is empty (never true for a built tokeniser: it has `[UNK]`).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The id of a token written as in the vocabulary (`##` prefix for continuations).
    pub fn id(&self, token: &str) -> Option<u32> {
        match token.strip_prefix("##") {
            Some(rest) => self.continuations.get(rest).copied(),
            None => self.starts.get(token).copied(),
        }
    }

    /// The id of `[UNK]`.
    pub fn unk_id(&self) -> u32 {
        self.unk
    }

    /// Token ids of `text`, without `[CLS]`/`[SEP]`.
    pub fn encode(&self, text: &str) -> Vec<u32> {
        let mut ids = Vec::new();
        self.encode_into(text, &mut ids);
        ids
    }

    /// Appends the token ids of `text` (without `[CLS]`/`[SEP]`) to `ids`.
    pub fn encode_into(&self, text: &str, ids: &mut Vec<u32>) {
        let mut rest = text;
        while let Some((before, special, after)) = self.next_special(rest) {
            self.encode_plain(before, ids);
            ids.push(special);
            rest = after;
        }
        self.encode_plain(rest, ids);
    }

    /// The first special token written in `text`: the text before it, its id, the text after it.
    fn next_special<'t>(&self, text: &'t str) -> Option<(&'t str, u32, &'t str)> {
        let mut from = 0;
        while let Some(offset) = text[from..].find('[') {
            let at = from + offset;
            let candidate = &text[at..];
            if let Some((special, id)) = self
                .specials
                .iter()
                .find(|(special, _)| candidate.starts_with(special))
            {
                return Some((&text[..at], *id, &candidate[special.len()..]));
            }
            from = at + 1;
        }
        None
    }

    /// Normalises, splits into words and pieces `text`, which holds no special token.
    fn encode_plain(&self, text: &str, ids: &mut Vec<u32>) {
        if text.is_ascii() {
            self.split_words(text.bytes().filter_map(normalized_ascii), ids);
        } else {
            self.split_words(normalized_chars(text), ids);
        }
    }

    /// Splits normalised characters on whitespace and punctuation and pieces each word.
    fn split_words(&self, chars: impl Iterator<Item = char>, ids: &mut Vec<u32>) {
        let mut word = String::new();
        for c in chars {
            if c.is_whitespace() {
                self.flush_word(&mut word, ids);
            } else if is_bert_punctuation(c) {
                self.flush_word(&mut word, ids);
                word.push(c);
                self.flush_word(&mut word, ids);
            } else {
                word.push(c);
            }
        }
        self.flush_word(&mut word, ids);
    }

    fn flush_word(&self, word: &mut String, ids: &mut Vec<u32>) {
        if !word.is_empty() {
            self.piece_word(word, ids);
            word.clear();
        }
    }

    /// Greedy longest-match-first WordPiece of one word; the whole word is `[UNK]` if any part fails.
    fn piece_word(&self, word: &str, ids: &mut Vec<u32>) {
        if word.chars().count() > MAX_INPUT_CHARS_PER_WORD {
            ids.push(self.unk);
            return;
        }
        let first = ids.len();
        let mut start = 0;
        while start < word.len() {
            match self.longest_piece(word, start) {
                Some((id, end)) => {
                    ids.push(id);
                    start = end;
                }
                None => {
                    ids.truncate(first);
                    ids.push(self.unk);
                    return;
                }
            }
        }
    }

    /// The longest vocabulary piece of `word` starting at byte `start`, and where it ends.
    fn longest_piece(&self, word: &str, start: usize) -> Option<(u32, usize)> {
        let table = if start == 0 {
            &self.starts
        } else {
            &self.continuations
        };
        let mut end = word.len();
        while end > start {
            if let Some(id) = table.get(&word[start..end]) {
                return Some((*id, end));
            }
            end = word[..end]
                .char_indices()
                .next_back()
                .map_or(start, |(at, _)| at);
        }
        None
    }
}

/// The characters of `text` after `BertNormalizer` (clean, isolate CJK, strip accents, lowercase).
fn normalized_chars(text: &str) -> impl Iterator<Item = char> + '_ {
    text.chars()
        .filter(|c| !(*c == '\0' || *c == '\u{fffd}' || is_control(*c)))
        .map(|c| if is_whitespace(c) { ' ' } else { c })
        .flat_map(|c| {
            let (before, after) = if is_chinese_char(c) {
                (Some(' '), Some(' '))
            } else {
                (None, None)
            };
            before.into_iter().chain(std::iter::once(c)).chain(after)
        })
        .nfd()
        .filter(|c| !c.is_mark_nonspacing())
        .flat_map(char::to_lowercase)
}

/// `normalized_chars` for one ASCII byte, without table lookups: ASCII has no accents, no CJK,
/// and its only control characters are C0 and DEL.
fn normalized_ascii(byte: u8) -> Option<char> {
    match byte {
        b'\t' | b'\n' | b'\r' => Some(' '),
        0..=0x1f | 0x7f => None,
        _ => Some(char::from(byte.to_ascii_lowercase())),
    }
}

/// Whitespace for the normaliser: tab, newline and carriage return count, as does Unicode White_Space.
fn is_whitespace(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r') || c.is_whitespace()
}

/// Control, format and private-use characters, which the normaliser drops (tab/newline excepted).
fn is_control(c: char) -> bool {
    !matches!(c, '\t' | '\n' | '\r') && c.is_other()
}

/// ASCII punctuation and symbols, and Unicode punctuation: each becomes a word of its own.
fn is_bert_punctuation(c: char) -> bool {
    if c.is_ascii() {
        c.is_ascii_punctuation()
    } else {
        c.is_punctuation()
    }
}

/// CJK Unified Ideographs (and their extensions and compatibility blocks), tokenised one by one.
fn is_chinese_char(c: char) -> bool {
    matches!(
        u32::from(c),
        0x4E00..=0x9FFF
            | 0x3400..=0x4DBF
            | 0x20000..=0x2A6DF
            | 0x2A700..=0x2B73F
            | 0x2B740..=0x2B81F
            | 0x2B920..=0x2CEAF
            | 0xF900..=0xFAFF
            | 0x2F800..=0x2FA1F
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> WordPiece {
        let vocab = [
            "[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff", "##able", "hello", ",",
            "!", "cafe", "北", "京", "a", "##b", "b", "[", "]",
        ];
        WordPiece::from_tokens(vocab).expect("tiny vocabulary")
    }

    #[test]
    fn a_word_is_split_greedily_into_the_longest_pieces() {
        assert_eq!(tiny().encode("unaffable"), vec![5, 6, 7]);
    }

    #[test]
    fn a_word_that_cannot_be_pieced_is_one_unknown_token() {
        assert_eq!(tiny().encode("unaffablex hello"), vec![1, 8]);
    }

    #[test]
    fn punctuation_is_split_off_and_case_and_accents_are_dropped() {
        assert_eq!(tiny().encode("HELLO,Café!"), vec![8, 9, 11, 10]);
    }

    #[test]
    fn cjk_ideographs_are_tokens_of_their_own() {
        assert_eq!(tiny().encode("北京"), vec![12, 13]);
    }

    #[test]
    fn special_tokens_written_in_the_text_are_matched_verbatim() {
        assert_eq!(tiny().encode("a[SEP]b [sep]"), vec![14, 3, 16, 17, 1, 18]);
    }

    #[test]
    fn words_longer_than_a_hundred_characters_are_unknown() {
        assert_eq!(tiny().encode(&"ab".repeat(51)), vec![1]);
    }

    #[test]
    fn control_characters_vanish_and_odd_whitespace_separates_words() {
        assert_eq!(
            tiny().encode("a\u{0}\u{200b}b\u{3000}hello"),
            vec![14, 15, 8]
        );
    }

    #[test]
    fn tokenisation_matches_the_reference_tokenizer_on_hundreds_of_varied_texts() {
        let embedder = crate::embed::StaticEmbedder::builtin().expect("built-in table");
        let cases = include_str!("testdata/wordpiece_cases.jsonl");
        let mut checked = 0;
        let mut mismatches = Vec::new();
        for line in cases.lines() {
            let (text, expected): (String, Vec<u32>) = serde_json::from_str(line).expect("a case");
            let actual = embedder.tokenizer().encode(&text);
            if actual != expected {
                mismatches.push(format!("{text:?}: {actual:?} != {expected:?}"));
            }
            checked += 1;
        }
        assert!(checked > 300, "only {checked} cases");
        assert!(
            mismatches.is_empty(),
            "{} of {checked} differ:\n{}",
            mismatches.len(),
            mismatches.join("\n")
        );
    }

    #[test]
    fn the_ascii_shortcut_normalises_like_the_general_path() {
        for byte in 0u8..=0x7f {
            let general: Vec<char> = normalized_chars(&char::from(byte).to_string()).collect();
            let shortcut: Vec<char> = normalized_ascii(byte).into_iter().collect();
            assert_eq!(general, shortcut, "byte {byte:#x}");
            let c = char::from(byte);
            assert_eq!(
                is_bert_punctuation(c),
                c.is_ascii_punctuation() || c.is_punctuation()
            );
        }
    }

    #[test]
    fn a_vocabulary_without_unk_is_refused() {
        assert!(WordPiece::from_tokens(["a", "b"]).is_err());
    }
}
