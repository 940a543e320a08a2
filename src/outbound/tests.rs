//! The SSRF guard and the limits, against a local HTTP server.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Router;
use axum::http::{HeaderMap, StatusCode as AxumStatus, header as axum_header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;

use super::*;

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A local server with the routes the tests need; returns its port.
async fn spawn_server() -> u16 {
    let router = Router::new()
        .route(
            "/ok",
            get(|| async { ([(axum_header::CONTENT_TYPE, "text/html")], "<p>hi</p>") }),
        )
        .route(
            "/json",
            get(|| async {
                (
                    [(axum_header::CONTENT_TYPE, "application/json")],
                    "{\"a\":1}",
                )
            }),
        )
        .route(
            "/agent",
            get(|headers: HeaderMap| async move {
                let agent = headers
                    .get(axum_header::USER_AGENT)
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_owned();
                ([(axum_header::CONTENT_TYPE, "text/plain")], agent)
            }),
        )
        .route(
            "/to-metadata",
            get(|| async { redirect("http://169.254.169.254/latest/meta-data/") }),
        )
        .route(
            "/to-internal",
            get(|| async { redirect("http://internal.example/admin") }),
        )
        .route(
            "/to-loopback-literal",
            get(|| async { redirect("http://[::1]/") }),
        )
        .route(
            "/to-decimal",
            get(|| async { redirect("http://2130706434/") }),
        )
        .route("/to-ok", get(|| async { redirect("/ok") }))
        .route(
            "/hop/{n}",
            get(
                |axum::extract::Path(n): axum::extract::Path<u32>| async move {
                    if n == 0 {
                        redirect("/ok")
                    } else {
                        redirect(&format!("/hop/{}", n - 1))
                    }
                },
            ),
        )
        .route(
            "/huge",
            get(|| async {
                (
                    [(axum_header::CONTENT_TYPE, "text/html")],
                    "x".repeat(100_000),
                )
            }),
        )
        .route(
            "/huge-chunked",
            get(|| async {
                let chunks =
                    futures::stream::iter((0..100).map(|_| {
                        Ok::<_, std::io::Error>(axum::body::Bytes::from(vec![b'x'; 1_000]))
                    }));
                (
                    [(axum_header::CONTENT_TYPE, "text/html")],
                    axum::body::Body::from_stream(chunks),
                )
            }),
        )
        .route(
            "/slow",
            get(|| async {
                tokio::time::sleep(Duration::from_secs(5)).await;
                "late"
            }),
        )
        .route(
            "/image",
            get(|| async { ([(axum_header::CONTENT_TYPE, "image/png")], "png") }),
        );
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .await
        .expect("bind");
    let port = listener.local_addr().expect("addr").port();
    tokio::spawn(async move {
        axum::serve(listener, router).await.expect("serve");
    });
    port
}

fn redirect(location: &str) -> Response {
    (
        AxumStatus::FOUND,
        [(axum_header::LOCATION, location.to_owned())],
    )
        .into_response()
}

fn settings(policy: AddressPolicy, resolver: impl HostResolver) -> OutboundSettings {
    OutboundSettings {
        policy,
        resolver: Arc::new(resolver),
        connect_timeout: Duration::from_secs(2),
        timeout: Duration::from_secs(5),
        user_agent: user_agent("http://registry.test"),
    }
}

/// Public addresses only, with `public.example` standing for the local server (whose address is
/// exempt) and `internal.example` resolving to a private address.
fn guarded() -> Outbound {
    let resolver = StaticResolver::default()
        .with("public.example", &[LOOPBACK])
        .with("internal.example", &["10.1.2.3".parse().expect("ip")])
        .with(
            "mixed.example",
            &["192.168.0.7".parse().expect("ip"), LOOPBACK],
        );
    Outbound::new(settings(
        AddressPolicy::PublicOnly {
            exempt: vec![LOOPBACK],
        },
        resolver,
    ))
    .expect("client")
}

/// Public addresses only, no exceptions, the system resolver.
fn strict() -> Outbound {
    Outbound::new(settings(
        AddressPolicy::PublicOnly { exempt: Vec::new() },
        SystemResolver,
    ))
    .expect("client")
}

fn permissive() -> Outbound {
    Outbound::new(settings(AddressPolicy::Any, SystemResolver)).expect("client")
}

fn url(text: &str) -> Url {
    Url::parse(text).expect("url")
}

async fn fetch(outbound: &Outbound, text: &str) -> Result<Fetched, OutboundError> {
    outbound
        .get(&Fetch::get(url(text), HTML_OR_TEXT, 10_000))
        .await
}

#[track_caller]
fn assert_forbidden(result: Result<Fetched, OutboundError>, needle: &str) {
    match result {
        Err(err @ OutboundError::Forbidden { .. }) => {
            assert_eq!(err.code(), ErrorCode::InvalidParameter);
            assert!(err.to_string().contains(needle), "{err} lacks {needle}");
        }
        other => panic!("expected a refusal mentioning {needle}, got {other:?}"),
    }
}

#[test]
fn odd_ipv4_forms_are_normalised_by_the_url_parser() {
    for text in [
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.0.0.1/",
        "http://0x7f000001/",
        "http://127.1/",
        "http://127.0.0.1./",
    ] {
        assert_eq!(
            url(text).host(),
            Some(Host::Ipv4(Ipv4Addr::LOCALHOST)),
            "{text}"
        );
    }
}

#[tokio::test]
async fn loopback_private_link_local_and_metadata_literals_are_refused() {
    let outbound = strict();
    for (target, reason) in [
        ("http://127.0.0.1/", "loopback"),
        ("http://127.0.0.1:8080/admin", "loopback"),
        ("http://[::1]/", "loopback"),
        ("http://169.254.169.254/latest/meta-data/", "metadata"),
        ("http://10.0.0.1/", "private"),
        ("http://10.255.1.2:9000/", "private"),
        ("http://192.168.1.1/", "private"),
        ("http://172.16.5.4/", "private"),
        ("http://0.0.0.0/", "this network"),
        ("http://[::ffff:127.0.0.1]/", "embedded"),
        ("http://[::ffff:169.254.169.254]/", "metadata"),
        ("http://[fe80::1]/", "link-local"),
        ("http://[fd00::1]/", "unique local"),
        ("http://100.100.100.200/", "carrier-grade"),
    ] {
        assert_forbidden(fetch(&outbound, target).await, reason);
    }
}

#[tokio::test]
async fn decimal_octal_and_hex_forms_of_loopback_are_refused() {
    let outbound = strict();
    for target in [
        "http://2130706433/",
        "http://0177.0.0.1/",
        "http://0x7f.0.0.1/",
        "http://0x7f000001/",
        "http://127.1/",
        "http://017700000001/",
    ] {
        assert_forbidden(fetch(&outbound, target).await, "loopback");
    }
}

#[tokio::test]
async fn localhost_names_are_refused_without_resolving_them() {
    let outbound = strict();
    for target in [
        "http://localhost/",
        "http://LOCALHOST:3000/",
        "http://localhost./",
        "http://api.localhost/",
    ] {
        assert_forbidden(fetch(&outbound, target).await, "loopback");
    }
}

#[tokio::test]
async fn a_name_that_resolves_to_a_private_address_is_refused() {
    let outbound = guarded();
    assert_forbidden(
        fetch(&outbound, "http://internal.example/").await,
        "resolves to 10.1.2.3",
    );
}

#[tokio::test]
async fn a_name_with_one_private_and_one_allowed_address_connects_only_to_the_allowed_one() {
    let port = spawn_server().await;
    let outbound = guarded();
    let fetched = fetch(&outbound, &format!("http://mixed.example:{port}/ok"))
        .await
        .expect("the allowed address answers");
    assert_eq!(fetched.text(), "<p>hi</p>");
}

#[tokio::test]
async fn a_public_name_that_redirects_to_a_private_address_is_refused() {
    let port = spawn_server().await;
    let outbound = guarded();
    for (path, reason) in [
        ("to-metadata", "metadata"),
        ("to-internal", "resolves to 10.1.2.3"),
        ("to-loopback-literal", "loopback"),
        ("to-decimal", "loopback"),
    ] {
        // Only 127.0.0.1 is exempt; the decimal form names 127.0.0.2.
        let result = fetch(&outbound, &format!("http://public.example:{port}/{path}")).await;
        assert_forbidden(result, reason);
    }
}

#[tokio::test]
async fn redirects_are_followed_up_to_five_hops_and_no_further() {
    let port = spawn_server().await;
    let outbound = guarded();
    let fetched = fetch(&outbound, &format!("http://public.example:{port}/hop/4"))
        .await
        .expect("five redirects are fine");
    assert_eq!(fetched.status, StatusCode::OK);
    assert_eq!(fetched.url.path(), "/ok");
    let too_many = fetch(&outbound, &format!("http://public.example:{port}/hop/5")).await;
    assert!(
        matches!(
            too_many,
            Err(OutboundError::TooManyRedirects { limit: 5, .. })
        ),
        "{too_many:?}"
    );
}

#[tokio::test]
async fn a_fetch_that_allows_no_redirects_refuses_one() {
    let port = spawn_server().await;
    let outbound = guarded();
    let fetch = Fetch::get(
        url(&format!("http://public.example:{port}/to-ok")),
        HTML_OR_TEXT,
        1_000,
    )
    .redirects(0);
    let result = outbound.get(&fetch).await;
    assert!(
        matches!(result, Err(OutboundError::RedirectNotFollowed { .. })),
        "{result:?}"
    );
}

#[tokio::test]
async fn credentials_and_other_schemes_are_refused() {
    let outbound = permissive();
    for target in [
        "http://user:secret@example.com/",
        "http://user@example.com/",
        "ftp://example.com/file",
        "file:///etc/passwd",
        "gopher://example.com/",
    ] {
        let result = fetch(&outbound, target).await;
        assert!(
            matches!(result, Err(OutboundError::InvalidUrl(_))),
            "{target}: {result:?}"
        );
    }
}

#[tokio::test]
async fn bodies_over_the_cap_are_refused_with_or_without_a_length() {
    let port = spawn_server().await;
    let outbound = permissive();
    for path in ["huge", "huge-chunked"] {
        let result = fetch(&outbound, &format!("http://127.0.0.1:{port}/{path}")).await;
        match result {
            Err(err @ OutboundError::TooLarge { limit: 10_000, .. }) => {
                assert_eq!(err.code(), ErrorCode::UpstreamError);
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn an_unexpected_content_type_is_refused() {
    let port = spawn_server().await;
    let outbound = permissive();
    let result = fetch(&outbound, &format!("http://127.0.0.1:{port}/image")).await;
    assert!(
        matches!(&result, Err(OutboundError::ContentType { got, .. }) if got == "image/png"),
        "{result:?}"
    );
    let json = outbound
        .get(&Fetch::get(
            url(&format!("http://127.0.0.1:{port}/json")),
            JSON,
            1_000,
        ))
        .await
        .expect("json is accepted");
    assert_eq!(json.json::<serde_json::Value>().expect("json")["a"], 1);
}

#[tokio::test]
async fn a_slow_server_times_out() {
    let port = spawn_server().await;
    let outbound = permissive();
    let fetch = Fetch::get(
        url(&format!("http://127.0.0.1:{port}/slow")),
        HTML_OR_TEXT,
        1_000,
    )
    .timeout(Duration::from_millis(300));
    let result = outbound.get(&fetch).await;
    match result {
        Err(err @ OutboundError::Timeout { .. }) => {
            assert_eq!(err.code(), ErrorCode::UpstreamTimeout);
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test]
async fn requests_carry_a_descriptive_user_agent() {
    let port = spawn_server().await;
    let fetched = fetch(&permissive(), &format!("http://127.0.0.1:{port}/agent"))
        .await
        .expect("fetched");
    assert!(
        fetched.text().starts_with("agent-registry/"),
        "{}",
        fetched.text()
    );
}

#[tokio::test]
async fn private_targets_are_reached_when_the_policy_allows_them() {
    let port = spawn_server().await;
    let fetched = fetch(&permissive(), &format!("http://localhost:{port}/ok"))
        .await
        .expect("allowed");
    assert_eq!(fetched.status, StatusCode::OK);
}

/// Answers a public-looking address first and a private one afterwards (DNS rebinding).
struct Rebinding(AtomicUsize);

#[async_trait]
impl HostResolver for Rebinding {
    async fn lookup(&self, _host: &str) -> std::io::Result<Vec<IpAddr>> {
        let calls = self.0.fetch_add(1, Ordering::SeqCst);
        Ok(vec![if calls == 0 {
            LOOPBACK
        } else {
            "10.9.8.7".parse().expect("ip")
        }])
    }
}

#[tokio::test]
async fn a_name_rebound_to_a_private_address_after_the_check_is_refused_at_connect() {
    let port = spawn_server().await;
    let outbound = Outbound::new(settings(
        AddressPolicy::PublicOnly {
            exempt: vec![LOOPBACK],
        },
        Rebinding(AtomicUsize::new(0)),
    ))
    .expect("client");
    assert_forbidden(
        fetch(&outbound, &format!("http://rebind.example:{port}/ok")).await,
        "10.9.8.7",
    );
}
