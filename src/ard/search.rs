//! `POST /ard/search` and `POST /ard/explore`: ARD's query model over the one search function.
//!
//! Search ranks exactly as every other path does (the same function, text and filters); its
//! `score` is each hit's relevance relative to the best match of the query here (which scores
//! 100). With `federation: auto` and upstreams configured, each page is a merge: the local hits
//! and each upstream's, taken best score first (local first on a tie), duplicates by
//! `identifier` dropped (a local agent wins). The page token records, for the local index and
//! for each upstream, where its unserved results start, so paging to the end serves every
//! result once, in order, however the merge interleaved them.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::domain::access::Viewer;
use crate::search::{Filters, Listing, SearchRequest, Sort};

use super::Ard;
use super::entry;
use super::error::ArdError;
use super::federation;
use super::query::Query;

/// Results per page unless `pageSize` says otherwise.
pub const DEFAULT_PAGE_SIZE: usize = 10;
/// Most results per page.
pub const MAX_PAGE_SIZE: usize = 100;

/// How a search federates.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Federation {
    Auto,
    Referrals,
    None,
}

/// Where one source's unserved results start.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
struct Place {
    /// The source's own cursor or page token (`None`: its first page).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    at: Option<String>,
    /// Results of that page already served.
    #[serde(default, skip_serializing_if = "is_zero")]
    skip: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

/// A page token: which query it continues, the best local score (scores stay on one scale
/// across pages), and each source's place (`None`: nothing left).
#[derive(Debug, Clone, Serialize, Deserialize)]
struct PageState {
    q: String,
    #[serde(default)]
    best: u64,
    local: Option<Place>,
    #[serde(default)]
    up: Vec<Option<Place>>,
}

impl PageState {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(text: &str, fingerprint: &str, upstreams: usize) -> Result<Self, ArdError> {
        let invalid = || ArdError::invalid("pageToken: malformed, or from another query");
        let bytes = URL_SAFE_NO_PAD.decode(text.trim()).map_err(|_| invalid())?;
        let state: Self = serde_json::from_slice(&bytes).map_err(|_| invalid())?;
        if state.q != fingerprint || state.up.len() > upstreams {
            return Err(invalid());
        }
        Ok(state)
    }
}

/// A checked search request.
struct Request {
    query: Query,
    /// The client's `query` object, as sent to upstreams.
    raw_query: Value,
    federation: Federation,
    page_size: usize,
    page_token: Option<String>,
}

/// The number in `body[field]` as a whole number: an integer, or a float with no fraction.
pub fn whole_number(body: &Map<String, Value>, field: &str) -> Result<Option<i64>, ArdError> {
    match body.get(field) {
        None | Some(Value::Null) => Ok(None),
        // Beyond the integers (a huge whole number, a float without fraction) the value
        // saturates: every bound the callers apply is far inside.
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_u64().map(|_| i64::MAX))
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64))
            .map(Some)
            .ok_or_else(|| ArdError::invalid(format!("{field}: must be a whole number"))),
        Some(_) => Err(ArdError::invalid(format!(
            "{field}: must be a whole number"
        ))),
    }
}

/// A whole number from a query string.
pub fn whole_number_text(text: &str, field: &str) -> Result<i64, ArdError> {
    let text = text.trim();
    text.parse::<i64>().map_err(|_| {
        ArdError::invalid(format!(
            "{field}: must be a whole number (at most {})",
            i64::MAX
        ))
    })
}

/// `pageSize`: absent is the default, above the maximum is the maximum, below 1 an error.
pub fn page_size(value: Option<i64>, default: usize, max: usize) -> Result<usize, ArdError> {
    match value {
        None => Ok(default),
        Some(n) if n < 1 => Err(ArdError::invalid("pageSize: must be at least 1")),
        Some(n) => Ok(usize::try_from(n).unwrap_or(max).min(max)),
    }
}

fn object(body: &Value) -> Result<&Map<String, Value>, ArdError> {
    body.as_object()
        .ok_or_else(|| ArdError::invalid("body: must be a JSON object"))
}

fn refuse_unknown(body: &Map<String, Value>, known: &[&str]) -> Result<(), ArdError> {
    match body.keys().find(|key| !known.contains(&key.as_str())) {
        Some(unknown) => Err(ArdError::invalid(format!(
            "{}: unknown member (expected {})",
            crate::domain::truncate(unknown, 60),
            known.join(", ")
        ))),
        None => Ok(()),
    }
}

impl Request {
    fn parse(body: &Value) -> Result<Self, ArdError> {
        let body = object(body)?;
        refuse_unknown(body, &["query", "federation", "pageSize", "pageToken"])?;
        let query = Query::parse(body.get("query"), true)?;
        let federation = match body.get("federation") {
            None | Some(Value::Null) => Federation::Auto,
            Some(Value::String(mode)) => match mode.as_str() {
                "auto" => Federation::Auto,
                "referrals" => Federation::Referrals,
                "none" => Federation::None,
                _ => {
                    return Err(ArdError::invalid(
                        "federation: must be auto, referrals or none",
                    ));
                }
            },
            Some(_) => {
                return Err(ArdError::invalid(
                    "federation: must be auto, referrals or none",
                ));
            }
        };
        let page_size = page_size(
            whole_number(body, "pageSize")?,
            DEFAULT_PAGE_SIZE,
            MAX_PAGE_SIZE,
        )?;
        let page_token = match body.get("pageToken") {
            None | Some(Value::Null) => None,
            Some(Value::String(token)) if token.is_empty() => None,
            Some(Value::String(token)) if token.len() <= 8192 => Some(token.clone()),
            Some(_) => {
                return Err(ArdError::invalid(
                    "pageToken: must be a token from a previous answer",
                ));
            }
        };
        Ok(Self {
            query,
            raw_query: body.get("query").cloned().unwrap_or(Value::Null),
            federation,
            page_size,
            page_token,
        })
    }

    /// What a page token is bound to: the query and the federation mode.
    fn fingerprint(&self) -> String {
        let mut digest = Sha256::new();
        digest.update(self.raw_query.to_string());
        digest.update([self.federation as u8]);
        hex::encode(&digest.finalize()[..12])
    }
}

/// The local search of an ARD query: the one search function, ranked by relevance.
fn local_request(
    ard: &Ard,
    query: &Query,
    limit: usize,
    place: &Place,
    viewer: &Viewer,
) -> SearchRequest {
    SearchRequest {
        viewer: viewer.clone(),
        text: query.text.clone(),
        filters: Filters {
            listing: query.listing_filter(&ard.base_url),
            collapse_duplicates: false,
            ..Filters::default()
        },
        sort: Some(Sort::Relevance),
        limit,
        cursor: place.at.clone(),
        offset: place.skip,
        facets: false,
    }
}

/// A search result: a local agent's (written from its listing when the answer is serialised)
/// or an upstream registry's, as it answered.
#[derive(Debug, Clone)]
pub enum Item {
    Local {
        listing: Arc<Listing>,
        score: u8,
        base: Arc<str>,
        source: Arc<str>,
    },
    Upstream(Value),
}

impl Item {
    fn identifier(&self) -> &str {
        match self {
            Self::Local { listing, .. } => listing.urn(),
            Self::Upstream(result) => result["identifier"].as_str().unwrap_or_default(),
        }
    }

    fn score(&self) -> u64 {
        match self {
            Self::Local { score, .. } => u64::from(*score),
            Self::Upstream(result) => result["score"].as_u64().unwrap_or(0),
        }
    }
}

impl Item {
    /// A local result as the entry view that writes it; an upstream one as it answered.
    fn view(&self) -> Result<entry::EntryView<'_>, &Value> {
        match self {
            Self::Local {
                listing,
                score,
                base,
                source,
            } => Ok(entry::EntryView {
                listing,
                base,
                detail: entry::Detail::Result,
                scored: Some((*score, source)),
            }),
            Self::Upstream(result) => Err(result),
        }
    }
}

/// A search's answer; `to_json` writes it as ARD's search response.
#[derive(Debug)]
pub struct Answer {
    pub results: Vec<Item>,
    pub referrals: Option<Vec<Value>>,
    pub page_token: Option<String>,
    /// Upstreams that did not answer this page: `{source, reason}`.
    pub unanswered: Vec<Value>,
}

impl Answer {
    /// The answer's JSON: local results written straight from their listings.
    pub fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        use crate::domain::json::json_str;
        let mut out = Vec::with_capacity(1024 + 800 * self.results.len());
        out.extend_from_slice(b"{\"results\":[");
        for (i, item) in self.results.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            match item.view() {
                Ok(view) => view.write_json(&mut out)?,
                Err(result) => serde_json::to_writer(&mut out, result)?,
            }
        }
        out.push(b']');
        if let Some(referrals) = &self.referrals {
            out.extend_from_slice(b",\"referrals\":");
            serde_json::to_writer(&mut out, referrals)?;
        }
        if let Some(token) = &self.page_token {
            out.extend_from_slice(b",\"pageToken\":");
            json_str(&mut out, token)?;
        }
        if !self.unanswered.is_empty() {
            out.extend_from_slice(b",\"unanswered\":");
            serde_json::to_writer(&mut out, &self.unanswered)?;
        }
        out.push(b'}');
        Ok(out)
    }
}

/// One source's results for this page, in its order, and where its next page starts.
struct Batch {
    results: Vec<Item>,
    /// Where the source continues after this batch (`None`: it has no more).
    next: Option<String>,
    /// The source did not answer: asked again from the same place on the next page.
    failed: bool,
}

/// Answer a search. `via`: the `ard-federated-by` header the request came with; a request that
/// came through federation is answered from the local index only.
pub async fn run(
    ard: &Ard,
    body: &Value,
    via: Option<&str>,
    viewer: &Viewer,
) -> Result<Answer, ArdError> {
    let request = Request::parse(body)?;
    let federated = via.is_some_and(|via| !via.trim().is_empty());
    let federation = if federated {
        Federation::None
    } else {
        request.federation
    };
    let asked: &[federation::Upstream] = if federation == Federation::Auto {
        &ard.upstreams
    } else {
        &[]
    };
    let fingerprint = request.fingerprint();
    let mut state = match &request.page_token {
        Some(token) => PageState::decode(token, &fingerprint, asked.len())?,
        None => PageState {
            q: fingerprint,
            best: 0,
            local: Some(Place::default()),
            up: vec![Some(Place::default()); asked.len()],
        },
    };
    state.up.resize(asked.len(), None);
    let size = request.page_size;
    let source = Arc::clone(&ard.api_url);

    // The local page and every upstream's, at once.
    let local = async {
        let Some(place) = state.local.clone() else {
            return Ok::<_, ArdError>(None);
        };
        let page = ard
            .registry
            .search(&local_request(ard, &request.query, size, &place, viewer))
            .await?;
        Ok(Some((place, page)))
    };
    let mut chain = ard.identifier.clone();
    if let Some(via) = via.filter(|v| !v.trim().is_empty()) {
        chain = format!("{via}, {chain}");
    }
    let upstream_pages =
        futures::future::join_all(asked.iter().zip(&state.up).map(|(upstream, place)| {
            let chain = chain.clone();
            let query = request.raw_query.clone();
            async move {
                let place = place.clone()?;
                // The page is asked for whole, its served part skipped here.
                let ask = federation::Ask {
                    query: &query,
                    page_size: (size + place.skip).min(MAX_PAGE_SIZE),
                    page_token: place.at.as_deref(),
                    via: &chain,
                    budget: ard.upstream_timeout,
                };
                let answer = federation::ask(&ard.outbound, upstream, &ask).await;
                Some((place, answer))
            }
        }));
    let (local, upstream_pages) = tokio::join!(local, upstream_pages);
    let local = local?;

    // Each source's batch: the results after its place.
    let mut batches: Vec<Option<(Place, Batch)>> = Vec::with_capacity(1 + asked.len());
    match local {
        Some((place, page)) => {
            if place.at.is_none() && place.skip == 0 {
                state.best = page
                    .hits
                    .first()
                    .and_then(|hit| hit.score)
                    .unwrap_or(0.0)
                    .to_bits();
            }
            let best = f64::from_bits(state.best);
            let results = page
                .hits
                .iter()
                .map(|hit| Item::Local {
                    listing: Arc::clone(&hit.listing),
                    score: entry::percent(hit.score, best),
                    base: Arc::clone(&ard.base_url),
                    source: Arc::clone(&source),
                })
                .collect();
            batches.push(Some((
                Place {
                    at: place.at,
                    skip: place.skip,
                },
                Batch {
                    results,
                    next: page.next_cursor,
                    failed: false,
                },
            )));
        }
        None => batches.push(None),
    }
    let mut unanswered = Vec::new();
    for (upstream, page) in asked.iter().zip(upstream_pages) {
        match page {
            None => batches.push(None),
            Some((place, Ok(answer))) => {
                let results = answer
                    .results
                    .into_iter()
                    .skip(place.skip)
                    .map(Item::Upstream)
                    .collect();
                batches.push(Some((
                    place,
                    Batch {
                        results,
                        next: answer.page_token,
                        failed: false,
                    },
                )));
            }
            Some((place, Err(reason))) => {
                unanswered.push(json!({"source": upstream.base, "reason": reason}));
                batches.push(Some((
                    place,
                    Batch {
                        results: Vec::new(),
                        next: None,
                        failed: true,
                    },
                )));
            }
        }
    }

    // Upstream results naming a local agent are dropped: the local entry wins.
    let mut held_locally = std::collections::HashSet::new();
    for batch in batches.iter().skip(1).flatten() {
        for result in &batch.1.results {
            let identifier = result.identifier();
            if crate::domain::urn::is_urn(identifier)
                && ard.registry.find_active(identifier, viewer).await.is_ok()
            {
                held_locally.insert(identifier.to_ascii_lowercase());
            }
        }
    }

    // Local results alone need no merge: they are distinct agents, in order.
    let (results, consumed) = match batches.as_slice() {
        [Some((_, local))] => (local.results.clone(), vec![local.results.len()]),
        _ => merge(&batches, size, &held_locally),
    };

    // Where each source continues. An upstream that did not answer keeps its place, but is
    // no reason for another page by itself.
    let mut more = false;
    let mut places = Vec::with_capacity(batches.len());
    for (batch, used) in batches.iter().zip(&consumed) {
        let next = match batch {
            None => None,
            Some((place, batch)) if batch.failed => Some(place.clone()),
            Some((place, batch)) if *used < batch.results.len() => Some(Place {
                at: place.at.clone(),
                skip: place.skip + used,
            }),
            Some((_, batch)) => batch.next.clone().map(|at| Place {
                at: Some(at),
                skip: 0,
            }),
        };
        more |= next.is_some() && !batch.as_ref().is_some_and(|(_, b)| b.failed);
        places.push(next);
    }
    let referrals = (federation == Federation::Referrals && !ard.upstreams.is_empty()).then(|| {
        ard.upstreams
            .iter()
            .map(federation::Upstream::referral)
            .collect()
    });
    let page_token = more.then(|| {
        let mut places = places.into_iter();
        state.local = places.next().flatten();
        state.up = places.collect();
        state.encode()
    });
    Ok(Answer {
        results,
        referrals,
        page_token,
        unanswered,
    })
}

/// Merge the sources' batches, best score first (the earlier source on a tie: local first),
/// into at most `size` results without duplicate identifiers. Returns them and how many of each
/// batch were used (served or dropped as duplicates). A batch that runs out while the page is
/// not full ends the page: its source's next results could outrank the others'.
fn merge(
    batches: &[Option<(Place, Batch)>],
    size: usize,
    held_locally: &std::collections::HashSet<String>,
) -> (Vec<Item>, Vec<usize>) {
    let mut used = vec![0usize; batches.len()];
    let mut seen = std::collections::HashSet::new();
    let mut results = Vec::with_capacity(size);
    while results.len() < size {
        let mut best: Option<(usize, u64)> = None;
        let mut exhausted_with_more = false;
        for (source, batch) in batches.iter().enumerate() {
            let Some((_, batch)) = batch else { continue };
            match batch.results.get(used[source]) {
                Some(result) => {
                    let score = result.score();
                    if best.is_none_or(|(_, top)| score > top) {
                        best = Some((source, score));
                    }
                }
                None if batch.next.is_some() => exhausted_with_more = true,
                None => {}
            }
        }
        if exhausted_with_more {
            break;
        }
        let Some((source, _)) = best else { break };
        let result = &batches[source]
            .as_ref()
            .map(|(_, b)| &b.results[used[source]]);
        used[source] += 1;
        let Some(result) = result else { break };
        let key = result.identifier().to_ascii_lowercase();
        let duplicate = !seen.insert(key.clone()) || (source > 0 && held_locally.contains(&key));
        if !duplicate {
            results.push((*result).clone());
        }
    }
    (results, used)
}

/// Facet fields unless asked otherwise.
const DEFAULT_FACET_LIMIT: usize = 20;
const MAX_FACETS: usize = 16;
const MAX_FACET_LIMIT: usize = 1000;

/// Answer an explore: facet counts over every local match of the query (never one page, never
/// federated), with the same relevance cut-off as a search.
pub async fn explore(ard: &Ard, body: &Value, viewer: &Viewer) -> Result<Value, ArdError> {
    let body = object(body)?;
    refuse_unknown(body, &["query", "resultType"])?;
    let query = Query::parse(body.get("query"), false)?;
    let facets = match body.get("resultType") {
        Some(Value::Object(result_type)) => {
            refuse_unknown(result_type, &["facets"])
                .map_err(|err| ArdError::invalid(format!("resultType.{}", err.message)))?;
            match result_type.get("facets") {
                Some(Value::Array(facets)) if !facets.is_empty() && facets.len() <= MAX_FACETS => {
                    facets
                }
                _ => {
                    return Err(ArdError::invalid(format!(
                        "resultType.facets: required, 1 to {MAX_FACETS} facet requests ({{\"field\": \"type\"}})"
                    )));
                }
            }
        }
        _ => {
            return Err(ArdError::invalid(
                "resultType: required, an object with `facets` (the only result shape defined)",
            ));
        }
    };
    let mut asked = Vec::with_capacity(facets.len());
    for (i, facet) in facets.iter().enumerate() {
        let Some(facet) = facet.as_object() else {
            return Err(ArdError::invalid(format!(
                "resultType.facets[{i}]: must be an object with `field`"
            )));
        };
        refuse_unknown(facet, &["field", "limit", "minCount"])
            .map_err(|err| ArdError::invalid(format!("resultType.facets[{i}].{}", err.message)))?;
        let Some(field) = facet.get("field").and_then(Value::as_str) else {
            return Err(ArdError::invalid(format!(
                "resultType.facets[{i}].field: required, a term path"
            )));
        };
        let path = query
            .context
            .resolve(field, &format!("resultType.facets[{i}].field"))?;
        let limit = whole_number(facet, "limit")
            .map_err(|err| ArdError::invalid(format!("resultType.facets[{i}].{}", err.message)))?
            .map_or(DEFAULT_FACET_LIMIT, |n| {
                usize::try_from(n.max(0))
                    .unwrap_or(MAX_FACET_LIMIT)
                    .min(MAX_FACET_LIMIT)
            });
        let min_count = whole_number(facet, "minCount")
            .map_err(|err| ArdError::invalid(format!("resultType.facets[{i}].{}", err.message)))?
            .map_or(1, |n| usize::try_from(n.max(1)).unwrap_or(usize::MAX));
        asked.push((field.to_owned(), path, limit, min_count));
    }
    let request = local_request(ard, &query, 1, &Place::default(), viewer);
    let hits = ard.registry.all_matches(&request).await?;
    let mut out = Map::new();
    for (field, path, limit, min_count) in asked {
        let mut counts: std::collections::HashMap<String, usize> = Default::default();
        for hit in &hits {
            // Each entry counts once per distinct value.
            let mut values: Vec<String> = path
                .values(&hit.listing, &ard.base_url)
                .iter()
                .map(|value| match value {
                    Value::String(text) => text.clone(),
                    other => other.to_string(),
                })
                .collect();
            values.sort_unstable();
            values.dedup();
            for value in values {
                *counts.entry(value).or_default() += 1;
            }
        }
        let mut buckets: Vec<(String, usize)> = counts
            .into_iter()
            .filter(|(_, count)| *count >= min_count)
            .collect();
        buckets.sort_unstable_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let other: usize = buckets.iter().skip(limit).map(|(_, count)| count).sum();
        buckets.truncate(limit);
        let mut result = json!({
            "buckets": buckets
                .into_iter()
                .map(|(value, count)| json!({"value": value, "count": count}))
                .collect::<Vec<_>>(),
        });
        if other > 0 {
            result["otherCount"] = json!(other);
        }
        out.insert(field, result);
    }
    Ok(json!({"resultType": "facets", "facets": out}))
}
