//! Cross-cutting request handling: metrics, per-IP rate limiting, timeouts, and the fallbacks
//! that keep unknown routes and methods inside the error model.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use governor::clock::{Clock, DefaultClock};
use governor::{DefaultKeyedRateLimiter, Quota, RateLimiter};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::config::Config;
use crate::error::{ApiError, ErrorCode};

/// The process-wide Prometheus recorder (installed once, shared by every app in the process).
pub fn prometheus() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    Matcher::Full("http_request_duration_seconds".to_owned()),
                    &[
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                        5.0, 10.0,
                    ],
                )
                .map(PrometheusBuilder::build_recorder)
                .unwrap_or_else(|_| PrometheusBuilder::new().build_recorder());
            let handle = recorder.handle();
            // Fails only when another recorder is installed; metrics then go there.
            let _ = metrics::set_global_recorder(recorder);
            handle
        })
        .clone()
}

/// Count and time every request by route template and status.
pub async fn track_metrics(request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let response = next.run(request).await;
    let status = response.status().as_u16().to_string();
    let labels = [("method", method), ("route", route), ("status", status)];
    metrics::counter!("http_requests_total", &labels).increment(1);
    metrics::histogram!("http_request_duration_seconds", &labels)
        .record(started.elapsed().as_secs_f64());
    response
}

/// Per-client-IP token bucket for public paths.
pub struct RateLimit {
    limiter: Option<DefaultKeyedRateLimiter<IpAddr>>,
    exempt_loopback: bool,
    trust_forwarded_for: bool,
}

impl RateLimit {
    pub fn from_config(config: &Config) -> Self {
        let limiter = NonZeroU32::new(config.rate_limit_per_minute).map(|per_minute| {
            let burst = NonZeroU32::new(config.rate_limit_burst).unwrap_or(per_minute);
            RateLimiter::keyed(Quota::per_minute(per_minute).allow_burst(burst))
        });
        Self {
            limiter,
            exempt_loopback: config.rate_limit_exempt_loopback,
            trust_forwarded_for: config.trust_forwarded_for,
        }
    }

    /// Forget clients whose buckets are full again, so memory follows the active clients rather
    /// than every IP ever seen. Runs every minute until the limiter is dropped.
    pub fn prune_periodically(limit: &Arc<Self>) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let weak = Arc::downgrade(limit);
        runtime.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(60));
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(limit) = weak.upgrade() else { break };
                if let Some(limiter) = &limit.limiter {
                    limiter.retain_recent();
                    limiter.shrink_to_fit();
                }
            }
        });
    }

    fn client_ip(&self, request: &Request) -> Option<IpAddr> {
        if self.trust_forwarded_for {
            let forwarded = request
                .headers()
                .get("x-forwarded-for")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.split(',').next())
                .and_then(|ip| ip.trim().parse().ok());
            if forwarded.is_some() {
                return forwarded;
            }
        }
        request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| addr.ip())
    }

    /// `Err(seconds to wait)` when `request` is over the limit.
    fn check(&self, request: &Request) -> Result<(), u64> {
        let (Some(limiter), Some(ip)) = (&self.limiter, self.client_ip(request)) else {
            return Ok(());
        };
        if self.exempt_loopback && ip.is_loopback() {
            return Ok(());
        }
        limiter.check_key(&ip).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            wait.as_secs().max(1)
        })
    }
}

pub async fn rate_limit(
    State(limit): State<Arc<RateLimit>>,
    request: Request,
    next: Next,
) -> Response {
    match limit.check(&request) {
        Ok(()) => next.run(request).await,
        Err(retry_after) => {
            let mut error = ApiError::new(
                ErrorCode::RateLimited,
                format!("too many requests; retry in {retry_after} s"),
            );
            error.retry_after_secs = Some(retry_after);
            error.into_response()
        }
    }
}

/// Abandon a request that runs longer than the configured timeout.
pub async fn timeout(State(limit): State<Duration>, request: Request, next: Next) -> Response {
    match tokio::time::timeout(limit, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            ErrorCode::RequestTimeout,
            format!("the request took longer than {} s", limit.as_secs()),
        )
        .into_response(),
    }
}

pub async fn not_found(request: Request) -> Response {
    if request.method() == axum::http::Method::GET && crate::web::wants_html(request.headers()) {
        return crate::web::not_found_page();
    }
    ApiError::new(
        ErrorCode::NotFound,
        format!(
            "no route for {} {}",
            request.method(),
            crate::error::truncate(request.uri().path(), 200)
        ),
    )
    .into_response()
}

pub async fn method_not_allowed(request: Request) -> ApiError {
    ApiError::new(
        ErrorCode::MethodNotAllowed,
        format!(
            "{} is not allowed on {}",
            request.method(),
            crate::error::truncate(request.uri().path(), 200)
        ),
    )
}
