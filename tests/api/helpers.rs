//! `TestApp`: the real router over a fresh database: SQLite in a temporary directory, or a
//! fresh schema on PostgreSQL with `REGISTRY_TEST_BACKEND=postgres` (scripts/test.sh runs the
//! suite both ways).

use std::net::SocketAddr;
use std::sync::Arc;

use crate::pg_schema::TestSchema;
use agent_registry::config::Config;
use agent_registry::state::AppState;
use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{HeaderMap, HeaderValue, Method, Request, StatusCode, header};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tempfile::TempDir;
use tower::ServiceExt;

pub const MASTER_KEY: &str = "test-master-key";

pub struct TestApp {
    pub router: Router,
    pub state: AppState,
    pub dir: TempDir,
    /// The PostgreSQL schema of this app, dropped after it (fields drop in order).
    pub schema: Option<Arc<TestSchema>>,
    /// Where the app listens once `served`: its requests then go over loopback HTTP.
    pub http: Option<String>,
}

/// Which database `TestApp`s use: `REGISTRY_TEST_BACKEND=postgres`, else SQLite.
pub fn on_postgres() -> bool {
    std::env::var("REGISTRY_TEST_BACKEND").is_ok_and(|backend| backend == "postgres")
}

/// What came back: status, headers, and the body as JSON (`Null` when empty or not JSON).
#[derive(Debug)]
pub struct TestResponse {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
    pub text: String,
}

impl TestResponse {
    fn of(status: StatusCode, headers: HeaderMap, bytes: &[u8]) -> Self {
        Self {
            status,
            headers,
            body: serde_json::from_slice(bytes).unwrap_or(Value::Null),
            text: String::from_utf8_lossy(bytes).into_owned(),
        }
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// Assert a problem+json error with this status and code.
    #[track_caller]
    pub fn assert_problem(&self, status: u16, code: &str) {
        assert_eq!(self.status.as_u16(), status, "body: {}", self.text);
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "body: {}",
            self.text
        );
        assert_eq!(self.body["code"], code, "body: {}", self.text);
        assert_eq!(self.body["status"], status);
        assert_eq!(self.body["type"], "about:blank");
        assert!(self.body["title"].is_string());
        assert!(self.body["detail"].is_string());
    }
}

impl TestApp {
    /// A fresh app with the master key `MASTER_KEY` and default configuration.
    pub async fn spawn() -> Self {
        Self::spawn_with(|_| {}).await
    }

    /// A fresh app after `configure` adjusts the configuration.
    pub async fn spawn_with(configure: impl FnOnce(&mut Config)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut config = Config::with_data_dir(dir.path());
        config.master_key = Some(MASTER_KEY.to_owned());
        config.public_url = Some("http://registry.test".parse().expect("url"));
        // The prober stays off unless a test turns it on: test agents' endpoints are made up.
        config.probe.probe_interval_secs = 0;
        // The built-in table: tests never depend on a model in the user's cache.
        config.embedder.kind = agent_registry::config::EmbedderKind::Static;
        let schema = if on_postgres() {
            let schema = TestSchema::create()
                .await
                .expect("REGISTRY_TEST_BACKEND=postgres cannot be skipped");
            config.storage.database_url = Some(schema.url.clone());
            Some(Arc::new(schema))
        } else {
            config.storage.database_url = None;
            None
        };
        configure(&mut config);
        Self::start(config, dir, schema).await
    }

    /// Build an app over an existing data directory or schema (to test restarts).
    pub async fn start(config: Config, dir: TempDir, schema: Option<Arc<TestSchema>>) -> Self {
        let app = agent_registry::build(config).await.expect("app builds");
        Self {
            router: app.router,
            state: app.state,
            dir,
            schema,
            http: None,
        }
    }

    /// A second app over the same database with its own connections and index, as another
    /// server process would be (on SQLite: another process on the same file, like the CLI).
    pub async fn sibling(&self) -> Self {
        let config = (*self.state.config).clone();
        let app = agent_registry::build(config).await.expect("sibling builds");
        Self {
            router: app.router,
            state: app.state,
            dir: tempfile::tempdir().expect("temp dir"),
            schema: self.schema.clone(),
            http: None,
        }
    }

    /// Stop this app and start a new one over the same data directory.
    pub async fn restart(self) -> Self {
        let config = (*self.state.config).clone();
        let (dir, schema) = (self.dir, self.schema);
        drop(self.router);
        drop(self.state);
        Self::start(config, dir, schema).await
    }

    /// Serve the app on a loopback port, as the binary does: from then on `send` (and every
    /// helper built on it) goes over real HTTP.
    pub async fn served(self) -> Self {
        let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind");
        self.served_on(listener)
    }

    /// `served`, on a listener the caller bound (to know its address before the app is built).
    pub fn served_on(mut self, listener: tokio::net::TcpListener) -> Self {
        let base = format!("http://{}", listener.local_addr().expect("address"));
        let router = self.router.clone();
        tokio::spawn(async move {
            axum::serve(
                listener,
                router.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
            .expect("serve");
        });
        self.http = Some(base);
        self
    }

    async fn send_over_http(&self, base: &str, request: Request<Body>) -> TestResponse {
        let (parts, body) = request.into_parts();
        let body = body.collect().await.expect("body").to_bytes();
        let response = reqwest::Client::new()
            .request(parts.method, format!("{base}{}", parts.uri))
            .headers(parts.headers)
            .body(body)
            .send()
            .await
            .expect("the served app answers");
        let (status, headers) = (response.status(), response.headers().clone());
        let bytes = response.bytes().await.expect("body");
        TestResponse::of(status, headers, &bytes)
    }

    /// Send any request.
    pub async fn send(&self, request: Request<Body>) -> TestResponse {
        if let Some(base) = &self.http {
            return self.send_over_http(base, request).await;
        }
        let response = self
            .router
            .clone()
            .oneshot(request)
            .await
            .expect("router is infallible");
        let (status, headers) = (response.status(), response.headers().clone());
        let bytes = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        TestResponse::of(status, headers, &bytes)
    }

    /// Send `method path` with an optional bearer token and JSON body.
    pub async fn request(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> TestResponse {
        let mut builder = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let body = match body {
            Some(json) => {
                builder = builder.header(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("application/json"),
                );
                Body::from(json.to_string())
            }
            None => Body::empty(),
        };
        self.send(builder.body(body).expect("request")).await
    }

    pub async fn get(&self, path: &str) -> TestResponse {
        self.request(Method::GET, path, None, None).await
    }

    pub async fn post(&self, path: &str, token: Option<&str>, body: Value) -> TestResponse {
        self.request(Method::POST, path, token, Some(body)).await
    }

    /// A fresh app, and a token of `owner` with every scope.
    pub async fn spawn_as(owner: &str) -> (Self, String) {
        let app = Self::spawn().await;
        let token = app.token(owner, &[]).await;
        (app, token)
    }

    /// A new token for `owner` with `scopes` (all scopes when empty), made with the master key.
    pub async fn token(&self, owner: &str, scopes: &[&str]) -> String {
        let response = self
            .post(
                "/api/tokens",
                Some(MASTER_KEY),
                json!({"owner": owner, "scopes": scopes}),
            )
            .await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
        response.body["token"].as_str().expect("token").to_owned()
    }

    /// `POST /api/agents/publish` with `token`, whatever it answers.
    pub async fn try_publish(&self, token: &str, body: Value) -> TestResponse {
        self.post("/api/agents/publish", Some(token), body).await
    }

    /// Publish `body` with `token`; asserts 201 and returns the record.
    pub async fn publish(&self, token: &str, body: Value) -> Value {
        let response = self.try_publish(token, body).await;
        assert_eq!(response.status, StatusCode::CREATED, "{}", response.text);
        response.body
    }

    /// Publish and go live; returns the ACTIVE record.
    pub async fn publish_live(&self, token: &str, body: Value) -> Value {
        let record = self.publish(token, body).await;
        let id = record["id"].as_str().expect("id");
        let response = self
            .request(
                Method::POST,
                &format!("/api/agents/{id}/go-live"),
                Some(token),
                None,
            )
            .await;
        assert_eq!(response.status, StatusCode::OK, "{}", response.text);
        response.body
    }
}

/// Serve `router` on a free loopback port for as long as the test's runtime lives: its address.
pub async fn serve_router(router: axum::Router) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind a loopback port");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("serve");
    });
    addr
}

/// The publish body's writable fields (besides `card`, which fills the others).
pub const WRITABLE_FIELDS: [&str; 11] = [
    "package_name",
    "name",
    "description",
    "version",
    "manifest_url",
    "url",
    "target",
    "category",
    "tags",
    "capabilities",
    "payment",
];

/// A minimal valid publish body for `package_name`.
pub fn agent_body(package_name: &str) -> Value {
    json!({
        "package_name": package_name,
        "name": format!("Agent {package_name}"),
        "description": format!("Test agent {package_name}."),
    })
}

impl TestApp {
    /// `GET path` with a bearer token.
    pub async fn get_as(&self, path: &str, token: &str) -> TestResponse {
        self.request(Method::GET, path, Some(token), None).await
    }

    /// `PUT path` with a bearer token and JSON body.
    pub async fn put(&self, path: &str, token: &str, body: Value) -> TestResponse {
        self.request(Method::PUT, path, Some(token), Some(body))
            .await
    }

    /// `DELETE path` with a bearer token.
    pub async fn delete(&self, path: &str, token: &str) -> TestResponse {
        self.request(Method::DELETE, path, Some(token), None).await
    }

    /// `POST path` with a bearer token and no body (go-live, unpublish).
    /// `POST /api/agents/{id}/{action}` (`go-live`, `unpublish`, `verify`) on the agent of
    /// `record`, as `token`.
    pub async fn act(&self, record: &Value, action: &str, token: &str) -> TestResponse {
        let id = str_at(record, "/id");
        self.post_empty(&format!("/api/agents/{id}/{action}"), token)
            .await
    }

    pub async fn post_empty(&self, path: &str, token: &str) -> TestResponse {
        self.request(Method::POST, path, Some(token), None).await
    }

    /// Send `method path` with raw body bytes and optional content type and token.
    pub async fn raw(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        content_type: Option<&str>,
        body: impl Into<Body>,
    ) -> TestResponse {
        let mut builder = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            builder = builder.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(content_type) = content_type {
            builder = builder.header(header::CONTENT_TYPE, content_type);
        }
        self.send(builder.body(body.into()).expect("request")).await
    }

    /// `GET path` as if sent by a client at `ip` (what `into_make_service_with_connect_info` adds).
    pub async fn get_from(&self, ip: [u8; 4], path: &str) -> TestResponse {
        let mut request = Request::builder()
            .uri(path)
            .body(Body::empty())
            .expect("request");
        request
            .extensions_mut()
            .insert(ConnectInfo(SocketAddr::from((ip, 40_000))));
        self.send(request).await
    }

    /// Publish `count` ACTIVE agents `com.example.<prefix>0..` (in that order) sharing `tag`.
    pub async fn publish_many(
        &self,
        token: &str,
        prefix: &str,
        count: usize,
        tag: &str,
    ) -> Vec<Value> {
        let mut records = Vec::with_capacity(count);
        for i in 0..count {
            let mut body = agent_body(&format!("com.example.{prefix}{i}"));
            body["tags"] = json!([tag]);
            records.push(self.publish_live(token, body).await);
        }
        records
    }
}

/// A change feed page's entries: package name, kind, and whether the agent's current record
/// came with it.
pub fn feed_entries(changes: &Value) -> Vec<(String, String, bool)> {
    changes["changes"]
        .as_array()
        .expect("changes")
        .iter()
        .map(|change| {
            (
                change["package_name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                change["kind"].as_str().unwrap_or_default().to_owned(),
                change["agent"].is_object(),
            )
        })
        .collect()
}

/// The `package_name` of every agent of a page (`{agents: [...]}`), in order.
pub fn packages_in(page: &Value) -> Vec<String> {
    page["agents"]
        .as_array()
        .unwrap_or_else(|| panic!("no agents array: {page}"))
        .iter()
        .map(|agent| {
            agent["package_name"]
                .as_str()
                .expect("package_name")
                .to_owned()
        })
        .collect()
}

/// The `package_name` of every agent in a list or search response, in order.
pub fn package_names(response: &TestResponse) -> Vec<String> {
    packages_in(&response.body)
}

/// The string at `pointer` (e.g. `/id`) of a JSON value.
pub fn str_at<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value
        .pointer(pointer)
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no string at {pointer} in {value}"))
}

/// The `field` of every entry of a problem's `errors`, sorted.
pub fn error_fields(response: &TestResponse) -> Vec<String> {
    let mut fields: Vec<String> = response.body["errors"]
        .as_array()
        .unwrap_or_else(|| panic!("no errors array: {}", response.text))
        .iter()
        .map(|error| {
            assert!(error["message"].is_string(), "{error}");
            error["field"].as_str().expect("field").to_owned()
        })
        .collect();
    fields.sort();
    fields
}
