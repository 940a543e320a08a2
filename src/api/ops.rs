//! Operational endpoints: liveness, readiness, Prometheus metrics.

use axum::Json;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use crate::error::{ApiError, ApiResult, ErrorCode};
use crate::state::AppState;

/// Liveness: the process answers.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "`{\"status\": \"ok\"}`")))]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: storage answers and the search index is loaded.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "Ready"), (status = 503, body = crate::error::Problem)))]
pub async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    state.store.ping().await.map_err(|err| {
        tracing::warn!(error = %err, "storage not ready");
        ApiError::new(ErrorCode::Unavailable, "storage is not reachable")
    })?;
    Ok(Json(json!({
        "status": "ready",
        "storage": "ok",
        "indexed_agents": state.index.len(),
    })))
}

/// Prometheus text format: request counts and latency histograms by route and status.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition format")))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    metrics::gauge!("registry_indexed_agents").set(state.index.len() as f64);
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}
