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
    responses((status = 200, description = "The process answers", body = crate::wire::schema::Health)))]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Readiness: storage answers and the keyword index is loaded (while the server starts, 503).
///
/// `vectors` says whether intent ranking is on: `loading` while agents' vectors are loaded or
/// computed in the background (`embedded` of `total` so far; searches rank by keywords), `ready`,
/// or `none` without an embedder. `embedder` is the id of the embedder ranking now;
/// `embedder_note` says what is under way or why the retrieval model is not used.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses((status = 200, description = "Ready", body = crate::wire::schema::Readiness),
              (status = 503, body = crate::error::Problem, description = "`unavailable`: storage does not answer, or the server is starting")))]
pub async fn readyz(State(state): State<AppState>) -> ApiResult<Json<Value>> {
    state.store.ping().await.map_err(|err| {
        tracing::warn!(error = %err, "storage not ready");
        ApiError::new(ErrorCode::Unavailable, "storage is not reachable")
    })?;
    let total = state.registry.indexed();
    let progress = state.registry.vector_progress();
    let (vectors, embedded) = match (progress.none, progress.ready) {
        (true, _) => ("none", 0),
        (false, true) => ("ready", total),
        (false, false) => ("loading", progress.embedded.min(total)),
    };
    let mut body = json!({
        "status": "ready",
        "storage": "ok",
        "indexed_agents": total,
        "vectors": vectors,
        "embedded": embedded,
        "total": total,
        "embedder": state.registry.embedder_id().unwrap_or_else(|| "none".to_owned()),
    });
    if let Some(note) = state.registry.embedder_note() {
        body["embedder_note"] = note.into();
    }
    Ok(Json(body))
}

/// Prometheus text format: request counts and latency histograms by route and status, the
/// index's size, the liveness prober's work (`registry_agents_by_health{status}`,
/// `registry_probes_total{status}`, `registry_probe_duration_seconds`), and each mirror
/// source's state (`registry_mirror_entries`, `…_skipped`, `…_collisions`, `…_failures`,
/// `…_lag_seconds`, by `source`; `registry_mirror_passes_total{source,outcome}`,
/// `registry_mirror_entries_skipped_total{source,reason}`).
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition format: request counts and latencies by route and status, index size, agents by health status, probes run by outcome", body = String, content_type = "text/plain")))]
pub async fn metrics(State(state): State<AppState>) -> impl IntoResponse {
    metrics::gauge!("registry_indexed_agents").set(state.registry.indexed() as f64);
    let progress = state.registry.vector_progress();
    metrics::gauge!("registry_vectors_ready").set(if progress.ready { 1.0 } else { 0.0 });
    metrics::gauge!("registry_embedded_agents").set(progress.embedded as f64);
    let text = state.registry.text_stats();
    metrics::gauge!("registry_text_segments").set(text.segments as f64);
    metrics::gauge!("registry_text_stored_docs").set(text.stored_docs as f64);
    metrics::gauge!("registry_text_live_docs").set(text.live_docs as f64);
    for (status, count) in state.registry.health_counts() {
        metrics::gauge!("registry_agents_by_health", "status" => status.as_str()).set(count as f64);
    }
    if let Ok(mirrors) = state.mirrors.status().await {
        let now = crate::timestamp::Timestamp::now();
        for (source, record) in &mirrors {
            let configured = state.mirrors.is_configured(source);
            let view = super::mirrors::MirrorView::of(source, record.as_ref(), configured, now);
            let source = view.id.clone();
            metrics::gauge!("registry_mirror_entries", "source" => source.clone())
                .set(view.entries as f64);
            metrics::gauge!("registry_mirror_skipped", "source" => source.clone())
                .set(view.skipped as f64);
            metrics::gauge!("registry_mirror_collisions", "source" => source.clone())
                .set(view.collisions as f64);
            metrics::gauge!("registry_mirror_failures", "source" => source.clone())
                .set(view.failures as f64);
            metrics::gauge!("registry_mirror_lag_seconds", "source" => source)
                .set(view.lag_secs.map_or(f64::NAN, |lag| lag as f64));
        }
    }
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        state.metrics.render(),
    )
}
