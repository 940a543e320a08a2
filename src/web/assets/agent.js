// The agent page: the record and card from the public API, rendered as capabilities with their
// input schemas, payment terms, details, the card as JSON and copyable client snippets.
import { el, api, showError, pretty, when, percent, agentBadges, enableCopyButtons, enableTabs } from "./common.js";
import { exampleInput } from "./schema-form.js";

const article = document.getElementById("agent");
const pkg = article.dataset.package;
const errorBox = document.getElementById("agent-error");
const path = encodeURIComponent(pkg);

enableCopyButtons();
enableTabs(document.querySelector('[aria-label="Client snippets"]'));

function schemaTable(schema) {
  const properties = schema && typeof schema === "object" && schema.properties;
  if (!properties || typeof properties !== "object" || !Object.keys(properties).length) return null;
  const required = new Set(Array.isArray(schema.required) ? schema.required : []);
  return el("table", { class: "params" },
    el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Field"), el("th", { scope: "col" }, "Type"), el("th", { scope: "col" }, "Description"))),
    el("tbody", {}, Object.entries(properties).map(([name, spec]) => {
      const type = spec && (Array.isArray(spec.enum) ? `${spec.type || "enum"}: ${spec.enum.join(" | ")}` : spec.type);
      return el("tr", {},
        el("td", {}, el("code", { text: name }), required.has(name) ? el("span", { class: "req", title: "required" }, " *") : null),
        el("td", {}, type || "any"),
        el("td", {}, (spec && spec.description) || ""));
    })));
}

/** Whether an A2A client can call the agent: it lists an A2A interface. */
const callable = (record) => Array.isArray(record.interfaces) && record.interfaces.length > 0;

function renderCapabilities(record) {
  const box = document.getElementById("capabilities");
  box.replaceChildren();
  if (!record.capabilities.length) {
    box.append(el("p", { class: "muted" }, "This agent lists no capabilities."));
    return;
  }
  for (const cap of record.capabilities) {
    const tryHref = `/playground?agent=${encodeURIComponent(record.package_name)}&capability=${encodeURIComponent(cap.name)}`;
    box.append(el("div", { class: "capability" },
      el("div", { class: "panel-head" },
        el("h3", {}, el("code", { text: cap.name })),
        callable(record) ? el("a", { class: "button small", href: tryHref, "aria-label": `Try ${cap.name} in the playground` }, "Try") : null),
      cap.description ? el("p", {}, cap.description) : null,
      schemaTable(cap.input_schema),
      cap.input_schema ? el("details", {},
        el("summary", {}, "Input schema (JSON Schema)"),
        el("pre", { class: "json" }, el("code", { text: pretty(cap.input_schema) }))) : el("p", { class: "hint" }, "No input schema given.")));
  }
}

function renderPayment(record) {
  const box = document.getElementById("payment");
  box.replaceChildren();
  const payment = record.payment;
  if (!payment) {
    box.append(el("p", { class: "muted" }, "Payment terms not stated."));
    return;
  }
  const rails = (payment.rails || []).map((rail) => `${rail.network}:${rail.asset}${rail.protocol ? ` (${rail.protocol})` : ""}`);
  box.append(el("dl", { class: "facts" },
    el("dt", {}, "Model"), el("dd", {}, payment.model),
    payment.direction ? [el("dt", {}, "Direction"), el("dd", {}, payment.direction)] : null,
    el("dt", {}, "Protocols"), el("dd", {}, (payment.protocols || []).join(", ") || "—"),
    el("dt", {}, "Rails"), el("dd", {}, rails.length ? rails.map((r) => el("code", { text: r })).flatMap((c, i) => (i ? [" ", c] : [c])) : "—")));
}

function renderFacts(record) {
  const facts = document.getElementById("facts");
  const link = (url) => el("a", { href: url, rel: "nofollow noopener" }, url);
  const rows = [
    ["Version", record.version],
    ["Category", record.category],
    ["Audience", record.target],
    ["Tags", record.tags.length ? record.tags.join(", ") : null],
    ["A2A endpoint", record.url && /^https?:/i.test(record.url) ? link(record.url) : record.url],
    [isCardUrl(record.manifest_url) ? "Own card" : "Listed from", record.manifest_url && /^https?:/i.test(record.manifest_url) ? link(record.manifest_url) : record.manifest_url],
    ["Repository", record.repository && /^https?:/i.test(record.repository.url) ? link(record.repository.url) : null],
    ["Health", healthFact(record.health)],
    ["Security", securityFact(record.security)],
    ["Mirrored from", mirroredFact(record.provenance)],
    ["Owner", record.owner],
    ["Published", when(record.published_at)],
    ["Updated", when(record.updated_at)],
    ["Id", el("code", { text: record.id })],
  ].filter(([, value]) => value);
  facts.replaceChildren(...rows.flatMap(([name, value]) => [el("dt", {}, name), el("dd", {}, value)]));
  document.getElementById("agent-badges").replaceChildren(...agentBadges(record));
  renderDeprecation(record);
}

/** What the scanner found in the agent's texts and at its endpoint, one line per finding, and
 * what changed at the endpoint since it was listed; null when there is nothing to say. */
function securityFact(security) {
  if (!security) return null;
  const drift = security.drift;
  const changes = drift && drift.changes;
  const driftLine = changes ? el("p", { class: "drift" },
    el("strong", { text: "Changed since listed: " }),
    `${changes.added_count} added, ${changes.removed_count} removed, ${changes.changed_count} changed, seen ${when(drift.detected_at)}`,
    changes.added.length ? [" (added: ", el("code", { text: changes.added.join(", ") }), ")"] : null) : null;
  if (security.status !== "flagged" && !driftLine) return null;
  const findings = security.findings.length ? el("ul", { class: "findings" }, ...security.findings.map((finding) =>
    el("li", {},
      el("strong", { text: `${finding.severity} · ${finding.rule}` }), " in ",
      el("code", { text: finding.field }), ": ", el("span", { text: finding.excerpt })))) : null;
  return [driftLine, findings].filter(Boolean);
}

/** The publisher's deprecation, above the details: the message, and a link to the successor. */
function renderDeprecation(record) {
  const box = document.getElementById("agent-deprecated");
  const deprecation = record.deprecation;
  if (!deprecation) {
    box.hidden = true;
    return;
  }
  const successor = deprecation.successor
    ? [" Use ", el("a", { href: `/agents/${encodeURIComponent(deprecation.successor)}` }, el("code", { text: deprecation.successor })), " instead."]
    : null;
  box.replaceChildren(el("strong", {}, "Deprecated: "), el("span", { text: deprecation.message }), ...(successor || []));
  box.hidden = false;
}

/** What the liveness prober found, for the details list; null before the first probe. */
function healthFact(health) {
  if (health && health.status === "not_probed") return `Not probed: ${health.detail || "no endpoint"}`;
  if (!health || health.status === "unknown" || !health.checked_at) return null;
  const status = { up: "Up", down: "Down", not_conformant: "Not conformant" }[health.status] || health.status;
  const lines = [`${status}, checked ${when(health.checked_at)}`];
  if (typeof health.latency_ms === "number") lines.push(`${health.latency_ms} ms`);
  if (health.uptime_7d !== null) lines.push(`${percent(health.uptime_7d)} over 7 days, ${percent(health.uptime_30d)} over 30`);
  if (health.last_ok_at && health.status !== "up") lines.push(`last up ${when(health.last_ok_at)}`);
  if (health.detail) lines.push(health.detail);
  return lines.join(" · ");
}

/** Where a mirrored agent came from, for the details list; null for an agent published here. */
function mirroredFact(provenance) {
  if (!provenance) return null;
  const lines = [provenance.source, `as ${provenance.upstream_id}`, `fetched ${when(provenance.fetched_at)}`];
  if (provenance.status) lines.push(provenance.status);
  return lines.join(" · ");
}

/** Whether a URL looks like an agent card rather than, say, a repository page. */
function isCardUrl(url) {
  return Boolean(url) && /(agent-card|agent)\.json($|[?#])|\/\.well-known\//i.test(url);
}

/** The command that runs a package locally, by its registry. */
function packageCommand(pkg) {
  const at = (sep) => (pkg.version ? `${sep}${pkg.version}` : "");
  switch (pkg.registry_type) {
    case "npm": return { command: "npx", args: ["-y", `${pkg.identifier}${at("@")}`] };
    case "pypi": return { command: "uvx", args: [`${pkg.identifier}${at("==")}`] };
    case "oci": return { command: "docker", args: ["run", "-i", "--rm", ...(pkg.environment_variables || []).flatMap((v) => ["-e", v.name]), `${pkg.identifier}${at(":")}`] };
    case "nuget": return { command: "dnx", args: [`${pkg.identifier}${at("@")}`, "--yes"] };
    case "cargo": return { command: pkg.identifier, args: [], install: `cargo install ${pkg.identifier}${pkg.version ? ` --version ${pkg.version}` : ""}` };
    default: return null;
  }
}

/** MCP client configuration and install lines for what the agent lists; A2A snippets only for A2A agents. */
function renderConnect(record) {
  const section = document.getElementById("connect");
  const body = document.getElementById("connect-body");
  const call = document.getElementById("call");
  const tryLink = document.getElementById("try-link");
  call.hidden = !callable(record);
  if (tryLink) tryLink.hidden = !callable(record);
  const name = record.package_name.split(".").pop() || record.package_name;
  const parts = [];
  for (const remote of record.remotes || []) {
    const config = { mcpServers: { [name]: { type: remote.type === "sse" ? "sse" : "http", url: remote.url } } };
    parts.push(el("h3", {}, `MCP server at ${remote.type === "sse" ? "an SSE" : "a streamable HTTP"} endpoint`),
      el("div", { class: "snippet" }, el("pre", { class: "json" }, el("code", { text: pretty(config) })), el("button", { type: "button", class: "copy small" }, "Copy")));
  }
  for (const pkg of record.packages || []) {
    const run = packageCommand(pkg);
    if (!run) continue;
    const env = Object.fromEntries((pkg.environment_variables || []).map((v) => [v.name, v.is_secret ? "<secret>" : (v.description || "")]));
    const server = { command: run.command, args: run.args };
    if (Object.keys(env).length) server.env = env;
    parts.push(el("h3", {}, `MCP server from ${pkg.registry_type}: `, el("code", { text: pkg.identifier })),
      run.install ? el("p", {}, "Install it first: ", el("code", { text: run.install })) : null,
      el("div", { class: "snippet" }, el("pre", { class: "json" }, el("code", { text: pretty({ mcpServers: { [name]: server } }) })), el("button", { type: "button", class: "copy small" }, "Copy")));
  }
  if (parts.length) parts.unshift(el("p", { class: "hint" }, "Add this to your MCP client's configuration (the mcpServers section)."));
  if (!parts.length && !callable(record)) {
    parts.push(el("p", { class: "muted" }, record.repository
      ? ["This agent lists no endpoint or package. Its source: ", el("a", { href: record.repository.url, rel: "nofollow noopener" }, record.repository.url)]
      : "This agent lists no endpoint, package or repository: there is no way to reach it from here."));
  }
  body.replaceChildren(...parts.filter(Boolean));
  section.hidden = parts.length === 0;
}

const shellQuote = (text) => `'${text.replaceAll("'", "'\\''")}'`;

function renderSnippets(record, card) {
  const cap = record.capabilities[0];
  const skill = cap ? cap.name : "SKILL";
  const input = cap ? exampleInput(cap.input_schema) : {};
  const jsonrpc = (card && Array.isArray(card.supportedInterfaces) &&
    card.supportedInterfaces.find((i) => (i.protocolBinding || "JSONRPC") === "JSONRPC")) || null;
  const endpoint = (jsonrpc && jsonrpc.url) || record.url;
  if (!endpoint) return;
  const cardUrl = `${location.origin}/public/agents/resolve/${path}`;
  const body = {
    jsonrpc: "2.0", id: 1, method: "SendMessage",
    params: {
      message: { messageId: "msg-1", role: "ROLE_USER", parts: [{ data: input }] },
      metadata: { skill_id: skill },
    },
  };
  const curl = [
    "# The agent card",
    `curl -s ${shellQuote(cardUrl)}`,
    "",
    `# Call ${skill} over A2A (JSON-RPC SendMessage)`,
    `curl -s -X POST ${shellQuote(endpoint)} \\`,
    `  -H "Authorization: Bearer $TOKEN" -H 'Content-Type: application/json' -H 'A2A-Version: 1.0' \\`,
    `  -d ${shellQuote(JSON.stringify(body))}`,
  ].join("\n");
  const python = [
    "# pip install 'a2a-sdk[http-server]>=1' httpx",
    "import asyncio, os",
    "import httpx",
    "from a2a.client import A2ACardResolver, ClientConfig, ClientFactory",
    "from a2a.helpers import new_data_message",
    "from a2a.types import Role, SendMessageRequest",
    "",
    "async def main():",
    '    headers = {"Authorization": f"Bearer {os.environ[\'TOKEN\']}"}',
    "    async with httpx.AsyncClient(headers=headers, timeout=30) as http:",
    `        resolver = A2ACardResolver(http, ${JSON.stringify(location.origin)}, agent_card_path=${JSON.stringify(`/public/agents/resolve/${path}`)})`,
    "        card = await resolver.get_agent_card()",
    "        client = ClientFactory(ClientConfig(httpx_client=http)).create(card)",
    `        request = SendMessageRequest(message=new_data_message(${pyLiteral(input)}, role=Role.ROLE_USER))`,
    `        request.metadata.update({"skill_id": ${JSON.stringify(skill)}})`,
    "        async for response in client.send_message(request):",
    "            print(response)",
    "",
    "asyncio.run(main())",
  ].join("\n");
  const js = [
    `const response = await fetch(${JSON.stringify(endpoint)}, {`,
    '  method: "POST",',
    "  headers: {",
    '    "Content-Type": "application/json",',
    '    "A2A-Version": "1.0",',
    "    Authorization: `Bearer ${TOKEN}`,",
    "  },",
    `  body: JSON.stringify(${JSON.stringify(body, null, 2).replaceAll("\n", "\n  ")}),`,
    "});",
    "const { result, error } = await response.json();",
    "console.log(error ?? result.message.parts);",
  ].join("\n");
  for (const [id, text] of [["panel-curl", curl], ["panel-python", python], ["panel-js", js]]) {
    document.querySelector(`#${id} code`).textContent = text;
  }
}

/** A JSON value as a Python literal (true/false/null differ). */
function pyLiteral(value) {
  if (value === null) return "None";
  if (value === true) return "True";
  if (value === false) return "False";
  if (Array.isArray(value)) return `[${value.map(pyLiteral).join(", ")}]`;
  if (typeof value === "object") return `{${Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}: ${pyLiteral(v)}`).join(", ")}}`;
  return JSON.stringify(value);
}

async function load() {
  const [record, card] = await Promise.allSettled([
    api("GET", `/public/agents/${path}`),
    api("GET", `/public/agents/resolve/${path}`),
  ]);
  if (record.status === "rejected") {
    showError(errorBox, record.reason, "Cannot load this agent");
    for (const id of ["capabilities", "payment"]) document.getElementById(id).replaceChildren();
    document.getElementById("card-json").textContent = "";
    return;
  }
  renderCapabilities(record.value);
  renderPayment(record.value);
  renderFacts(record.value);
  renderConnect(record.value);
  const cardJson = document.getElementById("card-json");
  if (card.status === "fulfilled") cardJson.textContent = pretty(card.value);
  else cardJson.textContent = `The card could not be loaded: ${card.reason.message}`;
  renderSnippets(record.value, card.status === "fulfilled" ? card.value : null);
}

load();
