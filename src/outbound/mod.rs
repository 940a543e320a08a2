//! Outbound HTTP: the one way the registry fetches from the network (web pages for the reader,
//! agent cards, domain-verification files, the hosted agents' APIs), with an SSRF guard.
//!
//! For URLs a caller supplied, only http(s) without credentials is fetched, and only from public
//! addresses: IP-literal hosts are checked before connecting, and names go through a resolver that
//! drops private, loopback, link-local, metadata and reserved addresses (refusing when none are
//! left), so the address connected to is the address checked. Redirects are followed by hand, at
//! most a few, each `Location` checked again. There is no proxy, a connect timeout, a total
//! timeout, a body-size cap, a content-type check and a descriptive User-Agent. See
//! `docs/outbound.md`.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use axum::body::Bytes;
use reqwest::header::{self, HeaderName, HeaderValue};
use reqwest::{StatusCode, redirect};
use url::{Host, Url};

use crate::config::UpstreamConfig;
use crate::error::{ApiError, ErrorCode};

mod address;

pub use address::forbidden_reason;

#[cfg(test)]
mod tests;

/// Redirects followed at most, unless a request says fewer.
pub const MAX_REDIRECTS: u8 = 5;

/// Turns a host name into IP addresses. The system resolver in production; tests substitute a
/// static table so that "a name resolving to a private address" needs no DNS.
#[async_trait]
pub trait HostResolver: Send + Sync + 'static {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>>;
}

/// The operating system's resolver (`getaddrinfo` through tokio).
pub struct SystemResolver;

#[async_trait]
impl HostResolver for SystemResolver {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        Ok(tokio::net::lookup_host((host, 0))
            .await?
            .map(|address| address.ip())
            .collect())
    }
}

/// A fixed table of names (tests); unknown names do not resolve.
#[derive(Default)]
pub struct StaticResolver(HashMap<String, Vec<IpAddr>>);

impl StaticResolver {
    /// Add `host` → `ips`.
    pub fn with(mut self, host: &str, ips: &[IpAddr]) -> Self {
        self.0.insert(host.to_ascii_lowercase(), ips.to_vec());
        self
    }
}

#[async_trait]
impl HostResolver for StaticResolver {
    async fn lookup(&self, host: &str) -> std::io::Result<Vec<IpAddr>> {
        self.0
            .get(&host.to_ascii_lowercase())
            .cloned()
            .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "unknown host"))
    }
}

/// Which addresses a fetcher may connect to.
#[derive(Clone, Debug)]
pub enum AddressPolicy {
    /// Public internet addresses only, plus the listed exceptions (tests pin a fake's address).
    PublicOnly { exempt: Vec<IpAddr> },
    /// Any address: for origins the operator configured, or when the operator allows private
    /// targets (`REGISTRY_OUTBOUND_ALLOW_PRIVATE`).
    Any,
}

impl AddressPolicy {
    /// `Err(reason)` when the policy refuses `ip`.
    fn check(&self, ip: IpAddr) -> Result<(), String> {
        match self {
            Self::Any => Ok(()),
            Self::PublicOnly { exempt } if exempt.contains(&ip) => Ok(()),
            Self::PublicOnly { .. } => forbidden_reason(ip).map_or(Ok(()), Err),
        }
    }
}

/// How an `Outbound` is built.
#[derive(Clone)]
pub struct OutboundSettings {
    pub policy: AddressPolicy,
    pub resolver: Arc<dyn HostResolver>,
    pub connect_timeout: Duration,
    /// Default total time of one fetch, redirects and body included.
    pub timeout: Duration,
    pub user_agent: String,
}

impl OutboundSettings {
    /// Settings for user-supplied URLs: public addresses only unless the configuration allows
    /// private targets.
    pub fn for_user_urls(config: &UpstreamConfig, base_url: &str) -> Self {
        let policy = if config.outbound_allow_private {
            AddressPolicy::Any
        } else {
            AddressPolicy::PublicOnly { exempt: Vec::new() }
        };
        Self {
            policy,
            resolver: Arc::new(SystemResolver),
            connect_timeout: Duration::from_secs(config.upstream_connect_timeout_secs.max(1)),
            timeout: Duration::from_secs(config.upstream_timeout_secs.max(1)),
            user_agent: user_agent(base_url),
        }
    }

    /// Settings for the operator-configured API origins of the hosted agents: any address.
    pub fn for_configured_apis(config: &UpstreamConfig, base_url: &str) -> Self {
        Self {
            policy: AddressPolicy::Any,
            ..Self::for_user_urls(config, base_url)
        }
    }
}

/// `agent-registry/0.1.0 (+https://registry.example.com)`.
pub fn user_agent(base_url: &str) -> String {
    format!(
        "agent-registry/{} (+{base_url}; A2A agent registry fetching agent cards and pages)",
        env!("CARGO_PKG_VERSION")
    )
}

/// Media types a response may have: `application/json` exactly, `+json` as a suffix,
/// `text/*` as a prefix.
pub type MediaRanges = &'static [&'static str];

pub const JSON: MediaRanges = &["application/json", "+json"];
pub const HTML_OR_TEXT: MediaRanges = &["text/html", "application/xhtml+xml", "text/plain"];
pub const TEXT: MediaRanges = &["text/*"];

/// One request (a GET, or a POST of a JSON body): limits, accepted media types, extra headers.
#[derive(Clone, Debug)]
pub struct Fetch {
    pub url: Url,
    /// A body to POST with its media type; `None` for a GET.
    pub body: Option<(Bytes, &'static str)>,
    pub max_bytes: usize,
    pub max_redirects: u8,
    /// Overrides the fetcher's default total timeout.
    pub timeout: Option<Duration>,
    /// Media types accepted on a 2xx response; other statuses are returned whatever their type.
    pub accept: MediaRanges,
    pub headers: Vec<(HeaderName, String)>,
    /// Stop reading the body once this holds for what has arrived (an event stream that stays
    /// open after its first event); `None` reads to the end.
    pub complete: Option<fn(&[u8]) -> bool>,
}

impl Fetch {
    /// A GET of `url` accepting `accept`, at most `max_bytes`, following up to 5 redirects.
    pub fn get(url: Url, accept: MediaRanges, max_bytes: usize) -> Self {
        Self {
            url,
            body: None,
            max_bytes,
            max_redirects: MAX_REDIRECTS,
            timeout: None,
            accept,
            headers: Vec::new(),
            complete: None,
        }
    }

    /// A POST of `body` as `application/json` to `url`. Redirects are not followed: re-sending a
    /// body to wherever a `Location` points is not something a caller asked for.
    pub fn post_json(
        url: Url,
        body: &serde_json::Value,
        accept: MediaRanges,
        max_bytes: usize,
    ) -> Self {
        Self {
            body: Some((Bytes::from(body.to_string()), "application/json")),
            ..Self::get(url, accept, max_bytes).redirects(0)
        }
    }

    /// A POST of `body` as `application/x-www-form-urlencoded` (an OAuth token request), not
    /// following redirects.
    pub fn post_form(url: Url, body: Vec<u8>, accept: MediaRanges, max_bytes: usize) -> Self {
        Self {
            body: Some((Bytes::from(body), "application/x-www-form-urlencoded")),
            ..Self::get(url, accept, max_bytes).redirects(0)
        }
    }

    pub fn redirects(mut self, max: u8) -> Self {
        self.max_redirects = max;
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }

    pub fn header(mut self, name: HeaderName, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// Stop reading once `complete` holds for the body so far.
    pub fn until(mut self, complete: fn(&[u8]) -> bool) -> Self {
        self.complete = Some(complete);
        self
    }
}

/// A response read in full.
#[derive(Debug)]
pub struct Fetched {
    /// The URL that answered, after redirects.
    pub url: Url,
    pub status: StatusCode,
    /// The media type without parameters, lowercase; empty when absent.
    pub media_type: String,
    /// `Retry-After` in seconds, when given as a number.
    pub retry_after_secs: Option<u64>,
    /// The validators for a conditional request next time (`ETag`, `Last-Modified`).
    pub etag: Option<String>,
    pub last_modified: Option<String>,
    /// An MCP server's `Mcp-Session-Id`, which later requests of that session must send.
    pub mcp_session: Option<String>,
    pub body: Bytes,
}

impl Fetched {
    /// The body as JSON.
    pub fn json<T: serde::de::DeserializeOwned>(&self) -> Result<T, serde_json::Error> {
        serde_json::from_slice(&self.body)
    }

    /// The body as text (invalid UTF-8 replaced).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Why a fetch did not produce a response.
#[derive(Debug, thiserror::Error)]
pub enum OutboundError {
    #[error("{0}")]
    InvalidUrl(String),
    #[error("refused to fetch {url}: {host} {reason}")]
    Forbidden {
        url: String,
        host: String,
        reason: String,
    },
    #[error("cannot resolve {host}: {detail}")]
    Resolve { host: String, detail: String },
    #[error("{url} did not answer within {secs} s")]
    Timeout { url: String, secs: u64 },
    #[error("cannot reach {url}: {detail}")]
    Connect { url: String, detail: String },
    #[error("{url} sent more than {limit} bytes")]
    TooLarge { url: String, limit: usize },
    #[error("{url} answered with content type '{got}', expected {expected}")]
    ContentType {
        url: String,
        got: String,
        expected: String,
    },
    #[error("{url} redirected more than {limit} times")]
    TooManyRedirects { url: String, limit: u8 },
    #[error("{url} redirects, and redirects are not followed here")]
    RedirectNotFollowed { url: String },
    #[error("{url} redirected without a usable Location")]
    BadRedirect { url: String },
}

impl OutboundError {
    /// The error code a client sees: bad or forbidden URLs are the caller's mistake, the rest
    /// is the upstream's.
    pub fn code(&self) -> ErrorCode {
        match self {
            Self::InvalidUrl(_) | Self::Forbidden { .. } => ErrorCode::InvalidParameter,
            Self::Timeout { .. } => ErrorCode::UpstreamTimeout,
            _ => ErrorCode::UpstreamError,
        }
    }
}

impl From<OutboundError> for ApiError {
    fn from(err: OutboundError) -> Self {
        ApiError::new(err.code(), err.to_string())
    }
}

/// The fetcher. Cheap to share behind an `Arc`.
pub struct Outbound {
    client: reqwest::Client,
    policy: AddressPolicy,
    resolver: Arc<dyn HostResolver>,
    connect_timeout: Duration,
    timeout: Duration,
}

impl Outbound {
    pub fn new(settings: OutboundSettings) -> anyhow::Result<Self> {
        let guarded = GuardedResolver {
            inner: Arc::clone(&settings.resolver),
            policy: settings.policy.clone(),
        };
        let client = reqwest::Client::builder()
            .redirect(redirect::Policy::none())
            .no_proxy()
            .connect_timeout(settings.connect_timeout)
            .user_agent(settings.user_agent)
            .dns_resolver(Arc::new(guarded))
            .build()?;
        Ok(Self {
            client,
            policy: settings.policy,
            resolver: settings.resolver,
            connect_timeout: settings.connect_timeout,
            timeout: settings.timeout,
        })
    }

    /// Send `fetch` (GET, or POST with its body), checking every hop, and read the body within
    /// the limits.
    pub async fn get(&self, fetch: &Fetch) -> Result<Fetched, OutboundError> {
        let timeout = fetch.timeout.unwrap_or(self.timeout);
        match tokio::time::timeout(timeout, self.follow(fetch)).await {
            Ok(result) => result,
            Err(_) => Err(OutboundError::Timeout {
                url: fetch.url.to_string(),
                secs: timeout.as_secs().max(1),
            }),
        }
    }

    async fn follow(&self, fetch: &Fetch) -> Result<Fetched, OutboundError> {
        let mut url = fetch.url.clone();
        let mut hops = 0u8;
        loop {
            self.check_url(&url).await?;
            let response = self.send(&url, fetch).await?;
            let status = response.status();
            if !status.is_redirection() || status == StatusCode::NOT_MODIFIED {
                return read(url, response, fetch).await;
            }
            if fetch.max_redirects == 0 {
                return Err(OutboundError::RedirectNotFollowed {
                    url: url.to_string(),
                });
            }
            if hops >= fetch.max_redirects {
                return Err(OutboundError::TooManyRedirects {
                    url: fetch.url.to_string(),
                    limit: fetch.max_redirects,
                });
            }
            hops += 1;
            url = response
                .headers()
                .get(header::LOCATION)
                .and_then(|location| location.to_str().ok())
                .and_then(|location| url.join(location).ok())
                .ok_or_else(|| OutboundError::BadRedirect {
                    url: url.to_string(),
                })?;
        }
    }

    async fn send(&self, url: &Url, fetch: &Fetch) -> Result<reqwest::Response, OutboundError> {
        let mut request = match &fetch.body {
            None => self.client.get(url.clone()),
            Some((body, media_type)) => self
                .client
                .post(url.clone())
                .header(header::CONTENT_TYPE, *media_type)
                .body(body.clone()),
        };
        request = request.header(
            header::ACCEPT,
            accept_header(fetch.accept).unwrap_or(HeaderValue::from_static("*/*")),
        );
        for (name, value) in &fetch.headers {
            if let Ok(value) = HeaderValue::from_str(value) {
                request = request.header(name.clone(), value);
            }
        }
        request
            .send()
            .await
            .map_err(|err| self.request_error(url, &err))
    }

    /// Scheme, credentials and host of one hop; IP literals and resolved names against the policy.
    pub async fn check_url(&self, url: &Url) -> Result<(), OutboundError> {
        if !matches!(url.scheme(), "http" | "https") {
            return Err(OutboundError::InvalidUrl(format!(
                "only http and https URLs are fetched, not {}",
                url.scheme()
            )));
        }
        if !url.username().is_empty() || url.password().is_some() {
            return Err(OutboundError::InvalidUrl(
                "URLs with credentials (user:password@) are not fetched".to_owned(),
            ));
        }
        let forbidden = |host: &str, reason: String| OutboundError::Forbidden {
            url: url.to_string(),
            host: host.to_owned(),
            reason,
        };
        match url.host() {
            None => Err(OutboundError::InvalidUrl(
                "the URL names no host".to_owned(),
            )),
            Some(Host::Ipv4(ip)) => self
                .policy
                .check(IpAddr::V4(ip))
                .map_err(|reason| forbidden(&ip.to_string(), format!("is {reason}"))),
            Some(Host::Ipv6(ip)) => self
                .policy
                .check(IpAddr::V6(ip))
                .map_err(|reason| forbidden(&ip.to_string(), format!("is {reason}"))),
            Some(Host::Domain(name)) => self.check_name(name).await.map_err(|err| match err {
                NameCheck::Forbidden(reason) => forbidden(name, reason),
                NameCheck::Unresolved(detail) => OutboundError::Resolve {
                    host: name.to_owned(),
                    detail,
                },
            }),
        }
    }

    async fn check_name(&self, name: &str) -> Result<(), NameCheck> {
        if matches!(self.policy, AddressPolicy::Any) {
            return Ok(());
        }
        let name = name.trim_end_matches('.').to_ascii_lowercase();
        if name == "localhost" || name.ends_with(".localhost") {
            return Err(NameCheck::Forbidden("is a loopback name".to_owned()));
        }
        let ips = self
            .resolver
            .lookup(&name)
            .await
            .map_err(|err| NameCheck::Unresolved(err.to_string()))?;
        allowed_addresses(&self.policy, &ips).map(|_| ())
    }

    fn request_error(&self, url: &Url, err: &reqwest::Error) -> OutboundError {
        if let Some(refused) = find_source::<RefusedAddress>(err) {
            return OutboundError::Forbidden {
                url: url.to_string(),
                host: url.host_str().unwrap_or_default().to_owned(),
                reason: refused.0.clone(),
            };
        }
        // Only connecting has a timeout of reqwest's own; the total is enforced around it.
        if err.is_timeout() {
            return OutboundError::Timeout {
                url: url.to_string(),
                secs: self.connect_timeout.as_secs().max(1),
            };
        }
        OutboundError::Connect {
            url: url.to_string(),
            detail: error_chain(err),
        }
    }
}

enum NameCheck {
    Forbidden(String),
    Unresolved(String),
}

/// The addresses the policy allows, or why none is.
fn allowed_addresses(policy: &AddressPolicy, ips: &[IpAddr]) -> Result<Vec<IpAddr>, NameCheck> {
    let mut refusal = None;
    let mut allowed = Vec::new();
    for ip in ips {
        match policy.check(*ip) {
            Ok(()) => allowed.push(*ip),
            Err(reason) => {
                refusal.get_or_insert(format!("resolves to {ip}, {reason}"));
            }
        }
    }
    match (allowed.is_empty(), refusal) {
        (false, _) => Ok(allowed),
        (true, Some(reason)) => Err(NameCheck::Forbidden(reason)),
        (true, None) => Err(NameCheck::Unresolved("no addresses".to_owned())),
    }
}

/// The resolver reqwest connects through: the same policy, applied to the very addresses used.
struct GuardedResolver {
    inner: Arc<dyn HostResolver>,
    policy: AddressPolicy,
}

/// A resolver refusal, found again in reqwest's error chain.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct RefusedAddress(String);

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let inner = Arc::clone(&self.inner);
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let ips = inner.lookup(&host).await?;
            match allowed_addresses(&policy, &ips) {
                Ok(allowed) => {
                    let addrs: reqwest::dns::Addrs = Box::new(
                        allowed
                            .into_iter()
                            .map(|ip| SocketAddr::new(ip, 0))
                            .collect::<Vec<_>>()
                            .into_iter(),
                    );
                    Ok(addrs)
                }
                Err(NameCheck::Forbidden(reason)) => Err(RefusedAddress(reason).into()),
                Err(NameCheck::Unresolved(detail)) => Err(std::io::Error::other(detail).into()),
            }
        })
    }
}

/// Read the body within the size cap and check the media type of a success.
async fn read(
    url: Url,
    mut response: reqwest::Response,
    fetch: &Fetch,
) -> Result<Fetched, OutboundError> {
    let status = response.status();
    let media_type = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.split(';').next())
        .map(|essence| essence.trim().to_ascii_lowercase())
        .unwrap_or_default();
    if status.is_success() && !media_type_accepted(&media_type, fetch.accept) {
        return Err(OutboundError::ContentType {
            url: url.to_string(),
            got: if media_type.is_empty() {
                "(none)".to_owned()
            } else {
                media_type
            },
            expected: fetch.accept.join(" or "),
        });
    }
    let retry_after_secs = response
        .headers()
        .get(header::RETRY_AFTER)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.trim().parse().ok());
    let validator = |name: header::HeaderName| {
        response
            .headers()
            .get(name)
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned)
    };
    let etag = validator(header::ETAG);
    let last_modified = validator(header::LAST_MODIFIED);
    let mcp_session = validator(header::HeaderName::from_static("mcp-session-id"));
    let too_large = || OutboundError::TooLarge {
        url: url.to_string(),
        limit: fetch.max_bytes,
    };
    if response
        .content_length()
        .is_some_and(|length| length > fetch.max_bytes as u64)
    {
        return Err(too_large());
    }
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| OutboundError::Connect {
            url: url.to_string(),
            detail: error_chain(&err),
        })?
    {
        if body.len() + chunk.len() > fetch.max_bytes {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
        if fetch.complete.is_some_and(|complete| complete(&body)) {
            break;
        }
    }
    Ok(Fetched {
        url,
        status,
        media_type,
        retry_after_secs,
        etag,
        last_modified,
        mcp_session,
        body: Bytes::from(body),
    })
}

fn media_type_accepted(media_type: &str, accept: MediaRanges) -> bool {
    accept.iter().any(|range| {
        if let Some(prefix) = range.strip_suffix('*') {
            media_type.starts_with(prefix)
        } else if range.starts_with('+') {
            media_type.ends_with(range)
        } else {
            media_type == *range
        }
    })
}

fn accept_header(accept: MediaRanges) -> Option<HeaderValue> {
    let ranges: Vec<&str> = accept
        .iter()
        .filter(|range| !range.starts_with('+'))
        .copied()
        .collect();
    HeaderValue::from_str(&ranges.join(", ")).ok()
}

fn find_source<'a, T: std::error::Error + 'static>(
    err: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut current = Some(err);
    while let Some(err) = current {
        if let Some(found) = err.downcast_ref::<T>() {
            return Some(found);
        }
        // An `io::Error` wrapping another error hides it from `source()`.
        current = match err
            .downcast_ref::<std::io::Error>()
            .and_then(std::io::Error::get_ref)
        {
            Some(inner) => Some(inner as &(dyn std::error::Error + 'static)),
            None => err.source(),
        };
    }
    None
}

/// `outer: inner: innermost`, for details.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts = vec![err.to_string()];
    let mut current = err.source();
    while let Some(err) = current {
        let text = err.to_string();
        if !parts.iter().any(|part| part.contains(&text)) {
            parts.push(text);
        }
        current = err.source();
    }
    parts.join(": ")
}
