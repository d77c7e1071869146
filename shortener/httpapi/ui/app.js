// linkgate web page: progressive enhancement of the plain HTML form.
// Creates links through the JSON API, keeps the links created in this
// browser in localStorage, shows their visit counts and, per link, the
// visits per day. No dependencies.
"use strict";
(function () {
  const $ = (id) => document.getElementById(id);
  const main = $("main");
  const STORE = "linkgate.links";
  // Keys are never kept in the browser: signing in opens a session on
  // the server (an HttpOnly cookie) and the page keeps only its CSRF
  // token, in memory. A key an earlier version stored is removed.
  try { localStorage.removeItem("linkgate.adminKey"); sessionStorage.removeItem("linkgate.adminKey"); } catch { /* storage off */ }
  let session = { signed_in: false };
  const qrSize = main.dataset.qrSize || "256";

  function load() {
    try { return JSON.parse(localStorage.getItem(STORE)) || []; } catch { return []; }
  }
  function save(links) { localStorage.setItem(STORE, JSON.stringify(links.slice(0, 200))); }
  function remember(link) {
    const links = load().filter((l) => l.short_url !== link.short_url);
    links.unshift({ id: link.id, domain: link.domain, short_url: link.short_url, url: link.url, created_at: link.created_at });
    save(links);
  }
  // A state-changing request of a signed-in page carries the session's
  // CSRF token.
  function headers() {
    return session.csrf_token ? { "X-CSRF-Token": session.csrf_token } : {};
  }
  async function errorMessage(resp) {
    try { return (await resp.json()).error.message; } catch { return "The server answered " + resp.status + "."; }
  }
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === "class") e.className = v; else if (k.startsWith("on")) e.addEventListener(k.slice(2), v); else e.setAttribute(k, v);
    }
    for (const kid of kids) e.append(kid);
    return e;
  }

  // --- domains ----------------------------------------------------------
  // With several domains the form has a domain choice, and a link's API
  // calls name its domain (?domain=); with one they need not.
  const multiDomain = !!$("domain");
  function domainArg(sep, domain) { return multiDomain && domain ? sep + "domain=" + encodeURIComponent(domain) : ""; }
  function statsKey(id, domain) { return multiDomain && domain ? id + "@" + domain : id; }

  // --- create ---------------------------------------------------------
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
    const max = $("max_visits").value.trim();
    if (max) body.max_visits = Number(max);
    if (multiDomain) body.domain = $("domain").value;
    const button = form.querySelector("button[type=submit]");
    button.disabled = true;
    try {
      const resp = await fetch("/api/v1/links", { method: "POST", headers: Object.assign({ "Content-Type": "application/json" }, headers()), body: JSON.stringify(body) });
      if (resp.status === 401 || resp.status === 403) {
        err.textContent = await errorMessage(resp) + " Enter a key below.";
        $("mine").hidden = false;
        $("key-form").hidden = false;
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
      renderList();
    } catch (e) {
      err.textContent = "Could not reach the server: " + e.message;
    } finally {
      button.disabled = false;
    }
  });

  function showResult(link) {
    $("result-url").value = link.short_url;
    const a = $("short-link");
    a.href = link.short_url;
    a.textContent = link.short_url;
    $("result-target").textContent = link.url;
    $("qr").src = "/api/v1/links/" + encodeURIComponent(link.id) + "/qr?format=svg&size=" + qrSize + domainArg("&", link.domain);
    $("copy-status").textContent = "";
    $("result").hidden = false;
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
  }
  $("copy").hidden = false;
  $("copy").addEventListener("click", () => copy($("result-url").value));

  // A result rendered by the server (the no-JavaScript path) is remembered too.
  const created = new URLSearchParams(location.search).get("created");
  if (created && $("result-url").value) {
    remember({ id: created, short_url: $("result-url").value, url: $("result-target").textContent, created_at: null });
  }

  // --- list -------------------------------------------------------------
  // getRetrying GETs url, and asks again (twice at most) after a 503 that
  // says when to (Retry-After: a busy server sheds statistics first).
  async function getRetrying(url) {
    for (let attempt = 1; ; attempt++) {
      const resp = await fetch(url, { headers: headers(), cache: "no-store" });
      const after = parseInt(resp.headers.get("Retry-After"), 10);
      if (resp.status !== 503 || !(after >= 0) || attempt === 3) return resp;
      await new Promise((done) => setTimeout(done, Math.min(after, 5) * 1000));
    }
  }

  async function fetchStats(id, domain) {
    const resp = await getRetrying("/api/v1/links/" + encodeURIComponent(id) + "/stats" + domainArg("?", domain));
    if (resp.status === 401 || resp.status === 403) {
      $("key-form").hidden = false;
      const e = new Error(await errorMessage(resp));
      e.auth = true;
      throw e;
    }
    if (resp.status === 404) { const e = new Error("This link no longer exists."); e.gone = true; throw e; }
    if (!resp.ok) throw new Error(await errorMessage(resp));
    return resp.json();
  }

  function renderList() {
    const links = load();
    $("mine").hidden = links.length === 0;
    const tbody = $("links").tBodies[0];
    tbody.replaceChildren();
    for (const l of links) {
      const visits = el("td", { class: "num" }, "…");
      const row = el("tr", {},
        el("td", {}, el("a", { href: l.short_url }, l.short_url.replace(/^https?:\/\//, ""))),
        el("td", { class: "target" }, l.url),
        visits,
        el("td", {},
          el("button", { type: "button", class: "link", onclick: () => openStats(l.id, l.domain), "aria-label": "Statistics of " + l.short_url }, "Stats"), " ",
          el("button", { type: "button", class: "link", onclick: () => { save(load().filter((x) => x.short_url !== l.short_url)); renderList(); }, "aria-label": "Forget " + l.short_url }, "Forget")));
      tbody.append(row);
      fetchStats(l.id, l.domain).then((s) => { visits.textContent = s.total; visits.dataset.id = statsKey(l.id, l.domain); },
        (e) => { visits.textContent = e.gone ? "deleted" : "—"; visits.title = e.message; });
    }
  }

  $("key-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const resp = await fetch("/api/v1/session", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ key: $("admin-key").value }) });
    $("admin-key").value = "";
    if (resp.status !== 201) { $("form-error").textContent = await errorMessage(resp); return; }
    session = await resp.json();
    $("key-form").hidden = true;
    renderList();
  });

  // --- stats --------------------------------------------------------------
  let current = null;
  async function openStats(id, domain) {
    current = { id, domain: multiDomain ? domain : undefined };
    const key = statsKey(id, current.domain);
    if (location.hash !== "#stats/" + key) history.replaceState(null, "", "#stats/" + key);
    $("stats").hidden = false;
    $("stats-h").textContent = "Statistics of " + (current.domain ? current.domain + "/" : "") + id;
    await refreshStats();
    $("stats").focus();
  }
  async function refreshStats() {
    if (!current) return;
    $("stats-error").textContent = "";
    let s;
    try { s = await fetchStats(current.id, current.domain); } catch (e) { $("stats-error").textContent = e.message; return; }
    $("stat-total").textContent = s.total;
    $("stat-humans").textContent = s.total - s.bots;
    $("stat-bots").textContent = s.bots;
    drawChart(s.by_day);
    fillList("stat-referrers", s.referrers.map((r) => ({ name: r.host, count: r.count })));
    fillList("stat-browsers", s.browsers);
    fillList("stat-bots-list", s.bot_agents);
    fillList("stat-countries", s.countries.map((c) => ({ name: c.code, count: c.count })));
    $("countries-box").hidden = s.countries.length === 0;
    const cell = document.querySelector('td.num[data-id="' + CSS.escape(statsKey(current.id, current.domain)) + '"]');
    if (cell) cell.textContent = s.total;
  }
  function fillList(id, items) {
    const ol = $(id);
    ol.replaceChildren();
    if (items.length === 0) { ol.append(el("li", {}, el("span", {}, "none yet"))); return; }
    for (const it of items.slice(0, 10)) ol.append(el("li", {}, el("span", {}, it.name), el("span", { class: "num" }, String(it.count))));
  }
  function drawChart(byDay) {
    const counts = new Map(byDay.map((d) => [d.date, d.count]));
    const days = [];
    const today = new Date();
    for (let i = 29; i >= 0; i--) {
      const d = new Date(Date.UTC(today.getUTCFullYear(), today.getUTCMonth(), today.getUTCDate() - i));
      const key = d.toISOString().slice(0, 10);
      days.push({ key, n: counts.get(key) || 0 });
    }
    const max = Math.max(1, ...days.map((d) => d.n));
    const W = 600, H = 160, pad = 20, bw = (W - pad) / days.length;
    const ns = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(ns, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + (H + pad));
    svg.setAttribute("role", "img");
    const total = days.reduce((a, d) => a + d.n, 0);
    svg.setAttribute("aria-label", "Visits per day over the last 30 days: " + total + " in all, at most " + max + " in a day");
    const mk = (tag, attrs, text) => { const e = document.createElementNS(ns, tag); for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v); if (text != null) e.textContent = text; return e; };
    svg.append(mk("line", { x1: pad, y1: H, x2: W, y2: H }));
    svg.append(mk("text", { x: 0, y: 10, class: "axis" }, String(max)));
    svg.append(mk("text", { x: 0, y: H, class: "axis" }, "0"));
    days.forEach((d, i) => {
      const h = Math.round((d.n / max) * (H - 10));
      const r = mk("rect", { x: pad + i * bw + 1, y: H - h, width: Math.max(1, bw - 2), height: h, class: "bar" });
      r.append(mk("title", {}, d.key + ": " + d.n));
      svg.append(r);
      if (i % 7 === 0 || (i === days.length - 1 && i % 7 > 3)) svg.append(mk("text", { x: pad + i * bw, y: H + 14, class: "axis" }, d.key.slice(5)));
    });
    $("chart").replaceChildren(svg);
  }
  $("stats-refresh").addEventListener("click", refreshStats);
  $("stats-close").addEventListener("click", () => { $("stats").hidden = true; current = null; history.replaceState(null, "", location.pathname + location.search); });

  function route() {
    const m = /^#stats\/([A-Za-z0-9_-]{1,64})(?:@([a-z0-9.:-]{1,128}))?$/.exec(location.hash);
    if (m) openStats(m[1], m[2]);
  }
  window.addEventListener("hashchange", route);
  fetch("/api/v1/session", { cache: "no-store" }).then((r) => r.json()).then((s) => { session = s; }, () => {}).finally(() => { renderList(); route(); });
})();
