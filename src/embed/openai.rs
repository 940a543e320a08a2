//! An OpenAI-compatible `/v1/embeddings` client (Ollama, TEI, vLLM, OpenAI) behind the embedder seam.
//!
//! Inputs go in batches of at most [`MAX_BATCH`]; each answer is sorted by `index`, checked for
//! count and dimensions, and L2-normalised here (services differ on whether they normalise).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use url::Url;

use super::{EmbedError, Embedder, l2_normalize};

/// Most inputs sent in one request.
pub const MAX_BATCH: usize = 64;

/// How much of an error body is kept in [`EmbedError::UpstreamStatus`].
const ERROR_BODY_CHARS: usize = 200;

/// Where and how to reach the embeddings service.
#[derive(Clone)]
pub struct OpenAiSettings {
    /// API origin; `/v1/embeddings` is appended (a trailing `/v1` is tolerated).
    pub url: Url,
    /// Model name sent with every request.
    pub model: String,
    /// Bearer key, if the service needs one.
    pub api_key: Option<String>,
    /// Output dimensions to ask for (models that support shortening); also fixes [`Embedder::dim`].
    pub dimensions: Option<u32>,
    /// Time allowed to open a connection.
    pub connect_timeout: Duration,
    /// Time allowed for one whole request.
    pub request_timeout: Duration,
}

impl OpenAiSettings {
    /// Settings with the default timeouts (connect 5 s, request 30 s), no key, native dimensions.
    pub fn new(url: Url, model: String) -> Self {
        Self {
            url,
            model,
            api_key: None,
            dimensions: None,
            connect_timeout: Duration::from_secs(5),
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// Embeds through an OpenAI-compatible HTTP service.
pub struct OpenAiEmbedder {
    client: reqwest::Client,
    endpoint: Url,
    model: String,
    api_key: Option<String>,
    requested_dimensions: Option<u32>,
    /// Known output width: the requested one, or learnt from the first answer (0 until then).
    dim: AtomicUsize,
    id: String,
}

#[derive(Serialize)]
struct EmbeddingRequest<'a> {
    model: &'a str,
    input: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    dimensions: Option<u32>,
}

#[derive(Deserialize)]
struct EmbeddingResponse {
    data: Vec<EmbeddingItem>,
}

#[derive(Deserialize)]
struct EmbeddingItem {
    index: usize,
    embedding: Vec<f32>,
}

impl OpenAiEmbedder {
    /// A client for `settings`; makes no request yet.
    pub fn new(settings: OpenAiSettings) -> Result<Self, EmbedError> {
        let client = reqwest::Client::builder()
            .connect_timeout(settings.connect_timeout)
            .timeout(settings.request_timeout)
            .build()
            .map_err(|error| EmbedError::Model(format!("cannot build the HTTP client: {error}")))?;
        let dims = settings
            .dimensions
            .map_or_else(|| "native".to_owned(), |d| d.to_string());
        Ok(Self {
            client,
            endpoint: embeddings_endpoint(&settings.url)?,
            id: format!("openai:{}@{dims}", settings.model),
            model: settings.model,
            api_key: settings.api_key,
            requested_dimensions: settings.dimensions,
            dim: AtomicUsize::new(settings.dimensions.map_or(0, |d| d as usize)),
        })
    }

    /// The full URL requests go to.
    pub fn endpoint(&self) -> &Url {
        &self.endpoint
    }

    async fn embed_batch(&self, inputs: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let body = EmbeddingRequest {
            model: &self.model,
            input: inputs,
            dimensions: self.requested_dimensions,
        };
        let mut request = self.client.post(self.endpoint.clone()).json(&body);
        if let Some(key) = &self.api_key {
            request = request.bearer_auth(key);
        }
        let response = request.send().await.map_err(transport_error)?;
        let status = response.status();
        let bytes = response.bytes().await.map_err(transport_error)?;
        if !status.is_success() {
            return Err(EmbedError::UpstreamStatus {
                status: status.as_u16(),
                message: String::from_utf8_lossy(&bytes)
                    .chars()
                    .take(ERROR_BODY_CHARS)
                    .collect(),
            });
        }
        let parsed: EmbeddingResponse = serde_json::from_slice(&bytes).map_err(|error| {
            EmbedError::BadResponse(format!("not an embeddings answer: {error}"))
        })?;
        self.vectors_in_order(parsed, inputs.len())
    }

    /// The answer's vectors sorted by `index`, checked and normalised.
    fn vectors_in_order(
        &self,
        mut response: EmbeddingResponse,
        expected: usize,
    ) -> Result<Vec<Vec<f32>>, EmbedError> {
        if response.data.len() != expected {
            return Err(EmbedError::BadResponse(format!(
                "{} embeddings for {expected} inputs",
                response.data.len()
            )));
        }
        response.data.sort_by_key(|item| item.index);
        let mut vectors = Vec::with_capacity(expected);
        for (position, item) in response.data.into_iter().enumerate() {
            if item.index != position {
                return Err(EmbedError::BadResponse("indices are not 0..n".into()));
            }
            self.check_dimensions(item.embedding.len())?;
            let mut vector = item.embedding;
            l2_normalize(&mut vector);
            vectors.push(vector);
        }
        Ok(vectors)
    }

    /// Accepts `len` if it matches the known width, or makes it the width if none is known yet.
    fn check_dimensions(&self, len: usize) -> Result<(), EmbedError> {
        if len == 0 {
            return Err(EmbedError::BadResponse("an empty embedding".into()));
        }
        match self
            .dim
            .compare_exchange(0, len, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(()),
            Err(known) if known == len => Ok(()),
            Err(known) => Err(EmbedError::BadResponse(format!(
                "an embedding of {len} dimensions, expected {known}"
            ))),
        }
    }
}

#[async_trait::async_trait]
impl Embedder for OpenAiEmbedder {
    fn id(&self) -> &str {
        &self.id
    }

    fn dim(&self) -> usize {
        self.dim.load(Ordering::Acquire)
    }

    async fn embed(&self, texts: &[String]) -> Result<Vec<Vec<f32>>, EmbedError> {
        let mut vectors = Vec::with_capacity(texts.len());
        for batch in texts.chunks(MAX_BATCH) {
            vectors.extend(self.embed_batch(batch).await?);
        }
        Ok(vectors)
    }
}

/// `{origin}/v1/embeddings`, tolerating a trailing slash or an origin that already ends in `/v1`.
fn embeddings_endpoint(origin: &Url) -> Result<Url, EmbedError> {
    let base = origin.as_str().trim_end_matches('/');
    let base = base.strip_suffix("/v1").unwrap_or(base);
    Url::parse(&format!("{base}/v1/embeddings"))
        .map_err(|error| EmbedError::Model(format!("bad embedder url {origin}: {error}")))
}

fn transport_error(error: reqwest::Error) -> EmbedError {
    if error.is_timeout() {
        EmbedError::Timeout(error.without_url().to_string())
    } else if error.is_decode() || error.is_body() {
        EmbedError::BadResponse(error.without_url().to_string())
    } else {
        EmbedError::Unreachable(error.without_url().to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::embed::dot;
    use crate::embed::fake_service::{Behaviour, embedder, serve};

    fn texts(count: usize) -> Vec<String> {
        (0..count).map(|i| "x".repeat(i + 1)).collect()
    }

    #[tokio::test]
    async fn vectors_come_back_in_input_order_normalised_and_batched() {
        let (url, fake) = serve(Behaviour::Good).await;
        let embedder = embedder(url);
        let inputs = texts(150);
        let vectors = embedder.embed(&inputs).await.expect("embeds");
        assert_eq!(vectors.len(), 150);
        assert_eq!(fake.requests.load(Ordering::SeqCst), 3);
        assert_eq!(fake.largest_batch.load(Ordering::SeqCst), MAX_BATCH);
        // Input 70 is index 6 of the second batch: raw vector (71, 6, 0).
        let norm = (71.0f32 * 71.0 + 36.0).sqrt();
        assert!((vectors[70][0] - 71.0 / norm).abs() < 1e-6);
        assert!((vectors[70][1] - 6.0 / norm).abs() < 1e-6);
        assert!((dot(&vectors[3], &vectors[3]) - 1.0).abs() < 1e-5);
        assert_eq!(embedder.dim(), 3);
        assert_eq!(embedder.id(), "openai:fake-model@native");
    }

    #[tokio::test]
    async fn a_rejected_key_is_an_upstream_status_error() {
        let (url, _) = serve(Behaviour::Unauthorized).await;
        let error = embedder(url).embed(&texts(1)).await.expect_err("401");
        assert!(
            matches!(error, EmbedError::UpstreamStatus { status: 401, .. }),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_server_error_is_an_upstream_status_error() {
        let (url, _) = serve(Behaviour::ServerError).await;
        let error = embedder(url).embed(&texts(2)).await.expect_err("500");
        assert!(
            matches!(error, EmbedError::UpstreamStatus { status: 500, .. }),
            "{error}"
        );
    }

    #[tokio::test]
    async fn malformed_json_is_a_bad_response() {
        let (url, _) = serve(Behaviour::Malformed).await;
        let error = embedder(url).embed(&texts(2)).await.expect_err("malformed");
        assert!(matches!(error, EmbedError::BadResponse(_)), "{error}");
    }

    #[tokio::test]
    async fn a_wrong_number_of_vectors_is_a_bad_response() {
        let (url, _) = serve(Behaviour::OneTooFew).await;
        let error = embedder(url)
            .embed(&texts(3))
            .await
            .expect_err("wrong count");
        assert!(matches!(error, EmbedError::BadResponse(_)), "{error}");
    }

    #[tokio::test]
    async fn a_slow_service_times_out() {
        let (url, _) = serve(Behaviour::Slow).await;
        let error = embedder(url).embed(&texts(1)).await.expect_err("slow");
        assert!(matches!(error, EmbedError::Timeout(_)), "{error}");
    }

    #[tokio::test]
    async fn a_closed_port_is_unreachable() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let url =
            Url::parse(&format!("http://{}", listener.local_addr().expect("addr"))).expect("url");
        drop(listener);
        let error = embedder(url).embed(&texts(1)).await.expect_err("closed");
        assert!(matches!(error, EmbedError::Unreachable(_)), "{error}");
    }

    #[tokio::test]
    async fn a_change_of_dimensions_between_answers_is_a_bad_response() {
        let (url, _) = serve(Behaviour::Good).await;
        let settings = OpenAiSettings {
            api_key: Some("k".into()),
            dimensions: Some(8),
            ..OpenAiSettings::new(url, "fake-model".into())
        };
        let embedder = OpenAiEmbedder::new(settings).expect("client builds");
        assert_eq!(embedder.id(), "openai:fake-model@8");
        assert_eq!(embedder.dim(), 8);
        let error = embedder.embed(&texts(1)).await.expect_err("3 is not 8");
        assert!(matches!(error, EmbedError::BadResponse(_)), "{error}");
    }

    #[test]
    fn the_endpoint_is_the_origin_plus_v1_embeddings() {
        for origin in [
            "http://h:11434",
            "http://h:11434/",
            "http://h:11434/v1",
            "http://h:11434/v1/",
        ] {
            let url = Url::parse(origin).expect("url");
            let endpoint = embeddings_endpoint(&url).expect("endpoint");
            assert_eq!(
                endpoint.as_str(),
                "http://h:11434/v1/embeddings",
                "{origin}"
            );
        }
    }

    #[tokio::test]
    async fn no_texts_means_no_request() {
        let (url, fake) = serve(Behaviour::Good).await;
        assert!(embedder(url).embed(&[]).await.expect("empty").is_empty());
        assert_eq!(fake.requests.load(Ordering::SeqCst), 0);
    }
}
