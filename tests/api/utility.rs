//! The hosted utility agents through all three entry
//! points — `POST /a2a/utility/<name>`, A2A `SendMessage` at `/a2a/utility/<name>/v1`, and
//! `/a2a/message` with `to: <package>` — against fakes of their upstreams on loopback.

use serde_json::{Value, json};

use crate::fakes::Fake;
use crate::helpers::{MASTER_KEY, TestApp, TestResponse};

async fn app_with_fake() -> (TestApp, Fake) {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| fake.configure(config)).await;
    (app, fake)
}

async fn call(app: &TestApp, name: &str, body: Value) -> TestResponse {
    app.post(&format!("/a2a/utility/{name}"), Some(MASTER_KEY), body)
        .await
}

#[track_caller]
fn assert_output(response: &TestResponse, agent: &str, capability: &str) -> Value {
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["agent"], agent, "{}", response.text);
    assert_eq!(response.body["capability"], capability, "{}", response.text);
    response.body["output"].clone()
}

/// A `SendMessage` request with the given parts and optional skill id.
fn send_message(parts: Value, skill_id: Option<&str>) -> Value {
    let mut params =
        json!({"message": {"messageId": "msg-1", "role": "ROLE_USER", "parts": parts}});
    if let Some(skill) = skill_id {
        params["metadata"] = json!({"skill_id": skill});
    }
    json!({"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": params})
}

async fn rpc(app: &TestApp, name: &str, request: Value) -> TestResponse {
    app.post(
        &format!("/a2a/utility/{name}/v1"),
        Some(MASTER_KEY),
        request,
    )
    .await
}

/// The data part of a `SendMessage` result, after checking the message's shape.
#[track_caller]
fn message_data(response: &TestResponse) -> Value {
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["jsonrpc"], "2.0");
    assert_eq!(response.body["id"], 7);
    let message = &response.body["result"]["message"];
    assert_eq!(message["role"], "ROLE_AGENT", "{}", response.text);
    assert!(message["messageId"].is_string());
    assert_eq!(message["parts"][0]["mediaType"], "application/json");
    assert!(message["parts"][1]["text"].is_string(), "{}", response.text);
    message["parts"][0]["data"].clone()
}

#[track_caller]
fn assert_rpc_error(response: &TestResponse, code: i64, data_code: &str) {
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["error"]["code"], code, "{}", response.text);
    assert_eq!(
        response.body["error"]["data"][0]["metadata"]["code"], data_code,
        "{}",
        response.text
    );
    assert!(response.body["error"]["message"].is_string());
}

// ---- Wikipedia ----

#[tokio::test]
async fn a_wikipedia_search_lists_pages_and_summarises_the_best_one() {
    let (app, _fake) = app_with_fake().await;

    let response = call(&app, "wiki", json!({"input": {"query": "Ada Lovelace"}})).await;

    let output = assert_output(&response, "registry.utility.wiki", "search_page");
    assert_eq!(output["query"], "Ada Lovelace");
    let first = &output["results"][0];
    assert_eq!(first["page_id"], "1208");
    assert_eq!(first["title"], "Ada Lovelace");
    assert_eq!(first["description"], "English mathematician (1815–1852)");
    let excerpt = first["excerpt"].as_str().expect("excerpt");
    assert!(excerpt.starts_with("Augusta Ada King"), "{excerpt}");
    assert!(!excerpt.contains('<'), "markup is stripped: {excerpt}");
    assert_eq!(output["results"].as_array().map(Vec::len), Some(2));
    let best = &output["best_match"];
    assert_eq!(best["title"], "Ada Lovelace");
    assert_eq!(best["type"], "standard");
    assert_eq!(best["url"], "https://en.wikipedia.org/wiki/Ada_Lovelace");
    assert!(
        best["summary"]
            .as_str()
            .is_some_and(|s| s.contains("Analytical Engine"))
    );
}

#[tokio::test]
async fn a_page_id_is_summarised_through_the_action_api() {
    let (app, _fake) = app_with_fake().await;

    let response = call(&app, "wiki", json!({"input": {"page_id": "1208"}})).await;

    let output = assert_output(&response, "registry.utility.wiki", "get_summary");
    assert_eq!(output["page_id"], "1208");
    assert_eq!(output["title"], "Ada Lovelace");
    assert_eq!(output["type"], "standard");
    assert!(
        output["summary"]
            .as_str()
            .is_some_and(|s| s.contains("Countess"))
    );
}

#[tokio::test]
async fn a_title_is_summarised_through_the_rest_api_following_redirects() {
    let (app, _fake) = app_with_fake().await;

    let by_title = call(
        &app,
        "wiki",
        json!({"capability": "get_summary", "input": {"page_id": "Ada Lovelace"}}),
    )
    .await;
    let redirected = call(
        &app,
        "wiki",
        json!({"capability": "get_summary", "input": {"page_id": "Lovelace"}}),
    )
    .await;

    let output = assert_output(&by_title, "registry.utility.wiki", "get_summary");
    assert_eq!(output["page_id"], "1208");
    assert_eq!(output["description"], "English mathematician (1815–1852)");
    let output = assert_output(&redirected, "registry.utility.wiki", "get_summary");
    assert_eq!(output["title"], "Ada Lovelace");
}

#[tokio::test]
async fn a_disambiguation_page_lists_candidates_and_search_skips_it() {
    let (app, _fake) = app_with_fake().await;

    let summary = call(
        &app,
        "wiki",
        json!({"capability": "get_summary", "input": {"page_id": "Mercury"}}),
    )
    .await;
    let search = call(&app, "wiki", json!({"input": {"query": "Mercury"}})).await;

    let output = assert_output(&summary, "registry.utility.wiki", "get_summary");
    assert_eq!(output["type"], "disambiguation");
    let candidates: Vec<&str> = output["candidates"]
        .as_array()
        .expect("candidates")
        .iter()
        .filter_map(|candidate| candidate["title"].as_str())
        .collect();
    assert_eq!(candidates, ["Mercury (planet)", "Mercury (element)"]);
    let output = assert_output(&search, "registry.utility.wiki", "search_page");
    assert_eq!(output["best_match"]["title"], "Mercury (planet)");
}

#[tokio::test]
async fn a_missing_page_is_a_404_not_a_500() {
    let (app, _fake) = app_with_fake().await;

    let by_title = call(
        &app,
        "wiki",
        json!({"capability": "get_summary", "input": {"page_id": "No Such Page Anywhere"}}),
    )
    .await;
    let by_id = call(&app, "wiki", json!({"input": {"page_id": 999999999}})).await;

    by_title.assert_problem(404, "resource_not_found");
    assert!(
        by_title.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("No Such Page Anywhere"))
    );
    by_id.assert_problem(404, "resource_not_found");
}

#[tokio::test]
async fn a_search_without_results_is_an_empty_answer() {
    let (app, _fake) = app_with_fake().await;

    let response = call(&app, "wiki", json!({"input": {"query": "qwxzzy nothing"}})).await;

    let output = assert_output(&response, "registry.utility.wiki", "search_page");
    assert_eq!(output["results"], json!([]));
    assert_eq!(output["best_match"], Value::Null);
}

#[tokio::test]
async fn wikipedia_failures_are_502_or_504_with_a_useful_detail() {
    let (app, _fake) = app_with_fake().await;

    let limited = call(&app, "wiki", json!({"input": {"query": "ratelimited"}})).await;
    let malformed = call(&app, "wiki", json!({"input": {"query": "malformed"}})).await;
    let huge = call(&app, "wiki", json!({"input": {"query": "huge"}})).await;
    let slow = call(&app, "wiki", json!({"input": {"query": "slow"}})).await;

    limited.assert_problem(502, "upstream_error");
    assert!(
        limited.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Wikipedia") && d.contains("rate-limited"))
    );
    assert_eq!(limited.header("retry-after"), Some("30"));
    malformed.assert_problem(502, "upstream_error");
    assert!(
        malformed.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("malformed JSON"))
    );
    huge.assert_problem(502, "upstream_error");
    assert!(
        huge.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("larger than"))
    );
    slow.assert_problem(504, "upstream_timeout");
    assert!(
        slow.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Wikipedia"))
    );
}

#[tokio::test]
async fn wikipedia_answers_are_cached() {
    let (app, fake) = app_with_fake().await;

    for _ in 0..3 {
        let response = call(&app, "wiki", json!({"input": {"page_id": "Ada Lovelace"}})).await;
        assert_eq!(response.status, 200, "{}", response.text);
    }

    assert_eq!(fake.hits("/api/rest_v1/page/summary/Ada_Lovelace"), 1);
}

#[tokio::test]
async fn bad_wiki_input_is_a_400() {
    let (app, _fake) = app_with_fake().await;

    for body in [
        json!({"input": {}}),
        json!({"input": {"query": ""}}),
        json!({"input": {"query": "x", "limit": 50}}),
        json!({"input": {"query": 3}}),
        json!({"input": [1]}),
        json!({"capability": "translate", "input": {"query": "x"}}),
    ] {
        call(&app, "wiki", body.clone())
            .await
            .assert_problem(400, "invalid_parameter");
    }
}

// ---- Finance ----

#[tokio::test]
async fn a_crypto_price_comes_from_coinbase_normalised() {
    let (app, _fake) = app_with_fake().await;

    let response = call(&app, "finance", json!({"input": {"symbol": "btc"}})).await;

    let output = assert_output(&response, "registry.utility.finance", "get_current_price");
    assert_eq!(output["symbol"], "BTC");
    assert_eq!(output["price"], 67012.345);
    assert_eq!(output["currency"], "USD");
    assert_eq!(output["source"], "coinbase");
    assert!(
        output["as_of"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{output}"
    );
    assert!(
        output.get("change_24h").is_none(),
        "coinbase spot has no change"
    );
}

#[tokio::test]
async fn a_stock_price_comes_from_yahoo_asked_with_a_browser_user_agent() {
    let (app, fake) = app_with_fake().await;

    let response = call(&app, "finance", json!({"input": {"symbol": "AAPL"}})).await;

    let output = assert_output(&response, "registry.utility.finance", "get_current_price");
    assert_eq!(output["symbol"], "AAPL");
    assert_eq!(output["price"], 196.89);
    assert_eq!(output["currency"], "USD");
    assert_eq!(output["source"], "yahoo");
    assert_eq!(output["as_of"], "2024-06-07T20:00:00Z");
    assert_eq!(output["change_24h"], 1.2392);
    assert_eq!(output["name"], "Apple Inc.");
    let agent = fake.user_agent("/v8/finance").expect("yahoo was asked");
    assert!(agent.starts_with("Mozilla/5.0"), "{agent}");
    let agent = fake
        .user_agent("/v2/prices")
        .expect("coinbase was asked first");
    assert!(agent.starts_with("agent-registry/"), "{agent}");
}

#[tokio::test]
async fn a_stock_symbol_with_punctuation_skips_the_crypto_lookup() {
    let (app, fake) = app_with_fake().await;

    let response = call(&app, "finance", json!({"input": {"symbol": "BRK.B"}})).await;

    response.assert_problem(404, "resource_not_found");
    assert_eq!(fake.hits("/v2/prices/BRK.B-USD/spot"), 0);
    assert_eq!(fake.hits("/v8/finance/chart/BRK.B?interval=1d&range=1d"), 1);
}

#[tokio::test]
async fn an_unknown_symbol_is_a_clear_404_not_a_500() {
    let (app, _fake) = app_with_fake().await;

    let response = call(&app, "finance", json!({"input": {"symbol": "ZZZZ"}})).await;

    response.assert_problem(404, "resource_not_found");
    let detail = response.body["detail"].as_str().expect("detail");
    assert!(detail.contains("unknown symbol 'ZZZZ'"), "{detail}");
}

#[tokio::test]
async fn prices_are_cached_for_a_short_while() {
    let (app, fake) = app_with_fake().await;

    for _ in 0..3 {
        let response = call(&app, "finance", json!({"input": {"symbol": "ETH"}})).await;
        assert_eq!(response.status, 200, "{}", response.text);
    }

    assert_eq!(fake.hits("/v2/prices/ETH-USD/spot"), 1);
}

#[tokio::test]
async fn finance_failures_are_502_or_504_with_a_useful_detail() {
    let (app, _fake) = app_with_fake().await;

    let limited = call(
        &app,
        "finance",
        json!({"input": {"symbol": "RATE", "market": "crypto"}}),
    )
    .await;
    let stock_limited = call(
        &app,
        "finance",
        json!({"input": {"symbol": "LIMIT", "market": "stock"}}),
    )
    .await;
    let malformed = call(
        &app,
        "finance",
        json!({"input": {"symbol": "BAD", "market": "crypto"}}),
    )
    .await;
    let huge = call(
        &app,
        "finance",
        json!({"input": {"symbol": "HUGE", "market": "crypto"}}),
    )
    .await;
    let slow = call(
        &app,
        "finance",
        json!({"input": {"symbol": "SLOW", "market": "crypto"}}),
    )
    .await;

    limited.assert_problem(502, "upstream_error");
    assert!(
        limited.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Coinbase"))
    );
    assert_eq!(limited.header("retry-after"), Some("30"));
    stock_limited.assert_problem(502, "upstream_error");
    assert!(
        stock_limited.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("Yahoo Finance"))
    );
    malformed.assert_problem(502, "upstream_error");
    huge.assert_problem(502, "upstream_error");
    slow.assert_problem(504, "upstream_timeout");
}

/// A loopback address nothing listens on: connecting is refused at once.
async fn closed_origin() -> url::Url {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    drop(listener);
    format!("http://{addr}").parse().expect("origin")
}

#[tokio::test]
async fn when_the_crypto_and_the_stock_upstreams_both_fail_the_error_names_both() {
    // Both answer errors: each is named with what it answered.
    let (app, fake) = app_with_fake().await;
    let down = call(&app, "finance", json!({"input": {"symbol": "DOWN"}})).await;
    down.assert_problem(502, "upstream_error");
    let detail = down.body["detail"].as_str().expect("detail");
    assert_eq!(
        detail, "Coinbase answered HTTP 503; Yahoo Finance answered HTTP 502",
        "{detail}"
    );
    assert_eq!(fake.hits("/v2/prices/DOWN-USD/spot"), 1);

    // Rate-limited first, then unknown to the fallback: still a 502 with the Retry-After.
    let limited = call(&app, "finance", json!({"input": {"symbol": "RATE"}})).await;
    limited.assert_problem(502, "upstream_error");
    let detail = limited.body["detail"].as_str().expect("detail");
    assert!(detail.starts_with("Coinbase was rate-limited"), "{detail}");
    assert!(detail.contains("Yahoo Finance has no chart"), "{detail}");
    assert_eq!(limited.header("retry-after"), Some("30"));

    // Neither can be reached (CoinGecko, with a key, is the crypto source).
    let closed = closed_origin().await;
    let app = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.upstreams.finance_coingecko_api_key = Some("cg-test-key".to_owned());
        config.upstreams.finance_coingecko_api_url = closed.clone();
        config.upstreams.finance_stock_api_url = closed.clone();
    })
    .await;
    let unreachable = call(&app, "finance", json!({"input": {"symbol": "BTC"}})).await;
    unreachable.assert_problem(502, "upstream_error");
    let detail = unreachable.body["detail"].as_str().expect("detail");
    let (first, second) = detail.split_once("; ").expect("two failures");
    assert!(first.starts_with("CoinGecko is unreachable ("), "{detail}");
    assert!(
        second.starts_with("Yahoo Finance is unreachable ("),
        "{detail}"
    );

    // Through the playground the step's error says the same.
    let token = app.token("alice", &["playground"]).await;
    let session = app
        .post("/api/playground/session", Some(&token), json!({}))
        .await;
    let id = session.body["session_id"].as_str().expect("session id");
    let step = app
        .post(
            &format!("/api/playground/session/{id}/execute"),
            Some(&token),
            json!({"agent": "registry.utility.finance", "capability": "get_current_price",
                   "input": {"symbol": "BTC"}}),
        )
        .await;
    assert_eq!(step.status, 200, "{}", step.text);
    assert_eq!(step.body["status"], "failed", "{}", step.text);
    let message = step.body["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("CoinGecko is unreachable")
            && message.contains("Yahoo Finance is unreachable"),
        "{message}"
    );
}

#[tokio::test]
async fn with_a_coingecko_key_crypto_prices_come_from_coingecko_with_their_change() {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.upstreams.finance_coingecko_api_key = Some("cg-test-key".to_owned());
    })
    .await;

    let response = call(&app, "finance", json!({"input": {"symbol": "BTC"}})).await;
    let unknown = call(
        &app,
        "finance",
        json!({"input": {"symbol": "NOPE", "market": "crypto"}}),
    )
    .await;

    let output = assert_output(&response, "registry.utility.finance", "get_current_price");
    assert_eq!(output["source"], "coingecko");
    assert_eq!(output["price"], 67187.33);
    assert_eq!(output["change_24h"], 3.6353);
    assert_eq!(output["as_of"], "2024-03-25T08:45:00Z");
    assert_eq!(fake.coingecko_key().as_deref(), Some("cg-test-key"));
    unknown.assert_problem(404, "resource_not_found");
}

#[tokio::test]
async fn bad_finance_input_is_a_400() {
    let (app, _fake) = app_with_fake().await;

    for body in [
        json!({"input": {}}),
        json!({"input": {"symbol": "BTC USD"}}),
        json!({"input": {"symbol": "<script>"}}),
        json!({"input": {"symbol": "BTC", "market": "forex"}}),
        json!({"action": "get_history", "params": {"symbol": "BTC"}}),
    ] {
        call(&app, "finance", body.clone())
            .await
            .assert_problem(400, "invalid_parameter");
    }
}

// ---- Reader ----

#[tokio::test]
async fn a_page_is_read_as_markdown_with_its_title_and_byline() {
    let (app, fake) = app_with_fake().await;

    let response = call(
        &app,
        "reader",
        json!({"input": {"url": fake.url("/pages/engine")}}),
    )
    .await;

    let output = assert_output(&response, "registry.utility.reader", "extract_content");
    assert_eq!(output["url"], fake.url("/pages/engine"));
    assert!(
        output["title"]
            .as_str()
            .is_some_and(|t| t.contains("Analytical Engine")),
        "{output}"
    );
    assert_eq!(output["byline"], "Grace Hopper-Smith");
    assert!(output["fetched_at"].is_string());
    let markdown = output["markdown"].as_str().expect("markdown");
    assert!(markdown.contains("Bernoulli numbers"), "{markdown}");
    assert!(markdown.contains("## The store and the mill"), "{markdown}");
    assert!(
        markdown.contains("- Store: memory for 1,000 numbers"),
        "{markdown}"
    );
    for boilerplate in ["dataLayer", "background:", "Subscribe", "Cookie settings"] {
        assert!(
            !markdown.contains(boilerplate),
            "{boilerplate} in {markdown}"
        );
    }
}

#[tokio::test]
async fn the_reader_follows_redirects_and_reads_plain_text() {
    let (app, fake) = app_with_fake().await;

    let moved = call(
        &app,
        "reader",
        json!({"input": {"url": fake.url("/pages/moved")}}),
    )
    .await;
    let text = call(
        &app,
        "reader",
        json!({"input": {"url": fake.url("/pages/notes.txt")}}),
    )
    .await;

    let output = assert_output(&moved, "registry.utility.reader", "extract_content");
    assert_eq!(output["url"], fake.url("/pages/engine"));
    assert_eq!(output["requested_url"], fake.url("/pages/moved"));
    let output = assert_output(&text, "registry.utility.reader", "extract_content");
    assert_eq!(output["markdown"], "Plain notes.\nSecond line.");
}

#[tokio::test]
async fn unreadable_pages_are_clear_errors() {
    let (app, fake) = app_with_fake().await;

    let missing = call(
        &app,
        "reader",
        json!({"input": {"url": fake.url("/pages/gone")}}),
    )
    .await;
    let failing = call(
        &app,
        "reader",
        json!({"input": {"url": fake.url("/pages/error")}}),
    )
    .await;
    let image = call(
        &app,
        "reader",
        json!({"input": {"url": fake.url("/pages/photo")}}),
    )
    .await;
    let huge = call(
        &app,
        "reader",
        json!({"input": {"url": fake.url("/pages/huge")}}),
    )
    .await;
    let slow = call(
        &app,
        "reader",
        json!({"input": {"url": fake.url("/pages/slow")}}),
    )
    .await;
    let not_a_url = call(&app, "reader", json!({"input": {"url": "not a url"}})).await;
    let ftp = call(
        &app,
        "reader",
        json!({"input": {"url": "ftp://example.com/x"}}),
    )
    .await;

    missing.assert_problem(404, "resource_not_found");
    failing.assert_problem(502, "upstream_error");
    image.assert_problem(502, "upstream_error");
    assert!(
        image.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("image/png"))
    );
    huge.assert_problem(502, "upstream_error");
    assert!(
        huge.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("more than"))
    );
    slow.assert_problem(504, "upstream_timeout");
    not_a_url.assert_problem(400, "invalid_parameter");
    ftp.assert_problem(400, "invalid_parameter");
}

// ---- The other entry points ----

#[tokio::test]
async fn the_legacy_action_and_params_body_works_on_every_utility_path() {
    let (app, fake) = app_with_fake().await;

    let finance = call(
        &app,
        "finance",
        json!({"action": "get_current_price", "params": {"symbol": "BTC"}}),
    )
    .await;
    let wiki = call(
        &app,
        "wiki",
        json!({"action": "get_summary", "params": {"page_id": "1208"}}),
    )
    .await;
    let reader = call(
        &app,
        "reader",
        json!({"action": "extract_content", "params": {"url": fake.url("/pages/engine")}}),
    )
    .await;

    assert_eq!(
        assert_output(&finance, "registry.utility.finance", "get_current_price")["price"],
        67012.345
    );
    assert_eq!(
        assert_output(&wiki, "registry.utility.wiki", "get_summary")["title"],
        "Ada Lovelace"
    );
    assert!(
        assert_output(&reader, "registry.utility.reader", "extract_content")["markdown"]
            .is_string()
    );
}

#[tokio::test]
async fn a2a_message_to_a_hosted_agent_answers_like_its_utility_path() {
    let (app, _fake) = app_with_fake().await;
    let token = app.token("alice", &["a2a"]).await;
    let body = json!({"to": "registry.utility.finance", "action": "get_current_price", "params": {"symbol": "BTC"}});

    let message = app.post("/a2a/message", Some(&token), body).await;
    let direct = call(&app, "finance", json!({"input": {"symbol": "BTC"}})).await;

    let output = assert_output(&message, "registry.utility.finance", "get_current_price");
    assert_eq!(output["symbol"], "BTC");
    assert_eq!(output["price"], direct.body["output"]["price"]);
    assert_eq!(message.body["agent"], direct.body["agent"]);
}

#[tokio::test]
async fn a2a_message_to_a_hosted_agent_needs_a_token_with_scope_a2a_and_a_known_action() {
    let (app, _fake) = app_with_fake().await;
    let writer = app.token("bob", &["agents:write"]).await;
    let body = |action: &str| json!({"to": "registry.utility.finance", "action": action, "params": {"symbol": "BTC"}});

    let anonymous = app
        .post("/a2a/message", None, body("get_current_price"))
        .await;
    let wrong_scope = app
        .post("/a2a/message", Some(&writer), body("get_current_price"))
        .await;
    let unknown_action = app
        .post("/a2a/message", Some(MASTER_KEY), body("sell_everything"))
        .await;
    let unknown_agent = app
        .post(
            "/a2a/message",
            Some(MASTER_KEY),
            json!({"to": "com.example.nobody", "action": "x"}),
        )
        .await;

    anonymous.assert_problem(401, "unauthorized");
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    wrong_scope.assert_problem(403, "forbidden");
    unknown_action.assert_problem(400, "invalid_parameter");
    assert!(
        unknown_action.body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("get_current_price"))
    );
    unknown_agent.assert_problem(404, "agent_not_found");
}

#[tokio::test]
async fn the_utility_paths_need_a_token_with_scope_a2a() {
    let (app, _fake) = app_with_fake().await;
    let writer = app.token("bob", &["agents:write"]).await;
    let reader = app.token("carol", &["a2a"]).await;
    let body = json!({"input": {"symbol": "BTC"}});

    let anonymous = app.post("/a2a/utility/finance", None, body.clone()).await;
    let wrong_scope = app
        .post("/a2a/utility/finance", Some(&writer), body.clone())
        .await;
    let allowed = app
        .post("/a2a/utility/finance", Some(&reader), body.clone())
        .await;
    let unknown = app.post("/a2a/utility/weather", Some(&reader), body).await;

    anonymous.assert_problem(401, "unauthorized");
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    wrong_scope.assert_problem(403, "forbidden");
    assert_eq!(allowed.status, 200, "{}", allowed.text);
    unknown.assert_problem(404, "agent_not_found");
}

#[tokio::test]
async fn send_message_runs_a_hosted_agent_from_a_text_part() {
    let (app, fake) = app_with_fake().await;

    let finance = rpc(
        &app,
        "finance",
        send_message(json!([{"text": "BTC"}]), None),
    )
    .await;
    let wiki = rpc(
        &app,
        "wiki",
        send_message(json!([{"text": "Ada Lovelace"}]), None),
    )
    .await;
    let reader = rpc(
        &app,
        "reader",
        send_message(json!([{"text": fake.url("/pages/engine")}]), None),
    )
    .await;

    assert_eq!(message_data(&finance)["price"], 67012.345);
    assert!(
        finance.body["result"]["message"]["parts"][1]["text"]
            .as_str()
            .is_some_and(|t| t.contains("BTC"))
    );
    assert_eq!(message_data(&wiki)["best_match"]["title"], "Ada Lovelace");
    assert!(message_data(&reader)["markdown"].is_string());
}

#[tokio::test]
async fn send_message_takes_data_parts_and_a_skill_id() {
    let (app, _fake) = app_with_fake().await;

    let by_data = rpc(
        &app,
        "wiki",
        send_message(json!([{"data": {"page_id": "1208"}}]), None),
    )
    .await;
    let by_skill = rpc(
        &app,
        "wiki",
        send_message(json!([{"text": "Mercury"}]), Some("get_summary")),
    )
    .await;
    let stock = rpc(
        &app,
        "finance",
        send_message(
            json!([{"data": {"symbol": "AAPL", "market": "stock"}}]),
            Some("get_current_price"),
        ),
    )
    .await;

    assert_eq!(message_data(&by_data)["title"], "Ada Lovelace");
    assert_eq!(message_data(&by_skill)["type"], "disambiguation");
    assert_eq!(message_data(&stock)["source"], "yahoo");
}

#[tokio::test]
async fn send_message_failures_are_json_rpc_errors_with_the_error_code() {
    let (app, _fake) = app_with_fake().await;

    let unknown_symbol = rpc(
        &app,
        "finance",
        send_message(json!([{"text": "ZZZZ"}]), None),
    )
    .await;
    let unknown_skill = rpc(
        &app,
        "finance",
        send_message(json!([{"text": "BTC"}]), Some("get_history")),
    )
    .await;
    let no_input = rpc(&app, "finance", send_message(json!([]), None)).await;
    let upstream = rpc(
        &app,
        "wiki",
        send_message(json!([{"text": "malformed"}]), None),
    )
    .await;
    let timeout = rpc(&app, "wiki", send_message(json!([{"text": "slow"}]), None)).await;
    let unknown_method = rpc(
        &app,
        "wiki",
        json!({"jsonrpc": "2.0", "id": 7, "method": "Nope"}),
    )
    .await;

    assert_rpc_error(&unknown_symbol, -32602, "resource_not_found");
    assert_rpc_error(&unknown_skill, -32602, "invalid_parameter");
    assert_rpc_error(&no_input, -32602, "invalid_parameter");
    assert_rpc_error(&upstream, -32603, "upstream_error");
    assert!(
        upstream.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Wikipedia"))
    );
    assert_rpc_error(&timeout, -32603, "upstream_timeout");
    assert_eq!(unknown_method.body["error"]["code"], -32601);
}

#[tokio::test]
async fn send_message_to_a_hosted_agent_needs_a_token_like_the_registry_endpoint() {
    let (app, _fake) = app_with_fake().await;
    let writer = app.token("bob", &["agents:write"]).await;
    let request = send_message(json!([{"text": "BTC"}]), None);

    let anonymous = app
        .post("/a2a/utility/finance/v1", None, request.clone())
        .await;
    let wrong_scope = app
        .post("/a2a/utility/finance/v1", Some(&writer), request.clone())
        .await;
    let unknown = app
        .post("/a2a/utility/weather/v1", Some(MASTER_KEY), request)
        .await;

    assert_eq!(anonymous.status, 401);
    assert_eq!(anonymous.header("www-authenticate"), Some("Bearer"));
    assert_eq!(anonymous.body["error"]["code"], -32000);
    assert_eq!(wrong_scope.status, 403);
    assert_eq!(wrong_scope.body["error"]["code"], -32000);
    unknown.assert_problem(404, "agent_not_found");
}

#[tokio::test]
async fn every_utility_card_points_at_its_json_rpc_endpoint_and_matches_resolve() {
    let (app, _fake) = app_with_fake().await;

    for slug in ["wiki", "finance", "reader"] {
        let card = app
            .get(&format!("/a2a/utility/{slug}/.well-known/agent-card.json"))
            .await;
        let resolved = app
            .get(&format!("/public/agents/resolve/registry.utility.{slug}"))
            .await;

        assert_eq!(card.status, 200, "{}", card.text);
        assert_eq!(
            card.body["supportedInterfaces"][0]["url"],
            format!("http://registry.test/a2a/utility/{slug}/v1")
        );
        assert_eq!(card.body, resolved.body, "{slug}");
    }
}
