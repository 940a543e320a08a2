//! One public JSON API at a configured origin: URLs from the API's own paths, GETs through the
//! outbound fetcher, and upstream failures turned into `AgentError`s that name the service.

use std::sync::Arc;

use reqwest::StatusCode;
use reqwest::header::HeaderName;
use serde::de::DeserializeOwned;
use url::Url;

use super::AgentError;
use crate::outbound::{Fetch, Fetched, JSON, Outbound, OutboundError};

/// API responses above this are refused (a summary or a price is a few KiB).
const MAX_API_BYTES: usize = 1024 * 1024;

/// A JSON API at `origin`, called `service` in error messages.
pub struct Api {
    outbound: Arc<Outbound>,
    origin: Url,
    pub service: &'static str,
}

impl Api {
    pub fn new(outbound: Arc<Outbound>, origin: &Url, service: &'static str) -> Self {
        Self {
            outbound,
            origin: origin.clone(),
            service,
        }
    }

    /// `origin` + path segments (each percent-encoded) + query pairs.
    pub fn url(&self, segments: &[&str], query: &[(&str, &str)]) -> Result<Url, AgentError> {
        let mut url = self.origin.clone();
        url.path_segments_mut()
            .map_err(|()| {
                AgentError::Internal(format!("{} origin cannot take a path", self.service))
            })?
            .pop_if_empty()
            .extend(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        Ok(url)
    }

    /// GET `url` (JSON), whatever the status; transport failures become upstream errors.
    pub async fn get(
        &self,
        url: Url,
        headers: &[(HeaderName, String)],
    ) -> Result<Fetched, AgentError> {
        let mut fetch = Fetch::get(url, JSON, MAX_API_BYTES);
        for (name, value) in headers {
            fetch = fetch.header(name.clone(), value.clone());
        }
        self.outbound
            .get(&fetch)
            .await
            .map_err(|err| self.transport_error(err))
    }

    fn transport_error(&self, err: OutboundError) -> AgentError {
        match err {
            OutboundError::Timeout { secs, .. } => AgentError::UpstreamTimeout(format!(
                "{} did not answer within {secs} s",
                self.service
            )),
            OutboundError::TooLarge { limit, .. } => AgentError::Upstream(format!(
                "{} sent a response larger than {} KiB",
                self.service,
                limit / 1024
            )),
            OutboundError::ContentType { got, .. } => AgentError::Upstream(format!(
                "{} answered with {got} instead of JSON",
                self.service
            )),
            other => AgentError::Upstream(format!("{} is unreachable ({other})", self.service)),
        }
    }

    /// The error for a status the caller did not expect: rate limiting, or an upstream failure.
    pub fn status_error(&self, fetched: &Fetched) -> AgentError {
        match fetched.status {
            StatusCode::TOO_MANY_REQUESTS => AgentError::RateLimited {
                service: self.service,
                retry_after_secs: fetched.retry_after_secs,
            },
            status => AgentError::Upstream(format!(
                "{} answered HTTP {}",
                self.service,
                status.as_u16()
            )),
        }
    }

    /// The body as `T`; a malformed body is an upstream error.
    pub fn parse<T: DeserializeOwned>(&self, fetched: &Fetched) -> Result<T, AgentError> {
        fetched.json().map_err(|err| {
            AgentError::Upstream(format!(
                "{} answered with malformed JSON ({err})",
                self.service
            ))
        })
    }
}
