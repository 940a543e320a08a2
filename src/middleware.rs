//! Cross-cutting request handling: metrics, per-IP rate limiting, timeouts, and the fallbacks
//! that keep unknown routes and methods inside the error model.

use std::net::{IpAddr, SocketAddr};
use std::num::NonZeroU32;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::StatusCode;
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

/// Sign-ins one client address may start (or finish) per minute.
pub const SIGNINS_PER_MINUTE: u32 = 30;

/// Per-client-IP token bucket for public paths.
pub struct RateLimit {
    limiter: Option<DefaultKeyedRateLimiter<IpAddr>>,
    exempt_loopback: bool,
    /// How many trusted proxies append to `X-Forwarded-For` (0: the header is ignored).
    proxy_hops: usize,
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
            proxy_hops: config.proxy_hops(),
        }
    }

    /// The tighter per-IP limit of sign-in (`/auth/…`, `POST /api/auth/github`): at most
    /// `SIGNINS_PER_MINUTE` a minute from one address, 10 at once; loopback as configured.
    pub fn for_signin(config: &Config) -> Self {
        let quota =
            Quota::per_minute(NonZeroU32::new(SIGNINS_PER_MINUTE).unwrap_or(NonZeroU32::MIN))
                .allow_burst(NonZeroU32::new(10).unwrap_or(NonZeroU32::MIN));
        Self {
            limiter: Some(RateLimiter::keyed(quota)),
            exempt_loopback: config.rate_limit_exempt_loopback,
            proxy_hops: config.proxy_hops(),
        }
    }

    /// Forget clients whose buckets are full again, so memory follows the active clients rather
    /// than every IP ever seen. Runs every minute until the limiter is dropped.
    pub fn prune_periodically(limit: &Arc<Self>) {
        prune_every_minute(limit, |limit| limit.limiter.as_ref());
    }

    /// The client's address, and whether it is the connection's own peer (not taken from a
    /// header).
    fn client_ip(&self, request: &Request) -> Option<(IpAddr, bool)> {
        if let Some(ip) = forwarded_client(request.headers(), self.proxy_hops) {
            return Some((ip, false));
        }
        request
            .extensions()
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| (addr.ip(), true))
    }

    /// `Err(seconds to wait)` when `request` is over the limit.
    fn check(&self, request: &Request) -> Result<(), u64> {
        let (Some(limiter), Some((ip, from_peer))) = (&self.limiter, self.client_ip(request))
        else {
            return Ok(());
        };
        // Only the connection itself can prove a loopback client: a header cannot.
        if self.exempt_loopback && from_peer && ip.is_loopback() {
            return Ok(());
        }
        limiter.check_key(&ip).map_err(|not_until| {
            let wait = not_until.wait_time_from(DefaultClock::default().now());
            wait.as_secs().max(1)
        })
    }
}

/// Every minute until `owner` is dropped, forget the keys of its limiter whose buckets are full
/// again (shared by the per-IP and per-token limits).
pub fn prune_every_minute<T, K>(
    owner: &Arc<T>,
    limiter: fn(&T) -> Option<&DefaultKeyedRateLimiter<K>>,
) where
    T: Send + Sync + 'static,
    K: std::hash::Hash + Eq + Clone + Send + Sync + 'static,
{
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return;
    };
    let weak = Arc::downgrade(owner);
    runtime.spawn(async move {
        let mut tick = tokio::time::interval(Duration::from_secs(60));
        tick.tick().await;
        loop {
            tick.tick().await;
            let Some(owner) = weak.upgrade() else { break };
            if let Some(limiter) = limiter(&owner) {
                limiter.retain_recent();
                limiter.shrink_to_fit();
            }
        }
    });
}

/// The client address that the nearest of `hops` trusted proxies saw: each proxy appends the
/// address it received the request from, so that is the entry `hops` places from the right.
/// Entries to its left were written by the client and are never trusted. `None` when `hops` is
/// 0, or when the header has fewer entries than `hops` (the request did not come through every
/// proxy) or the entry is not an IP address.
pub fn forwarded_client(headers: &axum::http::HeaderMap, hops: usize) -> Option<IpAddr> {
    if hops == 0 {
        return None;
    }
    // Proxies may add several header lines: together they are one list, in order.
    let entries: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .collect();
    let entry = entries.len().checked_sub(hops).map(|i| entries[i])?;
    entry.parse().ok()
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

/// Longest request target read (path and query); longer ones are 414.
pub const MAX_URI_BYTES: usize = 8 * 1024;

/// Refuse at once what is too large to read: a request target over 8 KiB (414), and a body whose
/// declared `Content-Length` is over the body limit (413), before a byte of it is read.
pub async fn early_limits(
    State(body_limit): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let target = request
        .uri()
        .path_and_query()
        .map_or(0, |pq| pq.as_str().len());
    if target > MAX_URI_BYTES {
        return ApiError::new(
            ErrorCode::UriTooLong,
            format!("the request target is {target} bytes; at most {MAX_URI_BYTES} are read"),
        )
        .into_response();
    }
    let declared = request
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if let Some(length) = declared.filter(|&length| length > body_limit as u64) {
        return ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the body is {length} bytes; at most {body_limit} are read"),
        )
        .into_response();
    }
    next.run(request).await
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

/// A path no route has, as an API error (`web::not_found` answers browsers with a page).
pub fn not_found(request: &Request) -> Response {
    ApiError::new(
        ErrorCode::NotFound,
        format!(
            "no route for {} {}",
            request.method(),
            crate::domain::truncate(request.uri().path(), 200)
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
            crate::domain::truncate(request.uri().path(), 200)
        ),
    )
}

/// What the audit layer needs: where refused writes go, and how to find the client's address.
pub struct AuditLayer {
    pub store: Arc<dyn crate::store::Store>,
    /// To find the agent a refused write was about.
    pub registry: Arc<crate::registry::Registry>,
    /// How many trusted proxies append to `X-Forwarded-For`.
    pub proxy_hops: usize,
}

/// Around every write request to the API and sign-in (`/api/…`, `/auth/…`, any method but
/// GET, HEAD and OPTIONS): an audit context the store writes its rows from, in the transaction
/// of each change; and, for one that was refused (a 4xx other than 429), a row saying who
/// tried what and why.
pub async fn audit(State(layer): State<Arc<AuditLayer>>, request: Request, next: Next) -> Response {
    use axum::http::Method;
    if matches!(
        *request.method(),
        Method::GET | Method::HEAD | Method::OPTIONS
    ) {
        return next.run(request).await;
    }
    let client = forwarded_client(request.headers(), layer.proxy_hops)
        .or_else(|| {
            request
                .extensions()
                .get::<ConnectInfo<SocketAddr>>()
                .map(|ConnectInfo(addr)| addr.ip())
        })
        .map(|ip| ip.to_string());
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let context = crate::audit::AuditContext::new(client);
    let response = crate::audit::scope(Arc::clone(&context), next.run(request)).await;
    let status = response.status();
    let recorded = status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS;
    if recorded {
        let reason = response
            .extensions()
            .get::<crate::error::ErrorSummary>()
            .map(|summary| format!("{}: {}", summary.code.as_str(), summary.detail))
            .unwrap_or_else(|| status.to_string());
        let actor = context.actor();
        // A refusal about an agent concerns its owner too, who may read it.
        let agent = match path
            .strip_prefix("/api/agents/")
            .and_then(|rest| rest.split('/').next())
        {
            Some(id) if !id.is_empty() && id != "publish" => {
                let id = percent_decoded(id);
                layer.registry.find(&id).await.ok().flatten()
            }
            _ => None,
        };
        let entry = crate::store::AuditEntry {
            target: Some(crate::domain::truncate(&path, 300).to_owned()),
            agent_id: agent.as_ref().map(|agent| agent.id.clone()),
            package_name: agent.as_ref().map(|agent| agent.package_name().to_owned()),
            owner: agent.as_ref().map(|agent| agent.owner.clone()),
            outcome: "refused".to_owned(),
            reason: Some(reason),
            ..crate::store::AuditEntry::by(
                actor.as_ref(),
                context.client.clone(),
                &format!("{method} {path}"),
                crate::timestamp::Timestamp::now(),
            )
        };
        if let Err(err) = layer.store.insert_audit(&entry).await {
            tracing::warn!(error = %err, "cannot record a refused write in the audit log");
        }
    }
    response
}

/// A path segment with its percent-escapes decoded (invalid UTF-8 replaced).
fn percent_decoded(segment: &str) -> String {
    url::form_urlencoded::parse(format!("x={}", segment.replace('+', "%2B")).as_bytes())
        .next()
        .map(|(_, value)| value.into_owned())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::{HeaderMap, HeaderValue};

    fn headers(values: &[&str]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for value in values {
            headers.append(
                "x-forwarded-for",
                HeaderValue::from_str(value).expect("value"),
            );
        }
        headers
    }

    #[test]
    fn the_client_is_the_entry_the_nearest_trusted_proxy_appended() {
        let ip = |text: &str| Some(text.parse::<IpAddr>().expect("ip"));
        let chain = headers(&["6.6.6.6, 203.0.113.9, 10.0.0.2"]);
        assert_eq!(forwarded_client(&chain, 0), None, "0 hops: ignored");
        assert_eq!(forwarded_client(&chain, 1), ip("10.0.0.2"));
        assert_eq!(forwarded_client(&chain, 2), ip("203.0.113.9"));
        assert_eq!(
            forwarded_client(&chain, 4),
            None,
            "fewer entries than proxies"
        );
        let split = headers(&["6.6.6.6", "203.0.113.9, 2001:db8::1"]);
        assert_eq!(forwarded_client(&split, 1), ip("2001:db8::1"));
        assert_eq!(forwarded_client(&split, 2), ip("203.0.113.9"));
        assert_eq!(forwarded_client(&headers(&["not-an-ip"]), 1), None);
        assert_eq!(forwarded_client(&HeaderMap::new(), 1), None);
    }
}
