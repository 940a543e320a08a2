// The search page: instant results for the query box and filters, kept in the address bar so a
// search can be shared, with cursor pagination ("Show more").
import { el, api, showError, hideError, debounce, agentBadges } from "./common.js";

const PARAMS = ["q", "tags", "category", "target", "verification_level", "payment_model",
  "payment_protocol", "payment_rail", "payment_direction", "sort"];

const query = document.getElementById("q");
const searchForm = document.getElementById("search-form");
const filters = document.getElementById("filters");
const results = document.getElementById("results");
const status = document.getElementById("results-status");
const errorBox = document.getElementById("results-error");
const empty = document.getElementById("results-empty");
const more = document.getElementById("load-more");

const field = (name) => (name === "q" ? query : filters.elements.namedItem(name));

let controller = null;
let nextCursor = null;
let shown = 0;

function currentParams() {
  const params = new URLSearchParams();
  for (const name of PARAMS) {
    const value = field(name).value.trim();
    if (value) params.set(name, value);
  }
  return params;
}

function restoreFromAddress() {
  const params = new URLSearchParams(location.search);
  for (const name of PARAMS) field(name).value = params.get(name) ?? "";
}

function card(agent) {
  const href = `/agents/${encodeURIComponent(agent.package_name)}`;
  const tags = (agent.tags || []).slice(0, 8).map((tag) =>
    el("li", {}, el("button", { type: "button", class: "badge", "aria-label": `Filter by tag ${tag}`, dataset: { tag } }, `#${tag}`)));
  return el("li", { class: "card" },
    el("h3", {}, el("a", { href }, agent.name)),
    el("p", { class: "package" }, agent.package_name),
    el("p", { class: "description" }, agent.description),
    el("ul", { class: "badges", "aria-label": "Facts and tags" }, agentBadges(agent).map((badge) => el("li", {}, badge)), tags));
}

async function run({ append = false } = {}) {
  const params = currentParams();
  if (!append) history.replaceState(null, "", params.toString() ? `/?${params}` : "/");
  if (append && nextCursor) params.set("cursor", nextCursor);
  controller?.abort();
  controller = new AbortController();
  results.setAttribute("aria-busy", "true");
  if (!append) status.textContent = "Searching…";
  try {
    const page = await api("GET", `/public/agents?${params}`, { signal: controller.signal });
    hideError(errorBox);
    if (!append) {
      results.replaceChildren();
      shown = 0;
    }
    results.append(...page.agents.map(card));
    shown += page.agents.length;
    nextCursor = page.next_cursor;
    more.hidden = !nextCursor;
    empty.hidden = shown > 0;
    status.textContent = page.total === 0 ? "No agents match"
      : `${page.total} ${page.total === 1 ? "agent" : "agents"}${shown < page.total ? ` · showing ${shown}` : ""}`;
  } catch (err) {
    if (err.name === "AbortError") return;
    showError(errorBox, err, "Search failed");
    status.textContent = "Search failed";
    if (!append) {
      results.replaceChildren();
      empty.hidden = true;
      more.hidden = true;
    }
  } finally {
    results.removeAttribute("aria-busy");
  }
}

const soon = debounce(() => run(), 250);

searchForm.addEventListener("submit", (event) => {
  event.preventDefault();
  run();
});
query.addEventListener("input", soon);
filters.addEventListener("input", soon);
filters.addEventListener("change", soon);
filters.addEventListener("submit", (event) => {
  event.preventDefault();
  run();
});
filters.addEventListener("reset", () => setTimeout(() => run(), 0));
more.addEventListener("click", () => run({ append: true }));

results.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-tag]");
  if (!button) return;
  const tags = field("tags");
  const current = tags.value.split(",").map((t) => t.trim()).filter(Boolean);
  if (!current.includes(button.dataset.tag)) current.push(button.dataset.tag);
  tags.value = current.join(", ");
  run();
  tags.focus();
});

document.addEventListener("keydown", (event) => {
  const typing = /^(INPUT|TEXTAREA|SELECT)$/.test(document.activeElement?.tagName ?? "");
  if (event.key === "/" && !typing) {
    event.preventDefault();
    query.focus();
  }
});

window.addEventListener("popstate", () => {
  restoreFromAddress();
  run();
});

restoreFromAddress();
run();
