//! Federation (ARD §5.4): a search asks the configured upstream registries too.
//!
//! Every upstream is asked concurrently, within one time budget, through the outbound fetcher
//! (no redirects, a size cap), with `federation: "none"` and the `ard-federated-by` header: a
//! request that came through federation is answered from the local index only, so registries
//! that name each other never loop. An upstream that fails, is slow, or answers something that
//! is not an ARD search response is left out of that answer (and named in its `unanswered`),
//! never failing it.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::outbound::{Fetch, JSON, Outbound};

use super::{FEDERATED_BY, REGISTRY_TYPE};

/// Largest upstream answer read.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;
/// Longest identifier or source kept from an upstream result.
const MAX_IDENTIFIER_CHARS: usize = 512;

/// One upstream ARD registry.
#[derive(Debug, Clone)]
pub struct Upstream {
    /// Its ARD API base, without a trailing slash.
    pub base: String,
    /// The identifier its referral carries.
    pub identifier: String,
    pub display_name: String,
}

impl Upstream {
    pub fn new(url: &url::Url) -> Self {
        let base = url.as_str().trim_end_matches('/').to_owned();
        Self {
            identifier: super::entry::registry_identifier(&base),
            display_name: url.host_str().unwrap_or("registry").to_owned(),
            base,
        }
    }

    /// Its entry in a `referrals` answer.
    pub fn referral(&self) -> Value {
        json!({
            "identifier": self.identifier,
            "displayName": self.display_name,
            "type": REGISTRY_TYPE,
            "url": format!("{}/search", self.base),
        })
    }
}

/// What one upstream answered for one page.
#[derive(Debug)]
pub struct Answer {
    /// Its results, in its order, each with `identifier`, an integer `score` and `source`.
    pub results: Vec<Value>,
    /// Its next page, when it has one.
    pub page_token: Option<String>,
}

/// What a page of one upstream is asked with.
pub struct Ask<'a> {
    /// The client's `query`, as it sent it.
    pub query: &'a Value,
    pub page_size: usize,
    /// The upstream's own token for the page (`None`: its first).
    pub page_token: Option<&'a str>,
    /// The registries the request already went through (`ard-federated-by`).
    pub via: &'a str,
    pub budget: Duration,
}

/// Ask `upstream` for a page, counting the request, its time and its failure per upstream.
pub async fn ask(
    outbound: &Outbound,
    upstream: &Upstream,
    ask: &Ask<'_>,
) -> Result<Answer, String> {
    let started = Instant::now();
    let labels = [("upstream", upstream.base.clone())];
    metrics::counter!("ard_upstream_requests_total", &labels).increment(1);
    let answer = fetch(outbound, upstream, ask).await;
    metrics::histogram!("ard_upstream_request_duration_seconds", &labels)
        .record(started.elapsed().as_secs_f64());
    if let Err(reason) = &answer {
        metrics::counter!("ard_upstream_failures_total", &labels).increment(1);
        tracing::warn!(upstream = %upstream.base, %reason, "ARD upstream did not answer");
    }
    answer
}

async fn fetch(outbound: &Outbound, upstream: &Upstream, ask: &Ask<'_>) -> Result<Answer, String> {
    let url = url::Url::parse(&format!("{}/search", upstream.base))
        .map_err(|err| format!("not a URL: {err}"))?;
    let Ask {
        query,
        page_size,
        page_token,
        via,
        budget,
    } = *ask;
    let mut body = json!({"query": query, "federation": "none", "pageSize": page_size});
    if let Some(token) = page_token {
        body["pageToken"] = json!(token);
    }
    let request = Fetch::post_json(url, &body, JSON, MAX_RESPONSE_BYTES)
        .timeout(budget)
        .header(axum::http::HeaderName::from_static(FEDERATED_BY), via);
    let fetched = tokio::time::timeout(budget, outbound.get(&request))
        .await
        .map_err(|_| format!("no answer within {} ms", budget.as_millis()))?
        .map_err(|err| err.to_string())?;
    if !fetched.status.is_success() {
        return Err(format!("answered HTTP {}", fetched.status.as_u16()));
    }
    let answer: Value = fetched.json().map_err(|err| format!("not JSON: {err}"))?;
    parse_answer(&answer, &upstream.base, page_size)
}

/// An upstream's search response, checked: `results` an array; each result kept only with a
/// string `identifier` and an integer `score` from 0 to 100; `source` defaulting to the
/// upstream.
pub fn parse_answer(answer: &Value, base: &str, page_size: usize) -> Result<Answer, String> {
    let results = answer
        .get("results")
        .and_then(Value::as_array)
        .ok_or("no `results` array")?;
    let mut kept = Vec::with_capacity(results.len().min(page_size));
    for result in results.iter().take(page_size) {
        let Some(object) = result.as_object() else {
            continue;
        };
        let identifier = object.get("identifier").and_then(Value::as_str);
        let score = object
            .get("score")
            .and_then(Value::as_u64)
            .filter(|s| *s <= 100);
        let (Some(identifier), Some(_)) = (identifier, score) else {
            continue;
        };
        if identifier.is_empty() || identifier.chars().count() > MAX_IDENTIFIER_CHARS {
            continue;
        }
        let mut object = object.clone();
        let source_ok = object
            .get("source")
            .and_then(Value::as_str)
            .is_some_and(|s| !s.is_empty() && s.chars().count() <= MAX_IDENTIFIER_CHARS);
        if !source_ok {
            object.insert("source".into(), json!(base));
        }
        kept.push(Value::Object(object));
    }
    let page_token = answer
        .get("pageToken")
        .and_then(Value::as_str)
        .filter(|token| !token.is_empty() && token.len() <= 4096)
        .map(str::to_owned);
    Ok(Answer {
        results: kept,
        page_token,
    })
}
