//! The MCP Registry read API: agents with MCP remotes or packages as `server.json` documents,
//! checked against the fields and types the published `server.json` schema requires.

use serde_json::{Value, json};

use crate::helpers::TestApp;

/// The `server.json` schema's rules that bind an answer (2025-09-29 schema).
fn assert_server_json(server: &Value) {
    let object = server.as_object().expect("server is an object");
    let name = server["name"].as_str().expect("name is a string");
    let (namespace, short) = name.split_once('/').expect("one slash");
    assert!(
        (3..=200).contains(&name.len())
            && !namespace.is_empty()
            && namespace
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
            && !short.is_empty()
            && short
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
        "name {name}"
    );
    let description = server["description"].as_str().expect("description");
    assert!(
        (1..=100).contains(&description.chars().count()),
        "{description}"
    );
    let version = server["version"].as_str().expect("version");
    assert!(!version.is_empty() && version.len() <= 255);
    if let Some(repository) = object.get("repository") {
        assert!(repository["url"].is_string() && repository["source"].is_string());
    }
    for package in server["packages"].as_array().into_iter().flatten() {
        for key in package.as_object().expect("package").keys() {
            assert!(
                [
                    "registryType",
                    "registryBaseUrl",
                    "identifier",
                    "version",
                    "fileSha256",
                    "runtimeHint",
                    "transport",
                    "runtimeArguments",
                    "packageArguments",
                    "environmentVariables",
                ]
                .contains(&key.as_str()),
                "a package has no member {key}"
            );
        }
        for key in ["registryType", "identifier", "version"] {
            assert!(package[key].is_string(), "{key}: {package}");
        }
        assert_ne!(package["version"], "latest");
        let transport = package["transport"]["type"].as_str().expect("transport");
        assert!(["stdio", "streamable-http", "sse"].contains(&transport));
        if transport != "stdio" {
            assert!(package["transport"]["url"].is_string());
        }
        for variable in package["environmentVariables"]
            .as_array()
            .into_iter()
            .flatten()
        {
            assert!(variable["name"].is_string());
        }
    }
    for remote in server["remotes"].as_array().into_iter().flatten() {
        assert!(["streamable-http", "sse"].contains(&remote["type"].as_str().expect("type")));
        assert!(remote["url"].is_string());
    }
}

async fn publish_servers(app: &TestApp) {
    let alice = app.token("alice", &[]).await;
    app.publish_live(
        &alice,
        json!({
            "package_name": "io.github.acme.weather",
            "name": "Acme Weather",
            "description": "Weather forecasts over MCP for any city on earth, with alerts, radar tiles and \
                            historical data going back fifty years.",
            "version": "2.1.0",
            "remotes": [{"type": "streamable-http", "url": "https://mcp.acme.example/weather"}],
            "packages": [
                {"registry_type": "npm", "identifier": "@acme/weather-mcp", "version": "2.1.0",
                 "environment_variables": [{"name": "ACME_KEY", "is_secret": true}]},
                {"registry_type": "pypi", "identifier": "acme-weather-mcp"}
            ],
            "repository": {"url": "https://github.com/acme/weather-mcp", "source": "github"},
        }),
    )
    .await;
    app.publish_live(
        &alice,
        json!({
            "package_name": "io.github.acme.notes",
            "name": "Acme Notes",
            "description": "Notes over MCP.",
            "packages": [{"registry_type": "oci", "identifier": "acme/notes", "version": "1"}],
        }),
    )
    .await;
    app.publish_live(
        &alice,
        json!({"package_name": "com.example.a2a-only", "name": "A2A only",
               "description": "Speaks A2A, not MCP.", "url": "https://a2a.example.com/a2a/v1"}),
    )
    .await;
}

#[tokio::test]
async fn the_server_list_serves_mcp_servers_as_server_json() {
    let app = TestApp::spawn().await;
    publish_servers(&app).await;

    let response = app.get("/v0.1/servers").await;

    assert_eq!(response.status, 200, "{}", response.text);
    let servers = response.body["servers"].as_array().expect("servers");
    let names: Vec<&str> = servers
        .iter()
        .map(|entry| entry["server"]["name"].as_str().expect("name"))
        .collect();
    assert_eq!(
        names,
        [
            "io.github.acme/notes",
            "io.github.acme/weather",
            "registry/agent-registry"
        ],
        "MCP servers only (the registry itself is one), by name"
    );
    assert_eq!(response.body["metadata"]["count"], 3);
    for entry in servers {
        assert_server_json(&entry["server"]);
        let official = &entry["_meta"]["io.modelcontextprotocol.registry/official"];
        assert_eq!(official["status"], "active");
        assert_eq!(official["isLatest"], true);
        assert!(official["updatedAt"].is_string());
    }
    let weather = &servers[1]["server"];
    assert_eq!(weather["version"], "2.1.0");
    assert_eq!(
        weather["packages"].as_array().map(Vec::len),
        Some(1),
        "the versioned package"
    );
    assert_eq!(weather["packages"][0]["registryType"], "npm");
    assert_eq!(weather["remotes"][0]["type"], "streamable-http");
    let listed = &weather["_meta"]["io.modelcontextprotocol.registry/publisher-provided"]["io.github.agent-registry/listing"];
    assert_eq!(
        listed["unversioned_packages"][0]["identifier"],
        "acme-weather-mcp"
    );
    assert!(
        listed["description"]
            .as_str()
            .is_some_and(|d| d.len() > 100)
    );

    // `search` filters by name or description, ignoring case, as the MCP Registry does: what
    // does not contain the text is not listed, however near its meaning.
    let found = |path: &'static str| {
        let app = &app;
        async move {
            let searched = app.get(path).await;
            assert_eq!(searched.status, 200, "{}", searched.text);
            searched.body["servers"]
                .as_array()
                .expect("servers")
                .iter()
                .map(|entry| entry["server"]["name"].as_str().expect("name").to_owned())
                .collect::<Vec<String>>()
        }
    };
    assert_eq!(
        found("/v0.1/servers?search=ACME/Weath").await,
        ["io.github.acme/weather"]
    );
    assert_eq!(
        found("/v0.1/servers?search=acme").await,
        ["io.github.acme/notes", "io.github.acme/weather"]
    );
    assert!(found("/v0.1/servers?search=tidewatch").await.is_empty());
    let rest = second_page(&app, "/v0.1/servers?search=acme&limit=1").await;
    assert_eq!(
        rest.body["servers"][0]["server"]["name"],
        "io.github.acme/weather"
    );
    assert!(
        rest.body["metadata"].get("nextCursor").is_none(),
        "{}",
        rest.text
    );

    let rest = second_page(&app, "/v0.1/servers?limit=1").await;
    assert_eq!(
        rest.body["servers"][0]["server"]["name"],
        "io.github.acme/weather"
    );
    let next = rest.body["metadata"]["nextCursor"]
        .as_str()
        .expect("the registry itself comes last");
    let last = app
        .get(&format!("/v0.1/servers?limit=1&cursor={next}"))
        .await;
    assert_eq!(
        last.body["servers"][0]["server"]["name"],
        "registry/agent-registry"
    );
    assert!(last.body["metadata"].get("nextCursor").is_none());

    let future = app
        .get("/v0.1/servers?updated_since=2999-01-01T00:00:00Z")
        .await;
    assert_eq!(future.body["metadata"]["count"], 0);
    let older = app
        .get("/v0.1/servers?updated_since=2000-01-01T00:00:00Z&version=latest")
        .await;
    assert_eq!(older.body["metadata"]["count"], 3);
    let exact = app.get("/v0.1/servers?version=2.1.0").await;
    assert_eq!(exact.body["metadata"]["count"], 1);
    app.get("/v0.1/servers?updated_since=yesterday")
        .await
        .assert_problem(400, "invalid_parameter");
}

#[tokio::test]
async fn one_server_is_served_by_its_mcp_name_at_latest_or_its_version() {
    let app = TestApp::spawn().await;
    publish_servers(&app).await;

    let latest = app
        .get("/v0.1/servers/io.github.acme%2Fweather/versions/latest")
        .await;
    assert_eq!(latest.status, 200, "{}", latest.text);
    assert_server_json(&latest.body["server"]);
    assert_eq!(latest.body["server"]["name"], "io.github.acme/weather");
    let exact = app
        .get("/v0.1/servers/io.github.acme%2Fweather/versions/2.1.0")
        .await;
    assert_eq!(exact.status, 200);

    for path in [
        "/v0.1/servers/io.github.acme%2Fweather/versions/9.9.9",
        "/v0.1/servers/com.example%2Fa2a-only/versions/latest",
        "/v0.1/servers/no-slash/versions/latest",
    ] {
        app.get(path).await.assert_problem(404, "agent_not_found");
    }
}

#[tokio::test]
async fn earlier_versions_of_a_server_are_listed_and_served_as_they_were() {
    let app = TestApp::spawn().await;
    publish_servers(&app).await;
    let alice = app.token("alice", &[]).await;
    let updated = app
        .put(
            "/api/agents/io.github.acme.weather",
            &alice,
            json!({
                "package_name": "io.github.acme.weather",
                "name": "Acme Weather",
                "description": "Weather forecasts over MCP, now with tides.",
                "version": "2.2.0",
                "remotes": [{"type": "streamable-http", "url": "https://mcp.acme.example/weather/v2"}],
            }),
        )
        .await;
    assert_eq!(updated.status, 200, "{}", updated.text);

    let list = app
        .get("/v0.1/servers/io.github.acme%2Fweather/versions")
        .await;
    assert_eq!(list.status, 200, "{}", list.text);
    let servers = list.body["servers"].as_array().expect("servers");
    assert_eq!(list.body["metadata"]["count"], 2);
    let versions: Vec<(&str, bool)> = servers
        .iter()
        .map(|entry| {
            assert_server_json(&entry["server"]);
            (
                entry["server"]["version"].as_str().expect("version"),
                entry["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"]
                    .as_bool()
                    .expect("isLatest"),
            )
        })
        .collect();
    assert_eq!(versions, [("2.2.0", true), ("2.1.0", false)]);

    let earlier = app
        .get("/v0.1/servers/io.github.acme%2Fweather/versions/2.1.0")
        .await;
    assert_eq!(earlier.status, 200, "{}", earlier.text);
    assert_eq!(earlier.body["server"]["version"], "2.1.0");
    assert_eq!(
        earlier.body["server"]["remotes"][0]["url"],
        "https://mcp.acme.example/weather"
    );
    assert_eq!(
        earlier.body["_meta"]["io.modelcontextprotocol.registry/official"]["isLatest"],
        false
    );
    let latest = app
        .get("/v0.1/servers/io.github.acme%2Fweather/versions/latest")
        .await;
    assert_eq!(latest.body["server"]["version"], "2.2.0");
    for path in [
        "/v0.1/servers/io.github.acme%2Fweather/versions/1.0.0",
        "/v0.1/servers/com.example%2Fa2a-only/versions",
        "/v0.1/servers/io.github.acme%2Fnothing/versions",
    ] {
        app.get(path).await.assert_problem(404, "agent_not_found");
    }
}

/// The page after the first of `path` (a query string asking for one server a page).
async fn second_page(app: &TestApp, path: &str) -> crate::helpers::TestResponse {
    let first = app.get(path).await;
    let next = first.body["metadata"]["nextCursor"]
        .as_str()
        .expect("a next page");
    app.get(&format!("{path}&cursor={next}")).await
}
