// The owner's console: list your agents (every state), publish from a card URL or a form, go live,
// unpublish and delete. Errors show the API's problem+json detail and per-field messages.
import { el, api, showError, hideError, when, bindTokenPanel, enableTabs, enableCopyButtons, setCsrfToken } from "./common.js";

const $ = (id) => document.getElementById(id);
const errorBox = $("console-error");
const status = $("console-status");
const rows = $("agents");
const more = $("agents-more");

const token = bindTokenPanel(() => { loadOrgs(); loadAgents(); });
let cursor = null;
// Who is signed in to this browser (GET /api/me with the session cookie), or null.
let session = null;

enableTabs(document.querySelector('[aria-label="How to publish"]'));

function announce(message) {
  status.textContent = message;
}

function explain(err) {
  if (err.status === 401) err.message = `${err.message} — ${session ? "sign in again" : "check the token"}.`;
  if (err.status === 403) err.message = `${err.message} — the token needs scope agents:write.`;
  return err;
}

function row(agent) {
  const live = agent.state === "ACTIVE";
  const id = encodeURIComponent(agent.id);
  const action = (label, className, handler) =>
    el("button", { type: "button", class: `small ${className}`, "aria-label": `${label} ${agent.package_name}`, onclick: handler }, label);
  return el("tr", { dataset: { package: agent.package_name } },
    el("td", {},
      live ? el("a", { href: `/agents/${encodeURIComponent(agent.package_name)}` }, agent.name) : el("strong", {}, agent.name),
      el("br"), el("code", { text: agent.package_name })),
    el("td", {}, el("span", { class: `badge state-${agent.state.toLowerCase()}` }, agent.state),
      agent.visibility === "unlisted" ? [" ", el("span", { class: "badge" }, "Unlisted")] : null,
      agent.visibility === "private" ? [" ", el("span", { class: "badge" }, "Private")] : null,
      agent.owner && agent.owner.startsWith("org:") ? [el("br"), el("small", { class: "muted" }, agent.owner.slice(4))] : null),
    el("td", {}, agent.verification_level === "domain_verified" ? el("span", { class: "badge verified" }, "✓ Verified") : "Unverified"),
    el("td", {}, when(agent.updated_at)),
    el("td", { class: "actions" },
      live
        ? action("Unpublish", "ghost", () => transition(agent, `/api/agents/${id}/unpublish`, "unpublished (now STAGE)"))
        : action("Go live", "secondary", () => transition(agent, `/api/agents/${id}/go-live`, "is live")),
      action("History", "ghost", () => showHistory(agent)),
      action("Delete", "ghost danger", () => remove(agent))));
}

/** The agent's audit trail: who did what, when, and what was refused. */
async function showHistory(agent) {
  hideError(errorBox);
  try {
    const page = await api("GET", `/api/audit?agent=${encodeURIComponent(agent.id)}&limit=50`, { token: token() });
    $("history-agent").textContent = agent.package_name;
    $("history-entries").replaceChildren(...page.entries.map((entry) =>
      el("li", { class: entry.outcome === "refused" ? "refused" : "" },
        el("time", { datetime: entry.at }, when(entry.at)), " ",
        el("code", { text: entry.action }), ` by ${entry.actor}`,
        entry.version ? ` (version ${entry.version})` : "",
        entry.reason ? ` — ${entry.reason}` : "")));
    $("history").hidden = false;
    $("history-heading").scrollIntoView({ block: "nearest" });
  } catch (err) {
    showError(errorBox, explain(err), `Cannot read the history of ${agent.package_name}`);
  }
}

async function loadAgents({ append = false } = {}) {
  hideError(errorBox);
  if (!token() && !session) {
    rows.replaceChildren();
    $("agents-empty").hidden = false;
    $("agents-empty").textContent = "Sign in or paste a token to see your agents.";
    more.hidden = true;
    return;
  }
  const query = new URLSearchParams({ limit: "50" });
  if (append && cursor) query.set("cursor", cursor);
  try {
    const page = await api("GET", `/api/agents?${query}`, { token: token() });
    if (!append) rows.replaceChildren();
    rows.append(...page.agents.map(row));
    cursor = page.next_cursor;
    more.hidden = !cursor;
    $("agents-empty").hidden = rows.children.length > 0;
    $("agents-empty").textContent = "No agents yet. Publish one below.";
  } catch (err) {
    showError(errorBox, explain(err), "Cannot list your agents");
  }
}

async function transition(agent, path, done) {
  hideError(errorBox);
  try {
    await api("POST", path, { token: token() });
    announce(`${agent.package_name} ${done}.`);
    await loadAgents();
    rows.querySelector(`tr[data-package="${CSS.escape(agent.package_name)}"] td.actions button`)?.focus();
  } catch (err) {
    showError(errorBox, explain(err), `Cannot change ${agent.package_name}`);
  }
}

async function remove(agent) {
  if (!confirm(`Delete ${agent.package_name}? This cannot be undone; the package name becomes free again.`)) return;
  hideError(errorBox);
  try {
    await api("DELETE", `/api/agents/${encodeURIComponent(agent.id)}`, { token: token() });
    announce(`${agent.package_name} deleted.`);
    await loadAgents();
    $("refresh").focus();
  } catch (err) {
    showError(errorBox, explain(err), `Cannot delete ${agent.package_name}`);
  }
}

// ---- publishing ----

const list = (text) => text.split(",").map((t) => t.trim()).filter(Boolean);

function formBody(form) {
  const value = (name) => form.elements.namedItem(name).value.trim();
  const body = {};
  for (const name of ["package_name", "name", "description", "url", "version", "category", "target", "visibility", "org"]) {
    if (value(name)) body[name] = value(name);
  }
  if (value("tags")) body.tags = list(value("tags"));
  if (value("capabilities")) {
    try {
      body.capabilities = JSON.parse(value("capabilities"));
    } catch {
      throw Object.assign(new Error("Capabilities must be a JSON array."), { errors: [{ field: "capabilities", message: "not valid JSON" }] });
    }
  }
  if (value("payment.model")) {
    body.payment = { model: value("payment.model") };
    if (value("payment.direction")) body.payment.direction = value("payment.direction");
    if (value("payment.protocols")) body.payment.protocols = list(value("payment.protocols"));
    if (value("payment.rails")) body.payment.rails = list(value("payment.rails"));
  }
  return body;
}

/** Mark each control named by a validation error (`payment.rails[0]` marks `payment.rails`). */
function markFields(form, errors) {
  for (const control of form.querySelectorAll("[aria-invalid]")) control.removeAttribute("aria-invalid");
  for (const note of form.querySelectorAll(".field .error")) note.remove();
  let first = null;
  for (const error of errors || []) {
    const field = String(error.field || "");
    const candidates = [field, field.replace(/\[\d+\].*$/, ""), field.split(".")[0], field.split(/[.[]/)[0]];
    const control = candidates.map((name) => form.elements.namedItem(name)).find((c) => c instanceof Element);
    if (!control) continue;
    control.setAttribute("aria-invalid", "true");
    const note = el("p", { class: "error", id: `${control.id}-error` }, error.message || "invalid");
    control.setAttribute("aria-errormessage", note.id);
    control.closest(".field").append(note);
    first ??= control;
  }
  first?.focus();
}

async function publish(form, body) {
  hideError(errorBox);
  const button = form.querySelector('button[type="submit"]');
  button.disabled = true;
  try {
    const agent = await api("POST", "/api/agents/publish", { token: token(), body });
    markFields(form, []);
    form.reset();
    announce(`${agent.package_name} published in STAGE. Go live to list it.`);
    await loadAgents();
    rows.querySelector(`tr[data-package="${CSS.escape(agent.package_name)}"] td.actions button`)?.focus();
  } catch (err) {
    markFields(form, err.errors);
    showError(errorBox, explain(err), "Cannot publish");
  } finally {
    button.disabled = false;
  }
}

$("panel-card").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  const body = {
    package_name: form.elements.namedItem("package_name").value.trim(),
    manifest_url: form.elements.namedItem("manifest_url").value.trim(),
  };
  publish(form, body);
});

$("panel-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const form = event.currentTarget;
  let body;
  try {
    body = formBody(form);
  } catch (err) {
    markFields(form, err.errors);
    showError(errorBox, err, "Cannot publish");
    return;
  }
  publish(form, body);
});

$("refresh").addEventListener("click", () => loadAgents());
more.addEventListener("click", () => loadAgents({ append: true }));

// ---- signing in ----

/** The sign-in panel: the configured providers' buttons, or who is signed in, their tokens. */
async function loadSignin() {
  const failed = new URLSearchParams(location.search).get("signin_error");
  if (failed) {
    showError(errorBox, new Error(failed), "Sign-in failed");
    history.replaceState(null, "", location.pathname);
  }
  let providers = [];
  try {
    providers = (await api("GET", "/api/auth/providers")).providers;
  } catch {
    providers = [];
  }
  try {
    const me = await api("GET", "/api/me");
    session = me && me.kind === "session" ? me : null;
  } catch {
    session = null;
  }
  setCsrfToken(session ? session.csrf_token : "");
  $("signin-panel").hidden = !session && providers.length === 0;
  $("signin-out").hidden = Boolean(session);
  $("signin-in").hidden = !session;
  const back = encodeURIComponent(location.pathname);
  $("signin-buttons").replaceChildren(...providers.map((provider) =>
    el("a", { class: "button secondary", href: `${provider.login_url}&return_to=${back}` },
      `Sign in with ${provider.kind === "github" ? "GitHub" : provider.name}`)));
  await loadOrgs();
  if (session) {
    $("signin-owner").textContent = session.owner;
    const namespaces = session.granted_namespaces.concat(session.owned_namespaces);
    $("signin-namespaces").textContent = namespaces.length ? ` — publishes under ${[...new Set(namespaces)].join(", ")}` : "";
    await loadTokens();
  }
}

/** The organisations the caller publishes for, as owners to choose in the publish form. */
async function loadOrgs() {
  const select = $("p-org");
  select.replaceChildren(el("option", { value: "" }, "You"));
  if (!token() && !session) return;
  try {
    const { orgs } = await api("GET", "/api/orgs", { token: token() });
    for (const org of orgs.filter((o) => o.role === "admin" || o.role === "publisher")) {
      select.append(el("option", { value: org.name }, org.display_name ? `${org.display_name} (${org.name})` : org.name));
    }
  } catch {
    // Without organisations the agent is the caller's: nothing to choose.
  }
}

async function loadTokens() {
  try {
    const { tokens } = await api("GET", "/api/tokens");
    $("my-tokens").replaceChildren(...tokens.filter((t) => !t.revoked_at).map((t) =>
      el("li", { dataset: { token: t.id } }, el("code", { text: t.id }), ` ${t.scopes.join(", ")}`,
        t.expires_at ? `, expires ${when(t.expires_at)} ` : " ",
        el("button", { type: "button", class: "small ghost danger", "aria-label": `Revoke ${t.id}`,
          onclick: () => revokeToken(t.id) }, "Revoke"))));
  } catch (err) {
    showError(errorBox, explain(err), "Cannot list your tokens");
  }
}

async function revokeToken(id) {
  hideError(errorBox);
  try {
    await api("DELETE", `/api/tokens/${encodeURIComponent(id)}`);
    announce(`Token ${id} revoked.`);
    await loadTokens();
  } catch (err) {
    showError(errorBox, explain(err), "Cannot revoke the token");
  }
}

$("mint-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  hideError(errorBox);
  try {
    const minted = await api("POST", "/api/tokens", { body: { expires_in_days: Number($("mint-days").value) } });
    $("minted-token").textContent = minted.token;
    $("minted").hidden = false;
    announce(`Token ${minted.id} made; copy it now, it is shown once.`);
    await loadTokens();
  } catch (err) {
    showError(errorBox, explain(err), "Cannot make a token");
  }
});

$("signout").addEventListener("click", async () => {
  hideError(errorBox);
  try {
    await api("POST", "/auth/logout");
  } catch (err) {
    showError(errorBox, explain(err), "Cannot sign out");
    return;
  }
  session = null;
  setCsrfToken("");
  $("minted").hidden = true;
  await loadSignin();
  await loadAgents();
});

enableCopyButtons($("minted"));
loadSignin().then(() => loadAgents());
