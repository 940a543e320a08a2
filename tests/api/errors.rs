//! The error model: every code reachable over REST is problem+json, and no input
//! crashes the server or gets a 500.

use axum::body::Body;
use axum::http::{Method, Request, header};
use serde_json::{Value, json};

use crate::helpers::{
    MASTER_KEY, TestApp, TestResponse, WRITABLE_FIELDS, agent_body, error_fields, str_at,
};

/// Anything but a server error; errors are problem+json with a code.
#[track_caller]
fn assert_handled(response: &TestResponse, what: &str) {
    assert!(
        response.status.as_u16() < 500,
        "{what}: {} {}",
        response.status,
        response.text
    );
    if response.status.as_u16() >= 400 {
        assert_eq!(
            response.header("content-type"),
            Some("application/problem+json"),
            "{what}: {}",
            response.text
        );
        assert!(
            response.body["code"].is_string(),
            "{what}: {}",
            response.text
        );
        assert_eq!(response.body["status"], response.status.as_u16(), "{what}");
    }
}

#[tokio::test]
async fn an_error_body_has_the_rfc_9457_shape() {
    let app = TestApp::spawn().await;

    let response = app.get("/public/agents/com.example.nope").await;

    response.assert_problem(404, "agent_not_found");
    insta::assert_json_snapshot!("agent_not_found", response.body);
}

#[tokio::test]
async fn malformed_json_is_invalid_json() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    for body in ["{", "{\"package_name\": }", "{\"a\": 1} trailing", "nul"] {
        app.raw(
            Method::POST,
            "/api/agents/publish",
            Some(&alice),
            Some("application/json"),
            body,
        )
        .await
        .assert_problem(400, "invalid_json");
        app.raw(
            Method::POST,
            "/public/agents/search",
            None,
            Some("application/json"),
            body,
        )
        .await
        .assert_problem(400, "invalid_json");
    }
    app.raw(
        Method::POST,
        "/api/tokens",
        Some(MASTER_KEY),
        Some("application/json"),
        vec![b'{', 0xff, 0xfe, b'}'],
    )
    .await
    .assert_problem(400, "invalid_json");
}

#[tokio::test]
async fn a_body_that_is_not_json_is_an_unsupported_media_type() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let json_text = agent_body("com.example.weather").to_string();

    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        None,
    ] {
        app.raw(
            Method::POST,
            "/api/agents/publish",
            Some(&alice),
            content_type,
            json_text.clone(),
        )
        .await
        .assert_problem(415, "unsupported_media_type");
    }
}

#[tokio::test]
async fn json_content_types_with_parameters_or_suffixes_are_accepted() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    for (i, content_type) in [
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.api+json",
    ]
    .into_iter()
    .enumerate()
    {
        let response = app
            .raw(
                Method::POST,
                "/api/agents/publish",
                Some(&alice),
                Some(content_type),
                agent_body(&format!("com.example.ct{i}")).to_string(),
            )
            .await;
        assert_eq!(response.status, 201, "{content_type}: {}", response.text);
    }
}

#[tokio::test]
async fn a_bad_query_parameter_is_an_invalid_parameter() {
    let app = TestApp::spawn().await;

    let response = app.get("/public/agents?limit=ten").await;

    response.assert_problem(400, "invalid_parameter");
    assert!(str_at(&response.body, "/detail").contains("limit"));
}

#[tokio::test]
async fn a_repeated_page_size_is_an_invalid_parameter_on_every_path() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    for path in [
        "/public/agents?limit=5&limit=10",
        "/public/changes?limit=5&limit=10",
        "/api/agents?limit=5&limit=10",
    ] {
        let response = app.request(Method::GET, path, Some(&alice), None).await;
        response.assert_problem(400, "invalid_parameter");
        assert!(
            str_at(&response.body, "/detail").contains("limit: given more than once"),
            "{path}: {:?}",
            response.body
        );
    }
}

#[tokio::test]
async fn every_single_valued_query_parameter_is_refused_when_repeated() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    for (path, parameter) in [
        ("/public/changes?since=1&since=2", "since"),
        ("/api/agents?cursor=agt_1&cursor=agt_2", "cursor"),
        (
            "/.well-known/agent-card.json?format=a2a&format=registry",
            "format",
        ),
    ] {
        let response = app.request(Method::GET, path, Some(&alice), None).await;
        response.assert_problem(400, "invalid_parameter");
        assert!(
            str_at(&response.body, "/detail")
                .contains(&format!("{parameter}: given more than once")),
            "{path}: {:?}",
            response.body
        );
    }
}

#[tokio::test]
async fn a_typed_query_parameter_of_the_wrong_type_is_named() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    for (path, parameter) in [
        ("/public/changes?since=yesterday", "since"),
        ("/public/changes?limit=1e3", "limit"),
        ("/api/agents?limit=", "limit"),
    ] {
        let response = app.request(Method::GET, path, Some(&alice), None).await;
        response.assert_problem(400, "invalid_parameter");
        assert!(
            str_at(&response.body, "/detail").contains(&format!("{parameter}: must be an integer")),
            "{path}: {:?}",
            response.body
        );
    }
}

#[tokio::test]
async fn validation_lists_every_field_of_the_wrong_type_at_once() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let response = app
        .post(
            "/api/agents/publish",
            Some(&alice),
            json!({
                "package_name": 42, "name": ["x"], "description": {"a": 1}, "version": 1.5,
                "manifest_url": true, "url": 7, "target": [], "category": {},
                "tags": "forecast", "capabilities": {"name": "x"}, "payment": "free",
                "card": "card"
            }),
        )
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(
        error_fields(&response),
        [
            "capabilities",
            "card",
            "category",
            "description",
            "manifest_url",
            "name",
            "package_name",
            "payment",
            "tags",
            "target",
            "url",
            "version",
        ]
    );
    assert!(
        str_at(&response.body, "/detail").contains("12"),
        "{}",
        response.text
    );
}

#[tokio::test]
async fn validation_lists_every_bad_value_and_element_at_once() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let response = app
        .post(
            "/api/agents/publish",
            Some(&alice),
            json!({
                "package_name": "Not A Package", "name": "   ", "description": "d".repeat(2_001),
                "version": "v".repeat(65), "manifest_url": "not a url", "url": "ftp://example.com/a2a",
                "tags": ["ok", 1, "", "t".repeat(41)],
                "capabilities": [{"description": "nameless"}, {"name": "a"}, {"name": "a"},
                                 {"name": "b", "input_schema": "object"}, 3],
                "payment": {"model": "gratis", "rails": [":usdc"]}
            }),
        )
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(
        error_fields(&response),
        [
            "capabilities[0].name",
            "capabilities[2].name",
            "capabilities[3].input_schema",
            "capabilities[4]",
            "description",
            "manifest_url",
            "name",
            "package_name",
            "payment.model",
            "payment.rails[0]",
            "tags[1]",
            "tags[2]",
            "tags[3]",
            "url",
            "version",
        ]
    );
}

#[tokio::test]
async fn a_body_that_is_not_an_object_is_a_validation_error() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    for body in [json!([]), json!("agent"), json!(1), json!(null)] {
        let response = app.post("/api/agents/publish", Some(&alice), body).await;
        response.assert_problem(422, "validation_failed");
        assert_eq!(error_fields(&response), ["body"]);
    }
    let empty = app
        .raw(Method::POST, "/api/agents/publish", Some(&alice), None, "")
        .await;
    empty.assert_problem(422, "validation_failed");
}

#[tokio::test]
async fn a_missing_token_is_unauthorized_with_a_bearer_challenge() {
    let app = TestApp::spawn().await;

    for (method, path) in [
        (Method::POST, "/api/agents/publish"),
        (Method::GET, "/api/agents"),
        (Method::GET, "/api/agents/com.example.weather"),
        (Method::PUT, "/api/agents/com.example.weather"),
        (Method::DELETE, "/api/agents/com.example.weather"),
        (Method::POST, "/api/agents/com.example.weather/go-live"),
        (Method::POST, "/api/agents/com.example.weather/unpublish"),
        (Method::GET, "/api/tokens"),
        (Method::POST, "/api/tokens"),
        (Method::DELETE, "/api/tokens/tok_x"),
    ] {
        let response = app
            .request(method.clone(), path, None, Some(json!({})))
            .await;
        response.assert_problem(401, "unauthorized");
        assert_eq!(
            response.header("www-authenticate"),
            Some("Bearer"),
            "{method} {path}"
        );
    }
}

#[tokio::test]
async fn a_token_without_the_scope_is_forbidden() {
    let app = TestApp::spawn().await;
    let reader = app.token("alice", &["a2a"]).await;

    app.try_publish(&reader, agent_body("com.example.weather"))
        .await
        .assert_problem(403, "forbidden");
}

#[tokio::test]
async fn an_unknown_route_is_not_found() {
    let app = TestApp::spawn().await;

    for (method, path) in [
        (Method::GET, "/nope"),
        (Method::GET, "/api/nope"),
        (Method::POST, "/public/agents/search/more"),
        (Method::GET, "/public/agents/a/b/c"),
        (Method::GET, "/public/agents/../../etc/passwd"),
        (Method::GET, "/.well-known/other.json"),
    ] {
        app.request(method, path, None, None)
            .await
            .assert_problem(404, "not_found");
    }
}

#[tokio::test]
async fn a_known_route_with_the_wrong_method_is_method_not_allowed() {
    let app = TestApp::spawn().await;

    for (method, path) in [
        (Method::DELETE, "/public/agents"),
        (Method::GET, "/public/agents/search"),
        (Method::GET, "/api/agents/publish"),
        (Method::POST, "/api/agents/com.example.weather"),
        (Method::GET, "/api/agents/com.example.weather/go-live"),
        (Method::PUT, "/healthz"),
        (Method::POST, "/.well-known/agent-card.json"),
    ] {
        let response = app
            .request(method.clone(), path, Some(MASTER_KEY), None)
            .await;
        response.assert_problem(405, "method_not_allowed");
        let allow = response.header("allow").unwrap_or_default();
        assert!(
            !allow.is_empty() && !allow.contains(method.as_str()),
            "{method} {path}: Allow: {allow}"
        );
    }
}

#[tokio::test]
async fn a_taken_package_name_is_a_conflict_and_a_wrong_transition_is_invalid() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, agent_body("com.example.weather"))
        .await;

    app.try_publish(&alice, agent_body("com.example.weather"))
        .await
        .assert_problem(409, "conflict");
    app.post_empty("/api/agents/com.example.weather/go-live", &alice)
        .await
        .assert_problem(409, "invalid_state_transition");
}

#[tokio::test]
async fn a_body_over_one_mebibyte_is_payload_too_large() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.big");
    body["description"] = json!("x".repeat(1024 * 1024));

    app.post("/api/agents/publish", Some(&alice), body)
        .await
        .assert_problem(413, "payload_too_large");
    app.post(
        "/public/agents/search",
        None,
        json!({"query": "q".repeat(1024 * 1024)}),
    )
    .await
    .assert_problem(413, "payload_too_large");
    app.post(
        "/api/tokens",
        Some(MASTER_KEY),
        json!({"owner": "alice", "pad": "p".repeat(1024 * 1024)}),
    )
    .await
    .assert_problem(413, "payload_too_large");
}

#[tokio::test]
async fn a_body_just_under_one_mebibyte_is_read() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.big");
    body["description"] = json!("");
    let padding = 1024 * 1024 - body.to_string().len();
    body["description"] = json!("x".repeat(padding));
    assert_eq!(body.to_string().len(), 1024 * 1024);

    let response = app.post("/api/agents/publish", Some(&alice), body).await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["description"]);
}

#[tokio::test]
async fn too_many_requests_from_one_client_are_rate_limited() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limit_per_minute = 1;
        config.rate_limit_burst = 1;
        config.rate_limit_exempt_loopback = false;
    })
    .await;
    let client = [203, 0, 113, 7];

    let first = app.get_from(client, "/public/agents").await;
    let second = app
        .get_from(client, "/public/agents/com.example.weather")
        .await;
    let other_client = app.get_from([198, 51, 100, 2], "/public/agents").await;

    assert_eq!(first.status, 200, "{}", first.text);
    second.assert_problem(429, "rate_limited");
    let retry_after: u64 = second
        .header("retry-after")
        .and_then(|value| value.parse().ok())
        .expect("Retry-After in seconds");
    assert!((1..=60).contains(&retry_after), "{retry_after}");
    assert_eq!(other_client.status, 200, "the limit is per client IP");
    assert_eq!(
        app.get_from(client, "/.well-known/agent-card.json")
            .await
            .status,
        429
    );
}

#[tokio::test]
async fn loopback_clients_are_exempt_from_the_rate_limit_by_default() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limit_per_minute = 1;
        config.rate_limit_burst = 1;
    })
    .await;

    for _ in 0..3 {
        assert_eq!(
            app.get_from([127, 0, 0, 1], "/public/agents").await.status,
            200
        );
    }
}

#[tokio::test]
async fn a_stale_if_match_is_a_failed_precondition() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;
    let path = format!("/api/agents/{}", str_at(&record, "/id"));
    let mut changed = agent_body("com.example.weather");
    changed["description"] = json!("Changed by the first writer.");
    let first = app.put(&path, &alice, changed).await;
    assert_eq!(first.status, 200);
    assert_eq!(first.body["revision"], 2, "{}", first.text);
    let mut stale = agent_body("com.example.weather");
    stale["name"] = json!("Lost update");

    for if_match in ["\"1\"", "W/\"1\"", "garbage"] {
        let request = Request::builder()
            .method(Method::PUT)
            .uri(&path)
            .header(header::AUTHORIZATION, format!("Bearer {alice}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::IF_MATCH, if_match)
            .body(Body::from(stale.to_string()))
            .expect("request");
        app.send(request)
            .await
            .assert_problem(412, "precondition_failed");
    }
    let current = app.get_as(&path, &alice).await;
    assert_ne!(current.body["name"], "Lost update");
}

#[tokio::test]
async fn hostile_paths_are_answered_without_crashing() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let huge = "a".repeat(60_000);

    for identifier in [
        "..%2F..%2Fetc%2Fpasswd",
        "%2e%2e",
        "com.example%00.weather",
        "com.example.weather%00",
        "%00",
        "com.example.weather'%20OR%20'1'='1",
        "%27%3B%20DROP%20TABLE%20agents%3B--",
        "%E2%9C%93.%F0%9F%98%80",
        "%C0%AE%C0%AE",
        "%FF%FE",
        "%20",
        huge.as_str(),
    ] {
        let public = app.get(&format!("/public/agents/{identifier}")).await;
        assert_handled(&public, identifier);
        assert_ne!(public.status, 200, "{identifier}");
        let resolve = app
            .get(&format!("/public/agents/resolve/{identifier}"))
            .await;
        assert_handled(&resolve, identifier);
        for response in [
            app.get_as(&format!("/api/agents/{identifier}"), &alice)
                .await,
            app.delete(&format!("/api/agents/{identifier}"), &alice)
                .await,
            app.post_empty(&format!("/api/agents/{identifier}/go-live"), &alice)
                .await,
            app.delete(&format!("/api/tokens/{identifier}"), &alice)
                .await,
        ] {
            assert_handled(&response, identifier);
            assert!(response.status.as_u16() >= 400, "{identifier}");
        }
    }
    assert!(
        str_at(
            &app.get(&format!("/public/agents/{huge}")).await.body,
            "/detail"
        )
        .chars()
        .count()
            < 300,
        "echoed input is truncated"
    );
    assert_eq!(
        app.get("/public/agents/com.example.weather").await.status,
        200
    );
}

#[tokio::test]
async fn hostile_query_strings_are_answered_without_crashing() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let long_query = format!("q={}", "weather%20".repeat(6_000));
    let long_rail = format!("payment_rail={}", "a:b,".repeat(10_000));

    for query in [
        "q=%27%3B%20DROP%20TABLE%20agents%3B--",
        "q=%FF%FE",
        "q=%00",
        "q=%F0%9F%98%80%20%E5%A4%A9%E6%B0%97",
        "tags=%27%20OR%201%3D1--",
        "category=%25",
        "target=_",
        "payment_rail=%3A%3A%3A",
        "payment_rail=eip155%3A8453%3Ausdc%3Aextra",
        "payment_protocol=%00",
        "cursor=%00",
        "limit=99999999999999999999999",
        "limit=1e3",
        "sort=%00",
        "q&tags&limit",
        "&&&==&",
        long_query.as_str(),
        long_rail.as_str(),
    ] {
        let response = app.get(&format!("/public/agents?{query}")).await;
        assert_handled(&response, &query[..query.len().min(60)]);
    }
    let listed = app.get("/public/agents?tags=%27%20OR%201%3D1--").await;
    assert_eq!(listed.body["total"], 0, "SQL in a filter matches nothing");
    assert_eq!(
        app.get("/public/agents/com.example.weather").await.status,
        200
    );
}

/// JSON values of every type and several nasty strings.
fn hostile_values() -> Vec<Value> {
    vec![
        json!(null),
        json!(true),
        json!(-1),
        json!(1e308),
        json!(u64::MAX),
        json!(""),
        json!("'; DROP TABLE agents; --"),
        json!("\u{0000}\u{202e}\u{feff}"),
        json!("x".repeat(200_000)),
        json!([]),
        json!([null, 1, {"a": []}]),
        json!({}),
        json!({"$ne": null}),
    ]
}

/// A value cut for an assertion message.
fn shown(value: &Value) -> String {
    value.to_string().chars().take(40).collect()
}

#[tokio::test]
async fn json_nested_deeper_than_the_reader_goes_is_unprocessable_and_says_why() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let deep_array = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let deep_object = format!("{}1{}", "{\"a\":".repeat(10_000), "}".repeat(10_000));

    for raw in [&deep_array, &deep_object] {
        for path in [
            "/api/agents/publish",
            "/public/agents/search",
            "/api/tokens",
        ] {
            let response = app
                .raw(
                    Method::POST,
                    path,
                    Some(MASTER_KEY),
                    Some("application/json"),
                    raw.clone(),
                )
                .await;
            response.assert_problem(422, "validation_failed");
            let message = response.body["errors"][0]["message"].as_str().unwrap_or("");
            assert!(
                message.contains("nest more than 128 levels"),
                "{path}: {message}"
            );
            assert!(
                !response.text.contains("not valid JSON"),
                "{}",
                response.text
            );
        }
    }
    assert_eq!(app.get_as("/api/agents", &alice).await.status, 200);
}

#[tokio::test]
async fn a_too_deep_input_schema_is_named_as_the_field() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let schema = format!(
        "{}{}",
        "{\"type\":\"object\",\"properties\":{\"x\":".repeat(80),
        "{}".to_owned() + &"}}".repeat(80)
    );
    let body = format!(
        r#"{{"package_name": "com.example.deep", "name": "Deep", "description": "Too deep.",
            "capabilities": [{{"name": "ok", "description": "fine"}}, {{"name": "deep", "input_schema": {schema}}}]}}"#
    );
    let response = app
        .raw(
            Method::POST,
            "/api/agents/publish",
            Some(&alice),
            Some("application/json"),
            body,
        )
        .await;
    response.assert_problem(422, "validation_failed");
    assert_eq!(
        response.body["errors"][0]["field"], "capabilities[1].input_schema",
        "{}",
        response.text
    );
}

#[tokio::test]
async fn hostile_values_in_any_publish_field_are_answered_without_crashing() {
    // Thousands of requests with one token: more than its rate limit allows.
    let app = TestApp::spawn_with(|config| config.token_rate_limit_per_minute = 0).await;
    let alice = app.token("alice", &[]).await;
    let fields = WRITABLE_FIELDS.into_iter().chain(["card"]);
    let payment_fields = ["model", "direction", "protocols", "rails"];
    let rail_fields = ["network", "asset", "token", "protocol", "caip2"];

    for value in hostile_values() {
        let mut bodies = Vec::new();
        for field in fields.clone() {
            let mut body = agent_body("com.example.hostile");
            body[field] = value.clone();
            bodies.push((format!("{field} = {}", shown(&value)), body));
        }
        for field in payment_fields {
            let mut body = agent_body("com.example.hostile");
            body["payment"] = json!({"model": "paid", "protocols": ["x402"]});
            body["payment"][field] = value.clone();
            bodies.push((format!("payment.{field} = {}", shown(&value)), body));
        }
        for field in rail_fields {
            let mut rail = json!({"network": "base", "asset": "usdc", "protocol": "x402"});
            rail[field] = value.clone();
            let mut body = agent_body("com.example.hostile");
            body["payment"] = json!({"model": "paid", "protocols": ["x402"], "rails": [rail]});
            bodies.push((
                format!("payment.rails[0].{field} = {}", shown(&value)),
                body,
            ));
        }
        for (what, body) in bodies {
            let response = app.post("/api/agents/publish", Some(&alice), body).await;
            assert_handled(&response, &what);
            if response.status == 201 {
                let id = str_at(&response.body, "/id");
                let deleted = app.delete(&format!("/api/agents/{id}"), &alice).await;
                assert_eq!(deleted.status, 204, "{what}");
            }
        }
    }
}

#[tokio::test]
async fn hostile_values_in_search_and_token_bodies_are_answered_without_crashing() {
    let app = TestApp::spawn().await;
    let search_fields = [
        "query",
        "limit",
        "cursor",
        "sort",
        "filters",
        "target",
        "category",
        "tags",
        "verification_level",
        "payment_model",
        "payment_protocol",
        "payment_rail",
        "payment_direction",
        "paymentRail",
    ];

    for value in hostile_values() {
        for field in search_fields {
            let what = format!("search {field} = {}", shown(&value));
            let top_level = app
                .post("/public/agents/search", None, json!({field: value}))
                .await;
            assert_handled(&top_level, &what);
            let nested = app
                .post(
                    "/public/agents/search",
                    None,
                    json!({"filters": {field: value}}),
                )
                .await;
            assert_handled(&nested, &what);
        }
        for field in ["owner", "scopes", "expires_in_days"] {
            let mut body = json!({"owner": "alice"});
            body[field] = value.clone();
            let response = app.post("/api/tokens", Some(MASTER_KEY), body).await;
            assert_handled(&response, &format!("token {field} = {}", shown(&value)));
        }
    }
}

#[tokio::test]
async fn unicode_survives_a_round_trip() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut body = agent_body("com.example.unicode");
    body["name"] = json!("天気 Agent 🌦️ — Ünïcødé");
    body["description"] = json!("Prévisions météo. עברית. \u{0301}combining. 𝔘𝔫𝔦𝔠𝔬𝔡𝔢.");
    body["tags"] = json!(["météo", "天気"]);
    body["category"] = json!("Météo");

    let record = app.publish_live(&alice, body.clone()).await;

    let public = app
        .get(&format!("/public/agents/{}", str_at(&record, "/id")))
        .await;
    for key in ["name", "description", "category", "tags"] {
        assert_eq!(public.body[key], body[key], "{key}");
    }
    let by_category = app.get("/public/agents?category=M%C3%89T%C3%89O").await;
    assert_eq!(by_category.body["total"], 1, "{}", by_category.text);
    let by_query = app.get("/public/agents?q=%E5%A4%A9%E6%B0%97").await;
    assert_eq!(
        by_query.body["agents"][0]["package_name"], "com.example.unicode",
        "{}",
        by_query.text
    );
}

#[tokio::test]
async fn a_deeply_nested_input_schema_within_the_json_limit_round_trips() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut schema = json!({"type": "string"});
    for _ in 0..50 {
        schema = json!({"type": "object", "properties": {"x": schema}});
    }
    let mut body = agent_body("com.example.deep");
    body["capabilities"] = json!([{"name": "deep", "input_schema": schema}]);

    let record = app.publish_live(&alice, body).await;

    let public = app
        .get(&format!("/public/agents/{}", str_at(&record, "/id")))
        .await;
    assert_eq!(public.status, 200, "{}", public.text);
    assert_eq!(public.body["capabilities"][0]["input_schema"], schema);
    let card = app.get("/public/agents/resolve/com.example.deep").await;
    assert_eq!(card.status, 200, "{}", card.text);
    let listed: Value = app.get("/public/agents?q=deep").await.body;
    assert_eq!(listed["agents"][0]["package_name"], "com.example.deep");
}

#[tokio::test]
async fn hostile_authorization_headers_are_unauthorized() {
    let app = TestApp::spawn().await;

    for value in [
        "Bearer",
        "Bearer ",
        "Bearer  ",
        "bearer\tx",
        "Token abc",
        "Bearer ' OR 1=1 --",
        "Bearer \u{7f}",
    ] {
        let Ok(request) = Request::builder()
            .uri("/api/agents")
            .header(header::AUTHORIZATION, value)
            .body(Body::empty())
        else {
            continue;
        };
        app.send(request).await.assert_problem(401, "unauthorized");
    }
    let mut request = Request::builder()
        .uri("/api/agents")
        .body(Body::empty())
        .expect("request");
    request.headers_mut().insert(
        header::AUTHORIZATION,
        header::HeaderValue::from_bytes(b"Bearer \xff\xfe").expect("opaque header"),
    );
    app.send(request).await.assert_problem(401, "unauthorized");
}

/// The operations whose body is optional in spirit (`{}` means "no criteria" or "no name") still
/// need one: a request without a body, or with `null`, is a 400 problem, never a default answer.
#[tokio::test]
async fn a_missing_body_is_refused_where_a_body_is_required() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let session = app
        .post("/api/playground/session", Some(&alice), json!({}))
        .await;
    assert_eq!(session.status, 201, "{}", session.text);
    let discover = format!(
        "/api/playground/session/{}/discover",
        str_at(&session.body, "/session_id")
    );

    for path in [
        "/public/agents/search",
        "/a2a/discover",
        "/api/playground/session",
        discover.as_str(),
    ] {
        let token = (path != "/public/agents/search").then_some(alice.as_str());
        let missing = app.raw(Method::POST, path, token, None, "").await;
        missing.assert_problem(400, "invalid_parameter");
        assert!(
            str_at(&missing.body, "/detail").contains("JSON object"),
            "{path}: {}",
            missing.text
        );
        let declared_but_empty = app
            .raw(Method::POST, path, token, Some("application/json"), "")
            .await;
        declared_but_empty.assert_problem(400, "invalid_parameter");
        app.raw(Method::POST, path, token, Some("application/json"), "null")
            .await
            .assert_problem(400, "invalid_parameter");
        let empty_object = app
            .raw(Method::POST, path, token, Some("application/json"), "{}")
            .await;
        assert!(
            empty_object.status.is_success(),
            "{path}: {} {}",
            empty_object.status,
            empty_object.text
        );
    }
}
