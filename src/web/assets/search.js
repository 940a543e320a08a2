// The search page: instant results for the query box and filters, kept in the address bar so a
// search can be shared, with cursor pagination ("Show more"). Category, tags, payment model and
// health are offered as facets: the values the matching agents have, with their counts
// (`facets=true`), ticked to filter.
import { el, api, showError, hideError, debounce, agentBadges } from "./common.js";

/** Filters typed or chosen in the form's own controls. */
const FIELDS = ["q", "target", "verification_level", "max_severity", "payment_protocol",
  "payment_rail", "payment_direction", "sort"];
/** Filters offered as facets, in the answer's `facets` and the address bar alike. */
const FACETS = ["category", "tags", "payment_model", "health"];
/** How facet values are shown, where not as sent. */
const LABELS = {
  payment_model: { free: "Free", freemium: "Freemium", paid: "Paid" },
  health: { up: "Up", down: "Down", not_conformant: "Not conformant", unknown: "Not probed yet", not_probed: "No endpoint to probe" },
};

const query = document.getElementById("q");
const searchForm = document.getElementById("search-form");
const filters = document.getElementById("filters");
const results = document.getElementById("results");
const status = document.getElementById("results-status");
const errorBox = document.getElementById("results-error");
const empty = document.getElementById("results-empty");
const more = document.getElementById("load-more");

const field = (name) => (name === "q" ? query : filters.elements.namedItem(name));

/** Per facet, the values ticked, as given (the server compares them case-insensitively). */
const chosen = Object.fromEntries(FACETS.map((name) => [name, []]));
/** Per facet, the last counts the server sent. */
let counts = Object.fromEntries(FACETS.map((name) => [name, {}]));

let controller = null;
let nextCursor = null;
let shown = 0;

const same = (a, b) => a.toLowerCase() === b.toLowerCase();
const isChosen = (facet, value) => chosen[facet].some((v) => same(v, value));

function choose(facet, value, on) {
  const rest = chosen[facet].filter((v) => !same(v, value));
  chosen[facet] = on ? [...rest, value] : rest;
}

function currentParams() {
  const params = new URLSearchParams();
  for (const name of FIELDS) {
    const value = field(name).value.trim();
    if (value) params.set(name, value);
  }
  for (const name of FACETS) {
    if (chosen[name].length) params.set(name, chosen[name].join(","));
  }
  return params;
}

function restoreFromAddress() {
  const params = new URLSearchParams(location.search);
  for (const name of FIELDS) field(name).value = params.get(name) ?? "";
  for (const name of FACETS) {
    chosen[name] = [];
    for (const value of (params.get(name) ?? "").split(",").map((v) => v.trim()).filter(Boolean)) choose(name, value, true);
  }
}

/** One facet's values: those with counts, most frequent first, and the ticked ones (0 when none match). */
function renderFacet(facet) {
  const list = document.getElementById(`facet-${facet}`);
  const entries = Object.entries(counts[facet] || {});
  for (const value of chosen[facet]) {
    if (!entries.some(([v]) => same(v, value))) entries.push([value, 0]);
  }
  entries.sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  const focused = document.activeElement?.closest?.("[data-value]");
  const focusedKey = focused && focused.dataset.facet === facet ? focused.dataset.value.toLowerCase() : null;
  list.replaceChildren(...(entries.length
    ? entries.map(([value, count]) => {
      const box = el("input", { type: "checkbox", dataset: { facet, value } });
      box.checked = isChosen(facet, value);
      const label = (LABELS[facet] && LABELS[facet][value.toLowerCase()]) || value;
      return el("li", {}, el("label", { class: "check" }, box,
        el("span", { class: "facet-value" }, label), " ", el("span", { class: "count" }, String(count))));
    })
    : [el("li", { class: "muted" }, "None among these agents")]));
  if (focusedKey) list.querySelector(`[data-value="${CSS.escape(focusedKey)}" i]`)?.focus();
}

function renderFacets() {
  for (const facet of FACETS) renderFacet(facet);
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
  // The counts of a search are the same on every page: asked for with its first page only.
  if (!append) params.set("facets", "true");
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
      if (page.facets) counts = page.facets;
      renderFacets();
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
      renderFacets(); // the last counts, and the ticked values so they can be unticked
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
filters.addEventListener("change", (event) => {
  const box = event.target.closest("input[data-facet]");
  if (box) {
    choose(box.dataset.facet, box.dataset.value, box.checked);
    run();
    return;
  }
  soon();
});
filters.addEventListener("input", (event) => {
  if (!event.target.closest("input[data-facet]")) soon();
});
filters.addEventListener("submit", (event) => {
  event.preventDefault();
  run();
});
filters.addEventListener("reset", () => {
  for (const name of FACETS) chosen[name] = [];
  setTimeout(() => run(), 0);
});
more.addEventListener("click", () => run({ append: true }));

results.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-tag]");
  if (!button) return;
  choose("tags", button.dataset.tag, true);
  renderFacet("tags");
  run();
  document.querySelector(`#facet-tags [data-value="${CSS.escape(button.dataset.tag)}" i]`)?.focus();
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
