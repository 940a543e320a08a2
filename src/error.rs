//! The one error model: a closed `ErrorCode` enum mapped once to HTTP status and JSON-RPC code,
//! and `ApiError`, rendered as `application/problem+json` (RFC 9457) on every REST path.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;

use crate::domain::{FieldError, truncate};

/// Stable, machine-readable error codes. Each knows its HTTP status and its
/// JSON-RPC code, so REST and JSON-RPC can never drift apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    InvalidJson,
    /// A request that is not valid HTTP (answered before any handler runs).
    MalformedRequest,
    /// A request target longer than the server reads.
    UriTooLong,
    /// More header fields, or larger ones, than the server reads.
    HeadersTooLarge,
    UnsupportedMediaType,
    InvalidParameter,
    ValidationFailed,
    VerificationFailed,
    Unauthorized,
    Forbidden,
    /// A write to an agent a mirror keeps: it changes at its source.
    MirroredReadOnly,
    /// A write by a token restricted to namespaces (trusted publishing) outside all of them.
    NamespaceNotGranted,
    /// Publishing under `--namespace-policy owned` in a namespace the owner does not hold.
    NamespaceNotOwned,
    /// A namespace another owner holds.
    NamespaceTaken,
    /// The caller has no claim on this namespace.
    NamespaceNotFound,
    /// A token minted by trusted publishing writes a package bound to other CI identities.
    BindingMismatch,
    /// No binding by this id (or none the caller made).
    BindingNotFound,
    /// Under `--scan-policy block`, the scanner found something at `high` or above.
    SecurityFinding,
    AgentNotFound,
    /// The agent has no version by the name asked for.
    VersionNotFound,
    SessionNotFound,
    TokenNotFound,
    /// No organisation by this name (or none the caller is a member of).
    OrgNotFound,
    /// No transfer by this id that the caller is a party to.
    TransferNotFound,
    /// Something a hosted agent was asked about does not exist (an unknown symbol or page).
    ResourceNotFound,
    NotFound,
    MethodNotAllowed,
    Conflict,
    InvalidStateTransition,
    /// An update names a version lower than the agent's current one, or one it had before.
    VersionConflict,
    PreconditionFailed,
    PayloadTooLarge,
    RateLimited,
    UpstreamError,
    UpstreamTimeout,
    RequestTimeout,
    Unavailable,
    Internal,
    // The A2A protocol's own errors, answered on its JSON-RPC endpoints.
    /// A JSON-RPC request that is not a valid request object.
    InvalidRequest,
    /// A JSON-RPC method this endpoint does not know.
    MethodNotFound,
    /// A message names a task this agent does not have (it keeps no tasks).
    TaskNotFound,
    /// A push-notification method, on an agent whose card declares no push notifications.
    PushNotificationNotSupported,
    /// An A2A method the card does not declare (streaming, subscriptions, extended cards, task lists).
    UnsupportedOperation,
    /// A message part of a media type the agent does not accept.
    ContentTypeNotSupported,
    /// An A2A protocol version other than 1.0.
    VersionNotSupported,
}

impl ErrorCode {
    /// The HTTP status this code is served with on REST paths.
    pub fn status(self) -> StatusCode {
        match self {
            Self::InvalidJson
            | Self::InvalidParameter
            | Self::MalformedRequest
            | Self::InvalidRequest
            | Self::PushNotificationNotSupported
            | Self::UnsupportedOperation
            | Self::ContentTypeNotSupported
            | Self::VersionNotSupported => StatusCode::BAD_REQUEST,
            Self::UnsupportedMediaType => StatusCode::UNSUPPORTED_MEDIA_TYPE,
            Self::ValidationFailed | Self::VerificationFailed | Self::SecurityFinding => {
                StatusCode::UNPROCESSABLE_ENTITY
            }
            Self::Unauthorized => StatusCode::UNAUTHORIZED,
            Self::Forbidden
            | Self::MirroredReadOnly
            | Self::NamespaceNotGranted
            | Self::NamespaceNotOwned
            | Self::BindingMismatch => StatusCode::FORBIDDEN,
            Self::AgentNotFound
            | Self::VersionNotFound
            | Self::SessionNotFound
            | Self::TokenNotFound
            | Self::OrgNotFound
            | Self::TransferNotFound
            | Self::NamespaceNotFound
            | Self::BindingNotFound
            | Self::ResourceNotFound
            | Self::NotFound
            | Self::MethodNotFound
            | Self::TaskNotFound => StatusCode::NOT_FOUND,
            Self::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Self::Conflict
            | Self::InvalidStateTransition
            | Self::VersionConflict
            | Self::NamespaceTaken => StatusCode::CONFLICT,
            Self::PreconditionFailed => StatusCode::PRECONDITION_FAILED,
            Self::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Self::UriTooLong => StatusCode::URI_TOO_LONG,
            Self::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Self::RateLimited => StatusCode::TOO_MANY_REQUESTS,
            Self::UpstreamError => StatusCode::BAD_GATEWAY,
            Self::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            Self::RequestTimeout => StatusCode::SERVICE_UNAVAILABLE,
            Self::Unavailable => StatusCode::SERVICE_UNAVAILABLE,
            Self::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        }
    }

    /// The JSON-RPC 2.0 error code for the same condition: JSON-RPC's own codes, A2A's codes
    /// (-32001 to -32009), and -32000 for authentication.
    pub fn jsonrpc_code(self) -> i64 {
        match self {
            Self::InvalidJson => -32700,
            Self::InvalidRequest
            | Self::MalformedRequest
            | Self::UriTooLong
            | Self::HeadersTooLarge => -32600,
            Self::InvalidParameter
            | Self::ValidationFailed
            | Self::PayloadTooLarge
            | Self::AgentNotFound
            | Self::VersionNotFound
            | Self::ResourceNotFound => -32602,
            Self::Unauthorized
            | Self::Forbidden
            | Self::MirroredReadOnly
            | Self::NamespaceNotGranted
            | Self::NamespaceNotOwned
            | Self::BindingMismatch
            | Self::RateLimited => -32000,
            Self::NotFound | Self::MethodNotAllowed | Self::MethodNotFound => -32601,
            Self::TaskNotFound => -32001,
            Self::PushNotificationNotSupported => -32003,
            Self::UnsupportedOperation => -32004,
            Self::ContentTypeNotSupported | Self::UnsupportedMediaType => -32005,
            Self::VersionNotSupported => -32009,
            _ => -32603,
        }
    }

    /// The A2A error type's reason for a `google.rpc.ErrorInfo` in domain `a2a-protocol.org`
    /// (the type's name in UPPER_SNAKE_CASE without "Error"); `None` for the registry's own
    /// errors.
    pub fn a2a_reason(self) -> Option<&'static str> {
        match self {
            Self::TaskNotFound => Some("TASK_NOT_FOUND"),
            Self::PushNotificationNotSupported => Some("PUSH_NOTIFICATION_NOT_SUPPORTED"),
            Self::UnsupportedOperation => Some("UNSUPPORTED_OPERATION"),
            Self::ContentTypeNotSupported | Self::UnsupportedMediaType => {
                Some("CONTENT_TYPE_NOT_SUPPORTED")
            }
            Self::VersionNotSupported => Some("VERSION_NOT_SUPPORTED"),
            _ => None,
        }
    }

    /// The snake_case wire name of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::InvalidJson => "invalid_json",
            Self::MirroredReadOnly => "mirrored_read_only",
            Self::NamespaceNotGranted => "namespace_not_granted",
            Self::NamespaceNotOwned => "namespace_not_owned",
            Self::NamespaceTaken => "namespace_taken",
            Self::NamespaceNotFound => "namespace_not_found",
            Self::BindingMismatch => "binding_mismatch",
            Self::BindingNotFound => "binding_not_found",
            Self::SecurityFinding => "security_finding",
            Self::MalformedRequest => "malformed_request",
            Self::UriTooLong => "uri_too_long",
            Self::HeadersTooLarge => "headers_too_large",
            Self::UnsupportedMediaType => "unsupported_media_type",
            Self::InvalidParameter => "invalid_parameter",
            Self::ValidationFailed => "validation_failed",
            Self::VerificationFailed => "verification_failed",
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::AgentNotFound => "agent_not_found",
            Self::VersionNotFound => "version_not_found",
            Self::SessionNotFound => "session_not_found",
            Self::TokenNotFound => "token_not_found",
            Self::OrgNotFound => "org_not_found",
            Self::TransferNotFound => "transfer_not_found",
            Self::ResourceNotFound => "resource_not_found",
            Self::NotFound => "not_found",
            Self::MethodNotAllowed => "method_not_allowed",
            Self::Conflict => "conflict",
            Self::InvalidStateTransition => "invalid_state_transition",
            Self::VersionConflict => "version_conflict",
            Self::PreconditionFailed => "precondition_failed",
            Self::PayloadTooLarge => "payload_too_large",
            Self::RateLimited => "rate_limited",
            Self::UpstreamError => "upstream_error",
            Self::UpstreamTimeout => "upstream_timeout",
            Self::RequestTimeout => "request_timeout",
            Self::Unavailable => "unavailable",
            Self::Internal => "internal",
            Self::InvalidRequest => "invalid_request",
            Self::MethodNotFound => "method_not_found",
            Self::TaskNotFound => "task_not_found",
            Self::PushNotificationNotSupported => "push_notification_not_supported",
            Self::UnsupportedOperation => "unsupported_operation",
            Self::ContentTypeNotSupported => "content_type_not_supported",
            Self::VersionNotSupported => "version_not_supported",
        }
    }
}

/// An error on its way to a client: a code, a human detail, and optional field errors.
#[derive(Debug, Clone)]
pub struct ApiError {
    pub code: ErrorCode,
    pub detail: String,
    pub errors: Vec<FieldError>,
    pub retry_after_secs: Option<u64>,
    /// On a 401 for a bearer token that cannot be used: why, for `WWW-Authenticate: Bearer
    /// error="invalid_token", error_description="…"` (RFC 6750).
    pub invalid_token: Option<String>,
}

impl ApiError {
    pub fn new(code: ErrorCode, detail: impl Into<String>) -> Self {
        Self {
            code,
            detail: detail.into(),
            errors: Vec::new(),
            retry_after_secs: None,
            invalid_token: None,
        }
    }

    pub fn validation(errors: Vec<FieldError>) -> Self {
        let detail = match errors.len() {
            1 => "1 field is invalid".to_owned(),
            n => format!("{n} fields are invalid"),
        };
        Self {
            errors,
            ..Self::new(ErrorCode::ValidationFailed, detail)
        }
    }

    pub fn invalid_parameter(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::InvalidParameter, detail)
    }

    pub fn agent_not_found(identifier: &str) -> Self {
        Self::new(
            ErrorCode::AgentNotFound,
            format!(
                "no agent with id or package name '{}'",
                truncate(identifier, 200)
            ),
        )
    }

    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::Unauthorized, detail)
    }

    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(ErrorCode::Forbidden, detail)
    }

    /// 401 `unauthorized` for a bearer token that cannot be used, saying why in the detail and
    /// in `WWW-Authenticate` (`error="invalid_token"`).
    pub fn invalid_token(reason: impl Into<String>) -> Self {
        let reason = reason.into();
        Self {
            invalid_token: Some(reason.clone()),
            ..Self::new(ErrorCode::Unauthorized, reason)
        }
    }

    /// A server-side failure: logged once with its cause chain, served without internals.
    pub fn internal(cause: impl std::fmt::Display) -> Self {
        tracing::error!(error = %cause, "internal error");
        Self::new(
            ErrorCode::Internal,
            "the server failed to handle this request",
        )
    }

    pub fn body(&self) -> Problem {
        let status = self.code.status();
        Problem {
            kind: "about:blank",
            title: status.canonical_reason().unwrap_or("Error").to_owned(),
            status: status.as_u16(),
            code: self.code,
            detail: self.detail.clone(),
            errors: self.errors.clone(),
        }
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.code.as_str(), self.detail)
    }
}

impl std::error::Error for ApiError {}

/// The RFC 9457 problem body of every REST error.
#[derive(Debug, Serialize, ToSchema)]
pub struct Problem {
    /// Always `about:blank`.
    #[serde(rename = "type")]
    #[schema(rename = "type")]
    pub kind: &'static str,
    /// The HTTP reason phrase.
    pub title: String,
    /// The HTTP status code.
    pub status: u16,
    /// Stable machine-readable error code.
    pub code: ErrorCode,
    /// What went wrong, for humans.
    pub detail: String,
    /// Every invalid field, on `validation_failed`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<FieldError>,
}

/// What a problem response said, kept in its extensions for the layers it passes on the way
/// out (the audit log records why a write was refused).
#[derive(Debug, Clone)]
pub struct ErrorSummary {
    pub code: ErrorCode,
    pub detail: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.code.status();
        let body = serde_json::to_vec(&self.body()).unwrap_or_default();
        let mut response = (status, body).into_response();
        response.extensions_mut().insert(ErrorSummary {
            code: self.code,
            detail: truncate(&self.detail, 300).to_owned(),
        });
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.code == ErrorCode::Unauthorized {
            let challenge = match &self.invalid_token {
                Some(reason) => HeaderValue::from_str(&format!(
                    "Bearer error=\"invalid_token\", error_description=\"{}\"",
                    challenge_text(reason)
                ))
                .unwrap_or(HeaderValue::from_static("Bearer error=\"invalid_token\"")),
                None => HeaderValue::from_static("Bearer"),
            };
            headers.insert(header::WWW_AUTHENTICATE, challenge);
        }
        if let Some(secs) = self.retry_after_secs {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs));
        }
        response
    }
}

/// `text` as an RFC 6750 `error_description`: printable ASCII without `"` and `\\` (each of
/// those becomes `'`, anything else `?`), at most 200 characters.
fn challenge_text(text: &str) -> String {
    text.chars()
        .take(200)
        .map(|c| match c {
            '"' | '\\' => '\'',
            ' '..='~' => c,
            _ => '?',
        })
        .collect()
}

impl From<crate::store::StoreError> for ApiError {
    fn from(err: crate::store::StoreError) -> Self {
        use crate::store::StoreError;
        match err {
            StoreError::Conflict(detail) => Self::new(ErrorCode::Conflict, detail),
            StoreError::InvalidTransition(detail) => {
                Self::new(ErrorCode::InvalidStateTransition, detail)
            }
            StoreError::NotFound => Self::new(ErrorCode::NotFound, "not found"),
            StoreError::IdentifierTaken(urn) => Self::new(
                ErrorCode::Conflict,
                format!("identifier '{urn}' is already registered"),
            ),
            StoreError::VersionMismatch => Self::new(
                ErrorCode::PreconditionFailed,
                "the agent changed since the version given in If-Match",
            ),
            StoreError::LeaseLost(_) => Self::new(ErrorCode::Conflict, err.to_string()),
            StoreError::Database(cause) => Self::internal(cause),
        }
    }
}

/// Shorthand for handler results.
pub type ApiResult<T> = Result<T, ApiError>;

impl From<crate::search::SearchError> for ApiError {
    fn from(err: crate::search::SearchError) -> Self {
        use crate::search::SearchError;
        match err {
            SearchError::InvalidParameter { parameter, message } => {
                ApiError::invalid_parameter(format!("{parameter}: {message}"))
            }
            SearchError::InvalidCursor => ApiError::new(
                ErrorCode::InvalidParameter,
                "cursor: malformed, or from a different query; start again without it",
            ),
            SearchError::InvalidSort(_) => ApiError::invalid_parameter(format!("sort: {err}")),
        }
    }
}

impl From<crate::registry::RegistryError> for ApiError {
    fn from(err: crate::registry::RegistryError) -> Self {
        use crate::registry::RegistryError;
        match err {
            RegistryError::NotFound(identifier) => ApiError::agent_not_found(&identifier),
            RegistryError::NotOwner => ApiError::forbidden(err.to_string()),
            RegistryError::NamespaceNotGranted { .. } => ApiError::new(
                ErrorCode::NamespaceNotGranted,
                truncate(&err.to_string(), 1000),
            ),
            RegistryError::NamespaceNotOwned { .. } => ApiError::new(
                ErrorCode::NamespaceNotOwned,
                truncate(&err.to_string(), 1000),
            ),
            RegistryError::BindingMismatch { .. } => {
                ApiError::new(ErrorCode::BindingMismatch, truncate(&err.to_string(), 1000))
            }
            RegistryError::SecurityFinding { findings } => {
                let errors = findings
                    .iter()
                    .map(|finding| {
                        FieldError::new(
                            finding.field.clone(),
                            format!(
                                "{} ({}): {}",
                                finding.rule,
                                finding.severity.as_str(),
                                truncate(&finding.excerpt, 200)
                            ),
                        )
                    })
                    .collect();
                ApiError {
                    errors,
                    ..ApiError::new(
                        ErrorCode::SecurityFinding,
                        "the scanner found text a model may obey or a reviewer cannot see: each \
                         finding is in errors",
                    )
                }
            }
            RegistryError::Mirrored { .. } => {
                ApiError::new(ErrorCode::MirroredReadOnly, err.to_string())
            }
            RegistryError::Invalid(errors) => ApiError::validation(errors),
            RegistryError::VersionConflict(conflict) => {
                ApiError::new(ErrorCode::VersionConflict, conflict.to_string())
            }
            RegistryError::VersionNotFound {
                identifier,
                version,
            } => ApiError::new(
                ErrorCode::VersionNotFound,
                format!(
                    "agent '{}' has no version '{}'",
                    truncate(&identifier, 200),
                    truncate(&version, 100)
                ),
            ),
            RegistryError::OrgNotFound(org) => ApiError::new(
                ErrorCode::OrgNotFound,
                format!("no organisation '{}'", truncate(&org, 60)),
            ),
            RegistryError::NotOrgPublisher(_) | RegistryError::NotReceiver => {
                ApiError::forbidden(err.to_string())
            }
            RegistryError::TransferNotFound(id) => ApiError::new(
                ErrorCode::TransferNotFound,
                format!(
                    "no transfer '{}' (pending, and yours to settle)",
                    truncate(&id, 64)
                ),
            ),
            RegistryError::Offline => ApiError::new(ErrorCode::Unavailable, err.to_string()),
            RegistryError::Store(err) => err.into(),
            RegistryError::Search(err) => err.into(),
        }
    }
}
