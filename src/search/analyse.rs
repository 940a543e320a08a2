//! Query analysis for conversational text: what of a sentence says what the user needs.
//!
//! People and LLM agents ask in sentences ("can you find me something that tells me how long my
//! parcel will take to arrive?"). The words that carry the task ("parcel", "arrive") are a few
//! among pronouns, question words, requests and hedges. Those fillers are rare in agent
//! descriptions but common in agent *names* ("Take", "My Assistant", "How-To"), so BM25 gives
//! them a high IDF and a sentence ranks agents by the wrong words.
//!
//! The analysis drops fillers in two tiers, by the length of the query:
//! - from [`SENTENCE_WORDS_FUNCTION`] words on, function words that never describe a
//!   capability (pronouns, auxiliaries, question words, politeness);
//! - from [`SENTENCE_WORDS_REQUEST`] words on, also the words of asking and of everyday
//!   narration ("need", "help", "something", "keep", "week") that in a sentence frame the
//!   task rather than state it.
//!
//! Short queries are search-box keywords and are kept whole: "how to", "my calendar" or
//! "need finder" mean what they say. When every word is a filler the query is kept whole too,
//! so a query never becomes empty.

use std::borrow::Cow;

/// Queries of at least this many words lose their function words.
pub const SENTENCE_WORDS_FUNCTION: usize = 4;
/// Queries of at least this many words also lose the words of asking and narration.
pub const SENTENCE_WORDS_REQUEST: usize = 6;

/// Pronouns, auxiliaries, question words, determiners and politeness (sorted: binary search).
#[rustfmt::skip]
const FUNCTION_WORDS: &[&str] = &[
    "a", "about", "also", "am", "an", "any", "anyone", "anything", "are", "be", "been", "being",
    "can", "cannot", "cant", "could", "couldnt", "did", "didnt", "do", "does", "doesnt", "doing",
    "dont", "had", "has", "have", "having", "he", "hello", "her", "hers", "hes", "hey", "hi",
    "him", "his", "how", "i", "id", "ill", "im", "is", "isnt", "it", "its", "ive", "just", "may",
    "me", "might", "mine", "must", "my", "myself", "ok", "okay", "our", "ours", "ourselves",
    "please", "really", "shall", "she", "shes", "should", "so", "some", "somebody", "someone",
    "something", "somewhere", "thank", "thanks", "thats", "their", "theirs", "them", "there",
    "theres", "these", "they", "theyre", "those", "too", "us", "very", "was", "we", "wed", "were",
    "weve", "what", "whats", "when", "where", "whether", "which", "who", "whom", "whose", "why",
    "will", "wont", "would", "you", "your", "youre", "yours", "yourself",
];

/// The words of asking, hedging and everyday narration: in a sentence they frame the task
/// (sorted).
#[rustfmt::skip]
const REQUEST_WORDS: &[&str] = &[
    "able", "actually", "again", "already", "always", "another", "anybody", "anymore", "basically",
    "best", "better", "bit", "currently", "day", "days", "easier", "easily", "easy", "else",
    "even", "ever", "every", "everything", "figure", "find", "finding", "get", "gets", "getting",
    "give", "go", "goes", "going", "good", "got", "guess", "happen", "happens", "help", "helping",
    "helps", "hopefully", "idea", "instead", "keep", "keeps", "kept", "kind", "know", "lately",
    "let", "lets", "like", "long", "look", "looking", "lot", "lots", "make", "makes", "making",
    "maybe", "mean", "much", "need", "needed", "needs", "never", "nice", "now", "often", "one",
    "ones", "perhaps", "possible", "pretty", "quick", "quickly", "rather", "right", "said", "say",
    "says", "see", "seems", "simple", "simply", "sometime", "sometimes", "soon", "sort", "still",
    "stuff", "sure", "take", "takes", "taking", "tell", "thing", "things", "think", "today",
    "tomorrow", "tool", "tools", "try", "trying", "use", "using", "usually", "want", "wanted",
    "wants", "way", "ways", "week", "weeks", "whatever", "whenever", "wish", "wonder", "wondering",
    "yesterday",
];

/// The text of `query` that keyword ranking should match: the query without its fillers when
/// it is a sentence, the query itself otherwise (see the module notes).
pub fn content_text(query: &str) -> Cow<'_, str> {
    let words: Vec<&str> = words(query).collect();
    if words.len() < SENTENCE_WORDS_FUNCTION {
        return Cow::Borrowed(query);
    }
    let sentence = words.len() >= SENTENCE_WORDS_REQUEST;
    let kept: Vec<&str> = words
        .iter()
        .copied()
        .filter(|word| !is_filler(word, sentence))
        .collect();
    if kept.is_empty() || kept.len() == words.len() {
        return Cow::Borrowed(query);
    }
    Cow::Owned(kept.join(" "))
}

/// Whether `query` is a sentence (at least [`SENTENCE_WORDS_REQUEST`] words), not keywords.
pub fn is_sentence(query: &str) -> bool {
    words(query).count() >= SENTENCE_WORDS_REQUEST
}

fn words(query: &str) -> impl Iterator<Item = &str> {
    query
        .split(|c: char| !(c.is_alphanumeric() || c == '\'' || c == '’'))
        .filter(|word| !word.is_empty())
}

fn is_filler(word: &str, sentence: bool) -> bool {
    let folded: String = word
        .chars()
        .filter(|c| *c != '\'' && *c != '’')
        .flat_map(char::to_lowercase)
        .collect();
    let listed = |list: &[&str]| list.binary_search(&folded.as_str()).is_ok();
    listed(FUNCTION_WORDS) || (sentence && listed(REQUEST_WORDS))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_keeps_the_words_of_its_task() {
        assert_eq!(
            content_text("Can you tell me how long my parcel will take to arrive this week?"),
            "parcel to arrive this"
        );
        assert_eq!(
            content_text("I need something that helps me keep track of my invoices"),
            "that track of invoices"
        );
    }

    #[test]
    fn short_queries_are_keywords_and_stay_whole() {
        for query in [
            "how to",
            "my calendar",
            "need finder",
            "take notes",
            "weather",
        ] {
            assert_eq!(content_text(query), query);
        }
    }

    #[test]
    fn four_words_lose_function_words_but_not_requests() {
        assert_eq!(content_text("help me with invoices"), "help with invoices");
    }

    #[test]
    fn the_word_lists_are_sorted_lowercase_and_without_apostrophes() {
        for list in [FUNCTION_WORDS, REQUEST_WORDS] {
            assert!(list.windows(2).all(|pair| pair[0] < pair[1]));
            assert!(
                list.iter()
                    .all(|word| word.chars().all(|c| c.is_ascii_lowercase()))
            );
        }
    }

    #[test]
    fn a_query_of_fillers_only_is_kept_whole() {
        let query = "can you help me, what do I need?";
        assert_eq!(content_text(query), query);
    }

    #[test]
    fn contractions_and_case_are_folded() {
        assert_eq!(
            content_text("I'm looking for a way to convert PDFs, can't find one"),
            "for to convert PDFs"
        );
    }
}
