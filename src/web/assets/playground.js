// The playground: a session in which agents are discovered and their capabilities
// run, with a form generated from each capability's input schema and a history of every step.
import { el, api, showError, hideError, pretty, when, debounce, bindTokenPanel, agentBadges } from "./common.js";
import { buildForm } from "./schema-form.js";

const SESSION_KEY = "agent-registry.playground.session";

const $ = (id) => document.getElementById(id);
const errorBox = $("pg-error");
const sessionStatus = $("session-status");
const startButton = $("session-start");
const endButton = $("session-end");
const agentInput = $("run-agent");
const capabilitySelect = $("run-capability");
const fieldset = $("input-fields");
const rawToggle = $("raw-json");
const history = $("history");

const token = bindTokenPanel(() => restoreSession());
let session = null;
let record = null;
let readInput = null;
let localSteps = [];

const storedSession = () => { try { return localStorage.getItem(SESSION_KEY); } catch { return null; } };
const storeSession = (id) => {
  try { if (id) localStorage.setItem(SESSION_KEY, id); else localStorage.removeItem(SESSION_KEY); } catch { /* no storage */ }
};
const sessionPath = (suffix = "") => `/api/playground/session/${encodeURIComponent(session.session_id)}${suffix}`;

function requireToken() {
  if (token()) return true;
  showError(errorBox, new Error("Paste an API token with scope playground first."));
  $("token").focus();
  return false;
}

function showSession() {
  startButton.hidden = Boolean(session);
  endButton.hidden = !session;
  $("session-name").disabled = Boolean(session);
  sessionStatus.replaceChildren(session
    ? el("span", {}, "Session ", el("code", { text: session.session_id }), session.name ? ` “${session.name}”` : "",
      session.expires_at ? ` · expires ${when(session.expires_at)} if idle` : "")
    : "No session yet. One starts when you discover or run.");
}

async function startSession() {
  const name = $("session-name").value.trim();
  session = await api("POST", "/api/playground/session", { token: token(), body: name ? { name } : {} });
  storeSession(session.session_id);
  localSteps = [];
  renderHistory([]);
  showSession();
}

async function ensureSession() {
  if (!session) await startSession();
}

async function restoreSession() {
  const id = storedSession();
  if (!id || !token()) {
    session = null;
    showSession();
    return;
  }
  try {
    session = { session_id: id };
    const full = await api("GET", sessionPath(), { token: token() });
    session = { ...full, session_id: full.session_id || full.id || id };
    localSteps = stepsOf(full) || [];
    renderHistory(localSteps);
  } catch (err) {
    session = null;
    storeSession(null);
    if (err.status !== 404) showError(errorBox, err, "Cannot restore the session");
  }
  showSession();
}

/** A step's agent: a package name, or `{id, package_name, name}`. */
function agentName(agent) {
  if (agent && typeof agent === "object") return agent.package_name || agent.name || agent.id || "?";
  return agent || "?";
}

/** Mark the generated controls named by `input.<field>` validation errors from the API. */
function markInputErrors(errors) {
  for (const error of errors || []) {
    const name = String(error.field || "").replace(/^input\./, "").split(/[.[]/)[0];
    const control = fieldset.querySelector(`[name="${CSS.escape(name)}"]`);
    if (!control) continue;
    control.setAttribute("aria-invalid", "true");
    const note = control.closest(".field")?.querySelector(".error");
    if (note) {
      note.textContent = `${name} ${error.message || "is invalid"}`;
      note.hidden = false;
    }
  }
}

/** The history array of a session body, whatever the server calls it. */
function stepsOf(body) {
  if (!body || typeof body !== "object") return null;
  for (const key of ["history", "steps"]) if (Array.isArray(body[key])) return body[key];
  return null;
}

async function refreshHistory() {
  try {
    const full = await api("GET", sessionPath(), { token: token() });
    const steps = stepsOf(full);
    if (steps) localSteps = steps;
    if (full.expires_at) session.expires_at = full.expires_at;
    showSession();
  } catch { /* keep the local history */ }
  renderHistory(localSteps);
}

function renderHistory(steps) {
  $("history-empty").hidden = steps.length > 0;
  history.replaceChildren(...[...steps].reverse().map((step, i) => {
    const kind = step.kind || step.type || (step.capability ? "execute" : "discover");
    const status = step.status || (step.error ? "failed" : "completed");
    const duration = step.duration_ms ?? step.durationMs;
    const at = step.at || step.created_at || step.started_at || step.timestamp;
    const title = kind === "discover"
      ? el("span", {}, "Discover ", el("q", {}, step.query ?? step.input?.query ?? ""))
      : el("span", {}, el("code", { text: agentName(step.agent) }), " → ", el("code", { text: step.capability || "?" }));
    const agents = kind === "discover" && (step.agents || step.output?.agents || step.result?.agents);
    return el("li", { "aria-label": `Step ${steps.length - i}` },
      el("div", { class: "step-head" },
        el("span", { class: `badge ${status}` }, status),
        el("strong", {}, title),
        el("span", { class: "time" }, [duration !== undefined ? `${duration} ms` : null, at ? when(at) : null].filter(Boolean).join(" · "))),
      step.input && kind !== "discover" ? el("details", {}, el("summary", {}, "Input"), el("pre", {}, el("code", { text: pretty(step.input) }))) : null,
      step.summary ? el("p", {}, step.summary) : null,
      step.transport ? el("p", { class: "hint" }, `Called ${step.transport.replace("_", "-")}${step.endpoint ? ` at ${step.endpoint}` : ""}`) : null,
      step.error ? el("p", { class: "alert" }, step.error.message || pretty(step.error), step.error.code ? [" ", el("code", { text: step.error.code })] : null) : null,
      Array.isArray(agents) ? el("p", { class: "muted" }, `${agents.length} ${agents.length === 1 ? "agent" : "agents"}: ${agents.map((a) => a.package_name || a).join(", ")}`) : null,
      step.output !== undefined && step.output !== null && kind !== "discover"
        ? el("pre", { class: "json" }, el("code", { text: pretty(step.output) })) : null);
  }));
}

// ---- discover ----

$("discover-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  if (!requireToken()) return;
  hideError(errorBox);
  const query = $("discover-query").value.trim();
  const list = $("discovered");
  try {
    await ensureSession();
    const started = performance.now();
    const found = await api("POST", sessionPath("/discover"), { token: token(), body: { query, limit: 10 } });
    const agents = Array.isArray(found) ? found : (found.agents || []);
    list.replaceChildren(...(agents.length ? agents.map((agent) => el("li", {},
      el("div", { class: "who" }, el("strong", {}, agent.name), el("code", { text: agent.package_name }),
        el("span", { class: "badges" }, agentBadges(agent))),
      agent.url
        ? el("button", { type: "button", class: "small secondary", dataset: { use: agent.package_name }, "aria-label": `Use ${agent.name}` }, "Use")
        : el("span", { class: "hint", title: "It lists no A2A endpoint, so the playground cannot call it" }, "No A2A endpoint")))
      : [el("li", { class: "muted" }, "No agents found. Try other words.")]));
    $("agent-options").replaceChildren(...agents.filter((a) => a.url).map((a) => el("option", { value: a.package_name }, a.name)));
    localSteps.push({ kind: "discover", query, agents, duration_ms: Math.round(performance.now() - started), at: new Date().toISOString() });
    await refreshHistory();
  } catch (err) {
    showError(errorBox, err, "Discover failed");
  }
});

$("discovered").addEventListener("click", (event) => {
  const button = event.target.closest("button[data-use]");
  if (!button) return;
  agentInput.value = button.dataset.use;
  loadAgent().then(() => capabilitySelect.focus());
});

// ---- choose an agent and a capability ----

// The agent the capability list and the form were made for (its package name, lowercase, as
// lookups ignore case), and the load that made them. Choosing the same agent again (the field's
// change on blur, a debounced keystroke, "Use", the datalist) keeps the form and what was typed.
let agentKey = null;
let agentLoad = Promise.resolve();
let loads = 0;

/** Show the capabilities and input form of the agent named in the field; resolves when they are shown. */
function loadAgent(preferred) {
  const pkg = agentInput.value.trim();
  const key = pkg.toLowerCase();
  if (key === agentKey) {
    if (preferred) agentLoad = agentLoad.then(() => selectCapability(preferred));
    return agentLoad;
  }
  agentKey = key;
  agentLoad = fetchAgent(pkg, ++loads, preferred);
  return agentLoad;
}

async function fetchAgent(pkg, load, preferred) {
  record = null;
  capabilitySelect.replaceChildren(el("option", { value: "" }, pkg ? "Loading…" : "Choose an agent first"));
  capabilitySelect.disabled = true;
  if (!pkg) return renderInput();
  let found;
  try {
    found = await api("GET", `/public/agents/${encodeURIComponent(pkg)}`);
  } catch (err) {
    if (load !== loads) return; // another agent was chosen meanwhile
    agentKey = null; // so choosing it again tries again
    capabilitySelect.replaceChildren(el("option", { value: "" }, err.status === 404 ? "No published agent with that name" : "Cannot load the agent"));
    return renderInput();
  }
  if (load !== loads) return;
  record = found;
  const caps = record.capabilities || [];
  capabilitySelect.replaceChildren(...(caps.length
    ? caps.map((c) => el("option", { value: c.name }, c.name))
    : [el("option", { value: "" }, "This agent lists no capabilities")]));
  capabilitySelect.disabled = !caps.length;
  if (preferred && caps.some((c) => c.name === preferred)) capabilitySelect.value = preferred;
  renderInput();
}

/** Switch to capability `name` of the loaded agent, if it has one by that name and it is not already chosen. */
function selectCapability(name) {
  if (!record || capabilitySelect.value === name || !(record.capabilities || []).some((c) => c.name === name)) return;
  capabilitySelect.value = name;
  renderInput();
}

function selectedCapability() {
  return record && (record.capabilities || []).find((c) => c.name === capabilitySelect.value);
}

function renderInput() {
  const cap = selectedCapability();
  $("capability-description").textContent = cap ? (cap.description || "") : "";
  if (!cap) {
    const legend = fieldset.querySelector("legend");
    fieldset.replaceChildren(legend, el("p", { class: "muted" }, "Choose a capability to see its input."));
    readInput = null;
    return;
  }
  readInput = buildForm(fieldset, cap.input_schema, { raw: rawToggle.checked });
}

agentInput.addEventListener("input", debounce(() => loadAgent(), 300));
agentInput.addEventListener("change", () => loadAgent());
capabilitySelect.addEventListener("change", renderInput);
rawToggle.addEventListener("change", () => {
  const cap = selectedCapability();
  if (!cap) return;
  let current = {};
  try { current = readInput ? readInput() : {}; } catch { current = {}; }
  readInput = buildForm(fieldset, cap.input_schema, { raw: rawToggle.checked, initial: current });
});

// ---- run ----

$("run-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  hideError(errorBox);
  if (!requireToken()) return;
  const run = $("run");
  if (run.disabled) return;
  // The agent named in the field may still be loading (its name was just typed or chosen, or
  // the page was opened with ?agent=): run once it is shown rather than refuse.
  run.disabled = true;
  try { await loadAgent(); } finally { run.disabled = false; }
  const cap = selectedCapability();
  if (!cap || !readInput) {
    showError(errorBox, new Error("Choose an agent and one of its capabilities."));
    (record ? capabilitySelect : agentInput).focus();
    return;
  }
  let input;
  try { input = readInput(); } catch (err) {
    showError(errorBox, err, "Check the input");
    return;
  }
  run.disabled = true;
  run.textContent = "Running…";
  $("history-status").textContent = `Running ${cap.name}…`;
  try {
    await ensureSession();
    const body = { agent: record.package_name, capability: cap.name, input };
    const result = await api("POST", sessionPath("/execute"), { token: token(), body });
    localSteps.push({ kind: "execute", ...body, ...result, at: new Date().toISOString() });
    await refreshHistory();
    $("history-status").textContent = `${cap.name} ${result.status} in ${result.duration_ms} ms`;
  } catch (err) {
    markInputErrors(err.errors);
    showError(errorBox, err, "Run failed");
    $("history-status").textContent = "Run failed";
  } finally {
    run.disabled = false;
    run.textContent = "Run";
  }
});

startButton.addEventListener("click", async () => {
  hideError(errorBox);
  if (!requireToken()) return;
  try { await startSession(); } catch (err) { showError(errorBox, err, "Cannot start a session"); }
});

endButton.addEventListener("click", async () => {
  hideError(errorBox);
  try {
    await api("DELETE", sessionPath(), { token: token() });
  } catch (err) {
    if (err.status !== 404) {
      showError(errorBox, err, "Cannot end the session");
      return;
    }
  }
  session = null;
  storeSession(null);
  localSteps = [];
  renderHistory([]);
  showSession();
});

const params = new URLSearchParams(location.search);
if (params.get("agent")) {
  agentInput.value = params.get("agent");
  loadAgent(params.get("capability"));
}
restoreSession();
