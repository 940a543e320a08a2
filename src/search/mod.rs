//! The one search function behind every path: query text + filters → ranked, paginated agents.
//!
//! The index holds every ACTIVE agent in memory. Filters are applied first (so a top-k with a
//! filter returns k matches when k exist), then matches are ranked or sorted, then paginated
//! with a keyset cursor that never repeats or skips an agent.

use std::cmp::Ordering;
use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::api::wire::{AgentHit, AgentPage, AgentSummary};
use crate::store::{Agent, AgentState};

pub mod filters;
mod keyword;
pub mod request;

pub use filters::{Filters, RawFilters};

/// Largest page any path serves (CONTRACT §1.3).
pub const MAX_LIMIT: usize = 100;

/// Why a search request cannot run.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SearchError {
    #[error("{message}")]
    InvalidParameter { parameter: String, message: String },
    #[error("malformed or stale cursor")]
    InvalidCursor,
    #[error("unknown sort '{0}'; allowed: relevance, newest, name")]
    InvalidSort(String),
}

/// Result order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// Best match first (needs query text; without it, falls back to `Newest`).
    Relevance,
    /// Most recently published first.
    Newest,
    /// By display name, A→Z.
    Name,
}

impl Sort {
    pub fn parse(value: &str) -> Result<Self, SearchError> {
        match value.trim().to_ascii_lowercase().as_str() {
            "relevance" => Ok(Self::Relevance),
            "newest" => Ok(Self::Newest),
            "name" => Ok(Self::Name),
            _ => Err(SearchError::InvalidSort(crate::error::truncate(value, 40))),
        }
    }
}

/// One search, as every transport expresses it.
#[derive(Debug, Clone)]
pub struct SearchRequest {
    pub text: String,
    pub filters: Filters,
    /// `None`: relevance with query text, else newest.
    pub sort: Option<Sort>,
    /// Already clamped to 1..=MAX_LIMIT by the caller's defaults.
    pub limit: usize,
    pub cursor: Option<String>,
}

impl SearchRequest {
    fn effective_sort(&self) -> Sort {
        match self.sort {
            Some(Sort::Relevance) | None if !self.text.trim().is_empty() => Sort::Relevance,
            Some(Sort::Relevance) | None => Sort::Newest,
            Some(sort) => sort,
        }
    }
}

/// Clamp a requested page size: absent → `default`, 0 → 1, above `max` → `max`.
pub fn clamp_limit(requested: Option<i64>, default: usize, max: usize) -> usize {
    match requested {
        None => default,
        Some(n) if n < 1 => 1,
        Some(n) => usize::try_from(n).unwrap_or(max).min(max),
    }
}

/// An ACTIVE agent as the index keeps it.
struct Doc {
    summary: AgentSummary,
    published_micros: i64,
    name_key: String,
    text: keyword::DocText,
}

/// The in-memory search index over ACTIVE agents.
pub struct SearchIndex {
    base_url: String,
    docs: RwLock<HashMap<String, Arc<Doc>>>,
}

/// Where the previous page ended: the last hit's sort key and id.
#[derive(Debug, Serialize, Deserialize)]
struct Cursor {
    sort: Sort,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    score: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    time: Option<i64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    name: Option<String>,
    id: String,
}

impl Cursor {
    fn encode(&self) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(self).unwrap_or_default())
    }

    fn decode(text: &str, sort: Sort) -> Result<Self, SearchError> {
        let bytes = URL_SAFE_NO_PAD
            .decode(text.trim())
            .map_err(|_| SearchError::InvalidCursor)?;
        let cursor: Cursor =
            serde_json::from_slice(&bytes).map_err(|_| SearchError::InvalidCursor)?;
        let complete = match sort {
            Sort::Relevance => cursor.score.is_some_and(f64::is_finite),
            Sort::Newest => cursor.time.is_some(),
            Sort::Name => cursor.name.is_some(),
        };
        if cursor.sort != sort || !complete {
            return Err(SearchError::InvalidCursor);
        }
        Ok(cursor)
    }
}

struct Scored {
    doc: Arc<Doc>,
    score: f64,
}

impl SearchIndex {
    pub fn new(base_url: &str) -> Self {
        Self {
            base_url: base_url.to_owned(),
            docs: RwLock::new(HashMap::new()),
        }
    }

    /// Replace the whole index with `agents` (start-up).
    pub fn rebuild(&self, agents: &[Agent]) {
        let docs = agents
            .iter()
            .filter(|agent| agent.state == AgentState::Active)
            .map(|agent| (agent.id.clone(), Arc::new(self.doc(agent))))
            .collect();
        *self
            .docs
            .write()
            .unwrap_or_else(|poison| poison.into_inner()) = docs;
    }

    /// Make the index reflect `agent` as just written: indexed when ACTIVE, absent otherwise.
    pub fn apply(&self, agent: &Agent) {
        if agent.state != AgentState::Active {
            self.remove(&agent.id);
            return;
        }
        let doc = Arc::new(self.doc(agent));
        self.write().insert(agent.id.clone(), doc);
    }

    pub fn remove(&self, id: &str) {
        self.write().remove(id);
    }

    pub fn len(&self) -> usize {
        self.read().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Run one search.
    pub fn search(&self, request: &SearchRequest) -> Result<AgentPage, SearchError> {
        let sort = request.effective_sort();
        let cursor = request
            .cursor
            .as_deref()
            .filter(|c| !c.trim().is_empty())
            .map(|c| Cursor::decode(c, sort))
            .transpose()?;
        let query = keyword::Query::parse(&request.text);
        let mut matches: Vec<Scored> = {
            let docs = self.read();
            docs.values()
                .filter(|doc| passes(doc, &request.filters))
                .filter_map(|doc| {
                    let score = if query.is_empty() {
                        0.0
                    } else {
                        query.score(&doc.text)?
                    };
                    Some(Scored {
                        doc: Arc::clone(doc),
                        score,
                    })
                })
                .collect()
        };
        matches.sort_by(|a, b| compare(sort, a, b));
        let total = matches.len();
        let start = match &cursor {
            Some(cursor) => matches.partition_point(|hit| after_cursor(sort, hit, cursor).is_lt()),
            None => 0,
        };
        let limit = request.limit.clamp(1, MAX_LIMIT);
        let page: Vec<&Scored> = matches.iter().skip(start).take(limit).collect();
        let next_cursor = match page.last() {
            Some(last) if start + page.len() < total => Some(cursor_after(sort, last).encode()),
            _ => None,
        };
        let with_score = sort == Sort::Relevance;
        Ok(AgentPage {
            agents: page
                .into_iter()
                .map(|hit| AgentHit {
                    agent: hit.doc.summary.clone(),
                    score: with_score.then_some(round_score(hit.score)),
                })
                .collect(),
            total,
            limit,
            next_cursor,
        })
    }

    fn doc(&self, agent: &Agent) -> Doc {
        Doc {
            summary: AgentSummary::of(agent, &self.base_url),
            published_micros: agent.published_at.map_or(0, |t| t.micros()),
            name_key: agent.draft.name.to_lowercase(),
            text: keyword::DocText::of(agent),
        }
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, Arc<Doc>>> {
        self.docs
            .read()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, Arc<Doc>>> {
        self.docs
            .write()
            .unwrap_or_else(|poison| poison.into_inner())
    }
}

fn round_score(score: f64) -> f64 {
    (score * 10_000.0).round() / 10_000.0
}

/// Does `doc` pass every non-empty filter?
fn passes(doc: &Doc, filters: &Filters) -> bool {
    let summary = &doc.summary;
    let one_of = |wanted: &[String], value: &Option<String>| {
        wanted.is_empty()
            || value
                .as_deref()
                .is_some_and(|v| wanted.iter().any(|w| w.eq_ignore_ascii_case(v)))
    };
    one_of(&filters.targets, &summary.target)
        && one_of(&filters.categories, &summary.category)
        && (filters.tags.is_empty() || summary.tags.iter().any(|t| filters.tags.contains(t)))
        && (filters.verification_levels.is_empty()
            || filters
                .verification_levels
                .contains(&summary.verification_level))
        && (filters.payment.is_empty() || filters.payment.matches(summary.payment.as_ref()))
}

/// The total order of results for `sort`; ids break every tie, so the order is stable.
fn compare(sort: Sort, a: &Scored, b: &Scored) -> Ordering {
    let primary = match sort {
        Sort::Relevance => b.score.total_cmp(&a.score),
        Sort::Newest => b.doc.published_micros.cmp(&a.doc.published_micros),
        Sort::Name => a.doc.name_key.cmp(&b.doc.name_key),
    };
    primary.then_with(|| a.doc.summary.id.cmp(&b.doc.summary.id))
}

/// Where `hit` stands relative to the cursor position in the order of `sort`.
fn after_cursor(sort: Sort, hit: &Scored, cursor: &Cursor) -> Ordering {
    let primary = match sort {
        Sort::Relevance => cursor.score.unwrap_or_default().total_cmp(&hit.score),
        Sort::Newest => cursor
            .time
            .unwrap_or_default()
            .cmp(&hit.doc.published_micros),
        Sort::Name => hit
            .doc
            .name_key
            .as_str()
            .cmp(cursor.name.as_deref().unwrap_or_default()),
    };
    // Equal keys: ids at or before the cursor's id were already served.
    match primary.then_with(|| hit.doc.summary.id.as_str().cmp(&cursor.id)) {
        Ordering::Equal => Ordering::Less,
        other => other,
    }
}

fn cursor_after(sort: Sort, last: &Scored) -> Cursor {
    Cursor {
        sort,
        score: (sort == Sort::Relevance).then_some(last.score),
        time: (sort == Sort::Newest).then_some(last.doc.published_micros),
        name: (sort == Sort::Name).then(|| last.doc.name_key.clone()),
        id: last.doc.summary.id.clone(),
    }
}
