//! Hosted utility agents: each is one file implementing `HostedAgent`, and
//! `HostedAgents::new` is the one place they are registered. At start-up each becomes an ACTIVE,
//! domain-verified registry entry owned by the registry itself.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use crate::domain::{AgentDraft, FieldError};
use crate::error::{ApiError, ErrorCode};
use crate::outbound::{Outbound, OutboundError, OutboundSettings};
use crate::registry::Registry;

mod cache;

mod finance;
mod reader;
mod upstream;
mod wiki;

use crate::config::UpstreamConfig;

/// What a hosted agent produced: the output object and a one-line summary for people.
#[derive(Debug, Clone)]
pub struct Output {
    pub data: Value,
    pub summary: String,
}

/// Why a hosted agent could not answer; each variant knows its error code.
#[derive(Debug, thiserror::Error)]
pub enum AgentError {
    #[error("unknown capability '{capability}'; {agent} has {known}")]
    UnknownCapability {
        agent: &'static str,
        capability: String,
        known: String,
    },
    #[error("{field}: {message}")]
    InvalidInput { field: String, message: String },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Upstream(String),
    #[error("{service} was rate-limited upstream; try again later")]
    RateLimited {
        service: &'static str,
        retry_after_secs: Option<u64>,
    },
    #[error("{0}")]
    UpstreamTimeout(String),
    #[error(transparent)]
    Outbound(#[from] OutboundError),
    #[error("{0}")]
    Internal(String),
    /// Every upstream an agent tried failed: each named with how it failed, in the order tried.
    /// Built by [`AgentError::all_failed`], never nested.
    #[error("{}", join_messages(.0))]
    AllFailed(Vec<AgentError>),
}

fn join_messages(failures: &[AgentError]) -> String {
    failures
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

impl AgentError {
    pub fn invalid(field: &str, message: impl Into<String>) -> Self {
        Self::InvalidInput {
            field: field.to_owned(),
            message: message.into(),
        }
    }

    /// The error of an agent that tried upstreams in turn and got `failures` (in the order
    /// tried): one failure is itself; several are one error that names each upstream and how
    /// it failed, so a fallback's failure does not hide the first one. Its code is that of the
    /// last failure that was not a plain "not found" (the one a retry would meet), else
    /// `resource_not_found`.
    pub fn all_failed(failures: Vec<AgentError>) -> Self {
        let mut flat: Vec<AgentError> = Vec::with_capacity(failures.len());
        for failure in failures {
            match failure {
                // A fault of the registry, not of an upstream: it stands alone (and unshown).
                internal @ Self::Internal(_) => return internal,
                Self::AllFailed(inner) => flat.extend(inner),
                other => flat.push(other),
            }
        }
        if flat.len() == 1 {
            return flat
                .pop()
                .unwrap_or_else(|| Self::Internal("no failure".to_owned()));
        }
        Self::AllFailed(flat)
    }

    /// The failure that decides the code and `Retry-After` of an `AllFailed`.
    fn deciding(failures: &[AgentError]) -> Option<&AgentError> {
        failures
            .iter()
            .rev()
            .find(|failure| !matches!(failure, Self::NotFound(_)))
            .or_else(|| failures.last())
    }

    /// Seconds the upstream asked to wait, when it was rate-limited and said so.
    pub fn retry_after_secs(&self) -> Option<u64> {
        match self {
            Self::RateLimited {
                retry_after_secs, ..
            } => *retry_after_secs,
            Self::AllFailed(failures) => failures.iter().filter_map(Self::retry_after_secs).max(),
            _ => None,
        }
    }

    pub fn code(&self) -> ErrorCode {
        match self {
            Self::UnknownCapability { .. } | Self::InvalidInput { .. } => {
                ErrorCode::InvalidParameter
            }
            Self::NotFound(_) => ErrorCode::ResourceNotFound,
            Self::Upstream(_) | Self::RateLimited { .. } => ErrorCode::UpstreamError,
            Self::UpstreamTimeout(_) => ErrorCode::UpstreamTimeout,
            Self::Outbound(err) => err.code(),
            Self::Internal(_) => ErrorCode::Internal,
            Self::AllFailed(failures) => {
                Self::deciding(failures).map_or(ErrorCode::Internal, Self::code)
            }
        }
    }
}

impl From<AgentError> for ApiError {
    fn from(err: AgentError) -> Self {
        if let AgentError::Internal(cause) = &err {
            return ApiError::internal(cause);
        }
        let code = err.code();
        if code.status().is_server_error() {
            tracing::warn!(code = code.as_str(), error = %err, "hosted agent failed upstream");
        }
        let retry_after_secs = err.retry_after_secs();
        ApiError {
            retry_after_secs,
            ..ApiError::new(code, err.to_string())
        }
    }
}

/// A hosted agent: what the registry lists about it, and how it runs.
#[async_trait]
pub trait HostedAgent: Send + Sync {
    /// What the agent says of itself.
    fn about(&self) -> &'static About;
    /// `[{name, description, input_schema}]`.
    fn capabilities(&self) -> Value;

    /// The capability an input that names none asks for: the first one unless overridden.
    fn default_capability(&self, _input: &Map<String, Value>) -> String {
        self.capability_names()
            .into_iter()
            .next()
            .unwrap_or_default()
    }

    /// Run `capability` on `input`; the capability is one of `capability_names()`.
    async fn execute(
        &self,
        capability: &str,
        input: &Map<String, Value>,
    ) -> Result<Output, AgentError>;

    /// The names of `capabilities()`, in order.
    fn capability_names(&self) -> Vec<String> {
        self.capabilities()
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|capability| capability.get("name")?.as_str().map(str::to_owned))
            .collect()
    }
}

/// What a hosted agent says of itself: where it is served and how it is listed.
#[derive(Debug)]
pub struct About {
    /// Path segment under `/a2a/utility/`.
    pub slug: &'static str,
    pub package_name: &'static str,
    pub name: &'static str,
    pub description: &'static str,
    pub category: &'static str,
    pub tags: &'static [&'static str],
    /// The input field a plain-text message fills (`query`, `symbol`, `url`).
    pub text_field: &'static str,
}

/// Every hosted agent, built once from the configuration.
#[derive(Clone)]
pub struct HostedAgents(Vec<Arc<dyn HostedAgent>>);

impl HostedAgents {
    /// The one place hosted agents are registered. The reader fetches user-supplied URLs through
    /// `user_urls`; the others call their configured API origins.
    pub fn new(
        config: &UpstreamConfig,
        base_url: &str,
        user_urls: Arc<Outbound>,
    ) -> anyhow::Result<Self> {
        let apis = Arc::new(Outbound::new(OutboundSettings::for_configured_apis(
            config, base_url,
        ))?);
        Ok(Self(vec![
            Arc::new(wiki::WikiAgent::new(config, Arc::clone(&apis))),
            Arc::new(finance::FinanceAgent::new(config, apis)),
            Arc::new(reader::ReaderAgent::new(user_urls)),
        ]))
    }

    pub fn all(&self) -> &[Arc<dyn HostedAgent>] {
        &self.0
    }

    /// The agent served under `/a2a/utility/{slug}`.
    pub fn by_slug(&self, slug: &str) -> Option<Arc<dyn HostedAgent>> {
        self.0
            .iter()
            .find(|agent| agent.about().slug == slug)
            .cloned()
    }

    /// The agent with this package name (case-insensitive).
    pub fn by_package(&self, package_name: &str) -> Option<Arc<dyn HostedAgent>> {
        self.0
            .iter()
            .find(|agent| {
                agent
                    .about()
                    .package_name
                    .eq_ignore_ascii_case(package_name.trim())
            })
            .cloned()
    }
}

/// A call of a hosted agent: the capability (if named) and its input object.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub capability: Option<String>,
    pub input: Map<String, Value>,
}

impl Invocation {
    /// Reads `{"input": …, "capability"?}` or the legacy `{"action": …, "params": …}`. A string
    /// input fills the agent's text field; a body with neither `input` nor `params` is the input.
    pub fn from_body(body: &Value, text_field: &str) -> Result<Self, AgentError> {
        let Some(object) = body.as_object() else {
            return Err(AgentError::invalid(
                "body",
                "must be a JSON object such as {\"input\": {…}}",
            ));
        };
        let capability = ["capability", "action"]
            .into_iter()
            .find_map(|key| object.get(key).filter(|value| !value.is_null()))
            .map(|value| match value {
                Value::String(name) => Ok(name.trim().to_owned()),
                _ => Err(AgentError::invalid("capability", "must be a string")),
            })
            .transpose()?;
        let input = match ["input", "params"]
            .into_iter()
            .find_map(|key| object.get(key).filter(|value| !value.is_null()))
        {
            Some(value) => Self::input_from(value, text_field)?,
            None => object
                .iter()
                .filter(|(key, _)| !matches!(key.as_str(), "capability" | "action" | "to"))
                .map(|(key, value)| (key.clone(), value.clone()))
                .collect(),
        };
        Ok(Self { capability, input })
    }

    /// An input value: an object as is, a string as the agent's text field.
    pub fn input_from(value: &Value, text_field: &str) -> Result<Map<String, Value>, AgentError> {
        match value {
            Value::Object(map) => Ok(map.clone()),
            Value::String(text) => Ok(Map::from_iter([(
                text_field.to_owned(),
                Value::String(text.clone()),
            )])),
            _ => Err(AgentError::invalid("input", "must be a JSON object")),
        }
    }
}

/// Run an invocation: pick the capability (named, else the agent's default), then execute.
/// Returns the capability that ran and its output.
pub async fn invoke(
    agent: &dyn HostedAgent,
    invocation: &Invocation,
) -> Result<(String, Output), AgentError> {
    let names = agent.capability_names();
    let capability = match invocation.capability.as_deref().filter(|c| !c.is_empty()) {
        Some(name) if names.iter().any(|known| known == name) => name.to_owned(),
        Some(name) => {
            return Err(AgentError::UnknownCapability {
                agent: agent.about().package_name,
                capability: crate::domain::truncate(name, 60),
                known: names.join(", "),
            });
        }
        None => agent.default_capability(&invocation.input),
    };
    let output = agent.execute(&capability, &invocation.input).await?;
    Ok((capability, output))
}

/// The response body of a hosted agent call.
pub fn response_body(agent: &dyn HostedAgent, capability: &str, output: &Output) -> Value {
    json!({"agent": agent.about().package_name, "capability": capability, "output": output.data})
}

/// The registry entry of a hosted agent, as a publish body would describe it.
pub fn draft<A: HostedAgent + ?Sized>(
    agent: &A,
    base_url: &str,
) -> Result<AgentDraft, Vec<FieldError>> {
    let about = agent.about();
    let slug = about.slug;
    AgentDraft::parse(&json!({
        "package_name": about.package_name,
        "name": about.name,
        "description": about.description,
        "version": env!("CARGO_PKG_VERSION"),
        "manifest_url": format!("{base_url}/a2a/utility/{slug}/.well-known/agent-card.json"),
        "url": format!("{base_url}/a2a/utility/{slug}/v1"),
        "target": "Developers",
        "category": about.category,
        "tags": about.tags,
        "capabilities": agent.capabilities(),
        "payment": {"model": "free"},
    }))
}

/// Make sure every hosted agent is registered, ACTIVE, verified and up to date.
pub async fn register_all(
    agents: &HostedAgents,
    registry: &Registry,
    base_url: &str,
) -> anyhow::Result<()> {
    for agent in agents.all() {
        let draft = draft(agent.as_ref(), base_url).map_err(|errors| {
            anyhow::anyhow!(
                "hosted agent {} is invalid: {errors:?}",
                agent.about().package_name
            )
        })?;
        registry.ensure_system_agent(draft).await?;
    }
    Ok(())
}

/// A required, non-blank string field of at most `max_chars` characters.
pub(crate) fn required_str<'a>(
    input: &'a Map<String, Value>,
    field: &str,
    max_chars: usize,
) -> Result<&'a str, AgentError> {
    match input.get(field) {
        None | Some(Value::Null) => Err(AgentError::invalid(field, "is required")),
        Some(Value::String(text)) if text.trim().is_empty() => {
            Err(AgentError::invalid(field, "must not be empty"))
        }
        Some(Value::String(text)) if text.trim().chars().count() > max_chars => Err(
            AgentError::invalid(field, format!("must be at most {max_chars} characters")),
        ),
        Some(Value::String(text)) => Ok(text.trim()),
        Some(_) => Err(AgentError::invalid(field, "must be a string")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn when_every_upstream_fails_the_error_names_each_in_order() {
        let both = AgentError::all_failed(vec![
            AgentError::Upstream("CoinGecko is unreachable (connection refused)".to_owned()),
            AgentError::UpstreamTimeout("Yahoo Finance did not answer within 1 s".to_owned()),
        ]);
        assert_eq!(
            both.to_string(),
            "CoinGecko is unreachable (connection refused); Yahoo Finance did not answer within 1 s"
        );
        assert_eq!(
            both.code(),
            ErrorCode::UpstreamTimeout,
            "the last failure decides"
        );

        let limited_then_unknown = AgentError::all_failed(vec![
            AgentError::RateLimited {
                service: "Coinbase",
                retry_after_secs: Some(30),
            },
            AgentError::NotFound("Yahoo Finance has no chart for it".to_owned()),
        ]);
        assert_eq!(
            limited_then_unknown.code(),
            ErrorCode::UpstreamError,
            "a failure outranks a plain not-found"
        );
        assert_eq!(limited_then_unknown.retry_after_secs(), Some(30));
        assert!(
            limited_then_unknown
                .to_string()
                .starts_with("Coinbase was rate-limited")
        );

        let one = AgentError::all_failed(vec![AgentError::NotFound("gone".to_owned())]);
        assert!(matches!(one, AgentError::NotFound(_)));
        let internal = AgentError::all_failed(vec![
            AgentError::Upstream("x".to_owned()),
            AgentError::Internal("bad origin".to_owned()),
        ]);
        assert!(matches!(internal, AgentError::Internal(_)));
    }

    #[test]
    fn an_input_body_names_the_capability_and_its_input() {
        let invocation = Invocation::from_body(
            &json!({"capability": "get_summary", "input": {"page_id": "42"}}),
            "query",
        )
        .expect("valid");
        assert_eq!(invocation.capability.as_deref(), Some("get_summary"));
        assert_eq!(invocation.input.get("page_id"), Some(&json!("42")));
    }

    #[test]
    fn the_legacy_action_and_params_body_means_the_same() {
        let invocation = Invocation::from_body(
            &json!({"action": "get_current_price", "params": {"symbol": "BTC"}}),
            "symbol",
        )
        .expect("valid");
        assert_eq!(invocation.capability.as_deref(), Some("get_current_price"));
        assert_eq!(invocation.input.get("symbol"), Some(&json!("BTC")));
    }

    #[test]
    fn a_string_input_fills_the_text_field_and_a_flat_body_is_the_input() {
        let text = Invocation::from_body(&json!({"input": "ETH"}), "symbol").expect("valid");
        assert_eq!(text.input.get("symbol"), Some(&json!("ETH")));
        let flat = Invocation::from_body(&json!({"symbol": "ETH"}), "symbol").expect("valid");
        assert_eq!(flat.capability, None);
        assert_eq!(flat.input.get("symbol"), Some(&json!("ETH")));
    }

    #[test]
    fn bodies_of_the_wrong_shape_are_invalid_input() {
        for body in [
            json!([]),
            json!("x"),
            json!({"input": 3}),
            json!({"capability": 1, "input": {}}),
        ] {
            let err = Invocation::from_body(&body, "query").expect_err("invalid");
            assert_eq!(err.code(), ErrorCode::InvalidParameter, "{body}");
        }
    }
}
