//! Outbound HTTPS (the fetcher for user URLs and configured APIs, and the model fetcher's
//! client for the package index) trusts the system's certificate store, and `SSL_CERT_FILE`,
//! as pip and curl do: networks that inspect TLS present their own CA, which only the system
//! knows. A test of
//! its own (its own process), since it sets `SSL_CERT_FILE` for the process.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use agent_registry::config::Config;
use agent_registry::outbound::{Fetch, JSON, Outbound, OutboundSettings, StaticResolver};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio_rustls::rustls;

/// A CA of the test's own, and a certificate for `localhost` it signed: (CA PEM, leaf DER, leaf
/// key DER).
fn certificates() -> (String, Vec<u8>, Vec<u8>) {
    let ca_key = rcgen::KeyPair::generate().expect("CA key");
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(rcgen::DnType::CommonName, "Inspecting proxy test CA");
    let ca = ca.self_signed(&ca_key).expect("CA");
    let leaf_key = rcgen::KeyPair::generate().expect("leaf key");
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_owned()])
        .expect("leaf params")
        .signed_by(&leaf_key, &ca, &ca_key)
        .expect("leaf");
    (ca.pem(), leaf.der().to_vec(), leaf_key.serialize_der())
}

/// An HTTPS server on loopback that answers every request with `{"ok":true}`.
async fn https_server(leaf: Vec<u8>, key: Vec<u8>) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.into()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(key.into()),
        )
        .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let port = listener.local_addr().expect("address").port();
    tokio::spawn(async move {
        while let Ok((socket, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(socket).await else {
                    return;
                };
                let mut head = Vec::new();
                let mut buffer = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match tls.read(&mut buffer).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buffer[..n]),
                    }
                }
                let body = br#"{"ok":true}"#;
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    body.len()
                );
                let _ = tls.write_all(answer.as_bytes()).await;
                let _ = tls.write_all(body).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    port
}

fn fetcher() -> Outbound {
    let config = Config::with_data_dir("unused");
    let mut settings =
        OutboundSettings::for_configured_apis(&config.upstreams, "http://registry.test");
    settings.resolver =
        Arc::new(StaticResolver::default().with("localhost", &[IpAddr::V4(Ipv4Addr::LOCALHOST)]));
    Outbound::new(settings).expect("fetcher")
}

/// Run `fetch_once` in a process of its own with `SSL_CERT_FILE` set: whether it fetched.
fn fetch_in_child(url: &str, ca_file: &std::path::Path) -> bool {
    let status = std::process::Command::new(std::env::current_exe().expect("this test binary"))
        .args(["--exact", "fetch_once", "--ignored", "--quiet"])
        .env("SSL_CERT_FILE", ca_file)
        .env("TLS_TEST_URL", url)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .expect("run the child");
    status.success()
}

#[tokio::test]
async fn outbound_https_trusts_a_ca_that_only_ssl_cert_file_names() {
    let (ca_pem, leaf, key) = certificates();
    let port = https_server(leaf, key).await;
    let url = format!("https://localhost:{port}/probe");
    let dir = tempfile::tempdir().expect("temp dir");
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca_pem).expect("write the CA");
    let url_for_child = url.clone();
    let trusted = tokio::task::spawn_blocking(move || fetch_in_child(&url_for_child, &ca_file))
        .await
        .expect("child");
    assert!(trusted, "the CA in SSL_CERT_FILE is trusted");
    // Without it, the CA is nobody's: the fetch is refused.
    let other = dir.path().join("empty.pem");
    std::fs::write(&other, "").expect("write");
    let refused = tokio::task::spawn_blocking(move || fetch_in_child(&url, &other))
        .await
        .expect("child");
    assert!(!refused, "a CA nobody names is not trusted");
}

/// The child's half: one fetch of `TLS_TEST_URL` with the environment it was given.
#[tokio::test]
#[ignore = "run by outbound_https_trusts_a_ca_that_only_ssl_cert_file_names in a child process"]
async fn fetch_once() {
    let url: url::Url = std::env::var("TLS_TEST_URL")
        .expect("TLS_TEST_URL")
        .parse()
        .expect("url");
    let fetched = fetcher()
        .get(&Fetch::get(url.clone(), JSON, 1024))
        .await
        .expect("fetched");
    assert_eq!(fetched.status, 200);
    assert_eq!(&fetched.body[..], br#"{"ok":true}"#);
    // The model fetcher's client (the package index) trusts the same store.
    let client = agent_registry::models::client().expect("client");
    let answer = client.get(url).send().await.expect("the index answers");
    assert_eq!(answer.status(), 200);
}
