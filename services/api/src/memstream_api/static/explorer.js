// memstream explorer: search at an altitude, drill down through lineage, read a packet.
// Every piece of memory is user data: it reaches the page through textContent only.
"use strict";

const KEY = "memstream.explorer.key";
const $ = (id) => document.getElementById(id);
const state = { trail: [], lineages: new Map() };

class ApiError extends Error {
  constructor(status, detail) {
    super(detail);
    this.status = status;
  }
}

// An element with attributes and children (strings become text nodes, never markup).
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null) continue;
    if (name === "onclick") node.addEventListener("click", value);
    else node.setAttribute(name, String(value));
  }
  for (const child of children) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function clear(node) {
  while (node.firstChild) node.removeChild(node.firstChild);
  return node;
}

// -- the key ----------------------------------------------------------------------------------

function apiKey() {
  return sessionStorage.getItem(KEY);
}

function showKeyState() {
  const has = Boolean(apiKey());
  $("key-form").hidden = has;
  $("key-state").hidden = !has;
  if (!has) $("key-input").focus();
}

function forgetKey() {
  sessionStorage.removeItem(KEY);
  state.lineages.clear(); // another key may mean another tenant
  showKeyState();
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(method, path, body) {
  const key = apiKey();
  if (!key) {
    showKeyState();
    throw new ApiError(401, "enter an API key first");
  }
  const init = { method, headers: { Authorization: `Bearer ${key}` } };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let resp;
  try {
    resp = await fetch(path, init);
  } catch (err) {
    throw new ApiError(0, `the API cannot be reached: ${err.message}`);
  }
  const doc = await resp.json().catch(() => null);
  if (!resp.ok) {
    const detail = doc && typeof doc.detail === "string" ? doc.detail : resp.statusText;
    if (resp.status === 401) forgetKey(); // re-prompt: this key will not do
    throw new ApiError(resp.status, detail);
  }
  return doc;
}

// Run an action; a refusal shows the API's own reason.
async function guarded(action) {
  showError("");
  try {
    await action();
  } catch (err) {
    if (!(err instanceof ApiError)) {
      showError(`Unexpected error: ${err.message}`);
      throw err;
    }
    const what = err.status === 401 ? "Not authorized" : `Error ${err.status}`;
    showError(err.status ? `${what}: ${err.message}` : err.message);
  }
}

// -- small renderers --------------------------------------------------------------------------

function shortHash(hash) {
  return el("code", { class: "hash", title: hash, "data-testid": "hash" }, `${hash.slice(0, 12)}…`);
}

function ledgerRef(ref) {
  return el(
    "span",
    { class: "ref", "data-testid": "ref", "data-seq": ref.seq, "data-hash": ref.hash },
    `${ref.tenant} / ${ref.stream} #${ref.seq} `,
    shortHash(ref.hash),
  );
}

function lineageLink(id) {
  const label = `lineage of ${id}`;
  return el(
    "button",
    { type: "button", class: "link", "data-testid": "lineage-link", "data-id": id,
      "aria-label": label, onclick: () => guarded(() => select(id)) },
    "lineage",
  );
}

function note(id, text) {
  $(id).textContent = text;
  $(id).hidden = !text;
}

// -- the scope: which users', agents' and streams' memory every read sees ---------------------

function scope() {
  const found = {};
  for (const field of ["user", "agent", "stream"]) {
    const values = $(`scope-${field}`).value.split(",").map((v) => v.trim()).filter(Boolean);
    if (values.length) found[field] = values;
  }
  return Object.keys(found).length ? found : undefined;
}

// The scope as a lineage query string (user=a&user=b&agent=c), or "".
function scopeQuery() {
  const params = new URLSearchParams();
  for (const [field, values] of Object.entries(scope() || {})) {
    for (const v of values) params.append(field, v);
  }
  const text = params.toString();
  return text ? `?${text}` : "";
}

// -- column 1: search -------------------------------------------------------------------------

async function search(query, altitude, k) {
  location.hash = new URLSearchParams({ q: query, alt: altitude, k }).toString();
  const found = await api("POST", "/v1/search", { query, altitude, k, scope: scope() });
  state.lineages.clear(); // memory moves on: drill-downs of a new search read it afresh
  const list = clear($("results"));
  note("results-note", found.hits.length ? "" : `Nothing found at the ${altitude} altitude.`);
  for (const hit of found.hits) {
    const n = hit.sources.length;
    list.append(el("li", {},
      el("button", { type: "button", class: "item", "data-testid": "result", "data-id": hit.id,
                     onclick: (e) => guarded(() => pick(e.currentTarget, hit.id)) },
        el("span", { class: "meta" },
          el("span", { class: "badge" }, hit.kind), ` ${hit.altitude} · score `,
          hit.score.toFixed(4), ` · ${n} source${n === 1 ? "" : "s"}`),
        el("span", { class: "text", "data-testid": "result-text" }, hit.text))));
  }
}

function pick(button, id) {
  for (const b of $("results").querySelectorAll("[aria-current]")) b.removeAttribute("aria-current");
  button.setAttribute("aria-current", "true");
  return select(id);
}

// -- columns 2 and 3: lineage -----------------------------------------------------------------

async function lineage(id) {
  if (!state.lineages.has(id)) {
    const path = `/v1/lineage/${encodeURIComponent(id)}${scopeQuery()}`;
    state.lineages.set(id, await api("GET", path));
  }
  return state.lineages.get(id);
}

// A new item to drill from: the trail starts again at it.
async function select(id) {
  state.trail = [];
  await drill(id);
  $("sources-h").scrollIntoView({ block: "nearest" });
}

// Go one level down (or back up the trail to ``id``).
async function drill(id) {
  const doc = await lineage(id);
  const at = state.trail.indexOf(id);
  state.trail = at >= 0 ? state.trail.slice(0, at + 1) : [...state.trail, id];
  renderTrail();
  renderSelected(doc);
  renderSources(doc);
  renderLeaves(doc, `Ledger events beneath ${doc.kind} ${doc.id}`);
}

function renderTrail() {
  const nav = clear($("trail"));
  state.trail.forEach((id, i) => {
    if (i) nav.append(" › ");
    const last = i === state.trail.length - 1;
    nav.append(el("button", { type: "button", class: "link", "data-testid": "trail-step",
                              "aria-current": last ? "step" : null,
                              onclick: () => guarded(() => drill(id)) }, id));
  });
}

function renderSelected(doc) {
  const card = clear($("selected"));
  card.hidden = false;
  card.append(el("p", { class: "meta" }, el("span", { class: "badge" }, doc.kind), ` ${doc.id}`));
  const a = doc.artifact;
  if (a) {
    card.append(
      el("p", { class: "meta" }, `${a.artifact_type} · confidence ${a.confidence} · `,
         `${a.authority_status} · ${a.review_status}`, a.stale_at ? ` · stale since ${a.stale_at}` : ""),
      el("p", { class: "text", "data-testid": "selected-summary" }, a.summary),
    );
  }
}

function eventText(doc, eventId) {
  return doc.events.find((e) => e.event_id === eventId);
}

function renderSources(doc) {
  const list = clear($("sources"));
  note("sources-note", doc.sources.length ? "" : "A ledger event: derived from nothing.");
  for (const id of doc.sources) {
    const ev = eventText(doc, id.split("#", 1)[0]);
    list.append(el("li", {},
      el("button", { type: "button", class: "item", "data-testid": "source", "data-id": id,
                     onclick: (e) => guarded(() => focusSource(e.currentTarget, id)) },
        el("span", { class: "meta" }, el("span", { class: "badge" }, "source"), ` ${id}`),
        ev ? el("span", { class: "text" }, ev.text) : null)));
  }
}

// Show one source in column 3, and let the user drill into it if it has sources of its own.
async function focusSource(button, id) {
  const doc = await lineage(id);
  for (const b of $("sources").querySelectorAll("[aria-current]")) b.removeAttribute("aria-current");
  button.setAttribute("aria-current", "true");
  renderLeaves(doc, `Ledger events beneath ${doc.kind} ${doc.id}`);
  if (doc.sources.length && !(doc.sources.length === 1 && doc.sources[0] === id)) {
    $("leaves").prepend(el("li", {}, el("button", {
      type: "button", class: "link", "data-testid": "drill", onclick: () => guarded(() => drill(id)),
    }, `Drill into ${id} (${doc.sources.length} sources)`)));
  }
}

function renderLeaves(doc, heading) {
  const list = clear($("leaves"));
  note("leaves-note", doc.leaves.length ? heading : "No ledger events beneath this item.");
  for (const ref of doc.leaves) {
    const ev = eventText(doc, ref.event_id);
    list.append(el("li", { class: "leaf", "data-testid": "leaf", "data-event-id": ref.event_id,
                           "data-seq": ref.seq, "data-hash": ref.hash },
      el("p", { class: "meta" }, ledgerRef(ref)),
      el("p", { class: "meta" }, ev ? `${ev.occurred_at} · ${ev.type} · ${ev.agent} · ` : "",
         el("span", { class: "id" }, ref.event_id)),
      el("p", { class: "text", "data-testid": "leaf-text" }, ev ? ev.text : "(content purged)")));
  }
}

// -- the packet -------------------------------------------------------------------------------

function refsOf(packet) {
  const refs = new Map();
  for (const f of packet.facts) refs.set(f.fact_id, f.ref);
  for (const r of packet.evidence) refs.set(r.support_id, r.ref);
  for (const s of packet.snippets) refs.set(s.item_id, s.ref);
  return refs;
}

function citation(id, refs) {
  const ref = refs.get(id);
  return el("li", { "data-testid": "citation", "data-id": id },
    el("span", { class: "id" }, id), " ", ref ? ledgerRef(ref) : "", " ", lineageLink(id));
}

function section(title, testid, items) {
  const box = el("div", { "data-testid": testid }, el("h3", {}, `${title} (${items.length})`));
  if (items.length) box.append(el("ul", { class: "rows" }, ...items));
  return box;
}

function renderPacket(p) {
  const refs = refsOf(p);
  const box = clear($("packet"));
  box.hidden = false;
  box.append(el("p", { class: "meta" }, "answerability: ",
    el("strong", { "data-testid": "answerability" }, p.answerability),
    ` · ${p.synthesis_plan.operation} · ${p.budget.used}/${p.budget.max_tokens} tokens · `,
    el("span", { class: "id" }, p.packet_id)));
  box.append(section("Answers", "answers", p.answer_candidates.map((a) => el("li", {},
    el("p", { class: "text", "data-testid": "answer" }, a.answer),
    el("p", { class: "meta" }, `confidence ${a.confidence}`),
    el("ul", { class: "cites" }, ...a.support_ids.map((id) => citation(id, refs)))))));
  box.append(section("Warnings", "warnings", p.warnings.map((w) => el("li", {},
    el("span", { class: "badge warn" }, w.kind), " ", w.message))));
  box.append(section("Facts", "facts", p.facts.map((f) => el("li", { "data-testid": "fact" },
    el("span", { class: "text" }, `${f.subject} · ${f.predicate}: ${f.value_text}`),
    el("span", { class: "meta" }, `valid from ${f.valid_from}${f.valid_to ? ` to ${f.valid_to}` : ""}`,
       ` · confidence ${f.confidence} · `, ledgerRef(f.ref), " ", lineageLink(f.fact_id))))));
  box.append(section("Evidence", "evidence", p.evidence.map((r) => el("li", { "data-testid": "evidence-row" },
    el("span", { class: "text" }, `${r.label}`), ` ${r.value ?? ""} ${r.unit ?? ""}`,
    el("span", { class: "meta" }, ` ${r.entity ?? ""} ${r.time ?? ""} `), ledgerRef(r.ref), " ",
    lineageLink(r.support_id)))));
  box.append(section("Snippets", "snippets", p.snippets.map((s) => el("li", { "data-testid": "snippet" },
    el("p", { class: "text" }, s.text),
    el("p", { class: "meta" }, `${s.occurred_at} · ${s.type} · ${s.agent} · `, ledgerRef(s.ref), " ",
       lineageLink(s.item_id))))));
  box.append(section("Latent context (suggestive)", "latent-context", p.latent_context.map((l) => el("li", {},
    el("span", { class: "badge" }, l.artifact_type), " ", l.summary, " ", lineageLink(l.artifact_id)))));
}

// -- wiring -----------------------------------------------------------------------------------

function readHash() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (!params.get("q")) return false;
  $("query").value = params.get("q");
  if (params.get("alt")) $("altitude").value = params.get("alt");
  if (params.get("k")) $("k").value = params.get("k");
  return true;
}

function runSearch() {
  const k = Number.parseInt($("k").value, 10) || 10;
  return guarded(() => search($("query").value, $("altitude").value, k));
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (e) => {
    e.preventDefault();
    sessionStorage.setItem(KEY, $("key-input").value.trim());
    $("key-input").value = "";
    showError("");
    showKeyState();
    $("query").focus();
  });
  $("forget-key").addEventListener("click", forgetKey);
  $("search-form").addEventListener("submit", (e) => {
    e.preventDefault();
    runSearch();
  });
  $("scope-form").addEventListener("submit", (e) => {
    e.preventDefault(); // Enter in a scope field searches again, inside the new scope
    state.lineages.clear();
    if ($("query").value) runSearch();
  });
  $("checkout-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const body = { query: $("checkout-query").value, scope: scope() };
    guarded(async () => renderPacket(await api("POST", "/v1/checkout", body)));
  });
  showKeyState();
  if (readHash() && apiKey()) runSearch();
});
