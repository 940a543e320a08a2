//! Media types as every JSON transport reads a `Content-Type` (A2A's JSON-RPC, MCP).

/// The essence of a media type: `Text/Plain; charset=utf-8` → `text/plain`.
pub fn essence(media_type: &str) -> String {
    media_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// Whether a `Content-Type` is JSON (`application/json` or `…+json`, parameters ignored).
pub fn is_json_media_type(media_type: &str) -> bool {
    let essence = essence(media_type);
    essence == "application/json" || essence.ends_with("+json")
}
