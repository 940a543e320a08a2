//! The AI Catalog path: the registry's ARD manifest (every ACTIVE agent as an entry, paged by
//! nested catalogues, cacheable), and publishing from a catalogue.

use agent_registry::registry::ImportMode;
use axum::body::Body;
use axum::http::{Request, header};
use serde_json::{Value, json};

use crate::helpers::{TestApp, agent_body};

const PATH: &str = "/.well-known/ai-catalog.json";

/// The package names of the agents a page lists (the registry's own entry and the next page's
/// have none).
fn identifiers(catalog: &Value) -> Vec<String> {
    catalog["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .filter_map(|entry| entry["metadata"]["packageName"].as_str())
        .map(str::to_owned)
        .collect()
}

#[tokio::test]
async fn the_catalogue_lists_each_active_agent_by_package_name_with_its_card() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut weather = agent_body("com.example.weather");
    weather["url"] = json!("https://weather.example.com/a2a");
    app.publish_live(&alice, weather).await;
    app.publish(&alice, agent_body("com.example.staged")).await;

    let response = app.get(PATH).await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let catalog = &response.body;
    assert_eq!(catalog["specVersion"], "1.0");
    assert_eq!(catalog["host"]["displayName"], "Agent Registry");
    let listed = identifiers(catalog);
    assert!(
        listed.contains(&"com.example.weather".to_owned()),
        "{listed:?}"
    );
    assert!(
        listed.contains(&"registry.utility.wiki".to_owned()),
        "{listed:?}"
    );
    assert!(
        !listed.contains(&"com.example.staged".to_owned()),
        "STAGE is not public"
    );
    let mut sorted = listed.clone();
    sorted.sort();
    // The agents, and the registry's own entry first.
    assert_eq!(
        catalog["entries"].as_array().map(Vec::len),
        Some(listed.len() + 1)
    );
    assert_eq!(
        catalog["entries"][0]["type"],
        "application/ai-registry+json"
    );

    let weather = catalog["entries"]
        .as_array()
        .expect("entries")
        .iter()
        .find(|entry| entry["identifier"] == "urn:air:example.com:weather")
        .expect("the weather agent");
    assert_eq!(
        weather["url"],
        "http://registry.test/public/agents/resolve/com.example.weather"
    );
    assert!(weather["updatedAt"].is_string());
    assert!(weather["description"].is_string());
    let card_path = weather["url"]
        .as_str()
        .expect("url")
        .trim_start_matches("http://registry.test");
    let card = app.get(card_path).await;
    assert_eq!(card.status, 200);
    assert!(card.body["signatures"].is_array());
}

#[tokio::test]
async fn the_catalogue_is_cacheable() {
    let app = TestApp::spawn().await;
    let first = app.get(PATH).await;
    let etag = first.header("etag").expect("etag").to_owned();
    assert!(
        first
            .header("cache-control")
            .is_some_and(|value| value.starts_with("public, max-age=")),
    );
    let request = Request::builder()
        .uri(PATH)
        .header(header::IF_NONE_MATCH, &etag)
        .body(Body::empty())
        .expect("request");
    assert_eq!(app.send(request).await.status, 304);

    let alice = app.token("alice", &[]).await;
    app.publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let after = app.get(PATH).await;
    assert_ne!(after.header("etag"), Some(etag.as_str()));
}

#[tokio::test]
async fn a_large_catalogue_pages_by_nested_catalogues_without_gaps_or_repeats() {
    let app = TestApp::spawn_with(|config| config.ai_catalog_page_size = 10).await;
    let count = 25;
    for i in 0..count {
        let body = json!({
            "package_name": format!("com.example.agent{i:02}"),
            "name": format!("Agent {i:02}"),
            "description": "One of many.",
        });
        let draft = agent_registry::domain::AgentDraft::parse(&body).expect("draft");
        app.state
            .registry
            .import(
                draft,
                "alice",
                ImportMode {
                    update: false,
                    go_live: true,
                },
            )
            .await
            .expect("import");
    }

    let mut seen = Vec::new();
    let mut path = PATH.to_owned();
    let mut pages = 0;
    loop {
        let page = app.get(&path).await;
        assert_eq!(page.status, 200, "{path}: {}", page.text);
        pages += 1;
        seen.extend(identifiers(&page.body));
        let nested: Vec<&Value> = page.body["entries"]
            .as_array()
            .expect("entries")
            .iter()
            .filter(|entry| entry["type"] == "application/ai-catalog+json")
            .collect();
        match nested.as_slice() {
            [] => break,
            [next] => {
                path = next["url"]
                    .as_str()
                    .expect("url")
                    .trim_start_matches("http://registry.test")
                    .to_owned();
            }
            more => panic!("one next page at most: {more:?}"),
        }
    }
    // 25 agents and 3 hosted agents, 10 a page.
    assert_eq!(pages, 3);
    let ours: Vec<&String> = seen
        .iter()
        .filter(|id| id.starts_with("com.example.agent"))
        .collect();
    assert_eq!(ours.len(), count, "every agent once");
    let distinct: std::collections::BTreeSet<&String> = seen.iter().collect();
    assert_eq!(distinct.len(), seen.len(), "no agent twice");

    let bad = app.get(&format!("{PATH}?cursor=not-a-cursor")).await;
    bad.assert_problem(400, "invalid_parameter");
}

#[tokio::test]
async fn publishing_from_a_catalogue_publishes_each_card_entry_and_reports_each_result() {
    let fake = crate::fakes::Fake::start().await;
    let app = TestApp::spawn_with(|config| fake.configure(config)).await;
    let alice = app.token("alice", &["agents:write"]).await;
    let inline = crate::fakes::weather_card("https://finance.acme.test/a2a/v1");
    let catalog_url = fake.set_document(
        "catalog.json",
        json!({
            "specVersion": "1.0",
            "host": {"displayName": "Acme"},
            "entries": [
                {"identifier": "com.example.remote", "type": "application/a2a-agent-card+json",
                 "url": "/cards/weather.json"},
                {"identifier": "urn:air:acme-corp.com:a2a:finance", "type": "application/a2a-agent-card+json",
                 "data": inline},
                {"identifier": "finance-agent", "type": "application/a2a-agent-card+json",
                 "url": "/cards/weather.json"},
                {"identifier": "com.example.gone", "type": "application/a2a-agent-card+json",
                 "url": "/docs/missing.json"},
                {"identifier": "urn:air:acme-corp.com:catalog:more", "type": "application/ai-catalog+json",
                 "url": "/docs/more.json"},
                {"identifier": "urn:air:acme-corp.com:mcp:weather", "type": "application/mcp-server-card+json",
                 "url": "/docs/server-card.json"}
            ]
        }),
    );

    let response = app
        .request(
            axum::http::Method::POST,
            "/api/agents/publish",
            Some(&alice),
            Some(json!({"manifest_url": catalog_url})),
        )
        .await;

    assert_eq!(response.status, 200, "{}", response.text);
    let body = &response.body;
    assert_eq!(
        (&body["created"], &body["rejected"], &body["skipped"]),
        (&json!(2), &json!(2), &json!(2)),
        "{body}"
    );
    let statuses: Vec<&str> = body["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|result| result["status"].as_str().expect("status"))
        .collect();
    assert_eq!(
        statuses,
        [
            "created", "created", "rejected", "rejected", "skipped", "skipped"
        ]
    );
    let results = body["results"].as_array().expect("results");
    assert_eq!(results[0]["agent"]["state"], "STAGE");
    assert_eq!(results[0]["agent"]["name"], "Remote Weather");
    assert_eq!(
        results[1]["agent"]["package_name"],
        "com.acme-corp.a2a.finance"
    );
    assert_eq!(
        results[1]["agent"]["identifier"],
        "urn:air:acme-corp.com:a2a:finance"
    );
    assert_eq!(results[2]["errors"][0]["field"], "identifier");
    assert!(
        results[3]["errors"][0]["message"].is_string(),
        "{}",
        results[3]
    );
    assert!(
        results[4]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("nested"))
    );

    // Updating one agent from a catalogue URL makes no sense.
    let id = results[0]["agent"]["id"].as_str().expect("id");
    let update = app
        .request(
            axum::http::Method::PUT,
            &format!("/api/agents/{id}"),
            Some(&alice),
            Some(json!({"package_name": "com.example.remote", "manifest_url": catalog_url})),
        )
        .await;
    update.assert_problem(422, "validation_failed");
}
