//! The ARD schemas of the OpenAPI document: request bodies written to match the ARD parsers
//! (`ard::query`, `ard::search`), and the shapes of manifests, entries and answers.

use serde_json::{Value, json};

use crate::ard::query::{
    BASE_CONTEXT, MAX_FILTER_KEYS, MAX_FILTER_VALUES, MAX_TERM_CHARS, MAX_TEXT_CHARS,
};

/// The plain terms a filter key or facet field may name.
const TERMS: [&str; 9] = [
    "identifier",
    "displayName",
    "type",
    "url",
    "description",
    "tags",
    "capabilities",
    "version",
    "publisher",
];

/// A filter key or facet field: a plain term, or a path into `metadata` or `trustManifest`.
/// (Prefixed terms and IRIs bound in `@context` are accepted too; the schema names the plain
/// forms.)
fn term_path() -> Value {
    json!({"anyOf": [
        {"type": "string", "enum": TERMS},
        {"type": "string", "maxLength": MAX_TERM_CHARS,
         "pattern": r"^(metadata|trustManifest)(\.[^.\u0000]+)+$"},
    ]})
}

fn filter_value() -> Value {
    json!({"anyOf": [
        {"type": "string", "maxLength": MAX_TERM_CHARS, "pattern": r"^[^\u0000]*$"},
        {"type": "number"},
        {"type": "boolean"},
    ]})
}

fn context() -> Value {
    let binding = json!({"anyOf": [
        {"type": "string", "minLength": 1, "maxLength": MAX_TERM_CHARS},
        {"type": "object", "required": ["@id"],
         "properties": {"@id": {"type": "string", "minLength": 1, "maxLength": MAX_TERM_CHARS}}},
    ]});
    let one = json!({"anyOf": [
        {"type": "string", "enum": [BASE_CONTEXT]},
        {"type": "object", "maxProperties": MAX_FILTER_KEYS * 2, "additionalProperties": binding},
    ]});
    json!({
        "description": "Binds the prefixes and terms filter keys use, layered on the ARD base context (only that context is known by URL).",
        "anyOf": [one.clone(), {"type": "array", "maxItems": 8, "items": one}, {"type": "null"}],
    })
}

fn query(text_required: bool) -> Value {
    let solid = super::solid();
    let text = if text_required {
        json!({"type": "string", "maxLength": MAX_TEXT_CHARS,
               "pattern": format!(r"^[^\u0000]*{solid}[^\u0000]*$"),
               "description": "What is needed, in natural language or keywords."})
    } else {
        json!({"type": ["string", "null"], "maxLength": MAX_TEXT_CHARS,
               "pattern": r"^[^\u0000]*$",
               "description": "Narrows the matched set by relevance; absent or blank: every entry."})
    };
    let mut query = json!({
        "type": "object",
        "additionalProperties": false,
        "properties": {
            "@context": context(),
            "text": text,
            "filter": {
                "type": ["object", "null"],
                "maxProperties": MAX_FILTER_KEYS,
                "propertyNames": term_path(),
                "additionalProperties": {"anyOf": [
                    filter_value(),
                    {"type": "array", "minItems": 1, "maxItems": MAX_FILTER_VALUES, "items": filter_value()},
                ]},
                "description": "Term paths to values: OR within a key, AND across keys; a term holding an array matches when any element does. Text compares ignoring case.",
            },
        },
    });
    if text_required {
        query["required"] = json!(["text"]);
    } else {
        query["type"] = json!(["object", "null"]);
    }
    query
}

pub fn search_request() -> Value {
    json!({
        "type": "object",
        "required": ["query"],
        "additionalProperties": false,
        "properties": {
            "query": query(true),
            "federation": {"type": ["string", "null"], "enum": ["auto", "referrals", "none", null],
                "description": "auto (default): upstream registries' results merged in; referrals: the upstreams named instead; none: this registry only."},
            "pageSize": {"type": ["integer", "null"], "minimum": 1, "description": "Default 10; above 100 reads as 100."},
            "pageToken": {"type": ["string", "null"], "description": "The previous answer's `pageToken`, with the same query."},
        },
    })
}

pub fn explore_request() -> Value {
    json!({
        "type": "object",
        "required": ["resultType"],
        "additionalProperties": false,
        "properties": {
            "query": query(false),
            "resultType": {
                "type": "object",
                "required": ["facets"],
                "additionalProperties": false,
                "properties": {"facets": {
                    "type": "array", "minItems": 1, "maxItems": 16,
                    "items": {
                        "type": "object",
                        "required": ["field"],
                        "additionalProperties": false,
                        "properties": {
                            "field": term_path(),
                            "limit": {"type": ["integer", "null"], "description": "Most buckets (default 20, at most 1000)."},
                            "minCount": {"type": ["integer", "null"], "description": "Buckets counting fewer are left out (default 1)."},
                        },
                    },
                }},
            },
        },
    })
}

pub fn entry() -> Value {
    json!({
        "type": "object",
        "required": ["identifier", "displayName", "type"],
        "description": "An ARD entry: exactly one of `url` and `data`.",
        "properties": {
            "identifier": {"type": "string", "description": "`urn:air:<publisher-domain>:<segments>`"},
            "displayName": {"type": "string"},
            "type": {"type": "string", "description": "application/a2a-agent-card+json, application/mcp-server-card+json, application/vnd.agent-registry.record+json, application/ai-registry+json or application/ai-catalog+json"},
            "url": {"type": "string", "format": "uri"},
            "data": {"type": "object"},
            "description": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "capabilities": {"type": "array", "items": {"type": "string"}},
            "representativeQueries": {"type": "array", "items": {"type": "string"}, "minItems": 2, "maxItems": 5},
            "version": {"type": "string"},
            "updatedAt": {"type": "string", "format": "date-time"},
            "metadata": {"type": "object", "additionalProperties": {"type": ["string", "number", "boolean", "null"]}},
            "trustManifest": {"type": "object", "required": ["identity"], "properties": {"identity": {"type": "string"}}},
        },
    })
}

pub fn manifest() -> Value {
    json!({
        "type": "object",
        "required": ["entries"],
        "properties": {
            "specVersion": {"type": "string"},
            "host": {"type": "object"},
            "entries": {"type": "array", "items": {"$ref": "#/components/schemas/ArdEntry"}},
        },
    })
}

pub fn search_response() -> Value {
    json!({
        "type": "object",
        "required": ["results"],
        "properties": {
            "results": {"type": "array", "items": {
                "type": "object",
                "required": ["identifier", "score", "source"],
                "properties": {
                    "identifier": {"type": "string"},
                    "score": {"type": "integer", "minimum": 0, "maximum": 100, "description": "Relevance only (never trust): 100 for the best match at the registry that scored it."},
                    "source": {"type": "string", "description": "The ARD API base of the registry that indexed the entry."},
                },
            }},
            "referrals": {"type": "array", "items": {
                "type": "object",
                "required": ["identifier", "displayName", "type", "url"],
                "properties": {
                    "identifier": {"type": "string"}, "displayName": {"type": "string"},
                    "type": {"type": "string", "enum": ["application/ai-registry+json"]},
                    "url": {"type": "string", "format": "uri"},
                },
            }},
            "pageToken": {"type": "string"},
            "unanswered": {"type": "array", "description": "Upstream registries that did not answer this page in time, or answered something else than an ARD search response.",
                "items": {"type": "object", "required": ["source", "reason"], "properties": {"source": {"type": "string"}, "reason": {"type": "string"}}}},
        },
    })
}

pub fn explore_response() -> Value {
    json!({
        "type": "object",
        "required": ["resultType", "facets"],
        "properties": {
            "resultType": {"type": "string", "enum": ["facets"]},
            "facets": {"type": "object", "additionalProperties": {
                "type": "object",
                "required": ["buckets"],
                "properties": {
                    "buckets": {"type": "array", "items": {
                        "type": "object", "required": ["value", "count"],
                        "properties": {"value": {"type": "string"}, "count": {"type": "integer", "minimum": 1}},
                    }},
                    "otherCount": {"type": "integer", "minimum": 1},
                },
            }},
        },
    })
}

pub fn list_response() -> Value {
    json!({
        "type": "object",
        "required": ["items", "total"],
        "properties": {
            "items": {"type": "array", "items": {"$ref": "#/components/schemas/ArdEntry"}},
            "total": {"type": "integer", "minimum": 0},
            "pageToken": {"type": "string"},
        },
    })
}

/// An ARD path's error answer.
pub fn error(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ArdErrorBody"}}},
    })
}
