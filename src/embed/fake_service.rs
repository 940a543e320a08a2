//! A fake OpenAI-compatible embeddings service on a local port, for the client's tests and the
//! embedder conformance suite.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};
use url::Url;

use super::openai::{OpenAiEmbedder, OpenAiSettings};

/// How the fake service answers.
#[derive(Clone, Copy)]
pub(super) enum Behaviour {
    /// Vectors of 3 dimensions, unnormalised, in reverse index order: input `i` of a request
    /// is (its length, `i`, 0).
    Good,
    /// Vectors of 3 dimensions that depend on the text alone, as a real service's do: (its
    /// length, the sum of its bytes modulo 97, 1).
    ByText,
    Unauthorized,
    ServerError,
    Malformed,
    OneTooFew,
    Slow,
}

#[derive(Clone)]
pub(super) struct Fake {
    behaviour: Behaviour,
    /// Requests answered.
    pub(super) requests: Arc<AtomicUsize>,
    /// The most inputs one request held.
    pub(super) largest_batch: Arc<AtomicUsize>,
}

async fn answer(State(fake): State<Fake>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    fake.requests.fetch_add(1, Ordering::SeqCst);
    let inputs = body["input"].as_array().cloned().unwrap_or_default();
    fake.largest_batch.fetch_max(inputs.len(), Ordering::SeqCst);
    let authorised = headers.get("authorization").and_then(|v| v.to_str().ok()) == Some("Bearer k");
    match fake.behaviour {
        Behaviour::Good if authorised => Json(good_answer(&inputs)).into_response(),
        Behaviour::ByText if authorised => Json(answer_by_text(&inputs)).into_response(),
        Behaviour::Good | Behaviour::ByText | Behaviour::Unauthorized => {
            (StatusCode::UNAUTHORIZED, r#"{"error":"bad key"}"#).into_response()
        }
        Behaviour::ServerError => (StatusCode::INTERNAL_SERVER_ERROR, "boom").into_response(),
        Behaviour::Malformed => (StatusCode::OK, "{\"data\": [").into_response(),
        Behaviour::OneTooFew => Json(good_answer(&inputs[1..])).into_response(),
        Behaviour::Slow => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            Json(good_answer(&inputs)).into_response()
        }
    }
}

/// Embedding of input `i` is (len, i, 0) for the input's text length: easy to check order.
fn good_answer(inputs: &[Value]) -> Value {
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .rev()
        .map(|(i, text)| {
            let len = text.as_str().map_or(0, str::len);
            json!({"object": "embedding", "index": i, "embedding": [len as f32, i as f32, 0.0]})
        })
        .collect();
    json!({"object": "list", "data": data, "model": "fake"})
}

/// A fake service answering as `behaviour` says, on a port of its own.
pub(super) async fn serve(behaviour: Behaviour) -> (Url, Fake) {
    let fake = Fake {
        behaviour,
        requests: Arc::default(),
        largest_batch: Arc::default(),
    };
    let app = axum::Router::new()
        .route("/v1/embeddings", post(answer))
        .with_state(fake.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let url = Url::parse(&format!("http://{}", listener.local_addr().expect("addr"))).expect("url");
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, fake)
}

/// Every input's vector from its text alone (see `Behaviour::ByText`), in index order.
fn answer_by_text(inputs: &[Value]) -> Value {
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(i, text)| {
            let text = text.as_str().unwrap_or_default();
            let sum = text.bytes().map(u32::from).sum::<u32>() % 97;
            json!({"object": "embedding", "index": i, "embedding": [text.len() as f32, sum as f32, 1.0]})
        })
        .collect();
    json!({"object": "list", "data": data, "model": "fake"})
}

/// A client of the fake service at `url`, with its key and a short timeout.
pub(super) fn embedder(url: Url) -> OpenAiEmbedder {
    let settings = OpenAiSettings {
        api_key: Some("k".into()),
        request_timeout: Duration::from_millis(300),
        ..OpenAiSettings::new(url, "fake-model".into())
    };
    OpenAiEmbedder::new(settings).expect("client builds")
}
