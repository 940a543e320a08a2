//! The playground: sessions owned by their creator and expiring when idle,
//! discovery through the shared search, and execution of hosted agents in-process and of
//! published agents over A2A (`SendMessage`) or the legacy `{action, params}` style.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::fakes::Fake;
use crate::helpers::{MASTER_KEY, TestApp, agent_body, error_fields, package_names, str_at};

const SESSION: &str = "/api/playground/session";

/// An app whose hosted agents use the local fake upstreams (loopback allowed, 1 s upstream
/// timeout) and whose playground calls time out after 1 s.
async fn app_with_fakes() -> (TestApp, Fake) {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| {
        fake.configure(config);
        config.playground.playground_call_timeout_secs = 1;
    })
    .await;
    (app, fake)
}

async fn new_session(app: &TestApp, token: &str) -> String {
    let response = app.post(SESSION, Some(token), json!({})).await;
    assert_eq!(response.status, 201, "{}", response.text);
    str_at(&response.body, "/session_id").to_owned()
}

async fn execute(
    app: &TestApp,
    token: &str,
    session: &str,
    body: Value,
) -> crate::helpers::TestResponse {
    app.post(&format!("{SESSION}/{session}/execute"), Some(token), body)
        .await
}

// ---- Sessions ----

#[tokio::test]
async fn a_session_is_created_read_and_ended_by_its_owner() {
    let app = TestApp::spawn().await;
    let alice = app.token("alice", &["playground"]).await;

    let created = app
        .post(SESSION, Some(&alice), json!({"name": "Trying finance"}))
        .await;

    assert_eq!(created.status, 201, "{}", created.text);
    let id = str_at(&created.body, "/session_id").to_owned();
    assert!(id.starts_with("pgs_"), "{id}");
    assert_eq!(created.body["name"], "Trying finance");
    assert_eq!(created.body["owner"], "alice");
    assert_eq!(created.body["history"], json!([]));
    assert_eq!(created.body["idle_ttl_secs"], 86_400);
    assert!(
        created.body["created_at"]
            .as_str()
            .is_some_and(|t| t.ends_with('Z'))
    );
    assert!(str_at(&created.body, "/expires_at") > str_at(&created.body, "/created_at"));
    assert_eq!(
        created.header("location"),
        Some(format!("http://registry.test{SESSION}/{id}").as_str())
    );

    let read = app.get_as(&format!("{SESSION}/{id}"), &alice).await;
    assert_eq!(read.status, 200, "{}", read.text);
    assert_eq!(read.body["session_id"], id.as_str());

    let ended = app.delete(&format!("{SESSION}/{id}"), &alice).await;
    assert_eq!(ended.status, 204, "{}", ended.text);
    app.get_as(&format!("{SESSION}/{id}"), &alice)
        .await
        .assert_problem(404, "session_not_found");
    app.delete(&format!("{SESSION}/{id}"), &alice)
        .await
        .assert_problem(404, "session_not_found");
}

#[tokio::test]
async fn an_empty_object_creates_an_unnamed_session() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let response = app.post(SESSION, Some(&alice), json!({})).await;
    assert_eq!(response.status, 201, "{}", response.text);
    assert_eq!(response.body["name"], Value::Null);
}

#[tokio::test]
async fn other_owners_get_404_for_every_session_path() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let bob = app.token("bob", &[]).await;
    let id = new_session(&app, &alice).await;
    let path = format!("{SESSION}/{id}");

    app.get_as(&path, &bob)
        .await
        .assert_problem(404, "session_not_found");
    app.delete(&path, &bob)
        .await
        .assert_problem(404, "session_not_found");
    app.post(
        &format!("{path}/discover"),
        Some(&bob),
        json!({"query": "x"}),
    )
    .await
    .assert_problem(404, "session_not_found");
    execute(
        &app,
        &bob,
        &id,
        json!({"agent": "registry.utility.finance",
        "capability": "get_current_price", "input": {"symbol": "BTC"}}),
    )
    .await
    .assert_problem(404, "session_not_found");
    app.get_as(&path, MASTER_KEY)
        .await
        .assert_problem(404, "session_not_found");

    assert_eq!(app.get_as(&path, &alice).await.status, 200);
}

#[tokio::test]
async fn the_playground_scope_and_a_token_are_required() {
    let app = TestApp::spawn().await;
    let writer = app.token("alice", &["agents:write", "a2a"]).await;
    app.post(SESSION, None, json!({}))
        .await
        .assert_problem(401, "unauthorized");
    app.post(SESSION, Some("ar_nope"), json!({}))
        .await
        .assert_problem(401, "unauthorized");
    app.post(SESSION, Some(&writer), json!({}))
        .await
        .assert_problem(403, "forbidden");
}

#[tokio::test]
async fn idle_sessions_expire_and_use_keeps_them_alive() {
    let app = TestApp::spawn_with(|config| config.playground.playground_idle_ttl_secs = 2).await;
    let alice = app.token("alice", &[]).await;
    let kept = new_session(&app, &alice).await;
    let idle = new_session(&app, &alice).await;

    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(800)).await;
        let used = app.get_as(&format!("{SESSION}/{kept}"), &alice).await;
        assert_eq!(used.status, 200, "{}", used.text);
    }

    app.get_as(&format!("{SESSION}/{idle}"), &alice)
        .await
        .assert_problem(404, "session_not_found");
    app.post(
        &format!("{SESSION}/{idle}/discover"),
        Some(&alice),
        json!({}),
    )
    .await
    .assert_problem(404, "session_not_found");
    assert_eq!(
        app.get_as(&format!("{SESSION}/{kept}"), &alice)
            .await
            .status,
        200
    );
    assert!(
        app.state
            .store
            .find_session(&idle)
            .await
            .expect("find")
            .is_none(),
        "an expired session is purged once seen"
    );
}

#[tokio::test]
async fn sessions_and_their_history_survive_a_restart() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let id = new_session(&app, &alice).await;
    let discovered = app
        .post(
            &format!("{SESSION}/{id}/discover"),
            Some(&alice),
            json!({"query": "price"}),
        )
        .await;
    assert_eq!(discovered.status, 200, "{}", discovered.text);
    let before = app.get_as(&format!("{SESSION}/{id}"), &alice).await;

    let app = app.restart().await;

    let after = app.get_as(&format!("{SESSION}/{id}"), &alice).await;
    assert_eq!(after.status, 200, "{}", after.text);
    assert_eq!(after.body["history"], before.body["history"]);
    assert_eq!(after.body["created_at"], before.body["created_at"]);
    assert_eq!(after.body["history"][0]["type"], "discover");
}

#[tokio::test]
async fn malformed_session_requests_get_the_documented_error_shape() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    for body in [
        json!([]),
        json!("x"),
        json!({"name": 5}),
        json!({"name": "a\u{7}b"}),
        json!({"name": "n".repeat(101)}),
    ] {
        app.post(SESSION, Some(&alice), body)
            .await
            .assert_problem(400, "invalid_parameter");
    }
    app.raw(
        axum::http::Method::POST,
        SESSION,
        Some(&alice),
        Some("application/json"),
        "{\"name\": ",
    )
    .await
    .assert_problem(400, "invalid_json");
    app.raw(
        axum::http::Method::POST,
        SESSION,
        Some(&alice),
        Some("text/plain"),
        "hi",
    )
    .await
    .assert_problem(415, "unsupported_media_type");
    let huge = format!("{{\"name\": \"{}\"}}", "x".repeat(1024 * 1024 + 10));
    app.raw(
        axum::http::Method::POST,
        SESSION,
        Some(&alice),
        Some("application/json"),
        huge,
    )
    .await
    .assert_problem(413, "payload_too_large");
    for hostile in [
        "pgs_%00",
        "..%2F..%2Fetc",
        "pgs_'%20OR%201=1--",
        &"x".repeat(3000),
    ] {
        app.get_as(&format!("{SESSION}/{hostile}"), &alice)
            .await
            .assert_problem(404, "session_not_found");
    }
}

// ---- Discover ----

#[tokio::test]
async fn discover_finds_what_the_shared_search_finds_and_remembers_it() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut weather = agent_body("com.example.weather");
    weather["description"] = json!("Weather forecasts for any city.");
    weather["tags"] = json!(["weather"]);
    weather["capabilities"] = json!([{"name": "get_forecast", "description": "Forecast",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}]);
    app.publish_live(&alice, weather).await;
    let id = new_session(&app, &alice).await;
    let body = json!({"query": "weather forecast", "limit": 3, "filters": {"tags": ["weather"]}});

    let discovered = app
        .post(
            &format!("{SESSION}/{id}/discover"),
            Some(&alice),
            body.clone(),
        )
        .await;
    let searched = app.post("/a2a/discover", Some(&alice), body).await;

    assert_eq!(discovered.status, 200, "{}", discovered.text);
    assert_eq!(package_names(&discovered), package_names(&searched));
    assert_eq!(package_names(&discovered), ["com.example.weather"]);
    assert_eq!(discovered.body["total"], searched.body["total"]);
    assert_eq!(discovered.body["limit"], 3);
    assert!(
        discovered.body["summary"]
            .as_str()
            .is_some_and(|s| s.starts_with("Found 1 agent"))
    );
    assert_eq!(discovered.body["step"]["seq"], 1);
    assert_eq!(discovered.body["step"]["type"], "discover");

    let session = app.get_as(&format!("{SESSION}/{id}"), &alice).await;
    let step = &session.body["history"][0];
    assert_eq!(step["type"], "discover");
    assert_eq!(step["query"], "weather forecast");
    assert_eq!(step["filters"], json!({"tags": ["weather"]}));
    assert_eq!(step["agents"][0]["package_name"], "com.example.weather");
    assert!(step["duration_ms"].is_u64());
    let known = &session.body["discovered_agents"][0];
    assert_eq!(known["package_name"], "com.example.weather");
    assert_eq!(
        known["capabilities"][0]["input_schema"]["properties"]["city"]["type"],
        "string"
    );
}

#[tokio::test]
async fn bad_discover_bodies_are_400() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let id = new_session(&app, &alice).await;
    for body in [
        json!([1]),
        json!({"query": 3}),
        json!({"limit": "many"}),
        json!({"filters": []}),
        json!({"filters": {"payment_rail": 7}}),
    ] {
        app.post(&format!("{SESSION}/{id}/discover"), Some(&alice), body)
            .await
            .assert_problem(400, "invalid_parameter");
    }
    let session = app.get_as(&format!("{SESSION}/{id}"), &alice).await;
    assert_eq!(session.body["history"], json!([]), "nothing recorded");
}

// ---- Execute: hosted agents ----

#[tokio::test]
async fn a_hosted_agent_runs_in_process_and_the_step_is_recorded() {
    let (app, fake) = app_with_fakes().await;
    let alice = app.token("alice", &[]).await;
    let id = new_session(&app, &alice).await;

    let response = execute(
        &app,
        &alice,
        &id,
        json!({"agent": "registry.utility.finance",
        "capability": "get_current_price", "input": {"symbol": "BTC"}}),
    )
    .await;

    assert_eq!(response.status, 200, "{}", response.text);
    let step = &response.body;
    assert_eq!(step["status"], "completed");
    assert_eq!(step["error"], Value::Null);
    assert_eq!(step["output"]["symbol"], "BTC");
    assert_eq!(step["output"]["price"], 67012.345);
    assert!(step["duration_ms"].is_u64());
    assert_eq!(step["transport"], "in_process");
    assert_eq!(step["agent"]["package_name"], "registry.utility.finance");
    assert_eq!(step["seq"], 1);
    assert_eq!(fake.hits("/v2/prices/BTC-USD/spot"), 1);

    let session = app.get_as(&format!("{SESSION}/{id}"), &alice).await;
    assert_eq!(session.body["history"][0], response.body);
}

#[tokio::test]
async fn failures_of_a_hosted_agent_are_failed_steps_with_their_code() {
    let (app, _fake) = app_with_fakes().await;
    let alice = app.token("alice", &[]).await;
    let id = new_session(&app, &alice).await;
    let price = |symbol: &str| {
        json!({"agent": "registry.utility.finance",
        "capability": "get_current_price", "input": {"symbol": symbol, "market": "crypto"}})
    };

    let slow = execute(&app, &alice, &id, price("SLOW")).await;
    let unknown = execute(&app, &alice, &id, price("NOPE")).await;
    let malformed = execute(&app, &alice, &id, price("BAD")).await;

    for (response, code) in [
        (&slow, "upstream_timeout"),
        (&unknown, "resource_not_found"),
        (&malformed, "upstream_error"),
    ] {
        assert_eq!(response.status, 200, "{}", response.text);
        assert_eq!(response.body["status"], "failed", "{}", response.text);
        assert_eq!(response.body["output"], Value::Null);
        assert_eq!(response.body["error"]["code"], code, "{}", response.text);
        assert!(
            response.body["error"]["message"]
                .as_str()
                .is_some_and(|m| !m.is_empty())
        );
    }
    assert!(
        slow.body["duration_ms"]
            .as_u64()
            .is_some_and(|ms| ms < 3_000),
        "{}",
        slow.text
    );
    let session = app.get_as(&format!("{SESSION}/{id}"), &alice).await;
    assert_eq!(session.body["history"].as_array().map(Vec::len), Some(3));
}

#[tokio::test]
async fn execute_requests_are_checked_before_anything_runs() {
    let (app, fake) = app_with_fakes().await;
    let alice = app.token("alice", &[]).await;
    let id = new_session(&app, &alice).await;
    let staged = app.publish(&alice, agent_body("com.example.staged")).await;

    for body in [
        json!([]),
        json!({}),
        json!({"agent": 1, "capability": "x"}),
        json!({"agent": "registry.utility.finance"}),
        json!({"agent": "registry.utility.finance", "capability": ""}),
        json!({"agent": "registry.utility.finance", "capability": "get_current_price", "input": "BTC"}),
        json!({"agent": "registry.utility.finance", "capability": "sell_everything"}),
    ] {
        execute(&app, &alice, &id, body)
            .await
            .assert_problem(400, "invalid_parameter");
    }
    for agent in [
        "com.example.nope",
        str_at(&staged, "/id"),
        "agt_'; DROP TABLE agents;--",
    ] {
        execute(
            &app,
            &alice,
            &id,
            json!({"agent": agent, "capability": "x"}),
        )
        .await
        .assert_problem(404, "agent_not_found");
    }
    let invalid = execute(
        &app,
        &alice,
        &id,
        json!({"agent": "registry.utility.finance",
        "capability": "get_current_price", "input": {"symbol": 3, "market": "forex"}}),
    )
    .await;
    invalid.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&invalid), ["input.market", "input.symbol"]);
    let missing = execute(
        &app,
        &alice,
        &id,
        json!({"agent": "registry.utility.finance",
        "capability": "get_current_price"}),
    )
    .await;
    missing.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&missing), ["input.symbol"]);

    let session = app.get_as(&format!("{SESSION}/{id}"), &alice).await;
    assert_eq!(session.body["history"], json!([]), "nothing recorded");
    assert_eq!(fake.hits("/v2/prices/BTC-USD/spot"), 0);
}

// ---- Execute: remote agents over A2A ----

#[derive(Default)]
struct Seen {
    /// Every JSON-RPC request body with its A2A-Version header.
    rpc: Mutex<Vec<(Option<String>, Value)>>,
    legacy: Mutex<Vec<Value>>,
}

/// A small A2A agent: its card, `SendMessage` answering by skill, and a legacy endpoint.
struct RemoteAgent {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl RemoteAgent {
    async fn start() -> Self {
        let seen = Arc::new(Seen::default());
        let router = Router::new()
            .route("/card.json", get(rpc_card))
            .route("/legacy-card.json", get(legacy_card))
            .route("/a2a/v1", post(send_message))
            .route("/legacy", post(legacy_message))
            .with_state(Arc::clone(&seen));
        let addr = crate::helpers::serve_router(router).await;
        Self { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Publish and go live as `package_name` with every test skill; `card` is `/card.json` or
    /// `/legacy-card.json`.
    async fn publish(&self, app: &TestApp, token: &str, package_name: &str, card: &str) {
        let mut body = agent_body(package_name);
        body["manifest_url"] = json!(self.url(card));
        body["url"] = json!(self.url("/legacy"));
        body["capabilities"] = json!(SKILLS.iter().map(|name| json!({"name": name})).chain([
            json!({"name": "forecast", "input_schema": {"type": "object", "required": ["city"],
                "properties": {"city": {"type": "string"}, "days": {"type": "integer", "maximum": 14}}}})
        ]).collect::<Vec<_>>());
        app.publish_live(token, body).await;
    }
}

const SKILLS: [&str; 10] = [
    "echo",
    "task",
    "failed_task",
    "working_task",
    "rpc_error",
    "slow",
    "html",
    "garbage",
    "huge",
    "http_500",
];

fn card_with(interfaces: Value) -> Value {
    json!({"name": "Remote", "description": "A test agent", "version": "1.0.0",
           "supportedInterfaces": interfaces, "capabilities": {},
           "defaultInputModes": ["application/json"], "defaultOutputModes": ["application/json"],
           "skills": []})
}

async fn rpc_card(headers: HeaderMap) -> Json {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    axum::Json(card_with(json!([
        {"url": format!("http://{host}/grpc"), "protocolBinding": "GRPC", "protocolVersion": "1.0"},
        {"url": format!("http://{host}/a2a/v1"), "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
    ])))
}

async fn legacy_card(headers: HeaderMap) -> Json {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or_default();
    axum::Json(card_with(json!([
        {"url": format!("http://{host}/rest"), "protocolBinding": "HTTP+JSON", "protocolVersion": "1.0"}
    ])))
}

type Json = axum::Json<Value>;

async fn send_message(
    State(seen): State<Arc<Seen>>,
    headers: HeaderMap,
    axum::Json(body): Json,
) -> Response {
    let version = headers
        .get("a2a-version")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    seen.rpc.lock().expect("seen").push((version, body.clone()));
    let id = body["id"].clone();
    let input = body
        .pointer("/params/message/parts/0/data")
        .cloned()
        .unwrap_or(Value::Null);
    let skill = body
        .pointer("/params/metadata/skill_id")
        .and_then(Value::as_str)
        .unwrap_or("");
    let result = |result: Value| {
        axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response()
    };
    match skill {
        "echo" | "forecast" => result(json!({"message": {"messageId": "m1", "role": "ROLE_AGENT",
            "parts": [{"data": {"echo": input}, "mediaType": "application/json"}, {"text": "Echoed."}]}})),
        "task" => result(json!({"task": {"id": "t1", "contextId": "c1",
            "status": {"state": "TASK_STATE_COMPLETED"},
            "artifacts": [{"artifactId": "a1", "parts": [{"data": {"done": true, "input": input}}]}]}})),
        "failed_task" => result(
            json!({"task": {"id": "t2", "status": {"state": "TASK_STATE_FAILED",
            "message": {"role": "ROLE_AGENT", "parts": [{"text": "the city is under water"}]}}}}),
        ),
        "working_task" => {
            result(json!({"task": {"id": "t3", "status": {"state": "TASK_STATE_WORKING"}}}))
        }
        "rpc_error" => axum::Json(json!({"jsonrpc": "2.0", "id": id,
            "error": {"code": -32602, "message": "unknown skill"}}))
        .into_response(),
        "slow" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            result(json!({"message": {"role": "ROLE_AGENT", "parts": [{"text": "late"}]}}))
        }
        "html" => ([(header::CONTENT_TYPE, "text/html")], "<html>hello</html>").into_response(),
        "garbage" => (
            [(header::CONTENT_TYPE, "application/json")],
            "{\"jsonrpc\": \"2.0\", \"res",
        )
            .into_response(),
        "huge" => axum::Json(json!({"jsonrpc": "2.0", "id": id,
            "result": {"message": {"parts": [{"text": "x".repeat(2 * 1024 * 1024)}]}}}))
        .into_response(),
        _ => (
            StatusCode::INTERNAL_SERVER_ERROR,
            [(header::CONTENT_TYPE, "text/html")],
            "<h1>oops</h1>",
        )
            .into_response(),
    }
}

async fn legacy_message(State(seen): State<Arc<Seen>>, axum::Json(body): Json) -> Response {
    seen.legacy.lock().expect("seen").push(body.clone());
    match body["action"].as_str() {
        Some("http_500") => (
            StatusCode::INTERNAL_SERVER_ERROR,
            axum::Json(json!({"error": "database on fire"})),
        )
            .into_response(),
        Some("slow") => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            axum::Json(json!({})).into_response()
        }
        _ => axum::Json(json!({"result": {"action": body["action"], "params": body["params"]}}))
            .into_response(),
    }
}

async fn remote_setup() -> (TestApp, RemoteAgent, String, String) {
    let (app, _fake) = app_with_fakes().await;
    let remote = RemoteAgent::start().await;
    let alice = app.token("alice", &[]).await;
    remote
        .publish(&app, &alice, "com.example.remote", "/card.json")
        .await;
    remote
        .publish(&app, &alice, "com.example.oldstyle", "/legacy-card.json")
        .await;
    let id = new_session(&app, &alice).await;
    (app, remote, alice, id)
}

fn run(agent: &str, capability: &str, input: Value) -> Value {
    json!({"agent": agent, "capability": capability, "input": input})
}

#[tokio::test]
async fn a_remote_agent_is_called_with_send_message_on_its_cards_jsonrpc_interface() {
    let (app, remote, alice, id) = remote_setup().await;

    let message = execute(
        &app,
        &alice,
        &id,
        run("com.example.remote", "echo", json!({"city": "Paris"})),
    )
    .await;
    let task = execute(
        &app,
        &alice,
        &id,
        run("com.example.remote", "task", json!({"n": 1})),
    )
    .await;

    assert_eq!(message.status, 200, "{}", message.text);
    assert_eq!(message.body["status"], "completed", "{}", message.text);
    assert_eq!(message.body["output"], json!({"echo": {"city": "Paris"}}));
    assert_eq!(message.body["summary"], "Echoed.");
    assert_eq!(message.body["transport"], "jsonrpc");
    assert_eq!(message.body["endpoint"], remote.url("/a2a/v1"));
    assert_eq!(task.body["status"], "completed", "{}", task.text);
    assert_eq!(
        task.body["output"],
        json!({"done": true, "input": {"n": 1}})
    );

    let calls = remote.seen.rpc.lock().expect("seen").clone();
    assert_eq!(calls.len(), 2);
    let (version, request) = &calls[0];
    assert_eq!(version.as_deref(), Some("1.0"));
    assert_eq!(request["jsonrpc"], "2.0");
    assert_eq!(request["method"], "SendMessage");
    assert_eq!(request["params"]["metadata"]["skill_id"], "echo");
    assert_eq!(request["params"]["message"]["role"], "ROLE_USER");
    assert_eq!(
        request["params"]["message"]["parts"],
        json!([{"data": {"city": "Paris"}, "mediaType": "application/json"}])
    );
    assert!(remote.seen.legacy.lock().expect("seen").is_empty());
}

#[tokio::test]
async fn without_a_jsonrpc_interface_the_legacy_action_params_style_is_used() {
    let (app, remote, alice, id) = remote_setup().await;

    let response = execute(
        &app,
        &alice,
        &id,
        run("com.example.oldstyle", "echo", json!({"q": "hi"})),
    )
    .await;
    let broken = execute(
        &app,
        &alice,
        &id,
        run("com.example.oldstyle", "http_500", json!({})),
    )
    .await;

    assert_eq!(response.body["status"], "completed", "{}", response.text);
    assert_eq!(response.body["transport"], "legacy");
    assert_eq!(response.body["endpoint"], remote.url("/legacy"));
    assert_eq!(
        response.body["output"],
        json!({"result": {"action": "echo", "params": {"q": "hi"}}})
    );
    assert_eq!(
        remote.seen.legacy.lock().expect("seen")[0],
        json!({"action": "echo", "params": {"q": "hi"}})
    );
    assert_eq!(broken.body["status"], "failed");
    assert_eq!(broken.body["error"]["code"], "upstream_error");
    let message = broken.body["error"]["message"].as_str().expect("message");
    assert!(
        message.contains("HTTP 500") && message.contains("database on fire"),
        "{message}"
    );
    assert!(remote.seen.rpc.lock().expect("seen").is_empty());
}

#[tokio::test]
async fn broken_and_slow_agents_give_failed_steps_never_a_hang_or_a_500() {
    let (app, _remote, alice, id) = remote_setup().await;
    let cases = [
        ("failed_task", "upstream_error", "under water"),
        ("working_task", "upstream_error", "does not wait"),
        ("rpc_error", "upstream_error", "-32602"),
        ("slow", "upstream_timeout", "1 s"),
        ("html", "upstream_error", "text/html"),
        ("garbage", "upstream_error", "not valid JSON"),
        ("huge", "upstream_error", "more than"),
        ("http_500", "upstream_error", "HTTP 500"),
    ];
    for (capability, code, says) in cases {
        let started = std::time::Instant::now();
        let response = execute(
            &app,
            &alice,
            &id,
            run("com.example.remote", capability, json!({})),
        )
        .await;
        assert!(
            started.elapsed() < Duration::from_secs(3),
            "{capability} took too long"
        );
        assert_eq!(response.status, 200, "{capability}: {}", response.text);
        assert_eq!(
            response.body["status"], "failed",
            "{capability}: {}",
            response.text
        );
        assert_eq!(
            response.body["error"]["code"], code,
            "{capability}: {}",
            response.text
        );
        let message = response.body["error"]["message"].as_str().expect("message");
        assert!(message.contains(says), "{capability}: {message}");
    }
    let slow_legacy = execute(
        &app,
        &alice,
        &id,
        run("com.example.oldstyle", "slow", json!({})),
    )
    .await;
    assert_eq!(
        slow_legacy.body["error"]["code"], "upstream_timeout",
        "{}",
        slow_legacy.text
    );
    let session = app.get_as(&format!("{SESSION}/{id}"), &alice).await;
    assert_eq!(
        session.body["history"].as_array().map(Vec::len),
        Some(cases.len() + 1)
    );
}

#[tokio::test]
async fn an_unreachable_card_or_agent_is_a_failed_step() {
    let (app, _fake) = app_with_fakes().await;
    let alice = app.token("alice", &[]).await;
    let closed = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind");
    let port = closed.local_addr().expect("addr").port();
    drop(closed);
    let mut body = agent_body("com.example.gone");
    body["manifest_url"] = json!(format!("http://127.0.0.1:{port}/card.json"));
    body["capabilities"] = json!([{"name": "x"}]);
    app.publish_live(&alice, body).await;
    let id = new_session(&app, &alice).await;

    let response = execute(&app, &alice, &id, run("com.example.gone", "x", json!({}))).await;

    assert_eq!(response.body["status"], "failed", "{}", response.text);
    assert_eq!(response.body["error"]["code"], "upstream_error");
    assert!(
        response.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("agent card"))
    );
}

#[tokio::test]
async fn remote_input_is_validated_against_the_capability_schema() {
    let (app, remote, alice, id) = remote_setup().await;

    let refused = execute(
        &app,
        &alice,
        &id,
        run("com.example.remote", "forecast", json!({"days": 30})),
    )
    .await;
    let accepted = execute(
        &app,
        &alice,
        &id,
        run(
            "com.example.remote",
            "forecast",
            json!({"city": "Oslo", "days": 3}),
        ),
    )
    .await;

    refused.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&refused), ["input.city", "input.days"]);
    assert_eq!(accepted.body["status"], "completed", "{}", accepted.text);
    assert_eq!(
        remote.seen.rpc.lock().expect("seen").len(),
        1,
        "only the valid call went out"
    );
}

#[tokio::test]
async fn private_agent_addresses_are_refused_unless_configured() {
    let app =
        TestApp::spawn_with(|config| config.playground.playground_call_timeout_secs = 1).await;
    let remote = RemoteAgent::start().await;
    let alice = app.token("alice", &[]).await;
    remote
        .publish(&app, &alice, "com.example.inside", "/card.json")
        .await;
    let id = new_session(&app, &alice).await;

    let response = execute(
        &app,
        &alice,
        &id,
        run("com.example.inside", "echo", json!({})),
    )
    .await;

    assert_eq!(response.body["status"], "failed", "{}", response.text);
    assert_eq!(response.body["error"]["code"], "invalid_parameter");
    assert!(
        response.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("refused")),
        "{}",
        response.text
    );
    assert!(remote.seen.rpc.lock().expect("seen").is_empty());
}
