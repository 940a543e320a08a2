//! Operational endpoints.

use std::collections::{BTreeMap, BTreeSet};

use crate::helpers::TestApp;

/// Every `.route("path", methods…)` of the route table, with its HTTP methods.
fn routes_in_router_source() -> BTreeMap<String, BTreeSet<String>> {
    let source = include_str!("../../src/router.rs");
    let mut routes = BTreeMap::new();
    for chunk in source.split(".route(").skip(1) {
        let mut quoted = chunk.split('"');
        let path = quoted.nth(1).expect("a quoted path").to_owned();
        let handlers = chunk.split(['\n']).take(6).collect::<String>();
        let handlers = handlers.split(".layer(").next().unwrap_or_default();
        let methods = ["get", "post", "put", "delete", "patch"]
            .into_iter()
            .filter(|method| {
                handlers
                    .match_indices(&format!("{method}("))
                    .any(|(at, _)| {
                        !handlers[..at]
                            .chars()
                            .last()
                            .is_some_and(|c| c.is_alphanumeric() || c == '_')
                    })
            })
            .map(str::to_owned)
            .collect();
        routes.insert(path, methods);
    }
    // Web pages share the route table but are not REST paths (src/web).
    routes.retain(|path, _| !agent_registry::web::ROUTES.contains(&path.as_str()));
    // A path with a trailing slash is an alias of the same path without it (the JSON-RPC
    // endpoints), documented with it.
    let aliases: Vec<String> = routes
        .keys()
        .filter(|path| path.len() > 1 && path.ends_with('/'))
        .cloned()
        .collect();
    for alias in aliases {
        let methods = routes.remove(&alias);
        let twin = alias.trim_end_matches('/');
        assert_eq!(routes.get(twin), methods.as_ref(), "{alias} aliases {twin}");
    }
    routes
}

#[tokio::test]
async fn healthz_says_ok() {
    let app = TestApp::spawn().await;

    let response = app.get("/healthz").await;

    assert_eq!(response.status, 200);
    assert_eq!(response.body, serde_json::json!({"status": "ok"}));
}

#[tokio::test]
async fn readyz_says_ready_once_storage_and_index_are_up() {
    let app = TestApp::spawn().await;

    let response = app.get("/readyz").await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["status"], "ready");
    assert_eq!(
        response.body["indexed_agents"], 4,
        "the registry itself and its hosted agents"
    );
    assert_eq!(response.body["total"], 4);
    match response.body["vectors"].as_str() {
        Some("ready") => assert_eq!(response.body["embedded"], 4),
        Some("none") => assert_eq!(response.body["embedded"], 0),
        other => panic!("a built app has its vectors: {other:?}"),
    }
    // The embedder that ranks now is named; nothing is under way, so there is no note.
    let embedder = response.body["embedder"].as_str().expect("embedder");
    assert!(embedder.starts_with("static-"), "{embedder}");
    assert!(
        response.body.get("embedder_note").is_none(),
        "{}",
        response.text
    );
}

#[tokio::test]
async fn while_the_server_starts_only_healthz_answers() {
    use tower::ServiceExt;
    let starting = agent_registry::router::starting();
    let get = |path: &'static str| {
        let router = starting.clone();
        async move {
            let request = axum::http::Request::builder()
                .uri(path)
                .body(axum::body::Body::empty())
                .expect("request");
            router.oneshot(request).await.expect("infallible")
        }
    };
    assert_eq!(get("/healthz").await.status(), 200);
    for path in [
        "/readyz",
        "/public/agents?q=x",
        "/.well-known/agent-card.json",
    ] {
        let response = get(path).await;
        assert_eq!(response.status(), 503, "{path}");
        assert_eq!(
            response.headers()["content-type"],
            "application/problem+json"
        );
        assert_eq!(response.headers()["retry-after"], "1");
    }
}

#[tokio::test]
async fn metrics_count_requests_in_prometheus_text_format() {
    let app = TestApp::spawn().await;
    app.get("/public/agents").await;

    let response = app.get("/metrics").await;

    assert_eq!(response.status, 200);
    assert!(
        response
            .header("content-type")
            .is_some_and(|value| value.starts_with("text/plain")),
        "{:?}",
        response.header("content-type")
    );
    assert!(
        response.text.contains("# TYPE http_requests_total counter"),
        "{}",
        response.text
    );
    assert!(
        response
            .text
            .lines()
            .any(|line| line.starts_with("http_requests_total{")
                && line.contains("route=\"/public/agents\"")
                && line.contains("status=\"200\"")),
        "{}",
        response.text
    );
    assert!(response.text.contains("http_request_duration_seconds"));
}

#[tokio::test]
async fn openapi_lists_every_rest_path_of_the_route_table() {
    let app = TestApp::spawn().await;
    let routes = routes_in_router_source();
    assert!(routes.len() >= 15, "parsed the route table: {routes:?}");

    let response = app.get("/openapi.json").await;

    assert_eq!(response.status, 200);
    let openapi = &response.body;
    assert!(
        openapi["openapi"]
            .as_str()
            .is_some_and(|v| v.starts_with("3.1")),
        "OpenAPI 3.1: {}",
        openapi["openapi"]
    );
    let documented: BTreeMap<String, BTreeSet<String>> = openapi["paths"]
        .as_object()
        .expect("paths")
        .iter()
        .map(|(path, item)| {
            let methods = item
                .as_object()
                .expect("path item")
                .keys()
                .filter(|key| ["get", "post", "put", "delete", "patch"].contains(&key.as_str()))
                .cloned()
                .collect();
            (path.clone(), methods)
        })
        .collect();
    assert_eq!(documented, routes);
    assert!(openapi["components"]["securitySchemes"]["bearer"].is_object());
}

#[tokio::test]
async fn docs_serve_an_html_page() {
    let app = TestApp::spawn().await;

    let mut response = app.get("/docs").await;
    if response.status.is_redirection() {
        let location = response.header("location").expect("location").to_owned();
        response = app.get(&location).await;
    }

    assert_eq!(response.status, 200, "{}", response.text);
    assert!(
        response
            .header("content-type")
            .is_some_and(|value| value.starts_with("text/html")),
        "{:?}",
        response.header("content-type")
    );
    assert!(response.text.to_lowercase().contains("<html"));
}

/// The served OpenAPI document.
async fn openapi_document() -> serde_json::Value {
    let app = TestApp::spawn().await;
    let response = app.get("/openapi.json").await;
    assert_eq!(response.status, 200);
    response.body
}

/// Every `(path, method, operation)` of the document.
fn operations(openapi: &serde_json::Value) -> Vec<(String, String, serde_json::Value)> {
    let mut found = Vec::new();
    for (path, item) in openapi["paths"].as_object().expect("paths") {
        for (method, operation) in item.as_object().expect("path item") {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                found.push((path.clone(), method.clone(), operation.clone()));
            }
        }
    }
    found
}

/// The JSON-RPC endpoints answer errors as JSON-RPC bodies.
const JSON_RPC_PATHS: [&str; 2] = ["/a2a/v1", "/a2a/utility/{name}/v1"];

#[tokio::test]
async fn openapi_errors_are_problem_json_except_json_rpc_errors() {
    let openapi = openapi_document().await;

    for (path, method, operation) in operations(&openapi) {
        let responses = operation["responses"].as_object().expect("responses");
        let secured = operation["security"]
            .as_array()
            .is_some_and(|all| all.iter().any(|r| r.get("bearer").is_some()));
        // A token a public read takes when sent (it shows the caller's private agents) can
        // be refused (401), but a read refuses nobody (no 403).
        let optional = operation["security"].as_array().is_some_and(|all| {
            all.iter()
                .any(|r| r.as_object().is_some_and(|r| r.is_empty()))
        });
        if secured {
            assert!(responses.contains_key("401"), "{method} {path}: 401");
            assert!(
                optional || responses.contains_key("403"),
                "{method} {path}: 403"
            );
        }
        if operation.get("requestBody").is_some() {
            for status in ["400", "413", "415"] {
                assert!(responses.contains_key(status), "{method} {path}: {status}");
            }
        }
        for (status, response) in responses {
            if !(status.starts_with('4') || status.starts_with('5')) {
                continue;
            }
            let content = response["content"]
                .as_object()
                .unwrap_or_else(|| panic!("{method} {path} {status}: an error has a body"));
            let types: Vec<&str> = content.keys().map(String::as_str).collect();
            let json_rpc_error = JSON_RPC_PATHS.contains(&path.as_str())
                && ["400", "401", "403", "413", "415", "429"].contains(&status.as_str());
            if path == "/mcp" {
                // MCP's own refusals are JSON-RPC errors; the limits every public path shares
                // (a declared body over 1 MiB, the per-IP rate) answer before it, as problems.
                for (media, schema) in content {
                    let expected = match media.as_str() {
                        "application/json" => "#/components/schemas/McpErrorResponse",
                        "application/problem+json" => "#/components/schemas/Problem",
                        other => panic!("{method} {path} {status}: {other}"),
                    };
                    assert_eq!(
                        schema["schema"]["$ref"], expected,
                        "{method} {path} {status}"
                    );
                }
            } else if agent_registry::ard::error::is_ard_path(&path) {
                // The ARD API answers in ARD's error shape (`{errorCode, message}`).
                assert_eq!(types, ["application/json"], "{method} {path} {status}");
                assert_eq!(
                    content["application/json"]["schema"]["$ref"],
                    "#/components/schemas/ArdErrorBody",
                    "{method} {path} {status}"
                );
            } else if json_rpc_error {
                assert_eq!(types, ["application/json"], "{method} {path} {status}");
                assert_eq!(
                    content["application/json"]["schema"]["$ref"],
                    "#/components/schemas/JsonRpcErrorResponse",
                    "{method} {path} {status}"
                );
            } else {
                assert_eq!(
                    types,
                    ["application/problem+json"],
                    "{method} {path} {status}"
                );
                assert_eq!(
                    content["application/problem+json"]["schema"]["$ref"],
                    "#/components/schemas/Problem",
                    "{method} {path} {status}"
                );
            }
        }
    }
}

/// Whether `schema` constrains anything (after following a `$ref` into the components).
fn constrains(openapi: &serde_json::Value, schema: &serde_json::Value) -> bool {
    if let Some(reference) = schema["$ref"].as_str() {
        let name = reference.trim_start_matches("#/components/schemas/");
        return constrains(openapi, &openapi["components"]["schemas"][name]);
    }
    let Some(object) = schema.as_object() else {
        return false;
    };
    let has = |key: &str| object.get(key).is_some_and(|v| v != &serde_json::json!({}));
    let typed = |kind: &str| object.get("type") == Some(&serde_json::json!(kind));
    (typed("object") && (has("properties") || has("required")))
        || (typed("array") && object.get("items").is_some_and(|s| constrains(openapi, s)))
        || ["anyOf", "oneOf", "allOf"].iter().any(|key| {
            object
                .get(*key)
                .and_then(|v| v.as_array())
                .is_some_and(|alternatives| {
                    !alternatives.is_empty() && alternatives.iter().all(|s| constrains(openapi, s))
                })
        })
}

#[tokio::test]
async fn openapi_post_and_put_bodies_have_real_schemas() {
    let openapi = openapi_document().await;
    // State transitions act on the agent the path names and read no body.
    let bodiless = [
        "/api/agents/{id}/go-live",
        "/api/agents/{id}/unpublish",
        "/api/agents/{id}/verify",
        "/api/namespaces/{namespace}/verify",
        "/auth/logout",
        "/api/transfers/{id}/accept",
        "/api/transfers/{id}/decline",
    ];

    for (path, method, operation) in operations(&openapi) {
        if !["post", "put"].contains(&method.as_str()) || bodiless.contains(&path.as_str()) {
            continue;
        }
        let body = &operation["requestBody"];
        assert_eq!(
            body["required"], true,
            "{method} {path}: the body is required"
        );
        let schema = &body["content"]["application/json"]["schema"];
        assert!(
            constrains(&openapi, schema),
            "{method} {path}: the body schema is an unconstrained any: {schema}"
        );
    }
    assert!(!constrains(
        &openapi,
        &serde_json::json!({"type": "object"})
    ));
    assert!(!constrains(&openapi, &serde_json::json!({})));
}

/// Per client IP on the public, discovery and sign-in groups of the route table, per token
/// wherever a token is read.
#[tokio::test]
async fn openapi_documents_429_on_exactly_the_rate_limited_paths() {
    let source = include_str!("../../src/router.rs");
    let public_group = source
        .split("let public = Router::new()")
        .nth(1)
        .and_then(|rest| rest.split(".layer(").next())
        .expect("the public group of the route table");
    let discovery_group = source
        .split("let discovery = Router::new()")
        .nth(1)
        .and_then(|rest| rest.split(".layer(").next())
        .expect("the discovery group of the route table");
    let signin_group = source
        .split("let signin = Router::new()")
        .nth(1)
        .and_then(|rest| rest.split(".layer(").next())
        .expect("the sign-in group of the route table");
    let limited: BTreeSet<String> = [public_group, discovery_group, signin_group]
        .into_iter()
        .flat_map(|group| group.split(".route(").skip(1))
        .map(|chunk| chunk.split('"').nth(1).expect("a quoted path").to_owned())
        .collect();
    assert!(limited.contains("/public/agents"), "{limited:?}");
    let openapi = openapi_document().await;

    let secured = |operation: &serde_json::Value| {
        operation["security"]
            .as_array()
            .is_some_and(|all| all.iter().any(|r| r.get("bearer").is_some()))
    };

    for (path, method, operation) in operations(&openapi) {
        let expected = limited.contains(&path) || secured(&operation);
        assert_eq!(
            operation["responses"].get("429").is_some(),
            expected,
            "{method} {path}"
        );
    }
}
