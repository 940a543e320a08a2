//! Agent cards: the registry's own in both formats,
//! the hosted utility agents', and those of published agents, with their caching headers.

use axum::body::Body;
use axum::http::{Request, header};
use serde_json::{Value, json};

use agent_registry::signing::{self, Jwk, SigningKey, Verification};

use crate::helpers::{TestApp, TestResponse, agent_body, package_names, str_at};

/// `card` without its signatures, after checking that the registry signed it with a key its
/// `/.well-known/jwks.json` publishes.
pub async fn verified(app: &TestApp, card: &Value) -> Value {
    let jwks = app.get("/.well-known/jwks.json").await;
    assert_eq!(jwks.status, 200);
    assert_eq!(
        jwks.header("content-type"),
        Some("application/jwk-set+json")
    );
    let keys = jwks.body["keys"].as_array().expect("keys").clone();
    let outcome = signing::verify_card(card, |signature| {
        assert_eq!(
            signature.jku.as_deref(),
            Some("http://registry.test/.well-known/jwks.json")
        );
        keys.iter()
            .find(|key| key["kid"].as_str() == signature.kid.as_deref())
            .ok_or_else(|| "no such key".to_owned())
            .and_then(Jwk::parse)
    });
    assert!(
        matches!(outcome, Verification::Verified { .. }),
        "{outcome:?}: {card}"
    );
    let mut unsigned = card.clone();
    unsigned
        .as_object_mut()
        .expect("a card is an object")
        .remove("signatures");
    unsigned
}

/// `GET path` with `If-None-Match: etag`.
async fn revalidate(app: &TestApp, path: &str, etag: &str) -> TestResponse {
    let request = Request::builder()
        .uri(path)
        .header(header::IF_NONE_MATCH, etag)
        .body(Body::empty())
        .expect("request");
    app.send(request).await
}

/// Served as cacheable JSON, and 304 when revalidated with its ETag.
async fn assert_cacheable(app: &TestApp, path: &str) -> TestResponse {
    let response = app.get(path).await;
    assert_eq!(response.status, 200, "{path}: {}", response.text);
    assert_eq!(response.header("content-type"), Some("application/json"));
    let cache_control = response.header("cache-control").unwrap_or_default();
    assert!(
        cache_control.starts_with("public, max-age="),
        "{path}: {cache_control}"
    );
    let etag = response.header("etag").expect("etag").to_owned();
    assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

    let not_modified = revalidate(app, path, &etag).await;
    assert_eq!(not_modified.status, 304, "{path}");
    assert!(not_modified.text.is_empty());
    assert_eq!(not_modified.header("etag"), Some(etag.as_str()));
    let weak = revalidate(app, path, &format!("\"other\", W/{etag}")).await;
    assert_eq!(weak.status, 304, "{path}: a list with a weak match");
    let stale = revalidate(app, path, "\"stale\"").await;
    assert_eq!(stale.status, 200, "{path}");

    let last_modified = response
        .header("last-modified")
        .expect("last-modified")
        .to_owned();
    assert!(last_modified.ends_with(" GMT"), "{last_modified}");
    let unchanged = since(app, path, &last_modified).await;
    assert_eq!(unchanged.status, 304, "{path}: not modified since");
    let older = since(app, path, "Mon, 01 Jan 2001 00:00:00 GMT").await;
    assert_eq!(older.status, 200, "{path}: changed since 2001");
    response
}

/// `GET path` with `If-Modified-Since: date`.
async fn since(app: &TestApp, path: &str, date: &str) -> TestResponse {
    let request = Request::builder()
        .uri(path)
        .header(header::IF_MODIFIED_SINCE, date)
        .body(Body::empty())
        .expect("request");
    app.send(request).await
}

/// The members of an A2A v1.0 AgentCard: strict parsers (protobuf JSON among them) reject others.
const AGENT_CARD_FIELDS: [&str; 14] = [
    "name",
    "description",
    "supportedInterfaces",
    "provider",
    "version",
    "documentationUrl",
    "capabilities",
    "securitySchemes",
    "securityRequirements",
    "defaultInputModes",
    "defaultOutputModes",
    "skills",
    "signatures",
    "iconUrl",
];

/// The A2A v1.0 fields every card must carry.
fn assert_a2a_card(card: &Value) {
    for key in card.as_object().expect("a card is an object").keys() {
        assert!(
            AGENT_CARD_FIELDS.contains(&key.as_str()),
            "{key} is not an AgentCard field"
        );
    }
    for key in ["name", "description", "version"] {
        assert!(card[key].is_string(), "{key}: {card}");
    }
    assert!(card["supportedInterfaces"].is_array(), "{card}");
    for interface in card["supportedInterfaces"].as_array().expect("interfaces") {
        assert!(interface["url"].is_string());
        assert_eq!(interface["protocolBinding"], "JSONRPC");
        assert_eq!(interface["protocolVersion"], "1.0");
    }
    let capabilities = &card["capabilities"];
    assert!(
        capabilities.is_object(),
        "capabilities is an object: {card}"
    );
    for key in ["streaming", "pushNotifications", "extendedAgentCard"] {
        assert!(capabilities[key].is_boolean(), "{key}: {card}");
    }
    assert!(capabilities["extensions"].is_array());
    assert!(card["defaultInputModes"].is_array());
    assert!(card["defaultOutputModes"].is_array());
    for skill in card["skills"].as_array().expect("skills") {
        for key in ["id", "name", "description"] {
            assert!(skill[key].is_string(), "{key}: {skill}");
        }
        // A signed card is served as its signature covers it: without empty lists.
        assert!(
            skill["tags"].is_array() || skill.get("tags").is_none(),
            "{skill}"
        );
    }
    assert_eq!(
        card["securitySchemes"],
        json!({"bearer": {"httpAuthSecurityScheme": {"scheme": "Bearer"}}})
    );
    // A requirement without scopes is an empty list, left out of a signed card as served.
    if let Some(requirements) = card.get("securityRequirements") {
        assert!(
            requirements[0]["schemes"]["bearer"]["list"].is_array(),
            "{card}"
        );
    }
}

#[tokio::test]
async fn the_registry_card_is_an_a2a_card() {
    let app = TestApp::spawn().await;

    let response = assert_cacheable(&app, "/.well-known/agent-card.json").await;

    assert_a2a_card(&response.body);
    insta::assert_json_snapshot!("registry_card", verified(&app, &response.body).await);
}

#[tokio::test]
async fn the_registry_card_in_registry_format_is_the_service_spec_shape() {
    let app = TestApp::spawn().await;

    let response = assert_cacheable(&app, "/.well-known/agent-card.json?format=registry").await;

    let mut keys: Vec<&str> = response
        .body
        .as_object()
        .expect("object")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["agent_id", "capabilities", "description", "name"]);
    insta::assert_json_snapshot!("registry_card_registry_format", response.body);
}

#[tokio::test]
async fn both_registry_card_formats_carry_the_same_capabilities() {
    let app = TestApp::spawn().await;

    let a2a = app.get("/.well-known/agent-card.json").await;
    let legacy = app
        .get("/.well-known/agent-card.json?format=registry")
        .await;

    let extension = a2a.body["capabilities"]["extensions"]
        .as_array()
        .expect("extensions")
        .iter()
        .find(|extension| {
            extension["uri"] == "http://registry.test/extensions/registry-capabilities/v1"
        })
        .expect("the registry-capabilities extension");
    // `required: false` is the default, left out of a signed card as served.
    assert!(extension.get("required").is_none(), "{extension}");
    assert_eq!(extension["params"]["agent_id"], "registry");
    assert_eq!(
        extension["params"]["capabilities"],
        legacy.body["capabilities"]
    );
    let skill_ids: Vec<&Value> = a2a.body["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|skill| &skill["id"])
        .collect();
    assert_eq!(
        skill_ids,
        [&json!("search_agents"), &json!("resolve_package")]
    );
    let search = &legacy.body["capabilities"][0];
    assert_eq!(search["name"], "search_agents");
    assert_eq!(
        search["input_schema"]["properties"]["query"]["type"],
        "string"
    );
    assert_eq!(
        search["input_schema"]["properties"]["limit"]["type"],
        "integer"
    );
    assert_eq!(search["input_schema"]["properties"]["limit"]["default"], 5);
    assert_ne!(a2a.header("etag"), legacy.header("etag"));
}

#[tokio::test]
async fn an_unknown_card_format_is_an_invalid_parameter() {
    let app = TestApp::spawn().await;

    app.get("/.well-known/agent-card.json?format=yaml")
        .await
        .assert_problem(400, "invalid_parameter");
}

#[tokio::test]
async fn a_built_card_takes_skills_from_capabilities_and_the_interface_from_url() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.weather");
    body["version"] = json!("1.2.0");
    body["url"] = json!("https://weather.example.com/a2a/v1");
    body["tags"] = json!(["forecast"]);
    body["capabilities"] = json!([
        {"name": "get_forecast", "description": "Forecast for a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}},
        {"name": "ping"}
    ]);
    body["payment"] = json!({"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]});
    app.publish_live(&alice, body).await;

    let response = assert_cacheable(&app, "/public/agents/resolve/com.example.weather").await;

    let card = &response.body;
    assert_a2a_card(card);
    assert_eq!(card["name"], "Agent com.example.weather");
    assert_eq!(card["version"], "1.2.0");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "https://weather.example.com/a2a/v1"
    );
    let skills: Vec<(&Value, &Value)> = card["skills"]
        .as_array()
        .expect("skills")
        .iter()
        .map(|skill| (&skill["id"], &skill["description"]))
        .collect();
    assert_eq!(
        skills,
        [
            (&json!("get_forecast"), &json!("Forecast for a city")),
            (&json!("ping"), &json!("ping"))
        ]
    );
    let extension = card["capabilities"]["extensions"]
        .as_array()
        .expect("extensions")
        .iter()
        .find(|extension| extension["uri"] == "https://a2a-registry.org/extensions/registry/v1")
        .expect("the registry extension");
    assert_eq!(extension["params"]["payment"]["model"], "paid");
}

#[tokio::test]
async fn a_published_card_is_resolved_as_given() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let card = json!({
        "name": "Card Weather", "description": "Weather from a card.", "version": "3.1.4",
        "supportedInterfaces": [{"url": "https://card.example.com/a2a/v1",
                                 "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}],
        "capabilities": {"streaming": true, "x-vendor": {"kept": [1, 2, 3]}},
        "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "get_forecast", "name": "Get forecast", "description": "Forecast", "tags": []}]
    });
    app.publish_live(
        &alice,
        json!({"package_name": "com.example.carded", "card": card}),
    )
    .await;

    let response = app.get("/public/agents/resolve/com.example.carded").await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(
        verified(&app, &response.body).await,
        agent_registry::signing::signed_form(&card)
    );
}

#[tokio::test]
async fn every_a2a_card_is_signed_and_its_etag_survives_the_signature() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, agent_body("com.example.weather"))
        .await;

    for path in [
        "/.well-known/agent-card.json",
        "/a2a/utility/wiki/.well-known/agent-card.json",
        "/public/agents/resolve/com.example.weather",
    ] {
        let first = app.get(path).await;
        let second = app.get(path).await;
        verified(&app, &first.body).await;
        assert_eq!(first.header("etag"), second.header("etag"), "{path}");
        assert_eq!(first.body["signatures"].as_array().map(Vec::len), Some(1));
    }
    let legacy = app
        .get("/.well-known/agent-card.json?format=registry")
        .await;
    assert!(
        legacy.body.get("signatures").is_none(),
        "the registry's own earlier shape is not an A2A card"
    );
}

#[tokio::test]
async fn a_configured_key_signs_and_earlier_keys_stay_published() {
    let dir = tempfile::tempdir().expect("temp dir");
    let current = dir.path().join("current.pem");
    let previous = dir.path().join("previous.pem");
    let current_key = SigningKey::load_or_create(&current).expect("current key");
    let previous_key = SigningKey::load_or_create(&previous).expect("previous key");
    let app = TestApp::spawn_with(|config| {
        config.signing.card_signing_key = Some(current.clone());
        config.signing.card_signing_previous_keys = vec![previous.clone()];
    })
    .await;

    let jwks = app.get("/.well-known/jwks.json").await;
    let kids: Vec<&str> = jwks.body["keys"]
        .as_array()
        .expect("keys")
        .iter()
        .filter_map(|key| key["kid"].as_str())
        .collect();
    assert_eq!(kids, [current_key.kid(), previous_key.kid()]);
    let card = app.get("/.well-known/agent-card.json").await;
    let [signature] = signing::signatures_of(&card.body).try_into().expect("one");
    assert_eq!(signature.kid.as_deref(), Some(current_key.kid()));
    assert_eq!(signature.alg, "EdDSA");
    verified(&app, &card.body).await;
}

#[tokio::test]
async fn a_cards_etag_changes_when_its_agent_changes() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let path = "/public/agents/resolve/com.example.weather";
    let before = app.get(path).await;
    let etag = before.header("etag").expect("etag").to_owned();
    let mut body = agent_body("com.example.weather");
    body["description"] = json!("Now with radar.");
    let updated = app
        .put(
            &format!("/api/agents/{}", str_at(&record, "/id")),
            &alice,
            body,
        )
        .await;
    assert_eq!(updated.status, 200);

    let after = revalidate(&app, path, &etag).await;

    assert_eq!(after.status, 200);
    assert_eq!(after.body["description"], "Now with radar.");
    assert_ne!(after.header("etag"), Some(etag.as_str()));
}

#[tokio::test]
async fn the_hosted_utility_agents_are_registered_as_the_contract_says() {
    let app = TestApp::spawn().await;
    let capabilities = [
        ("wiki", vec!["get_summary", "search_page"]),
        ("finance", vec!["get_current_price"]),
        ("reader", vec!["extract_content"]),
    ];

    let listed = app.get("/public/agents?tags=test").await;

    let mut names = package_names(&listed);
    names.sort();
    assert_eq!(
        names,
        [
            "registry.utility.finance",
            "registry.utility.reader",
            "registry.utility.wiki"
        ]
    );
    for (slug, expected) in capabilities {
        let package = format!("registry.utility.{slug}");
        let record = app.get(&format!("/public/agents/{package}")).await;
        assert_eq!(record.status, 200, "{}", record.text);
        let agent = &record.body;
        assert_eq!(agent["state"], "ACTIVE", "{package}");
        assert_eq!(agent["verification_level"], "domain_verified", "{package}");
        assert_eq!(agent["payment"]["model"], "free", "{package}");
        assert!(
            agent["tags"]
                .as_array()
                .expect("tags")
                .contains(&json!("test")),
            "{package}"
        );
        let card_path = format!("/a2a/utility/{slug}/.well-known/agent-card.json");
        assert_eq!(
            agent["manifest_url"],
            format!("http://registry.test{card_path}"),
            "{package}"
        );
        let mut names: Vec<&str> = agent["capabilities"]
            .as_array()
            .expect("capabilities")
            .iter()
            .map(|capability| str_at(capability, "/name"))
            .collect();
        names.sort_unstable();
        assert_eq!(names, expected, "{package}");

        let card = assert_cacheable(&app, &card_path).await;
        assert_a2a_card(&card.body);
        assert_eq!(card.body["name"], agent["name"]);
        let mut skills: Vec<&str> = card.body["skills"]
            .as_array()
            .expect("skills")
            .iter()
            .map(|skill| str_at(skill, "/id"))
            .collect();
        skills.sort_unstable();
        assert_eq!(skills, expected, "{package}");
        assert_eq!(
            card.body["supportedInterfaces"][0]["url"],
            format!("http://registry.test/a2a/utility/{slug}/v1")
        );
    }
}

#[tokio::test]
async fn an_unknown_utility_agent_has_no_card() {
    let app = TestApp::spawn().await;

    app.get("/a2a/utility/weather/.well-known/agent-card.json")
        .await
        .assert_problem(404, "agent_not_found");
}
