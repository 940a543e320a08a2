// Shared helpers for every page: DOM building (text only, never HTML strings), the JSON API
// client that turns problem+json into errors, the stored token, copy buttons and tabs.

/** Build an element. `attrs` keys: class, text, on{Event}, dataset, or attributes. */
export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else if (key === "dataset") Object.assign(node.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") node.addEventListener(key.slice(2).toLowerCase(), value);
    else if (value === true) node.setAttribute(key, "");
    else node.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** An error from the API, carrying the problem+json fields. */
export class ApiProblem extends Error {
  constructor(status, body) {
    const detail = (body && (body.detail || body.title)) || `HTTP ${status}`;
    super(detail);
    this.status = status;
    this.code = (body && body.code) || "http_error";
    this.errors = (body && Array.isArray(body.errors)) ? body.errors : [];
  }
}

// A signed-in browser's CSRF token (from GET /api/me): sent with every call made without a
// bearer token, so the session cookie may write.
let csrfToken = "";

export function setCsrfToken(value) {
  csrfToken = value || "";
}

/** Call the JSON API. Resolves to the parsed body (null for 204), rejects with ApiProblem. */
export async function api(method, path, { body, token, signal } = {}) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (token) headers.Authorization = `Bearer ${token}`;
  else if (csrfToken) headers["X-CSRF-Token"] = csrfToken;
  let response;
  try {
    response = await fetch(path, { method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiProblem(0, { code: "network_error", detail: "The registry could not be reached. Check your connection and try again." });
  }
  const text = await response.text();
  let parsed = null;
  if (text) {
    try { parsed = JSON.parse(text); } catch { parsed = null; }
  }
  if (!response.ok) throw new ApiProblem(response.status, parsed);
  return parsed;
}

/** Render an error (ApiProblem or other) into an alert element and show it. */
export function showError(container, err, prefix = "") {
  container.replaceChildren();
  const message = err instanceof ApiProblem ? err.message : (err && err.message) || String(err);
  const head = el("p", { class: "alert-title" }, prefix ? `${prefix}: ` : "", message);
  if (err instanceof ApiProblem && err.code && err.code !== "http_error") {
    head.append(" ", el("code", { text: err.code }));
  }
  container.append(head);
  if (err instanceof ApiProblem && err.errors.length) {
    container.append(el("ul", {}, err.errors.map((e) => el("li", {}, el("code", { text: e.field || "?" }), " ", e.message || ""))));
  }
  container.hidden = false;
}

export function hideError(container) {
  container.hidden = true;
  container.replaceChildren();
}

export function debounce(fn, ms) {
  let timer;
  return (...args) => {
    clearTimeout(timer);
    timer = setTimeout(() => fn(...args), ms);
  };
}

export const pretty = (value) => JSON.stringify(value, null, 2);

/** "2026-11-22T10:00:00Z" as a short local date and time. */
export function when(timestamp) {
  if (!timestamp) return "";
  const date = new Date(timestamp);
  return Number.isNaN(date.getTime()) ? String(timestamp) : date.toLocaleString(undefined, { dateStyle: "medium", timeStyle: "short" });
}

// ---- the token, shared by the playground and the console ----

const TOKEN_KEY = "agent-registry.token";

export function getToken() {
  try { return localStorage.getItem(TOKEN_KEY) || ""; } catch { return ""; }
}

export function setToken(token) {
  try {
    if (token) localStorage.setItem(TOKEN_KEY, token);
    else localStorage.removeItem(TOKEN_KEY);
  } catch { /* storage disabled: the token lives only in the field */ }
}

/** Wire the token form: save, forget, and call `onChange(token)` after each. */
export function bindTokenPanel(onChange) {
  const form = document.getElementById("token-form");
  const input = document.getElementById("token");
  const status = document.getElementById("token-status");
  const forget = document.getElementById("token-forget");
  input.value = getToken();
  const say = () => {
    status.textContent = getToken() ? "A token is saved in this browser." : "No token saved.";
  };
  say();
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    setToken(input.value.trim());
    say();
    onChange(getToken());
  });
  forget.addEventListener("click", () => {
    input.value = "";
    setToken("");
    say();
    onChange("");
  });
  return () => input.value.trim() || getToken();
}

// ---- copy buttons and tabs ----

/** A `.copy` button copies its `data-copy-text`, or the text of the `pre` beside it. */
export function enableCopyButtons(root = document) {
  root.addEventListener("click", async (event) => {
    const button = event.target.closest("button.copy");
    if (!button) return;
    const text = button.dataset.copyText ?? button.parentElement.querySelector("pre")?.textContent ?? "";
    const label = button.textContent;
    try {
      await navigator.clipboard.writeText(text);
      button.textContent = "Copied";
    } catch {
      const range = document.createRange();
      const pre = button.parentElement.querySelector("pre");
      if (pre) {
        range.selectNodeContents(pre);
        const selection = getSelection();
        selection.removeAllRanges();
        selection.addRange(range);
      }
      button.textContent = "Press Ctrl+C";
    }
    setTimeout(() => { button.textContent = label; }, 1600);
  });
}

/** ARIA tabs: click or arrow keys select a tab and show its panel. */
export function enableTabs(tablist, onSelect = () => {}) {
  const tabs = [...tablist.querySelectorAll('[role="tab"]')];
  const select = (tab, focus) => {
    for (const other of tabs) {
      const selected = other === tab;
      other.setAttribute("aria-selected", String(selected));
      other.tabIndex = selected ? 0 : -1;
      document.getElementById(other.getAttribute("aria-controls")).hidden = !selected;
    }
    if (focus) tab.focus();
    onSelect(tab);
  };
  tablist.addEventListener("click", (event) => {
    const tab = event.target.closest('[role="tab"]');
    if (tab) select(tab, false);
  });
  tablist.addEventListener("keydown", (event) => {
    const at = tabs.indexOf(document.activeElement);
    if (at < 0) return;
    const next = { ArrowRight: at + 1, ArrowLeft: at - 1, Home: 0, End: tabs.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    select(tabs[(next + tabs.length) % tabs.length], true);
  });
}

/** Badges for an agent summary or record: verification, payment model, category. */
/** Uptime as a percentage, e.g. "99.5%"; "" when unknown. */
export function percent(ratio) {
  return typeof ratio === "number" ? `${Math.round(ratio * 1000) / 10}%` : "";
}

/** The badge of what the liveness prober last found; none before the first probe. */
export function healthBadge(health) {
  if (!health || !health.status || health.status === "unknown") return null;
  if (health.status === "not_probed") {
    const reason = health.detail || "no endpoint";
    return el("span", { class: "badge health neutral", title: `Not probed: ${reason}`, "data-health": health.status }, `○ Not probed (${reason})`);
  }
  const label = { up: "● Up", down: "● Down", not_conformant: "● Not conformant" }[health.status];
  if (!label) return null;
  const parts = [`Last checked ${when(health.checked_at)}`];
  if (health.uptime_7d !== null && health.uptime_7d !== undefined) parts.push(`uptime ${percent(health.uptime_7d)} over 7 days`);
  if (health.detail) parts.push(health.detail);
  const kind = health.status === "up" ? "verified" : health.status === "down" ? "down" : "warning";
  return el("span", { class: `badge health ${kind}`, title: parts.join("; "), "data-health": health.status }, label);
}

export function agentBadges(agent) {
  const badges = [];
  if (agent.verification_level === "domain_verified") badges.push(el("span", { class: "badge verified", title: "The owner proved control of the package's domain" }, "✓ Domain verified"));
  else badges.push(el("span", { class: "badge" }, "Unverified"));
  const signature = agent.card_signature;
  if (signature) {
    const label = { valid: "✓ Card signed", invalid: "✗ Card signature invalid", unverifiable: "Card signature unchecked" }[signature.status];
    const title = signature.status === "valid"
      ? `The publisher signed its card; the signature verified with key ${signature.kid || ""}`
      : `The publisher's card carries a signature that ${signature.status === "invalid" ? "does not verify" : "could not be checked"}${signature.detail ? `: ${signature.detail}` : ""}`;
    if (label) badges.push(el("span", { class: `badge ${signature.status === "valid" ? "verified" : signature.status === "invalid" ? "warning" : ""}`.trim(), title }, label));
  }
  const health = healthBadge(agent.health);
  if (health) badges.push(health);
  const security = agent.security;
  if (security && security.status === "flagged") {
    badges.push(el("span", { class: "badge warning", title: "The registry's scanner found text a model may obey or a reviewer may not see: see Security below" },
      `⚠ Security: ${security.max_severity}`));
  }
  // Search results carry the worst severity alone; a record carries the whole report.
  if (!security && agent.max_severity && agent.max_severity !== "none") {
    badges.push(el("span", { class: "badge warning", title: "The registry's scanner found text a model may obey or a reviewer may not see" },
      `⚠ Security: ${agent.max_severity}`));
  }
  if (agent.deprecation) {
    badges.push(el("span", { class: "badge warning", title: agent.deprecation.message }, "Deprecated"));
  }
  if (agent.visibility === "private") badges.push(el("span", { class: "badge", title: "Only its owner, its organisation's members and the operator see it" }, "Private"));
  else if (agent.visibility === "unlisted") badges.push(el("span", { class: "badge", title: "Listed nowhere; found by whoever knows its name" }, "Unlisted"));
  const model = agent.payment && agent.payment.model;
  if (model) badges.push(el("span", { class: `badge ${model === "free" ? "free" : "paid"}` }, model[0].toUpperCase() + model.slice(1)));
  if (agent.category) badges.push(el("span", { class: "badge" }, agent.category));
  if (agent.target) badges.push(el("span", { class: "badge" }, agent.target));
  return badges;
}
