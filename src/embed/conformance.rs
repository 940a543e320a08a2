//! What every embedder promises (`Embedder`), checked once and run for each of them: the
//! built-in static table, MiniLM, bge-small and the OpenAI-compatible client (against a fake
//! service). Each embedder's own tests keep what is its alone: agreement with an independent
//! reference, truncation, errors.
//!
//! The model embedders run when their files are present and fail when they are not, unless
//! `REGISTRY_SKIP_MODEL_TESTS=1` (bge-small) or `REGISTRY_SKIP_MINILM_TESTS=1` (MiniLM) says to
//! skip them (`bge::fetched_dir`, `minilm::fetched_dir`).

use super::fake_service::{Behaviour, embedder, serve};
use super::{Embedder, dot};

/// Texts with something to embed: words, a sentence, other scripts, accents and a symbol.
const TEXTS: &[&str] = &[
    "a",
    "Search GitHub issues",
    "current price of bitcoin",
    "a somewhat longer sentence about invoices and payments",
    "北京天气预报",
    "naïve café ☕ résumé",
];

/// Texts with nothing to embed.
const EMPTY: &[&str] = &["", "  \n"];

/// What an embedder under test must be.
struct Subject<'a> {
    embedder: &'a dyn Embedder,
    /// Its id, which every instance made the same way has.
    id: &'a str,
    /// The local embedders give a text with nothing to embed the zero vector; a service
    /// answers what it answers (a unit vector, or zero).
    empty_is_zero: bool,
}

fn owned(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|text| (*text).to_owned()).collect()
}

fn is_zero(vector: &[f32]) -> bool {
    vector.iter().all(|value| *value == 0.0)
}

fn is_unit(vector: &[f32]) -> bool {
    (dot(vector, vector) - 1.0).abs() < 1e-4
}

/// The same vector, up to the last bits of a computation in another batch.
fn same(a: &[f32], b: &[f32]) -> bool {
    a.len() == b.len() && ((is_zero(a) && is_zero(b)) || dot(a, b) > 0.99999)
}

/// Every check of the suite, in turn.
async fn conforms(subject: Subject<'_>) {
    let Subject {
        embedder,
        id,
        empty_is_zero,
    } = subject;
    assert_eq!(embedder.id(), id);
    assert!(!id.is_empty());
    let texts = owned(&[TEXTS, EMPTY].concat());
    let vectors = embedder.embed(&texts).await.expect("embeds");
    // One vector per text, in order, each as long as `dim` says (a service that learns its
    // width from its first answer knows it by now).
    assert_eq!(vectors.len(), texts.len());
    assert!(embedder.dim() > 0);
    for (text, vector) in texts.iter().zip(&vectors) {
        assert_eq!(vector.len(), embedder.dim(), "{text:?}");
        assert!(vector.iter().all(|value| value.is_finite()), "{text:?}");
    }
    // L2-normalised; nothing to embed gives the zero vector where the embedder says so.
    for (text, vector) in TEXTS.iter().zip(&vectors) {
        assert!(is_unit(vector), "{text:?}: |v|² = {}", dot(vector, vector));
    }
    for (text, vector) in EMPTY.iter().zip(&vectors[TEXTS.len()..]) {
        if empty_is_zero {
            assert!(is_zero(vector), "{text:?}");
        } else {
            assert!(is_zero(vector) || is_unit(vector), "{text:?}");
        }
    }
    // Different texts, different vectors.
    assert!(dot(&vectors[1], &vectors[2]) < 0.99);
    // Deterministic: the same texts again give the same vectors, to the bit.
    let again = embedder.embed(&texts).await.expect("embeds again");
    assert_eq!(again, vectors);
    // A text's vector does not depend on the batch it came in.
    for (text, batched) in texts.iter().zip(&vectors) {
        let alone = embedder
            .embed(std::slice::from_ref(text))
            .await
            .expect("embeds one");
        assert_eq!(alone.len(), 1);
        assert!(same(&alone[0], batched), "{text:?}");
    }
    // No texts, no vectors; and the id has not moved.
    assert!(embedder.embed(&[]).await.expect("embeds none").is_empty());
    assert_eq!(embedder.id(), id);
}

#[tokio::test]
async fn the_static_table_conforms() {
    let embedder = super::StaticEmbedder::builtin().expect("the built-in table parses");
    let id = super::StaticEmbedder::builtin()
        .expect("parses again")
        .id()
        .to_owned();
    conforms(Subject {
        embedder: &embedder,
        id: &id,
        empty_is_zero: true,
    })
    .await;
}

#[tokio::test]
async fn minilm_conforms() {
    let Some(dir) = super::minilm::fetched_dir() else {
        return;
    };
    let embedder = super::MiniLmEmbedder::load(&dir).expect("the fetched weights load");
    conforms(Subject {
        embedder: &embedder,
        id: super::minilm::MINILM_ID,
        empty_is_zero: true,
    })
    .await;
}

#[tokio::test]
async fn bge_small_conforms() {
    let Some(dir) = super::bge::fetched_dir() else {
        return;
    };
    let embedder = super::BgeEmbedder::load(&dir).expect("the fetched model loads");
    conforms(Subject {
        embedder: &embedder,
        id: super::bge::BGE_ID,
        empty_is_zero: true,
    })
    .await;
}

#[tokio::test]
async fn the_openai_client_conforms() {
    let (url, _) = serve(Behaviour::ByText).await;
    let embedder = embedder(url);
    conforms(Subject {
        embedder: &embedder,
        id: "openai:fake-model@native",
        empty_is_zero: false,
    })
    .await;
}
