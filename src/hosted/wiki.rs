//! Wikipedia Agent (`registry.utility.wiki`): grounded facts from the encyclopedia, over the
//! Wikipedia REST API (search, page summaries) and the Action API (extracts by page id).

use std::sync::Arc;

use async_trait::async_trait;
use reqwest::StatusCode;
use serde::Deserialize;
use serde_json::{Map, Value, json};
use url::Url;

use super::cache::TtlCache;
use super::upstream::Api;
use super::{About, AgentError, HostedAgent, Output, required_str};
use crate::config::UpstreamConfig;
use crate::outbound::Outbound;

const SEARCH_PAGE: &str = "search_page";
const GET_SUMMARY: &str = "get_summary";
const MAX_QUERY_CHARS: usize = 300;
const DEFAULT_LIMIT: u64 = 5;
const MAX_LIMIT: u64 = 10;

pub struct WikiAgent {
    api: Api,
    /// Where article links point (`{origin}/wiki/{key}`).
    site: Url,
    cache: TtlCache<Value>,
}

impl WikiAgent {
    pub fn new(config: &UpstreamConfig, outbound: Arc<Outbound>) -> Self {
        Self {
            api: Api::new(outbound, &config.wiki_api_url, "Wikipedia"),
            site: config.wiki_api_url.clone(),
            cache: TtlCache::new(config.wiki_cache_ttl_secs, 1_000),
        }
    }
}

const ABOUT: About = About {
    slug: "wiki",
    package_name: "registry.utility.wiki",
    name: "Wikipedia Agent",
    description: "Grounded facts from an encyclopedia: searches Wikipedia pages and returns article \
     summaries. A reference agent for testing agent-to-agent calls.",
    category: "Knowledge",
    tags: &[
        "test",
        "wikipedia",
        "encyclopedia",
        "knowledge",
        "facts",
        "search",
    ],
    text_field: "query",
};

#[async_trait]
impl HostedAgent for WikiAgent {
    fn about(&self) -> &'static About {
        &ABOUT
    }

    fn capabilities(&self) -> Value {
        json!([
            {"name": SEARCH_PAGE,
             "description": "Search Wikipedia pages by title or free text; returns the matching pages and a summary of the best one.",
             "input_schema": {"type": "object",
                              "properties": {"query": {"type": "string", "description": "Article title or search text"},
                                             "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 5}},
                              "required": ["query"]}},
            {"name": GET_SUMMARY,
             "description": "Summary of one Wikipedia article by page id or title; a disambiguation page lists candidate pages.",
             "input_schema": {"type": "object",
                              "properties": {"page_id": {"type": "string", "description": "Page id (digits) or title"}},
                              "required": ["page_id"]}}
        ])
    }

    fn default_capability(&self, input: &Map<String, Value>) -> String {
        let named = |key| input.get(key).is_some_and(|value| !value.is_null());
        if named("page_id") && !named("query") {
            GET_SUMMARY.to_owned()
        } else {
            SEARCH_PAGE.to_owned()
        }
    }

    async fn execute(
        &self,
        capability: &str,
        input: &Map<String, Value>,
    ) -> Result<Output, AgentError> {
        match capability {
            SEARCH_PAGE => {
                let query = required_str(input, "query", MAX_QUERY_CHARS)?;
                let limit = parse_limit(input.get("limit"))?;
                self.search_page(query, limit).await
            }
            _ => {
                // A title may also come as `title`, or as the text of an A2A message (`query`).
                let page = PageRef::parse(
                    ["page_id", "title", "query"]
                        .into_iter()
                        .find_map(|key| input.get(key).filter(|value| !value.is_null())),
                )?;
                let summary = self.summary(&page).await?;
                let line = summary_line(&summary);
                Ok(Output {
                    data: summary,
                    summary: line,
                })
            }
        }
    }
}

/// A page named by its numeric id or its title.
#[derive(Debug, Clone, PartialEq)]
enum PageRef {
    Id(u64),
    Title(String),
}

impl PageRef {
    fn parse(value: Option<&Value>) -> Result<Self, AgentError> {
        let field = "page_id";
        match value {
            Some(Value::Number(number)) => number
                .as_u64()
                .map(Self::Id)
                .ok_or_else(|| AgentError::invalid(field, "must be a positive page id or a title")),
            Some(Value::String(text)) => {
                let text = text.trim();
                if text.is_empty() {
                    return Err(AgentError::invalid(field, "must not be empty"));
                }
                if text.chars().count() > MAX_QUERY_CHARS {
                    return Err(AgentError::invalid(
                        field,
                        format!("must be at most {MAX_QUERY_CHARS} characters"),
                    ));
                }
                Ok(match text.parse::<u64>() {
                    Ok(id) => Self::Id(id),
                    Err(_) => Self::Title(text.to_owned()),
                })
            }
            None | Some(Value::Null) => Err(AgentError::invalid(field, "is required")),
            Some(_) => Err(AgentError::invalid(field, "must be a page id or a title")),
        }
    }
}

fn parse_limit(value: Option<&Value>) -> Result<u64, AgentError> {
    match value {
        None | Some(Value::Null) => Ok(DEFAULT_LIMIT),
        Some(value) => value
            .as_u64()
            .filter(|limit| (1..=MAX_LIMIT).contains(limit))
            .ok_or_else(|| AgentError::invalid("limit", "must be an integer from 1 to 10")),
    }
}

/// `GET /w/rest.php/v1/search/page`.
#[derive(Deserialize)]
struct SearchResponse {
    #[serde(default)]
    pages: Vec<SearchHit>,
}

#[derive(Deserialize)]
struct SearchHit {
    id: u64,
    key: String,
    title: String,
    #[serde(default)]
    excerpt: Option<String>,
    #[serde(default)]
    description: Option<String>,
}

/// `GET /api/rest_v1/page/summary/{title}`.
#[derive(Deserialize)]
struct SummaryResponse {
    #[serde(rename = "type", default)]
    kind: String,
    title: String,
    #[serde(default)]
    pageid: Option<u64>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    extract: String,
    #[serde(default)]
    content_urls: Option<ContentUrls>,
    #[serde(default)]
    thumbnail: Option<Thumbnail>,
    #[serde(default)]
    timestamp: Option<String>,
}

#[derive(Deserialize)]
struct ContentUrls {
    desktop: Option<PageLink>,
}

#[derive(Deserialize)]
struct PageLink {
    page: Option<String>,
}

#[derive(Deserialize)]
struct Thumbnail {
    source: Option<String>,
}

/// `GET /w/api.php?action=query&prop=extracts…&formatversion=2`.
#[derive(Deserialize)]
struct QueryResponse {
    query: Option<QueryPages>,
    error: Option<ActionError>,
}

#[derive(Deserialize)]
struct ActionError {
    #[serde(default)]
    info: String,
}

#[derive(Deserialize)]
struct QueryPages {
    #[serde(default)]
    pages: Vec<QueryPage>,
}

#[derive(Deserialize)]
struct QueryPage {
    #[serde(default)]
    pageid: Option<u64>,
    #[serde(default)]
    title: Option<String>,
    #[serde(default)]
    missing: bool,
    #[serde(default)]
    invalid: bool,
    #[serde(default)]
    extract: Option<String>,
    #[serde(default)]
    fullurl: Option<String>,
    #[serde(default)]
    description: Option<String>,
    #[serde(default)]
    pageprops: Option<Map<String, Value>>,
}

impl WikiAgent {
    async fn search_page(&self, query: &str, limit: u64) -> Result<Output, AgentError> {
        let results = self.search(query, limit).await?;
        let best = self.best_summary(&results).await;
        let summary = match &best {
            Some(best) => format!(
                "Found {} Wikipedia pages for '{query}'. {}",
                results.len(),
                summary_line(best)
            ),
            None if results.is_empty() => format!("No Wikipedia pages match '{query}'."),
            None => format!("Found {} Wikipedia pages for '{query}'.", results.len()),
        };
        Ok(Output {
            data: json!({"query": query, "results": results, "best_match": best}),
            summary,
        })
    }

    async fn search(&self, query: &str, limit: u64) -> Result<Vec<Value>, AgentError> {
        let key = format!("search:{limit}:{}", query.to_lowercase());
        if let Some(Value::Array(hits)) = self.cache.get(&key) {
            return Ok(hits);
        }
        let limit_text = limit.to_string();
        let url = self.api.url(
            &["w", "rest.php", "v1", "search", "page"],
            &[("q", query), ("limit", &limit_text)],
        )?;
        let fetched = self.api.get(url, &[]).await?;
        if fetched.status != StatusCode::OK {
            return Err(self.api.status_error(&fetched));
        }
        let response: SearchResponse = self.api.parse(&fetched)?;
        let hits: Vec<Value> = response
            .pages
            .into_iter()
            .map(|hit| {
                json!({
                    "page_id": hit.id.to_string(),
                    "title": hit.title,
                    "description": hit.description,
                    "excerpt": hit.excerpt.as_deref().map(strip_tags),
                    "url": self.article_url(&hit.key),
                })
            })
            .collect();
        self.cache.insert(key, Value::Array(hits.clone()));
        Ok(hits)
    }

    /// The summary of the first result that is an article, not a disambiguation page (best
    /// effort: a failing summary leaves the search answer without one).
    async fn best_summary(&self, results: &[Value]) -> Option<Value> {
        for result in results.iter().take(2) {
            let title = result.get("title")?.as_str()?;
            match self.summary(&PageRef::Title(title.to_owned())).await {
                Ok(summary) if summary["type"] != "disambiguation" => return Some(summary),
                Ok(_) => continue,
                Err(err) => {
                    tracing::warn!(error = %err, title, "wikipedia summary of a search hit failed");
                    return None;
                }
            }
        }
        None
    }

    async fn summary(&self, page: &PageRef) -> Result<Value, AgentError> {
        let key = match page {
            PageRef::Id(id) => format!("id:{id}"),
            PageRef::Title(title) => format!("title:{}", title.to_lowercase()),
        };
        if let Some(summary) = self.cache.get(&key) {
            return Ok(summary);
        }
        let mut summary = match page {
            PageRef::Id(id) => self.summary_by_id(*id).await?,
            PageRef::Title(title) => self.summary_by_title(title).await?,
        };
        if summary["type"] == "disambiguation" {
            let title = summary["title"].as_str().unwrap_or_default().to_owned();
            let candidates = self
                .search(&title, MAX_LIMIT)
                .await
                .unwrap_or_default()
                .into_iter()
                .filter(|hit| hit["title"] != summary["title"])
                .collect::<Vec<_>>();
            summary["candidates"] = Value::Array(candidates);
        }
        self.cache.insert(key, summary.clone());
        Ok(summary)
    }

    async fn summary_by_title(&self, title: &str) -> Result<Value, AgentError> {
        let url = self.api.url(
            &[
                "api",
                "rest_v1",
                "page",
                "summary",
                &title.replace(' ', "_"),
            ],
            &[],
        )?;
        let fetched = self.api.get(url, &[]).await?;
        match fetched.status {
            StatusCode::OK => {}
            StatusCode::NOT_FOUND | StatusCode::BAD_REQUEST => {
                return Err(AgentError::NotFound(format!(
                    "Wikipedia has no page titled '{}'",
                    crate::domain::truncate(title, 100)
                )));
            }
            _ => return Err(self.api.status_error(&fetched)),
        }
        let page: SummaryResponse = self.api.parse(&fetched)?;
        let page_url = page
            .content_urls
            .and_then(|urls| urls.desktop)
            .and_then(|desktop| desktop.page)
            .or_else(|| self.article_url(&page.title.replace(' ', "_")));
        Ok(json!({
            "page_id": page.pageid.map(|id| id.to_string()),
            "title": page.title,
            "description": page.description,
            "summary": page.extract,
            "url": page_url,
            "type": if page.kind.is_empty() { "standard".to_owned() } else { page.kind },
            "thumbnail": page.thumbnail.and_then(|thumbnail| thumbnail.source),
            "last_modified": page.timestamp,
            "source": "wikipedia",
        }))
    }

    async fn summary_by_id(&self, id: u64) -> Result<Value, AgentError> {
        let id_text = id.to_string();
        let url = self.api.url(
            &["w", "api.php"],
            &[
                ("action", "query"),
                ("prop", "extracts|info|pageprops|description"),
                ("exintro", "1"),
                ("explaintext", "1"),
                ("inprop", "url"),
                ("ppprop", "disambiguation"),
                ("redirects", "1"),
                ("pageids", &id_text),
                ("format", "json"),
                ("formatversion", "2"),
            ],
        )?;
        let fetched = self.api.get(url, &[]).await?;
        if fetched.status != StatusCode::OK {
            return Err(self.api.status_error(&fetched));
        }
        let response: QueryResponse = self.api.parse(&fetched)?;
        if let Some(error) = response.error {
            return Err(AgentError::Upstream(format!(
                "Wikipedia refused the query: {}",
                error.info
            )));
        }
        let page = response
            .query
            .and_then(|query| query.pages.into_iter().next())
            .filter(|page| !page.missing && !page.invalid)
            .ok_or_else(|| AgentError::NotFound(format!("Wikipedia has no page with id {id}")))?;
        let title = page.title.unwrap_or_default();
        let disambiguation = page
            .pageprops
            .is_some_and(|props| props.contains_key("disambiguation"));
        let page_url = page
            .fullurl
            .or_else(|| self.article_url(&title.replace(' ', "_")));
        Ok(json!({
            "page_id": page.pageid.unwrap_or(id).to_string(),
            "title": title,
            "description": page.description,
            "summary": page.extract.unwrap_or_default(),
            "url": page_url,
            "type": if disambiguation { "disambiguation" } else { "standard" },
            "source": "wikipedia",
        }))
    }

    fn article_url(&self, key: &str) -> Option<String> {
        let mut url = self.site.clone();
        url.path_segments_mut()
            .ok()?
            .pop_if_empty()
            .extend(["wiki", key]);
        Some(url.to_string())
    }
}

/// "Ada Lovelace: Augusta Ada King, Countess of Lovelace was …" in at most ~240 characters.
fn summary_line(summary: &Value) -> String {
    let title = summary["title"].as_str().unwrap_or_default();
    if summary["type"] == "disambiguation" {
        let count = summary["candidates"].as_array().map_or(0, Vec::len);
        return format!("'{title}' may refer to several pages ({count} candidates listed).");
    }
    let text = summary["summary"].as_str().unwrap_or_default();
    format!("{title}: {}", crate::domain::truncate(text.trim(), 240))
}

/// Search excerpts carry `<span class="searchmatch">` markup: plain text for clients.
fn strip_tags(html: &str) -> String {
    let mut text = String::with_capacity(html.len());
    let mut in_tag = false;
    for c in html.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            c if !in_tag => text.push(c),
            _ => {}
        }
    }
    text.replace("&quot;", "\"")
        .replace("&#039;", "'")
        .replace("&#39;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn page_ids_are_digits_and_anything_else_is_a_title() {
        assert_eq!(
            PageRef::parse(Some(&json!("1208"))).ok(),
            Some(PageRef::Id(1208))
        );
        assert_eq!(
            PageRef::parse(Some(&json!(1208))).ok(),
            Some(PageRef::Id(1208))
        );
        assert_eq!(
            PageRef::parse(Some(&json!(" Ada Lovelace "))).ok(),
            Some(PageRef::Title("Ada Lovelace".to_owned()))
        );
        for bad in [json!(""), json!(-1), json!(null), json!([1])] {
            assert!(PageRef::parse(Some(&bad)).is_err(), "{bad}");
        }
    }

    #[test]
    fn search_excerpt_markup_is_stripped() {
        assert_eq!(
            strip_tags("<span class=\"searchmatch\">Ada</span> Lovelace &amp; Babbage"),
            "Ada Lovelace & Babbage"
        );
    }

    #[test]
    fn limits_outside_one_to_ten_are_refused() {
        assert_eq!(parse_limit(None).ok(), Some(5));
        assert_eq!(parse_limit(Some(&json!(10))).ok(), Some(10));
        assert!(parse_limit(Some(&json!(0))).is_err());
        assert!(parse_limit(Some(&json!(11))).is_err());
        assert!(parse_limit(Some(&json!("3"))).is_err());
    }
}
