//! Organisations and transfers over the API: roles, agents an organisation owns, the last
//! admin, and transfers accepted, declined, withdrawn and forced.

use axum::http::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{MASTER_KEY, TestApp, agent_body};

/// An app with an organisation `acme` whose admin is alice, publisher bob, viewer vic; and a
/// token each for alice, bob, vic and the outsider otto.
async fn acme() -> (TestApp, [String; 4]) {
    let app = TestApp::spawn().await;
    let mut tokens = Vec::new();
    for owner in ["alice", "bob", "vic", "otto"] {
        tokens.push(app.token(owner, &[]).await);
    }
    let created = app
        .post(
            "/api/orgs",
            Some(&tokens[0]),
            json!({"name": "acme", "display_name": "Acme Corp"}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text);
    assert_eq!(created.body["owner"], "org:acme");
    assert_eq!(created.body["role"], "admin");
    assert_eq!(created.body["members"][0]["owner"], "alice");
    for (owner, role) in [("bob", "publisher"), ("vic", "viewer")] {
        let set = app
            .put(
                &format!("/api/orgs/acme/members/{owner}"),
                &tokens[0],
                json!({"role": role}),
            )
            .await;
        assert_eq!(set.status, StatusCode::OK, "{}", set.text);
    }
    let tokens: [String; 4] = tokens.try_into().expect("four");
    (app, tokens)
}

fn org_agent(package: &str) -> Value {
    let mut body = agent_body(package);
    body["org"] = json!("acme");
    body
}

#[tokio::test]
async fn an_organisations_publishers_write_its_agents_and_its_viewers_read_them() {
    let (app, [alice, bob, vic, otto]) = acme().await;
    let published = app.try_publish(&bob, org_agent("com.acme.weather")).await;
    assert_eq!(published.status, StatusCode::CREATED, "{}", published.text);
    assert_eq!(published.body["owner"], "org:acme");
    let id = published.body["id"].as_str().expect("id").to_owned();

    // Another writer of the organisation manages it; the viewer reads it but cannot write it.
    let live = app.act(&published.body, "go-live", &alice).await;
    assert_eq!(live.status, StatusCode::OK, "{}", live.text);
    assert_eq!(
        app.get_as(&format!("/api/agents/{id}"), &vic).await.status,
        StatusCode::OK
    );
    app.act(&published.body, "unpublish", &vic)
        .await
        .assert_problem(403, "forbidden");
    let mut changed = agent_body("com.acme.weather");
    changed["description"] = json!("Changed by the viewer");
    app.put(&format!("/api/agents/{id}"), &vic, changed.clone())
        .await
        .assert_problem(403, "forbidden");
    // An outsider neither reads nor writes it.
    app.get_as(&format!("/api/agents/{id}"), &otto)
        .await
        .assert_problem(403, "forbidden");
    app.delete(&format!("/api/agents/{id}"), &otto)
        .await
        .assert_problem(403, "forbidden");
    // The viewer and an outsider may not publish for it; nor for an organisation that is not.
    app.try_publish(&vic, org_agent("com.acme.tides"))
        .await
        .assert_problem(403, "forbidden");
    app.try_publish(&otto, org_agent("com.acme.tides"))
        .await
        .assert_problem(403, "forbidden");
    let mut nowhere = agent_body("com.acme.tides");
    nowhere["org"] = json!("nowhere");
    app.try_publish(&bob, nowhere)
        .await
        .assert_problem(404, "org_not_found");
    nowhere = agent_body("com.acme.tides");
    nowhere["org"] = json!("Not An Org");
    app.try_publish(&bob, nowhere)
        .await
        .assert_problem(422, "validation_failed");

    // Every member lists the organisation's agents beside their own.
    app.publish(&vic, agent_body("com.vic.notes")).await;
    for (token, expected) in [
        (&vic, vec!["com.acme.weather", "com.vic.notes"]),
        (&bob, vec!["com.acme.weather"]),
        (&otto, vec![]),
    ] {
        let listed = app.get_as("/api/agents", token).await;
        let mut names: Vec<&str> = listed.body["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .filter_map(|agent| agent["package_name"].as_str())
            .collect();
        names.sort_unstable();
        assert_eq!(names, expected);
    }
    // Members see the organisation; others find none.
    let mine = app.get_as("/api/orgs", &vic).await;
    assert_eq!(mine.body["orgs"][0]["name"], "acme");
    assert_eq!(mine.body["orgs"][0]["role"], "viewer");
    assert_eq!(app.get_as("/api/orgs", &otto).await.body["orgs"], json!([]));
    app.get_as("/api/orgs/acme", &otto)
        .await
        .assert_problem(404, "org_not_found");
    let seen = app.get_as("/api/orgs/acme", &bob).await;
    assert_eq!(seen.body["members"].as_array().map(Vec::len), Some(3));
    assert_eq!(
        app.get_as("/api/orgs/acme", MASTER_KEY).await.status,
        StatusCode::OK
    );
    // A delete by a writer works.
    assert_eq!(
        app.delete(&format!("/api/agents/{id}"), &bob).await.status,
        StatusCode::NO_CONTENT
    );
}

#[tokio::test]
async fn only_admins_manage_members_and_the_last_admin_stays() {
    let (app, [alice, bob, vic, _otto]) = acme().await;
    app.put(
        "/api/orgs/acme/members/carol",
        &bob,
        json!({"role": "viewer"}),
    )
    .await
    .assert_problem(403, "forbidden");
    app.delete("/api/orgs/acme/members/vic", &bob)
        .await
        .assert_problem(403, "forbidden");
    for body in [
        json!({}),
        json!({"role": "owner"}),
        json!({"role": 3}),
        json!([]),
    ] {
        app.put("/api/orgs/acme/members/carol", &alice, body.clone())
            .await
            .assert_problem(422, "validation_failed");
    }
    for nobody in ["a%20b", "admin"] {
        app.put(
            &format!("/api/orgs/acme/members/{nobody}"),
            &alice,
            json!({"role": "viewer"}),
        )
        .await
        .assert_problem(404, "not_found");
    }
    // The only admin can neither step down nor leave.
    app.put(
        "/api/orgs/acme/members/alice",
        &alice,
        json!({"role": "publisher"}),
    )
    .await
    .assert_problem(409, "conflict");
    app.delete("/api/orgs/acme/members/alice", &alice)
        .await
        .assert_problem(409, "conflict");
    // A member may leave by themselves.
    assert_eq!(
        app.delete("/api/orgs/acme/members/vic", &vic).await.status,
        StatusCode::NO_CONTENT
    );
    app.get_as("/api/orgs/acme", &vic)
        .await
        .assert_problem(404, "org_not_found");
    // With a second admin, the first may go.
    app.put(
        "/api/orgs/acme/members/bob",
        &alice,
        json!({"role": "admin"}),
    )
    .await;
    assert_eq!(
        app.delete("/api/orgs/acme/members/alice", &alice)
            .await
            .status,
        StatusCode::NO_CONTENT
    );
    app.delete("/api/orgs/acme/members/nobody", &bob)
        .await
        .assert_problem(404, "not_found");
    // Names are taken once; the master key names the first admin.
    app.post("/api/orgs", Some(&bob), json!({"name": "acme"}))
        .await
        .assert_problem(409, "conflict");
    app.post("/api/orgs", Some(MASTER_KEY), json!({"name": "globex"}))
        .await
        .assert_problem(422, "validation_failed");
    let globex = app
        .post(
            "/api/orgs",
            Some(MASTER_KEY),
            json!({"name": "globex", "admin": "otto"}),
        )
        .await;
    assert_eq!(globex.status, StatusCode::CREATED, "{}", globex.text);
    assert_eq!(globex.body["members"][0]["owner"], "otto");
    for body in [
        json!({"name": "-bad"}),
        json!({"name": 7}),
        json!({}),
        json!("acme"),
    ] {
        app.post("/api/orgs", Some(&bob), body.clone())
            .await
            .assert_problem(422, "validation_failed");
    }
}

#[tokio::test]
async fn a_transfer_moves_the_agent_when_its_receiver_accepts_it() {
    let (app, [alice, bob, _vic, otto]) = acme().await;
    let agent = app
        .publish_live(&otto, agent_body("com.otto.weather"))
        .await;
    let id = agent["id"].as_str().expect("id").to_owned();
    let versions_before = app.get(&format!("/public/agents/{id}/versions")).await.body;

    // Otto gives it to acme; a second transfer waits for the first.
    let asked = app
        .post(
            &format!("/api/agents/{id}/transfer"),
            Some(&otto),
            json!({"to": "org:acme"}),
        )
        .await;
    assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
    assert_eq!(asked.body["status"], "pending");
    let transfer = asked.body["id"].as_str().expect("id").to_owned();
    app.post(
        &format!("/api/agents/{id}/transfer"),
        Some(&otto),
        json!({"to": "bob"}),
    )
    .await
    .assert_problem(409, "conflict");
    // The receiving organisation's admin sees it; its publisher may not accept it; a stranger
    // finds nothing.
    let pending = app.get_as("/api/transfers", &alice).await;
    assert_eq!(pending.body["transfers"][0]["id"], transfer.as_str());
    app.post_empty(&format!("/api/transfers/{transfer}/accept"), &bob)
        .await
        .assert_problem(403, "forbidden");
    let stranger = app.token("stranger", &[]).await;
    app.post_empty(&format!("/api/transfers/{transfer}/accept"), &stranger)
        .await
        .assert_problem(404, "transfer_not_found");
    let accepted = app
        .post_empty(&format!("/api/transfers/{transfer}/accept"), &alice)
        .await;
    assert_eq!(accepted.status, StatusCode::OK, "{}", accepted.text);
    assert_eq!(accepted.body["status"], "accepted");
    assert_eq!(accepted.body["agent"]["owner"], "org:acme");

    // The agent moved whole: same package name and identifier, its versions, still live.
    let public = app.get(&format!("/public/agents/{id}")).await;
    assert_eq!(public.body["owner"], "org:acme");
    assert_eq!(public.body["package_name"], "com.otto.weather");
    assert_eq!(public.body["identifier"], agent["identifier"]);
    assert_eq!(
        app.get(&format!("/public/agents/{id}/versions")).await.body,
        versions_before
    );
    app.act(&public.body, "unpublish", &otto)
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(
        app.act(&public.body, "unpublish", &bob).await.status,
        StatusCode::OK
    );
    // Settled: neither side can settle it again.
    app.post_empty(&format!("/api/transfers/{transfer}/decline"), &alice)
        .await
        .assert_problem(404, "transfer_not_found");
    assert_eq!(
        app.get_as("/api/transfers", &alice).await.body["transfers"],
        json!([])
    );
}

#[tokio::test]
async fn a_transfer_is_declined_by_its_receiver_withdrawn_by_its_sender_or_forced_by_the_master_key()
 {
    let (app, [_alice, bob, _vic, otto]) = acme().await;
    let agent = app.publish(&otto, agent_body("com.otto.tides")).await;
    let id = agent["id"].as_str().expect("id").to_owned();
    let ask = |to: &'static str| {
        let app = &app;
        let (otto, id) = (otto.clone(), id.clone());
        async move {
            let asked = app
                .post(
                    &format!("/api/agents/{id}/transfer"),
                    Some(&otto),
                    json!({"to": to}),
                )
                .await;
            assert_eq!(asked.status, StatusCode::CREATED, "{}", asked.text);
            asked.body["id"].as_str().expect("id").to_owned()
        }
    };
    let declined = ask("bob").await;
    let answer = app
        .post_empty(&format!("/api/transfers/{declined}/decline"), &bob)
        .await;
    assert_eq!(answer.body["status"], "declined");
    let withdrawn = ask("bob").await;
    let answer = app
        .post_empty(&format!("/api/transfers/{withdrawn}/decline"), &otto)
        .await;
    assert_eq!(answer.body["status"], "declined");
    // The sender cannot accept its own transfer.
    let own = ask("bob").await;
    app.post_empty(&format!("/api/transfers/{own}/accept"), &otto)
        .await
        .assert_problem(403, "forbidden");
    assert_eq!(
        app.get(&format!("/public/agents/{id}")).await.status,
        StatusCode::NOT_FOUND,
        "still STAGE"
    );
    assert_eq!(
        app.get_as(&format!("/api/agents/{id}"), &otto).await.body["owner"],
        "otto"
    );

    // The master key moves it at once (a dispute), declining the pending one.
    let forced = app
        .post(
            &format!("/api/agents/{id}/transfer"),
            Some(MASTER_KEY),
            json!({"to": "bob"}),
        )
        .await;
    assert_eq!(forced.status, StatusCode::OK, "{}", forced.text);
    assert_eq!(forced.body["status"], "forced");
    assert_eq!(forced.body["agent"]["owner"], "bob");
    app.post_empty(&format!("/api/transfers/{own}/accept"), &bob)
        .await
        .assert_problem(404, "transfer_not_found");
    app.get_as(&format!("/api/agents/{id}"), &otto)
        .await
        .assert_problem(403, "forbidden");

    // Bad receivers: itself, an unknown organisation, a malformed name; an agent not one's own.
    let bob_token = bob.clone();
    for (to, status, code) in [
        ("bob", 409, "conflict"),
        ("org:nowhere", 404, "org_not_found"),
        ("not a name", 422, "validation_failed"),
    ] {
        app.post(
            &format!("/api/agents/{id}/transfer"),
            Some(&bob_token),
            json!({"to": to}),
        )
        .await
        .assert_problem(status, code);
    }
    app.post(
        &format!("/api/agents/{id}/transfer"),
        Some(&otto),
        json!({"to": "otto"}),
    )
    .await
    .assert_problem(403, "forbidden");
    for body in [json!({}), json!({"to": 5}), json!([])] {
        app.post(
            &format!("/api/agents/{id}/transfer"),
            Some(&bob_token),
            body,
        )
        .await
        .assert_problem(422, "validation_failed");
    }
    app.request(
        Method::POST,
        "/api/transfers/trf_nope/accept",
        Some(&bob_token),
        None,
    )
    .await
    .assert_problem(404, "transfer_not_found");
}
