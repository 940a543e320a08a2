//! The finished OpenAPI document: utoipa's paths (router.rs) plus what annotations cannot say.
//!
//! Request bodies are parsed by hand from a JSON `Value` (domain/agent.rs, search/request.rs,
//! api/*.rs), so their schemas are written here to match those parsers: required fields, types,
//! lengths, and the leniency the parsers have (surrounding whitespace trimmed, ASCII case folded,
//! `null` read as absent, unknown fields ignored). Each is a named component; the marker types
//! of `wire/schema.rs` let `#[utoipa::path]` refer to them.
//!
//! [`document`] then applies the rules every operation shares, so no annotation can forget them:
//! errors are `application/problem+json` (`Problem`) on REST paths and JSON-RPC error bodies on
//! the JSON-RPC endpoints; a bearer-secured operation can answer 401 and 403; one with path or
//! query parameters or a body can answer 400; one with a body can answer 413 and 415; a path
//! behind the per-IP rate limit can answer 429.

use serde_json::{Map, Value, json};
use utoipa::openapi::OpenApi;

use crate::domain::agent::limits as agent_limits;
use crate::domain::payment as payment_limits;

pub mod ard;

/// The JSON-RPC endpoints: their errors are JSON-RPC bodies, not problem+json.
pub const JSON_RPC_PATHS: [&str; 2] = ["/a2a/v1", "/a2a/utility/{name}/v1"];

/// Characters Rust's `str::trim` removes (Unicode White_Space), as a regex class body. Spelled
/// out because `\s` means slightly different sets in different regex dialects.
const WS: &str = r"\t\n\u000b\f\r \u0085\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000";

/// Every hand-written component.
fn hand_written() -> Vec<(&'static str, Value)> {
    vec![
        ("PublishRequest", publish_request()),
        ("SearchRequest", search_request()),
        ("ArdSearchRequest", crate::openapi::ard::search_request()),
        ("ArdExploreRequest", crate::openapi::ard::explore_request()),
        ("ArdEntry", crate::openapi::ard::entry()),
        ("ArdManifest", crate::openapi::ard::manifest()),
        ("ArdSearchResponse", crate::openapi::ard::search_response()),
        (
            "ArdExploreResponse",
            crate::openapi::ard::explore_response(),
        ),
        ("ArdListResponse", crate::openapi::ard::list_response()),
        ("CreateTokenRequest", create_token_request()),
        ("OidcExchangeRequest", oidc_exchange_request()),
        ("GithubExchangeRequest", github_exchange_request()),
        ("CreateOrgRequest", create_org_request()),
        ("SetMemberRequest", set_member_request()),
        ("GithubLinkRequest", github_link_request()),
        ("TransferRequest", transfer_request()),
        ("DeprecateRequest", deprecate_request()),
        ("ClaimNamespaceRequest", claim_namespace_request()),
        ("CreateBindingRequest", create_binding_request()),
        ("CreateSessionRequest", create_session_request()),
        ("ExecuteRequest", execute_request()),
        ("HostedAgentRequest", hosted_agent_request()),
        ("LegacyMessage", legacy_message()),
        ("JsonRpcRequest", json_rpc_request()),
        ("JsonRpcResponse", json_rpc_response()),
        ("JsonRpcErrorResponse", json_rpc_error_response()),
        ("McpMessage", mcp_message()),
        ("McpResponse", mcp_response()),
        ("McpErrorResponse", mcp_error_response()),
        ("AgentCard", agent_card()),
        ("DiscoverAnswer", discover_answer()),
        ("PlaygroundDiscoverAnswer", playground_discover_answer()),
        ("SessionStep", session_step()),
        ("HostedAgentAnswer", hosted_agent_answer()),
        ("LegacyMessageAnswer", legacy_message_answer()),
        ("SearchFacets", search_facets()),
        ("Health", health()),
        ("Readiness", readiness()),
    ]
}

// ----- pattern building blocks -----

/// A character that is neither trimmed whitespace nor NUL.
pub fn solid() -> String {
    format!(r"[^{WS}\u0000]")
}

/// The core of a trimmed text of 1..=max characters without NUL.
fn text_core(max: usize) -> String {
    let solid = solid();
    format!(
        r"{solid}(?:[^\u0000]{{0,{}}}{solid})?",
        max.saturating_sub(2)
    )
}

/// A string that, trimmed, has 1..=max characters and no NUL anywhere.
fn required_text(max: usize, description: &str) -> Value {
    json!({
        "type": "string",
        "pattern": format!("^[{WS}]*{}[{WS}]*$", text_core(max)),
        "description": format!("{description} Trimmed; 1 to {max} characters; no NUL."),
    })
}

/// Absent, `null`, blank (read as absent), or a string that trimmed has at most `max`
/// characters; no NUL anywhere.
fn optional_text(max: usize, description: &str) -> Value {
    json!({
        "type": ["string", "null"],
        "pattern": format!("^[{WS}]*(?:{})?[{WS}]*$", text_core(max)),
        "description": format!("{description} Trimmed; at most {max} characters; blank or null means absent; no NUL."),
    })
}

/// ASCII letters in either case: `ci("free")` is `[Ff][Rr][Ee][Ee]`.
fn ci(word: &str) -> String {
    word.chars()
        .map(|c| {
            if c.is_ascii_alphabetic() {
                format!("[{}{}]", c.to_ascii_uppercase(), c.to_ascii_lowercase())
            } else if r".^$*+?()[]{}|\".contains(c) {
                format!(r"\{c}")
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// One of `words`, ASCII case-insensitive, with surrounding whitespace.
fn lenient_enum(words: &[&str], nullable: bool, description: &str) -> Value {
    let alternatives: Vec<String> = words.iter().map(|w| ci(w)).collect();
    let types = if nullable {
        json!(["string", "null"])
    } else {
        json!("string")
    };
    json!({
        "type": types,
        "pattern": format!("^[{WS}]*(?:{})[{WS}]*$", alternatives.join("|")),
        "examples": words,
        "description": format!("{description} One of {}; ASCII case and surrounding whitespace are ignored.", words.join(", ")),
    })
}

/// An absolute http(s) URL naming a host (a DNS name whose last label starts with a letter, or
/// an IPv4 address), at most 2,048 characters.
fn url(description: &str) -> Value {
    let label = "[A-Za-z0-9_-]+";
    // A last label that is a number (decimal, or 0x hex) would make the host an IPv4 address.
    let last = "(?:[A-Za-z_-][A-Za-z0-9_-]*|0[xX][0-9A-Fa-f]*[G-Zg-z_-][A-Za-z0-9_-]*|0[A-WYZa-wyz_-][A-Za-z0-9_-]*|[0-9]+[A-Za-z_-][A-Za-z0-9_-]*)";
    let octet = "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])";
    let port = "0*(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[1-9][0-9]{0,3})?";
    let host = format!(r"(?:(?:{label}\.)*{last}\.?|{octet}(?:\.{octet}){{3}})");
    json!({
        "type": ["string", "null"],
        "maxLength": agent_limits::MAX_URL_CHARS,
        "pattern": format!(r"^[{WS}]*(?:[Hh][Tt][Tt][Pp][Ss]?://{host}(?::{port})?(?:[/?#\\][^\u0000\t\n\r]*)?)?[{WS}]*$"),
        "examples": ["https://weather.example.com/a2a/v1"],
        "description": format!("{description} An absolute http or https URL naming its host as an ASCII DNS name (labels of letters, digits, '-', '_') or an IP address, without credentials, tabs or line breaks; at most {} characters as sent (surrounding whitespace included); trimmed; blank or null means absent.", agent_limits::MAX_URL_CHARS),
    })
}

// ----- request bodies -----

fn package_name() -> Value {
    let label = "[A-Za-z0-9](?:[A-Za-z0-9_-]*[A-Za-z0-9])?";
    json!({
        "type": "string",
        "maxLength": 200,
        "pattern": format!(r"^[{WS}]*{label}(?:\.{label}){{1,15}}[{WS}]*$"),
        "examples": ["com.example.weather"],
        "description": "Reverse-domain package name: 2 to 16 dot-separated labels of a-z, 0-9, '-' and '_' ('-' and '_' never first or last in a label), at most 200 characters. Trimmed and lowercased.",
    })
}

/// A required URL: the rules of `url`, not blank and not null.
fn required_url(description: &str) -> Value {
    let mut schema = url(description);
    schema["type"] = json!("string");
    schema["pattern"] = json!(format!(
        "{}",
        schema["pattern"].as_str().unwrap_or_default().replacen(
            &format!("^[{WS}]*(?:"),
            &format!("^[{WS}]*(?=[^{WS}])(?:"),
            1
        )
    ));
    schema
}

/// How to reach an agent: A2A interfaces, MCP remotes and packages, the repository.
fn reach_properties() -> Map<String, Value> {
    use crate::domain::reach::*;
    let list = |items: Value, max: usize, description: &str| json!({"type": ["array", "null"], "maxItems": max, "items": items, "description": description});
    let interface = json!({
        "type": "object",
        "required": ["url"],
        "properties": {
            "url": required_url("The A2A endpoint."),
            "protocolBinding": lenient_enum(&PROTOCOL_BINDINGS, true, "The binding; absent or null is JSONRPC."),
            "protocolVersion": optional_text(MAX_LABEL_CHARS, "The A2A version it speaks; absent is 1.0."),
        },
    });
    let remote = json!({
        "type": "object",
        "required": ["type", "url"],
        "properties": {
            "type": lenient_enum(&REMOTE_TYPES, false, "The MCP transport."),
            "url": required_url("The MCP endpoint."),
        },
    });
    let variable = json!({
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": required_text(MAX_ENVIRONMENT_NAME_CHARS, "The variable's name."),
            "description": optional_text(MAX_ENVIRONMENT_DESCRIPTION_CHARS, "What it sets."),
            "is_required": {"type": ["boolean", "null"]},
            "is_secret": {"type": ["boolean", "null"]},
        },
    });
    let package = json!({
        "type": "object",
        "required": ["registry_type", "identifier"],
        "properties": {
            "registry_type": lenient_enum(&REGISTRY_TYPES, false, "The package registry."),
            "identifier": required_text(MAX_PACKAGE_IDENTIFIER_CHARS, "The package's name there (an image reference for oci)."),
            "version": optional_text(MAX_PACKAGE_VERSION_CHARS, "The package version."),
            "transport": {
                "type": ["object", "null"],
                "required": ["type"],
                "properties": {"type": lenient_enum(&TRANSPORTS, false, "How a client talks to it once started.")},
                "description": "Absent or null: stdio.",
            },
            "runtime_hint": optional_text(MAX_LABEL_CHARS, "The command that runs it, e.g. npx, uvx, docker."),
            "environment_variables": list(variable, MAX_ENVIRONMENT_VARIABLES, "Settings it reads from its environment."),
        },
    });
    let mut properties = Map::new();
    properties.insert("interfaces".to_owned(), list(interface, MAX_ENDPOINTS, "A2A endpoints, as in a card's `supportedInterfaces`; `url` is made the first one. Taken from the card's `supportedInterfaces` when the body has none. Member names may also be written in snake_case."));
    properties.insert("remotes".to_owned(), list(remote, MAX_ENDPOINTS, "MCP servers reachable over the network, as the MCP Registry's `server.json` lists them."));
    properties.insert("packages".to_owned(), list(package, MAX_ENDPOINTS, "MCP servers to run locally from a package, as the MCP Registry's `server.json` lists them (camelCase member names are read too)."));
    properties.insert(
        "repository".to_owned(),
        json!({
            "type": ["object", "null"],
            "required": ["url"],
            "properties": {
                "url": required_url("The source repository."),
                "source": optional_text(MAX_LABEL_CHARS, "Its host kind, e.g. github."),
            },
            "description": "Where the source lives.",
        }),
    );
    properties
}

fn capability() -> Value {
    json!({
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": required_text(agent_limits::MAX_CAPABILITY_NAME_CHARS, "Unique among the agent's capabilities (after trimming)."),
            "description": optional_text(agent_limits::MAX_CAPABILITY_DESCRIPTION_CHARS, "What it does."),
            "input_schema": {
                "type": ["object", "null"],
                "description": "JSON Schema of the input object.",
            },
        },
    })
}

fn protocol_slug() -> String {
    format!("[{WS}]*[A-Za-z0-9][A-Za-z0-9.-]{{0,31}}[{WS}]*")
}

/// A network slug, or one of the CAIP-2 ids of the rail table (ASCII case ignored).
fn network_slug() -> String {
    let caip: Vec<String> = crate::domain::rails::known_caip2()
        .into_iter()
        .map(ci)
        .collect();
    format!(
        "[{WS}]*(?:[A-Za-z0-9][A-Za-z0-9-]{{0,63}}|{})[{WS}]*",
        caip.join("|")
    )
}

fn asset_slug() -> String {
    format!("[{WS}]*(?:[A-Za-z0-9][A-Za-z0-9._-]{{0,31}}|[Uu][Ss][Dd]\u{20ae}0?)[{WS}]*")
}

fn rail() -> Value {
    let network = json!({"type": "string", "pattern": format!("^{}$", network_slug()),
        "description": "Network slug (`base`, `nano`, `lightning`) or a known CAIP-2 id (`eip155:8453`)."});
    let asset = json!({"type": "string", "pattern": format!("^{}$", asset_slug()),
        "description": "Asset slug (`usdc`, `xno`, `btc`)."});
    json!({
        "oneOf": [
            {
                "type": "string",
                "pattern": format!("^(?:{}):{}$", network_slug(), asset_slug()),
                "examples": ["base:usdc"],
                "description": "`network:asset`, split at the last colon.",
            },
            {
                "type": "object",
                "required": ["network"],
                "properties": {
                    "network": network,
                    "asset": {"anyOf": [asset.clone(), {"type": "null"}]},
                    "token": {"description": "Synonym of `asset`, read only when `asset` is absent or null."},
                    "protocol": {
                        "type": ["string", "null"],
                        "pattern": format!("^{}$", protocol_slug()),
                        "description": "The protocol this rail is used with; must also be listed in `protocols`.",
                    },
                    "caip2": {
                        "type": ["string", "null"],
                        "minLength": 1,
                        "maxLength": 128,
                        "pattern": format!("[^{WS}]"),
                        "description": "CAIP-2 chain id, kept verbatim.",
                    },
                },
                "anyOf": [
                    {"required": ["asset"], "properties": {"asset": {"type": "string"}}},
                    {"required": ["token"], "properties": {"asset": {"type": "null"}, "token": asset}},
                ],
            },
        ],
    })
}

fn payment() -> Value {
    let directions = ["inbound", "outbound", "both"];
    json!({
        "type": ["object", "null"],
        "description": "Payment terms. A paid or freemium agent is paid by its callers: its direction defaults to inbound and cannot be outbound.",
        "required": ["model"],
        "properties": {
            "protocols": {
                "type": ["array", "null"],
                "maxItems": 16 * crate::domain::LIST_SLACK,
                "items": {"type": "string", "pattern": format!("^{}$", protocol_slug())},
                "description": "Protocol slugs (`x402`, `l402`, `lightning-invoice`); at most 16 distinct.",
            },
            "rails": {
                "type": ["array", "null"],
                "maxItems": 32 * crate::domain::LIST_SLACK,
                "items": rail(),
                "description": "Accepted rails; at most 32 distinct.",
            },
            "scheme": {
                "type": ["string", "null"],
                "pattern": format!("^[{WS}]*[A-Za-z0-9][A-Za-z0-9_-]{{0,{}}}[{WS}]*$", payment_limits::MAX_SCHEME_LEN - 1),
                "examples": ["exact"],
                "description": "The x402 scheme of the agent's x402 rails; absent means `exact`. Trimmed and lowercased.",
            },
            "pay_to": {
                "type": ["string", "null"],
                "pattern": format!("^[{WS}]*[!-~]{{1,{}}}[{WS}]*$", payment_limits::MAX_PAY_TO_LEN),
                "examples": ["0x209693Bc6afc0C5328bA36FaF03C514EF312287C"],
                "description": format!("The payee's address as its network writes it: 1 to {} printable ASCII characters without spaces; trimmed.", payment_limits::MAX_PAY_TO_LEN),
            },
            "price": {
                "type": ["object", "null"],
                "required": ["amount", "asset"],
                "description": "The price of one call. Its asset must be the asset of one of `rails` when any are listed.",
                "properties": {
                    "amount": {
                        "anyOf": [
                            {"type": "string", "pattern": format!("^[{WS}]*[0-9]{{1,{}}}[{WS}]*$", payment_limits::MAX_AMOUNT_DIGITS)},
                            {"type": "integer", "minimum": 0, "maximum": u64::MAX},
                        ],
                        "examples": ["10000"],
                        "description": format!("A non-negative integer in the asset's smallest unit (USDC has 6 decimals: `10000` is 0.01 USDC): a string of 1 to {} digits, or a JSON integer up to 2^64-1. Stored as a string without leading zeros.", payment_limits::MAX_AMOUNT_DIGITS),
                    },
                    "asset": {
                        "type": "string",
                        "pattern": format!("^{}$", asset_slug()),
                        "examples": ["usdc"],
                        "description": "Asset slug, as in a rail.",
                    },
                },
            },
        },
        "anyOf": [
            {"properties": {
                "model": lenient_enum(&["free"], false, "How the agent charges."),
                "direction": lenient_enum(&directions, true, "Which way money flows."),
            }},
            {"properties": {
                "model": lenient_enum(&["paid", "freemium"], false, "How the agent charges."),
                "direction": lenient_enum(&["inbound", "both"], true, "Which way money flows."),
            }},
        ],
    })
}

fn publish_request() -> Value {
    use agent_limits::*;
    let text_fields = json!({
        "name": required_text(MAX_NAME_CHARS, "Display name."),
        "description": required_text(MAX_DESCRIPTION_CHARS, "What the agent does."),
        "version": optional_text(MAX_VERSION_CHARS, "The agent's version. Publish: `1.0.0` when absent. Update: absent, or the current version, makes a changing update the next patch of a semantic version (`1.2.3` → `1.2.4`; other strings stay as they are); a semantic version lower than the current one, or a version the agent had before, is 409 `version_conflict`."),
        "url": url("The agent's A2A JSON-RPC endpoint."),
    });
    // A card's fields are read (and checked like the body's) only where the body has none, a
    // condition the fuzzer's generator cannot handle: they are described, not constrained.
    let card_properties = json!({
        "name": {"description": "Read as `name` when the body has none."},
        "description": {"description": "Read as `description` when the body has none."},
        "version": {"description": "Read as `version` when the body has none."},
        "supportedInterfaces": {"description": "The `url` of the first entry is read as `url` when the body has none."},
        "url": {"description": "A v0.3 card's endpoint, read when `supportedInterfaces` gives none."},
    });
    let mut properties = Map::new();
    properties.insert("package_name".to_owned(), package_name());
    if let Value::Object(text) = text_fields {
        for (key, mut schema) in text {
            if key == "name" || key == "description" {
                schema["type"] = json!(["string", "null"]);
            }
            properties.insert(key, schema);
        }
    }
    properties.insert(
        "manifest_url".to_owned(),
        url("Where the agent's own card lives."),
    );
    properties.insert(
        "target".to_owned(),
        optional_text(MAX_LABEL_CHARS, "Audience, e.g. `Business`."),
    );
    properties.insert(
        "category".to_owned(),
        optional_text(MAX_LABEL_CHARS, "Category, e.g. `Weather`."),
    );
    properties.insert(
        "tags".to_owned(),
        json!({
            "type": ["array", "null"],
            "maxItems": MAX_TAGS * crate::domain::LIST_SLACK,
            "items": required_text(MAX_TAG_CHARS, "A tag, stored lowercase."),
            "description": format!("At most {MAX_TAGS} distinct tags (compared lowercase)."),
        }),
    );
    properties.insert(
        "capabilities".to_owned(),
        json!({
            "type": ["array", "null"],
            "maxItems": MAX_CAPABILITIES,
            "items": capability(),
            "description": "What the agent can do; names must be distinct.",
        }),
    );
    properties.insert("payment".to_owned(), payment());
    properties.insert(
        "representative_queries".to_owned(),
        json!({
            "type": ["array", "null"],
            "anyOf": [
                {"type": "null"},
                {"type": "array", "maxItems": 0},
                {"type": "array", "minItems": MIN_REPRESENTATIVE_QUERIES, "maxItems": MAX_REPRESENTATIVE_QUERIES},
            ],
            "items": required_text(MAX_REPRESENTATIVE_QUERY_CHARS, "A request a user might make that the agent serves."),
            "description": format!("{MIN_REPRESENTATIVE_QUERIES} to {MAX_REPRESENTATIVE_QUERIES} requests a user might make that the agent serves, in the user's words (`representativeQueries` is read too); repeats (ignoring ASCII case) are dropped; empty or null means none. When absent, up to {MAX_REPRESENTATIVE_QUERIES} `examples` of the card's skills are taken. Searched like the description, kept in each version, shown in the record, the card's registry extension and the ARD entry."),
        }),
    );
    properties.insert(
        "identifier".to_owned(),
        json!({
            "type": ["string", "null"],
            "maxLength": crate::domain::urn::MAX_CHARS,
            "pattern": format!("^[{WS}]*(?:[Uu][Rr][Nn]:[Aa][Ii][Rr]:{label}(?:\\.{label})*(?::[A-Za-z0-9._-]+)+)?[{WS}]*$", label = "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"),
            "examples": ["urn:air:example.com:weather"],
            "description": "Publish only: the agent's own discovery identifier, `urn:air:<publisher-domain>:<name>[:<name>…]`, whose publisher must be the package's domain (the one domain verification proves; `com.example.weather` → `example.com`) or a host under it that the package name's leading labels name (`ai.lifie.hub.tasks` may carry `urn:air:hub.lifie.ai:tasks`). Absent, the registry derives it from the package name. It cannot change afterwards: an update may repeat it. Unique ignoring case (409 `conflict` when taken).",
        }),
    );
    properties.insert(
        "visibility".to_owned(),
        lenient_enum(
            &["public", "unlisted", "private"],
            true,
            "`public` (the default on publish): listed in every search, list, facet, feed, manifest and catalogue. `unlisted`: resolvable by whoever knows its id, package name or identifier (the record, its card, its versions), and listed nowhere. `private`: seen only by its owner, the members of its organisation and the master key, on every path (listed to them as a public agent is); to anyone else it does not exist (404). An update without it keeps the agent's.",
        ),
    );
    properties.insert("org".to_owned(), {
        let mut org = org_name();
        org["type"] = json!(["string", "null"]);
        org["description"] = json!("Publish only: the organisation the agent belongs to (owner `org:<name>`); the caller must be its admin or publisher (else 403), and it must exist (else 404 `org_not_found`). Its members then manage the agent together. An update ignores it: ownership changes by transfer.");
        org
    });
    properties.insert(
        "inspect_tools".to_owned(),
        json!({"type": ["boolean", "null"], "description": "Whether the liveness prober may also list the endpoint's tools (an MCP server's `tools/list`) or read its card's skills, to scan them and to notice when they change after listing (default true). `false`: not read, and the record's `security.live` says `not_inspected`. An update without it keeps the agent's."}),
    );
    properties.insert(
        "probe_message".to_owned(),
        optional_text(
            MAX_PROBE_MESSAGE_CHARS,
            "Opt-in: a message the liveness prober sends to the agent's first JSON-RPC interface with `SendMessage` after its card checks out; any result counts as up. Shown only to the owner.",
        ),
    );
    for (key, schema) in reach_properties() {
        properties.insert(key, schema);
    }
    properties.insert(
        "card".to_owned(),
        json!({
            "type": ["object", "null"],
            "description": format!("A full A2A agent card, kept as given (at most {} KiB serialized). Fields missing from the body are taken from it: name, description, version, the url of its first `supportedInterfaces` entry, capabilities from its skills, payment from the registry extension; they are checked as if given in the body.", MAX_CARD_BYTES / 1024),
            "properties": card_properties,
        }),
    );
    // `name` and `description` are required unless the card supplies them.
    let from_body_or_card = |field: &str| {
        json!({"anyOf": [
            {"required": [field], "properties": {field: {"type": "string"}}},
            {"required": ["card"], "properties": {"card": {"type": "object", "required": [field], "properties": {field: {"type": "string"}}}}},
        ]})
    };
    json!({
        "type": "object",
        "description": "The writable fields of an agent. Unknown fields are ignored; null means absent. With a `manifest_url` and neither `card` nor both `name` and `description`, the A2A card at `manifest_url` is fetched and used as `card` (an unreachable host is 502 or 504).",
        "required": ["package_name"],
        "properties": properties,
        "allOf": [from_body_or_card("name"), from_body_or_card("description")],
        "examples": [{
            "package_name": "com.example.weather",
            "name": "Weather Agent",
            "description": "Forecasts and current conditions for any city.",
            "url": "https://weather.example.com/a2a/v1",
            "category": "Weather",
            "tags": ["forecast", "realtime"],
            "capabilities": [{"name": "get_forecast", "description": "Forecast for a city",
                "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
            "payment": {"model": "paid", "protocols": ["x402"], "rails": ["base:usdc"]},
        }],
    })
}

/// A filter: a string of comma-separated values, or an array of strings.
fn filter(description: &str) -> Value {
    json!({
        "anyOf": [
            {"type": "string"},
            {"type": "array", "items": {"type": "string"}},
            {"type": "null"},
        ],
        "description": description,
    })
}

/// A closed-vocabulary filter: terms separated by commas (and, for payment terms, whitespace).
fn closed_filter(words: &[&str], whitespace_separates: bool, description: &str) -> Value {
    let term = words.iter().map(|w| ci(w)).collect::<Vec<_>>().join("|");
    let pattern = if whitespace_separates {
        format!("^[,{WS}]*(?:(?:{term})(?:[,{WS}]+(?:{term}))*)?[,{WS}]*$")
    } else {
        format!("^[{WS}]*(?:{term})?[{WS}]*(?:,[{WS}]*(?:{term})?[{WS}]*)*$")
    };
    let item = json!({"type": "string", "pattern": pattern});
    json!({
        "anyOf": [item.clone(), {"type": "array", "items": item}, {"type": "null"}],
        "description": format!("{description} Any of {} (OR), comma-separated or as an array; ASCII case is ignored.", words.join(", ")),
    })
}

/// Query-string and body spellings of the filters.
pub fn filter_properties() -> Map<String, Value> {
    let mut map = Map::new();
    map.insert(
        "target".to_owned(),
        filter("Audience (OR), case-insensitive."),
    );
    map.insert(
        "category".to_owned(),
        filter("Category (OR), case-insensitive."),
    );
    map.insert(
        "tags".to_owned(),
        filter("Tags (OR); exact, case-insensitive."),
    );
    map.insert(
        "verification_level".to_owned(),
        closed_filter(
            &["unverified", "domain_verified"],
            false,
            "Verification level.",
        ),
    );
    map.insert(
        "payment_model".to_owned(),
        closed_filter(&["free", "paid", "freemium"], true, "Payment model."),
    );
    map.insert(
        "payment_protocol".to_owned(),
        filter("Payment protocols (OR), e.g. `x402`; unknown ones match nothing."),
    );
    map.insert(
        "payment_rail".to_owned(),
        filter("Rails as `network:asset` (asset prefix), `network:`, or a bare prefix of either, e.g. `base:usdc`, `nano:`, `usdc`; malformed terms match nothing."),
    );
    map.insert(
        "payment_direction".to_owned(),
        closed_filter(&["inbound", "outbound", "both"], true, "Payment direction."),
    );
    map.insert(
        "include_deprecated".to_owned(),
        json!({"type": ["boolean", "null"], "description": "true (default): deprecated agents too, ranked below their equals; false: none."}),
    );
    map.insert("max_severity".to_owned(), {
        let words = ["none", "low", "medium", "high", "critical"];
        let term = words.iter().map(|w| ci(w)).collect::<Vec<_>>().join("|");
        let item = json!({"type": "string", "pattern": format!("^[{WS}]*(?:{term})?[{WS}]*$")});
        json!({
            "anyOf": [item.clone(), {"type": "array", "items": item, "maxItems": 1}, {"type": "null"}],
            "description": "Only agents whose worst scanner finding is at most this severity: `none` (clean), `low`, `medium`, `high` or `critical` (every agent); ASCII case is ignored.",
        })
    });
    map.insert(
        "health".to_owned(),
        closed_filter(
            &["up", "down", "not_conformant", "unknown", "not_probed"],
            false,
            "What the last liveness probe found; an agent not probed yet is `unknown`, one that lists no endpoint to probe (it runs from a package, or names only a repository or page) `not_probed`.",
        ),
    );
    map
}

/// The `limit` of a search body: a whole number of any size (or a string holding an i64).
fn body_limit() -> Value {
    json!({
        "anyOf": [
            {"type": "integer"},
            {"type": "string", "pattern": format!("^[{WS}]*[+-]?[0-9]{{1,18}}[{WS}]*$")},
            {"type": "null"},
        ],
        "description": "Page size; values below 1 are read as 1, above the path's maximum as the maximum.",
    })
}

fn sort_value() -> Value {
    json!({
        "type": ["string", "null"],
        "pattern": format!("^[{WS}]*(?:{}|{}|{})?[{WS}]*$", ci("relevance"), ci("newest"), ci("name")),
        "examples": ["relevance", "newest", "name"],
        "description": "`relevance` (default with a query), `newest` (default without), `name`; ASCII case is ignored, blank means the default.",
    })
}

fn search_request() -> Value {
    let mut properties = Map::new();
    properties.insert(
        "query".to_owned(),
        json!({"type": ["string", "null"], "description": "Keywords or a sentence."}),
    );
    properties.insert("limit".to_owned(), body_limit());
    properties.insert(
        "cursor".to_owned(),
        json!({"type": ["string", "null"], "description": "`next_cursor` of the previous page of the same search."}),
    );
    properties.insert("sort".to_owned(), sort_value());
    properties.insert(
        "collapse".to_owned(),
        json!({"type": ["boolean", "null"], "description": "true (default): one agent per duplicate group (agents sharing a repository or an endpoint), the group's best member; false: every agent. Also read inside `filters`."}),
    );
    properties.insert(
        "facets".to_owned(),
        json!({"type": ["boolean", "null"], "description": "true: the answer also has `facets`, the matches counted per category, tag, payment model and health; false or absent (default): it has none. Read at the top level only."}),
    );
    properties.insert(
        "filters".to_owned(),
        json!({"type": ["object", "null"], "properties": filter_properties(),
            "description": "Filters, applied before ranking and paging."}),
    );
    json!({
        "type": "object",
        // The aliases are left out of `properties`: each is read only when its canonical key is
        // absent, a condition the fuzzer's generator cannot handle.
        "description": "A search. Every member is optional; unknown members are ignored. For older clients, `q` is read as `query` when `query` is absent, a filter given at the top level is read when `filters` does not name it, and payment filters are also read in camelCase (`paymentModel`).",
        "properties": properties,
        "examples": [{"query": "weather forecast", "limit": 5, "filters": {"payment_model": "paid"}}],
    })
}

fn create_token_request() -> Value {
    json!({
        "type": "object",
        "required": ["owner"],
        "properties": {
            "owner": {
                "type": "string",
                "pattern": format!("^[{WS}]*[A-Za-z0-9._@-]{{1,64}}[{WS}]*$"),
                "not": {"pattern": format!("^[{WS}]*(?:admin|registry)[{WS}]*$")},
                "description": "The owner the token acts as (trimmed): 1 to 64 of letters, digits, '.', '_', '@', '-'; not `admin` or `registry` (reserved). A person signed in to the console may leave it out: their tokens are always their own.",
                "examples": ["alice"],
            },
            "scopes": {
                "type": ["array", "null"],
                "items": {"type": "string", "enum": ["agents:write", "a2a", "playground", "mirrors:read"]},
            },
            "expires_in_days": {
                "type": ["integer", "null"],
                "minimum": 1,
                "maximum": 3650,
                "description": "Lifetime in days; absent or null: no expiry for the master key's tokens, 90 days for a signed-in person's.",
            },
        },
        "examples": [{"owner": "alice", "scopes": ["agents:write", "a2a", "playground"], "expires_in_days": 90}],
    })
}

/// A namespace: a package name that is not a suffix many owners share (`io.github`).
fn namespace() -> Value {
    let mut schema = package_name();
    let shared: Vec<String> = crate::domain::urn::SHARED_SUFFIXES
        .iter()
        .map(|suffix| ci(suffix))
        .collect();
    schema["not"] = json!({"pattern": format!("^[{WS}]*(?:{})[{WS}]*$", shared.join("|"))});
    schema["examples"] = json!(["com.example"]);
    schema["description"] = json!(
        "A namespace: a package-name prefix (the package-name rules), never a suffix many owners share such as `io.github` (claim `io.github.<you>`). Trimmed and lowercased."
    );
    schema
}

/// An owner name, as `POST /api/tokens` reads it.
fn owner_name(description: &str) -> Value {
    json!({
        "type": "string",
        "pattern": format!("^[{WS}]*[A-Za-z0-9._@-]{{1,64}}[{WS}]*$"),
        "not": {"pattern": format!("^[{WS}]*(?:admin|registry)[{WS}]*$")},
        "description": format!("{description} Trimmed: 1 to 64 of letters, digits, '.', '_', '@', '-'; not `admin` or `registry` (reserved)."),
        "examples": ["alice"],
    })
}

fn claim_namespace_request() -> Value {
    let mut owner = owner_name("Master key only: the owner to assign the namespace to, proven.");
    owner["type"] = json!(["string", "null"]);
    json!({
        "type": "object",
        "required": ["namespace"],
        "properties": {"namespace": namespace(), "owner": owner},
        "examples": [{"namespace": "com.example"}],
    })
}

fn create_binding_request() -> Value {
    // Printable ASCII without space; without '/' (one segment of owner/name); without '@'.
    let (graphic, segment, no_at) = ("[!-~]", "[!-.0-~]", "[!-?A-~]");
    let blank = format!("^[{WS}]*$");
    json!({
        "type": "object",
        "required": ["scope", "kind", "repository"],
        "properties": {
            "scope": namespace(),
            "kind": {"type": "string", "enum": ["github", "gitlab", "generic"],
                "description": "The trusted issuer's kind."},
            "repository": {
                "type": "string",
                "pattern": format!("^[{WS}]*{graphic}{{1,200}}[{WS}]*$"),
                "description": "GitHub: `owner/name` (the `repository` claim); GitLab: the project path (`project_path`); generic: the ID token's `sub`. Trimmed: 1 to 200 printable ASCII characters without spaces.",
                "examples": ["acme/weather"],
            },
            "workflow": {
                "type": ["string", "null"],
                "pattern": format!(r"^[{WS}]*(?:\.github/workflows/{no_at}{{1,182}})?[{WS}]*$"),
                "description": "GitHub only: the workflow file that must run the job, `.github/workflows/NAME.yml` (printable ASCII, no '@', at most 200 characters). Trimmed; blank or null: any workflow.",
                "examples": [".github/workflows/publish.yml"],
            },
        },
        "allOf": [{
            "if": {"properties": {"kind": {"const": "github"}}, "required": ["kind"]},
            "then": {"properties": {"repository": {"pattern": format!("^[{WS}]*{segment}+/{segment}+[{WS}]*$")}}},
            "else": {"properties": {"workflow": {"type": ["string", "null"], "pattern": blank}}},
        }],
        "examples": [{"scope": "io.github.acme.weather", "kind": "github", "repository": "acme/weather", "workflow": ".github/workflows/publish.yml"}],
    })
}

fn oidc_exchange_request() -> Value {
    json!({
        "type": "object",
        "required": ["token"],
        "properties": {
            "token": {
                "type": "string",
                "pattern": format!("[^{WS}]"),
                "description": "The OIDC ID token (a JWT) from the CI system, its audience (`aud`) the registry's public URL. Surrounding whitespace is trimmed.",
            },
        },
        "examples": [{"token": "eyJhbGciOiJSUzI1NiIsImtpZCI6Ii4uLiJ9.eyJpc3MiOiIuLi4ifQ.c2ln"}],
    })
}

/// The pattern of an organisation's name: 1 to 39 lowercase letters, digits and hyphens, not
/// starting or ending with one.
const ORG_NAME: &str = "[a-z0-9](?:[a-z0-9-]{0,37}[a-z0-9])?";

/// An organisation's name, trimmed.
fn org_name() -> Value {
    json!({
        "type": "string",
        "pattern": format!("^[{WS}]*{ORG_NAME}[{WS}]*$"),
        "description": "1 to 39 lowercase letters, digits and hyphens, not starting or ending with a hyphen (surrounding whitespace is trimmed).",
        "examples": ["acme"],
    })
}

fn create_org_request() -> Value {
    json!({
        "type": "object",
        "required": ["name"],
        "properties": {
            "name": org_name(),
            "display_name": {"type": ["string", "null"], "maxLength": 200, "pattern": "^[^\\u0000]*$"},
            "admin": {
                "type": ["string", "null"],
                "pattern": format!("^[{WS}]*[A-Za-z0-9._@-]{{1,64}}[{WS}]*$"),
                "not": {"pattern": format!("^[{WS}]*(?:admin|registry)[{WS}]*$")},
                "description": "With the master key (required then): the owner who becomes its first admin. Others become its admin themselves.",
            },
        },
        "examples": [{"name": "acme", "display_name": "Acme Corp"}],
    })
}

fn set_member_request() -> Value {
    json!({
        "type": "object",
        "required": ["role"],
        "properties": {
            "role": {"type": "string", "pattern": format!("^[{WS}]*(admin|publisher|viewer)[{WS}]*$"),
                     "description": "`admin` manages the members and writes the agents; `publisher` writes the agents; `viewer` reads them."},
        },
        "examples": [{"role": "publisher"}],
    })
}

fn github_link_request() -> Value {
    let mut github = org_name();
    github["description"] = json!(
        "The GitHub organisation's login, in lowercase (surrounding whitespace is trimmed). The caller's GitHub sign-in must grant `io.github.<github_org>`."
    );
    json!({
        "type": "object",
        "required": ["github_org"],
        "properties": {
            "github_org": github,
            "role": {"type": ["string", "null"], "pattern": format!("^[{WS}]*(publisher|viewer)[{WS}]*$"),
                     "description": "The role its members have: `viewer` (the default) or `publisher`."},
        },
        "examples": [{"github_org": "acme", "role": "publisher"}],
    })
}

fn transfer_request() -> Value {
    json!({
        "type": "object",
        "required": ["to"],
        "properties": {
            "to": {
                "type": "string",
                "pattern": format!("^[{WS}]*(org:{ORG_NAME}|[A-Za-z0-9._@-]{{1,64}})[{WS}]*$"),
                "not": {"pattern": format!("^[{WS}]*(?:admin|registry)[{WS}]*$")},
                "description": "The receiver: a person's owner name, or `org:<name>` for an organisation.",
            },
        },
        "examples": [{"to": "bob"}, {"to": "org:acme"}],
    })
}

fn deprecate_request() -> Value {
    // Control characters other than tab and line feed are refused; the message, trimmed, is not
    // empty.
    let plain = r"[^\u0000-\u0008\u000b-\u001f\u007f-\u009f]";
    let visible = format!(r"[^{WS}\u0000-\u001f\u007f-\u009f]");
    json!({
        "type": "object",
        "required": ["message"],
        "properties": {
            "message": {
                "type": "string",
                "maxLength": crate::domain::deprecation::MAX_MESSAGE_CHARS,
                "pattern": format!("^{plain}*{visible}{plain}*$"),
                "description": "Why, and what to do instead (at most 500 characters).",
            },
            "successor": {
                "type": ["string", "null"],
                "maxLength": 200,
                "description": "The id or package name of another listed agent to use instead.",
            },
            "version": {
                "type": ["string", "null"],
                "minLength": 1,
                "maxLength": 128,
                "pattern": "^[^\\u0000]*$",
                "description": "Deprecate only this version of the agent.",
            },
        },
        "examples": [{"message": "Replaced by the v2 API.", "successor": "com.example.weather2"}],
    })
}

fn github_exchange_request() -> Value {
    json!({
        "type": "object",
        "required": ["access_token"],
        "properties": {
            "access_token": {
                "type": "string",
                "minLength": 1,
                "maxLength": 1024,
                "pattern": format!("[^{WS}]"),
                "description": "A GitHub OAuth access token from this registry's GitHub app (the CLI's device flow), with the read:org scope.",
            },
        },
        "examples": [{"access_token": "gho_16C7e42F292c6912E7710c838347Ae178B4a"}],
    })
}

fn create_session_request() -> Value {
    let visible = format!(r"[^{WS}\u0000-\u001f\u007f-\u009f]");
    json!({
        "type": "object",
        "description": "`{}` for an unnamed session.",
        "properties": {
            "name": {
                "type": ["string", "null"],
                "pattern": format!(r"^[{WS}]*(?:{visible}(?:[^\u0000-\u001f\u007f-\u009f]{{0,98}}{visible})?)?[{WS}]*$"),
                "description": "A name for the session: trimmed, at most 100 characters, no control characters; blank means none.",
            },
        },
    })
}

fn execute_request() -> Value {
    let identifier =
        json!({"type": "string", "pattern": format!("^[{WS}]*{}[{WS}]*$", text_core(200))});
    json!({
        "type": "object",
        "required": ["agent", "capability"],
        "properties": {
            "agent": {"allOf": [identifier.clone()], "description": "Id or package name of an ACTIVE agent.", "examples": ["registry.utility.finance"]},
            "capability": {"allOf": [identifier], "description": "One of the agent's capabilities.", "examples": ["get_current_price"]},
            "input": {"type": ["object", "null"], "description": "The capability's input; checked against its `input_schema` (422)."},
        },
        "examples": [{"agent": "registry.utility.finance", "capability": "get_current_price", "input": {"symbol": "BTC"}}],
    })
}

fn hosted_agent_request() -> Value {
    json!({
        "type": "object",
        "description": "`{input, capability?}`, or the legacy `{action, params}`; a body with neither `input` nor `params` is itself the input. Without a capability the agent picks its default.",
        "properties": {
            "input": {"type": ["object", "string", "null"], "description": "The input; a string fills the agent's text field (`query`, `symbol`, `url`)."},
            "params": {"type": ["object", "string", "null"], "description": "Legacy name of `input`."},
            "capability": {"type": ["string", "null"], "description": "Capability name."},
            "action": {"type": ["string", "null"], "description": "Legacy name of `capability`."},
        },
        "examples": [{"input": {"symbol": "BTC"}, "capability": "get_current_price"}],
    })
}

fn legacy_message() -> Value {
    json!({
        "type": "object",
        "properties": {
            "to": {"type": ["string", "null"], "description": "`registry` (default) or a hosted agent's package name (scope `a2a`)."},
            "action": {"type": ["string", "null"], "description": "To the registry: `search` or `resolve_package`; to a hosted agent: a capability."},
            "params": {"type": ["object", "null"], "description": "`search`: a search body; `resolve_package`: `{package_name}`; a hosted agent: its input."},
        },
        "examples": [{"to": "registry", "action": "search", "params": {"query": "weather", "limit": 5}}],
    })
}

fn json_rpc_call() -> Value {
    json!({
        "type": "object",
        "required": ["jsonrpc", "method"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "method": {"type": "string", "examples": ["SendMessage"]},
            "params": {"type": ["object", "array", "null"]},
            "id": {"type": ["string", "number", "null"], "description": "Absent for a notification, which gets no answer."},
        },
    })
}

fn json_rpc_request() -> Value {
    json!({
        "description": "A JSON-RPC 2.0 request or a non-empty batch. Anything else is answered with a JSON-RPC error (HTTP 200).",
        "anyOf": [json_rpc_call(), {"type": "array", "minItems": 1, "items": json_rpc_call()}],
        "examples": [{"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": {
            "messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "weather forecast"}]}}}],
    })
}

fn json_rpc_error_object() -> Value {
    error_object(
        json!({"type": "array", "items": {"type": "object"}, "description": "A `google.rpc.ErrorInfo` whose metadata `code` is the registry's error code, and a `google.rpc.BadRequest` for invalid fields."}),
    )
}

/// A JSON-RPC error object whose `data` is `data`.
fn error_object(data: Value) -> Value {
    json!({
        "type": "object",
        "required": ["code", "message"],
        "properties": {
            "code": {"type": "integer"},
            "message": {"type": "string"},
            "data": data,
        },
    })
}

fn json_rpc_single_response() -> Value {
    response_with(json_rpc_error_object())
}

/// A JSON-RPC response whose errors are `error`.
fn response_with(error: Value) -> Value {
    json!({
        "type": "object",
        "required": ["jsonrpc", "id"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "number", "null"]},
            "result": {"type": "object"},
            "error": error,
        },
        "oneOf": [{"required": ["result"]}, {"required": ["error"]}],
    })
}

fn json_rpc_response() -> Value {
    json!({
        "description": "A response, or an array of responses to a batch.",
        "anyOf": [json_rpc_single_response(), {"type": "array", "items": json_rpc_single_response()}],
    })
}

fn json_rpc_error_response() -> Value {
    json!({
        "type": "object",
        "required": ["jsonrpc", "id", "error"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": "null"},
            "error": json_rpc_error_object(),
        },
    })
}

fn mcp_message() -> Value {
    json!({
        "type": "object",
        "description": "One JSON-RPC 2.0 message (no batches): a request (with `id`), a notification, or a response. Methods: `initialize`, `server/discover`, `ping`, `tools/list`, `tools/call`, `resources/list`, `resources/templates/list`, `resources/read`.",
        "required": ["jsonrpc"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "integer"]},
            "method": {"type": "string", "examples": ["tools/list"]},
            "params": {"type": "object"},
            "result": {"type": "object"},
            "error": {"type": "object"},
        },
        "anyOf": [{"required": ["method"]}, {"required": ["result"]}, {"required": ["error"]}],
        "examples": [{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "example", "version": "1.0.0"}}}],
    })
}

fn mcp_error_object() -> Value {
    error_object(
        json!({"description": "Details: `supported` and `requested` versions (-32022), the `uri` of an unknown resource, or the registry's error `code`."}),
    )
}

fn mcp_response() -> Value {
    response_with(mcp_error_object())
}

fn mcp_error_response() -> Value {
    json!({
        "type": "object",
        "required": ["jsonrpc", "id", "error"],
        "properties": {
            "jsonrpc": {"const": "2.0"},
            "id": {"type": ["string", "number", "null"]},
            "error": mcp_error_object(),
        },
    })
}

fn agent_card() -> Value {
    json!({
        "type": "object",
        "description": "An A2A v1.0 AgentCard (for a published agent: the card its owner gave, as given, else one built from its record), signed by the registry: `signatures` holds one detached JWS whose keys are at `/.well-known/jwks.json`.",
    })
}

fn page_ref() -> Value {
    json!({"$ref": "#/components/schemas/AgentPage"})
}

fn discover_answer() -> Value {
    json!({"allOf": [page_ref(), {
        "type": "object",
        "required": ["success", "summary"],
        "properties": {"success": {"const": true}, "summary": {"type": "string"}},
    }]})
}

fn playground_discover_answer() -> Value {
    json!({"allOf": [page_ref(), {
        "type": "object",
        "required": ["summary", "step"],
        "properties": {"summary": {"type": "string"}, "step": {"$ref": "#/components/schemas/SessionStep"}},
    }]})
}

fn session_step() -> Value {
    json!({
        "type": "object",
        "required": ["seq", "type", "at", "duration_ms"],
        "properties": {
            "seq": {"type": "integer"},
            "type": {"type": "string", "enum": ["discover", "execute"]},
            "at": {"type": "string", "format": "date-time"},
            "duration_ms": {"type": "integer", "minimum": 0},
            "status": {"type": "string", "enum": ["completed", "failed"], "description": "Execute steps."},
            "agent": {"type": "object", "description": "Execute steps: `{id, package_name, name}`."},
            "capability": {"type": "string"},
            "input": {"type": "object"},
            "output": {"description": "Execute steps: the agent's output, null when failed."},
            "error": {"type": ["object", "null"], "description": "Execute steps: what went wrong, null when completed."},
            "summary": {"type": ["string", "null"]},
            "transport": {"type": ["string", "null"]},
            "endpoint": {"type": ["string", "null"]},
        },
    })
}

fn hosted_agent_answer() -> Value {
    json!({
        "type": "object",
        "required": ["agent", "capability", "output"],
        "properties": {
            "agent": {"type": "string", "examples": ["registry.utility.finance"]},
            "capability": {"type": "string"},
            "output": {"description": "The capability's output."},
        },
    })
}

fn legacy_message_answer() -> Value {
    json!({"anyOf": [
        page_ref(),
        {"type": "object", "required": ["card"], "properties": {"card": {"$ref": "#/components/schemas/AgentCard"}}},
        {"$ref": "#/components/schemas/HostedAgentAnswer"},
    ]})
}

/// `{value: count}` with counts of at least 1.
fn counts(description: &str, keys: Option<&[&str]>) -> Value {
    let count = json!({"type": "integer", "minimum": 1});
    let mut schema = json!({"type": "object", "description": description});
    match keys {
        Some(keys) => {
            schema["properties"] = keys
                .iter()
                .map(|key| ((*key).to_owned(), count.clone()))
                .collect();
            schema["additionalProperties"] = json!(false);
        }
        None => schema["additionalProperties"] = count,
    }
    schema
}

fn search_facets() -> Value {
    let mut tags = counts(
        "The most frequent tags (at most 20; ties by name), lowercase.",
        None,
    );
    tags["maxProperties"] = json!(crate::search::counts::TOP_TAGS);
    json!({
        "type": "object",
        "description": "The search's matches (all `total` of them, duplicates collapsed as in the list, not only this page) counted per facet value; a value no match has is absent.",
        "required": ["category", "tags", "payment_model", "health", "security"],
        "additionalProperties": false,
        "properties": {
            "category": counts("Per category. Categories that differ only in case are one (as the `category` filter compares them), named by the spelling most agents use. Agents without a category are not counted.", None),
            "tags": tags,
            "payment_model": counts("Per payment model, as the `payment_model` filter names them. Agents that state no payment terms are not counted (no `payment_model` filter matches them).", Some(&["free", "paid", "freemium"])),
            "health": counts("Per health status: what the liveness prober last found, `unknown` before the first probe, `not_probed` for agents that list no endpoint.", Some(&["up", "down", "not_conformant", "unknown", "not_probed"])),
            "security": counts("Per worst scanner finding, as the `max_severity` filter names them: `none` for a clean agent.", Some(&["none", "low", "medium", "high", "critical"])),
        },
    })
}

fn health() -> Value {
    json!({"type": "object", "required": ["status"], "properties": {"status": {"const": "ok"}}})
}

fn readiness() -> Value {
    json!({
        "type": "object",
        "required": ["status", "storage", "indexed_agents", "vectors", "embedded", "total"],
        "properties": {
            "status": {"const": "ready"},
            "storage": {"const": "ok"},
            "indexed_agents": {"type": "integer", "minimum": 0},
            "vectors": {"type": "string", "enum": ["loading", "ready", "none"],
                "description": "Intent ranking: `loading` while vectors are computed in the background (searches rank by keywords), `ready`, or `none` without an embedder."},
            "embedded": {"type": "integer", "minimum": 0, "description": "Agents with vectors so far."},
            "total": {"type": "integer", "minimum": 0, "description": "Agents in the index."},
            "embedder": {"type": "string", "description": "Id of the embedder that ranks by intent now (`none` without one), e.g. `bge-small-en-v1.5-int8@1` or the static table's."},
            "embedder_note": {"type": "string", "description": "Present while a model is fetched or every agent embedded with it before the switch, or when the retrieval model is not used (offline, or fetching failed): why."},
        },
    })
}

// ----- the shared response rules -----

/// Path templates behind the per-IP rate limit (the `public` and page groups of the router).
pub const RATE_LIMITED_PATHS: &[&str] = &[
    "/api/auth/oidc",
    "/public/agents",
    "/public/agents/search",
    "/public/agents/resolve/{package_name}",
    "/public/agents/{identifier}",
    "/public/agents/{identifier}/versions",
    "/public/agents/{identifier}/versions/{version}",
    "/public/changes",
    "/discovery/resources",
    "/discovery/search",
    "/.well-known/agent-card.json",
    "/.well-known/jwks.json",
    "/.well-known/ai-catalog.json",
    "/.well-known/ard.json",
    "/ard/search",
    "/ard/explore",
    "/ard/agents",
    "/ard/agents/{identifier}",
    "/v0.1/servers",
    "/v0.1/servers/{name}/versions",
    "/v0.1/servers/{name}/versions/{version}",
    "/a2a/message",
    "/a2a/utility/{name}/.well-known/agent-card.json",
];

fn problem(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/problem+json": {"schema": {"$ref": "#/components/schemas/Problem"}}},
    })
}

fn json_rpc_error(description: &str) -> Value {
    json!({
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/JsonRpcErrorResponse"}}},
    })
}

/// Parameter schemas that `params(...)` cannot spell: the real types, vocabularies and limits of
/// what the handlers read.
fn parameter_schema(path: &str, name: &str) -> Option<Value> {
    let hosted = ["wiki", "finance", "reader"];
    Some(match (path, name) {
        // Read as a whole i64; out-of-range page sizes are clamped, not refused.
        (_, "limit") => json!({"type": "integer", "minimum": i64::MIN, "maximum": i64::MAX}),
        ("/public/changes", "since") | ("/discovery/resources", "offset") => {
            json!({"type": "integer", "minimum": 0, "maximum": i64::MAX})
        }
        ("/public/agents", "sort") => {
            let mut sort = sort_value();
            sort["type"] = json!("string");
            sort
        }
        (
            "/public/agents",
            "verification_level" | "payment_model" | "payment_direction" | "health"
            | "max_severity",
        ) => filter_properties().get(name)?["anyOf"][0].clone(),
        ("/api/agents", "cursor") => json!({
            "type": "string",
            "pattern": r"^(?:agt_[\u0001-\u007f]{0,60})?$",
            "description": "The id of the last agent of the previous page (`next_cursor`).",
        }),
        // `*`, or a revision with optional quotes and weak prefix; anything else is 412.
        ("/api/agents/{id}", "If-Match") => json!({
            "type": "string",
            "pattern": r#"^[ \t]*(?:\*|(?:W/)*"*[+-]?[0-9]{1,18}"*)[ \t]*$"#,
            "examples": ["\"3\""],
        }),
        // A whole number from 1; larger than the page's maximum reads as the maximum.
        ("/ard/agents", "pageSize") => {
            json!({"type": "integer", "minimum": 1, "maximum": i64::MAX})
        }
        ("/ard/agents/{identifier}", "identifier") => json!({
            "type": "string",
            "maxLength": crate::domain::urn::MAX_CHARS,
            "pattern": r"^[Uu][Rr][Nn]:[Aa][Ii][Rr]:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*(?::[A-Za-z0-9._-]+)+$",
            "description": "`urn:air:<publisher-domain>:<segments>`",
        }),
        ("/.well-known/agent-card.json", "format") => {
            json!({"type": "string", "enum": ["", "a2a", "registry"]})
        }
        (p, "name") if p.starts_with("/a2a/utility/") => json!({"type": "string", "enum": hosted}),
        _ => return None,
    })
}

/// The finished document, as served at `/openapi.json`.
pub fn document(openapi: &OpenApi) -> Value {
    let mut doc = serde_json::to_value(openapi).unwrap_or_else(|_| json!({}));
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for (name, schema) in hand_written() {
            schemas.insert(name.to_owned(), schema);
        }
    }
    if let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) {
        for (path, item) in paths.iter_mut() {
            let Some(item) = item.as_object_mut() else {
                continue;
            };
            for (_, operation) in item.iter_mut() {
                finish_operation(path, operation);
            }
        }
    }
    doc
}

fn finish_operation(path: &str, operation: &mut Value) {
    let json_rpc = JSON_RPC_PATHS.contains(&path);
    let secured = operation["security"]
        .as_array()
        .is_some_and(|requirements| {
            requirements
                .iter()
                .any(|requirement| requirement.get("bearer").is_some())
        });
    // A token the operation reads when it is sent (the public reads: it shows the caller's
    // private agents) but does not need.
    let optional = operation["security"]
        .as_array()
        .is_some_and(|requirements| {
            requirements
                .iter()
                .any(|requirement| requirement.as_object().is_some_and(|r| r.is_empty()))
        });
    if let Some(parameters) = operation
        .get_mut("parameters")
        .and_then(Value::as_array_mut)
    {
        for parameter in parameters {
            let name = parameter["name"].as_str().unwrap_or_default().to_owned();
            if let Some(schema) = parameter_schema(path, &name) {
                parameter["schema"] = schema;
            }
        }
    }
    let has_parameters = operation["parameters"]
        .as_array()
        .is_some_and(|parameters| {
            parameters
                .iter()
                .any(|parameter| matches!(parameter["in"].as_str(), Some("path" | "query")))
        });
    let has_body = operation.get("requestBody").is_some();
    // The MCP endpoint documents every answer itself, as JSON-RPC errors (`mcp::http`).
    if path == crate::wire::mcp::ENDPOINT {
        return;
    }
    let Some(responses) = operation
        .get_mut("responses")
        .and_then(Value::as_object_mut)
    else {
        return;
    };
    if crate::ard::error::is_ard_path(path) {
        // ARD's own error shape, for the errors raised before a handler too (`ard::error`).
        let mut add = |status: &str, description: &str| {
            responses
                .entry(status.to_owned())
                .or_insert_with(|| crate::openapi::ard::error(description));
        };
        if has_parameters || has_body {
            add(
                "400",
                "`INVALID_ARGUMENT`: a parameter or the body cannot be read.",
            );
        }
        if has_body {
            add("413", "`PAYLOAD_TOO_LARGE`: the body is larger than 1 MiB.");
            add(
                "415",
                "`UNSUPPORTED_MEDIA_TYPE`: the body is not declared as JSON.",
            );
        }
        let mut limited = crate::openapi::ard::error(
            "`RATE_LIMIT_EXCEEDED`: too many requests from this client; retry after `Retry-After` seconds.",
        );
        limited["headers"] = json!({"Retry-After": {"description": "Seconds to wait.", "required": true,
            "schema": {"type": "integer"}}});
        if secured {
            add(
                "401",
                "`UNAUTHENTICATED`: a bearer token that is not valid (without one, the caller reads as anonymous).",
            );
        }
        responses.entry("429".to_owned()).or_insert(limited);
        return;
    }
    // Errors the operation documents itself: problem+json on REST paths, and wherever the
    // body is a `Problem` (a JSON-RPC endpoint's unknown hosted agent).
    for (status, response) in responses.iter_mut() {
        let is_error = status.starts_with('4') || status.starts_with('5');
        let json_schema = response.pointer("/content/application~1json/schema");
        let is_problem = json_schema.and_then(|schema| schema["$ref"].as_str())
            == Some("#/components/schemas/Problem");
        if is_error && json_schema.is_some() && (is_problem || !json_rpc) {
            let description = response["description"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            *response = problem(&description);
        }
    }
    let mut add = |status: &str, response: Value| {
        responses.entry(status.to_owned()).or_insert(response);
    };
    let retry_after = json!({"Retry-After": {"description": "Seconds to wait.", "required": true,
        "schema": {"type": "integer"}}});
    if json_rpc {
        add(
            "401",
            json_rpc_error("`unauthorized`: no valid bearer token (JSON-RPC error -32000)."),
        );
        add(
            "403",
            json_rpc_error("`forbidden`: the token lacks scope `a2a` (JSON-RPC error -32000)."),
        );
        add(
            "400",
            json_rpc_error("The request body could not be read (JSON-RPC error -32600)."),
        );
        add(
            "413",
            json_rpc_error("The body is larger than 1 MiB (JSON-RPC error -32600)."),
        );
        add(
            "415",
            json_rpc_error(
                "A Content-Type other than JSON: ContentTypeNotSupportedError (-32005).",
            ),
        );
        let mut limited = json_rpc_error(
            "`rate_limited`: the token made too many requests (JSON-RPC error -32000).",
        );
        limited["headers"] = retry_after;
        add("429", limited);
        return;
    }
    if secured && optional {
        add(
            "401",
            problem(
                "`unauthorized`: a bearer token that is not valid (without one, the caller reads as anonymous).",
            ),
        );
    } else if secured {
        add("401", problem("`unauthorized`: no valid bearer token."));
        add("403", problem("`forbidden`: the token may not do this."));
    }
    if has_parameters || has_body {
        add(
            "400",
            problem(
                "`invalid_parameter` or `invalid_json`: a parameter or the body cannot be read.",
            ),
        );
    }
    if has_body {
        add(
            "413",
            problem("`payload_too_large`: the body is larger than 1 MiB."),
        );
        add(
            "415",
            problem("`unsupported_media_type`: the body is not declared as JSON."),
        );
        add(
            "422",
            problem(
                "`validation_failed`: the body breaks the schema's rules, or nests arrays and objects more than 128 levels deep.",
            ),
        );
    }
    // Per client IP on the public paths; per token (not the master key) wherever one is read.
    if RATE_LIMITED_PATHS.contains(&path) || secured {
        let mut limited = problem(
            "`rate_limited`: too many requests from this client or token; retry after `Retry-After` seconds.",
        );
        limited["headers"] = retry_after;
        add("429", limited);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The whitespace class as the ranges it spells.
    fn ws_ranges() -> Vec<(u32, u32)> {
        vec![
            (0x09, 0x0d),
            (0x20, 0x20),
            (0x85, 0x85),
            (0xa0, 0xa0),
            (0x1680, 0x1680),
            (0x2000, 0x200a),
            (0x2028, 0x2029),
            (0x202f, 0x202f),
            (0x205f, 0x205f),
            (0x3000, 0x3000),
        ]
    }

    #[test]
    fn the_whitespace_class_is_what_trim_removes() {
        let spelled: String = ws_ranges()
            .iter()
            .map(|(from, to)| {
                let one = |c: u32| match c {
                    0x09 => r"\t".to_owned(),
                    0x0a => r"\n".to_owned(),
                    0x0c => r"\f".to_owned(),
                    0x0d => r"\r".to_owned(),
                    0x20 => " ".to_owned(),
                    c => format!(r"\u{c:04x}"),
                };
                match to - from {
                    0 => one(*from),
                    _ if *from == 0x09 => r"\t\n\u000b\f\r".to_owned(),
                    1 => format!("{}{}", one(*from), one(*to)),
                    _ => format!("{}-{}", one(*from), one(*to)),
                }
            })
            .collect();
        assert_eq!(spelled, WS);
        for c in (0..=0x10ffff).filter_map(char::from_u32) {
            let listed = ws_ranges()
                .iter()
                .any(|(from, to)| (*from..=*to).contains(&u32::from(c)));
            assert_eq!(listed, c.is_whitespace(), "{:?}", c);
        }
    }

    #[test]
    fn case_insensitive_words_spell_every_letter() {
        assert_eq!(ci("free"), "[Ff][Rr][Ee][Ee]");
        assert_eq!(ci("eip155"), "[Ee][Ii][Pp]155");
        assert_eq!(
            ci("domain_verified.x"),
            r"[Dd][Oo][Mm][Aa][Ii][Nn]_[Vv][Ee][Rr][Ii][Ff][Ii][Ee][Dd]\.[Xx]"
        );
    }
}
