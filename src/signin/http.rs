//! The `oauth2` crate's HTTP client: on the server, the guarded outbound client (its limits,
//! timeouts and address policy apply to a provider's token endpoint as to every other fetch);
//! in the CLI, a plain `reqwest` client that follows no redirect.
//!
//! GitHub answers a token request that failed (a bad code, a device flow still pending) with
//! `200 OK` and an `error` field, where OAuth 2 says 400; both clients hand such an answer to
//! `oauth2` as the 400 it means, so it reads the error (and the device flow keeps polling).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use axum::http::header::{ACCEPT, CONTENT_TYPE};
use url::Url;

use crate::outbound::{Fetch, JSON, Outbound};

/// Why a request to a provider failed.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpFailure(String);

/// An HTTP client for `oauth2`.
pub enum Client {
    /// The server's guarded outbound client, reading at most `max_bytes` per response.
    Guarded {
        outbound: Arc<Outbound>,
        max_bytes: usize,
    },
    /// The CLI's client (it must not follow redirects).
    Direct(reqwest::Client),
}

impl<'c> oauth2::AsyncHttpClient<'c> for Client {
    type Error = HttpFailure;
    type Future =
        Pin<Box<dyn Future<Output = Result<oauth2::HttpResponse, HttpFailure>> + Send + 'c>>;

    fn call(&'c self, request: oauth2::HttpRequest) -> Self::Future {
        Box::pin(async move {
            let response = match self {
                Self::Guarded {
                    outbound,
                    max_bytes,
                } => send(outbound, request, *max_bytes).await?,
                Self::Direct(client) => send_direct(client, request).await?,
            };
            Ok(error_as_400(response))
        })
    }
}

/// A `200 OK` whose JSON body has an `error` field, as the 400 OAuth 2 says it is.
fn error_as_400(mut response: oauth2::HttpResponse) -> oauth2::HttpResponse {
    let is_error = response.status() == axum::http::StatusCode::OK
        && serde_json::from_slice::<serde_json::Value>(response.body())
            .is_ok_and(|body| body.get("error").is_some_and(serde_json::Value::is_string));
    if is_error {
        *response.status_mut() = axum::http::StatusCode::BAD_REQUEST;
    }
    response
}

/// Largest answer the CLI reads from GitHub.
const MAX_DIRECT_BYTES: usize = 1024 * 1024;

async fn send_direct(
    client: &reqwest::Client,
    request: oauth2::HttpRequest,
) -> Result<oauth2::HttpResponse, HttpFailure> {
    let request =
        reqwest::Request::try_from(request).map_err(|err| HttpFailure(err.to_string()))?;
    let response = client
        .execute(request)
        .await
        .map_err(|err| HttpFailure(err.to_string()))?;
    let status = response.status();
    let media_type = response.headers().get(CONTENT_TYPE).cloned();
    let body = response
        .bytes()
        .await
        .map_err(|err| HttpFailure(err.to_string()))?;
    if body.len() > MAX_DIRECT_BYTES {
        return Err(HttpFailure("the answer is too large".to_owned()));
    }
    let mut builder = axum::http::Response::builder().status(status.as_u16());
    if let Some(media_type) = media_type {
        builder = builder.header(CONTENT_TYPE, media_type);
    }
    builder
        .body(body.to_vec())
        .map_err(|err| HttpFailure(err.to_string()))
}

/// Send one of `oauth2`'s requests (a GET, or a form POST to a token endpoint).
pub async fn send(
    outbound: &Outbound,
    request: oauth2::HttpRequest,
    max_bytes: usize,
) -> Result<oauth2::HttpResponse, HttpFailure> {
    let url = Url::parse(&request.uri().to_string())
        .map_err(|err| HttpFailure(format!("bad URL: {err}")))?;
    let mut fetch = if request.method() == axum::http::Method::POST {
        Fetch::post_form(url, request.body().clone(), JSON, max_bytes)
    } else {
        Fetch::get(url, JSON, max_bytes)
    };
    for (name, value) in request.headers() {
        if name == CONTENT_TYPE || name == ACCEPT {
            continue;
        }
        if let Ok(value) = value.to_str() {
            fetch = fetch.header(name.clone(), value);
        }
    }
    let fetched = outbound
        .get(&fetch)
        .await
        .map_err(|err| HttpFailure(err.to_string()))?;
    let media_type = if fetched.media_type.is_empty() {
        "application/octet-stream"
    } else {
        fetched.media_type.as_str()
    };
    axum::http::Response::builder()
        .status(fetched.status.as_u16())
        .header(CONTENT_TYPE, media_type)
        .body(fetched.body.to_vec())
        .map_err(|err| HttpFailure(err.to_string()))
}
