//! Static files embedded in the binary, served under `/assets/` with an ETag.

use std::sync::OnceLock;

use axum::extract::Path;
use axum::extract::rejection::PathRejection;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorCode};

/// Every file under `/assets/`: name, content type, bytes.
const FILES: &[(&str, &str, &str)] = &[
    (
        "app.css",
        "text/css; charset=utf-8",
        include_str!("assets/app.css"),
    ),
    ("common.js", JS, include_str!("assets/common.js")),
    ("search.js", JS, include_str!("assets/search.js")),
    ("agent.js", JS, include_str!("assets/agent.js")),
    ("playground.js", JS, include_str!("assets/playground.js")),
    ("schema-form.js", JS, include_str!("assets/schema-form.js")),
    ("console.js", JS, include_str!("assets/console.js")),
    ("logo.svg", SVG, include_str!("assets/logo.svg")),
];

const JS: &str = "text/javascript; charset=utf-8";
const SVG: &str = "image/svg+xml";

struct Asset {
    content_type: &'static str,
    body: &'static str,
    etag: String,
}

fn table() -> &'static [(&'static str, Asset)] {
    static TABLE: OnceLock<Vec<(&'static str, Asset)>> = OnceLock::new();
    TABLE.get_or_init(|| {
        FILES
            .iter()
            .map(|&(name, content_type, body)| {
                let digest = hex::encode(Sha256::digest(body.as_bytes()));
                let etag = format!("\"{}\"", &digest[..32]);
                (
                    name,
                    Asset {
                        content_type,
                        body,
                        etag,
                    },
                )
            })
            .collect()
    })
}

/// `GET /assets/{file}`: the file, or 304 when `If-None-Match` has its ETag. Browsers revalidate
/// on every use (`no-cache`), so a new binary's assets are picked up at once and an unchanged
/// file costs a 304.
pub async fn asset(
    headers: HeaderMap,
    file: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let not_found = || ApiError::new(ErrorCode::NotFound, "no such asset");
    let Path(file) = file.map_err(|_| not_found())?;
    let (_, asset) = table()
        .iter()
        .find(|(name, _)| *name == file)
        .ok_or_else(not_found)?;
    let fresh = headers
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .any(|tag| tag.trim().trim_start_matches("W/") == asset.etag);
    let mut response = if fresh {
        StatusCode::NOT_MODIFIED.into_response()
    } else {
        (
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static(asset.content_type),
            )],
            asset.body,
        )
            .into_response()
    };
    let headers = response.headers_mut();
    if let Ok(etag) = HeaderValue::from_str(&asset.etag) {
        headers.insert(header::ETAG, etag);
    }
    headers.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("public, no-cache"),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    Ok(response)
}
