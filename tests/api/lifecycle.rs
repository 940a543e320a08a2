//! The agent lifecycle: go-live, unpublish, update, delete, and what each makes
//! visible on the public paths.

use axum::http::{Method, header};
use serde_json::{Value, json};

use crate::helpers::{TestApp, agent_body, error_fields, package_names, str_at};

/// Every public way of finding `package_name`: get by id and name, resolve, list, search.
async fn publicly_visible(app: &TestApp, record: &Value) -> [bool; 5] {
    let id = str_at(record, "/id");
    let package_name = str_at(record, "/package_name");
    let listed = app.get("/public/agents?limit=100").await;
    let searched = app
        .post(
            "/public/agents/search",
            None,
            json!({"query": record["name"], "limit": 100}),
        )
        .await;
    [
        app.get(&format!("/public/agents/{id}")).await.status == 200,
        app.get(&format!("/public/agents/{package_name}"))
            .await
            .status
            == 200,
        app.get(&format!("/public/agents/resolve/{package_name}"))
            .await
            .status
            == 200,
        package_names(&listed)
            .iter()
            .any(|name| name == package_name),
        package_names(&searched)
            .iter()
            .any(|name| name == package_name),
    ]
}

#[tokio::test]
async fn going_live_makes_a_stage_agent_active_and_public() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;

    let response = app.act(&record, "go-live", &alice).await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["state"], "ACTIVE");
    assert!(response.body["published_at"].is_string());
    assert_eq!(publicly_visible(&app, &record).await, [true; 5]);
}

#[tokio::test]
async fn stage_agents_are_invisible_on_public_paths() {
    let (app, alice) = TestApp::spawn_as("alice").await;

    let record = app.publish(&alice, agent_body("com.example.weather")).await;

    assert_eq!(publicly_visible(&app, &record).await, [false; 5]);
    let id = str_at(&record, "/id");
    app.get(&format!("/public/agents/{id}"))
        .await
        .assert_problem(404, "agent_not_found");
    app.get("/public/agents/resolve/com.example.weather")
        .await
        .assert_problem(404, "agent_not_found");
}

#[tokio::test]
async fn going_live_on_an_active_agent_is_an_invalid_state_transition() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;

    let response = app.act(&record, "go-live", &alice).await;

    response.assert_problem(409, "invalid_state_transition");
}

#[tokio::test]
async fn unpublishing_moves_an_active_agent_back_to_stage_and_hides_it() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;

    let response = app.act(&record, "unpublish", &alice).await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["state"], "STAGE");
    assert!(
        response.body.get("published_at").is_none(),
        "{}",
        response.text
    );
    assert_eq!(publicly_visible(&app, &record).await, [false; 5]);
}

#[tokio::test]
async fn unpublishing_a_stage_agent_is_an_invalid_state_transition() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;

    let response = app.act(&record, "unpublish", &alice).await;

    response.assert_problem(409, "invalid_state_transition");
}

#[tokio::test]
async fn an_agent_can_go_live_again_after_unpublishing() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let id = str_at(&record, "/id");
    let unpublished = app
        .post_empty(&format!("/api/agents/{id}/unpublish"), &alice)
        .await;
    assert_eq!(unpublished.status, 200);

    let relive = app
        .post_empty(&format!("/api/agents/{id}/go-live"), &alice)
        .await;

    assert_eq!(relive.status, 200, "{}", relive.text);
    assert_eq!(relive.body["state"], "ACTIVE");
    assert_eq!(publicly_visible(&app, &record).await, [true; 5]);
}

/// After a delete, every path answers 404 for the agent.
async fn assert_gone(app: &TestApp, token: &str, record: &Value) {
    let id = str_at(record, "/id");
    let name = str_at(record, "/package_name");
    assert_eq!(publicly_visible(app, record).await, [false; 5]);
    for identifier in [id, name] {
        app.get(&format!("/public/agents/{identifier}"))
            .await
            .assert_problem(404, "agent_not_found");
        app.get(&format!("/public/agents/resolve/{identifier}"))
            .await
            .assert_problem(404, "agent_not_found");
        let path = format!("/api/agents/{identifier}");
        app.get_as(&path, token)
            .await
            .assert_problem(404, "agent_not_found");
        app.put(&path, token, agent_body(name))
            .await
            .assert_problem(404, "agent_not_found");
        app.delete(&path, token)
            .await
            .assert_problem(404, "agent_not_found");
        for action in ["go-live", "unpublish"] {
            app.post_empty(&format!("{path}/{action}"), token)
                .await
                .assert_problem(404, "agent_not_found");
        }
    }
    let own = app.get_as("/api/agents", token).await;
    assert!(!package_names(&own).iter().any(|listed| listed == name));
}

#[tokio::test]
async fn deleting_a_stage_agent_makes_every_path_404() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;

    let response = app
        .delete(&format!("/api/agents/{}", str_at(&record, "/id")), &alice)
        .await;

    assert_eq!(response.status, 204, "{}", response.text);
    assert!(response.text.is_empty());
    assert_gone(&app, &alice, &record).await;
}

#[tokio::test]
async fn deleting_an_active_agent_makes_every_path_404() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;

    let response = app
        .delete(&format!("/api/agents/{}", str_at(&record, "/id")), &alice)
        .await;

    assert_eq!(response.status, 204, "{}", response.text);
    assert_gone(&app, &alice, &record).await;
}

#[tokio::test]
async fn a_deleted_package_name_can_be_registered_again() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let bob = app.token("bob", &[]).await;
    let first = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let deleted = app
        .delete(&format!("/api/agents/{}", str_at(&first, "/id")), &alice)
        .await;
    assert_eq!(deleted.status, 204);

    let second = app
        .publish_live(&bob, agent_body("com.example.weather"))
        .await;

    assert_ne!(second["id"], first["id"]);
    assert_eq!(second["owner"], "bob");
    let public = app.get("/public/agents/com.example.weather").await;
    assert_eq!(public.body["id"], second["id"]);
}

#[tokio::test]
async fn updating_an_active_agent_is_visible_in_search_at_once() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let mut body = agent_body("com.example.weather");
    body["name"] = json!("Zeppelin Forecaster");
    body["tags"] = json!(["aviation"]);

    let response = app
        .put(
            &format!("/api/agents/{}", str_at(&record, "/id")),
            &alice,
            body,
        )
        .await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["state"], "ACTIVE");
    assert_eq!(response.body["name"], "Zeppelin Forecaster");
    let by_query = app.get("/public/agents?q=zeppelin").await;
    assert_eq!(
        by_query.body["agents"][0]["package_name"],
        "com.example.weather"
    );
    assert_eq!(by_query.body["agents"][0]["name"], "Zeppelin Forecaster");
    let by_tag = app
        .post(
            "/public/agents/search",
            None,
            json!({"filters": {"tags": "aviation"}}),
        )
        .await;
    assert_eq!(package_names(&by_tag), ["com.example.weather"]);
    assert_eq!(by_tag.body["agents"][0]["name"], "Zeppelin Forecaster");
    let public = app.get("/public/agents/com.example.weather").await;
    assert_eq!(public.body["name"], "Zeppelin Forecaster");
}

#[tokio::test]
async fn updating_replaces_the_writable_fields_and_bumps_the_revision() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let mut original = agent_body("com.example.weather");
    original["tags"] = json!(["old"]);
    original["version"] = json!("1.0.0");
    let record = app.publish(&alice, original).await;

    let response = app
        .put(
            &format!("/api/agents/{}", str_at(&record, "/id")),
            &alice,
            agent_body("com.example.weather"),
        )
        .await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["state"], "STAGE");
    assert_eq!(response.body["tags"], json!([]));
    assert_eq!(
        response.body["version"], "1.0.1",
        "a change naming no version is the next patch: {}",
        response.text
    );
    assert_eq!(response.body["revision"], 2);
    assert_eq!(response.header("etag"), Some("\"2\""));
    assert_eq!(response.body["created_at"], record["created_at"]);
}

#[tokio::test]
async fn changing_the_package_name_on_update_is_a_validation_error() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;

    let response = app
        .put(
            &format!("/api/agents/{}", str_at(&record, "/id")),
            &alice,
            agent_body("com.example.climate"),
        )
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["package_name"]);
}

#[tokio::test]
async fn an_update_in_another_case_keeps_the_package_name() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;

    let response = app
        .put(
            &format!("/api/agents/{}", str_at(&record, "/id")),
            &alice,
            agent_body("Com.Example.Weather"),
        )
        .await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["package_name"], "com.example.weather");
}

#[tokio::test]
async fn an_update_is_validated_like_a_publish() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;

    let response = app
        .put(
            &format!("/api/agents/{}", str_at(&record, "/id")),
            &alice,
            json!({"package_name": "com.example.weather", "name": "", "url": "ftp://x"}),
        )
        .await;

    response.assert_problem(422, "validation_failed");
    assert_eq!(error_fields(&response), ["description", "name", "url"]);
}

#[tokio::test]
async fn an_update_with_the_current_revision_in_if_match_succeeds() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app.publish(&alice, agent_body("com.example.weather")).await;
    let request = axum::http::Request::builder()
        .method(Method::PUT)
        .uri(format!("/api/agents/{}", str_at(&record, "/id")))
        .header(header::AUTHORIZATION, format!("Bearer {alice}"))
        .header(header::CONTENT_TYPE, "application/json")
        .header(header::IF_MATCH, "\"1\"")
        .body(axum::body::Body::from(
            json!({"package_name": "com.example.weather", "name": "Weather",
                   "description": "Changed under If-Match."})
            .to_string(),
        ))
        .expect("request");

    let response = app.send(request).await;

    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.header("etag"), Some("\"2\""));
}

#[tokio::test]
async fn ids_and_package_names_in_any_case_work_on_every_id_path() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let record = app
        .publish_live(&alice, agent_body("com.example.weather"))
        .await;
    let id = str_at(&record, "/id").to_owned();

    for identifier in [id.as_str(), "com.example.weather", "Com.Example.Weather"] {
        let public = app.get(&format!("/public/agents/{identifier}")).await;
        assert_eq!(public.body["id"], id, "{identifier}: {}", public.text);
        let card = app
            .get(&format!("/public/agents/resolve/{identifier}"))
            .await;
        assert_eq!(card.status, 200, "{identifier}: {}", card.text);
        let own = app
            .get_as(&format!("/api/agents/{identifier}"), &alice)
            .await;
        assert_eq!(own.body["id"], id, "{identifier}: {}", own.text);
        let updated = app
            .put(
                &format!("/api/agents/{identifier}"),
                &alice,
                agent_body("com.example.weather"),
            )
            .await;
        assert_eq!(updated.body["id"], id, "{identifier}: {}", updated.text);
        let unpublished = app
            .post_empty(&format!("/api/agents/{identifier}/unpublish"), &alice)
            .await;
        assert_eq!(unpublished.body["state"], "STAGE", "{identifier}");
        let live = app
            .post_empty(&format!("/api/agents/{identifier}/go-live"), &alice)
            .await;
        assert_eq!(live.body["state"], "ACTIVE", "{identifier}");
    }
    let deleted = app.delete("/api/agents/COM.EXAMPLE.WEATHER", &alice).await;
    assert_eq!(deleted.status, 204, "{}", deleted.text);
}

#[tokio::test]
async fn the_owner_lists_their_agents_in_every_state() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    let bob = app.token("bob", &[]).await;
    app.publish(&alice, agent_body("com.example.staged")).await;
    app.publish_live(&alice, agent_body("com.example.live"))
        .await;
    app.publish_live(&bob, agent_body("com.example.bobs")).await;

    let response = app.get_as("/api/agents", &alice).await;

    assert_eq!(response.status, 200, "{}", response.text);
    let mut names = package_names(&response);
    names.sort();
    assert_eq!(names, ["com.example.live", "com.example.staged"]);
    let states: Vec<&Value> = response.body["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|agent| &agent["state"])
        .collect();
    assert!(states.contains(&&json!("STAGE")) && states.contains(&&json!("ACTIVE")));
    assert_eq!(response.body["next_cursor"], Value::Null);
}

#[tokio::test]
async fn the_owners_list_is_paginated() {
    let (app, alice) = TestApp::spawn_as("alice").await;
    for i in 0..5 {
        app.publish(&alice, agent_body(&format!("com.example.a{i}")))
            .await;
    }

    let mut seen = Vec::new();
    let mut path = "/api/agents?limit=2".to_owned();
    loop {
        let page = app.get_as(&path, &alice).await;
        assert_eq!(page.status, 200, "{}", page.text);
        assert_eq!(page.body["limit"], 2);
        seen.extend(package_names(&page));
        match page.body["next_cursor"].as_str() {
            Some(cursor) => path = format!("/api/agents?limit=2&cursor={cursor}"),
            None => break,
        }
    }

    seen.sort();
    assert_eq!(
        seen,
        (0..5)
            .map(|i| format!("com.example.a{i}"))
            .collect::<Vec<_>>()
    );
    app.get_as("/api/agents?cursor=not-a-cursor", &alice)
        .await
        .assert_problem(400, "invalid_parameter");
}
