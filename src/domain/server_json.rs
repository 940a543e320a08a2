//! The MCP Registry's `server.json` read as a publish body, so `import` takes the official
//! registry's documents (one per line, bare or as the API's `{server, _meta}` items).
//!
//! | `server.json` | publish body |
//! |---|---|
//! | `name` (`io.github.acme/weather`) | `package_name` (`io.github.acme.weather`: `/` becomes `.`) |
//! | `title`, else the part of `name` after `/` | `name` |
//! | `description` | `description` |
//! | `version` | `version` |
//! | `repository` (`url`, `source`) | `repository` |
//! | `websiteUrl` | `manifest_url` (where the server is described) |
//! | `remotes[]` (`type`, `url`) | `remotes` |
//! | `packages[]` (`registryType`, `identifier`, `version`, `transport`, `runtimeHint`, `environmentVariables`) | `packages` |
//!
//! Fields the registry does not keep (icons, `registryBaseUrl`, arguments, headers, `_meta`)
//! are dropped.

use serde_json::{Map, Value, json};

/// The `_meta` key under which this registry's own `server.json` documents (its MCP Registry
/// API) carry what the schema has no room for: the package name, the full description, and
/// packages that name no version.
pub const LISTING_META: &str = "io.github.agent-registry/listing";
/// The `_meta` key of what the publisher provided.
pub const PUBLISHER_META: &str = "io.modelcontextprotocol.registry/publisher-provided";

/// The publish body a `server.json` document describes; `None` when `document` is not one (it
/// has a `package_name`, or its `name` is not `namespace/name`).
pub fn publish_body(document: &Value) -> Option<Value> {
    let server = match document.get("server") {
        Some(server @ Value::Object(_)) => server,
        _ => document,
    };
    let object = server.as_object()?;
    if object.contains_key("package_name") {
        return None;
    }
    let name = object.get("name")?.as_str()?;
    let (namespace, short) = name.split_once('/')?;
    let mut body = Map::new();
    body.insert(
        "package_name".to_owned(),
        json!(format!("{namespace}.{}", short.replace('/', "."))),
    );
    let title = object
        .get("title")
        .and_then(Value::as_str)
        .filter(|title| !title.trim().is_empty())
        .unwrap_or(short);
    body.insert("name".to_owned(), json!(title));
    for (from, to) in [
        ("description", "description"),
        ("version", "version"),
        ("repository", "repository"),
        ("websiteUrl", "manifest_url"),
        ("remotes", "remotes"),
        ("packages", "packages"),
    ] {
        if let Some(value) = object.get(from).filter(|value| !value.is_null()) {
            body.insert(to.to_owned(), value.clone());
        }
    }
    // A document this registry served: its listing restores what the schema cut.
    if let Some(listing) = object
        .get("_meta")
        .and_then(|meta| meta.get(PUBLISHER_META))
        .and_then(|provided| provided.get(LISTING_META))
    {
        for key in ["package_name", "description"] {
            if let Some(value @ Value::String(_)) = listing.get(key) {
                body.insert(key.to_owned(), value.clone());
            }
        }
        if let Some(Value::Array(unversioned)) = listing.get("unversioned_packages") {
            match body.get_mut("packages") {
                Some(Value::Array(packages)) => packages.extend(unversioned.iter().cloned()),
                _ => {
                    body.insert("packages".to_owned(), Value::Array(unversioned.clone()));
                }
            }
        }
    }
    Some(Value::Object(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::AgentDraft;

    #[test]
    fn a_registry_server_json_becomes_a_draft_with_its_remotes_and_packages() {
        let document = json!({
            "server": {
                "$schema": "https://static.modelcontextprotocol.io/schemas/2025-09-29/server.schema.json",
                "name": "io.github.acme/weather",
                "title": "Acme Weather",
                "description": "Forecasts over MCP.",
                "version": "1.2.0",
                "repository": {"url": "https://github.com/acme/weather-mcp", "source": "github"},
                "websiteUrl": "https://acme.example/weather",
                "remotes": [{"type": "streamable-http", "url": "https://mcp.acme.example/weather"}],
                "packages": [{"registryType": "npm", "registryBaseUrl": "https://registry.npmjs.org",
                    "identifier": "@acme/weather-mcp", "version": "1.2.0", "transport": {"type": "stdio"},
                    "environmentVariables": [{"name": "ACME_KEY", "isSecret": true, "isRequired": true}]}]
            },
            "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active"}}
        });
        let body = publish_body(&document).expect("a server.json");
        let draft = AgentDraft::parse(&body).expect("valid");
        assert_eq!(draft.package_name.as_str(), "io.github.acme.weather");
        assert_eq!(draft.name, "Acme Weather");
        assert_eq!(draft.version.as_deref(), Some("1.2.0"));
        assert_eq!(
            draft.reach.remotes[0].url,
            "https://mcp.acme.example/weather"
        );
        assert_eq!(draft.reach.packages[0].identifier, "@acme/weather-mcp");
        assert!(draft.reach.packages[0].environment_variables[0].is_secret);
        assert_eq!(
            draft.reach.repository.as_ref().map(|r| r.url.as_str()),
            Some("https://github.com/acme/weather-mcp")
        );
        assert!(
            draft.reach.interfaces.is_empty(),
            "an MCP server is no A2A agent"
        );
    }

    #[test]
    fn this_registrys_listing_restores_what_the_schema_cut() {
        let document = json!({"server": {
            "name": "io.github.acme/weather.tools", "description": "Forecasts over M…", "version": "1.0.0",
            "_meta": {PUBLISHER_META: {LISTING_META: {
                "package_name": "io.github.acme.weather.tools",
                "description": "Forecasts over MCP, for every city, with the full text kept.",
                "unversioned_packages": [{"registryType": "npm", "identifier": "@acme/weather",
                    "transport": {"type": "stdio"}}]}}}
        }});
        let body = publish_body(&document).expect("a server.json");
        let draft = AgentDraft::parse(&body).expect("valid");
        assert_eq!(draft.package_name.as_str(), "io.github.acme.weather.tools");
        assert!(draft.description.ends_with("the full text kept."));
        assert_eq!(draft.reach.packages[0].identifier, "@acme/weather");
    }

    #[test]
    fn a_publish_body_is_not_a_server_json() {
        assert_eq!(
            publish_body(&json!({"package_name": "com.example.x", "name": "a/b"})),
            None
        );
        assert_eq!(publish_body(&json!({"name": "plain"})), None);
        let bare = publish_body(&json!({"name": "com.example/tool", "description": "d"}))
            .expect("bare server.json");
        assert_eq!(bare["name"], "tool");
    }
}
