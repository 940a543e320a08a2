//! The keyword index against tantivy's own scorers, and its writes, snapshots and typos.

use super::*;
use tantivy::collector::{Collector, SegmentCollector};
use tantivy::query::{BooleanQuery, BoostQuery, FuzzyTermQuery, Occur, Query};
use tantivy::schema::IndexRecordOption;
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
    let average =
        searcher.total_num_tokens(queries_field).expect("tokens") as f32 / with_words.max(1) as f32;
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
