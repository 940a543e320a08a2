//! The web interface: pages answer HTML, assets are embedded with ETags, server-rendered values
//! are escaped, and the JSON API is unchanged beside them.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use serde_json::json;

use crate::helpers::{TestApp, TestResponse, agent_body};

async fn browse(app: &TestApp, path: &str) -> TestResponse {
    app.send(
        Request::builder()
            .uri(path)
            .header(header::ACCEPT, "text/html,application/xhtml+xml,*/*;q=0.8")
            .body(Body::empty())
            .expect("request"),
    )
    .await
}

#[track_caller]
fn assert_html(response: &TestResponse, status: u16) {
    assert_eq!(response.status.as_u16(), status, "{}", response.text);
    assert_eq!(
        response.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(
        response.text.starts_with("<!doctype html>"),
        "{}",
        response.text
    );
    let csp = response
        .header("content-security-policy")
        .unwrap_or_default();
    assert!(csp.contains("script-src 'self'"), "{csp}");
    assert_eq!(response.header("x-content-type-options"), Some("nosniff"));
}

fn title(response: &TestResponse) -> &str {
    let start = response.text.find("<title>").expect("a title") + "<title>".len();
    let end = response.text.find("</title>").expect("a title end");
    &response.text[start..end]
}

#[tokio::test]
async fn every_page_answers_html_with_its_title_and_script() {
    let app = TestApp::spawn().await;

    for (path, expected_title, script) in [
        ("/", "Find an agent · Agent Registry", "search.js"),
        (
            "/playground",
            "Playground · Agent Registry",
            "playground.js",
        ),
        ("/console", "Console · Agent Registry", "console.js"),
        (
            "/agents/registry.utility.finance",
            "Finance Agent · Agent Registry",
            "agent.js",
        ),
    ] {
        let response = app.get(path).await;

        assert_html(&response, 200);
        assert_eq!(title(&response), expected_title, "{path}");
        assert!(
            response.text.contains(&format!(
                "<script type=\"module\" src=\"/assets/{script}\">"
            )),
            "{path}"
        );
        assert!(response.text.contains("<main id=\"main\""), "{path}");
    }
}

#[tokio::test]
async fn the_agent_page_renders_the_name_package_and_description_server_side() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish_live(
        &alice,
        json!({"package_name": "com.example.weather", "name": "Weather Agent",
               "description": "Forecasts and current conditions for any city."}),
    )
    .await;

    let response = app.get("/agents/com.example.weather").await;

    assert_html(&response, 200);
    assert_eq!(title(&response), "Weather Agent · Agent Registry");
    assert!(
        response
            .text
            .contains("<h1 id=\"agent-name\">Weather Agent</h1>")
    );
    assert!(
        response
            .text
            .contains("data-package=\"com.example.weather\"")
    );
    assert!(
        response
            .text
            .contains("Forecasts and current conditions for any city.")
    );
    let by_mixed_case = app.get("/agents/Com.Example.Weather").await;
    assert_html(&by_mixed_case, 200);
}

#[tokio::test]
async fn hostile_names_and_descriptions_are_escaped_in_the_agent_page() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let name = "<script>alert(1)</script> \"quoted\" & 'single' {{{nav}}}";
    let description = "<img src=x onerror=alert(1)></p><a href=\"javascript:alert(1)\">x</a>";
    app.publish_live(
        &alice,
        json!({"package_name": "com.example.hostile", "name": name, "description": description}),
    )
    .await;

    let response = app.get("/agents/com.example.hostile").await;

    assert_html(&response, 200);
    for raw in [
        "<script>alert",
        "<img src=x",
        "<a href=\"javascript:",
        "\"quoted\"",
    ] {
        assert!(
            !response.text.contains(raw),
            "{raw} leaked: {}",
            response.text
        );
    }
    assert!(response.text.contains(
        "&lt;script&gt;alert(1)&lt;/script&gt; &quot;quoted&quot; &amp; &#39;single&#39; {{{nav}}}"
    ));
    assert!(response.text.contains("&lt;img src=x onerror=alert(1)&gt;"));
    assert_eq!(
        response.text.matches("aria-current=\"page\"").count(),
        1,
        "only the breadcrumb is current"
    );
}

#[tokio::test]
async fn unknown_unpublished_and_hostile_package_pages_are_an_html_not_found() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    app.publish(&alice, agent_body("com.example.staged")).await;
    // Long, but within the 8 KiB the server reads of a request target.
    let huge = "a".repeat(8_000);

    for path in [
        "/agents/com.example.nope".to_owned(),
        "/agents/com.example.staged".to_owned(),
        "/agents/%3Cscript%3Ealert(1)%3C%2Fscript%3E".to_owned(),
        "/agents/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert(1)%3E".to_owned(),
        "/agents/%FF%FE".to_owned(),
        "/agents/%00".to_owned(),
        "/agents/'%20OR%20'1'='1".to_owned(),
        format!("/agents/{huge}"),
    ] {
        let response = app.get(&path).await;

        assert_html(&response, 404);
        assert_eq!(
            title(&response),
            "Agent not found · Agent Registry",
            "{path}"
        );
        assert!(!response.text.contains("<script>alert"), "{path}");
        assert!(!response.text.contains("<img src=x"), "{path}");
        assert!(
            response.text.len() < 8_000,
            "{path}: echoed input is truncated"
        );
    }
    let shown = app.get("/agents/%3Cscript%3Ealert(1)%3C%2Fscript%3E").await;
    assert!(shown.text.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
}

#[tokio::test]
async fn assets_are_served_with_content_types_etags_and_revalidation() {
    let app = TestApp::spawn().await;

    for (file, content_type) in [
        ("app.css", "text/css; charset=utf-8"),
        ("common.js", "text/javascript; charset=utf-8"),
        ("search.js", "text/javascript; charset=utf-8"),
        ("agent.js", "text/javascript; charset=utf-8"),
        ("playground.js", "text/javascript; charset=utf-8"),
        ("schema-form.js", "text/javascript; charset=utf-8"),
        ("console.js", "text/javascript; charset=utf-8"),
        ("logo.svg", "image/svg+xml"),
    ] {
        let path = format!("/assets/{file}");
        let response = app.get(&path).await;

        assert_eq!(response.status, 200, "{path}");
        assert_eq!(
            response.header("content-type"),
            Some(content_type),
            "{path}"
        );
        assert_eq!(response.header("cache-control"), Some("public, no-cache"));
        assert!(!response.text.is_empty());
        let etag = response.header("etag").expect("an etag").to_owned();
        assert!(etag.starts_with('"') && etag.ends_with('"'), "{etag}");

        let revalidated = app
            .send(
                Request::builder()
                    .uri(&path)
                    .header(header::IF_NONE_MATCH, &etag)
                    .body(Body::empty())
                    .expect("request"),
            )
            .await;
        assert_eq!(revalidated.status, StatusCode::NOT_MODIFIED, "{path}");
        assert!(revalidated.text.is_empty());
        assert_eq!(revalidated.header("etag"), Some(etag.as_str()));
    }
}

#[tokio::test]
async fn every_asset_a_page_or_module_refers_to_exists() {
    let app = TestApp::spawn().await;
    let mut referenced = std::collections::BTreeSet::new();
    for page in [
        "/",
        "/playground",
        "/console",
        "/agents/registry.utility.wiki",
    ] {
        let html = app.get(page).await.text;
        for chunk in html.split("/assets/").skip(1) {
            referenced.insert(chunk.split('"').next().unwrap_or_default().to_owned());
        }
    }
    let mut modules: Vec<String> = referenced
        .iter()
        .filter(|file| file.ends_with(".js"))
        .cloned()
        .collect();
    while let Some(module) = modules.pop() {
        let source = app.get(&format!("/assets/{module}")).await.text;
        for chunk in source.split("from \"./").skip(1) {
            let import = chunk.split('"').next().unwrap_or_default().to_owned();
            if referenced.insert(import.clone()) {
                modules.push(import);
            }
        }
    }

    assert!(referenced.contains("schema-form.js"), "{referenced:?}");
    for file in &referenced {
        assert_eq!(
            app.get(&format!("/assets/{file}")).await.status,
            200,
            "{file}"
        );
    }
}

#[tokio::test]
async fn unknown_and_hostile_asset_paths_are_not_found() {
    let app = TestApp::spawn().await;

    for path in [
        "/assets/nope.js",
        "/assets/..%2FCargo.toml",
        "/assets/%2e%2e%2fsrc%2flib.rs",
        "/assets/%FF",
        "/assets/app.css%00",
    ] {
        app.get(path).await.assert_problem(404, "not_found");
    }
    app.request(Method::POST, "/assets/app.css", None, None)
        .await
        .assert_problem(405, "method_not_allowed");
}

#[tokio::test]
async fn a_browser_gets_an_html_not_found_and_an_api_client_problem_json() {
    let app = TestApp::spawn().await;

    let browser = browse(&app, "/no/such/page").await;
    assert_html(&browser, 404);
    assert_eq!(title(&browser), "Page not found · Agent Registry");

    app.get("/no/such/page")
        .await
        .assert_problem(404, "not_found");
    let api_client = app
        .send(
            Request::builder()
                .uri("/api/nope")
                .header(header::ACCEPT, "application/json")
                .body(Body::empty())
                .expect("request"),
        )
        .await;
    api_client.assert_problem(404, "not_found");
}

#[tokio::test]
async fn the_json_api_is_unchanged_beside_the_pages() {
    let app = TestApp::spawn().await;

    let list = browse(&app, "/public/agents?tags=test").await;

    assert_eq!(list.status, 200);
    assert_eq!(list.header("content-type"), Some("application/json"));
    assert_eq!(list.body["total"], 3);
    app.request(Method::POST, "/", None, Some(json!({})))
        .await
        .assert_problem(405, "method_not_allowed");
}
