// Ported from apisix-sdk's playground/tests/consumer-groups.test.ts,
// global-rules.test.ts, plugin-configs.test.ts and ssl.test.ts.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { c, certFile, keyFile } from "./client.mjs";

const lc = (count) => ({ "limit-count": { count, time_window: 60 } });

describe("consumer groups", { concurrency: 1 }, () => {
  const ids = ["test-consumer-group", "test-group-plugins", "test-group-labels", "test-group-clone", "test-group-clone-cloned", "test-force-delete"];
  const cleanup = async () => { for (const id of ids) await c().consumerGroups.delete(id).catch(() => {}); };
  before(cleanup);
  after(cleanup);

  it("creates, reads, updates, patches and deletes a group", async () => {
    const g = await c().consumerGroups.create({ desc: "Test consumer group", plugins: lc(100) }, "test-consumer-group");
    assert.equal(g.id, "test-consumer-group");
    assert.equal((await c().consumerGroups.get("test-consumer-group")).id, "test-consumer-group");
    assert.equal(await c().consumerGroups.exists("test-consumer-group"), true);
    assert.equal(await c().consumerGroups.exists("non-existent-group"), false);
    assert.equal((await c().consumerGroups.update("test-consumer-group", { desc: "Updated", plugins: lc(100) })).desc, "Updated");
    assert.equal((await c().consumerGroups.patch("test-consumer-group", { desc: "Patched", plugins: lc(100) })).desc, "Patched");
    assert.equal(await c().consumerGroups.delete("test-consumer-group"), true);
    assert.equal(await c().consumerGroups.exists("test-consumer-group"), false);
  });

  it("adds, updates and removes plugins and labels; finds by them", async () => {
    await c().consumerGroups.create({ desc: "plugins", plugins: { cors: { allow_origins: "*" } } }, "test-group-plugins");
    let g = await c().consumerGroups.addPlugin("test-group-plugins", "cors", { allow_origins: "*", allow_methods: "GET,POST" });
    assert.equal(g.plugins.cors.allow_origins, "*");
    g = await c().consumerGroups.updatePlugin("test-group-plugins", "cors", { allow_origins: "https://example.com" });
    assert.equal(g.plugins.cors.allow_origins, "https://example.com");
    g = await c().consumerGroups.addPlugin("test-group-plugins", "limit-count", { count: 50, time_window: 60 });
    // The SDK removes a plugin or label by PATCHing the object without it;
    // APISIX's PATCH merges objects (core.table.merge), so it stays, as
    // the original cases allow. Only a null value removes a key.
    g = await c().consumerGroups.removePlugin("test-group-plugins", "cors");
    assert.ok(g.plugins.cors);
    g = await c().consumerGroups.patch("test-group-plugins", { plugins: { cors: null } });
    assert.equal(g.plugins.cors, undefined);
    assert.ok((await c().consumerGroups.findByPlugin("limit-count")).some((x) => x.id === "test-group-plugins"));
    await assert.rejects(c().consumerGroups.updatePlugin("test-group-plugins", "non-existent-plugin", {}));
    assert.equal((await c().consumerGroups.removePlugin("test-group-plugins", "non-existent-plugin")).id, "test-group-plugins");

    await c().consumerGroups.create({ desc: "labels", plugins: { cors: { allow_origins: "*" } } }, "test-group-labels");
    assert.equal((await c().consumerGroups.addLabel("test-group-labels", "environment", "test")).labels.environment, "test");
    await c().consumerGroups.addLabel("test-group-labels", "team", "backend");
    assert.equal((await c().consumerGroups.removeLabel("test-group-labels", "environment")).labels?.environment, "test");
    assert.ok((await c().consumerGroups.findByLabel("team", "backend")).some((x) => x.id === "test-group-labels"));
  });

  it("clones, pages, counts and force-deletes", async () => {
    await c().consumerGroups.create({ desc: "Source", plugins: lc(100), labels: { type: "original" } }, "test-group-clone");
    const cl = await c().consumerGroups.clone("test-group-clone", { desc: "Cloned group", labels: { type: "cloned" } }, "test-group-clone-cloned");
    assert.equal(cl.labels?.type, "cloned");
    assert.ok(cl.plugins?.["limit-count"]);
    const page = await c().consumerGroups.listPaginated(1, 10);
    assert.ok(page.consumerGroups.length > 0 && typeof page.total === "number" && typeof page.hasMore === "boolean");
    assert.ok((await c().consumerGroups.getStatistics()).total > 0);
    await c().consumerGroups.create({ desc: "force", plugins: { cors: { allow_origins: "*" } } }, "test-force-delete");
    assert.equal(await c().consumerGroups.delete("test-force-delete", { force: true }), true);
  });
});

describe("global rules", { concurrency: 1 }, () => {
  const ids = ["test-global-rule", "test-global-rule-plugins", "test-global-rule-clone", "test-global-rule-clone-cloned", "non-existent-rule", "test-force-delete"];
  const cleanup = async () => { for (const id of ids) await c().globalRules.delete(id).catch(() => {}); };
  before(cleanup);
  after(cleanup);

  it("creates, reads, updates, patches and deletes a rule", async () => {
    assert.ok(Array.isArray(await c().globalRules.list()));
    assert.equal((await c().globalRules.create({ plugins: lc(100) }, "test-global-rule")).id, "test-global-rule");
    assert.equal((await c().globalRules.get("test-global-rule")).id, "test-global-rule");
    assert.equal(await c().globalRules.exists("test-global-rule"), true);
    assert.equal(await c().globalRules.exists("non-existent-rule"), false);
    const upd = await c().globalRules.update("test-global-rule", { plugins: { ...lc(200), cors: { allow_origins: "*" } } });
    assert.equal(upd.plugins["limit-count"].count, 200);
    const p = await c().globalRules.patch("test-global-rule", { plugins: { cors: { allow_origins: "https://example.com" } } });
    assert.equal(p.plugins.cors.allow_origins, "https://example.com");
    await assert.rejects(c().globalRules.get("non-existent-rule"));
    assert.ok(await c().globalRules.update("non-existent-rule", { plugins: { cors: { allow_origins: "*" } } }));
    await c().globalRules.delete("non-existent-rule");
    await assert.rejects(c().globalRules.delete("non-existent-rule"));
    assert.equal(await c().globalRules.delete("test-global-rule"), true);
    assert.equal(await c().globalRules.exists("test-global-rule"), false);
  });

  it("adds, updates and removes a plugin; finds by plugin; clones; pages", async () => {
    await c().globalRules.create({ plugins: { cors: { allow_origins: "*" } } }, "test-global-rule-plugins");
    assert.equal((await c().globalRules.addPlugin("test-global-rule-plugins", "limit-count", { count: 50, time_window: 60 })).plugins["limit-count"].count, 50);
    assert.equal((await c().globalRules.updatePlugin("test-global-rule-plugins", "limit-count", { count: 75 })).plugins["limit-count"].count, 75);
    assert.ok((await c().globalRules.findByPlugin("cors")).some((r) => r.id === "test-global-rule-plugins"));
    assert.ok((await c().globalRules.removePlugin("test-global-rule-plugins", "limit-count")).plugins["limit-count"]); // merged, as above
    assert.equal((await c().globalRules.patch("test-global-rule-plugins", { plugins: { "limit-count": null } })).plugins["limit-count"], undefined);
    await assert.rejects(c().globalRules.updatePlugin("test-global-rule-plugins", "non-existent-plugin", { config: "value" }));
    await c().globalRules.create({ plugins: { ...lc(100), cors: { allow_origins: "*" } } }, "test-global-rule-clone");
    const cl = await c().globalRules.clone("test-global-rule-clone", { plugins: { cors: { allow_origins: "https://example.com" } } }, "test-global-rule-clone-cloned");
    assert.equal(cl.plugins.cors.allow_origins, "https://example.com");
    const page = await c().globalRules.listPaginated(1, 10);
    assert.ok(page.globalRules.length > 0 && typeof page.total === "number");
    await c().globalRules.create({ plugins: { cors: { allow_origins: "*" } } }, "test-force-delete");
    assert.equal(await c().globalRules.delete("test-force-delete", { force: true }), true);
  });
});

describe("plugin configs", { concurrency: 1 }, () => {
  const ids = ["test-plugin-config", "test-security-config", "search-config-1", "search-config-2", "clone-source", "clone-target", "batch-config-1", "batch-config-2", "imported-config"];
  const cleanup = async () => { for (const id of ids) await c().pluginConfigs.delete(id).catch(() => {}); };
  before(cleanup);
  after(cleanup);

  it("creates, reads, lists, updates and deletes a plugin config", async () => {
    const cors = { allow_origins: "*", allow_methods: "GET,POST,PUT,DELETE", allow_headers: "Content-Type,Authorization" };
    const pc = await c().pluginConfigs.create({ desc: "Test plugin configuration", plugins: {
      "limit-count": { count: 100, time_window: 60, key: "remote_addr", policy: "local" }, cors }, labels: { env: "test", version: "1.0" } }, "test-plugin-config");
    assert.equal(pc.id, "test-plugin-config");
    assert.ok((await c().pluginConfigs.get("test-plugin-config")).plugins["limit-count"]);
    assert.ok((await c().pluginConfigs.list()).some((x) => x.id === "test-plugin-config"));
    const upd = await c().pluginConfigs.update("test-plugin-config", { desc: "Updated", plugins: {
      "limit-count": { count: 200, time_window: 60, key: "remote_addr", policy: "local" }, cors, prometheus: { disable: false } } });
    assert.equal(upd.plugins["limit-count"].count, 200);
    assert.ok(upd.plugins.prometheus);
    assert.equal(await c().pluginConfigs.delete("test-plugin-config"), true);
    assert.equal((await c().pluginConfigs.list()).some((x) => x.id === "test-plugin-config"), false);
  });

  it("adds, updates, toggles (_meta.disable) and removes a plugin", async () => {
    await c().pluginConfigs.create({ desc: "Security", plugins: { "ip-restriction": { whitelist: ["127.0.0.1", "192.168.1.0/24"] } } }, "test-security-config");
    let pc = await c().pluginConfigs.addPlugin("test-security-config", "cors", { allow_origins: "*", allow_methods: "GET,POST" });
    assert.ok(pc.plugins.cors && pc.plugins["ip-restriction"]);
    pc = await c().pluginConfigs.updatePlugin("test-security-config", "cors", { allow_origins: "https://example.com", allow_methods: "GET,POST,PUT", allow_credentials: true });
    assert.equal(pc.plugins.cors.allow_credentials, true);
    assert.equal((await c().pluginConfigs.togglePlugin("test-security-config", "cors", false)).plugins.cors._meta.disable, true);
    assert.equal((await c().pluginConfigs.togglePlugin("test-security-config", "cors", true)).plugins.cors._meta.disable, false);
    pc = await c().pluginConfigs.removePlugin("test-security-config", "cors");
    assert.ok(pc.plugins.cors && pc.plugins["ip-restriction"]); // merged, as above
  });

  it("finds by label, pages, clones, batch-creates, exports and imports", async () => {
    await c().pluginConfigs.create({ desc: "Search 1", plugins: { "limit-req": { rate: 10, burst: 20, key: "remote_addr" } },
      labels: { type: "rate-limit", env: "production" } }, "search-config-1");
    await c().pluginConfigs.create({ desc: "Search 2", plugins: { "limit-count": { count: 1000, time_window: 3600, key: "consumer_name" } },
      labels: { type: "rate-limit", env: "staging" } }, "search-config-2");
    assert.ok((await c().pluginConfigs.getByLabel("type", "rate-limit")).length >= 2);
    assert.ok((await c().pluginConfigs.getByLabel("env", "production")).some((x) => x.id === "search-config-1"));
    assert.ok((await c().pluginConfigs.list({ page: 1, page_size: 10 })).length <= 10);
    await c().pluginConfigs.create({ desc: "Source", plugins: { prometheus: { disable: false }, "response-rewrite": { headers: { "X-Server": "APISIX" } } },
      labels: { env: "source" } }, "clone-source");
    const cl = await c().pluginConfigs.clone("clone-source", "clone-target", { desc: "Cloned config", labels: { env: "cloned" } });
    assert.equal(cl.labels.env, "cloned");
    assert.ok(cl.plugins.prometheus);
    const b = await c().pluginConfigs.batchCreate([1, 2].map((i) => ({ id: `batch-config-${i}`, data: { desc: `Batch ${i}`, plugins: { prometheus: { disable: false } } } })));
    assert.deepEqual(b.map((x) => x.id), ["batch-config-1", "batch-config-2"]);
    const exported = await c().pluginConfigs.export("test-security-config");
    assert.equal(JSON.parse(exported).id, "test-security-config");
    assert.equal((await c().pluginConfigs.import(exported, "imported-config")).id, "imported-config");
  });

  it("refuses what APISIX refuses", async () => {
    await assert.rejects(c().pluginConfigs.get("non-existent-config"));
    await assert.rejects(c().pluginConfigs.create({}));
  });
});

describe("ssl", { concurrency: 1 }, () => {
  const cert = readFileSync(certFile, "utf8"), key = readFileSync(keyFile, "utf8");
  const ids = ["test-ssl-cert", "test-ssl-sni", "test-ssl-clone", "test-ssl-clone-cloned"];
  const cleanup = async () => { for (const id of ids) await c().ssl.delete(id).catch(() => {}); };
  before(cleanup);
  after(cleanup);

  it("creates with SNIs, checks, finds, disables and enables a certificate", async () => {
    assert.ok(Array.isArray(await c().ssl.list()));
    const s = await c().ssl.create({ cert, key, snis: ["127.0.0.1", "localhost", "apisix-sdk.test"] }, "test-ssl-sni");
    assert.equal(s.id, "test-ssl-sni");
    assert.deepEqual(s.snis, ["127.0.0.1", "localhost", "apisix-sdk.test"]);
    // Deliberate difference: APISIX answers a write and a list with the
    // (encrypted) key; linkgate never answers one (docs/gateway.md).
    const n = await c().ssl.create({ cert, key, snis: ["example.com"] }, "test-ssl-cert");
    assert.equal(n.cert, cert);
    assert.equal(n.key, undefined);
    assert.equal(await c().ssl.exists("test-ssl-cert"), true);
    assert.equal(await c().ssl.exists("non-existent-ssl"), false);
    assert.ok((await c().ssl.findBySNI("127.0.0.1")).some((x) => x.id === "test-ssl-sni"));
    assert.equal((await c().ssl.disable("test-ssl-cert")).status, 0);
    assert.equal((await c().ssl.enable("test-ssl-cert")).status, 1);
    const exp = await c().ssl.checkExpiration("test-ssl-cert");
    assert.equal(exp.isExpired, false);
  });

  it("clones a certificate given its key (the original's other clone case), and pages", async () => {
    await c().ssl.create({ cert, key, snis: ["source.apisix-sdk.test"] }, "test-ssl-clone");
    // Cloning without a key reads it back from a list, which linkgate never
    // answers: the SDK then asks for one.
    await assert.rejects(c().ssl.clone("test-ssl-clone", { snis: ["cloned.apisix-sdk.test"] }, "test-ssl-clone-cloned"), /no replacement key provided/);
    const cl = await c().ssl.clone("test-ssl-clone", { snis: ["cloned.apisix-sdk.test"], key }, "test-ssl-clone-cloned");
    assert.deepEqual(cl.snis, ["cloned.apisix-sdk.test"]);
    assert.equal(cl.cert, cert);
    const page = await c().ssl.listPaginated(1, 10);
    assert.ok(page.certificates.length > 0 && typeof page.total === "number");
  });
});
