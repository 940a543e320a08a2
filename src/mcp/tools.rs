//! The tools: `search_agents`, `get_agent`, `get_agent_card`, `list_categories`. Each declares
//! its input and output schemas and answers `structuredContent` with a short text rendering;
//! bad arguments are tool errors (`isError`), which the model can read and correct.

use serde_json::{Map, Value, json};

use super::protocol::{Revision, RpcError};
use super::source::Source;
use crate::error::{ApiError, ErrorCode};

pub const SEARCH_AGENTS: &str = "search_agents";
pub const GET_AGENT: &str = "get_agent";
pub const GET_AGENT_CARD: &str = "get_agent_card";
pub const LIST_CATEGORIES: &str = "list_categories";

/// The filters every search path takes, as tool arguments.
const FILTERS: [&str; 12] = [
    "tags",
    "category",
    "target",
    "verification_level",
    "payment_model",
    "payment_protocol",
    "payment_rail",
    "payment_direction",
    "health",
    "max_severity",
    "include_deprecated",
    "collapse",
];

/// `tools/list`: every tool, in a fixed order. Clients before 2025-06-18 know no
/// `outputSchema`.
pub fn list(revision: Revision) -> Value {
    let mut tools = vec![
        tool(
            SEARCH_AGENTS,
            "Search agents",
            "Find agents (A2A agents and MCP servers) for a task, best match first. `query` is \
             what the agent should do, in plain words; the filters narrow the matches before \
             ranking. Each hit has the agent's id and package name for get_agent and \
             get_agent_card. Pass `next_cursor` back as `cursor` for more.",
            search_input(),
            page_output(),
        ),
        tool(
            GET_AGENT,
            "Get an agent",
            "The full public record of one agent, by id (agt_…) or package name \
             (com.example.weather): description, capabilities with their input schemas, \
             payment terms, verification, health, and its A2A interfaces, MCP remotes and \
             packages.",
            agent_input(),
            record_output(),
        ),
        tool(
            GET_AGENT_CARD,
            "Get an agent's card",
            "How to use one agent, by id or package name: its A2A agent card (signed, as the \
             registry serves it) or its MCP server.json, whichever it has, and how to connect \
             to it (endpoints, MCP remotes, the command that runs each MCP package).",
            agent_input(),
            card_output(),
        ),
        tool(
            LIST_CATEGORIES,
            "List categories",
            "How the registry's agents (or those matching `query` and the filters) spread over \
             categories, tags, payment models and health, with counts: the values to narrow a \
             search_agents call with.",
            facets_input(),
            facets_output(),
        ),
    ];
    if !revision.has_structured_content() {
        for tool in &mut tools {
            if let Value::Object(object) = tool {
                object.remove("outputSchema");
            }
        }
    }
    json!({"tools": tools})
}

fn tool(name: &str, title: &str, description: &str, input: Value, output: Value) -> Value {
    json!({
        "name": name,
        "title": title,
        "description": description,
        "inputSchema": input,
        "outputSchema": output,
        "annotations": {
            "title": title,
            "readOnlyHint": true,
            "destructiveHint": false,
            "idempotentHint": true,
            "openWorldHint": false,
        },
    })
}

fn strings(description: &str) -> Value {
    json!({"type": "array", "items": {"type": "string"}, "description": description})
}

fn enums(values: &[&str], description: &str) -> Value {
    json!({"type": "array", "items": {"enum": values}, "description": description})
}

fn filter_properties() -> Map<String, Value> {
    let mut properties = Map::new();
    properties.insert(
        "tags".to_owned(),
        strings("Any of these tags (exact, case-insensitive)."),
    );
    properties.insert(
        "category".to_owned(),
        strings("Any of these categories, e.g. Finance (list_categories has them)."),
    );
    properties.insert(
        "target".to_owned(),
        strings("Any of these audiences, e.g. Developers, Business, Consumer."),
    );
    properties.insert(
        "verification_level".to_owned(),
        json!({"enum": ["unverified", "domain_verified"],
               "description": "Only agents whose publisher proved (domain_verified) or did not prove their domain."}),
    );
    properties.insert(
        "payment_model".to_owned(),
        enums(
            &["free", "paid", "freemium"],
            "Any of these payment models.",
        ),
    );
    properties.insert(
        "payment_protocol".to_owned(),
        strings("Any of these payment protocols, e.g. x402, lightning-invoice."),
    );
    properties.insert(
        "payment_rail".to_owned(),
        strings("Rails as network:asset (asset prefix), network:, or a bare prefix of either: base:usdc, nano:, usdc."),
    );
    properties.insert(
        "payment_direction".to_owned(),
        json!({"enum": ["inbound", "outbound", "both"], "description": "Which way the agent's payments flow."}),
    );
    properties.insert(
        "health".to_owned(),
        enums(
            &["up", "down", "not_conformant", "unknown"],
            "What the registry's last liveness probe found.",
        ),
    );
    properties.insert(
        "max_severity".to_owned(),
        json!({"enum": ["none", "low", "medium", "high", "critical"],
               "description": "Only agents whose worst scanner finding (hidden instructions, invisible characters, pasted credentials, in their texts or at their endpoint) is at most this; none: clean agents only."}),
    );
    properties.insert(
        "include_deprecated".to_owned(),
        json!({"type": "boolean", "default": true,
               "description": "false drops agents their publishers deprecated (they rank below their equals otherwise)."}),
    );
    properties.insert(
        "collapse".to_owned(),
        json!({"type": "boolean", "default": true,
               "description": "One agent per duplicate group (agents sharing a repository or endpoint); false shows every one."}),
    );
    properties
}

fn query_property() -> Value {
    json!({"type": "string", "description": "What the agent should do, in plain words or keywords; empty for every agent."})
}

fn search_input() -> Value {
    let mut properties = filter_properties();
    properties.insert("query".to_owned(), query_property());
    properties.insert(
        "limit".to_owned(),
        json!({"type": "integer", "minimum": 1, "maximum": 100, "default": 5,
               "description": "Most agents to return."}),
    );
    properties.insert(
        "cursor".to_owned(),
        json!({"type": "string", "description": "next_cursor of the previous page."}),
    );
    properties.insert(
        "sort".to_owned(),
        json!({"enum": ["relevance", "newest", "name"],
               "description": "relevance (the default with a query) or newest (the default without), or name."}),
    );
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn facets_input() -> Value {
    let mut properties = filter_properties();
    properties.insert("query".to_owned(), query_property());
    json!({"type": "object", "properties": properties, "additionalProperties": false})
}

fn agent_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "agent": {"type": "string", "description": "The agent's id (agt_…) or package name (com.example.weather)."},
        },
        "required": ["agent"],
        "additionalProperties": false,
    })
}

fn nullable(kind: &str) -> Value {
    json!({"type": [kind, "null"]})
}

/// What every answer says of an agent: who it is and where its card and endpoint are.
fn agent_properties() -> Map<String, Value> {
    let mut properties = Map::new();
    for key in [
        "id",
        "package_name",
        "name",
        "description",
        "version",
        "verification_level",
    ] {
        properties.insert(key.to_owned(), json!({"type": "string"}));
    }
    properties.insert(
        "manifest_url".to_owned(),
        json!({"type": "string", "description": "Where the agent's card is."}),
    );
    properties.insert(
        "url".to_owned(),
        json!({"type": "string", "description": "The agent's (first) A2A endpoint."}),
    );
    properties.insert("tags".to_owned(), strings("Lowercase tags."));
    properties.insert("health".to_owned(), json!({"type": "object"}));
    properties
}

fn page_output() -> Value {
    let mut hit = agent_properties();
    for key in ["target", "category"] {
        hit.insert(key.to_owned(), nullable("string"));
    }
    hit.insert("payment".to_owned(), nullable("object"));
    hit.insert("capabilities".to_owned(), strings("Capability names."));
    hit.insert(
        "max_severity".to_owned(),
        json!({"type": "string", "description": "The worst scanner finding (none: clean); get_agent lists the findings."}),
    );
    hit.insert(
        "deprecation".to_owned(),
        json!({"type": "object", "description": "Present when the publisher deprecated the agent: message, successor."}),
    );
    hit.insert(
        "score".to_owned(),
        json!({"type": "number", "description": "Relevance, higher is better, within this answer."}),
    );
    json!({
        "type": "object",
        "properties": {
            "agents": {"type": "array", "items": {
                "type": "object",
                "properties": hit,
                "required": ["id", "package_name", "name", "description", "manifest_url"],
            }},
            "total": {"type": "integer", "description": "Matches over all pages."},
            "limit": {"type": "integer"},
            "next_cursor": {"type": ["string", "null"], "description": "Pass as cursor for the next page; null on the last."},
        },
        "required": ["agents", "total", "limit", "next_cursor"],
    })
}

fn record_output() -> Value {
    let mut record = agent_properties();
    for (key, value) in [
        ("category", json!({"type": "string"})),
        ("target", json!({"type": "string"})),
        ("payment", json!({"type": "object"})),
        (
            "capabilities",
            json!({"type": "array", "items": {"type": "object"},
                                "description": "Name, description and input schema of each."}),
        ),
        (
            "interfaces",
            json!({"type": "array", "items": {"type": "object"}, "description": "A2A endpoints."}),
        ),
        (
            "remotes",
            json!({"type": "array", "items": {"type": "object"}, "description": "MCP servers over the network."}),
        ),
        (
            "packages",
            json!({"type": "array", "items": {"type": "object"}, "description": "MCP servers to run locally."}),
        ),
        ("repository", json!({"type": "object"})),
    ] {
        record.insert(key.to_owned(), value);
    }
    json!({
        "type": "object",
        "properties": record,
        "required": ["id", "package_name", "name", "description", "version", "tags", "capabilities", "verification_level"],
    })
}

fn card_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "package_name": {"type": "string"},
            "name": {"type": "string"},
            "a2a_card": {"type": "object", "description": "The A2A agent card, signed by the registry (JWS signatures under signatures)."},
            "server_json": {"type": "object", "description": "The MCP Registry server.json document."},
            "connect": {
                "type": "object",
                "properties": {
                    "a2a": {"type": "array", "items": {"type": "object"}, "description": "A2A endpoints: url, protocolBinding, protocolVersion."},
                    "card_url": {"type": "string"},
                    "mcp_remotes": {"type": "array", "items": {"type": "object"}, "description": "type (streamable-http or sse) and url."},
                    "mcp_packages": {"type": "array", "items": {"type": "object"}, "description": "Packages, each with the command and args that run it where known."},
                    "repository": {"type": "object"},
                },
                "required": ["a2a", "card_url", "mcp_remotes", "mcp_packages"],
            },
        },
        "required": ["id", "package_name", "name", "connect"],
    })
}

fn counts() -> Value {
    json!({"type": "object", "additionalProperties": {"type": "integer"}})
}

fn facets_output() -> Value {
    json!({
        "type": "object",
        "properties": {
            "total": {"type": "integer", "description": "Agents counted."},
            "category": counts(),
            "tags": counts(),
            "payment_model": counts(),
            "health": counts(),
        },
        "required": ["total", "category", "tags", "payment_model", "health"],
    })
}

/// What a tool produced: the structured answer and its short rendering, or an error the
/// model reads.
type Outcome = Result<(Value, String), String>;

/// `tools/call`: an unknown tool is a protocol error; everything the tool itself refuses is
/// an `isError` result.
pub async fn call(
    source: &dyn Source,
    params: Option<&Value>,
    revision: Revision,
) -> Result<Value, RpcError> {
    let name = super::protocol::required_param(params, "tools/call", "name")?;
    let arguments = params.and_then(|params| params.get("arguments"));
    let outcome = match name {
        SEARCH_AGENTS => search_agents(source, arguments).await,
        GET_AGENT => get_agent(source, arguments).await,
        GET_AGENT_CARD => get_agent_card(source, arguments).await,
        LIST_CATEGORIES => list_categories(source, arguments).await,
        other => {
            return Err(RpcError::invalid_params(format!(
                "unknown tool '{}'; the tools are {SEARCH_AGENTS}, {GET_AGENT}, \
                 {GET_AGENT_CARD} and {LIST_CATEGORIES}",
                crate::domain::truncate(other, 60)
            )));
        }
    };
    Ok(result(outcome, revision))
}

fn result(outcome: Outcome, revision: Revision) -> Value {
    match outcome {
        Err(message) => json!({"content": [text(&message)], "isError": true}),
        Ok((structured, rendering)) if revision.has_structured_content() => json!({
            "content": [text(&rendering)],
            "structuredContent": structured,
            "isError": false,
        }),
        // Before structured content, the answer itself travels as JSON text.
        Ok((structured, rendering)) => json!({
            "content": [text(&rendering), text(&structured.to_string())],
            "isError": false,
        }),
    }
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

/// The arguments object, with every name checked against `allowed`.
fn arguments(
    arguments: Option<&Value>,
    tool: &str,
    allowed: &[&str],
) -> Result<Map<String, Value>, String> {
    let object = match arguments {
        None | Some(Value::Null) => return Ok(Map::new()),
        Some(Value::Object(object)) => object,
        Some(_) => return Err(format!("{tool}: arguments must be an object")),
    };
    if let Some(unknown) = object.keys().find(|key| !allowed.contains(&key.as_str())) {
        return Err(format!(
            "{tool}: unknown argument '{}'; it takes {}",
            crate::domain::truncate(unknown, 60),
            allowed.join(", ")
        ));
    }
    Ok(object.clone())
}

/// What the model reads when the registry refused: its message, without internals.
fn refusal(err: ApiError) -> String {
    match err.code {
        ErrorCode::Internal => "the registry failed to answer; try again later".to_owned(),
        _ => err.detail,
    }
}

async fn search_agents(source: &dyn Source, args: Option<&Value>) -> Outcome {
    let allowed: Vec<&str> = ["query", "limit", "cursor", "sort"]
        .into_iter()
        .chain(FILTERS)
        .collect();
    let body = arguments(args, SEARCH_AGENTS, &allowed)?;
    let query = body.get("query").and_then(Value::as_str).unwrap_or("");
    let query = query.to_owned();
    let page = source.search(&Value::Object(body)).await.map_err(refusal)?;
    let rendering = render_page(&page, &query);
    Ok((page, rendering))
}

async fn list_categories(source: &dyn Source, args: Option<&Value>) -> Outcome {
    let allowed: Vec<&str> = ["query"].into_iter().chain(FILTERS).collect();
    let mut body = arguments(args, LIST_CATEGORIES, &allowed)?;
    body.insert("facets".to_owned(), json!(true));
    body.insert("limit".to_owned(), json!(1));
    let page = source.search(&Value::Object(body)).await.map_err(refusal)?;
    let facets = &page["facets"];
    let answer = json!({
        "total": page["total"],
        "category": facets["category"],
        "tags": facets["tags"],
        "payment_model": facets["payment_model"],
        "health": facets["health"],
    });
    let rendering = render_facets(&answer);
    Ok((answer, rendering))
}

/// The `agent` argument: an id or package name.
fn agent_argument(args: Option<&Value>, tool: &str) -> Result<String, String> {
    let object = arguments(args, tool, &["agent"])?;
    match object.get("agent") {
        Some(Value::String(agent)) if !agent.trim().is_empty() => Ok(agent.trim().to_owned()),
        Some(Value::String(_)) => Err(format!("{tool}: agent must not be empty")),
        Some(_) => Err(format!("{tool}: agent must be a string")),
        None => Err(format!(
            "{tool}: agent is required (an id such as agt_… or a package name such as com.example.weather)"
        )),
    }
}

async fn get_agent(source: &dyn Source, args: Option<&Value>) -> Outcome {
    let agent = agent_argument(args, GET_AGENT)?;
    let record = source.record(&agent).await.map_err(refusal)?;
    let rendering = render_record(&record);
    Ok((record, rendering))
}

async fn get_agent_card(source: &dyn Source, args: Option<&Value>) -> Outcome {
    let agent = agent_argument(args, GET_AGENT_CARD)?;
    let record = source.record(&agent).await.map_err(refusal)?;
    let package = str_of(&record, "package_name");
    let connect = connect(&record, source.base_url());
    let mut answer = json!({
        "id": record["id"],
        "package_name": package,
        "name": record["name"],
    });
    if has_mcp(&record) {
        answer["server_json"] = source.server_json(package).await.map_err(refusal)?;
    }
    // Every agent has a card here; one that speaks only MCP is shown its server.json.
    if has_a2a(&record) || !has_mcp(&record) {
        answer["a2a_card"] = source.card(package).await.map_err(refusal)?;
    }
    answer["connect"] = connect;
    let rendering = render_connect(&answer);
    Ok((answer, rendering))
}

fn str_of<'a>(value: &'a Value, key: &str) -> &'a str {
    value.get(key).and_then(Value::as_str).unwrap_or_default()
}

fn list_of<'a>(value: &'a Value, key: &str) -> &'a [Value] {
    value
        .get(key)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// Whether a public record lists an A2A endpoint.
pub fn has_a2a(record: &Value) -> bool {
    !list_of(record, "interfaces").is_empty() || record.get("url").is_some_and(Value::is_string)
}

/// Whether a public record lists an MCP remote or package.
pub fn has_mcp(record: &Value) -> bool {
    !list_of(record, "remotes").is_empty() || !list_of(record, "packages").is_empty()
}

/// How to reach an agent, from its public record.
fn connect(record: &Value, base_url: &str) -> Value {
    let package = str_of(record, "package_name");
    let card_url = record
        .get("manifest_url")
        .and_then(Value::as_str)
        .map_or_else(
            || format!("{base_url}/public/agents/resolve/{package}"),
            str::to_owned,
        );
    let mut a2a: Vec<Value> = list_of(record, "interfaces").to_vec();
    if let (true, Some(url)) = (a2a.is_empty(), record.get("url").and_then(Value::as_str)) {
        a2a.push(json!({"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}));
    }
    let packages: Vec<Value> = list_of(record, "packages")
        .iter()
        .map(|package| {
            let mut out = package.clone();
            if let (Some((command, args)), Value::Object(object)) = (run_command(package), &mut out)
            {
                object.insert("command".to_owned(), json!(command));
                object.insert("args".to_owned(), json!(args));
            }
            out
        })
        .collect();
    let mut connect = json!({
        "a2a": a2a,
        "card_url": card_url,
        "mcp_remotes": list_of(record, "remotes"),
        "mcp_packages": packages,
    });
    if let Some(repository) = record.get("repository").filter(|r| r.is_object()) {
        connect["repository"] = repository.clone();
    }
    connect
}

/// The command and arguments that run a package, for the registries whose runners are well
/// known (npm, PyPI, OCI images).
fn run_command(package: &Value) -> Option<(&'static str, Vec<String>)> {
    let identifier = str_of(package, "identifier");
    if identifier.is_empty() {
        return None;
    }
    let version = package
        .get("version")
        .and_then(Value::as_str)
        .filter(|version| !version.is_empty() && *version != "latest");
    match str_of(package, "registry_type") {
        "npm" => Some((
            "npx",
            vec![
                "-y".to_owned(),
                version.map_or_else(|| identifier.to_owned(), |v| format!("{identifier}@{v}")),
            ],
        )),
        "pypi" => Some((
            "uvx",
            vec![version.map_or_else(|| identifier.to_owned(), |v| format!("{identifier}=={v}"))],
        )),
        "oci" => Some((
            "docker",
            ["run", "-i", "--rm"]
                .into_iter()
                .map(str::to_owned)
                .chain([
                    version.map_or_else(|| identifier.to_owned(), |v| format!("{identifier}:{v}"))
                ])
                .collect(),
        )),
        _ => None,
    }
}

/// At most `max` characters, cut with `…`.
fn short(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let cut: String = text.chars().take(max - 1).collect();
    format!("{}…", cut.trim_end())
}

fn render_page(page: &Value, query: &str) -> String {
    let agents = list_of(page, "agents");
    let total = page["total"].as_u64().unwrap_or(agents.len() as u64);
    let mut lines = vec![crate::wire::found_summary(
        agents.len(),
        usize::try_from(total).unwrap_or(usize::MAX),
        query,
    )];
    for (rank, agent) in agents.iter().enumerate() {
        lines.push(format!(
            "{}. {} ({}): {}",
            rank + 1,
            str_of(agent, "name"),
            str_of(agent, "package_name"),
            short(str_of(agent, "description"), 160)
        ));
    }
    if page["next_cursor"].is_string() {
        lines.push("More: call again with cursor = next_cursor.".to_owned());
    }
    lines.join("\n")
}

fn render_record(record: &Value) -> String {
    let mut lines = vec![format!(
        "{} ({}) version {}: {}",
        str_of(record, "name"),
        str_of(record, "package_name"),
        str_of(record, "version"),
        short(str_of(record, "description"), 300)
    )];
    let capabilities: Vec<&str> = list_of(record, "capabilities")
        .iter()
        .map(|capability| str_of(capability, "name"))
        .collect();
    if !capabilities.is_empty() {
        lines.push(format!("Capabilities: {}", capabilities.join(", ")));
    }
    if let Some(url) = record.get("url").and_then(Value::as_str) {
        lines.push(format!("A2A endpoint: {url}"));
    }
    lines.extend(list_of(record, "remotes").iter().map(remote_line));
    for package in list_of(record, "packages") {
        lines.push(format!(
            "MCP package ({}): {}",
            str_of(package, "registry_type"),
            str_of(package, "identifier")
        ));
    }
    lines.join("\n")
}

fn remote_line(remote: &Value) -> String {
    format!(
        "MCP remote ({}): {}",
        str_of(remote, "type"),
        str_of(remote, "url")
    )
}

fn render_connect(answer: &Value) -> String {
    let connect = &answer["connect"];
    let mut lines = vec![format!(
        "{} ({}): card at {}",
        str_of(answer, "name"),
        str_of(answer, "package_name"),
        str_of(connect, "card_url")
    )];
    for interface in list_of(connect, "a2a") {
        lines.push(format!(
            "A2A {} {}: {}",
            str_of(interface, "protocolBinding"),
            str_of(interface, "protocolVersion"),
            str_of(interface, "url")
        ));
    }
    lines.extend(list_of(connect, "mcp_remotes").iter().map(remote_line));
    for package in list_of(connect, "mcp_packages") {
        let run = match package.get("command").and_then(Value::as_str) {
            Some(command) => {
                let args: Vec<&str> = list_of(package, "args")
                    .iter()
                    .filter_map(Value::as_str)
                    .collect();
                format!("run: {command} {}", args.join(" "))
            }
            None => format!("{} package", str_of(package, "registry_type")),
        };
        lines.push(format!(
            "MCP package {} ({run})",
            str_of(package, "identifier")
        ));
    }
    if lines.len() == 1 {
        lines.push("No endpoint or package is listed.".to_owned());
    }
    lines.join("\n")
}

fn render_facets(answer: &Value) -> String {
    let top = |key: &str| -> String {
        let mut counts: Vec<(&String, u64)> = answer[key]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(name, count)| (name, count.as_u64().unwrap_or(0)))
            .collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        let shown: Vec<String> = counts
            .iter()
            .take(20)
            .map(|(name, count)| format!("{name} ({count})"))
            .collect();
        if shown.is_empty() {
            "none".to_owned()
        } else {
            shown.join(", ")
        }
    };
    format!(
        "{} agents.\nCategories: {}\nTags: {}\nPayment models: {}\nHealth: {}",
        answer["total"].as_u64().unwrap_or(0),
        top("category"),
        top("tags"),
        top("payment_model"),
        top("health")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tool_list_is_fixed_and_drops_output_schemas_for_old_clients() {
        let new = list(Revision::V2025_11_25);
        let names: Vec<&str> = new["tools"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|tool| tool["name"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(
            names,
            [SEARCH_AGENTS, GET_AGENT, GET_AGENT_CARD, LIST_CATEGORIES]
        );
        for tool in new["tools"].as_array().into_iter().flatten() {
            assert_eq!(tool["inputSchema"]["type"], "object");
            assert_eq!(tool["outputSchema"]["type"], "object");
        }
        let old = list(Revision::V2025_03_26);
        assert!(
            old["tools"]
                .as_array()
                .into_iter()
                .flatten()
                .all(|tool| tool.get("outputSchema").is_none())
        );
    }

    #[test]
    fn packages_get_the_command_that_runs_them() {
        let run = |package: Value| run_command(&package);
        assert_eq!(
            run(json!({"registry_type": "npm", "identifier": "@acme/weather", "version": "1.2.0"})),
            Some((
                "npx",
                vec!["-y".to_owned(), "@acme/weather@1.2.0".to_owned()]
            ))
        );
        assert_eq!(
            run(json!({"registry_type": "pypi", "identifier": "weather-mcp"})),
            Some(("uvx", vec!["weather-mcp".to_owned()]))
        );
        assert_eq!(
            run(json!({"registry_type": "oci", "identifier": "ghcr.io/acme/w", "version": "2"}))
                .map(|(_, args)| args.join(" ")),
            Some("run -i --rm ghcr.io/acme/w:2".to_owned())
        );
        assert_eq!(
            run(json!({"registry_type": "cargo", "identifier": "x"})),
            None
        );
    }

    #[test]
    fn unknown_arguments_are_named_with_the_ones_taken() {
        let error = arguments(Some(&json!({"q": "x"})), SEARCH_AGENTS, &["query"])
            .expect_err("q is not an argument");
        assert!(error.contains("'q'") && error.contains("query"), "{error}");
        assert!(arguments(Some(&json!([1])), SEARCH_AGENTS, &["query"]).is_err());
        assert_eq!(arguments(None, SEARCH_AGENTS, &[]), Ok(Map::new()));
    }
}
