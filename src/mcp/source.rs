//! Where the MCP server's answers come from: the seam between the one implementation of the
//! tools and resources and a registry. `Local` reads this process's `Registry` (the `/mcp`
//! endpoint); `Remote` reads a registry's public REST API over HTTP (`agent-registry mcp`).
//! Both answer in the REST API's wire shapes, so the tools cannot tell them apart.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use reqwest::StatusCode;
use serde_json::Value;

use crate::domain::access::Viewer;
use crate::error::{ApiError, ErrorCode};
use crate::registry::Registry;
use crate::search::request::{self, SEARCH_LIMITS};
use crate::signing::CardSigner;
use crate::wire::{AgentPage, AgentRecord, server_json};

/// A registry as the MCP tools and resources read it.
#[async_trait]
pub trait Source: Send + Sync {
    /// The search of `POST /public/agents/search` for `body`: an `AgentPage`.
    async fn search(&self, body: &Value) -> Result<Value, ApiError>;
    /// The public record of an ACTIVE agent, by id or package name (`GET /public/agents/{id}`).
    async fn record(&self, identifier: &str) -> Result<Value, ApiError>;
    /// An ACTIVE agent's A2A card, signed as served (`GET /public/agents/resolve/{id}`).
    async fn card(&self, identifier: &str) -> Result<Value, ApiError>;
    /// An ACTIVE MCP server's `server.json` (`GET /v0.1/servers/{name}/versions/latest`).
    async fn server_json(&self, package_name: &str) -> Result<Value, ApiError>;
    /// The registry's own A2A card (`GET /.well-known/agent-card.json`).
    async fn registry_card(&self) -> Result<Value, ApiError>;
    /// The registry's public root URL.
    fn base_url(&self) -> &str;

    /// This source as `viewer` reads it (the private agents it may see), when the source
    /// reads for a caller at all; `None`: it reads as it always does (a remote registry reads
    /// as its own token).
    fn for_viewer(&self, _viewer: Viewer) -> Option<Arc<dyn Source>> {
        None
    }
}

/// This process's registry, read as `viewer`: public agents, and the private ones the
/// request's token may see.
#[derive(Clone)]
pub struct Local {
    pub registry: Arc<Registry>,
    pub signer: Arc<CardSigner>,
    pub base_url: Arc<str>,
    pub viewer: Viewer,
}

#[async_trait]
impl Source for Local {
    async fn search(&self, body: &Value) -> Result<Value, ApiError> {
        let mut request = request::from_json(body, SEARCH_LIMITS)?;
        request.viewer = self.viewer.clone();
        let page = self.registry.search(&request).await?;
        to_json(&AgentPage::of(&page, &self.base_url))
    }

    async fn record(&self, identifier: &str) -> Result<Value, ApiError> {
        let agent = self.registry.find_active(identifier, &self.viewer).await?;
        let worst = self.registry.worst_severity(&agent);
        let mut record = AgentRecord::public_given(&agent, worst);
        record.duplicates = self.registry.duplicates_of(&agent.id);
        to_json(&record)
    }

    async fn card(&self, identifier: &str) -> Result<Value, ApiError> {
        let agent = self.registry.find_active(identifier, &self.viewer).await?;
        let worst = self.registry.worst_severity(&agent);
        Ok(self.signer.sign(&crate::wire::card::card_of(&agent, worst)))
    }

    async fn server_json(&self, package_name: &str) -> Result<Value, ApiError> {
        let agent = self
            .registry
            .find_active(package_name, &self.viewer)
            .await?;
        if !server_json::is_mcp(&agent) {
            return Err(ApiError::agent_not_found(package_name));
        }
        Ok(server_json::document(&agent))
    }

    async fn registry_card(&self) -> Result<Value, ApiError> {
        let card = crate::wire::card::registry_card(
            &self.base_url,
            &self.base_url,
            env!("CARGO_PKG_VERSION"),
        );
        Ok(self.signer.sign(&card))
    }

    fn base_url(&self) -> &str {
        &self.base_url
    }

    fn for_viewer(&self, viewer: Viewer) -> Option<Arc<dyn Source>> {
        Some(Arc::new(Self {
            viewer,
            ..self.clone()
        }))
    }
}

fn to_json(value: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(value).map_err(ApiError::internal)
}

/// Largest answer read from a remote registry.
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// A registry's public REST API at `base_url`.
pub struct Remote {
    http: reqwest::Client,
    base_url: String,
}

impl Remote {
    pub fn new(base_url: &url::Url, timeout: Duration) -> anyhow::Result<Self> {
        let http = reqwest::Client::builder()
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .user_agent(concat!("agent-registry-mcp/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self {
            http,
            base_url: base_url.as_str().trim_end_matches('/').to_owned(),
        })
    }

    async fn get(&self, path: &str) -> Result<Value, ApiError> {
        self.send(self.http.get(format!("{}{path}", self.base_url)))
            .await
    }

    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Value, ApiError> {
        let unreachable = |err: reqwest::Error| {
            let code = if err.is_timeout() {
                ErrorCode::UpstreamTimeout
            } else {
                ErrorCode::UpstreamError
            };
            ApiError::new(
                code,
                format!("the registry at {} did not answer: {err}", self.base_url),
            )
        };
        let response = request.send().await.map_err(unreachable)?;
        let status = response.status();
        let retry_after_secs = response
            .headers()
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| value.trim().parse().ok());
        let bytes = response.bytes().await.map_err(unreachable)?;
        if bytes.len() > MAX_ANSWER_BYTES {
            return Err(ApiError::new(
                ErrorCode::UpstreamError,
                format!("the registry's answer is over {MAX_ANSWER_BYTES} bytes"),
            ));
        }
        let body: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        // The registry's own problem+json: keep its detail, map its status back to a code.
        let detail = body["detail"]
            .as_str()
            .map_or_else(|| format!("the registry answered {status}"), str::to_owned);
        let mut error = ApiError::new(code_of(status), detail);
        error.retry_after_secs = retry_after_secs;
        Err(error)
    }
}

/// The error code a registry's HTTP status stands for.
fn code_of(status: StatusCode) -> ErrorCode {
    match status {
        StatusCode::NOT_FOUND => ErrorCode::AgentNotFound,
        StatusCode::BAD_REQUEST | StatusCode::UNPROCESSABLE_ENTITY => ErrorCode::InvalidParameter,
        StatusCode::TOO_MANY_REQUESTS => ErrorCode::RateLimited,
        StatusCode::PAYLOAD_TOO_LARGE => ErrorCode::PayloadTooLarge,
        StatusCode::SERVICE_UNAVAILABLE => ErrorCode::Unavailable,
        _ => ErrorCode::UpstreamError,
    }
}

/// One path segment, percent-encoded.
fn segment(text: &str) -> String {
    url::form_urlencoded::byte_serialize(text.as_bytes())
        .collect::<String>()
        .replace('+', "%20")
}

#[async_trait]
impl Source for Remote {
    async fn search(&self, body: &Value) -> Result<Value, ApiError> {
        let url = format!("{}/public/agents/search", self.base_url);
        self.send(self.http.post(url).json(body)).await
    }

    async fn record(&self, identifier: &str) -> Result<Value, ApiError> {
        self.get(&format!("/public/agents/{}", segment(identifier)))
            .await
    }

    async fn card(&self, identifier: &str) -> Result<Value, ApiError> {
        self.get(&format!("/public/agents/resolve/{}", segment(identifier)))
            .await
    }

    async fn server_json(&self, package_name: &str) -> Result<Value, ApiError> {
        let name = server_json::mcp_name(package_name);
        let entry = self
            .get(&format!("/v0.1/servers/{}/versions/latest", segment(&name)))
            .await?;
        Ok(entry["server"].clone())
    }

    async fn registry_card(&self) -> Result<Value, ApiError> {
        self.get("/.well-known/agent-card.json").await
    }

    fn base_url(&self) -> &str {
        &self.base_url
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(segment("com.example.weather"), "com.example.weather");
        assert_eq!(
            segment("io.github.acme/weather"),
            "io.github.acme%2Fweather"
        );
        assert_eq!(segment("a b?c"), "a%20b%3Fc");
    }
}
