// linkgate's dashboard: progressive enhancement of the plain HTML form.
// Signing in opens a session on the server (an HttpOnly cookie); the page
// keeps only the session's CSRF token, in memory, and sends it with every
// state-changing request. Signed in, it lists every link (server-side
// filters and cursor paging), edits, deletes, tags and draws QR codes,
// shows the statistics of a link or of all links, and manages API keys,
// each as the session's scopes allow. Anonymous visitors create links and
// see those created in this browser (localStorage: links, never a key).
// No dependencies.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const main = $("main");
  const qrSize = main.dataset.qrSize || "256";
  const STORE = "linkgate.links";
  // Keys are never kept in the browser; one an earlier version stored is removed.
  try { localStorage.removeItem("linkgate.adminKey"); sessionStorage.removeItem("linkgate.adminKey"); } catch { /* storage off */ }
  let session = { signed_in: false, scopes: [], create_access: "public", stats_public: main.dataset.statsPublic === "true" };
  const can = (s) => session.scopes.includes(s) || session.scopes.includes("admin");
  const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v == null || v === false) continue;
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v === true ? "" : v);
    }
    for (const kid of kids) if (kid != null) e.append(kid);
    return e;
  }

  // --- the server -------------------------------------------------------
  async function errorMessage(resp) {
    try { return (await resp.json()).error.message; } catch { return "The server answered " + resp.status + "."; }
  }
  // api sends a request; a state-changing one carries the CSRF token. A
  // GET shed by a busy server (503 with Retry-After) is asked again,
  // twice at most. A 401 means the session ended: the page signs out.
  async function api(method, url, body) {
    const opts = { method, headers: {}, cache: "no-store" };
    if (method !== "GET" && session.csrf_token) opts.headers["X-CSRF-Token"] = session.csrf_token;
    if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
    for (let attempt = 1; ; attempt++) {
      const resp = await fetch(url, opts);
      const after = parseInt(resp.headers.get("Retry-After"), 10);
      if (method !== "GET" || resp.status !== 503 || !(after >= 0) || attempt === 3) {
        if (resp.status === 401 && session.signed_in) signedOut("Your session ended; sign in again.");
        return resp;
      }
      await sleep(Math.min(after, 5) * 1000);
    }
  }
  async function apiJSON(method, url, body) {
    const resp = await api(method, url, body);
    if (!resp.ok) { const e = new Error(await errorMessage(resp)); e.status = resp.status; throw e; }
    return resp.status === 204 ? null : resp.json();
  }

  // --- domains ----------------------------------------------------------
  // With several domains the form has a domain choice, and a link's API
  // calls name its domain (?domain=); with one they need not.
  const multiDomain = !!$("domain");
  function domainArg(sep, domain) { return multiDomain && domain ? sep + "domain=" + encodeURIComponent(domain) : ""; }
  function linkKey(id, domain) { return multiDomain && domain ? id + "@" + domain : id; }
  function linkURL(l, tail) { return "/api/v1/links/" + encodeURIComponent(l.id) + (tail || "") + domainArg("?", l.domain); }
  const shortText = (u) => u.replace(/^https?:\/\//, "");

  // --- theme --------------------------------------------------------------
  const root = document.documentElement;
  const darkMedia = matchMedia("(prefers-color-scheme: dark)");
  function applyTheme() {
    let t = null;
    try { t = localStorage.getItem("linkgate.theme"); } catch { /* storage off */ }
    if (t) root.dataset.theme = t; else delete root.dataset.theme;
    const dark = t ? t === "dark" : darkMedia.matches;
    $("theme").setAttribute("aria-pressed", String(dark));
  }
  $("theme").addEventListener("click", () => {
    const dark = $("theme").getAttribute("aria-pressed") !== "true";
    try { localStorage.setItem("linkgate.theme", dark ? "dark" : "light"); } catch { /* storage off */ }
    applyTheme();
  });
  darkMedia.addEventListener("change", applyTheme);
  applyTheme();

  // --- session --------------------------------------------------------------
  function renderSession() {
    const signedIn = session.signed_in;
    $("signin-open").hidden = signedIn;
    $("signout").hidden = !signedIn;
    $("who").hidden = !signedIn;
    $("who").textContent = signedIn ? "Signed in: " + session.name : "";
    $("nav").hidden = !signedIn;
    for (const a of $("nav").querySelectorAll("a[data-scope]")) a.hidden = !can(a.dataset.scope) || (a.dataset.scope === "admin" && !session.keys);
    $("nav").querySelector("a[data-view='']").hidden = !(session.create_access === "public" || can("links:create"));
    if (signedIn) $("signin").hidden = true;
    route();
  }
  function signedOut(message) {
    session = Object.assign({}, session, { signed_in: false, scopes: [], csrf_token: undefined, name: undefined });
    renderSession();
    if (message) { $("signin").hidden = false; $("signin-error").textContent = message; }
  }
  $("signin-open").hidden = false;
  $("signin-open").addEventListener("click", () => { $("signin").hidden = false; $("admin-key").focus(); });
  $("key-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("signin-error").textContent = "";
    const key = $("admin-key").value.trim();
    if (!key) { $("signin-error").textContent = "Enter the admin key or an API key."; $("admin-key").focus(); return; }
    try {
      const resp = await fetch("/api/v1/session", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ key }) });
      if (resp.status !== 201) { $("signin-error").textContent = await errorMessage(resp); $("admin-key").focus(); return; }
      session = await resp.json();
    } catch (e) {
      $("signin-error").textContent = "Could not reach the server: " + e.message;
      return;
    } finally {
      $("admin-key").value = "";
    }
    if (!location.hash && can("links:read")) history.replaceState(null, "", "#links");
    renderSession();
    renderMine();
  });
  $("signout").addEventListener("click", async () => {
    try { await api("DELETE", "/api/v1/session"); } catch { /* signed out here anyway */ }
    signedOut();
    history.replaceState(null, "", location.pathname);
    route();
    $("signin-open").focus();
  });

  // --- dialogs ---------------------------------------------------------------
  for (const b of document.querySelectorAll("dialog [data-close]")) b.addEventListener("click", () => b.closest("dialog").close());
  // confirm asks a yes/no question in a modal dialog.
  // confirmPending settles the open confirmation: its close event is
  // queued, and may arrive after the next confirmation has opened.
  let confirmPending = null;
  function confirmDialog(text, yes) {
    const d = $("confirm");
    if (confirmPending) confirmPending(); // closed, its close event not yet delivered
    $("confirm-text").textContent = text;
    $("confirm-yes").textContent = yes;
    d.returnValue = "";
    d.showModal();
    return new Promise((done) => {
      const settle = () => { d.removeEventListener("close", closed); confirmPending = null; done(d.returnValue === "yes"); };
      const closed = () => { if (!d.open) settle(); };
      confirmPending = settle;
      d.addEventListener("close", closed);
    });
  }
  function openQR(l) {
    const d = $("qr-dialog");
    $("qr-h").textContent = "QR code of " + shortText(l.short_url);
    const draw = () => {
      const size = $("qr-size").value;
      const base = linkURL(l, "/qr") + (multiDomain && l.domain ? "&" : "?") + "size=" + size;
      $("qr-preview").src = base + "&format=svg";
      $("qr-png").href = base + "&format=png";
      $("qr-png").download = l.id + "-" + size + ".png";
      $("qr-svg").href = base + "&format=svg";
      $("qr-svg").download = l.id + "-" + size + ".svg";
    };
    $("qr-size").onchange = draw;
    draw();
    d.showModal();
  }

  // --- create ---------------------------------------------------------
  for (const e of document.querySelectorAll(".js-only")) e.hidden = false;
  const tagList = (s) => s.split(",").map((t) => t.trim()).filter(Boolean);
  const utc = (local) => local ? new Date(local + "Z").toISOString().replace(/\.\d+Z$/, "Z") : null;
  const form = $("create");
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const err = $("form-error");
    err.textContent = "";
    const url = $("url").value.trim();
    if (!url) { err.textContent = "Enter the URL to shorten."; $("url").focus(); return; }
    const body = { url };
    const slug = $("slug").value.trim();
    if (slug) body.slug = slug;
    const exp = $("expires").value;
    if (exp) body.expires_at = new Date(Date.now() + parseInt(exp, 10) * 3600e3).toISOString().replace(/\.\d+Z$/, "Z");
    if ($("expires_at").value) body.expires_at = utc($("expires_at").value);
    const max = $("max_visits").value.trim();
    if (max) body.max_visits = Number(max);
    const tags = tagList($("tags").value);
    if (tags.length) body.tags = tags;
    if ($("forward").value) body.forward_query = $("forward").value === "true";
    if (multiDomain) body.domain = $("domain").value;
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const resp = await api("POST", "/api/v1/links", body);
      if (resp.status === 401 || resp.status === 403) {
        err.textContent = await errorMessage(resp) + " Sign in with a key that may create links.";
        $("signin").hidden = false;
        $("admin-key").focus();
        return;
      }
      if (resp.status !== 201) {
        err.textContent = await errorMessage(resp);
        (resp.status === 409 || /slug/.test(err.textContent) ? $("slug") : $("url")).focus();
        return;
      }
      const link = await resp.json();
      remember(link);
      showResult(link);
      form.reset();
      renderMine();
    } catch (e) {
      err.textContent = "Could not reach the server: " + e.message;
    } finally {
      button.disabled = false;
    }
  });

  let resultLink = null;
  function showResult(link) {
    resultLink = link;
    $("result-url").value = link.short_url;
    const a = $("short-link");
    a.href = link.short_url;
    a.textContent = link.short_url;
    $("result-target").textContent = link.url;
    $("qr").src = linkURL(link, "/qr") + (multiDomain && link.domain ? "&" : "?") + "format=svg&size=" + qrSize;
    $("copy-status").textContent = "";
    $("result").hidden = false;
    $("result-qr").hidden = false;
    $("result-url").focus();
    $("result-url").select();
  }
  async function copy(text) {
    try {
      await navigator.clipboard.writeText(text);
    } catch {
      const input = $("result-url");
      input.value = text;
      input.select();
      document.execCommand("copy");
    }
    $("copy-status").textContent = "Copied " + text;
    $("links-status").textContent = "Copied " + text;
  }
  $("copy").hidden = false;
  $("copy").addEventListener("click", () => copy($("result-url").value));
  $("result-qr").addEventListener("click", () => resultLink && openQR(resultLink));

  // --- links created in this browser (anonymous use) -------------------
  function load() {
    try { return JSON.parse(localStorage.getItem(STORE)) || []; } catch { return []; }
  }
  function save(links) { try { localStorage.setItem(STORE, JSON.stringify(links.slice(0, 200))); } catch { /* storage off */ } }
  function remember(link) {
    const links = load().filter((l) => l.short_url !== link.short_url);
    links.unshift({ id: link.id, domain: link.domain, short_url: link.short_url, url: link.url, created_at: link.created_at });
    save(links);
  }
  const created = new URLSearchParams(location.search).get("created");
  if (created && $("result-url").value) {
    remember({ id: created, short_url: $("result-url").value, url: $("result-target").textContent, created_at: null });
  }
  const statsReadable = () => session.stats_public || can("stats:read");
  function renderMine() {
    const links = load();
    // Signed in with the list of every link, this one is not needed.
    $("mine").hidden = links.length === 0 || can("links:read");
    if ($("mine").hidden) return;
    $("mine-note").hidden = statsReadable();
    const tbody = $("mine-links").tBodies[0];
    tbody.replaceChildren();
    for (const l of links) {
      const visits = el("td", { class: "num", "data-label": "Visits" }, statsReadable() ? "…" : "—");
      tbody.append(el("tr", {},
        el("td", { "data-label": "Short link" }, el("a", { href: l.short_url }, shortText(l.short_url))),
        el("td", { class: "target", "data-label": "Goes to" }, l.url),
        visits,
        el("td", { class: "actions" },
          statsReadable() ? el("button", { type: "button", class: "link", onclick: () => { location.hash = "#stats/" + linkKey(l.id, l.domain); }, "aria-label": "Stats of " + shortText(l.short_url) }, "Stats") : null,
          el("button", { type: "button", class: "link", onclick: () => { save(load().filter((x) => x.short_url !== l.short_url)); renderMine(); }, "aria-label": "Forget " + shortText(l.short_url) }, "Forget"))));
      if (!statsReadable()) continue;
      apiJSON("GET", linkURL(l, "/stats")).then((s) => { visits.textContent = s.total; visits.dataset.id = linkKey(l.id, l.domain); },
        (e) => { visits.textContent = e.status === 404 ? "deleted" : "—"; visits.title = e.message; });
    }
  }

  // --- every link -------------------------------------------------------
  const page = { cursors: [""], index: 0, next: null, links: new Map(), selected: new Set(), seq: 0 };
  function listQuery() {
    const p = new URLSearchParams();
    p.set("limit", $("f-limit").value);
    p.set("order", $("f-order").value);
    for (const [id, name] of [["f-q", "q"], ["f-tag", "tag"], ["f-state", "state"]]) if ($(id).value.trim()) p.set(name, $(id).value.trim());
    if ($("f-domain") && $("f-domain").value) p.set("domain", $("f-domain").value);
    if ($("f-from").value) p.set("created_after", $("f-from").value + "T00:00:00Z");
    if ($("f-to").value) p.set("created_before", $("f-to").value + "T00:00:00Z");
    return p;
  }
  $("filters").addEventListener("submit", (ev) => {
    ev.preventDefault();
    page.cursors = [""];
    page.index = 0;
    loadLinks();
  });
  $("page-next").addEventListener("click", () => { page.cursors[page.index + 1] = page.next; page.index++; loadLinks(); });
  $("page-prev").addEventListener("click", () => { page.index--; loadLinks(); });
  async function loadLinks() {
    // Only the newest listing is drawn: an answer that arrives after a
    // newer request was sent is dropped. aria-busy is set until it is.
    const seq = ++page.seq;
    $("all-links").setAttribute("aria-busy", "true");
    $("links-error").textContent = "";
    $("links-status").textContent = "";
    const p = listQuery();
    if (page.cursors[page.index]) p.set("cursor", page.cursors[page.index]);
    let out;
    try { out = await apiJSON("GET", "/api/v1/links?" + p); } catch (e) {
      if (seq === page.seq) { $("links-error").textContent = e.message; $("all-links").removeAttribute("aria-busy"); }
      return;
    }
    if (seq !== page.seq) return;
    page.next = out.next_cursor;
    page.links = new Map(out.links.map((l) => [linkKey(l.id, l.domain), l]));
    page.selected.clear();
    $("links-order").textContent = $("f-order").value === "oldest" ? "oldest first" : "newest first";
    $("page-prev").disabled = page.index === 0;
    $("page-next").disabled = !page.next;
    // A page cut short (the server reads a bounded number of links a
    // page): the next one searches further from where it stopped.
    const scanned = out.scanned ? out.scanned.toLocaleString("en") + " links" : "";
    $("page-next").textContent = scanned ? "Search further" : "Next page";
    $("links-scanned").textContent = scanned ? "This page searched " + scanned + " and stopped: more may match. Search further to go on." : "";
    const tbody = $("all-links").tBodies[0];
    tbody.replaceChildren();
    if (out.links.length === 0) tbody.append(el("tr", {}, el("td", { colspan: "6" }, scanned ? "No match among these " + scanned + "." : page.index === 0 ? "No links match." : "No more links.")));
    const writable = can("links:write");
    for (const l of out.links) {
      const key = linkKey(l.id, l.domain);
      const name = shortText(l.short_url);
      tbody.append(el("tr", {},
        el("td", { class: "check" }, el("input", { type: "checkbox", "aria-label": "Select " + name, "data-key": key, onchange: (ev) => { if (ev.target.checked) page.selected.add(key); else page.selected.delete(key); renderBulk(); } })),
        el("td", { "data-label": "Short link" }, el("a", { href: l.short_url }, name)),
        el("td", { class: "target", "data-label": "Goes to" }, l.url),
        el("td", { "data-label": "Tags" }, l.tags.length ? l.tags.join(", ") : "—"),
        el("td", { "data-label": "Created" }, l.created_at ? el("time", { datetime: l.created_at }, l.created_at.slice(0, 10)) : "—",
          l.expires_at ? el("span", { class: "help" }, " · expires " + l.expires_at.slice(0, 10)) : null),
        el("td", { class: "actions" },
          el("button", { type: "button", class: "link", "aria-label": "Copy " + name, onclick: () => copy(l.short_url) }, "Copy"),
          el("button", { type: "button", class: "link", "aria-label": "QR code of " + name, onclick: () => openQR(l) }, "QR code"),
          can("stats:read") || session.stats_public ? el("button", { type: "button", class: "link", "aria-label": "Stats of " + name, onclick: () => { location.hash = "#stats/" + key; } }, "Stats") : null,
          writable ? el("button", { type: "button", class: "link", "aria-label": "Edit " + name, onclick: () => openEdit(l) }, "Edit") : null,
          writable ? el("button", { type: "button", class: "link danger", "aria-label": "Delete " + name, onclick: () => deleteLinks([l]) }, "Delete") : null)));
    }
    $("select-all").checked = false;
    $("select-all").disabled = !writable;
    renderBulk();
    $("all-links").removeAttribute("aria-busy");
  }
  $("select-all").addEventListener("change", (ev) => {
    for (const c of $("all-links").tBodies[0].querySelectorAll("input[type=checkbox]")) {
      c.checked = ev.target.checked;
      if (c.checked) page.selected.add(c.dataset.key); else page.selected.delete(c.dataset.key);
    }
    renderBulk();
  });
  function renderBulk() {
    const n = page.selected.size;
    $("bulk").hidden = n === 0 || !can("links:write");
    $("bulk-count").textContent = n + (n === 1 ? " link selected" : " links selected");
  }
  const selectedLinks = () => [...page.selected].map((k) => page.links.get(k)).filter(Boolean);
  async function deleteLinks(links) {
    const what = links.length === 1 ? shortText(links[0].short_url) : links.length + " links";
    if (!(await confirmDialog("Delete " + what + "? The short link stops working at once and its statistics are deleted.", "Delete " + what))) return;
    let done = 0;
    for (const l of links) {
      try { await apiJSON("DELETE", linkURL(l)); done++; } catch (e) { $("links-error").textContent = shortText(l.short_url) + ": " + e.message; }
    }
    await loadLinks();
    $("links-status").textContent = "Deleted " + done + (done === 1 ? " link." : " links.");
    $("links-h").focus(); // its button is gone: the list's heading keeps the place
  }
  $("bulk-delete").addEventListener("click", () => deleteLinks(selectedLinks()));
  $("bulk-tag-add").addEventListener("click", async () => {
    const tag = $("bulk-tag").value.trim();
    if (!tag) { $("bulk-tag").focus(); return; }
    let done = 0;
    for (const l of selectedLinks()) {
      if (l.tags.includes(tag)) { done++; continue; }
      try { await apiJSON("PATCH", linkURL(l), { tags: [...l.tags, tag] }); done++; } catch (e) { $("links-error").textContent = shortText(l.short_url) + ": " + e.message; }
    }
    $("bulk-tag").value = "";
    await loadLinks();
    $("links-status").textContent = "Tagged " + done + (done === 1 ? " link " : " links ") + tag + ".";
  });

  // --- edit ---------------------------------------------------------------
  let editing = null;
  const localTime = (iso) => iso ? iso.replace(/Z$/, "").slice(0, 16) : "";
  function openEdit(l) {
    editing = l;
    $("edit-h").textContent = "Edit " + shortText(l.short_url);
    $("e-url").value = l.url;
    $("e-tags").value = l.tags.join(", ");
    $("e-expires").value = localTime(l.expires_at);
    $("e-max").value = l.max_visits == null ? "" : l.max_visits;
    $("e-forward").value = l.forward_query == null ? "" : String(l.forward_query);
    $("edit-error").textContent = "";
    $("edit").showModal();
  }
  $("edit-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const patch = { url: $("e-url").value.trim(), tags: tagList($("e-tags").value) };
    patch.expires_at = utc($("e-expires").value);
    patch.max_visits = $("e-max").value ? Number($("e-max").value) : null;
    patch.forward_query = $("e-forward").value ? $("e-forward").value === "true" : null;
    try {
      await apiJSON("PATCH", linkURL(editing), patch);
    } catch (e) {
      $("edit-error").textContent = e.message;
      return;
    }
    $("edit").close();
    await loadLinks();
    $("links-status").textContent = "Saved " + shortText(editing.short_url) + ".";
    // The list was drawn again: the focus goes back to the link's Edit button.
    const again = $("all-links").querySelector('button[aria-label="' + CSS.escape("Edit " + shortText(editing.short_url)) + '"]');
    if (again) again.focus();
  });

  // --- statistics -------------------------------------------------------
  // The statistics API (api/openapi.yaml): a link's at
  // /api/v1/links/{id}/stats, all links' at /api/v1/stats; the same query
  // gives the CSV at .../stats.csv.
  let current = null; // {id, domain} or {all: true}
  let range = "30d";
  const DIMENSIONS = [["referrer", "Referrers"], ["country", "Countries"], ["browser", "Browsers"], ["os", "Operating systems"], ["device", "Devices"],
    ["utm_source", "UTM source"], ["utm_medium", "UTM medium"], ["utm_campaign", "UTM campaign"], ["bot", "Bots"]];
  const day = 864e5;
  const ymd = (t) => new Date(t).toISOString().slice(0, 10);
  function rangeOf() {
    const now = Date.now();
    const to = Math.ceil(now / 36e5) * 36e5; // the next full hour
    switch (range) {
      case "24h": return [to - day, to];
      case "7d": return [to - 7 * day, to];
      case "30d": return [to - 30 * day, to];
      case "90d": return [to - 90 * day, to];
      case "12m": return [to - 365 * day, to];
    }
    const from = Date.parse($("s-from").value + "T00:00:00Z");
    const end = Date.parse($("s-to").value + "T00:00:00Z") + day;
    return [from, end];
  }
  function statsQuery() {
    const [from, to] = rangeOf();
    const p = new URLSearchParams();
    p.set("from", new Date(from).toISOString().replace(/\.\d+Z$/, "Z"));
    p.set("to", new Date(to).toISOString().replace(/\.\d+Z$/, "Z"));
    if ($("s-gran").value) p.set("granularity", $("s-gran").value);
    p.set("bots", $("s-bots").value);
    if (current && current.all) {
      if ($("s-domain") && $("s-domain").value) p.set("domain", $("s-domain").value);
      if ($("s-tag").value.trim()) p.set("tag", $("s-tag").value.trim());
    }
    return p;
  }
  function statsPath(csv) {
    const ext = csv ? "/stats.csv" : "/stats";
    const p = statsQuery();
    if (current.all) return "/api/v1" + ext + "?" + p;
    if (multiDomain && current.domain) p.set("domain", current.domain);
    return "/api/v1/links/" + encodeURIComponent(current.id) + ext + "?" + p;
  }
  for (const b of document.querySelectorAll("[data-range]")) {
    b.addEventListener("click", () => {
      range = b.dataset.range;
      const [from, to] = rangeOf();
      $("s-from").value = ymd(from);
      $("s-to").value = ymd(to - 1);
      refreshStats();
    });
  }
  // The granularity and the people/bots choice apply at once.
  for (const id of ["s-gran", "s-bots"]) $(id).addEventListener("change", refreshStats);
  $("stats-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    if ($("s-from").value && $("s-to").value) range = "custom";
    refreshStats();
  });
  async function openStats(id, domain) {
    current = id ? { id, domain: multiDomain ? domain : undefined } : { all: true };
    $("stats-h").textContent = current.all ? "Statistics of all links" : "Statistics of " + (current.domain ? current.domain + "/" : "") + id;
    for (const f of document.querySelectorAll("[data-all]")) f.hidden = !current.all;
    await refreshStats();
    show("stats");
    $("stats").focus();
  }
  // normalize reads the statistics API's answer; an older server's (by_day
  // and a few lists) is read as the same shape.
  function normalize(s) {
    if (s.series) return s;
    const top = { referrer: (s.referrers || []).map((r) => ({ value: r.host, count: r.count })), browser: (s.browsers || []).map((b) => ({ value: b.name, count: b.count })),
      bot: (s.bot_agents || []).map((b) => ({ value: b.name, count: b.count })), country: (s.countries || []).map((c) => ({ value: c.code, count: c.count })) };
    const counts = new Map((s.by_day || []).map((d) => [d.date, d.count]));
    const series = [];
    const [from, to] = rangeOf();
    for (let t = Math.floor(from / day) * day; t < to; t += day) series.push({ t: new Date(t).toISOString(), total: counts.get(ymd(t)) || 0 });
    return { total: s.total, people: s.total - s.bots, bots: s.bots, series, top, granularity: "day" };
  }
  async function refreshStats() {
    if (!current) return;
    for (const b of document.querySelectorAll("[data-range]")) b.setAttribute("aria-pressed", String(b.dataset.range === range));
    $("stats-error").textContent = "";
    $("stats-csv").href = statsPath(true);
    let s;
    try { s = normalize(await apiJSON("GET", statsPath(false))); } catch (e) { $("stats-error").textContent = e.status === 404 && !current.all ? "This link no longer exists." : e.message; return; }
    $("stat-total").textContent = s.total;
    $("stat-humans").textContent = s.people;
    $("stat-bots").textContent = s.bots;
    $("stats-note").textContent = s.note || "";
    $("chart-h").textContent = "Visits per " + (s.granularity === "hour" ? "hour" : "day") + " (UTC)";
    drawChart(s.series, s.granularity);
    const tops = [];
    if (current.all && s.links) {
      tops.push(topTable("Top links", s.links.map((l) => ({ value: el("a", { href: "#stats/" + linkKey(l.id, l.domain) }, (multiDomain ? l.domain + "/" : "") + l.id), count: l.count }))));
    }
    for (const [dim, title] of DIMENSIONS) {
      let rows = (s.top && s.top[dim]) || [];
      if (dim === "country") rows = rows.map((r) => ({ value: countryName(r.value), count: r.count }));
      if (rows.length || dim === "referrer" || dim === "browser") tops.push(topTable(title, rows));
    }
    $("tops").replaceChildren(...tops);
    const cell = document.querySelector('td.num[data-id="' + CSS.escape(current.all ? "" : linkKey(current.id, current.domain)) + '"]');
    if (cell) cell.textContent = s.total;
  }
  // meter is a bar behind a count (its width set through the CSSOM, which
  // the Content-Security-Policy allows, unlike a style attribute).
  function meter(share) {
    const m = el("span", { class: "meter", "aria-hidden": "true" });
    m.style.width = Math.round(100 * share) + "%";
    return m;
  }
  // countryName shows an ISO 3166 code as the country's English name, and
  // the code: "Germany (DE)"; a code the browser does not know stays as is.
  const regions = typeof Intl.DisplayNames === "function" ? new Intl.DisplayNames(["en"], { type: "region", fallback: "none" }) : null;
  function countryName(code) {
    let name;
    try { name = regions && regions.of(code); } catch { name = undefined; }
    return name ? name + " (" + code + ")" : code;
  }
  function topTable(title, rows) {
    const max = Math.max(1, ...rows.map((r) => r.count));
    return el("div", {}, el("table", { class: "top" },
      el("caption", {}, title),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, "Value"), el("th", { scope: "col", class: "num" }, "Visits"))),
      el("tbody", {}, ...(rows.length ? rows.map((r) => el("tr", {},
        el("td", {}, meter(r.count / max), el("span", { class: "val" }, r.value)),
        el("td", { class: "num" }, String(r.count)))) : [el("tr", {}, el("td", { colspan: "2" }, "none yet"))]))));
  }
  function label(t, gran) { return gran === "hour" ? t.slice(5, 13).replace("T", " ") + "h" : t.slice(0, 10); }
  // The chart is drawn again when the page's width changes (a phone
  // turned, a window resized), at most once a frame.
  let drawn = null, resizing = false;
  window.addEventListener("resize", () => {
    if (resizing || !drawn) return;
    resizing = true;
    requestAnimationFrame(() => { resizing = false; if (!$("stats").hidden) drawChart(...drawn); });
  });
  function drawChart(series, gran) {
    drawn = [series, gran];
    // Our own SVG: one bar per bucket, coloured by CSS (both themes); the
    // same numbers are in the table below it.
    const max = Math.max(1, ...series.map((d) => d.total));
    // As wide (in its own units) as the page allows, 300 to 720: the
    // labels keep a readable size from a phone to a desktop.
    const W = Math.round(Math.min(720, Math.max(300, main.clientWidth - 64))), H = 160, pad = 28, bw = (W - pad) / Math.max(1, series.length);
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + (H + 20));
    svg.setAttribute("role", "img");
    const total = series.reduce((a, d) => a + d.total, 0);
    svg.setAttribute("aria-label", "Visits per " + (gran === "hour" ? "hour" : "day") + ": " + total + " in all, at most " + max + " in one; the table below lists them");
    const mk = (tag, attrs, text) => { const e = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) if (v != null) e.setAttribute(k, v); if (text != null) e.textContent = text; return e; };
    svg.append(mk("line", { x1: pad, y1: H, x2: W, y2: H }));
    svg.append(mk("text", { x: 0, y: 10, class: "axis" }, String(max)));
    svg.append(mk("text", { x: 0, y: H, class: "axis" }, "0"));
    const every = Math.max(1, Math.ceil(series.length / 6));
    series.forEach((d, i) => {
      const h = Math.round((d.total / max) * (H - 10));
      const r = mk("rect", { x: pad + i * bw + (bw > 3 ? 1 : 0), y: H - h, width: Math.max(0.5, bw - (bw > 3 ? 2 : 0)), height: h, class: "bar" });
      r.append(mk("title", {}, label(d.t, gran) + ": " + d.total));
      svg.append(r);
      // A label near the right edge ends there rather than run past it.
      const x = pad + i * bw, end = x > W - 48;
      if (i % every === 0) svg.append(mk("text", { x: end ? W : x, y: H + 14, class: "axis", "text-anchor": end ? "end" : null }, label(d.t, gran).slice(gran === "hour" ? 0 : 5)));
    });
    $("chart").replaceChildren(svg);
    const hasSplit = series.some((d) => d.people != null);
    $("series-table").replaceChildren(el("table", {},
      el("caption", { class: "sr-only" }, "Visits per " + (gran === "hour" ? "hour" : "day")),
      el("thead", {}, el("tr", {}, el("th", { scope: "col" }, gran === "hour" ? "Hour (UTC)" : "Day (UTC)"), el("th", { scope: "col", class: "num" }, "Visits"),
        hasSplit ? el("th", { scope: "col", class: "num" }, "People") : null, hasSplit ? el("th", { scope: "col", class: "num" }, "Bots") : null)),
      el("tbody", {}, ...series.map((d) => el("tr", {}, el("td", {}, label(d.t, gran)), el("td", { class: "num" }, String(d.total)),
        hasSplit ? el("td", { class: "num" }, String(d.people)) : null, hasSplit ? el("td", { class: "num" }, String(d.bots)) : null)))));
  }
  $("stats-refresh").addEventListener("click", refreshStats);
  $("stats-close").addEventListener("click", () => { current = null; history.replaceState(null, "", location.pathname + location.search + (session.signed_in && can("links:read") ? "#links" : "")); route(); });

  // --- API keys -----------------------------------------------------------
  async function loadKeys() {
    $("keys-error").textContent = "";
    let out;
    try { out = await apiJSON("GET", "/api/v1/keys"); } catch (e) { $("keys-error").textContent = e.message; return; }
    const tbody = $("keys-table").tBodies[0];
    tbody.replaceChildren();
    if (out.keys.length === 0) tbody.append(el("tr", {}, el("td", { colspan: "6" }, "No API keys yet.")));
    for (const k of out.keys) {
      tbody.append(el("tr", {},
        el("td", { "data-label": "Name" }, k.name), el("td", { "data-label": "Id" }, el("code", {}, k.id)),
        el("td", { "data-label": "Scopes" }, k.scopes.join(", ")),
        el("td", { "data-label": "Created" }, k.created_at.slice(0, 10)),
        el("td", { "data-label": "Last used" }, k.last_used ? k.last_used.slice(0, 16).replace("T", " ") : "never"),
        el("td", { class: "actions" }, el("button", { type: "button", class: "link danger", "aria-label": "Revoke " + k.name, onclick: async () => {
          if (!(await confirmDialog("Revoke the key " + k.name + " (" + k.id + ")? Everything using it is refused within a second.", "Revoke " + k.name))) return;
          try { await apiJSON("DELETE", "/api/v1/keys/" + encodeURIComponent(k.id)); } catch (e) { $("keys-error").textContent = e.message; }
          loadKeys();
        } }, "Revoke"))));
    }
  }
  $("key-create").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    $("keys-error").textContent = "";
    const scopes = [...$("key-create").querySelectorAll("input[name=scope]:checked")].map((c) => c.value);
    let k;
    try { k = await apiJSON("POST", "/api/v1/keys", { name: $("key-name").value.trim(), scopes }); } catch (e) { $("keys-error").textContent = e.message; return; }
    $("key-token").value = k.token;
    $("key-token-box").hidden = false;
    $("key-name").value = "";
    $("key-token").focus();
    $("key-token").select();
    loadKeys();
  });
  $("key-token-copy").addEventListener("click", async () => {
    try { await navigator.clipboard.writeText($("key-token").value); } catch { $("key-token").select(); document.execCommand("copy"); }
  });

  // --- views ----------------------------------------------------------------
  function show(view) {
    $("links").hidden = view !== "links";
    $("stats").hidden = view !== "stats";
    $("keys").hidden = view !== "keys";
    const creates = session.create_access === "public" || can("links:create");
    $("create-box").hidden = !(creates && view === "");
    if (view !== "") $("result").hidden = true;
    for (const a of $("nav").querySelectorAll("a")) {
      if (a.dataset.view === view || (view === "stats" && current && current.all && a.dataset.view === "analytics")) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    }
  }
  // route shows the view the address names, once its data is there (so
  // nothing moves when it arrives). Until the first view is shown, a
  // signed-in page's sections stay invisible (data-pending, set by the
  // server), so the form does not flash before the list.
  async function route() {
    const h = location.hash;
    const m = /^#stats\/([A-Za-z0-9_-]{1,64})(?:@([a-z0-9.:-]{1,128}))?$/.exec(h);
    try {
      if (m && statsReadable()) await openStats(m[1], m[2]);
      else if (h === "#analytics" && can("stats:read")) await openStats();
      else if (h === "#links" && can("links:read")) { await loadLinks(); show("links"); }
      else if (h === "#keys" && can("admin") && session.keys) { await loadKeys(); show("keys"); }
      else show("");
    } finally {
      delete main.dataset.pending;
    }
  }
  window.addEventListener("hashchange", route);
  {
    const [from, to] = rangeOf();
    $("s-from").value = ymd(from);
    $("s-to").value = ymd(to - 1);
  }
  fetch("/api/v1/session", { cache: "no-store" }).then((r) => r.json()).then((s) => { session = s; }, () => {}).finally(() => { renderSession(); renderMine(); });
})();
