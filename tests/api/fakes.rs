//! One local HTTP server standing in for every upstream: the Wikipedia REST and Action APIs,
//! Coinbase, CoinGecko and Yahoo Finance at their real paths, web pages for the reader, agent
//! cards, and domain-verification files. Bodies have the shapes the real services send (success,
//! not found, disambiguation, rate-limited, malformed, slow, huge).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_registry::config::Config;
use axum::extract::{Path, Query, Request, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{Value, json};

/// How long the "slow" answers take: beyond the 1 s upstream timeout tests configure.
const SLOW: Duration = Duration::from_secs(4);
/// "Huge" answers: beyond every cap (1 MiB for APIs, 2 MiB for pages).
const HUGE_BYTES: usize = 3 * 1024 * 1024;

#[derive(Default)]
struct Shared {
    /// Requests per path (with query), to see what was cached.
    hits: Mutex<HashMap<String, usize>>,
    /// The User-Agent of the last request per path prefix.
    user_agents: Mutex<HashMap<String, String>>,
    /// The CoinGecko key header of the last request.
    coingecko_key: Mutex<Option<String>>,
    /// Domain → contents of its verification file.
    verification_files: Mutex<HashMap<String, String>>,
    /// Name → JSON document served at `/docs/{name}`.
    documents: Mutex<HashMap<String, Value>>,
}

/// A running fake; dropped with the test's runtime.
#[derive(Clone)]
pub struct Fake {
    pub addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Fake {
    pub async fn start() -> Self {
        let shared = Arc::new(Shared::default());
        let router = Router::new()
            .route("/w/rest.php/v1/search/page", get(wiki_search))
            .route("/api/rest_v1/page/summary/{title}", get(wiki_summary))
            .route("/w/api.php", get(wiki_action))
            .route("/v2/prices/{pair}/spot", get(coinbase_spot))
            .route("/api/v3/simple/price", get(coingecko_price))
            .route("/v8/finance/chart/{symbol}", get(yahoo_chart))
            .route("/pages/{name}", get(page))
            .route("/cards/{name}", get(card))
            .route("/docs/{name}", get(document))
            .route(
                "/verify/{domain}/agent-registry-verify.txt",
                get(verification_file),
            )
            .layer(middleware::from_fn_with_state(Arc::clone(&shared), record))
            .with_state(Arc::clone(&shared));
        let addr = crate::helpers::serve_router(router).await;
        Self { addr, shared }
    }

    /// `http://127.0.0.1:port`.
    pub fn origin(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// `http://127.0.0.1:port{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.origin())
    }

    /// Point every upstream at this fake, allow loopback targets, time out after 1 s, and look for
    /// verification files here (no DNS).
    pub fn configure(&self, config: &mut Config) {
        let origin: url::Url = self.origin().parse().expect("origin");
        let upstreams = &mut config.upstreams;
        upstreams.wiki_api_url = origin.clone();
        upstreams.finance_crypto_api_url = origin.clone();
        upstreams.finance_stock_api_url = origin.clone();
        upstreams.finance_coingecko_api_url = origin;
        upstreams.outbound_allow_private = true;
        upstreams.upstream_timeout_secs = 1;
        upstreams.verify_url_template = format!(
            "{}/verify/{{domain}}/agent-registry-verify.txt",
            self.origin()
        );
        upstreams.verify_dns = false;
    }

    /// How many requests reached `path_and_query` (e.g. `/v2/prices/BTC-USD/spot`).
    pub fn hits(&self, path_and_query: &str) -> usize {
        let hits = self.shared.hits.lock().expect("hits");
        hits.get(path_and_query).copied().unwrap_or(0)
    }

    /// How many requests reached the fake at all.
    pub fn total_hits(&self) -> usize {
        self.shared.hits.lock().expect("hits").values().sum()
    }

    /// The User-Agent of the last request whose path starts with `prefix`.
    pub fn user_agent(&self, prefix: &str) -> Option<String> {
        let agents = self.shared.user_agents.lock().expect("user agents");
        agents.get(prefix).cloned()
    }

    pub fn coingecko_key(&self) -> Option<String> {
        self.shared.coingecko_key.lock().expect("key").clone()
    }

    /// Serve `document` at `/docs/{name}` (until then: 404); returns its URL.
    pub fn set_document(&self, name: &str, document: Value) -> String {
        self.shared
            .documents
            .lock()
            .expect("documents")
            .insert(name.to_owned(), document);
        self.url(&format!("/docs/{name}"))
    }

    /// Serve `contents` as `domain`'s verification file.
    pub fn set_verification_file(&self, domain: &str, contents: &str) {
        self.shared
            .verification_files
            .lock()
            .expect("files")
            .insert(domain.to_owned(), contents.to_owned());
    }
}

async fn record(State(shared): State<Arc<Shared>>, request: Request, next: Next) -> Response {
    let uri = request.uri();
    let key = uri
        .path_and_query()
        .map_or_else(|| uri.path().to_owned(), |pq| pq.as_str().to_owned());
    let path = uri.path().to_owned();
    if let Ok(mut hits) = shared.hits.lock() {
        *hits.entry(key).or_default() += 1;
    }
    if let Some(agent) = request
        .headers()
        .get(header::USER_AGENT)
        .and_then(|v| v.to_str().ok())
    {
        let prefix = path.split('/').take(3).collect::<Vec<_>>().join("/");
        if let Ok(mut agents) = shared.user_agents.lock() {
            agents.insert(prefix, agent.to_owned());
        }
    }
    next.run(request).await
}

fn json_response(status: StatusCode, body: Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json; charset=utf-8")],
        body.to_string(),
    )
        .into_response()
}

fn malformed() -> Response {
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        "{\"pages\": [{\"id\": 1, \"title\": ",
    )
        .into_response()
}

fn huge_json() -> Response {
    let filler = "x".repeat(HUGE_BYTES);
    json_response(StatusCode::OK, json!({"filler": filler}))
}

async fn slow_json() -> Response {
    tokio::time::sleep(SLOW).await;
    json_response(StatusCode::OK, json!({}))
}

fn rate_limited(body: Value) -> Response {
    let mut response = json_response(StatusCode::TOO_MANY_REQUESTS, body);
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, header::HeaderValue::from_static("30"));
    response
}

// ---- Wikipedia ----

fn search_hit(id: u64, key: &str, title: &str, excerpt: &str, description: &str) -> Value {
    json!({
        "id": id, "key": key, "title": title, "excerpt": excerpt, "matched_title": null,
        "description": description,
        "thumbnail": {"mimetype": "image/jpeg", "width": 60, "height": 80, "duration": null,
                      "url": format!("//upload.wikimedia.org/wikipedia/commons/thumb/{key}.jpg")}
    })
}

async fn wiki_search(Query(query): Query<HashMap<String, String>>) -> Response {
    let q = query.get("q").map(String::as_str).unwrap_or_default();
    match q {
        "Ada Lovelace" => json_response(
            StatusCode::OK,
            json!({"pages": [
                search_hit(1208, "Ada_Lovelace", "Ada Lovelace",
                    "Augusta <span class=\"searchmatch\">Ada</span> King, Countess of <span class=\"searchmatch\">Lovelace</span> (née Byron; 10 December 1815 – 27 November 1852)",
                    "English mathematician (1815–1852)"),
                search_hit(3426458, "Ada_Lovelace_Day", "Ada Lovelace Day",
                    "<span class=\"searchmatch\">Ada</span> <span class=\"searchmatch\">Lovelace</span> Day is an annual event celebrated on the second Tuesday of October",
                    "Annual celebration of women in STEM"),
            ]}),
        ),
        "Mercury" => json_response(
            StatusCode::OK,
            json!({"pages": [
                search_hit(19694, "Mercury", "Mercury",
                    "<span class=\"searchmatch\">Mercury</span> commonly refers to: Mercury (planet)",
                    "Topics referred to by the same term"),
                search_hit(19004, "Mercury_(planet)", "Mercury (planet)",
                    "<span class=\"searchmatch\">Mercury</span> is the first planet from the Sun",
                    "First planet from the Sun"),
                search_hit(18617142, "Mercury_(element)", "Mercury (element)",
                    "<span class=\"searchmatch\">Mercury</span> is a chemical element; it has symbol Hg",
                    "Chemical element with atomic number 80"),
            ]}),
        ),
        "ratelimited" => rate_limited(json!({
            "messageTranslations": {"en": "You have exceeded the rate limit"},
            "httpCode": 429, "httpReason": "Too Many Requests"
        })),
        "malformed" => malformed(),
        "slow" => slow_json().await,
        "huge" => huge_json(),
        _ => json_response(StatusCode::OK, json!({"pages": []})),
    }
}

fn summary(kind: &str, id: u64, key: &str, title: &str, description: &str, extract: &str) -> Value {
    json!({
        "type": kind, "title": title, "displaytitle": format!("<span class=\"mw-page-title-main\">{title}</span>"),
        "namespace": {"id": 0, "text": ""}, "wikibase_item": "Q7259",
        "titles": {"canonical": key, "normalized": title, "display": title},
        "pageid": id, "lang": "en", "dir": "ltr", "revision": "1254367890", "tid": "8f6a1c2e-9b1e-11ef-a1b2-3c4d5e6f7a8b",
        "timestamp": "2024-11-02T10:15:30Z", "description": description, "description_source": "local",
        "thumbnail": {"source": format!("https://upload.wikimedia.org/wikipedia/commons/thumb/{key}/320px-{key}.jpg"), "width": 320, "height": 427},
        "content_urls": {
            "desktop": {"page": format!("https://en.wikipedia.org/wiki/{key}"),
                        "revisions": format!("https://en.wikipedia.org/wiki/{key}?action=history")},
            "mobile": {"page": format!("https://en.m.wikipedia.org/wiki/{key}")}
        },
        "extract": extract,
        "extract_html": format!("<p>{extract}</p>")
    })
}

async fn wiki_summary(Path(title): Path<String>) -> Response {
    match title.as_str() {
        "Ada_Lovelace" => json_response(
            StatusCode::OK,
            summary(
                "standard",
                1208,
                "Ada_Lovelace",
                "Ada Lovelace",
                "English mathematician (1815–1852)",
                "Augusta Ada King, Countess of Lovelace was an English mathematician and writer, chiefly known for her work on Charles Babbage's proposed mechanical general-purpose computer, the Analytical Engine.",
            ),
        ),
        "Mercury" => json_response(
            StatusCode::OK,
            summary(
                "disambiguation",
                19694,
                "Mercury",
                "Mercury",
                "Topics referred to by the same term",
                "Mercury commonly refers to: Mercury (planet), the nearest planet to the Sun; Mercury (element), a metallic chemical element; Mercury (mythology), a Roman god",
            ),
        ),
        "Mercury_(planet)" => json_response(
            StatusCode::OK,
            summary(
                "standard",
                19004,
                "Mercury_(planet)",
                "Mercury (planet)",
                "First planet from the Sun",
                "Mercury is the first planet from the Sun and the smallest in the Solar System.",
            ),
        ),
        // The REST API redirects titles that are redirects to their target.
        "Lovelace" => (StatusCode::FOUND, [(header::LOCATION, "Ada_Lovelace")]).into_response(),
        other => json_response(
            StatusCode::NOT_FOUND,
            json!({
                "type": "https://mediawiki.org/wiki/HyperSwitch/errors/not_found",
                "title": "Not found.", "method": "get", "detail": "Page or revision not found.",
                "uri": format!("/en.wikipedia.org/v1/page/summary/{other}")
            }),
        ),
    }
}

async fn wiki_action(Query(query): Query<HashMap<String, String>>) -> Response {
    let id = query.get("pageids").map(String::as_str).unwrap_or_default();
    let page = match id {
        "1208" => json!({
            "pageid": 1208, "ns": 0, "title": "Ada Lovelace",
            "extract": "Augusta Ada King, Countess of Lovelace was an English mathematician and writer.",
            "contentmodel": "wikitext", "pagelanguage": "en", "touched": "2024-11-02T10:15:30Z",
            "lastrevid": 1254367890, "length": 98765,
            "fullurl": "https://en.wikipedia.org/wiki/Ada_Lovelace",
            "canonicalurl": "https://en.wikipedia.org/wiki/Ada_Lovelace",
            "description": "English mathematician (1815–1852)", "descriptionsource": "local"
        }),
        "19694" => json!({
            "pageid": 19694, "ns": 0, "title": "Mercury",
            "extract": "Mercury commonly refers to:",
            "fullurl": "https://en.wikipedia.org/wiki/Mercury",
            "pageprops": {"disambiguation": ""}
        }),
        other => json!({"pageid": other.parse::<u64>().unwrap_or(0), "missing": true}),
    };
    json_response(
        StatusCode::OK,
        json!({"batchcomplete": true, "query": {"pages": [page]}}),
    )
}

// ---- Coinbase ----

async fn coinbase_spot(Path(pair): Path<String>) -> Response {
    let base = pair.strip_suffix("-USD").unwrap_or(&pair);
    let price = |amount: &str| {
        json_response(
            StatusCode::OK,
            json!({"data": {"amount": amount, "base": base, "currency": "USD"}}),
        )
    };
    match base {
        "BTC" => price("67012.345"),
        "ETH" => price("3456.78"),
        "RATE" => rate_limited(
            json!({"errors": [{"id": "rate_limit_exceeded", "message": "Too many requests"}]}),
        ),
        "BAD" => (
            StatusCode::OK,
            [(header::CONTENT_TYPE, "application/json")],
            "{\"data\": {\"amount\": ",
        )
            .into_response(),
        "SLOW" => slow_json().await,
        "HUGE" => huge_json(),
        "DOWN" => json_response(
            StatusCode::SERVICE_UNAVAILABLE,
            json!({"errors": [{"id": "internal_server_error", "message": "Service unavailable"}]}),
        ),
        _ => json_response(
            StatusCode::NOT_FOUND,
            json!({"errors": [{"id": "not_found", "message": "Invalid base currency"}]}),
        ),
    }
}

// ---- CoinGecko ----

async fn coingecko_price(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Query(query): Query<HashMap<String, String>>,
) -> Response {
    let key = headers
        .get("x-cg-demo-api-key")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    *shared.coingecko_key.lock().expect("key") = key.clone();
    if key.is_none() {
        return json_response(
            StatusCode::UNAUTHORIZED,
            json!({"status": {"error_code": 10002, "error_message": "API Key Missing"}}),
        );
    }
    match query.get("symbols").map(String::as_str) {
        Some("btc") => json_response(
            StatusCode::OK,
            json!({"btc": {"usd": 67187.33, "usd_24h_change": 3.6353, "last_updated_at": 1_711_356_300}}),
        ),
        _ => json_response(StatusCode::OK, json!({})),
    }
}

// ---- Yahoo Finance ----

async fn yahoo_chart(Path(symbol): Path<String>) -> Response {
    match symbol.as_str() {
        "AAPL" => json_response(
            StatusCode::OK,
            json!({"chart": {"result": [{
                "meta": {
                    "currency": "USD", "symbol": "AAPL", "exchangeName": "NMS",
                    "fullExchangeName": "NasdaqGS", "instrumentType": "EQUITY",
                    "firstTradeDate": 345479400, "regularMarketTime": 1717790400,
                    "hasPrePostMarketData": true, "gmtoffset": -14400, "timezone": "EDT",
                    "exchangeTimezoneName": "America/New_York", "regularMarketPrice": 196.89,
                    "fiftyTwoWeekHigh": 199.62, "fiftyTwoWeekLow": 164.08,
                    "regularMarketDayHigh": 196.94, "regularMarketDayLow": 194.14,
                    "regularMarketVolume": 53103912, "longName": "Apple Inc.", "shortName": "Apple Inc.",
                    "chartPreviousClose": 194.48, "priceHint": 2,
                    "currentTradingPeriod": {"regular": {"timezone": "EDT", "start": 1717767000, "end": 1717790400, "gmtoffset": -14400}},
                    "dataGranularity": "1d", "range": "1d", "validRanges": ["1d", "5d", "1mo"]
                },
                "timestamp": [1717767000],
                "indicators": {"quote": [{"open": [194.65], "high": [196.94], "low": [194.14],
                                          "close": [196.89], "volume": [53103912]}],
                               "adjclose": [{"adjclose": [196.89]}]}
            }], "error": null}}),
        ),
        "DOWN" => (
            StatusCode::BAD_GATEWAY,
            [(header::CONTENT_TYPE, "text/html")],
            "<html><body>Bad Gateway</body></html>",
        )
            .into_response(),
        "LIMIT" => (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::CONTENT_TYPE, "text/html")],
            "Too Many Requests\r\n",
        )
            .into_response(),
        _ => json_response(
            StatusCode::NOT_FOUND,
            json!({"chart": {"result": null, "error": {"code": "Not Found", "description": "No data found, symbol may be delisted"}}}),
        ),
    }
}

// ---- Web pages for the reader ----

pub const ARTICLE_HTML: &str = r#"<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>How the Analytical Engine Worked – Computing History</title>
<meta name="author" content="Grace Hopper-Smith">
<meta property="og:site_name" content="Computing History">
<script>window.dataLayer = []; function track(){}</script>
<style>.hero { background: url(hero.png); }</style></head>
<body>
<header><nav class="site-nav"><a href="/">Home</a> <a href="/archive">Archive</a> <a href="/subscribe">Subscribe</a></nav></header>
<main><article>
<h1>How the Analytical Engine Worked</h1>
<p class="byline">By Grace Hopper-Smith</p>
<p>The Analytical Engine was a proposed mechanical general-purpose computer designed by Charles
Babbage in 1837. It was to be programmed with punched cards, an idea borrowed from the Jacquard
loom, and it had an arithmetic logic unit, control flow in the form of conditional branching and
loops, and integrated memory.</p>
<p>Ada Lovelace translated an article on the engine and added her own notes. Note G describes an
algorithm for computing Bernoulli numbers, often called the first computer program. She saw that
the machine could act on things other than numbers, such as musical notes.</p>
<h2>The store and the mill</h2>
<p>The store held one thousand numbers of forty decimal digits each. The mill performed the four
arithmetic operations, comparisons and optionally square roots.</p>
<ul><li>Store: memory for 1,000 numbers</li><li>Mill: the arithmetic unit</li><li>Reader: punched-card input</li></ul>
</article></main>
<aside class="sidebar">Related: Difference Engine</aside>
<footer>© 2026 Computing History. Cookie settings.</footer>
</body></html>"#;

async fn page(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "engine" => (
            [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
            ARTICLE_HTML,
        )
            .into_response(),
        "moved" => (
            StatusCode::MOVED_PERMANENTLY,
            [(header::LOCATION, "/pages/engine")],
        )
            .into_response(),
        "notes.txt" => (
            [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
            "Plain notes.\nSecond line.",
        )
            .into_response(),
        "photo" => (
            [(header::CONTENT_TYPE, "image/png")],
            vec![0x89, b'P', b'N', b'G'],
        )
            .into_response(),
        "huge" => (
            [(header::CONTENT_TYPE, "text/html")],
            format!(
                "<html><body><p>{}</p></body></html>",
                "word ".repeat(HUGE_BYTES / 5)
            ),
        )
            .into_response(),
        "slow" => {
            tokio::time::sleep(SLOW).await;
            ([(header::CONTENT_TYPE, "text/html")], "<p>late</p>").into_response()
        }
        "error" => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/html")],
            "<h1>500</h1>",
        )
            .into_response(),
        _ => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/html")],
            "<h1>Not Found</h1>",
        )
            .into_response(),
    }
}

// ---- Agent cards ----

/// A complete A2A v1.0 card with the registry's payment extension.
pub fn weather_card(endpoint: &str) -> Value {
    json!({
        "name": "Remote Weather", "description": "Forecasts from a card on the network.",
        "version": "2.0.1",
        "supportedInterfaces": [{"url": endpoint, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "provider": {"organization": "Example Weather Inc.", "url": "https://weather.example.com"},
        "capabilities": {"streaming": false, "pushNotifications": false, "extensions": [
            {"uri": "https://a2a-registry.org/extensions/registry/v1", "required": false,
             "params": {"payment": {"model": "paid", "protocols": ["x402"],
                                    "rails": [{"network": "base", "asset": "usdc"}]}}}
        ]},
        "defaultInputModes": ["text/plain", "application/json"],
        "defaultOutputModes": ["application/json"],
        "skills": [
            {"id": "get_forecast", "name": "Forecast", "description": "Forecast for a city",
             "tags": ["weather", "forecast"], "examples": ["Weather in Paris tomorrow"]},
            {"id": "get_alerts", "name": "Alerts", "description": "Severe weather alerts",
             "tags": ["weather", "alerts"]}
        ],
        "securitySchemes": {"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}},
        "securityRequirements": [{"schemes": {"bearer": {"list": []}}}]
    })
}

async fn card(Path(name): Path<String>) -> Response {
    match name.as_str() {
        "weather.json" => json_response(
            StatusCode::OK,
            weather_card("https://weather.example.com/a2a/v1"),
        ),
        "invalid.json" => json_response(
            StatusCode::OK,
            json!({
                "name": "Broken", "version": "1",
                "capabilities": [{"name": "get_forecast"}],
                "skills": [{"id": "get_forecast"}]
            }),
        ),
        "old.json" => json_response(
            StatusCode::OK,
            json!({
                "name": "Old", "description": "A v0.3 card", "version": "0.3.0",
                "url": "https://old.example.com/a2a", "protocolVersion": "0.3.0",
                "capabilities": {}, "defaultInputModes": ["text/plain"],
                "defaultOutputModes": ["text/plain"], "skills": []
            }),
        ),
        "page.html" => (
            [(header::CONTENT_TYPE, "text/html")],
            "<html>not a card</html>",
        )
            .into_response(),
        "huge.json" => huge_json(),
        _ => json_response(StatusCode::NOT_FOUND, json!({"error": "not found"})),
    }
}

// ---- Domain verification ----

async fn document(State(shared): State<Arc<Shared>>, Path(name): Path<String>) -> Response {
    let document = shared
        .documents
        .lock()
        .expect("documents")
        .get(&name)
        .cloned();
    match document {
        Some(document) => Json(document).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}

async fn verification_file(
    State(shared): State<Arc<Shared>>,
    Path(domain): Path<String>,
) -> Response {
    let contents = shared
        .verification_files
        .lock()
        .expect("files")
        .get(&domain)
        .cloned();
    match contents {
        Some(redirect) if redirect.starts_with("redirect:") => (
            StatusCode::FOUND,
            [(
                header::LOCATION,
                redirect.trim_start_matches("redirect:").to_owned(),
            )],
        )
            .into_response(),
        Some(contents) => ([(header::CONTENT_TYPE, "text/plain")], contents).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            [(header::CONTENT_TYPE, "text/plain")],
            "not found",
        )
            .into_response(),
    }
}
