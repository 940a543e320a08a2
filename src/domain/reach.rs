//! How to reach an agent, as its publisher states it: A2A interfaces (as in an A2A v1.0 card's
//! `supportedInterfaces`), MCP remotes and packages (as the MCP Registry's `server.json` names
//! them), and the source repository. Parsed like the rest of a draft: every bad field at once.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use utoipa::ToSchema;

use super::FieldError;
use super::agent::{optional_text, optional_url, present, required_text, text};

/// Most interfaces, remotes or packages one agent lists.
pub const MAX_ENDPOINTS: usize = 8;
const MAX_IDENTIFIER_CHARS: usize = 214;
const MAX_VERSION_CHARS: usize = 64;
const MAX_HINT_CHARS: usize = 32;
const MAX_ENV_VARS: usize = 32;
const MAX_ENV_NAME_CHARS: usize = 128;
const MAX_ENV_DESCRIPTION_CHARS: usize = 500;

/// Every way the publisher says the agent can be reached.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Reach {
    /// A2A endpoints; the first is the agent's `url`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub interfaces: Vec<Interface>,
    /// MCP endpoints over the network.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub remotes: Vec<Remote>,
    /// MCP servers to run locally from a package.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<Package>,
    /// Where the source lives.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repository: Option<Repository>,
}

impl Reach {
    pub fn is_empty(&self) -> bool {
        self.interfaces.is_empty()
            && self.remotes.is_empty()
            && self.packages.is_empty()
            && self.repository.is_none()
    }

    /// Whether an A2A client can call the agent: it lists an A2A interface.
    pub fn is_callable(&self) -> bool {
        !self.interfaces.is_empty()
    }

    /// Make `url` the first A2A interface (JSON-RPC, A2A 1.0, unless listed otherwise).
    pub fn lead_with(&mut self, url: &str) {
        if let Some(at) = self.interfaces.iter().position(|i| i.url == url) {
            let interface = self.interfaces.remove(at);
            self.interfaces.insert(0, interface);
        } else {
            self.interfaces.insert(
                0,
                Interface {
                    url: url.to_owned(),
                    protocol_binding: "JSONRPC".to_owned(),
                    protocol_version: "1.0".to_owned(),
                },
            );
            self.interfaces.truncate(MAX_ENDPOINTS);
        }
    }
}

/// An A2A endpoint, as in a card's `supportedInterfaces`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Interface {
    /// The endpoint's absolute http(s) URL.
    pub url: String,
    /// `JSONRPC`, `GRPC` or `HTTP+JSON`.
    #[serde(rename = "protocolBinding")]
    pub protocol_binding: String,
    /// The A2A version it speaks, e.g. `1.0`.
    #[serde(rename = "protocolVersion")]
    pub protocol_version: String,
}

/// An MCP server reachable over the network.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Remote {
    /// `streamable-http` or `sse`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The endpoint's absolute http(s) URL.
    pub url: String,
}

/// An MCP server that runs locally from a package.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Package {
    /// `npm`, `pypi`, `oci`, `nuget` or `cargo`.
    pub registry_type: String,
    /// The package's name in its registry (an image reference for `oci`).
    pub identifier: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// How a client talks to it once started: `stdio` (default), `streamable-http` or `sse`.
    pub transport: Transport,
    /// The command that runs it, e.g. `npx`, `uvx`, `docker`, `dnx`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_hint: Option<String>,
    /// Settings it reads from its environment.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub environment_variables: Vec<EnvironmentVariable>,
}

/// A package's transport.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Transport {
    #[serde(rename = "type")]
    pub kind: String,
}

/// An environment variable a package reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EnvironmentVariable {
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    #[serde(default)]
    pub is_required: bool,
    #[serde(default)]
    pub is_secret: bool,
}

/// Where the source lives.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Repository {
    pub url: String,
    /// The host kind, e.g. `github`, `gitlab`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

const BINDINGS: [&str; 3] = ["JSONRPC", "GRPC", "HTTP+JSON"];
pub const REMOTE_TYPES: [&str; 2] = ["streamable-http", "sse"];
pub const REGISTRY_TYPES: [&str; 5] = ["npm", "pypi", "oci", "nuget", "cargo"];
pub const TRANSPORTS: [&str; 3] = ["stdio", "streamable-http", "sse"];
/// The A2A bindings an interface may name.
pub const PROTOCOL_BINDINGS: [&str; 3] = BINDINGS;
/// Longest `protocolVersion`, `runtime_hint` and `repository.source`.
pub const MAX_LABEL_CHARS: usize = 32;
pub const MAX_PACKAGE_IDENTIFIER_CHARS: usize = MAX_IDENTIFIER_CHARS;
pub const MAX_PACKAGE_VERSION_CHARS: usize = MAX_VERSION_CHARS;
pub const MAX_ENVIRONMENT_VARIABLES: usize = MAX_ENV_VARS;
pub const MAX_ENVIRONMENT_NAME_CHARS: usize = MAX_ENV_NAME_CHARS;
pub const MAX_ENVIRONMENT_DESCRIPTION_CHARS: usize = MAX_ENV_DESCRIPTION_CHARS;

/// The value of `key`, or of its camelCase spelling, unless absent or null.
fn member<'a>(object: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    present(object, key).or_else(|| present(object, &snake_to_camel(key)))
}

fn snake_to_camel(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    let mut upper = false;
    for c in key.chars() {
        if c == '_' {
            upper = true;
        } else if upper {
            out.extend(c.to_uppercase());
            upper = false;
        } else {
            out.push(c);
        }
    }
    out
}

/// A required absolute http(s) URL (the rules of `url`).
fn required_url(
    field: &str,
    value: Option<&Value>,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let before = errors.len();
    let url = optional_url(field, value, errors);
    if url.is_none() && errors.len() == before {
        errors.push(FieldError::new(field, "is required"));
    }
    url
}

/// One of `allowed` (ASCII case and surrounding whitespace ignored), lowercase; absent or null
/// gives `default`, and without a default is an error.
fn word(
    field: &str,
    value: Option<&Value>,
    allowed: &[&str],
    default: Option<&str>,
    errors: &mut Vec<FieldError>,
) -> Option<String> {
    let Some(value) = value else {
        if default.is_none() {
            errors.push(FieldError::new(field, "is required"));
        }
        return default.map(str::to_owned);
    };
    let found = text(field, Some(value), errors)?;
    match allowed
        .iter()
        .find(|word| word.eq_ignore_ascii_case(&found))
    {
        Some(word) => Some((*word).to_owned()),
        None => {
            errors.push(FieldError::new(
                field,
                format!("must be one of {}", allowed.join(", ")),
            ));
            None
        }
    }
}

fn flag(field: &str, value: Option<&Value>, errors: &mut Vec<FieldError>) -> bool {
    match value {
        None => false,
        Some(Value::Bool(flag)) => *flag,
        Some(_) => {
            errors.push(FieldError::new(field, "must be true or false"));
            false
        }
    }
}

/// Parses `interfaces`, `remotes`, `packages` and `repository` from `get` (the body's fields, or
/// the card's where the body has none), reporting every invalid field. Snake and camelCase
/// spellings of member names are both read.
pub fn parse<'a>(get: impl Fn(&str) -> Option<&'a Value>, errors: &mut Vec<FieldError>) -> Reach {
    let mut reach = Reach::default();
    for (i, item) in list(get("interfaces"), "interfaces", MAX_ENDPOINTS, errors) {
        let field = format!("interfaces[{i}]");
        let url = required_url(&format!("{field}.url"), member(item, "url"), errors);
        let binding = word(
            &format!("{field}.protocolBinding"),
            member(item, "protocol_binding"),
            &BINDINGS,
            Some("JSONRPC"),
            errors,
        );
        let version = optional_text(
            &format!("{field}.protocolVersion"),
            member(item, "protocol_version"),
            MAX_LABEL_CHARS,
            errors,
        )
        .unwrap_or_else(|| "1.0".to_owned());
        if let (Some(url), Some(binding)) = (url, binding) {
            reach.interfaces.push(Interface {
                url,
                protocol_binding: binding,
                protocol_version: version,
            });
        }
    }
    for (i, item) in list(get("remotes"), "remotes", MAX_ENDPOINTS, errors) {
        let field = format!("remotes[{i}]");
        let kind = word(
            &format!("{field}.type"),
            member(item, "type"),
            &REMOTE_TYPES,
            None,
            errors,
        );
        let url = required_url(&format!("{field}.url"), member(item, "url"), errors);
        if let (Some(kind), Some(url)) = (kind, url) {
            reach.remotes.push(Remote { kind, url });
        }
    }
    for (i, item) in list(get("packages"), "packages", MAX_ENDPOINTS, errors) {
        if let Some(package) = parse_package(&format!("packages[{i}]"), item, errors) {
            reach.packages.push(package);
        }
    }
    match get("repository") {
        None => {}
        Some(Value::Object(repository)) => {
            let url = required_url("repository.url", member(repository, "url"), errors);
            let source = optional_text(
                "repository.source",
                member(repository, "source"),
                MAX_LABEL_CHARS,
                errors,
            );
            if let Some(url) = url {
                reach.repository = Some(Repository { url, source });
            }
        }
        Some(_) => errors.push(FieldError::new(
            "repository",
            "must be an object {url, source}",
        )),
    }
    reach
}

fn parse_package(
    field: &str,
    item: &Map<String, Value>,
    errors: &mut Vec<FieldError>,
) -> Option<Package> {
    let registry_type = word(
        &format!("{field}.registry_type"),
        member(item, "registry_type"),
        &REGISTRY_TYPES,
        None,
        errors,
    );
    let identifier = required_text(
        &format!("{field}.identifier"),
        member(item, "identifier"),
        MAX_IDENTIFIER_CHARS,
        errors,
    );
    let version = optional_text(
        &format!("{field}.version"),
        member(item, "version"),
        MAX_VERSION_CHARS,
        errors,
    );
    let transport = match member(item, "transport") {
        None => Some("stdio".to_owned()),
        Some(Value::Object(transport)) => word(
            &format!("{field}.transport.type"),
            member(transport, "type"),
            &TRANSPORTS,
            None,
            errors,
        ),
        Some(_) => {
            errors.push(FieldError::new(
                format!("{field}.transport"),
                "must be an object {type}",
            ));
            None
        }
    };
    let runtime_hint = optional_text(
        &format!("{field}.runtime_hint"),
        member(item, "runtime_hint"),
        MAX_HINT_CHARS,
        errors,
    );
    let env_field = format!("{field}.environment_variables");
    let mut environment_variables = Vec::new();
    for (j, variable) in list(
        member(item, "environment_variables"),
        &env_field,
        MAX_ENV_VARS,
        errors,
    ) {
        let at = format!("{env_field}[{j}]");
        let name = required_text(
            &format!("{at}.name"),
            member(variable, "name"),
            MAX_ENV_NAME_CHARS,
            errors,
        );
        let description = optional_text(
            &format!("{at}.description"),
            member(variable, "description"),
            MAX_ENV_DESCRIPTION_CHARS,
            errors,
        );
        let is_required = flag(
            &format!("{at}.is_required"),
            member(variable, "is_required"),
            errors,
        );
        let is_secret = flag(
            &format!("{at}.is_secret"),
            member(variable, "is_secret"),
            errors,
        );
        if let Some(name) = name {
            environment_variables.push(EnvironmentVariable {
                name,
                description,
                is_required,
                is_secret,
            });
        }
    }
    Some(Package {
        registry_type: registry_type?,
        identifier: identifier?,
        version,
        transport: Transport { kind: transport? },
        runtime_hint,
        environment_variables,
    })
}

/// The objects of list `field` with their indexes; a list longer than `max` is one error.
fn list<'a>(
    value: Option<&'a Value>,
    field: &str,
    max: usize,
    errors: &mut Vec<FieldError>,
) -> Vec<(usize, &'a Map<String, Value>)> {
    let Some(value) = value else {
        return Vec::new();
    };
    let Some(items) = value.as_array() else {
        errors.push(FieldError::new(field, "must be an array of objects"));
        return Vec::new();
    };
    if items.len() > max {
        errors.push(FieldError::new(
            field,
            format!("at most {max} items (got {})", items.len()),
        ));
        return Vec::new();
    }
    let mut objects = Vec::new();
    for (i, item) in items.iter().enumerate() {
        match item.as_object() {
            Some(object) => objects.push((i, object)),
            None => errors.push(FieldError::new(
                format!("{field}[{i}]"),
                "must be an object",
            )),
        }
    }
    objects
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn parse_body(body: Value) -> (Reach, Vec<FieldError>) {
        let mut errors = Vec::new();
        let object = body.as_object().expect("object").clone();
        let reach = parse(|key| present(&object, key), &mut errors);
        (reach, errors)
    }

    #[test]
    fn the_mcp_registry_and_a2a_shapes_parse() {
        let (reach, errors) = parse_body(json!({
            "interfaces": [{"url": "https://a.test/a2a", "protocolBinding": "jsonrpc", "protocolVersion": "1.0"}],
            "remotes": [{"type": "streamable-http", "url": "https://mcp.test/mcp"}],
            "packages": [
                {"registry_type": "npm", "identifier": "@acme/mcp", "version": null, "transport": {"type": "stdio"}},
                {"registryType": "oci", "identifier": "mcp/sqlite", "runtimeHint": "docker",
                 "environmentVariables": [{"name": "TOKEN", "isSecret": true, "isRequired": true}]}
            ],
            "repository": {"url": "https://github.com/acme/mcp", "source": "github"}
        }));
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(reach.interfaces[0].protocol_binding, "JSONRPC");
        assert_eq!(reach.remotes[0].kind, "streamable-http");
        assert_eq!(reach.packages[1].registry_type, "oci");
        assert_eq!(reach.packages[1].transport.kind, "stdio");
        assert!(reach.packages[1].environment_variables[0].is_secret);
        assert_eq!(
            reach.repository.as_ref().map(|r| r.url.as_str()),
            Some("https://github.com/acme/mcp")
        );
        assert!(reach.is_callable());
    }

    #[test]
    fn every_bad_field_is_reported_at_once() {
        let (_, errors) = parse_body(json!({
            "interfaces": [{"url": "ftp://a.test", "protocolBinding": "SOAP"}],
            "remotes": [{"type": "websocket"}],
            "packages": [{"registry_type": "apt", "transport": {"type": "pigeon"}}],
            "repository": "github.com/acme"
        }));
        let fields: Vec<&str> = errors.iter().map(|e| e.field.as_str()).collect();
        for expected in [
            "interfaces[0].protocolBinding",
            "remotes[0].type",
            "remotes[0].url",
            "packages[0].registry_type",
            "packages[0].identifier",
            "packages[0].transport.type",
            "repository",
        ] {
            assert!(fields.contains(&expected), "{expected}: {fields:?}");
        }
        let (_, errors) = parse_body(json!({"remotes": vec![json!({}); 9]}));
        assert_eq!(
            errors.len(),
            1,
            "one error for an overlong list: {errors:?}"
        );
    }
}
