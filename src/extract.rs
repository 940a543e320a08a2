//! Request extractors whose rejections use the one error model: a JSON body (content type,
//! size, syntax checked in that order), path parameters, typed query strings (`Query`, with the
//! one pagination struct `Page`), and the raw query string for the search paths, whose filters
//! may repeat.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::IntoParams;

use crate::error::{ApiError, ErrorCode};

/// A request body parsed as JSON, kept as a `Value` so domain parsers can report every bad field.
/// An empty body with no content type reads as `null`.
pub struct JsonBody(pub Value);

impl<S: Send + Sync> FromRequest<S> for JsonBody {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let content_type = request
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        if bytes.iter().all(u8::is_ascii_whitespace) && content_type.is_none() {
            return Ok(Self(Value::Null));
        }
        if !content_type.as_deref().is_some_and(is_json) {
            return Err(ApiError::new(
                ErrorCode::UnsupportedMediaType,
                "expected Content-Type: application/json",
            ));
        }
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(Self(Value::Null));
        }
        serde_json::from_slice(&bytes)
            .map(Self)
            .map_err(|err| json_error_in(err, &bytes))
    }
}

/// Most levels of arrays and objects nested in a body (serde_json's own limit).
pub const MAX_JSON_DEPTH: usize = 128;

/// A body that does not parse: invalid JSON is 400, JSON that nests deeper than the reader goes
/// is 422 (it may be valid JSON; it is more than the registry reads).
pub fn json_error(err: serde_json::Error) -> ApiError {
    json_error_in(err, b"")
}

/// `json_error` for the body `bytes`, whose too deep member is named as a field
/// (`capabilities[0].input_schema`).
pub fn json_error_in(err: serde_json::Error, bytes: &[u8]) -> ApiError {
    if err.to_string().starts_with("recursion limit exceeded") {
        return ApiError::validation(vec![crate::domain::FieldError::new(
            too_deep_field(bytes),
            format!(
                "arrays and objects nest more than {MAX_JSON_DEPTH} levels deep (line {}, column \
                 {}); at most {MAX_JSON_DEPTH} are read",
                err.line(),
                err.column()
            ),
        )]);
    }
    ApiError::new(
        ErrorCode::InvalidJson,
        format!("the request body is not valid JSON: {err}"),
    )
}

/// Most path segments (keys and indices) a too-deep field is named by: enough to say which
/// member of the body holds the nesting (`capabilities[0].input_schema`), not the nesting itself.
const DEEP_FIELD_SEGMENTS: usize = 3;

/// The member of a JSON text where arrays and objects pass `MAX_JSON_DEPTH` levels, as a field
/// path of its first segments; empty when the body itself is the nesting (or it never passes).
pub fn too_deep_field(bytes: &[u8]) -> String {
    enum Level {
        Object(Option<String>),
        Array(usize),
    }
    let mut stack: Vec<Level> = Vec::new();
    let mut expect_key = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => {
                let start = i + 1;
                i += 1;
                while i < bytes.len() && bytes[i] != b'"' {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                if expect_key {
                    let raw = bytes.get(start..i.min(bytes.len())).unwrap_or_default();
                    let key = serde_json::from_slice::<String>(&[b"\"", raw, b"\""].concat())
                        .unwrap_or_else(|_| String::from_utf8_lossy(raw).into_owned());
                    if let Some(Level::Object(current)) = stack.last_mut() {
                        *current = Some(key);
                    }
                    expect_key = false;
                }
            }
            open @ (b'{' | b'[') => {
                if stack.len() >= MAX_JSON_DEPTH {
                    let mut path = String::new();
                    for level in stack.iter().take(DEEP_FIELD_SEGMENTS) {
                        match level {
                            Level::Object(Some(key)) if path.is_empty() => path.push_str(key),
                            Level::Object(Some(key)) => {
                                path.push('.');
                                path.push_str(key);
                            }
                            Level::Object(None) => break,
                            Level::Array(index) => path.push_str(&format!("[{index}]")),
                        }
                    }
                    return path;
                }
                stack.push(if open == b'{' {
                    expect_key = true;
                    Level::Object(None)
                } else {
                    Level::Array(0)
                });
            }
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Level::Array(index)) => *index += 1,
                Some(Level::Object(_)) => expect_key = true,
                None => {}
            },
            _ => {}
        }
        i += 1;
    }
    String::new()
}

fn is_json(content_type: &str) -> bool {
    let essence = content_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase();
    essence == "application/json"
        || (essence.starts_with("application/") && essence.ends_with("+json"))
}

fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == axum::http::StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            "the request body is larger than 1 MiB",
        )
    } else {
        ApiError::new(ErrorCode::InvalidJson, rejection.body_text())
    }
}

/// One path parameter as a string.
pub struct PathParam(pub String);

impl<S: Send + Sync> FromRequestParts<S> for PathParam {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Path::<String>::from_request_parts(parts, state)
            .await
            .map(|axum::extract::Path(value)| Self(value))
            .map_err(|rejection: PathRejection| ApiError::invalid_parameter(rejection.body_text()))
    }
}

/// The query string as decoded key/value pairs, repeated keys kept.
pub struct QueryPairs(pub Vec<(String, String)>);

impl<S: Send + Sync> FromRequestParts<S> for QueryPairs {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, ApiError> {
        let query = parts.uri.query().unwrap_or_default();
        // Bounded before any pair is decoded: no path takes more than a handful of parameters.
        let count = query.split('&').filter(|pair| !pair.is_empty()).count();
        if count > MAX_QUERY_PAIRS {
            return Err(ApiError::invalid_parameter(format!(
                "{count} query parameters; at most {MAX_QUERY_PAIRS} are read"
            )));
        }
        Ok(Self(
            url::form_urlencoded::parse(query.as_bytes())
                .into_owned()
                .collect(),
        ))
    }
}

/// Most `key=value` pairs a query string may have.
pub const MAX_QUERY_PAIRS: usize = 64;

/// The query string read into `T` (which derives `Deserialize`, and `IntoParams` for the
/// OpenAPI document). One rule on every path that uses it: each parameter at most once (a
/// repeat is 400 `invalid_parameter` "limit: given more than once": which of two page sizes
/// would be meant?), each value read as its field's type (a bad one is 400 naming the
/// parameter); unknown parameters are ignored.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let QueryPairs(pairs) = QueryPairs::from_request_parts(parts, state).await?;
        for (i, (key, _)) in pairs.iter().enumerate() {
            if pairs[..i].iter().any(|(seen, _)| seen == key) {
                return Err(ApiError::invalid_parameter(format!(
                    "{}: given more than once",
                    crate::domain::truncate(key, 40)
                )));
            }
        }
        let encoded = serde_urlencoded::to_string(&pairs).unwrap_or_default();
        let deserializer =
            serde_urlencoded::Deserializer::new(url::form_urlencoded::parse(encoded.as_bytes()));
        serde_path_to_error::deserialize(deserializer)
            .map(Self)
            .map_err(|err| ApiError::invalid_parameter(format!("{}: {}", err.path(), err.inner())))
    }
}

/// A page of a list: the one pagination struct of the paths that page by cursor.
#[derive(Debug, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct Page {
    /// Page size; values below 1 are read as 1, above the path's maximum as the maximum.
    #[serde(default, deserialize_with = "integer")]
    #[param(value_type = Option<i64>)]
    pub limit: Option<i64>,
    /// `next_cursor` of the previous page.
    pub cursor: Option<String>,
}

impl Page {
    /// The page size: `default` when absent, clamped to `1..=max`.
    pub fn size(&self, default: usize, max: usize) -> usize {
        crate::search::clamp_limit(self.limit, default, max)
    }

    /// The cursor, `None` when absent or empty.
    pub fn cursor(&self) -> Option<&str> {
        self.cursor.as_deref().filter(|cursor| !cursor.is_empty())
    }
}

/// An optional integer parameter: "must be an integer" rather than the parser's own words.
pub fn integer<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    let text = String::deserialize(deserializer)?;
    text.trim()
        .parse()
        .map(Some)
        .map_err(|_| serde::de::Error::custom("must be an integer"))
}

#[cfg(test)]
mod tests {
    use super::too_deep_field;

    #[test]
    fn the_too_deep_member_is_named_by_its_first_segments() {
        let deep = |prefix: &str, suffix: &str| {
            format!("{prefix}{}{}{suffix}", "[".repeat(200), "]".repeat(200))
        };
        assert_eq!(
            too_deep_field(
                deep(
                    r#"{"capabilities": [{"name": "a\"b", "input_schema": "#,
                    "}]}"
                )
                .as_bytes()
            ),
            "capabilities[0].input_schema"
        );
        assert_eq!(
            too_deep_field(deep(r#"{"a": 1, "b": [1, 2, "#, "]}").as_bytes()),
            "b[2][0]"
        );
        assert_eq!(too_deep_field(deep("", "").as_bytes()), "[0][0][0]");
        assert_eq!(too_deep_field(br#"{"a": [[1]]}"#), "");
    }
}
