//! Every card the registry serves parses as an AgentCard of the official Rust A2A crate
//! (`a2a-lf`, imported as `a2a`): the registry's own, the hosted agents', a card built for a
//! published agent, and a full card published as is.

use serde_json::{Value, json};

use crate::fakes::weather_card;
use crate::helpers::{TestApp, agent_body};

#[track_caller]
fn parse_card(path: &str, body: &Value) -> a2a::AgentCard {
    serde_json::from_value(body.clone())
        .unwrap_or_else(|err| panic!("{path} is not an a2a-lf AgentCard: {err}\n{body:#}"))
}

#[tokio::test]
async fn every_card_the_registry_serves_parses_with_the_official_rust_crate() {
    let app = TestApp::spawn().await;
    let token = app.token("alice", &["agents:write"]).await;
    let mut built = agent_body("com.example.built");
    built["url"] = json!("https://built.example.com/a2a/v1");
    built["version"] = json!("1.2.0");
    built["tags"] = json!(["forecast"]);
    built["capabilities"] = json!([
        {"name": "get_forecast", "description": "Forecast for a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "ping"}
    ]);
    built["payment"] = json!({"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]});
    app.publish_live(&token, built).await;
    app.publish_live(
        &token,
        json!({"package_name": "com.example.carded",
               "card": weather_card("https://weather.example.com/a2a/v1")}),
    )
    .await;

    let paths = [
        "/.well-known/agent-card.json",
        "/a2a/utility/wiki/.well-known/agent-card.json",
        "/a2a/utility/finance/.well-known/agent-card.json",
        "/a2a/utility/reader/.well-known/agent-card.json",
        "/public/agents/resolve/registry.utility.wiki",
        "/public/agents/resolve/com.example.built",
        "/public/agents/resolve/com.example.carded",
    ];
    for path in paths {
        let response = app.get(path).await;
        assert_eq!(response.status, 200, "{path}: {}", response.text);

        let card = parse_card(path, &response.body);

        assert!(!card.name.is_empty(), "{path}");
        assert!(!card.skills.is_empty(), "{path} has skills");
        let interface = card.supported_interfaces.first().expect("an interface");
        assert!(interface.url.starts_with("http"), "{path}");
        let reserialised = serde_json::to_value(&card).expect("serialises");
        assert_eq!(
            reserialised["supportedInterfaces"][0]["protocolBinding"], "JSONRPC",
            "{path}"
        );
        assert_eq!(
            reserialised["supportedInterfaces"][0]["protocolVersion"], "1.0",
            "{path}"
        );
    }
}

#[tokio::test]
async fn a_hosted_agents_card_reads_back_with_its_skills_and_bearer_security() {
    let app = TestApp::spawn().await;

    let response = app
        .get("/a2a/utility/wiki/.well-known/agent-card.json")
        .await;
    let card = parse_card("wiki", &response.body);

    let skills: Vec<&str> = card.skills.iter().map(|skill| skill.id.as_str()).collect();
    assert_eq!(skills, ["search_page", "get_summary"]);
    assert_eq!(
        card.supported_interfaces[0].url,
        "http://registry.test/a2a/utility/wiki/v1"
    );
    let schemes = card.security_schemes.expect("security schemes");
    assert!(matches!(
        schemes.get("bearer"),
        Some(a2a::SecurityScheme::HttpAuth(scheme)) if scheme.scheme == "Bearer"
    ));
}
