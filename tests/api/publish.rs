//! `POST /api/agents/publish` and payment normalisation.

use axum::http::Method;
use serde_json::{Value, json};

use crate::helpers::{TestApp, WRITABLE_FIELDS, agent_body, error_fields, str_at};

/// Every writable field of an agent record.
fn weather_body() -> Value {
    json!({
        "package_name": "com.example.weather",
        "name": "Weather Agent",
        "description": "Forecasts and current conditions for any city.",
        "version": "1.2.0",
        "manifest_url": "https://weather.example.com/.well-known/agent-card.json",
        "url": "https://weather.example.com/a2a/v1",
        "target": "Business",
        "category": "Weather",
        "tags": ["forecast", "realtime"],
        "capabilities": [
            {"name": "get_forecast", "description": "Forecast for a city",
             "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}
        ],
        "payment": {"model": "paid", "direction": "inbound", "protocols": ["x402"],
                    "rails": [{"network": "base", "asset": "usdc"}]}
    })
}

/// Replace the volatile fields of a record with fixed strings, for snapshots.
fn redact(mut record: Value) -> Value {
    for key in [
        "id",
        "created_at",
        "updated_at",
        "published_at",
        "verification_token",
    ] {
        if record.get(key).is_some_and(|value| !value.is_null()) {
            record[key] = json!(format!("[{key}]"));
        }
    }
    if let Some(scanned_at) = record.pointer_mut("/security/scanned_at") {
        *scanned_at = json!("[scanned_at]");
    }
    record
}

#[tokio::test]
async fn publishing_returns_201_with_a_location_and_the_revision_as_etag() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let response = app
        .post("/api/agents/publish", Some(&alice), weather_body())
        .await;

    assert_eq!(response.status, 201, "{}", response.text);
    let id = str_at(&response.body, "/id");
    assert_eq!(
        response.header("location"),
        Some(format!("http://registry.test/api/agents/{id}").as_str())
    );
    let revision = response.body["revision"].as_i64().expect("revision");
    assert_eq!(
        response.header("etag"),
        Some(format!("\"{revision}\"").as_str())
    );
    assert_eq!(
        response.header("content-type"),
        Some("application/json"),
        "a record is plain JSON"
    );
}

#[tokio::test]
async fn a_published_agent_starts_in_stage_owned_by_the_token_owner() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let record = app.publish(&alice, weather_body()).await;

    assert!(str_at(&record, "/id").starts_with("agt_"), "{record}");
    assert_eq!(record["state"], "STAGE");
    assert_eq!(record["owner"], "alice");
    assert_eq!(record["verification_level"], "unverified");
    assert!(record.get("published_at").is_none(), "{record}");
    assert!(
        str_at(&record, "/verification_token").len() > 16,
        "the owner sees the verification token"
    );
    for timestamp in ["/created_at", "/updated_at"] {
        let text = str_at(&record, timestamp);
        assert!(
            time::OffsetDateTime::parse(text, &time::format_description::well_known::Rfc3339)
                .is_ok()
                && text.ends_with('Z'),
            "{timestamp} is RFC 3339 UTC: {text}"
        );
    }
}

#[tokio::test]
async fn the_published_record_keeps_every_writable_field() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let record = app.publish(&alice, weather_body()).await;

    let sent = weather_body();
    for key in WRITABLE_FIELDS {
        assert_eq!(record[key], sent[key], "{key}");
    }
}

#[tokio::test]
async fn a_live_agent_record_has_the_contract_shape() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let published = app.publish_live(&alice, weather_body()).await;

    let response = app
        .get(&format!("/public/agents/{}", str_at(&published, "/id")))
        .await;

    assert_eq!(response.status, 200, "{}", response.text);
    insta::assert_json_snapshot!("public_agent_record", redact(response.body));
}

#[tokio::test]
async fn package_names_are_stored_lowercase() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let record = app.publish(&alice, agent_body("Com.Example.Weather")).await;

    assert_eq!(record["package_name"], "com.example.weather");
}

#[tokio::test]
async fn publishing_a_taken_package_name_is_a_conflict() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let bob = app.token("bob", &[]).await;
    app.publish(&alice, agent_body("com.example.weather")).await;

    for (token, name) in [
        (&alice, "com.example.weather"),
        (&bob, "com.example.weather"),
        (&bob, "COM.Example.WEATHER"),
    ] {
        app.post("/api/agents/publish", Some(token), agent_body(name))
            .await
            .assert_problem(409, "conflict");
    }
}

#[tokio::test]
async fn invalid_package_names_are_validation_errors() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let too_long = format!("com.{}", "a".repeat(197));
    let seventeen_labels = vec!["a"; 17].join(".");

    for name in [
        "weather",
        "com..weather",
        ".com.weather",
        "com.weather.",
        "com.-weather",
        "com.weather-",
        "com.wea ther",
        "com.exämple.weather",
        "com.example/weather",
        "",
        too_long.as_str(),
        seventeen_labels.as_str(),
    ] {
        let mut body = agent_body(name);
        body["name"] = json!("Weather");
        let response = app.post("/api/agents/publish", Some(&alice), body).await;
        response.assert_problem(422, "validation_failed");
        assert_eq!(error_fields(&response), ["package_name"], "{name}");
    }
}

#[tokio::test]
async fn the_registry_namespace_is_reserved() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let response = app
        .try_publish(&alice, agent_body("registry.example.agent"))
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["package_name"]);
}

#[tokio::test]
async fn the_size_limits_of_a_publish_body_are_enforced() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let capability = |i: usize| json!({"name": format!("cap_{i}")});
    let cases = [
        ("description", json!("d".repeat(2_001)), "description"),
        (
            "tags",
            json!((0..33).map(|i| format!("t{i}")).collect::<Vec<_>>()),
            "tags",
        ),
        ("tags", json!(["t".repeat(41)]), "tags[0]"),
        (
            "capabilities",
            json!((0..65).map(capability).collect::<Vec<_>>()),
            "capabilities",
        ),
        (
            "card",
            json!({"name": "Big", "description": "x".repeat(64 * 1024)}),
            "card",
        ),
    ];

    for (key, value, field) in cases {
        let mut body = agent_body("com.example.big");
        body[key] = value;
        let response = app.post("/api/agents/publish", Some(&alice), body).await;
        response.assert_problem(422, "validation_failed");
        assert_eq!(error_fields(&response), [field], "{key}");
    }
}

#[tokio::test]
async fn the_size_limits_themselves_are_accepted() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.big");
    body["description"] = json!("d".repeat(2_000));
    body["tags"] = json!((0..32).map(|i| format!("{i:0>40}")).collect::<Vec<_>>());
    body["capabilities"] = json!(
        (0..64)
            .map(|i| json!({"name": format!("cap_{i}")}))
            .collect::<Vec<_>>()
    );

    let record = app.publish(&alice, body).await;

    assert_eq!(record["tags"].as_array().map(Vec::len), Some(32));
    assert_eq!(record["capabilities"].as_array().map(Vec::len), Some(64));
}

#[tokio::test]
async fn payment_terms_are_stored_canonical() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.pay");
    body["payment"] = json!({
        "model": "PAID",
        "protocols": ["X402", "lsat", "bolt11", "x402"],
        "rails": [
            "Nano:XNO",
            {"network": "eip155:8453", "token": "USDCe", "protocol": "x402", "caip2": "eip155:8453"},
            {"network": "lightning", "asset": "sats", "protocol": "BOLT11"},
            "nano:xno",
            {"network": "polygon", "asset": "usd₮"},
            "eip155:1:usdc"
        ]
    });

    let record = app.publish(&alice, body).await;

    assert_eq!(
        record["payment"],
        json!({
            "model": "paid",
            "direction": "inbound",
            "protocols": ["l402", "lightning-invoice", "x402"],
            "rails": [
                {"network": "base", "asset": "usdc.e", "protocol": "x402", "caip2": "eip155:8453"},
                {"network": "ethereum", "asset": "usdc"},
                {"network": "lightning", "asset": "btc", "protocol": "lightning-invoice"},
                {"network": "nano", "asset": "xno"},
                {"network": "polygon", "asset": "usdt"}
            ]
        })
    );
}

#[tokio::test]
async fn a_free_agent_without_a_direction_has_none() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.free");
    body["payment"] = json!({"model": "free"});

    let record = app.publish(&alice, body).await;

    assert_eq!(
        record["payment"],
        json!({"model": "free", "protocols": [], "rails": []})
    );
}

#[tokio::test]
async fn an_agent_without_payment_terms_has_no_payment_object() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let record = app.publish(&alice, agent_body("com.example.unknown")).await;

    assert!(record.get("payment").is_none(), "{record}");
}

#[tokio::test]
async fn invalid_payment_terms_name_every_bad_field() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.pay");
    body["payment"] = json!({
        "model": "paid",
        "direction": "outbound",
        "protocols": ["x402", "Not A Slug"],
        "rails": ["base:", ":usdc", "a:b:c", "base", {"network": "base", "asset": "usdc", "protocol": "stripe"}, 7]
    });

    let response = app.post("/api/agents/publish", Some(&alice), body).await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(
        error_fields(&response),
        [
            "payment.direction",
            "payment.protocols[1]",
            "payment.rails[0]",
            "payment.rails[1]",
            "payment.rails[2]",
            "payment.rails[3]",
            "payment.rails[5]",
        ]
    );
}

#[tokio::test]
async fn a_rail_protocol_must_be_one_of_the_agents_protocols() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.pay");
    body["payment"] = json!({
        "model": "paid",
        "protocols": ["x402"],
        "rails": [{"network": "base", "asset": "usdc", "protocol": "stripe"}]
    });

    let response = app.post("/api/agents/publish", Some(&alice), body).await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["payment.rails[0].protocol"]);
}

fn weather_card() -> Value {
    json!({
        "name": "Card Weather",
        "description": "Weather from a card.",
        "version": "3.1.4",
        "supportedInterfaces": [
            {"url": "https://card.example.com/a2a/v1", "protocolBinding": "JSONRPC", "protocolVersion": "1.0"},
            {"url": "https://card.example.com/other", "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
        ],
        "capabilities": {
            "streaming": false,
            "extensions": [{
                "uri": "https://a2a-registry.org/extensions/registry/v1",
                "params": {"payment": {"model": "paid", "protocols": ["x402"],
                                       "rails": [{"network": "base", "token": "USDC", "protocol": "x402"}]}}
            }]
        },
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [
            {"id": "get_forecast", "name": "Get forecast", "description": "Forecast for a city", "tags": ["weather"]},
            {"id": "get_alerts", "name": "Get alerts", "description": "Severe weather alerts", "tags": []}
        ]
    })
}

#[tokio::test]
async fn publishing_with_a_card_fills_missing_fields_from_it() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let record = app
        .publish(
            &alice,
            json!({"package_name": "com.example.carded", "card": weather_card()}),
        )
        .await;

    assert_eq!(record["name"], "Card Weather");
    assert_eq!(record["description"], "Weather from a card.");
    assert_eq!(record["version"], "3.1.4");
    assert_eq!(record["url"], "https://card.example.com/a2a/v1");
    assert_eq!(
        record["capabilities"],
        json!([
            {"name": "get_forecast", "description": "Forecast for a city"},
            {"name": "get_alerts", "description": "Severe weather alerts"}
        ])
    );
    assert_eq!(
        record["payment"],
        json!({"model": "paid", "direction": "inbound", "protocols": ["x402"],
               "rails": [{"network": "base", "asset": "usdc", "protocol": "x402"}]})
    );
    assert_eq!(record["has_card"], true);
}

#[tokio::test]
async fn fields_in_the_body_win_over_the_card() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let record = app
        .publish(
            &alice,
            json!({
                "package_name": "com.example.carded",
                "name": "Body Weather",
                "url": "https://body.example.com/a2a/v1",
                "payment": {"model": "free"},
                "card": weather_card()
            }),
        )
        .await;

    assert_eq!(record["name"], "Body Weather");
    assert_eq!(record["description"], "Weather from a card.");
    assert_eq!(record["url"], "https://body.example.com/a2a/v1");
    assert_eq!(record["payment"]["model"], "free");
}

#[tokio::test]
async fn a_card_that_lacks_required_fields_still_fails_validation() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let response = app
        .try_publish(
            &alice,
            json!({"package_name": "com.example.carded", "card": {"name": "Only a name"}}),
        )
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["description"]);
}

#[tokio::test]
async fn how_to_reach_an_agent_is_typed_and_round_trips() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.reachable");
    body["url"] = json!(null);
    body["interfaces"] = json!([
        {"url": "https://reach.example.com/a2a/v1", "protocolBinding": "jsonrpc"},
        {"url": "https://reach.example.com/a2a/grpc", "protocolBinding": "GRPC", "protocolVersion": "1.0"}
    ]);
    body["remotes"] = json!([{"type": "streamable-http", "url": "https://mcp.example.com/mcp"}]);
    body["packages"] = json!([{"registryType": "npm", "identifier": "@example/mcp", "runtimeHint": "npx",
        "environmentVariables": [{"name": "EXAMPLE_TOKEN", "isSecret": true}]}]);
    body["repository"] = json!({"url": "https://github.com/example/mcp", "source": "github"});

    let record = app.publish_live(&alice, body).await;

    assert_eq!(
        record["url"], "https://reach.example.com/a2a/v1",
        "the first interface"
    );
    assert_eq!(record["interfaces"][0]["protocolBinding"], "JSONRPC");
    assert_eq!(record["interfaces"][1]["protocolBinding"], "GRPC");
    assert_eq!(record["remotes"][0]["type"], "streamable-http");
    assert_eq!(record["packages"][0]["registry_type"], "npm");
    assert_eq!(record["packages"][0]["transport"]["type"], "stdio");
    assert_eq!(
        record["packages"][0]["environment_variables"][0]["is_secret"],
        true
    );
    assert_eq!(record["repository"]["source"], "github");
    let card = app
        .get("/public/agents/resolve/com.example.reachable")
        .await;
    let interfaces = card.body["supportedInterfaces"]
        .as_array()
        .expect("interfaces");
    assert_eq!(interfaces.len(), 2);
    assert_eq!(interfaces[1]["protocolBinding"], "GRPC");

    // A url alone is the one A2A interface.
    let only_url = app
        .publish_live(&alice, agent_body("com.example.plain"))
        .await;
    assert_eq!(only_url["interfaces"][0]["url"], only_url["url"]);
    assert!(only_url.get("remotes").is_none());

    // Every bad field at once.
    let mut bad = agent_body("com.example.bad");
    bad["remotes"] = json!([{"type": "websocket", "url": "ftp://x"}]);
    bad["packages"] = json!([{"registry_type": "apt"}]);
    bad["repository"] = json!("github.com/x");
    let response = app
        .request(Method::POST, "/api/agents/publish", Some(&alice), Some(bad))
        .await;
    response.assert_problem(422, "validation_failed");
    let fields = error_fields(&response);
    for field in [
        "remotes[0].type",
        "remotes[0].url",
        "packages[0].registry_type",
        "packages[0].identifier",
        "repository",
    ] {
        assert!(fields.contains(&field.to_owned()), "{field}: {fields:?}");
    }
}
