//! Tests of the real binary over real HTTP on loopback: crash safety, graceful shutdown,
//! persistence across restarts, and several servers on one PostgreSQL database.

use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[path = "api/github.rs"]
mod github;
#[path = "support/pg_schema.rs"]
mod pg_schema;
use pg_schema::TestSchema;
use serde_json::{Value, json};

const MASTER_KEY: &str = "process-test-master-key";

struct Server {
    child: Child,
    base: String,
}

impl Server {
    /// Start the binary on a free port over `data_dir` and wait until it answers.
    async fn start(data_dir: &Path) -> Self {
        Self::start_on(data_dir, None).await
    }

    /// Start the binary over `data_dir`, on the database at `database_url` when given.
    async fn start_on(data_dir: &Path, database_url: Option<&str>) -> Self {
        let port = free_port();
        let child = serve_command(data_dir, port)
            .args(database_url.map(|url| format!("--database-url={url}")))
            .env("REGISTRY_MASTER_KEY", MASTER_KEY)
            .stderr(Stdio::null())
            .spawn()
            .expect("binary starts");
        Self::ready(child, port).await
    }

    async fn ready(child: Child, port: u16) -> Self {
        let server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
        };
        server.wait_ready().await;
        server
    }

    async fn wait_ready(&self) {
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let ready = client
                .get(format!("{}/readyz", self.base))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("server at {} did not become ready", self.base);
    }

    fn kill_hard(&mut self) {
        self.child.kill().expect("SIGKILL");
        self.child.wait().expect("reaped");
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("free port")
        .port()
}

/// `agent-registry serve` on loopback `port` over `data_dir`, quiet on stdout.
fn serve_command(data_dir: &Path, port: u16) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agent-registry"));
    command
        .args(["serve", "--bind", &format!("127.0.0.1:{port}")])
        .arg("--data-dir")
        .arg(data_dir)
        .env("RUST_LOG", "warn")
        // The built-in table, and never a model download: tests that want another say so.
        .env("REGISTRY_EMBEDDER", "static")
        .env("REGISTRY_OFFLINE", "true")
        .stdout(Stdio::null());
    command
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

async fn create_token(client: &reqwest::Client, base: &str, owner: &str) -> String {
    let response: Value = client
        .post(format!("{base}/api/tokens"))
        .bearer_auth(MASTER_KEY)
        .json(&json!({"owner": owner}))
        .send()
        .await
        .expect("token request")
        .json()
        .await
        .expect("token body");
    response["token"].as_str().expect("token").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_killed_server_loses_no_acknowledged_publish() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(dir.path()).await;
    let client = reqwest::Client::new();
    let token = create_token(&client, &server.base, "crash").await;

    let acknowledged = Arc::new(Mutex::new(Vec::<String>::new()));
    let mut writers = Vec::new();
    for writer in 0..8 {
        let (client, base, token) = (client.clone(), server.base.clone(), token.clone());
        let acknowledged = Arc::clone(&acknowledged);
        writers.push(tokio::spawn(async move {
            for i in 0.. {
                let package = format!("com.crash.w{writer}-n{i}");
                let sent = client
                    .post(format!("{base}/api/agents/publish"))
                    .bearer_auth(&token)
                    .json(&json!({"package_name": package, "name": "Crash test",
                                  "description": "Written during a crash."}))
                    .send()
                    .await;
                match sent {
                    Ok(response) if response.status() == 201 => {
                        acknowledged.lock().expect("lock").push(package);
                    }
                    _ => break,
                }
            }
        }));
    }
    let deadline = Instant::now() + Duration::from_secs(60);
    while acknowledged.lock().expect("lock").len() < 150 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    server.kill_hard();
    for writer in writers {
        writer.await.expect("writer task");
    }
    let acknowledged = acknowledged.lock().expect("lock").clone();
    assert!(
        acknowledged.len() >= 150,
        "only {} writes acknowledged",
        acknowledged.len()
    );

    let server = Server::start(dir.path()).await;
    for package in &acknowledged {
        let status = client
            .get(format!("{}/api/agents/{package}", server.base))
            .bearer_auth(&token)
            .send()
            .await
            .expect("get")
            .status();
        assert_eq!(status, 200, "acknowledged publish of {package} was lost");
    }
    // Each write and its audit row were one transaction: after the crash, the agents stored and
    // the `agent.created` rows name exactly the same packages.
    let stored: std::collections::BTreeSet<String> = agents_of(&client, &server.base, "crash")
        .await
        .into_iter()
        .collect();
    let mut audited = std::collections::BTreeSet::new();
    let rows = every_item(
        &client,
        &format!("{}/api/audit?actor=crash&limit=500", server.base),
        "entries",
    )
    .await;
    for entry in rows
        .iter()
        .filter(|entry| entry["action"] == "agent.created")
    {
        assert_eq!(entry["outcome"], "ok");
        audited.insert(entry["package_name"].as_str().expect("package").to_owned());
    }
    assert!(stored.len() >= acknowledged.len());
    assert_eq!(
        stored, audited,
        "a write without its audit row, or a row without its write"
    );
}

#[tokio::test]
async fn sigterm_stops_the_server_cleanly_and_data_survives_a_restart() {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut server = Server::start(dir.path()).await;
    let client = reqwest::Client::new();
    let token = create_token(&client, &server.base, "alice").await;
    let published = client
        .post(format!("{}/api/agents/publish", server.base))
        .bearer_auth(&token)
        .json(
            &json!({"package_name": "com.example.weather", "name": "Weather",
                      "description": "Forecasts for any city.", "tags": ["forecast"]}),
        )
        .send()
        .await
        .expect("publish");
    assert_eq!(published.status(), 201);
    let live = client
        .post(format!(
            "{}/api/agents/com.example.weather/go-live",
            server.base
        ))
        .bearer_auth(&token)
        .send()
        .await
        .expect("go-live");
    assert_eq!(live.status(), 200);

    let pid = server.child.id().to_string();
    let signalled = Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .expect("kill");
    assert!(signalled.success());
    let deadline = Instant::now() + Duration::from_secs(10);
    let status = loop {
        if let Some(status) = server.child.try_wait().expect("wait") {
            break status;
        }
        assert!(
            Instant::now() < deadline,
            "server did not stop after SIGTERM"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(status.success(), "exit status {status}");

    let server = Server::start(dir.path()).await;
    let found: Value = client
        .get(format!("{}/public/agents?q=weather", server.base))
        .send()
        .await
        .expect("search")
        .json()
        .await
        .expect("json");
    assert_eq!(found["total"], 1, "{found}");
    assert_eq!(found["agents"][0]["package_name"], "com.example.weather");
    let still_valid = client
        .get(format!("{}/api/agents", server.base))
        .bearer_auth(&token)
        .send()
        .await
        .expect("list");
    assert_eq!(still_valid.status(), 200, "the token survives a restart");
}

#[tokio::test]
async fn import_loads_a_jsonl_file_and_reports_rejected_lines() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("agents.jsonl");
    std::fs::write(
        &file,
        [
            r#"{"package_name": "io.github.a.one", "name": "One", "description": "First.", "source": "x"}"#,
            r#"{"package_name": "bad", "name": "", "description": "Second."}"#,
            "not json",
            "",
            r#"{"package_name": "io.github.a.two", "name": "Two", "description": "Second.", "tags": ["t"]}"#,
        ]
        .join("\n"),
    )
    .expect("write");
    let data_dir = dir.path().join("data");
    let output = Command::new(env!("CARGO_BIN_EXE_agent-registry"))
        .arg("import")
        .env("REGISTRY_EMBEDDER", "static")
        .arg(&file)
        .args(["--owner", "importer", "--go-live", "--data-dir"])
        .arg(&data_dir)
        .output()
        .expect("import runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr
            .trim_end()
            .ends_with("import: created 2, updated 0, unchanged 0, rejected 2"),
        "{stderr}"
    );
    assert!(stderr.contains("line 2:"), "{stderr}");
    assert!(stderr.contains("line 3: invalid JSON"), "{stderr}");
    // The ACTIVE agents were embedded and their vectors stored: `serve` restores them.
    let embedder = agent_registry::embed::StaticEmbedder::builtin().expect("table");
    let id = agent_registry::embed::Embedder::id(&embedder).to_owned();
    assert!(
        stderr.contains(&format!("import: 2 ACTIVE agents have their {id} vectors")),
        "{stderr}"
    );
    {
        use agent_registry::store::Store;
        let store = agent_registry::store::sqlite::SqliteStore::open_dir(&data_dir)
            .await
            .expect("store");
        let stored = store.embeddings_page(&id, None, 10).await.expect("vectors");
        assert_eq!(stored.len(), 2);
    }

    let exported = Command::new(env!("CARGO_BIN_EXE_agent-registry"))
        .args(["export", "--data-dir"])
        .arg(&data_dir)
        .output()
        .expect("export runs");
    assert!(exported.status.success());
    let lines: Vec<Value> = String::from_utf8_lossy(&exported.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("export line is JSON"))
        .collect();
    let imported: Vec<&Value> = lines.iter().filter(|l| l["owner"] == "importer").collect();
    assert_eq!(imported.len(), 2);
    assert!(imported.iter().all(|l| l["state"] == "ACTIVE"));
    assert!(
        imported.iter().all(|l| l["version"] == "1.0.0"),
        "published without a version: 1.0.0"
    );
}

#[test]
fn an_import_whose_embedder_cannot_load_keeps_its_agents_and_says_so() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("agents.jsonl");
    let one = r#"{"package_name": "io.github.a.one", "name": "One", "description": "First."}"#;
    std::fs::write(&file, one).expect("write");
    let empty = dir.path().join("no-models");
    let models_dir = format!("--models-dir={}", empty.display());
    let stderr = run_import(
        &file,
        &dir.path().join("data"),
        "importer",
        &["--go-live", "--embedder", "bge-small", &models_dir],
    );
    assert!(
        stderr.contains("import: vectors not stored (cannot load bge-small"),
        "{stderr}"
    );
    assert!(
        stderr
            .trim_end()
            .ends_with("import: created 1, updated 0, unchanged 0, rejected 0"),
        "{stderr}"
    );
}

/// `agent-registry import FILE --owner OWNER ARGS… --data-dir DIR`: its stderr, after checking
/// that it succeeded.
fn run_import(file: &Path, data_dir: &Path, owner: &str, args: &[&str]) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_agent-registry"))
        .arg("import")
        .env("REGISTRY_EMBEDDER", "static")
        .arg(file)
        .args(["--owner", owner])
        .args(args)
        .arg("--data-dir")
        .arg(data_dir)
        .output()
        .expect("import runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    stderr
}

#[tokio::test]
async fn import_runs_again_with_update_and_keeps_every_reject() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("agents.jsonl");
    let data_dir = dir.path().join("data");
    let one = r#"{"package_name": "io.github.a.one", "name": "One", "description": "First."}"#;
    let two = r#"{"package_name": "io.github.a.two", "name": "Two", "description": "Second."}"#;
    let mut lines = vec![one.to_owned(), two.to_owned()];
    lines.extend((0..60).map(|i| format!(r#"{{"package_name": "bad{i}", "name": ""}}"#)));
    std::fs::write(&file, lines.join("\n")).expect("write");

    let first = run_import(&file, &data_dir, "importer", &[]);
    assert!(
        first
            .trim_end()
            .ends_with("import: created 2, updated 0, unchanged 0, rejected 60"),
        "{first}"
    );
    assert!(
        first.contains("(--rejects FILE keeps every one)"),
        "{first}"
    );

    // Without --update, a second run rejects what exists; with it, nothing changes.
    let again = run_import(&file, &data_dir, "importer", &[]);
    assert!(
        again.contains("already registered (--update updates it)"),
        "{again}"
    );
    let rejects = dir.path().join("rejects.jsonl");
    let rejects_arg = rejects.to_str().expect("utf-8 path");
    let same = run_import(
        &file,
        &data_dir,
        "importer",
        &["--update", "--rejects", rejects_arg],
    );
    assert!(
        same.trim_end()
            .ends_with("import: created 0, updated 0, unchanged 2, rejected 60"),
        "{same}"
    );
    let kept: Vec<Value> = std::fs::read_to_string(&rejects)
        .expect("rejects file")
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON line"))
        .collect();
    assert_eq!(kept.len(), 60, "every reject, not the first 50");
    assert_eq!(kept[0]["line"], 3);
    assert!(
        kept[0]["errors"].as_array().is_some_and(|e| !e.is_empty()),
        "{}",
        kept[0]
    );

    // A changed line updates its agent, a new one is created, and --go-live applies to both.
    let changed = one.replace("First.", "First, and better.");
    let three =
        r#"{"package_name": "io.github.a.three", "name": "Three", "description": "Third."}"#;
    std::fs::write(&file, [changed.as_str(), two, three].join("\n")).expect("write");
    let newer = run_import(&file, &data_dir, "importer", &["--update", "--go-live"]);
    assert!(
        newer
            .trim_end()
            .ends_with("import: created 1, updated 2, unchanged 0, rejected 0"),
        "{newer}"
    );

    // Another owner's agents are never touched.
    let stranger = run_import(&file, &data_dir, "mallory", &["--update"]);
    assert!(stranger.trim_end().ends_with("rejected 3"), "{stranger}");
    assert!(
        stranger.contains("registered to another owner"),
        "{stranger}"
    );

    let exported = Command::new(env!("CARGO_BIN_EXE_agent-registry"))
        .args(["export", "--data-dir"])
        .arg(&data_dir)
        .output()
        .expect("export runs");
    let records: Vec<Value> = String::from_utf8_lossy(&exported.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("JSON"))
        .filter(|record: &Value| record["owner"] == "importer")
        .collect();
    assert_eq!(records.len(), 3);
    assert!(
        records.iter().all(|r| r["state"] == "ACTIVE"),
        "{records:?}"
    );
    let one = records
        .iter()
        .find(|r| r["package_name"] == "io.github.a.one")
        .expect("one");
    assert_eq!(one["description"], "First, and better.");
}

#[tokio::test]
async fn cli_tokens_work_against_the_server_and_revocation_is_immediate() {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().to_owned();
    let cli = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_agent-registry"))
            .args(args)
            .arg("--data-dir")
            .arg(&data_dir)
            .output()
            .expect("cli runs")
    };
    let created = cli(&[
        "token",
        "create",
        "--owner",
        "carol",
        "--scope",
        "agents:write",
    ]);
    assert!(created.status.success());
    let secret = String::from_utf8_lossy(&created.stdout).trim().to_owned();
    assert!(secret.starts_with("ar_"));

    let server = Server::start(&data_dir).await;
    let client = reqwest::Client::new();
    let list = |token: String| {
        let (client, base) = (client.clone(), server.base.clone());
        async move {
            client
                .get(format!("{base}/api/agents"))
                .bearer_auth(token)
                .send()
                .await
                .expect("list")
                .status()
        }
    };
    assert_eq!(list(secret.clone()).await, 200);

    let listed = cli(&["token", "list"]);
    let listing = String::from_utf8_lossy(&listed.stdout).into_owned();
    assert!(!listing.contains(&secret), "secrets are never listed");
    let id = listing
        .split_whitespace()
        .find(|word| word.starts_with("tok_"))
        .expect("token id listed")
        .to_owned();
    assert!(cli(&["token", "revoke", &id]).status.success());
    assert_eq!(list(secret).await, 401, "revocation is effective at once");
}

/// Start the binary without a master key and return it with everything it printed to stderr
/// until it answered `/readyz`.
async fn start_without_master_key(data_dir: &Path) -> (Server, String) {
    start_capturing_stderr(data_dir, |command| {
        command.env_remove("REGISTRY_MASTER_KEY");
    })
    .await
}

/// Start the binary, adjusted by `adjust`, and return it with everything it printed to stderr
/// until it answered `/readyz`.
async fn start_capturing_stderr(
    data_dir: &Path,
    adjust: impl FnOnce(&mut Command),
) -> (Server, String) {
    let (server, printed) = start_logging(data_dir, adjust).await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    let printed = printed.lock().expect("lock").clone();
    (server, printed)
}

/// Start the binary with `adjust`ed options: the server, and everything it writes to standard
/// error from then on.
async fn start_logging(
    data_dir: &Path,
    adjust: impl FnOnce(&mut Command),
) -> (Server, Arc<Mutex<String>>) {
    use std::io::Read;
    let port = free_port();
    let mut command = serve_command(data_dir, port);
    adjust(&mut command);
    let mut child = command
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let mut stderr = child.stderr.take().expect("stderr");
    let printed = Arc::new(Mutex::new(String::new()));
    let sink = Arc::clone(&printed);
    std::thread::spawn(move || {
        let mut buffer = [0u8; 4096];
        while let Ok(read) = stderr.read(&mut buffer) {
            if read == 0 {
                break;
            }
            sink.lock()
                .expect("lock")
                .push_str(&String::from_utf8_lossy(&buffer[..read]));
        }
    });
    let server = Server::ready(child, port).await;
    (server, printed)
}

#[tokio::test]
async fn a_first_local_start_prints_one_working_token_and_a_second_start_prints_none() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (server, printed) = start_without_master_key(dir.path()).await;
    let token = printed
        .split_whitespace()
        .find(|word| word.starts_with("ar_"))
        .unwrap_or_else(|| panic!("no token printed: {printed}"))
        .to_owned();
    let client = reqwest::Client::new();
    let own = client
        .get(format!("{}/api/agents", server.base))
        .bearer_auth(&token)
        .send()
        .await
        .expect("list own agents");
    assert_eq!(own.status(), 200);
    let session = client
        .post(format!("{}/api/playground/session", server.base))
        .bearer_auth(&token)
        .json(&json!({}))
        .send()
        .await
        .expect("create session");
    assert_eq!(session.status(), 201);
    drop(server);

    let (_server, printed) = start_without_master_key(dir.path()).await;
    assert!(
        !printed.contains("ar_"),
        "a second token was printed: {printed}"
    );
}

#[tokio::test]
async fn the_default_log_level_leaves_out_the_search_index_internals() {
    let dir = tempfile::tempdir().expect("temp dir");
    let (_server, printed) = start_capturing_stderr(dir.path(), |command| {
        command.env_remove("RUST_LOG");
    })
    .await;
    assert!(printed.contains("INFO"), "no INFO line at all: {printed}");
    assert!(
        !printed.contains("tantivy"),
        "the index's INFO lines were printed: {printed}"
    );
}

/// A cookie's `name=value` from a response's `Set-Cookie` headers.
fn set_cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all(reqwest::header::SET_COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .find(|cookie| cookie.starts_with(&format!("{name}=")))
        .and_then(|cookie| cookie.split(';').next())
        .unwrap_or_else(|| panic!("no {name} cookie"))
        .to_owned()
}

#[tokio::test]
async fn no_code_state_token_or_secret_of_a_sign_in_reaches_the_log_even_at_debug_level() {
    let github = github::FakeGithub::start().await;
    let dir = tempfile::tempdir().expect("temp dir");
    let (server, log) = start_logging(dir.path(), |command| {
        command
            .env("RUST_LOG", "debug,tantivy=warn")
            .env("REGISTRY_GITHUB_CLIENT_ID", github::CLIENT_ID)
            .env("REGISTRY_GITHUB_CLIENT_SECRET", github::CLIENT_SECRET)
            .env("REGISTRY_GITHUB_URL", github.url())
            .env("REGISTRY_GITHUB_API_URL", github.api_url());
    })
    .await;
    github.sign_in_as(github::Account::new(
        "octocat",
        583231,
        &[("acme", 9001, "active")],
    ));
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("client");
    let start = client
        .get(format!("{}/auth/login?provider=github", server.base))
        .send()
        .await
        .expect("login");
    assert_eq!(start.status(), 303);
    let signin = set_cookie(&start, "ar_signin");
    let to_github = start.headers()[reqwest::header::LOCATION]
        .to_str()
        .expect("location")
        .to_owned();
    let approved = client.get(&to_github).send().await.expect("authorize");
    let callback = approved.headers()[reqwest::header::LOCATION]
        .to_str()
        .expect("location")
        .to_owned();
    let query: std::collections::HashMap<String, String> = url::Url::parse(&callback)
        .expect("url")
        .query_pairs()
        .into_owned()
        .collect();
    let done = client
        .get(&callback)
        .header(reqwest::header::COOKIE, &signin)
        .send()
        .await
        .expect("callback");
    assert_eq!(done.status(), 303);
    let session = set_cookie(&done, "ar_session");
    let me: Value = client
        .get(format!("{}/api/me", server.base))
        .header(reqwest::header::COOKIE, &session)
        .send()
        .await
        .expect("me")
        .json()
        .await
        .expect("JSON");
    let csrf = me["csrf_token"].as_str().expect("csrf").to_owned();
    let minted: Value = client
        .post(format!("{}/api/tokens", server.base))
        .header(reqwest::header::COOKIE, &session)
        .header("X-CSRF-Token", &csrf)
        .json(&json!({}))
        .send()
        .await
        .expect("mint")
        .json()
        .await
        .expect("JSON");
    let access = github.token_for(github::Account::new("octocat", 583231, &[]));
    let exchanged: Value = client
        .post(format!("{}/api/auth/github", server.base))
        .json(&json!({"access_token": access}))
        .send()
        .await
        .expect("exchange")
        .json()
        .await
        .expect("JSON");
    // A refused callback logs its reason, never what it was sent.
    client
        .get(format!(
            "{}/auth/callback?code=leaky-code-1&state=leaky-state-1",
            server.base
        ))
        .send()
        .await
        .expect("refused callback");
    tokio::time::sleep(Duration::from_millis(300)).await;

    let printed = log.lock().expect("log").clone();
    assert!(
        printed.contains("signed in"),
        "no sign-in line at debug level: {printed}"
    );
    assert!(printed.contains("sign-in refused"), "{printed}");
    let secret_of = |cookie: &str| {
        cookie
            .split_once('=')
            .map(|(_, v)| v.to_owned())
            .expect("value")
    };
    let secrets = [
        ("the code", query["code"].clone()),
        ("the state", query["state"].clone()),
        ("the sign-in cookie", secret_of(&signin)),
        ("the session cookie", secret_of(&session)),
        ("the CSRF token", csrf),
        (
            "the minted token",
            minted["token"].as_str().expect("token").to_owned(),
        ),
        (
            "the exchanged token",
            exchanged["token"].as_str().expect("token").to_owned(),
        ),
        ("GitHub's access token", access),
        ("the client secret", github::CLIENT_SECRET.to_owned()),
        ("a refused code", "leaky-code-1".to_owned()),
        ("a refused state", "leaky-state-1".to_owned()),
    ];
    for (what, secret) in secrets {
        assert!(!printed.contains(&secret), "{what} is in the log");
    }
}

/// Two servers on one fresh PostgreSQL schema, each with its own data directory; `None` when the
/// PostgreSQL tests are explicitly skipped.
async fn two_servers_on_postgres() -> Option<(TestSchema, Vec<tempfile::TempDir>, Server, Server)> {
    let schema = TestSchema::create().await?;
    let dirs = vec![
        tempfile::tempdir().expect("temp dir"),
        tempfile::tempdir().expect("temp dir"),
    ];
    let first = Server::start_on(dirs[0].path(), Some(&schema.url)).await;
    let second = Server::start_on(dirs[1].path(), Some(&schema.url)).await;
    Some((schema, dirs, first, second))
}

/// Poll `GET {base}{path}` until the package names it lists equal `expected`; the time it took.
/// Panics after 2 s, the documented propagation bound.
async fn visible_within_two_seconds(
    client: &reqwest::Client,
    base: &str,
    path: &str,
    expected: &[&str],
) -> Duration {
    let started = Instant::now();
    loop {
        let page: Value = client
            .get(format!("{base}{path}"))
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        let listed: Vec<&str> = page["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .filter_map(|agent| agent["package_name"].as_str())
            .collect();
        if listed == expected {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{base}{path} lists {listed:?}, expected {expected:?} after 2 s"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn send(request: reqwest::RequestBuilder) -> reqwest::StatusCode {
    request.send().await.expect("request").status()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_servers_on_one_postgres_see_each_others_writes_within_two_seconds() {
    let Some((_schema, _dirs, first, second)) = two_servers_on_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let token = create_token(&client, &first.base, "alice").await;
    let (a, b) = (first.base.as_str(), second.base.as_str());
    let search = "/public/agents?q=quokkatides";
    let mut delays = Vec::new();

    let published = client
        .post(format!("{a}/api/agents/publish"))
        .bearer_auth(&token)
        .json(
            &json!({"package_name": "com.example.weather", "name": "Weather",
                      "description": "Forecasts and quokkatides for any coast."}),
        )
        .send()
        .await
        .expect("publish");
    assert_eq!(published.status(), 201);
    let agent_path = "/api/agents/com.example.weather";
    let go_live = format!("{agent_path}/go-live");
    assert_eq!(
        send(client.post(format!("{a}{go_live}")).bearer_auth(&token)).await,
        200
    );
    delays.push(visible_within_two_seconds(&client, b, search, &["com.example.weather"]).await);

    let updated = client
        .put(format!("{b}{agent_path}"))
        .bearer_auth(&token)
        .json(
            &json!({"package_name": "com.example.weather", "name": "Weather",
                      "description": "Forecasts for any wombatcity."}),
        )
        .send()
        .await
        .expect("update");
    assert_eq!(updated.status(), 200, "an update through the other server");
    delays.push(visible_within_two_seconds(&client, a, search, &[]).await);
    let city = "/public/agents?q=wombatcity";
    delays.push(visible_within_two_seconds(&client, a, city, &["com.example.weather"]).await);

    let unpublish = format!("{a}{agent_path}/unpublish");
    assert_eq!(send(client.post(unpublish).bearer_auth(&token)).await, 200);
    delays.push(visible_within_two_seconds(&client, b, city, &[]).await);

    assert_eq!(
        send(client.post(format!("{b}{go_live}")).bearer_auth(&token)).await,
        200
    );
    delays.push(visible_within_two_seconds(&client, a, city, &["com.example.weather"]).await);

    assert_eq!(
        send(
            client
                .delete(format!("{a}{agent_path}"))
                .bearer_auth(&token)
        )
        .await,
        204
    );
    delays.push(visible_within_two_seconds(&client, b, city, &[]).await);
    let feed: Value = client
        .get(format!("{b}/public/changes?limit=1000"))
        .send()
        .await
        .expect("feed")
        .json()
        .await
        .expect("json");
    let last = feed["changes"]
        .as_array()
        .and_then(|c| c.last())
        .expect("changes");
    assert_eq!(last["kind"], "deleted", "{feed}");
    assert_eq!(last["tombstone"], true);
    eprintln!("propagation delays: {delays:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_revoked_on_one_server_is_refused_by_the_other() {
    let Some((_schema, _dirs, first, second)) = two_servers_on_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let created: Value = client
        .post(format!("{}/api/tokens", first.base))
        .bearer_auth(MASTER_KEY)
        .json(&json!({"owner": "alice"}))
        .send()
        .await
        .expect("token")
        .json()
        .await
        .expect("json");
    let secret = created["token"].as_str().expect("token");
    let id = created["id"].as_str().expect("id");
    let list = format!("{}/api/agents", second.base);
    assert_eq!(send(client.get(&list).bearer_auth(secret)).await, 200);
    let revoke = format!("{}/api/tokens/{id}", first.base);
    assert!(
        send(client.delete(revoke).bearer_auth(MASTER_KEY))
            .await
            .is_success()
    );
    assert_eq!(
        send(client.get(&list).bearer_auth(secret)).await,
        401,
        "refused by the other server at once"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_publishes_of_one_name_on_two_servers_get_one_201_and_one_409() {
    let Some((_schema, _dirs, first, second)) = two_servers_on_postgres().await else {
        return;
    };
    let client = reqwest::Client::new();
    let token = create_token(&client, &first.base, "alice").await;
    for round in 0..10 {
        let body = json!({"package_name": format!("com.example.race{round}"), "name": "Race",
                          "description": "Published twice at once."});
        let publish = |base: &str| {
            client
                .post(format!("{base}/api/agents/publish"))
                .bearer_auth(&token)
                .json(&body)
                .send()
        };
        let (left, right) = tokio::join!(publish(&first.base), publish(&second.base));
        let mut statuses = [
            left.expect("publish").status().as_u16(),
            right.expect("publish").status().as_u16(),
        ];
        statuses.sort_unstable();
        assert_eq!(statuses, [201, 409], "round {round}");
    }
}

// ---- Hostile clients at the connection level (hyper and the accept loop, not the router) ----

/// Write `request` on a new connection to `base` and read one answer: status, headers (lowercase
/// names) and body, within `wait`.
async fn raw_exchange(base: &str, request: &[u8], wait: Duration) -> (u16, String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let address = base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(address)
        .await
        .expect("connect");
    // A server may answer (and close) before it has read everything: that is the point.
    let _ = stream.write_all(request).await;
    let mut received = Vec::new();
    let read = async {
        let mut buffer = [0u8; 8192];
        loop {
            let n = stream.read(&mut buffer).await.unwrap_or(0);
            if n == 0 {
                break;
            }
            received.extend_from_slice(&buffer[..n]);
            let text = String::from_utf8_lossy(&received);
            if let Some((head, body)) = text.split_once("\r\n\r\n") {
                let length = head
                    .lines()
                    .find_map(|line| {
                        line.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().to_owned())
                    })
                    .and_then(|v| v.parse::<usize>().ok());
                if length.is_some_and(|length| body.len() >= length) {
                    break;
                }
            }
        }
    };
    tokio::time::timeout(wait, read)
        .await
        .expect("an answer in time");
    let text = String::from_utf8_lossy(&received).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .expect("a status");
    (status, head.to_ascii_lowercase(), body.to_owned())
}

#[track_caller]
fn assert_problem_answer(answer: &(u16, String, String), status: u16, code: &str) {
    let (got, head, body) = answer;
    assert_eq!(*got, status, "{head}\n{body}");
    assert!(
        head.contains("content-type: application/problem+json"),
        "{head}"
    );
    let problem: Value = serde_json::from_str(body).expect("a JSON body");
    assert_eq!(problem["status"], status);
    assert_eq!(problem["code"], code, "{body}");
    assert!(problem["detail"].is_string());
}

#[tokio::test]
async fn stalled_connections_are_closed_and_healthz_keeps_answering() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().expect("temp dir");
    let port = free_port();
    let child = serve_command(dir.path(), port)
        .args(["--header-read-timeout-secs", "1", "--max-connections", "64"])
        .env("REGISTRY_MASTER_KEY", MASTER_KEY)
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let server = Server::ready(child, port).await;

    // Three times the connection cap, each stopping in the middle of its headers.
    let mut stalled = Vec::new();
    for _ in 0..192 {
        let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .expect("connect");
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-a: ")
            .await
            .expect("write");
        stalled.push(stream);
    }

    let healthz = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .build()
        .expect("client")
        .get(format!("{}/healthz", server.base))
        .send()
        .await
        .expect("healthz answers while stalled connections are held");
    assert_eq!(healthz.status(), 200);

    // Every stalled connection is closed by the server (end of stream, or a reset).
    let closed_all = async {
        for stream in &mut stalled {
            let mut buffer = [0u8; 64];
            loop {
                match stream.read(&mut buffer).await {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {}
                }
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(30), closed_all)
        .await
        .expect("the server closed every stalled connection");
}

#[tokio::test]
async fn requests_hyper_refuses_get_problem_bodies_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path()).await;
    let wait = Duration::from_secs(10);

    let mut many = String::from("GET /healthz HTTP/1.1\r\nHost: x\r\n");
    for i in 0..150 {
        many.push_str(&format!("X-h{i}: v\r\n"));
    }
    many.push_str("\r\n");
    let answer = raw_exchange(&server.base, many.as_bytes(), wait).await;
    assert_problem_answer(&answer, 431, "headers_too_large");

    let huge = format!(
        "GET /healthz HTTP/1.1\r\nHost: x\r\nX-big: {}\r\n\r\n",
        "a".repeat(100_000)
    );
    let answer = raw_exchange(&server.base, huge.as_bytes(), wait).await;
    assert_problem_answer(&answer, 431, "headers_too_large");

    let answer = raw_exchange(&server.base, b"\x01\x02\x03 nonsense\r\n\r\n", wait).await;
    assert_problem_answer(&answer, 400, "malformed_request");

    let long = format!(
        "GET /public/agents?q={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(10_000)
    );
    let answer = raw_exchange(&server.base, long.as_bytes(), wait).await;
    assert_problem_answer(&answer, 414, "uri_too_long");

    // A target longer than the whole head may be: still the URI that is too long.
    let longer = format!(
        "GET /public/agents?q={} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(100_000)
    );
    let answer = raw_exchange(&server.base, longer.as_bytes(), wait).await;
    assert_problem_answer(&answer, 414, "uri_too_long");
}

#[tokio::test]
async fn a_declared_oversized_body_is_refused_before_it_is_sent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path()).await;
    // Only the head is sent: a server that waited for the body would never answer.
    let head = format!(
        "POST /api/agents/publish HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {MASTER_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: 52428800\r\n\r\n"
    );
    let answer = raw_exchange(&server.base, head.as_bytes(), Duration::from_secs(5)).await;
    assert_problem_answer(&answer, 413, "payload_too_large");
}

#[tokio::test]
async fn a_client_that_sends_a_whole_oversized_body_before_reading_gets_the_413() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = tempfile::tempdir().expect("temp dir");
    let server = Server::start(dir.path()).await;
    // As Python's `urllib` (and so `requests`) does: the whole 2 MiB body is written before a
    // byte of the answer is read. A server that answers from the head and closes at once
    // resets the connection under the client, which then sees a broken pipe or a reset
    // instead of the 413, depending on timing: twenty tries catch it.
    let body = format!(
        "{{\"package_name\": \"com.example.big\", \"description\": \"{}\"}}",
        "x".repeat(2 * 1024 * 1024)
    );
    let head = format!(
        "POST /api/agents/publish HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {MASTER_KEY}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    let address = server.base.trim_start_matches("http://").to_owned();
    for attempt in 0..20 {
        let mut stream = tokio::net::TcpStream::connect(&address)
            .await
            .expect("connect");
        let exchange = async {
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(body.as_bytes()).await?;
            let mut answer = Vec::new();
            stream.read_to_end(&mut answer).await?;
            std::io::Result::Ok(answer)
        };
        let answer = tokio::time::timeout(Duration::from_secs(20), exchange)
            .await
            .expect("an answer in time")
            .unwrap_or_else(|err| panic!("try {attempt}: {err}"));
        let text = String::from_utf8_lossy(&answer);
        let (head, body) = text.split_once("\r\n\r\n").expect("an HTTP answer");
        let status = head
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .expect("a status");
        assert_problem_answer(
            &(status, head.to_ascii_lowercase(), body.to_owned()),
            413,
            "payload_too_large",
        );
    }
}

#[tokio::test]
async fn the_server_answers_healthz_at_once_and_readyz_reports_the_vectors() {
    let dir = tempfile::tempdir().expect("temp dir");
    let file = dir.path().join("agents.jsonl");
    let lines: Vec<String> = (0..3_000)
        .map(|i| {
            format!(
                r#"{{"package_name": "com.example.a{i}", "name": "Agent {i}", "description": "Forecasts and prices, number {i}."}}"#
            )
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).expect("write");
    let data_dir = dir.path().join("data");
    run_import(&file, &data_dir, "importer", &["--go-live"]);

    let port = free_port();
    let mut child = serve_command(&data_dir, port)
        .env("REGISTRY_MASTER_KEY", MASTER_KEY)
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    let base = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut seen = Vec::new();
    loop {
        assert!(Instant::now() < deadline, "never ready: {seen:?}");
        if let Ok(health) = client.get(format!("{base}/healthz")).send().await {
            assert_eq!(
                health.status(),
                200,
                "healthz answers whenever the port does"
            );
            let ready = client
                .get(format!("{base}/readyz"))
                .send()
                .await
                .expect("readyz answers");
            let status = ready.status().as_u16();
            let body: Value = ready.json().await.expect("JSON");
            if status == 503 {
                assert_eq!(body["code"], "unavailable", "{body}");
            } else {
                assert_eq!(status, 200, "{body}");
                assert_eq!(body["total"], 3_004, "{body}");
                let vectors = body["vectors"].as_str().unwrap_or_default().to_owned();
                assert!(["loading", "ready"].contains(&vectors.as_str()), "{body}");
                if vectors == "ready" {
                    assert_eq!(body["embedded"], 3_004);
                    break;
                }
            }
            seen.push(status);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// Import `count` agents with the CLI into the storage a running server follows, then wait until
/// the server's index holds them all: the time from the import's end.
async fn followed_import(count: usize, database_url: Option<&str>) -> Duration {
    let dir = tempfile::tempdir().expect("temp dir");
    let data_dir = dir.path().join("data");
    let server = Server::start_on(&data_dir, database_url).await;
    let file = dir.path().join("agents.jsonl");
    let lines: Vec<String> = (0..count)
        .map(|i| {
            format!(
                r#"{{"package_name": "com.example.bulk{i}", "name": "Bulk {i}", "description": "Tide tables, number {i}."}}"#
            )
        })
        .collect();
    std::fs::write(&file, lines.join("\n")).expect("write");
    let mut import = Command::new(env!("CARGO_BIN_EXE_agent-registry"));
    import
        .arg("import")
        .env("REGISTRY_EMBEDDER", "static")
        .arg(&file)
        .args(["--owner", "bulk", "--go-live", "--data-dir"])
        .arg(&data_dir)
        .args(database_url.map(|url| format!("--database-url={url}")));
    let output = import.output().expect("import runs");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let ended = Instant::now();
    let client = reqwest::Client::new();
    loop {
        let ready: Value = client
            .get(format!("{}/readyz", server.base))
            .send()
            .await
            .expect("readyz")
            .json()
            .await
            .expect("JSON");
        // The hosted agents are indexed too.
        if ready["total"].as_u64() >= Some(count as u64 + 3) {
            return ended.elapsed();
        }
        assert!(
            ended.elapsed() < Duration::from_secs(30),
            "only {} of {count} indexed",
            ready["total"]
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_bulk_import_by_another_process_is_searchable_within_seconds() {
    let waited = followed_import(5_000, None).await;
    eprintln!("SQLite: every agent searchable {waited:?} after the import ended");
    assert!(
        waited < Duration::from_secs(5),
        "{waited:?} after the import ended"
    );
    if let Some(schema) = TestSchema::create().await {
        let waited = followed_import(5_000, Some(&schema.url)).await;
        eprintln!("PostgreSQL: every agent searchable {waited:?} after the import ended");
        assert!(waited < Duration::from_secs(5), "PostgreSQL: {waited:?}");
    }
}

#[tokio::test]
async fn the_sample_catalogue_imports_whole_and_keeps_how_to_reach_each_agent() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/agents.jsonl");
    let lines = std::fs::read_to_string(&sample).expect("the sample catalogue ships");
    let count = lines.lines().filter(|line| !line.trim().is_empty()).count();

    let stderr = run_import(&sample, dir.path(), "demo", &["--go-live"]);

    assert!(
        stderr.trim_end().ends_with(&format!(
            "import: created {count}, updated 0, unchanged 0, rejected 0"
        )),
        "{stderr}"
    );
    let exported = Command::new(env!("CARGO_BIN_EXE_agent-registry"))
        .args(["export", "--data-dir"])
        .arg(dir.path())
        .output()
        .expect("export runs");
    let records: Vec<Value> = String::from_utf8_lossy(&exported.stdout)
        .lines()
        .map(|line| serde_json::from_str(line).expect("export line is JSON"))
        .filter(|record: &Value| record["owner"] == "demo")
        .collect();
    assert_eq!(records.len(), count);
    let with = |field: &str| records.iter().filter(|r| r.get(field).is_some()).count();
    assert!(with("packages") > 1000, "MCP packages kept");
    assert!(with("remotes") > 100, "MCP remotes kept");
    assert!(with("interfaces") > 100, "A2A interfaces kept");
}

/// The query strings a fake upstream answered, in order.
type Served = Arc<Mutex<Vec<String>>>;

/// A local MCP Registry API of `count` servers, pages of at most 100, each page taking `delay`;
/// keeps the query of every page it served.
async fn slow_mcp_registry(count: usize, delay: Duration) -> (String, Served) {
    use axum::extract::{Query, RawQuery, State};
    let served: Served = Arc::new(Mutex::new(Vec::new()));
    let names: Arc<Vec<String>> = Arc::new(
        (0..count)
            .map(|i| format!("io.github.crash{i:05}/server"))
            .collect(),
    );
    /// The server names, the pages served so far, and how long a page takes.
    type Upstream = (Arc<Vec<String>>, Served, Duration);
    async fn page(
        State((names, served, delay)): State<Upstream>,
        Query(query): Query<std::collections::HashMap<String, String>>,
        RawQuery(raw): RawQuery,
    ) -> axum::Json<Value> {
        tokio::time::sleep(delay).await;
        let limit: usize = query
            .get("limit")
            .and_then(|l| l.parse().ok())
            .unwrap_or(30)
            .min(100);
        let after = query.get("cursor").cloned();
        let since = query.get("updated_since").cloned();
        // Server i was last updated i minutes into 2025-09-01.
        let stamp = |i: usize| format!("2025-09-01T{:02}:{:02}:00Z", i / 60, i % 60);
        let start = after.map_or(0, |cursor| {
            names.partition_point(|name| name.as_str() <= cursor.as_str())
        });
        let wanted: Vec<usize> = (start..names.len())
            .filter(|&i| since.as_ref().is_none_or(|since| stamp(i) >= *since))
            .collect();
        let servers: Vec<Value> = wanted
            .iter()
            .take(limit)
            .map(|&i| {
                let name = &names[i];
                json!({
                    "server": {"name": name, "description": format!("Server {name} for crash tests."),
                        "version": "1.0.0", "packages": [{"registryType": "npm", "identifier": "@crash/x",
                        "version": "1.0.0", "transport": {"type": "stdio"}}]},
                    "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active",
                        "isLatest": true, "publishedAt": stamp(i), "updatedAt": stamp(i)}}
                })
            })
            .collect();
        let mut metadata = json!({"count": servers.len()});
        if wanted.len() > limit {
            metadata["nextCursor"] = json!(names[wanted[limit - 1]]);
        }
        served.lock().expect("lock").push(raw.unwrap_or_default());
        axum::Json(json!({"servers": servers, "metadata": metadata}))
    }
    let router = axum::Router::new()
        .route("/v0.1/servers", axum::routing::get(page))
        .with_state((names, Arc::clone(&served), delay));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("address"));
    tokio::spawn(async move { axum::serve(listener, router).await.expect("serve") });
    (origin, served)
}

/// `serve` over `dir` on a free port, mirroring the MCP Registry API at `origin`, with `args`
/// added; probes off. Not yet ready: `Server::ready` waits for it.
fn spawn_mirroring(dir: &Path, origin: &str, args: &[&str]) -> (Child, u16) {
    let port = free_port();
    let child = serve_command(dir, port)
        .args(["--mirror", &format!("mcp-registry={origin}")])
        .args(args)
        .env("REGISTRY_MASTER_KEY", MASTER_KEY)
        .env("REGISTRY_PROBE_INTERVAL_SECS", "0")
        .stderr(Stdio::null())
        .spawn()
        .expect("binary starts");
    (child, port)
}

/// Agents owned by `owner` on the server at `base`, as the master key lists them.
async fn agents_of(client: &reqwest::Client, base: &str, owner: &str) -> Vec<String> {
    every_item(client, &format!("{base}/api/agents?limit=100"), "agents")
        .await
        .into_iter()
        .filter(|agent| agent["owner"] == owner)
        .map(|agent| {
            agent["package_name"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect()
}

/// Every item of the list `key` of a paged answer (`next_cursor`), read with the master key.
async fn every_item(client: &reqwest::Client, first: &str, key: &str) -> Vec<Value> {
    let mut items = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let url = match &cursor {
            Some(cursor) => format!("{first}&cursor={cursor}"),
            None => first.to_owned(),
        };
        let page: Value = client
            .get(url)
            .bearer_auth(MASTER_KEY)
            .send()
            .await
            .expect("list")
            .json()
            .await
            .expect("json");
        items.extend(page[key].as_array().cloned().unwrap_or_default());
        match page["next_cursor"].as_str() {
            Some(next) => cursor = Some(next.to_owned()),
            None => return items,
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_mirror_killed_during_its_first_walk_resumes_without_a_duplicate_or_a_loss() {
    let (origin, served) = slow_mcp_registry(1_000, Duration::from_millis(150)).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let lease = ["--mirror-lease-secs", "2"];
    let (child, port) = spawn_mirroring(dir.path(), &origin, &lease);
    let mut server = Server::ready(child, port).await;
    // Killed mid-walk: some pages are written, the rest are not.
    let deadline = Instant::now() + Duration::from_secs(30);
    while served.lock().expect("lock").len() < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill_hard();
    let pages_before = served.lock().expect("lock").len();
    assert!(pages_before < 10, "the walk was still under way");

    let (child, port) = spawn_mirroring(dir.path(), &origin, &lease);
    let server = Server::ready(child, port).await;
    let client = reqwest::Client::new();
    let owner = format!(
        "mirror:mcp-registry:{}",
        origin.trim_start_matches("http://")
    );
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut names = Vec::new();
    while Instant::now() < deadline {
        names = agents_of(&client, &server.base, &owner).await;
        if names.len() >= 1_000 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let unique: std::collections::BTreeSet<&String> = names.iter().collect();
    assert_eq!(names.len(), 1_000, "exactly the upstream's servers");
    assert_eq!(unique.len(), 1_000, "no duplicate");
    // It resumed where it stopped: ten pages in all, give or take the page in flight.
    let pages = served.lock().expect("lock").len();
    assert!(pages <= 11, "{pages} pages served: the walk started over");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirror_sync_runs_one_pass_and_reports_it() {
    let (origin, served) = slow_mcp_registry(250, Duration::ZERO).await;
    let dir = tempfile::tempdir().expect("temp dir");
    let sync = |dir: &Path| {
        let origin = origin.clone();
        let dir = dir.to_owned();
        tokio::task::spawn_blocking(move || {
            Command::new(env!("CARGO_BIN_EXE_agent-registry"))
                .args(["mirror", "sync", &format!("mcp-registry={origin}")])
                .arg("--data-dir")
                .arg(&dir)
                .output()
                .expect("mirror sync runs")
        })
    };
    let output = sync(dir.path()).await.expect("task");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("250 entries read in 3 pages, created 250"),
        "{stderr}"
    );
    assert_eq!(served.lock().expect("lock").len(), 3);
    // Again: one request asks what changed, and nothing did.
    let output = sync(dir.path()).await.expect("task");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(
        stderr.contains("created 0, updated 0, deleted 0"),
        "{stderr}"
    );
    assert_eq!(served.lock().expect("lock").len(), 4);
    // A source that is not one is refused with a clear message.
    let output = Command::new(env!("CARGO_BIN_EXE_agent-registry"))
        .args(["mirror", "sync", "gopher=ftp://x.example"])
        .output()
        .expect("runs");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("the kind is one of"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_servers_on_one_postgres_sync_a_mirror_once_per_interval_between_them() {
    let Some(schema) = TestSchema::create().await else {
        return;
    };
    let (origin, served) = slow_mcp_registry(250, Duration::from_millis(20)).await;
    let dirs = [
        tempfile::tempdir().expect("temp dir"),
        tempfile::tempdir().expect("temp dir"),
    ];
    let database = format!("--database-url={}", schema.url);
    let args = [database.as_str(), "--mirror-interval-secs", "2"];
    let (child, port) = spawn_mirroring(dirs[0].path(), &origin, &args);
    let (child_b, port_b) = spawn_mirroring(dirs[1].path(), &origin, &args);
    let first = Server::ready(child, port).await;
    let second = Server::ready(child_b, port_b).await;
    let started = Instant::now();
    tokio::time::sleep(Duration::from_secs(9)).await;
    let queries = served.lock().expect("lock").clone();
    let elapsed = started.elapsed().as_secs_f64();
    // One first walk between them (three pages), then one request per pass.
    let walks = queries
        .iter()
        .filter(|q| !q.contains("cursor=") && !q.contains("updated_since="))
        .count();
    assert_eq!(walks, 1, "{queries:?}");
    let polls = queries
        .iter()
        .filter(|q| q.contains("updated_since="))
        .count();
    assert!(polls >= 2, "passes kept running: {queries:?}");
    // A pass every 2 s at most, between the two processes (plus the one under way).
    assert!(
        (polls as f64) <= elapsed / 2.0 + 2.0,
        "{polls} polls in {elapsed:.1} s: both processes polled: {queries:?}"
    );
    // Both serve every mirrored agent.
    let client = reqwest::Client::new();
    for server in [&first, &second] {
        let found: Value = client
            .get(format!(
                "{}/public/agents/io.github.crash00249.server",
                server.base
            ))
            .send()
            .await
            .expect("get")
            .json()
            .await
            .expect("json");
        assert_eq!(found["package_name"], "io.github.crash00249.server");
    }
}
