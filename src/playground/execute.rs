//! Executing one capability: check the request against the agent's record (capability name,
//! input schema), then run it — in-process for a hosted agent, over A2A for any other.

use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value, json};
use utoipa::ToSchema;

use crate::auth::SYSTEM_OWNER;
use crate::auth::Viewer;
use crate::domain::truncate;
use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::hosted::{self, AgentError, HostedAgent, Invocation};
use crate::state::AppState;
use crate::store::Agent;

use super::{remote, schema};

/// Longest `agent` and `capability` strings accepted.
const MAX_IDENTIFIER_CHARS: usize = 200;

/// A checked execute request: an ACTIVE agent, one of its capabilities, a valid input.
pub struct Call {
    pub agent: Agent,
    pub capability: String,
    pub input: Map<String, Value>,
    hosted: Option<Arc<dyn HostedAgent>>,
}

/// Why an execution failed, as recorded in its step: a stable code and a message for people.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct StepError {
    /// `upstream_error`, `upstream_timeout`, `invalid_parameter`, `resource_not_found`, …
    pub code: ErrorCode,
    pub message: String,
}

impl StepError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }

    pub fn upstream(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::UpstreamError, message)
    }

    fn timeout(limit: Duration) -> Self {
        Self::new(
            ErrorCode::UpstreamTimeout,
            format!("the agent did not answer within {} s", limit.as_secs()),
        )
    }

    fn from_agent(err: AgentError) -> Self {
        match err {
            AgentError::Internal(cause) => {
                tracing::error!(error = %cause, "hosted agent failed internally");
                Self::new(ErrorCode::Internal, "the agent failed internally")
            }
            other => Self::new(other.code(), other.to_string()),
        }
    }
}

/// How an agent was reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Transport {
    /// A hosted utility agent, run inside the registry.
    InProcess,
    /// A2A v1.0 `SendMessage` to the card's JSON-RPC interface.
    Jsonrpc,
    /// `{"action", "params"}` POSTed to the record's `url`.
    Legacy,
}

/// What an execution produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub transport: Option<Transport>,
    /// The URL called, for remote agents.
    pub endpoint: Option<String>,
    pub result: Result<Answer, StepError>,
}

/// A successful answer: the output object and the agent's own one-line text, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub output: Value,
    pub summary: Option<String>,
}

impl Execution {
    /// The recorded detail of an `execute` step.
    pub fn step_data(&self, call: &Call) -> Value {
        let (status, output, error, summary) = match &self.result {
            Ok(answer) => (
                "completed",
                answer.output.clone(),
                None,
                answer.summary.clone(),
            ),
            Err(error) => ("failed", Value::Null, Some(error.clone()), None),
        };
        json!({
            "agent": {
                "id": call.agent.id,
                "package_name": call.agent.package_name(),
                "name": call.agent.draft.name,
            },
            "capability": call.capability,
            "input": call.input,
            "status": status,
            "output": output,
            "error": error,
            "summary": summary,
            "transport": self.transport,
            "endpoint": self.endpoint,
        })
    }
}

/// Check an execute body against the agent it names. 400 for a malformed body or an unknown
/// capability, 404 for an agent that is not ACTIVE, 422 for input its schema refuses.
pub async fn prepare(state: &AppState, body: &Value, viewer: &Viewer) -> ApiResult<Call> {
    let object = body.as_object().ok_or_else(|| {
        ApiError::invalid_parameter(
            "the body must be a JSON object such as {\"agent\", \"capability\", \"input\"}",
        )
    })?;
    let agent_ref = required_string(object, "agent")?;
    let capability = required_string(object, "capability")?;
    let input = match object.get("input") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(input)) => input.clone(),
        Some(_) => return Err(ApiError::invalid_parameter("input must be a JSON object")),
    };
    let agent = state.registry.find_active(agent_ref, viewer).await?;
    let declared = &agent.draft.capabilities;
    let found = declared.iter().find(|c| c.name == capability);
    if found.is_none() && !declared.is_empty() {
        let known: Vec<&str> = declared.iter().map(|c| c.name.as_str()).collect();
        return Err(ApiError::invalid_parameter(format!(
            "capability: {} has no capability '{}'; it has {}",
            agent.package_name(),
            truncate(capability, 60),
            known.join(", ")
        )));
    }
    if let Some(input_schema) = found.and_then(|c| c.input_schema.as_ref()) {
        let errors = schema::validate(input_schema, &Value::Object(input.clone()), "input");
        if !errors.is_empty() {
            return Err(ApiError::validation(errors));
        }
    }
    let hosted = (agent.owner == SYSTEM_OWNER)
        .then(|| state.hosted.by_package(agent.package_name()))
        .flatten();
    Ok(Call {
        capability: capability.to_owned(),
        agent,
        input,
        hosted,
    })
}

fn required_string<'a>(object: &'a Map<String, Value>, key: &str) -> ApiResult<&'a str> {
    match object.get(key) {
        Some(Value::String(text)) if text.trim().is_empty() => Err(ApiError::invalid_parameter(
            format!("{key} must not be empty"),
        )),
        Some(Value::String(text)) if text.chars().count() > MAX_IDENTIFIER_CHARS => {
            Err(ApiError::invalid_parameter(format!(
                "{key} must be at most {MAX_IDENTIFIER_CHARS} characters"
            )))
        }
        Some(Value::String(text)) => Ok(text.trim()),
        None | Some(Value::Null) => Err(ApiError::invalid_parameter(format!("{key} is required"))),
        Some(_) => Err(ApiError::invalid_parameter(format!(
            "{key} must be a string"
        ))),
    }
}

/// Run a checked call within `limit`. Never an error: failures are part of the execution.
pub async fn run(state: &AppState, call: &Call, limit: Duration) -> Execution {
    match &call.hosted {
        Some(hosted) => {
            let invocation = Invocation {
                capability: Some(call.capability.clone()),
                input: call.input.clone(),
            };
            let result =
                match tokio::time::timeout(limit, hosted::invoke(hosted.as_ref(), &invocation))
                    .await
                {
                    Ok(Ok((_, output))) => Ok(Answer {
                        output: output.data,
                        summary: Some(output.summary),
                    }),
                    Ok(Err(err)) => Err(StepError::from_agent(err)),
                    Err(_) => Err(StepError::timeout(limit)),
                };
            Execution {
                transport: Some(Transport::InProcess),
                endpoint: None,
                result,
            }
        }
        None => {
            let mut trace = remote::Trace::default();
            let called = remote::call(&state.outbound, call, limit, &mut trace);
            let result = match tokio::time::timeout(limit, called).await {
                Ok(result) => result,
                Err(_) => Err(StepError::timeout(limit)),
            };
            Execution {
                transport: trace.transport,
                endpoint: trace.endpoint,
                result,
            }
        }
    }
}
