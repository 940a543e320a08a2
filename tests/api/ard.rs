//! ARD: the manifest, the registry API at `/ard` (search, explore, list, lookup), its errors,
//! and federation between real instances, all over loopback HTTP.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use axum::http::{Method, Request, header};
use serde_json::{Value, json};

use crate::helpers::{TestApp, TestResponse, agent_body};

const NS: &str = "https://agenticresourcediscovery.org/ns#";

/// The pattern the ARD conformance kit checks identifiers against.
fn is_ard_urn(identifier: &str) -> bool {
    let Some(rest) = identifier.strip_prefix("urn:air:") else {
        return false;
    };
    let mut parts = rest.split(':');
    let publisher = parts.next().unwrap_or_default();
    let segments: Vec<&str> = parts.collect();
    !publisher.is_empty()
        && publisher
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
        && !segments.is_empty()
        && segments.iter().all(|segment| {
            !segment.is_empty()
                && segment
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        })
}

async fn search(app: &TestApp, body: Value) -> TestResponse {
    app.post("/ard/search", None, body).await
}

fn identifiers(results: &Value) -> Vec<String> {
    results
        .as_array()
        .expect("an array")
        .iter()
        .map(|result| {
            result["identifier"]
                .as_str()
                .expect("identifier")
                .to_owned()
        })
        .collect()
}

/// `GET path` again with the ETag it answered.
async fn revalidate(app: &TestApp, path: &str, etag: &str) -> TestResponse {
    app.send(
        Request::builder()
            .uri(path)
            .header(header::IF_NONE_MATCH, etag)
            .body(axum::body::Body::empty())
            .expect("request"),
    )
    .await
}

#[track_caller]
fn assert_ard_error(response: &TestResponse, status: u16, code: &str) {
    assert_eq!(response.status.as_u16(), status, "{}", response.text);
    assert_eq!(response.body["errorCode"], code, "{}", response.text);
    assert!(
        response.body["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()),
        "{}",
        response.text
    );
}

/// Agents to search: weather ones (two tagged `forecast`, one an MCP server), and others.
async fn weather_catalogue(app: &TestApp) {
    let alice = app.token("alice", &[]).await;
    let mut forecast = agent_body("com.example.forecast");
    forecast["name"] = json!("Weather forecast agent");
    forecast["description"] = json!("Weather forecasts for any city, hour by hour.");
    forecast["tags"] = json!(["weather", "forecast"]);
    forecast["category"] = json!("Weather");
    forecast["url"] = json!("https://forecast.example.com/a2a");
    forecast["capabilities"] = json!([{"name": "get_forecast", "description": "A forecast"}]);
    forecast["representative_queries"] =
        json!(["will it rain in Paris tomorrow", "weekend weather for Oslo"]);
    app.publish_live(&alice, forecast).await;

    let mut radar = agent_body("com.example.radar");
    radar["name"] = json!("Weather radar");
    // Quotes, a backslash and control characters: written escaped in every answer.
    radar["description"] = json!("Weather radar images and \"storm\" alerts.\nC:\\radar\t→ ✓");
    radar["tags"] = json!(["weather", "alerts"]);
    radar["url"] = json!("https://radar.example.com/a2a");
    radar["capabilities"] = json!([
        {"name": "radar_image", "description": "A radar image"},
        {"name": "storm_alerts", "description": "Storm alerts"},
    ]);
    app.publish_live(&alice, radar).await;

    let mut server = agent_body("io.github.acme.weather-mcp");
    server["name"] = json!("Weather MCP server");
    server["description"] = json!("Weather forecast tools for MCP hosts.");
    server["tags"] = json!(["weather", "forecast"]);
    server["packages"] = json!([{"registry_type": "npm", "identifier": "@acme/weather-mcp", "version": "1.2.0", "transport": {"type": "stdio"}}]);
    app.publish_live(&alice, server).await;

    let mut stocks = agent_body("com.example.stocks");
    stocks["name"] = json!("Stock quotes");
    stocks["description"] = json!("Stock prices and market news.");
    stocks["tags"] = json!(["finance"]);
    app.publish_live(&alice, stocks).await;
}

#[tokio::test]
async fn the_manifest_lists_the_registry_and_every_active_agent_as_ard_entries() {
    let app = TestApp::spawn().await.served().await;
    weather_catalogue(&app).await;
    let bob = app.token("bob", &[]).await;
    app.publish(&bob, agent_body("com.example.staged")).await;

    let manifest = app.get("/.well-known/ard.json").await;
    assert_eq!(manifest.status, 200, "{}", manifest.text);
    let entries = manifest.body["entries"].as_array().expect("entries");
    let registry = &entries[0];
    assert_eq!(registry["type"], "application/ai-registry+json");
    assert_eq!(registry["url"], "http://registry.test/ard");
    assert_eq!(registry["identifier"], "urn:air:registry.test:registry");
    for entry in entries {
        let identifier = entry["identifier"].as_str().expect("identifier");
        assert!(is_ard_urn(identifier), "{identifier}");
        assert!(entry["displayName"].is_string(), "{entry}");
        assert!(entry["type"].is_string(), "{entry}");
        assert!(
            entry["url"].is_string() != entry["data"].is_object(),
            "{entry}"
        );
        if let Some(queries) = entry.get("representativeQueries") {
            let count = queries.as_array().expect("array").len();
            assert!((2..=5).contains(&count), "{entry}");
        }
        if let Some(metadata) = entry["metadata"].as_object() {
            assert!(metadata.values().all(|v| !v.is_object() && !v.is_array()));
        }
    }
    let forecast = entries
        .iter()
        .find(|e| e["identifier"] == "urn:air:example.com:forecast")
        .expect("the forecast agent");
    assert_eq!(forecast["type"], "application/a2a-agent-card+json");
    assert_eq!(
        forecast["url"],
        "http://registry.test/public/agents/resolve/com.example.forecast"
    );
    assert_eq!(
        forecast["representativeQueries"][0],
        "will it rain in Paris tomorrow"
    );
    assert_eq!(forecast["capabilities"], json!(["get_forecast"]));
    assert_eq!(forecast["metadata"]["packageName"], "com.example.forecast");
    assert!(forecast.get("trustManifest").is_none(), "not verified");
    // The registry's own agents are listed, but no trust manifest claims a domain for them:
    // `utility.registry` is a name no one proved.
    let operated: Vec<&Value> = entries
        .iter()
        .filter(|e| {
            e["metadata"]["packageName"]
                .as_str()
                .is_some_and(|p| p.starts_with("registry."))
        })
        .collect();
    assert!(operated.len() >= 3, "the hosted agents are listed");
    for entry in operated {
        assert!(entry.get("trustManifest").is_none(), "{entry}");
    }
    let server = entries
        .iter()
        .find(|e| e["identifier"] == "urn:air:acme.github.io:weather-mcp")
        .expect("the MCP server");
    assert_eq!(server["type"], "application/mcp-server-card+json");
    let server_url = server["url"].as_str().expect("url");
    let served = app
        .get(server_url.trim_start_matches("http://registry.test"))
        .await;
    assert_eq!(served.status, 200, "{}", served.text);
    assert!(
        !entries
            .iter()
            .any(|e| e["identifier"] == "urn:air:example.com:staged"),
        "STAGE is not public"
    );

    // The predecessor's path serves the same document; both are cacheable.
    let catalog = app.get("/.well-known/ai-catalog.json").await;
    assert_eq!(catalog.body, manifest.body);
    let etag = manifest.header("etag").expect("etag").to_owned();
    let again = revalidate(&app, "/.well-known/ard.json", &etag).await;
    assert_eq!(again.status, 304);
}

#[tokio::test]
async fn a_verified_publisher_gets_a_trust_manifest_bound_to_its_domain() {
    let app = TestApp::spawn().await.served().await;
    weather_catalogue(&app).await;
    let agent = app
        .state
        .registry
        .find("com.example.forecast")
        .await
        .expect("read")
        .expect("agent");
    app.state
        .registry
        .mark_domain_verified(&agent)
        .await
        .expect("verified");
    let entry = app.get("/ard/agents/urn:air:example.com:forecast").await;
    assert_eq!(entry.body["trustManifest"]["identity"], "example.com");
    let radar = app.get("/ard/agents/urn:air:example.com:radar").await;
    assert_eq!(
        radar.body["description"],
        "Weather radar images and \"storm\" alerts.\nC:\\radar\t→ ✓"
    );
    let found = search(&app, json!({"query": {"text": "radar storm"}})).await;
    assert_eq!(
        found.body["results"][0]["description"],
        radar.body["description"]
    );

    let trusted = search(
        &app,
        json!({"query": {"text": "weather", "filter": {"trustManifest.identity": "example.com"}}}),
    )
    .await;
    assert_eq!(
        identifiers(&trusted.body["results"]),
        ["urn:air:example.com:forecast"]
    );
}

#[tokio::test]
async fn html_pages_and_the_home_page_point_at_the_manifest() {
    let app = TestApp::spawn().await.served().await;
    let home = app.get("/").await;
    assert_eq!(
        home.header("link"),
        Some("</.well-known/ard.json>; rel=\"ard\"; type=\"application/json\"")
    );
    for path in ["/", "/playground", "/console"] {
        let page = app.get(path).await;
        assert!(
            page.text
                .contains(r#"<link rel="ard" href="/.well-known/ard.json""#),
            "{path}"
        );
    }
}

#[tokio::test]
async fn search_ranks_as_the_rest_search_does_with_scores_and_source() {
    let app = TestApp::spawn().await.served().await;
    weather_catalogue(&app).await;
    let ard = search(
        &app,
        json!({"query": {"text": "weather forecast"}, "pageSize": 20}),
    )
    .await;
    assert_eq!(ard.status, 200, "{}", ard.text);
    let results = ard.body["results"].as_array().expect("results");
    assert!(results.len() >= 3, "{}", ard.text);
    assert_eq!(results[0]["score"], 100);
    let mut last = 100;
    for result in results {
        let score = result["score"].as_u64().expect("an integer score");
        assert!(score <= last, "scores fall: {}", ard.text);
        last = score;
        assert_eq!(result["source"], "http://registry.test/ard");
        assert!(result.get("representativeQueries").is_none());
    }
    let rest = app
        .post(
            "/public/agents/search",
            None,
            json!({"query": "weather forecast", "limit": 20, "collapse": false}),
        )
        .await;
    let rest_ids: Vec<String> = rest.body["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|agent| agent["package_name"].as_str().expect("name").to_owned())
        .collect();
    let ard_packages: Vec<String> = results
        .iter()
        .map(|r| {
            r["metadata"]["packageName"]
                .as_str()
                .expect("package")
                .to_owned()
        })
        .collect();
    assert_eq!(ard_packages, rest_ids);
    assert!(ard.body.get("pageToken").is_none());
}

#[tokio::test]
async fn filters_are_or_within_a_key_and_across_keys_and_resolve_as_iris() {
    let app = TestApp::spawn().await.served().await;
    weather_catalogue(&app).await;
    let found = |body: Value| {
        let app = &app;
        async move {
            let response = search(app, body).await;
            assert_eq!(response.status, 200, "{}", response.text);
            let mut ids = identifiers(&response.body["results"]);
            ids.sort();
            ids
        }
    };
    let forecast = "urn:air:example.com:forecast";
    let radar = "urn:air:example.com:radar";
    let server = "urn:air:acme.github.io:weather-mcp";

    // OR within a key.
    assert_eq!(
        found(json!({"query": {"text": "weather", "filter": {"tags": ["alerts", "forecast"]}}}))
            .await,
        [server, forecast, radar]
    );
    // AND across keys.
    assert_eq!(
        found(json!({"query": {"text": "weather", "filter": {
            "tags": ["forecast"], "type": "application/a2a-agent-card+json"}}}))
        .await,
        [forecast]
    );
    // An array-valued term matches when any element does.
    assert_eq!(
        found(json!({"query": {"text": "weather", "filter": {"capabilities": ["storm_alerts"]}}}))
            .await,
        [radar]
    );
    // The same term through a prefix bound in @context, and as a full IRI.
    for filter in [
        json!({"query": {"@context": {"d": NS}, "text": "weather", "filter": {"d:capabilities": "storm_alerts"}}}),
        json!({"query": {"text": "weather", "filter": {format!("{NS}capabilities"): ["storm_alerts"]}}}),
        json!({"query": {"@context": ["https://agenticresourcediscovery.org/context/v1", {"skills": {"@id": format!("{NS}capabilities")}}],
                         "text": "weather", "filter": {"skills": ["STORM_ALERTS"]}}}),
    ] {
        assert_eq!(found(filter.clone()).await, [radar], "{filter}");
    }
    // Literal dot paths into metadata; publisher from the identifier.
    assert_eq!(
        found(json!({"query": {"text": "weather", "filter": {"metadata.category": "weather"}}}))
            .await,
        [forecast]
    );
    assert_eq!(
        found(json!({"query": {"text": "weather", "filter": {"publisher": ["acme.github.io"]}}}))
            .await,
        [server]
    );
    assert_eq!(
        found(json!({"query": {"text": "weather", "filter": {"type": "application/mcp-server-card+json"}}})).await,
        [server]
    );

    // What the registry does not index is refused, naming the key.
    for (filter, named) in [
        (json!({"color": ["red"]}), "color"),
        (json!({"x:tags": ["a"]}), "x:tags"),
        (
            json!({"https://example.org/vocab#tier": "gold"}),
            "example.org",
        ),
        (json!({"tags.first": "a"}), "tags.first"),
        (json!({"metadata": "a"}), "metadata"),
        (json!({"tags": []}), "tags"),
        (json!({"tags": [{"nested": 1}]}), "tags"),
    ] {
        let response = search(
            &app,
            json!({"query": {"text": "weather", "filter": filter}}),
        )
        .await;
        assert_ard_error(&response, 400, "INVALID_ARGUMENT");
        assert!(
            response.body["message"]
                .as_str()
                .expect("message")
                .contains(named),
            "{}",
            response.text
        );
    }
}

#[tokio::test]
async fn search_pages_to_the_end_without_duplicates_or_gaps() {
    let app = TestApp::spawn().await.served().await;
    let alice = app.token("alice", &[]).await;
    for i in 0..23 {
        let mut body = agent_body(&format!("com.example.weather{i}"));
        body["description"] = json!(format!(
            "Weather service number {i} with forecasts{}",
            " and more forecasts".repeat(i % 4)
        ));
        app.publish_live(&alice, body).await;
    }
    let whole = search(
        &app,
        json!({"query": {"text": "weather forecasts"}, "pageSize": 100}),
    )
    .await;
    let expected = identifiers(&whole.body["results"]);
    assert!(expected.len() >= 23, "{}", whole.text);

    let mut paged = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..20 {
        let mut body = json!({"query": {"text": "weather forecasts"}, "pageSize": 4});
        if let Some(token) = &token {
            body["pageToken"] = json!(token);
        }
        let page = search(&app, body).await;
        assert_eq!(page.status, 200, "{}", page.text);
        paged.extend(identifiers(&page.body["results"]));
        token = page.body["pageToken"].as_str().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    assert_eq!(paged, expected);

    // A token belongs to its query.
    let first = search(
        &app,
        json!({"query": {"text": "weather forecasts"}, "pageSize": 4}),
    )
    .await;
    let other = search(
        &app,
        json!({"query": {"text": "stocks"}, "pageToken": first.body["pageToken"]}),
    )
    .await;
    assert_ard_error(&other, 400, "INVALID_ARGUMENT");
}

#[tokio::test]
async fn explore_counts_every_match_with_the_search_cut_off() {
    let app = TestApp::spawn().await.served().await;
    weather_catalogue(&app).await;
    let all = search(&app, json!({"query": {"text": "weather"}, "pageSize": 100})).await;
    let matched = all.body["results"].as_array().expect("results").len();
    let explore = app
        .post(
            "/ard/explore",
            None,
            json!({"query": {"text": "weather"},
                   "resultType": {"facets": [{"field": "type"}, {"field": "tags", "limit": 1}, {"field": "publisher"}]}}),
        )
        .await;
    assert_eq!(explore.status, 200, "{}", explore.text);
    assert_eq!(explore.body["resultType"], "facets");
    let counted: u64 = explore.body["facets"]["type"]["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|bucket| bucket["count"].as_u64().expect("count"))
        .sum();
    assert_eq!(counted as usize, matched);
    let tags = &explore.body["facets"]["tags"];
    assert_eq!(tags["buckets"], json!([{"value": "weather", "count": 3}]));
    assert!(tags["otherCount"].as_u64().expect("otherCount") >= 2);

    // Without text or filter: the whole registry (the hosted agents included).
    let everything = app
        .post(
            "/ard/explore",
            None,
            json!({"resultType": {"facets": [{"field": "type"}]}}),
        )
        .await;
    let total: u64 = everything.body["facets"]["type"]["buckets"]
        .as_array()
        .expect("buckets")
        .iter()
        .map(|bucket| bucket["count"].as_u64().expect("count"))
        .sum();
    assert_eq!(total as usize, app.state.registry.indexed());

    for bad in [
        json!({"query": {"text": "weather"}}),
        json!({"resultType": {"facets": []}}),
        json!({"resultType": {"facets": [{"field": "color"}]}}),
        json!({"resultType": {"facets": [{"field": "type", "limit": "ten"}]}}),
    ] {
        let response = app.post("/ard/explore", None, bad).await;
        assert_ard_error(&response, 400, "INVALID_ARGUMENT");
    }
}

#[tokio::test]
async fn the_listing_filters_orders_and_pages() {
    let app = TestApp::spawn().await.served().await;
    weather_catalogue(&app).await;
    let mcp = app
        .get("/ard/agents?filter=type%20%3D%20%27application%2Fmcp-server-card%2Bjson%27")
        .await;
    assert_eq!(mcp.status, 200, "{}", mcp.text);
    assert_eq!(
        identifiers(&mcp.body["items"]),
        ["urn:air:acme.github.io:weather-mcp"]
    );
    assert_eq!(mcp.body["total"], 1);
    let by_publisher = app
        .get("/ard/agents?filter=publisherId%3Dexample.com%20AND%20displayName%3Dweather")
        .await;
    assert_eq!(
        identifiers(&by_publisher.body["items"]),
        ["urn:air:example.com:forecast", "urn:air:example.com:radar"]
    );

    // Paging by twos, newest change first, reaches every agent once.
    let total = app.state.registry.indexed();
    let mut seen = Vec::new();
    let mut token = String::new();
    loop {
        let page = app
            .get(&format!(
                "/ard/agents?orderBy=updatedAt%20DESC&pageSize=2&pageToken={token}"
            ))
            .await;
        assert_eq!(page.status, 200, "{}", page.text);
        seen.extend(identifiers(&page.body["items"]));
        match page.body["pageToken"].as_str() {
            Some(next) => token = next.to_owned(),
            None => break,
        }
    }
    assert_eq!(seen.len(), total);
    let mut distinct = seen.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), total);

    for bad in [
        "/ard/agents?filter=color%3Dred",
        "/ard/agents?filter=type",
        "/ard/agents?orderBy=score",
        "/ard/agents?pageSize=0",
        "/ard/agents?pageSize=ten",
        "/ard/agents?pageSize=9223372036854775808",
        "/ard/agents?pageToken=garbage",
        "/ard/agents?filter=createdAfter%3E%27yesterday%27",
    ] {
        assert_ard_error(&app.get(bad).await, 400, "INVALID_ARGUMENT");
    }
}

#[tokio::test]
async fn lookup_by_identifier_is_cacheable() {
    let app = TestApp::spawn().await.served().await;
    weather_catalogue(&app).await;
    let entry = app
        .get("/ard/agents/urn%3Aair%3Aexample.com%3Aforecast")
        .await;
    assert_eq!(entry.status, 200, "{}", entry.text);
    assert_eq!(entry.body["identifier"], "urn:air:example.com:forecast");
    assert_eq!(
        entry.body["representativeQueries"][1],
        "weekend weather for Oslo"
    );
    assert!(entry.header("cache-control").is_some());
    assert!(entry.header("last-modified").is_some());
    let etag = entry.header("etag").expect("etag");
    let again = revalidate(&app, "/ard/agents/urn:air:example.com:forecast", etag).await;
    assert_eq!(again.status, 304);

    assert_ard_error(
        &app.get("/ard/agents/urn%3Aair%3Aexample.com%3Anothing")
            .await,
        404,
        "NOT_FOUND",
    );
    for malformed in [
        "not-a-urn",
        "urn%3Aair%3Aexample.com",
        "urn%3Aair%3Aexa%20mple.com%3Ax",
        "%20urn%3Aair%3Aexample.com%3Aforecast",
    ] {
        assert_ard_error(
            &app.get(&format!("/ard/agents/{malformed}")).await,
            400,
            "INVALID_ARGUMENT",
        );
    }
}

#[tokio::test]
async fn bad_requests_get_ard_errors_never_a_server_error() {
    let app = TestApp::spawn().await.served().await;
    let raw = |body: &'static str, content_type: Option<&'static str>| {
        let app = &app;
        async move {
            app.raw(Method::POST, "/ard/search", None, content_type, body)
                .await
        }
    };
    assert_ard_error(
        &raw("{not json", Some("application/json")).await,
        400,
        "INVALID_ARGUMENT",
    );
    assert_ard_error(
        &raw("{}", Some("text/plain")).await,
        415,
        "UNSUPPORTED_MEDIA_TYPE",
    );
    assert_ard_error(
        &raw("[]", Some("application/json")).await,
        400,
        "INVALID_ARGUMENT",
    );
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let response = app
        .raw(
            Method::POST,
            "/ard/search",
            None,
            Some("application/json"),
            deep,
        )
        .await;
    assert_ard_error(&response, 400, "INVALID_ARGUMENT");
    let huge = format!(
        "{{\"query\": {{\"text\": \"{}\"}}}}",
        "a".repeat(2 * 1024 * 1024)
    );
    let response = app
        .raw(
            Method::POST,
            "/ard/search",
            None,
            Some("application/json"),
            huge,
        )
        .await;
    assert_ard_error(&response, 413, "PAYLOAD_TOO_LARGE");
    for body in [
        json!({}),
        json!({"query": {}}),
        json!({"query": {"text": "  "}}),
        json!({"query": {"text": 5}}),
        json!({"query": {"text": "a\u{0}b"}}),
        json!({"query": {"text": "a", "extra": 1}}),
        json!({"query": {"text": "a"}, "federation": "everywhere"}),
        json!({"query": {"text": "a"}, "pageSize": 0}),
        json!({"query": {"text": "a"}, "pageSize": 2.5}),
        json!({"query": {"text": "a"}, "pageToken": 7}),
        json!({"query": {"text": "a", "@context": "https://example.org/ctx"}}),
        json!({"query": {"text": "a"}, "unknown": true}),
    ] {
        let response = search(&app, body.clone()).await;
        assert_ard_error(&response, 400, "INVALID_ARGUMENT");
    }
    // A huge page size is the maximum.
    let response = search(&app, json!({"query": {"text": "wiki"}, "pageSize": 1e300})).await;
    assert_eq!(response.status, 200, "{}", response.text);
    let unknown = app.get("/ard/nothing").await;
    assert_ard_error(&unknown, 404, "NOT_FOUND");
}

async fn listener() -> (tokio::net::TcpListener, String) {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let address = listener.local_addr().expect("address");
    (listener, format!("http://{address}"))
}

/// An upstream that accepts connections and never answers.
async fn hanging_upstream() -> String {
    let (listener, url) = listener().await;
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = listener.accept().await {
            held.push(socket);
        }
    });
    format!("{url}/ard")
}

/// An upstream that answers 200 with something that is not an ARD search response.
async fn garbage_upstream() -> String {
    let (listener, url) = listener().await;
    let router = axum::Router::new().route(
        "/ard/search",
        axum::routing::post(|| async {
            (
                [(header::CONTENT_TYPE, "application/json")],
                r#"{"results": "lots", "junk": [1,2"#,
            )
        }),
    );
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("serve");
    });
    format!("{url}/ard")
}

/// A registry serving on loopback with these upstreams.
async fn federating(
    listener: tokio::net::TcpListener,
    url: &str,
    upstreams: &[String],
    budget_ms: u64,
) -> TestApp {
    let url = url.to_owned();
    let upstreams: Vec<url::Url> = upstreams
        .iter()
        .map(|u| u.parse().expect("upstream url"))
        .collect();
    let app = TestApp::spawn_with(move |config| {
        config.public_url = Some(url.parse().expect("url"));
        config.ard.ard_upstreams = upstreams;
        config.ard.ard_upstream_timeout_ms = budget_ms;
    })
    .await;
    app.served_on(listener)
}

async fn publish_weather(app: &TestApp, package: &str, description: &str) {
    let token = app.token("owner", &[]).await;
    let mut body = agent_body(package);
    body["name"] = json!(format!("Weather {package}"));
    body["description"] = json!(description);
    app.publish_live(&token, body).await;
}

#[tokio::test]
async fn federation_merges_good_upstreams_within_budget_despite_bad_ones() {
    let (up_listener, up_url) = listener().await;
    let upstream = federating(up_listener, &up_url, &[], 1500).await;
    publish_weather(
        &upstream,
        "org.upstream.weather",
        "Weather forecasts from upstream.",
    )
    .await;
    publish_weather(
        &upstream,
        "org.upstream.storms",
        "Weather storm warnings from upstream.",
    )
    .await;

    let (listener, url) = listener().await;
    let budget = 800;
    let upstreams = [
        format!("{up_url}/ard"),
        hanging_upstream().await,
        garbage_upstream().await,
    ];
    let app = federating(listener, &url, &upstreams, budget).await;
    publish_weather(&app, "com.local.weather", "Weather forecasts made here.").await;

    let started = Instant::now();
    let answer = search(
        &app,
        json!({"query": {"text": "weather forecasts"}, "pageSize": 20}),
    )
    .await;
    let took = started.elapsed();
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(
        took <= Duration::from_millis(budget * 110 / 100),
        "answered in {took:?}, the budget is {budget} ms"
    );
    let results = answer.body["results"].as_array().expect("results");
    let from = |identifier: &str| {
        results
            .iter()
            .find(|r| r["identifier"] == identifier)
            .map(|r| r["source"].as_str().expect("source").to_owned())
    };
    assert_eq!(
        from("urn:air:local.com:weather"),
        Some(format!("{url}/ard"))
    );
    assert_eq!(
        from("urn:air:upstream.org:weather"),
        Some(format!("{up_url}/ard"))
    );
    assert_eq!(
        from("urn:air:upstream.org:storms"),
        Some(format!("{up_url}/ard"))
    );
    let unanswered: Vec<&str> = answer.body["unanswered"]
        .as_array()
        .expect("unanswered")
        .iter()
        .map(|u| u["source"].as_str().expect("source"))
        .collect();
    assert_eq!(unanswered, [upstreams[1].as_str(), upstreams[2].as_str()]);
    assert!(answer.body.get("referrals").is_none());

    // `none`: local only; `referrals`: local plus the upstreams named.
    let none = search(
        &app,
        json!({"query": {"text": "weather"}, "federation": "none"}),
    )
    .await;
    assert_eq!(
        identifiers(&none.body["results"]),
        ["urn:air:local.com:weather"]
    );
    let referrals = search(
        &app,
        json!({"query": {"text": "weather"}, "federation": "referrals"}),
    )
    .await;
    assert_eq!(
        identifiers(&referrals.body["results"]),
        ["urn:air:local.com:weather"]
    );
    let named: Vec<&str> = referrals.body["referrals"]
        .as_array()
        .expect("referrals")
        .iter()
        .map(|r| {
            assert_eq!(r["type"], "application/ai-registry+json");
            r["url"].as_str().expect("url")
        })
        .collect();
    assert_eq!(
        named,
        upstreams
            .iter()
            .map(|u| format!("{u}/search"))
            .collect::<Vec<_>>()
    );

    // The upstream's counters are in the metrics.
    let metrics = app.get("/metrics").await;
    assert!(
        metrics.text.contains("ard_upstream_requests_total"),
        "{}",
        metrics.text
    );
    assert!(metrics.text.contains("ard_upstream_failures_total"));
}

#[tokio::test]
async fn federated_pages_merge_every_source_once() {
    let (up_listener, up_url) = listener().await;
    let upstream = federating(up_listener, &up_url, &[], 1500).await;
    let (listener, url) = listener().await;
    let app = federating(listener, &url, &[format!("{up_url}/ard")], 1500).await;
    for i in 0..7 {
        publish_weather(
            &upstream,
            &format!("org.upstream.w{i}"),
            &format!("Weather forecasts upstream {}", "rain ".repeat(i)),
        )
        .await;
        publish_weather(
            &app,
            &format!("com.local.w{i}"),
            &format!("Weather forecasts local {}", "sun ".repeat(i)),
        )
        .await;
    }
    // The same agent in both registries: the local entry wins.
    publish_weather(
        &upstream,
        "com.local.w0",
        "Weather forecasts, a copy upstream.",
    )
    .await;

    let mut seen = Vec::new();
    let mut token: Option<String> = None;
    for _ in 0..20 {
        let mut body = json!({"query": {"text": "weather forecasts"}, "pageSize": 3});
        if let Some(token) = &token {
            body["pageToken"] = json!(token);
        }
        let page = search(&app, body).await;
        assert_eq!(page.status, 200, "{}", page.text);
        for result in page.body["results"].as_array().expect("results") {
            seen.push((
                result["identifier"].as_str().expect("id").to_owned(),
                result["source"].as_str().expect("source").to_owned(),
            ));
        }
        token = page.body["pageToken"].as_str().map(str::to_owned);
        if token.is_none() {
            break;
        }
    }
    let ids: Vec<&str> = seen.iter().map(|(id, _)| id.as_str()).collect();
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(distinct.len(), ids.len(), "no duplicates: {ids:?}");
    assert_eq!(ids.len(), 14, "every agent of both: {ids:?}");
    let copy = seen
        .iter()
        .find(|(id, _)| id == "urn:air:local.com:w0")
        .expect("the shared agent");
    assert_eq!(copy.1, format!("{url}/ard"), "the local entry wins");
}

#[tokio::test]
async fn a_federation_loop_between_two_registries_ends() {
    let (a_listener, a_url) = listener().await;
    let (b_listener, b_url) = listener().await;
    let a = federating(a_listener, &a_url, &[format!("{b_url}/ard")], 1500).await;
    let b = federating(b_listener, &b_url, &[format!("{a_url}/ard")], 1500).await;
    publish_weather(&a, "com.alpha.weather", "Weather from alpha.").await;
    publish_weather(&b, "com.beta.weather", "Weather from beta.").await;

    let started = Instant::now();
    let answer = search(&a, json!({"query": {"text": "weather"}})).await;
    assert_eq!(answer.status, 200, "{}", answer.text);
    assert!(started.elapsed() < Duration::from_millis(1500), "no loop");
    let mut ids = identifiers(&answer.body["results"]);
    ids.sort();
    assert_eq!(
        ids,
        ["urn:air:alpha.com:weather", "urn:air:beta.com:weather"]
    );
    assert!(answer.body.get("unanswered").is_none(), "{}", answer.text);

    // A request that came through federation is answered locally.
    let direct = a
        .send(
            Request::builder()
                .method(Method::POST)
                .uri("/ard/search")
                .header(header::CONTENT_TYPE, "application/json")
                .header("ard-federated-by", "urn:air:elsewhere.org:registry")
                .body(axum::body::Body::from(
                    json!({"query": {"text": "weather"}}).to_string(),
                ))
                .expect("request"),
        )
        .await;
    assert_eq!(
        identifiers(&direct.body["results"]),
        ["urn:air:alpha.com:weather"]
    );
}

#[tokio::test]
async fn the_a2a_skill_answers_ard_entries_when_asked_with_an_ard_query() {
    let app = TestApp::spawn().await.served().await;
    weather_catalogue(&app).await;
    let token = app.token("caller", &[]).await;
    let send = |data: Value| {
        let app = &app;
        let token = token.clone();
        async move {
            app.post(
                "/a2a/v1",
                Some(&token),
                json!({"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
                    "messageId": "m1", "role": "ROLE_USER",
                    "parts": [{"data": data, "mediaType": "application/json"}],
                }}}),
            )
            .await
        }
    };
    let ard = send(
        json!({"query": {"text": "weather", "filter": {"tags": "alerts"}}, "federation": "none"}),
    )
    .await;
    let data = &ard.body["result"]["message"]["parts"][0]["data"];
    assert_eq!(
        identifiers(&data["results"]),
        ["urn:air:example.com:radar"],
        "{}",
        ard.text
    );
    assert_eq!(data["results"][0]["source"], "http://registry.test/ard");

    // Today's answer is unchanged for today's requests.
    let plain = send(json!({"query": "weather"})).await;
    let data = &plain.body["result"]["message"]["parts"][0]["data"];
    assert!(data["agents"].is_array(), "{}", plain.text);

    let bad = send(json!({"query": {"text": "weather", "filter": {"color": "red"}}})).await;
    assert!(bad.body["error"].is_object(), "{}", bad.text);

    let legacy = app
        .post(
            "/a2a/message",
            None,
            json!({"action": "search", "params": {"query": {"text": "weather radar"}, "pageSize": 1}}),
        )
        .await;
    assert_eq!(legacy.status, 200, "{}", legacy.text);
    assert_eq!(legacy.body["results"].as_array().map(Vec::len), Some(1));
}
