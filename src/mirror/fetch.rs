//! Reading a source: every request through the outbound fetcher (its address policy, timeouts
//! and size cap), retried with exponential backoff and jitter when the upstream is busy or
//! failing; an answer that is not what the source serves fails the pass, which writes nothing
//! more (the pages written so far stay, with their position).

use std::time::Duration;

use axum::http::{HeaderName, StatusCode, header};
use rand::Rng;
use url::Url;

use crate::outbound::{Fetch, Fetched, MediaRanges, Outbound, OutboundError};

/// The largest page a source may answer: a page of 100 MCP servers is about 200 KB.
pub const MAX_PAGE_BYTES: usize = 8 * 1024 * 1024;
/// Attempts per request.
const ATTEMPTS: u32 = 4;
/// The first retry waits about this long; each next one twice as long.
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
/// The longest a `Retry-After` is honoured within one pass.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(30);

/// Why a pass stopped.
#[derive(Debug, thiserror::Error)]
pub enum MirrorError {
    #[error(transparent)]
    Fetch(#[from] OutboundError),
    #[error("{url} answered {status}")]
    Status { url: String, status: u16 },
    #[error("the source's answer is not what it serves: {0}")]
    Malformed(String),
    #[error("storage: {0}")]
    Store(String),
}

/// A conditional GET's validators.
#[derive(Debug, Clone, Default)]
pub struct Validators {
    pub etag: Option<String>,
    pub last_modified: Option<String>,
}

/// GET `url` (with `validators`, a conditional request), retrying what may pass: timeouts,
/// connection failures, 429 and 5xx. A 304 is returned as it is.
pub async fn get(
    outbound: &Outbound,
    url: Url,
    accept: MediaRanges,
    validators: &Validators,
) -> Result<Fetched, MirrorError> {
    let mut fetch = Fetch::get(url.clone(), accept, MAX_PAGE_BYTES);
    let conditional: [(HeaderName, &Option<String>); 2] = [
        (header::IF_NONE_MATCH, &validators.etag),
        (header::IF_MODIFIED_SINCE, &validators.last_modified),
    ];
    for (name, value) in conditional {
        if let Some(value) = value {
            fetch = fetch.header(name, value.clone());
        }
    }
    let mut attempt = 1;
    loop {
        let (error, retry_after) = match outbound.get(&fetch).await {
            Ok(fetched)
                if fetched.status.is_success() || fetched.status == StatusCode::NOT_MODIFIED =>
            {
                return Ok(fetched);
            }
            Ok(fetched) => {
                let retry = fetched.status == StatusCode::TOO_MANY_REQUESTS
                    || fetched.status.is_server_error();
                let error = MirrorError::Status {
                    url: url.to_string(),
                    status: fetched.status.as_u16(),
                };
                if !retry {
                    return Err(error);
                }
                (error, fetched.retry_after_secs.map(Duration::from_secs))
            }
            Err(
                err @ (OutboundError::Timeout { .. }
                | OutboundError::Connect { .. }
                | OutboundError::Resolve { .. }),
            ) => (MirrorError::Fetch(err), None),
            Err(err) => return Err(err.into()),
        };
        if attempt >= ATTEMPTS {
            return Err(error);
        }
        let backoff = FIRST_BACKOFF * 2u32.pow(attempt - 1);
        let jitter = rand::thread_rng().gen_range(0..=backoff.as_millis() as u64 / 2);
        let wait = retry_after
            .map(|wait| wait.min(MAX_RETRY_AFTER))
            .unwrap_or(backoff + Duration::from_millis(jitter));
        tracing::debug!(%url, attempt, error = %error, wait_ms = wait.as_millis() as u64, "mirror request failed; retrying");
        tokio::time::sleep(wait).await;
        attempt += 1;
    }
}

/// GET `url` as JSON.
pub async fn json(outbound: &Outbound, url: Url) -> Result<serde_json::Value, MirrorError> {
    let fetched = get(
        outbound,
        url.clone(),
        crate::outbound::JSON,
        &Validators::default(),
    )
    .await?;
    fetched
        .json()
        .map_err(|err| MirrorError::Malformed(format!("{url}: {err}")))
}
