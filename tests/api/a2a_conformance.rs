//! A2A v1.0 to the letter on every JSON-RPC endpoint the registry serves: the registry's own
//! (`/a2a/v1`) and a hosted agent's (`/a2a/utility/finance/v1`), with and without a trailing
//! slash. Errors carry A2A's codes and a `google.rpc.ErrorInfo`, and a hosted agent refuses a
//! request before it calls its upstream.

use axum::body::Body;
use axum::http::{Method, Request, header};
use serde_json::{Value, json};

use crate::fakes::Fake;
use crate::helpers::{MASTER_KEY, TestApp, TestResponse};

/// Both kinds of endpoint, each also with the trailing slash some HTTP clients add.
const ENDPOINTS: [&str; 4] = [
    "/a2a/v1",
    "/a2a/v1/",
    "/a2a/utility/finance/v1",
    "/a2a/utility/finance/v1/",
];

async fn app_with_fake() -> (TestApp, Fake) {
    let fake = Fake::start().await;
    let app = TestApp::spawn_with(|config| fake.configure(config)).await;
    (app, fake)
}

fn call(method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": "c-1", "method": method, "params": params})
}

fn message(parts: Value) -> Value {
    json!({"messageId": "m-1", "role": "ROLE_USER", "parts": parts})
}

/// A JSON-RPC error with `code`, whose `data` is an array led by an ErrorInfo of A2A's domain
/// with `reason`.
#[track_caller]
fn assert_a2a_error(response: &TestResponse, code: i64, reason: &str) {
    assert_eq!(response.status, 200, "{}", response.text);
    assert_eq!(response.body["id"], "c-1", "{}", response.text);
    let error = &response.body["error"];
    assert_eq!(error["code"], code, "{}", response.text);
    assert!(error["message"].is_string());
    let info = &error["data"][0];
    assert_eq!(
        info["@type"], "type.googleapis.com/google.rpc.ErrorInfo",
        "{}",
        response.text
    );
    assert_eq!(info["reason"], reason, "{}", response.text);
    assert_eq!(info["domain"], "a2a-protocol.org");
}

#[tokio::test]
async fn the_endpoints_answer_with_and_without_a_trailing_slash() {
    let (app, _fake) = app_with_fake().await;
    let registry = call(
        "SendMessage",
        json!({"message": message(json!([{"text": "weather"}]))}),
    );
    let finance = call(
        "SendMessage",
        json!({"message": message(json!([{"data": {"symbol": "BTC"}}])),
               "metadata": {"skill_id": "get_current_price"}}),
    );
    for (path, body) in [
        ("/a2a/v1", &registry),
        ("/a2a/v1/", &registry),
        ("/a2a/utility/finance/v1", &finance),
        ("/a2a/utility/finance/v1/", &finance),
    ] {
        let response = app.post(path, Some(MASTER_KEY), body.clone()).await;
        assert_eq!(response.status, 200, "{path}: {}", response.text);
        assert_eq!(
            response.body["result"]["message"]["role"], "ROLE_AGENT",
            "{path}: {}",
            response.text
        );
    }
}

#[tokio::test]
async fn a_message_naming_a_task_is_task_not_found_before_any_upstream_call() {
    let (app, fake) = app_with_fake().await;
    let params = json!({
        "message": {"messageId": "m-1", "role": "ROLE_USER", "taskId": "no-such-task",
                    "parts": [{"data": {"symbol": "BTC"}}]},
        "metadata": {"skill_id": "get_current_price"},
    });
    for path in ENDPOINTS {
        let response = app
            .post(path, Some(MASTER_KEY), call("SendMessage", params.clone()))
            .await;
        assert_a2a_error(&response, -32001, "TASK_NOT_FOUND");
        assert_eq!(
            response.body["error"]["data"][0]["metadata"]["taskId"],
            "no-such-task"
        );
    }
    for method in ["GetTask", "CancelTask"] {
        for path in ENDPOINTS {
            let response = app
                .post(path, Some(MASTER_KEY), call(method, json!({"id": "t-9"})))
                .await;
            assert_a2a_error(&response, -32001, "TASK_NOT_FOUND");
        }
    }
    assert_eq!(fake.total_hits(), 0, "no upstream was called");
}

#[tokio::test]
async fn a_part_of_an_unsupported_media_type_is_content_type_not_supported() {
    let (app, fake) = app_with_fake().await;
    let parts = [
        json!([{"raw": "iVBORw0KGgo=", "mediaType": "image/png", "filename": "a.png"}]),
        json!([{"url": "https://files.example/report.pdf", "mediaType": "application/pdf"}]),
        json!([{"text": "BTC", "mediaType": "audio/ogg"}]),
    ];
    for parts in parts {
        for path in ENDPOINTS {
            let params = json!({"message": message(parts.clone()),
                                "metadata": {"skill_id": "get_current_price"}});
            let response = app
                .post(path, Some(MASTER_KEY), call("SendMessage", params))
                .await;
            assert_a2a_error(&response, -32005, "CONTENT_TYPE_NOT_SUPPORTED");
        }
    }
    let unanswerable = json!({
        "message": message(json!([{"text": "BTC"}])),
        "configuration": {"acceptedOutputModes": ["image/png"]},
    });
    for path in ENDPOINTS {
        let response = app
            .post(
                path,
                Some(MASTER_KEY),
                call("SendMessage", unanswerable.clone()),
            )
            .await;
        assert_a2a_error(&response, -32005, "CONTENT_TYPE_NOT_SUPPORTED");
    }
    assert_eq!(fake.total_hits(), 0, "no upstream was called");
}

#[tokio::test]
async fn push_notification_methods_are_not_supported() {
    let (app, _fake) = app_with_fake().await;
    let params = json!({"taskId": "t-1", "config": {"url": "https://hooks.example/a2a"}});
    for method in [
        "CreateTaskPushNotificationConfig",
        "GetTaskPushNotificationConfig",
        "ListTaskPushNotificationConfigs",
        "DeleteTaskPushNotificationConfig",
    ] {
        for path in ENDPOINTS {
            let response = app
                .post(path, Some(MASTER_KEY), call(method, params.clone()))
                .await;
            assert_a2a_error(&response, -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED");
        }
    }
}

#[tokio::test]
async fn a2a_methods_the_card_does_not_declare_are_unsupported_operations() {
    let (app, _fake) = app_with_fake().await;
    for method in [
        "SendStreamingMessage",
        "SubscribeToTask",
        "GetExtendedAgentCard",
    ] {
        for path in ENDPOINTS {
            let params = json!({"message": message(json!([{"text": "x"}])), "id": "t-1"});
            let response = app.post(path, Some(MASTER_KEY), call(method, params)).await;
            assert_a2a_error(&response, -32004, "UNSUPPORTED_OPERATION");
        }
    }
    // A method A2A does not define stays "method not found", with the registry's ErrorInfo.
    for path in ENDPOINTS {
        let response = app
            .post(path, Some(MASTER_KEY), call("tasks/teleport", json!({})))
            .await;
        assert_eq!(response.body["error"]["code"], -32601, "{}", response.text);
        let info = &response.body["error"]["data"][0];
        assert_eq!(info["reason"], "METHOD_NOT_FOUND");
        assert_eq!(info["domain"], "agent-registry");
    }
}

#[tokio::test]
async fn every_json_rpc_error_carries_an_error_info() {
    let (app, _fake) = app_with_fake().await;
    for path in ENDPOINTS {
        let invalid = app
            .post(
                path,
                Some(MASTER_KEY),
                call("SendMessage", json!({"message": {"parts": 1}})),
            )
            .await;
        assert_eq!(invalid.body["error"]["code"], -32602, "{}", invalid.text);
        assert_eq!(
            invalid.body["error"]["data"][0]["@type"],
            "type.googleapis.com/google.rpc.ErrorInfo"
        );
        assert_eq!(
            invalid.body["error"]["data"][0]["reason"],
            "INVALID_PARAMETER"
        );

        let request = Request::builder()
            .method("POST")
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {MASTER_KEY}"))
            .header(header::CONTENT_TYPE, "application/json")
            .header("A2A-Version", "0.3")
            .body(Body::from(call("SendMessage", json!({})).to_string()))
            .expect("request");
        let old = app.send(request).await;
        assert_a2a_error(&old, -32009, "VERSION_NOT_SUPPORTED");

        let denied = app
            .post(path, Some("not-a-token"), call("SendMessage", json!({})))
            .await;
        assert_eq!(denied.status, 401, "{}", denied.text);
        assert_eq!(denied.body["error"]["code"], -32000);
        assert_eq!(denied.body["error"]["data"][0]["reason"], "UNAUTHORIZED");
    }
}

#[tokio::test]
async fn list_tasks_is_an_empty_final_page_with_its_parameters_checked() {
    let (app, _fake) = app_with_fake().await;
    for path in ENDPOINTS {
        let response = app
            .post(
                path,
                Some(MASTER_KEY),
                call(
                    "ListTasks",
                    json!({"contextId": "c-1", "pageSize": 2, "includeArtifacts": false}),
                ),
            )
            .await;
        assert_eq!(
            response.body["result"],
            json!({"tasks": [], "nextPageToken": "", "pageSize": 2, "totalSize": 0}),
            "{path}: {}",
            response.text
        );
        let default = app
            .post(path, Some(MASTER_KEY), call("ListTasks", json!({})))
            .await;
        assert_eq!(default.body["result"]["pageSize"], 50, "{}", default.text);

        let invalid = app
            .post(
                path,
                Some(MASTER_KEY),
                call(
                    "ListTasks",
                    json!({"pageSize": 150, "historyLength": -5, "status": "TASK_STATE_RUNNING",
                           "pageToken": "nope"}),
                ),
            )
            .await;
        assert_eq!(invalid.body["error"]["code"], -32602, "{}", invalid.text);
        let fields: Vec<&str> = invalid.body["error"]["data"][1]["fieldViolations"]
            .as_array()
            .expect("field violations")
            .iter()
            .filter_map(|v| v["field"].as_str())
            .collect();
        assert_eq!(fields, ["pageSize", "historyLength", "status", "pageToken"]);
    }
}

#[tokio::test]
async fn an_answer_carries_the_callers_context_or_a_new_one() {
    let (app, _fake) = app_with_fake().await;
    for (path, skill) in [
        ("/a2a/v1", "search_agents"),
        ("/a2a/utility/finance/v1", "get_current_price"),
    ] {
        let params = |context: Option<&str>| {
            let mut message = message(json!([{"data": {"symbol": "BTC", "query": "weather"}}]));
            if let Some(context) = context {
                message["contextId"] = json!(context);
            }
            json!({"message": message, "metadata": {"skill_id": skill}})
        };
        let kept = app
            .post(
                path,
                Some(MASTER_KEY),
                call("SendMessage", params(Some("ctx-mine"))),
            )
            .await;
        assert_eq!(
            kept.body["result"]["message"]["contextId"], "ctx-mine",
            "{}",
            kept.text
        );
        let first = app
            .post(path, Some(MASTER_KEY), call("SendMessage", params(None)))
            .await;
        let second = app
            .post(path, Some(MASTER_KEY), call("SendMessage", params(None)))
            .await;
        let new = first.body["result"]["message"]["contextId"]
            .as_str()
            .expect("a new context");
        assert!(!new.is_empty());
        assert_ne!(second.body["result"]["message"]["contextId"], new);
    }
}

#[tokio::test]
async fn a_body_declared_as_other_than_json_is_content_type_not_supported() {
    let (app, fake) = app_with_fake().await;
    let body = call(
        "SendMessage",
        json!({"message": message(json!([{"text": "BTC"}]))}),
    );
    let post = |path: &'static str, content_type: &'static str| {
        app.raw(
            Method::POST,
            path,
            Some(MASTER_KEY),
            Some(content_type),
            body.to_string(),
        )
    };
    for path in ENDPOINTS {
        let response = post(path, "text/plain").await;
        assert_eq!(response.status, 415, "{}", response.text);
        assert_eq!(response.body["error"]["code"], -32005, "{}", response.text);
        assert_eq!(
            response.body["error"]["data"][0]["reason"],
            "CONTENT_TYPE_NOT_SUPPORTED"
        );
    }
    assert_eq!(fake.total_hits(), 0, "no upstream was called");
    for path in ENDPOINTS {
        for json_type in [
            "application/json; charset=utf-8",
            "application/json-rpc+json",
        ] {
            let accepted = post(path, json_type).await;
            assert_eq!(accepted.status, 200, "{json_type}: {}", accepted.text);
            assert!(
                accepted.body["result"]["message"].is_object(),
                "{json_type}: {}",
                accepted.text
            );
        }
    }
}
