//! The registry as an MCP server at `/mcp`: the handshake revisions with their sessions, the
//! stateless revision, the tools and resources, and the protections (origin, tokens, limits).

use std::net::SocketAddr;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Method, Request, header};
use serde_json::{Value, json};

use crate::helpers::{MASTER_KEY, TestApp, TestResponse, agent_body, package_names, packages_in};

const MODERN: &str = "2026-07-28";

/// One MCP request: a JSON-RPC body with extra headers.
fn mcp_request(method: Method, body: Option<&Value>, headers: &[(&str, &str)]) -> Request<Body> {
    let mut builder = Request::builder()
        .method(method)
        .uri("/mcp")
        .header(header::ACCEPT, "application/json, text/event-stream");
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    let body = match body {
        Some(body) => {
            builder = builder.header(header::CONTENT_TYPE, "application/json");
            Body::from(body.to_string())
        }
        None => Body::empty(),
    };
    builder.body(body).expect("request")
}

fn call(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// A client of the handshake revisions: it opens a session and sends it with every request.
struct Session<'a> {
    app: &'a TestApp,
    id: String,
    token: Option<String>,
}

impl<'a> Session<'a> {
    async fn open(app: &'a TestApp, version: &str) -> Session<'a> {
        Self::open_as(app, version, None).await
    }

    async fn open_as(app: &'a TestApp, version: &str, token: Option<&str>) -> Session<'a> {
        let response = initialize(app, version, token).await;
        assert_eq!(response.status, 200, "{}", response.text);
        let id = response
            .header("mcp-session-id")
            .expect("initialize answers Mcp-Session-Id")
            .to_owned();
        let session = Session {
            app,
            id,
            token: token.map(str::to_owned),
        };
        let initialized = session
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(initialized.status, 202, "{}", initialized.text);
        session
    }

    async fn send(&self, body: &Value) -> TestResponse {
        let bearer = self.token.as_ref().map(|token| format!("Bearer {token}"));
        let mut headers = vec![("mcp-session-id", self.id.as_str())];
        if let Some(bearer) = &bearer {
            headers.push(("authorization", bearer.as_str()));
        }
        self.app
            .send(mcp_request(Method::POST, Some(body), &headers))
            .await
    }

    /// The result of a request that must succeed.
    async fn result(&self, method: &str, params: Value) -> Value {
        let response = self.send(&call(7, method, params)).await;
        assert_eq!(response.status, 200, "{}", response.text);
        assert_eq!(response.body["id"], 7, "{}", response.text);
        assert!(
            response.body.get("error").is_none(),
            "{method}: {}",
            response.text
        );
        response.body["result"].clone()
    }

    async fn tool(&self, name: &str, arguments: Value) -> Value {
        self.result("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }
}

async fn initialize(app: &TestApp, version: &str, token: Option<&str>) -> TestResponse {
    let body = call(
        1,
        "initialize",
        json!({"protocolVersion": version, "capabilities": {},
               "clientInfo": {"name": "test", "version": "1.0.0"}}),
    );
    let bearer = token.map(|token| format!("Bearer {token}"));
    let headers: Vec<(&str, &str)> = bearer
        .iter()
        .map(|bearer| ("authorization", bearer.as_str()))
        .collect();
    app.send(mcp_request(Method::POST, Some(&body), &headers))
        .await
}

/// A stateless (2026-07-28) request with its `_meta` and routing headers.
async fn stateless(app: &TestApp, method: &str, params: Value) -> TestResponse {
    stateless_as(app, None, method, params).await
}

/// `stateless`, with `token`'s bearer when there is one.
pub async fn stateless_as(
    app: &TestApp,
    token: Option<&str>,
    method: &str,
    mut params: Value,
) -> TestResponse {
    params["_meta"] = json!({
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
    });
    let name = params
        .get("name")
        .or_else(|| params.get("uri"))
        .and_then(Value::as_str)
        .map(str::to_owned);
    let bearer = token.map(|token| format!("Bearer {token}"));
    let mut headers = vec![("mcp-protocol-version", MODERN), ("mcp-method", method)];
    if let Some(name) = &name {
        headers.push(("mcp-name", name.as_str()));
    }
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    app.send(mcp_request(
        Method::POST,
        Some(&call(9, method, params)),
        &headers,
    ))
    .await
}

/// Agents with varied tags, categories, payment terms and ways in.
async fn catalogue(app: &TestApp) {
    let alice = app.token("alice", &[]).await;
    let agents = [
        json!({"package_name": "com.example.weather", "description": "Weather forecasts for any city.",
               "category": "Weather", "tags": ["forecast"], "url": "https://weather.example.com/a2a/v1",
               "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]}}),
        json!({"package_name": "com.example.storm", "description": "Storm and weather warnings.",
               "category": "Weather", "tags": ["forecast", "alerts"],
               "payment": {"model": "free"}}),
        json!({"package_name": "com.example.tides", "description": "Tide tables and sea weather.",
               "category": "Marine", "tags": ["sea"], "payment": {"model": "freemium"}}),
        json!({"package_name": "io.github.acme.notes", "name": "Acme Notes",
               "description": "Notes for your weather diary, over MCP.", "category": "Productivity",
               "remotes": [{"type": "streamable-http", "url": "https://notes.acme.example/mcp"}],
               "packages": [{"registry_type": "npm", "identifier": "@acme/notes", "version": "1.4.0",
                             "transport": {"type": "stdio"}}]}),
    ];
    for fields in agents {
        let package = fields["package_name"].as_str().expect("package_name");
        let mut body = agent_body(package);
        for (key, value) in fields.as_object().expect("object") {
            body[key] = value.clone();
        }
        app.publish_live(&alice, body).await;
    }
}

fn tool_names(list: &Value) -> Vec<&str> {
    list["tools"]
        .as_array()
        .expect("tools")
        .iter()
        .map(|tool| tool["name"].as_str().expect("name"))
        .collect()
}

#[tokio::test]
async fn initialize_negotiates_the_revision_and_opens_a_session() {
    let app = TestApp::spawn().await;

    let current = initialize(&app, "2025-11-25", None).await;
    let earlier = initialize(&app, "2025-03-26", None).await;
    let unknown = initialize(&app, "2099-01-01", None).await;

    assert_eq!(current.status, 200, "{}", current.text);
    assert_eq!(current.header("content-type"), Some("application/json"));
    let result = &current.body["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25");
    assert_eq!(result["serverInfo"]["name"], "agent-registry");
    assert!(result["capabilities"]["tools"].is_object());
    assert!(result["capabilities"]["resources"].is_object());
    assert!(result["instructions"].is_string());
    assert_eq!(earlier.body["result"]["protocolVersion"], "2025-03-26");
    assert_eq!(
        unknown.body["result"]["protocolVersion"], "2025-11-25",
        "an unknown revision gets the newest handshake one"
    );
    let ids = [&current, &earlier, &unknown].map(|r| r.header("mcp-session-id").map(str::to_owned));
    assert!(ids.iter().all(Option::is_some));
    assert_ne!(ids[0], ids[1], "a session each");

    let session = Session::open(&app, "2025-06-18").await;
    assert_eq!(session.result("ping", json!({})).await, json!({}));
}

#[tokio::test]
async fn the_tools_have_input_and_output_schemas_and_the_resources_their_templates() {
    let app = TestApp::spawn().await;
    let session = Session::open(&app, "2025-11-25").await;

    let tools = session.result("tools/list", json!({})).await;
    let resources = session.result("resources/list", json!({})).await;
    let templates = session.result("resources/templates/list", json!({})).await;

    assert_eq!(
        tool_names(&tools),
        [
            "search_agents",
            "get_agent",
            "get_agent_card",
            "list_categories"
        ]
    );
    for tool in tools["tools"].as_array().expect("tools") {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["annotations"]["readOnlyHint"], true);
        assert!(tool["description"].as_str().is_some_and(|d| d.len() > 40));
    }
    assert_eq!(resources["resources"][0]["uri"], "registry://agent-card");
    let uri_templates: Vec<&str> = templates["resourceTemplates"]
        .as_array()
        .expect("templates")
        .iter()
        .map(|template| template["uriTemplate"].as_str().expect("uriTemplate"))
        .collect();
    assert_eq!(
        uri_templates,
        ["agent://{package_name}", "agent-card://{package_name}"]
    );
    let old = Session::open(&app, "2025-03-26").await;
    let old_tools = old.result("tools/list", json!({})).await;
    assert!(
        old_tools["tools"]
            .as_array()
            .expect("tools")
            .iter()
            .all(|tool| tool.get("outputSchema").is_none()),
        "2025-03-26 has no output schemas"
    );
}

#[tokio::test]
async fn search_agents_over_mcp_returns_the_rest_search_in_the_same_order() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    let session = Session::open(&app, "2025-11-25").await;
    let cases = [
        json!({"query": "weather"}),
        json!({"query": "weather forecast", "limit": 2}),
        json!({"query": "weather", "tags": ["forecast"]}),
        json!({"query": "sea weather", "payment_model": ["free", "freemium"]}),
        json!({"query": "", "category": ["Weather"], "sort": "name"}),
        json!({"query": "price of bitcoin", "limit": 3}),
        json!({"query": "weather", "payment_rail": ["base:usdc"], "verification_level": "unverified"}),
        json!({"limit": 100, "health": ["unknown"], "collapse": false}),
    ];

    for arguments in cases {
        let rest = app
            .post("/public/agents/search", None, arguments.clone())
            .await;
        let over_mcp = session.tool("search_agents", arguments.clone()).await;
        let over_stateless = stateless(
            &app,
            "tools/call",
            json!({"name": "search_agents", "arguments": arguments}),
        )
        .await;

        assert_eq!(rest.status, 200, "{arguments}: {}", rest.text);
        let expected = package_names(&rest);
        assert_eq!(over_mcp["isError"], false, "{arguments}: {over_mcp}");
        let structured = &over_mcp["structuredContent"];
        assert_eq!(packages_in(structured), expected, "{arguments}");
        assert_eq!(structured["total"], rest.body["total"], "{arguments}");
        assert_eq!(structured["next_cursor"], rest.body["next_cursor"]);
        assert_eq!(
            packages_in(&over_stateless.body["result"]["structuredContent"]),
            expected,
            "{arguments} (stateless)"
        );
        let text = over_mcp["content"][0]["text"].as_str().expect("text");
        assert!(text.starts_with("Found "), "{text}");
    }
}

#[tokio::test]
async fn the_cursor_of_a_search_pages_on_like_the_rest_search() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    let session = Session::open(&app, "2025-11-25").await;

    let first = session
        .tool("search_agents", json!({"query": "weather", "limit": 2}))
        .await;
    let cursor = first["structuredContent"]["next_cursor"]
        .as_str()
        .expect("more than one page");
    let second = session
        .tool(
            "search_agents",
            json!({"query": "weather", "limit": 2, "cursor": cursor}),
        )
        .await;
    let rest = app
        .post(
            "/public/agents/search",
            None,
            json!({"query": "weather", "limit": 2, "cursor": cursor}),
        )
        .await;

    assert_eq!(
        packages_in(&second["structuredContent"]),
        package_names(&rest)
    );
    let shown: Vec<String> = packages_in(&first["structuredContent"]);
    assert!(
        packages_in(&second["structuredContent"])
            .iter()
            .all(|package| !shown.contains(package)),
        "pages do not repeat"
    );
}

#[tokio::test]
async fn bad_tool_arguments_are_tool_errors_and_an_unknown_tool_a_protocol_error() {
    let app = TestApp::spawn().await;
    let session = Session::open(&app, "2025-11-25").await;
    let cases = [
        ("search_agents", json!({"limit": "many"}), "limit"),
        ("search_agents", json!({"q": "weather"}), "'q'"),
        ("search_agents", json!({"query": 42}), "query"),
        (
            "search_agents",
            json!({"payment_model": ["gratis"]}),
            "gratis",
        ),
        ("search_agents", json!({"sort": "random"}), "sort"),
        ("search_agents", json!([1, 2]), "object"),
        ("list_categories", json!({"limit": 3}), "'limit'"),
        ("get_agent", json!({}), "required"),
        ("get_agent", json!({"agent": 7}), "string"),
        (
            "get_agent",
            json!({"agent": "com.example.nope"}),
            "com.example.nope",
        ),
        ("get_agent_card", json!({"agent": "  "}), "empty"),
        ("get_agent_card", json!({"agent": "agt_nope"}), "agt_nope"),
    ];

    for (tool, arguments, mentioned) in cases {
        let result = session.tool(tool, arguments.clone()).await;

        assert_eq!(result["isError"], true, "{tool} {arguments}: {result}");
        assert!(result.get("structuredContent").is_none());
        let text = result["content"][0]["text"].as_str().expect("a message");
        assert!(text.contains(mentioned), "{tool} {arguments}: {text}");
    }
    let unknown = session
        .send(&call(3, "tools/call", json!({"name": "drop_tables"})))
        .await;
    assert_eq!(unknown.status, 200);
    assert_eq!(unknown.body["error"]["code"], -32602);
    assert!(
        unknown.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("search_agents"))
    );
    let nameless = session.send(&call(4, "tools/call", json!({}))).await;
    assert_eq!(nameless.body["error"]["code"], -32602);
    let unknown_method = session.send(&call(5, "prompts/list", json!({}))).await;
    assert_eq!(unknown_method.body["error"]["code"], -32601);
}

#[tokio::test]
async fn get_agent_answers_the_public_record() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    let session = Session::open(&app, "2025-06-18").await;
    let rest = app.get("/public/agents/com.example.weather").await;

    let by_name = session
        .tool("get_agent", json!({"agent": "com.example.weather"}))
        .await;
    let id = rest.body["id"].as_str().expect("id");
    let by_id = session.tool("get_agent", json!({"agent": id})).await;

    assert_eq!(by_name["structuredContent"], rest.body);
    assert_eq!(by_id["structuredContent"], rest.body);
    let text = by_name["content"][0]["text"].as_str().expect("text");
    assert!(text.contains("com.example.weather"), "{text}");
    assert!(
        text.contains("https://weather.example.com/a2a/v1"),
        "{text}"
    );
}

#[tokio::test]
async fn get_agent_card_gives_the_signed_card_or_the_server_json_and_how_to_connect() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    let session = Session::open(&app, "2025-11-25").await;

    let a2a = session
        .tool("get_agent_card", json!({"agent": "com.example.weather"}))
        .await;
    let mcp = session
        .tool("get_agent_card", json!({"agent": "io.github.acme.notes"}))
        .await;

    let a2a = &a2a["structuredContent"];
    let served = app.get("/public/agents/resolve/com.example.weather").await;
    assert_eq!(a2a["a2a_card"]["name"], served.body["name"]);
    assert!(
        a2a["a2a_card"]["signatures"][0]["protected"].is_string(),
        "signed as served: {}",
        a2a["a2a_card"]
    );
    assert!(a2a.get("server_json").is_none());
    assert_eq!(
        a2a["connect"]["a2a"][0]["url"],
        "https://weather.example.com/a2a/v1"
    );
    let mcp = &mcp["structuredContent"];
    assert!(mcp.get("a2a_card").is_none(), "an MCP server only");
    assert_eq!(mcp["server_json"]["name"], "io.github.acme/notes");
    assert_eq!(
        mcp["connect"]["mcp_remotes"][0]["url"],
        "https://notes.acme.example/mcp"
    );
    let package = &mcp["connect"]["mcp_packages"][0];
    assert_eq!(package["command"], "npx");
    assert_eq!(package["args"], json!(["-y", "@acme/notes@1.4.0"]));
}

#[tokio::test]
async fn list_categories_counts_the_facets_of_the_matches() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    let session = Session::open(&app, "2025-11-25").await;

    let all = session.tool("list_categories", json!({})).await;
    let forecast = session
        .tool("list_categories", json!({"tags": ["forecast"]}))
        .await;

    let rest = app.get("/public/agents?facets=true&limit=1").await;
    let all = &all["structuredContent"];
    assert_eq!(all["total"], rest.body["total"]);
    assert_eq!(all["category"], rest.body["facets"]["category"]);
    assert_eq!(all["tags"], rest.body["facets"]["tags"]);
    assert_eq!(all["category"]["Weather"], 2);
    let forecast = &forecast["structuredContent"];
    assert_eq!(forecast["total"], 2);
    assert_eq!(forecast["category"], json!({"Weather": 2}));
}

#[tokio::test]
async fn resources_read_records_cards_and_the_registry_card() {
    let app = TestApp::spawn().await;
    catalogue(&app).await;
    let session = Session::open(&app, "2025-11-25").await;
    let read = |uri: &str| {
        let session = &session;
        let uri = uri.to_owned();
        async move {
            let result = session.result("resources/read", json!({"uri": uri})).await;
            let content = &result["contents"][0];
            assert_eq!(content["uri"], uri.as_str());
            assert_eq!(content["mimeType"], "application/json");
            serde_json::from_str::<Value>(content["text"].as_str().expect("text")).expect("JSON")
        }
    };

    let record = read("agent://com.example.weather").await;
    let card = read("agent-card://com.example.weather").await;
    let server = read("agent-card://io.github.acme.notes").await;
    let registry = read("registry://agent-card").await;

    assert_eq!(
        record,
        app.get("/public/agents/com.example.weather").await.body
    );
    assert!(card["signatures"].is_array(), "{card}");
    assert_eq!(
        card["supportedInterfaces"][0]["url"],
        "https://weather.example.com/a2a/v1"
    );
    assert_eq!(
        server["name"], "io.github.acme/notes",
        "an MCP server's server.json"
    );
    assert_eq!(registry["name"], "Agent Registry");
    assert!(registry["signatures"].is_array());

    let unknown = session
        .send(&call(
            8,
            "resources/read",
            json!({"uri": "agent://com.example.nope"}),
        ))
        .await;
    assert_eq!(unknown.body["error"]["code"], -32002);
    assert_eq!(
        unknown.body["error"]["data"]["uri"],
        "agent://com.example.nope"
    );
    for bad in ["agent://", "agent://a/b", "file:///etc/passwd"] {
        let response = session
            .send(&call(9, "resources/read", json!({"uri": bad})))
            .await;
        assert_eq!(response.body["error"]["code"], -32602, "{bad}");
    }
    let modern = stateless(
        &app,
        "resources/read",
        json!({"uri": "agent://com.example.nope"}),
    )
    .await;
    assert_eq!(modern.status, 400, "{}", modern.text);
    assert_eq!(
        modern.body["error"]["code"], -32602,
        "2026-07-28 says invalid params"
    );
}

#[tokio::test]
async fn stateless_requests_carry_their_revision_and_need_no_session() {
    let app = TestApp::spawn().await;

    let discover = stateless(&app, "server/discover", json!({})).await;
    let tools = stateless(&app, "tools/list", json!({})).await;
    let ping = stateless(&app, "ping", json!({})).await;

    assert_eq!(discover.status, 200, "{}", discover.text);
    let result = &discover.body["result"];
    assert_eq!(result["supportedVersions"][0], MODERN);
    assert!(
        result["supportedVersions"]
            .as_array()
            .is_some_and(|versions| versions.contains(&json!("2025-11-25")))
    );
    assert_eq!(result["resultType"], "complete");
    assert!(result["ttlMs"].is_u64());
    assert_eq!(result["cacheScope"], "public");
    assert!(discover.header("mcp-session-id").is_none(), "no sessions");
    assert_eq!(tools.body["result"]["resultType"], "complete");
    assert_eq!(
        tools.body["result"]["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
        "agent-registry"
    );
    assert_eq!(tool_names(&tools.body["result"]).len(), 4);
    assert_eq!(ping.status, 404, "ping is gone in 2026-07-28");
    assert_eq!(ping.body["error"]["code"], -32601);
}

#[tokio::test]
async fn stateless_requests_whose_headers_or_meta_disagree_are_refused() {
    let app = TestApp::spawn().await;
    let meta = json!({"io.modelcontextprotocol/protocolVersion": MODERN,
                      "io.modelcontextprotocol/clientCapabilities": {}});
    let send = |headers: Vec<(&'static str, &'static str)>, body: Value| {
        let app = &app;
        async move {
            app.send(mcp_request(Method::POST, Some(&body), &headers))
                .await
        }
    };
    let list = call(1, "tools/list", json!({"_meta": meta}));
    let search = call(
        2,
        "tools/call",
        json!({"name": "search_agents", "_meta": meta}),
    );

    let wrong_method = send(
        vec![
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
        ],
        list.clone(),
    )
    .await;
    let no_name = send(
        vec![
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
        ],
        search.clone(),
    )
    .await;
    let other_name = send(
        vec![
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", "get_agent"),
        ],
        search.clone(),
    )
    .await;
    let encoded_name = send(
        vec![
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?c2VhcmNoX2FnZW50cw==?="),
        ],
        search,
    )
    .await;
    let unknown_version = send(
        vec![
            ("mcp-protocol-version", "2099-01-01"),
            ("mcp-method", "tools/list"),
        ],
        call(
            3,
            "tools/list",
            json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2099-01-01",
            "io.modelcontextprotocol/clientCapabilities": {}}}),
        ),
    )
    .await;
    let no_meta = send(
        vec![
            ("mcp-protocol-version", MODERN),
            ("mcp-method", "tools/list"),
        ],
        call(4, "tools/list", json!({})),
    )
    .await;

    for response in [&wrong_method, &no_name, &other_name] {
        assert_eq!(response.status, 400, "{}", response.text);
        assert_eq!(response.body["error"]["code"], -32020, "{}", response.text);
    }
    assert_eq!(encoded_name.status, 200, "{}", encoded_name.text);
    assert_eq!(unknown_version.status, 400);
    assert_eq!(unknown_version.body["error"]["code"], -32022);
    assert_eq!(
        unknown_version.body["error"]["data"]["requested"],
        "2099-01-01"
    );
    assert_eq!(
        unknown_version.body["error"]["data"]["supported"][0],
        MODERN
    );
    assert_eq!(no_meta.status, 400);
    assert_eq!(no_meta.body["error"]["code"], -32602);
}

#[tokio::test]
async fn a_request_without_a_session_is_400_and_with_an_unknown_one_404() {
    let app = TestApp::spawn().await;

    let without = app
        .send(mcp_request(
            Method::POST,
            Some(&call(1, "tools/list", json!({}))),
            &[],
        ))
        .await;
    let unknown = app
        .send(mcp_request(
            Method::POST,
            Some(&call(2, "tools/list", json!({}))),
            &[("mcp-session-id", "mcp_nope")],
        ))
        .await;

    assert_eq!(without.status, 400, "{}", without.text);
    assert_eq!(without.body["error"]["code"], -32600);
    assert_eq!(without.body["id"], 1);
    assert_eq!(unknown.status, 404, "{}", unknown.text);
    assert_eq!(unknown.body["id"], 2);
}

#[tokio::test]
async fn delete_ends_the_session() {
    let app = TestApp::spawn().await;
    let session = Session::open(&app, "2025-11-25").await;
    let end = |id: &str| {
        let id = id.to_owned();
        let app = &app;
        async move {
            app.send(mcp_request(
                Method::DELETE,
                None,
                &[("mcp-session-id", &id)],
            ))
            .await
        }
    };

    let ended = end(&session.id).await;
    let after = session.send(&call(2, "tools/list", json!({}))).await;
    let again = end(&session.id).await;
    let nameless = app.send(mcp_request(Method::DELETE, None, &[])).await;

    assert_eq!(ended.status, 204, "{}", ended.text);
    assert_eq!(after.status, 404, "{}", after.text);
    assert_eq!(again.status, 404);
    assert_eq!(nameless.status, 400);
}

#[tokio::test]
async fn a_thousand_sessions_never_closed_are_held_to_the_cap() {
    let app = TestApp::spawn_with(|config| config.mcp.mcp_max_sessions = 50).await;
    let mut ids = Vec::with_capacity(1000);

    for _ in 0..1000 {
        let response = initialize(&app, "2025-11-25", None).await;
        assert_eq!(response.status, 200, "{}", response.text);
        ids.push(response.header("mcp-session-id").expect("id").to_owned());
    }

    let mut live = 0;
    for id in &ids {
        let response = app
            .send(mcp_request(
                Method::POST,
                Some(&call(1, "ping", json!({}))),
                &[("mcp-session-id", id)],
            ))
            .await;
        if response.status == 200 {
            live += 1;
        } else {
            assert_eq!(response.status, 404, "{}", response.text);
        }
    }
    assert_eq!(live, 50, "only the cap's worth of sessions is kept");
    let newest = app
        .send(mcp_request(
            Method::POST,
            Some(&call(1, "ping", json!({}))),
            &[("mcp-session-id", &ids[999])],
        ))
        .await;
    assert_eq!(newest.status, 200, "the newest sessions are the ones kept");
}

#[tokio::test]
async fn an_idle_session_expires() {
    let app = TestApp::spawn_with(|config| config.mcp.mcp_session_idle_secs = 1).await;
    let session = Session::open(&app, "2025-11-25").await;

    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    let response = session.send(&call(2, "tools/list", json!({}))).await;

    assert_eq!(response.status, 404, "{}", response.text);
}

#[tokio::test]
async fn a_foreign_origin_is_refused_and_the_registrys_own_or_a_configured_one_admitted() {
    let app = TestApp::spawn_with(|config| {
        config.mcp.mcp_allowed_origins = vec!["http://localhost:6274".to_owned()];
    })
    .await;
    let body = call(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );
    let from = |origin: &'static str| {
        let app = &app;
        let body = body.clone();
        async move {
            app.send(mcp_request(
                Method::POST,
                Some(&body),
                &[("origin", origin)],
            ))
            .await
        }
    };

    let foreign = from("http://evil.example").await;
    let rebinding = from("http://registry.test.evil.example").await;
    let opaque = from("null").await;
    let own = from("http://registry.test").await;
    let configured = from("http://localhost:6274").await;
    let get_foreign = app
        .send(mcp_request(
            Method::GET,
            None,
            &[("origin", "http://evil.example")],
        ))
        .await;

    for refused in [&foreign, &rebinding, &opaque, &get_foreign] {
        assert_eq!(refused.status, 403, "{}", refused.text);
        assert_eq!(refused.body["error"]["code"], -32600);
        assert!(refused.header("mcp-session-id").is_none());
    }
    assert_eq!(own.status, 200, "{}", own.text);
    assert_eq!(configured.status, 200, "{}", configured.text);
}

#[tokio::test]
async fn a_bearer_token_when_sent_is_checked_as_on_the_rest_api() {
    let app = TestApp::spawn().await;
    let alice = app.token("alice", &["a2a"]).await;

    let invalid = initialize(&app, "2025-11-25", Some("ar_not-a-token")).await;
    let master = initialize(&app, "2025-11-25", Some(MASTER_KEY)).await;
    let session = Session::open_as(&app, "2025-11-25", Some(&alice)).await;
    let malformed = app
        .send(mcp_request(
            Method::POST,
            Some(&call(1, "initialize", json!({}))),
            &[("authorization", "Basic YTpi")],
        ))
        .await;

    assert_eq!(invalid.status, 401, "{}", invalid.text);
    assert_eq!(invalid.header("www-authenticate"), Some("Bearer"));
    assert_eq!(invalid.body["error"]["data"]["code"], "unauthorized");
    assert_eq!(malformed.status, 401, "{}", malformed.text);
    assert_eq!(master.status, 200, "{}", master.text);
    let anonymous = app
        .send(mcp_request(
            Method::POST,
            Some(&call(2, "tools/list", json!({}))),
            &[("mcp-session-id", &session.id)],
        ))
        .await;
    assert_eq!(
        anonymous.status, 404,
        "a session is its opener's: the id alone is not enough"
    );
    assert_eq!(session.tool_names().await.len(), 4);
    let revoked_id = app.get_as("/api/tokens", MASTER_KEY).await.body["tokens"]
        .as_array()
        .and_then(|tokens| tokens.iter().find(|t| t["owner"] == "alice"))
        .and_then(|token| token["id"].as_str())
        .map(str::to_owned)
        .expect("alice's token");
    app.delete(&format!("/api/tokens/{revoked_id}"), MASTER_KEY)
        .await;
    let revoked = session.send(&call(3, "tools/list", json!({}))).await;
    assert_eq!(revoked.status, 401, "{}", revoked.text);
}

impl Session<'_> {
    async fn tool_names(&self) -> Vec<String> {
        let list = self.result("tools/list", json!({})).await;
        tool_names(&list).into_iter().map(str::to_owned).collect()
    }
}

#[tokio::test]
async fn malformed_oversized_and_unacceptable_requests_get_clear_errors() {
    let app = TestApp::spawn().await;
    let raw = |body: Body, content_type: &'static str, accept: &'static str| {
        let app = &app;
        async move {
            app.send(
                Request::builder()
                    .method(Method::POST)
                    .uri("/mcp")
                    .header(header::CONTENT_TYPE, content_type)
                    .header(header::ACCEPT, accept)
                    .body(body)
                    .expect("request"),
            )
            .await
        }
    };
    let both = "application/json, text/event-stream";

    let not_json = raw(Body::from("{nope"), "application/json", both).await;
    let batch = raw(
        Body::from(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#),
        "application/json",
        both,
    )
    .await;
    let text = raw(Body::from("ping"), "text/plain", both).await;
    let html_only = raw(Body::from("{}"), "application/json", "text/html").await;
    let huge = raw(
        Body::from(format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"ping","params":{{"x":"{}"}}}}"#,
            "a".repeat(1024 * 1024)
        )),
        "application/json",
        both,
    )
    .await;
    let deep = raw(
        Body::from(format!("{}{}", "[".repeat(200), "]".repeat(200))),
        "application/json",
        both,
    )
    .await;
    let get = app.send(mcp_request(Method::GET, None, &[])).await;

    assert_eq!(not_json.status, 400);
    assert_eq!(not_json.body["error"]["code"], -32700);
    assert_eq!(batch.status, 400);
    assert_eq!(batch.body["error"]["code"], -32600);
    assert_eq!(text.status, 415, "{}", text.text);
    assert_eq!(html_only.status, 406, "{}", html_only.text);
    assert_eq!(huge.status, 413, "{}", huge.text);
    assert_eq!(huge.body["error"]["code"], -32600);
    assert_eq!(deep.status, 400, "{}", deep.text);
    assert_eq!(get.status, 405);
    assert_eq!(get.header("allow"), Some("POST, DELETE"));
    for response in [&not_json, &batch, &text, &html_only, &huge, &deep, &get] {
        assert_eq!(response.header("content-type"), Some("application/json"));
        assert_eq!(response.body["jsonrpc"], "2.0", "{}", response.text);
    }
}

#[tokio::test]
async fn a_client_that_accepts_only_an_event_stream_gets_one_event() {
    let app = TestApp::spawn().await;
    let body = call(
        1,
        "initialize",
        json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
    );

    let response = app
        .send(
            Request::builder()
                .method(Method::POST)
                .uri("/mcp")
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::ACCEPT, "text/event-stream")
                .body(Body::from(body.to_string()))
                .expect("request"),
        )
        .await;

    assert_eq!(response.status, 200);
    assert_eq!(response.header("content-type"), Some("text/event-stream"));
    assert!(response.header("mcp-session-id").is_some());
    let data = response
        .text
        .strip_prefix("event: message\ndata: ")
        .and_then(|rest| rest.strip_suffix("\n\n"))
        .expect("one message event");
    let message: Value = serde_json::from_str(data).expect("JSON");
    assert_eq!(message["result"]["protocolVersion"], "2025-11-25");
}

#[tokio::test]
async fn the_mcp_endpoint_has_the_public_paths_rate_limit() {
    let app = TestApp::spawn_with(|config| {
        config.rate_limit_per_minute = 1;
        config.rate_limit_burst = 1;
        config.rate_limit_exempt_loopback = false;
    })
    .await;
    let from_client = || {
        let mut request = mcp_request(
            Method::POST,
            Some(&call(
                1,
                "initialize",
                json!({"protocolVersion": "2025-11-25", "capabilities": {}}),
            )),
            &[],
        );
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::from(([203, 0, 113, 9], 40_000))));
        request
    };

    let first = app.send(from_client()).await;
    let second = app.send(from_client()).await;

    assert_eq!(first.status, 200, "{}", first.text);
    second.assert_problem(429, "rate_limited");
    assert!(second.header("retry-after").is_some());
}

#[tokio::test]
async fn the_registry_card_and_its_mcp_server_entry_name_the_endpoint() {
    let app = TestApp::spawn().await;

    let card = app.get("/.well-known/agent-card.json").await;
    let entry = app
        .get("/v0.1/servers/registry%2Fagent-registry/versions/latest")
        .await;
    let found = app.get("/v0.1/servers?search=registry").await;

    let mcp = card.body["capabilities"]["extensions"]
        .as_array()
        .expect("extensions")
        .iter()
        .find(|extension| extension["params"]["transport"] == "streamable-http")
        .expect("the card names the MCP endpoint");
    assert_eq!(mcp["params"]["url"], "http://registry.test/mcp");
    assert_eq!(entry.status, 200, "{}", entry.text);
    assert_eq!(
        entry.body["server"]["remotes"],
        json!([{"type": "streamable-http", "url": "http://registry.test/mcp"}])
    );
    assert!(
        found.body["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .any(|server| server["server"]["name"] == "registry/agent-registry"),
        "{}",
        found.text
    );
    let resolved = app
        .get("/public/agents/resolve/registry.agent-registry")
        .await;
    assert_eq!(resolved.body["name"], card.body["name"]);
    assert_eq!(resolved.body["skills"], card.body["skills"]);
}

#[tokio::test]
async fn a_search_counts_the_agents_it_matches_not_their_neighbours() {
    let app = TestApp::spawn().await;
    let session = Session::open(&app, "2025-11-25").await;

    let found = session
        .tool("search_agents", json!({"query": "wikipedia"}))
        .await;

    assert_eq!(found["isError"], false, "{found}");
    assert_eq!(found["structuredContent"]["total"], 1, "{found}");
    assert_eq!(
        packages_in(&found["structuredContent"]),
        ["registry.utility.wiki"]
    );
    let text = found["content"][0]["text"].as_str().expect("text");
    assert!(text.starts_with("Found 1 agent "), "{text}");
    let nothing = session
        .tool("search_agents", json!({"query": "zzzqqq"}))
        .await;
    assert_eq!(nothing["structuredContent"]["total"], 0, "{nothing}");
}
