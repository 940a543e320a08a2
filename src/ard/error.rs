//! Errors in ARD's shape, `{"errorCode": "INVALID_ARGUMENT", "message": "…"}`, with ARD's codes
//! (400 `INVALID_ARGUMENT`, 401 `UNAUTHENTICATED`, 404 `NOT_FOUND`, 429 `RATE_LIMIT_EXCEEDED`,
//! 500 `INTERNAL_ERROR`) and, for the statuses ARD does not name, the same style of code.
//! Every error of an ARD path has this shape, those raised before a handler runs (body limits,
//! rate limits, unknown methods) included: `in_ard_shape` rewrites them.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::json;

use crate::error::ApiError;

/// An ARD error response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ArdError {
    pub status: StatusCode,
    pub message: String,
}

/// The body of an ARD error.
#[derive(Debug, Serialize, utoipa::ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ArdErrorBody {
    /// `INVALID_ARGUMENT`, `UNAUTHENTICATED`, `NOT_FOUND`, `RATE_LIMIT_EXCEEDED`,
    /// `INTERNAL_ERROR`; also `PERMISSION_DENIED`, `UNSUPPORTED_MEDIA_TYPE`,
    /// `PAYLOAD_TOO_LARGE`, `METHOD_NOT_ALLOWED`, `UNAVAILABLE`.
    #[schema(example = "INVALID_ARGUMENT")]
    pub error_code: String,
    /// What went wrong, naming the field.
    pub message: String,
}

impl ArdError {
    pub fn invalid(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
        }
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self {
            status: StatusCode::NOT_FOUND,
            message: message.into(),
        }
    }
}

/// ARD's code for an HTTP status.
pub fn code_for(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 | 422 => "INVALID_ARGUMENT",
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        405 => "METHOD_NOT_ALLOWED",
        413 | 414 | 431 => "PAYLOAD_TOO_LARGE",
        415 => "UNSUPPORTED_MEDIA_TYPE",
        429 => "RATE_LIMIT_EXCEEDED",
        503 | 504 => "UNAVAILABLE",
        _ => "INTERNAL_ERROR",
    }
}

impl IntoResponse for ArdError {
    fn into_response(self) -> Response {
        let body = json!({"errorCode": code_for(self.status), "message": self.message});
        (self.status, axum::Json(body)).into_response()
    }
}

impl From<ApiError> for ArdError {
    fn from(err: ApiError) -> Self {
        let status = err.code.status();
        let mut message = err.detail;
        for field in &err.errors {
            message.push_str(&format!("; {}: {}", field.field, field.message));
        }
        if status.is_server_error() {
            tracing::error!(error = %message, "ARD request failed");
            message = "internal error".to_owned();
        }
        Self { status, message }
    }
}

impl From<crate::registry::RegistryError> for ArdError {
    fn from(err: crate::registry::RegistryError) -> Self {
        ApiError::from(err).into()
    }
}

impl From<ArdError> for ApiError {
    fn from(err: ArdError) -> Self {
        use crate::error::ErrorCode;
        match err.status.as_u16() {
            400 => ApiError::invalid_parameter(err.message),
            404 => ApiError::new(ErrorCode::NotFound, err.message),
            _ => ApiError::internal(err.message),
        }
    }
}

/// Whether a request path is one of the ARD registry API's.
pub fn is_ard_path(path: &str) -> bool {
    path == super::API_BASE || path.starts_with("/ard/")
}

/// Most bytes of a problem body read back to rewrite it.
const MAX_PROBLEM_BYTES: usize = 64 * 1024;

/// Rewrite the `application/problem+json` errors of ARD paths into ARD's shape, keeping the
/// status and the headers (`Retry-After`, `Allow`).
pub async fn in_ard_shape(request: Request, next: Next) -> Response {
    if !is_ard_path(request.uri().path()) {
        return next.run(request).await;
    }
    let response = next.run(request).await;
    let is_problem = response
        .headers()
        .get(header::CONTENT_TYPE)
        .is_some_and(|value| value.as_bytes().starts_with(b"application/problem+json"));
    if !is_problem {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    let bytes = axum::body::to_bytes(body, MAX_PROBLEM_BYTES)
        .await
        .unwrap_or_default();
    let problem: serde_json::Value = serde_json::from_slice(&bytes).unwrap_or_default();
    let mut message = problem["detail"]
        .as_str()
        .unwrap_or_else(|| parts.status.canonical_reason().unwrap_or("error"))
        .to_owned();
    for field in problem["errors"].as_array().into_iter().flatten() {
        if let (Some(name), Some(text)) = (field["field"].as_str(), field["message"].as_str()) {
            message.push_str(&format!("; {name}: {text}"));
        }
    }
    // ARD has no 422: a body it cannot take is an invalid argument.
    if parts.status == StatusCode::UNPROCESSABLE_ENTITY {
        parts.status = StatusCode::BAD_REQUEST;
    }
    let body = json!({"errorCode": code_for(parts.status), "message": message}).to_string();
    parts.headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    parts.headers.remove(header::CONTENT_LENGTH);
    Response::from_parts(parts, Body::from(body))
}
