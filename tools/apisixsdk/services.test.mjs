// Ported from apisix-sdk's playground/tests/services.test.ts.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { c, node } from "./client.mjs";

const up = "services-upstream";
const ids = ["test-service", "test-plugin-service", "service-with-upstream", "search-service-1", "search-service-2", "multi-host-service", "websocket-service", "clone-source", "clone-target"];
const cleanup = async () => {
  for (const id of ids) await c().services.delete(id).catch(() => {});
  await c().upstreams.delete(up).catch(() => {});
};

describe("services", { concurrency: 1 }, () => {
  before(async () => {
    await cleanup();
    await c().upstreams.create({ name: up, type: "roundrobin", nodes: { [node]: 1 }, timeout: { connect: 6, send: 6, read: 6 } }, up);
  });
  after(cleanup);

  it("creates, reads, lists, updates and deletes a service", async () => {
    const s = await c().services.create({ name: "test-service", desc: "Test service", upstream_id: up, enable_websocket: false,
      labels: { env: "test", version: "1.0" } }, "test-service");
    assert.equal(s.id, "test-service");
    assert.equal(s.upstream_id, up);
    assert.equal(s.enable_websocket, false);
    assert.equal((await c().services.get("test-service")).name, "test-service");
    assert.ok((await c().services.list()).some((x) => x.id === "test-service"));
    // The original updates with PUT and only desc/websocket/labels: the
    // service loses its upstream_id, which APISIX allows.
    const upd = await c().services.update("test-service", { desc: "Updated test service", enable_websocket: true, labels: { env: "test", version: "2.0" } });
    assert.equal(upd.desc, "Updated test service");
    assert.equal(upd.enable_websocket, true);
    assert.equal(upd.labels?.version, "2.0");
    assert.equal(await c().services.exists("test-service"), true);
    assert.equal(await c().services.exists("non-existent-service"), false);
    assert.equal(await c().services.delete("test-service"), true);
    assert.equal(await c().services.exists("test-service"), false);
  });

  it("keeps plugins and an inline chash upstream", async () => {
    const s = await c().services.create({ name: "test-plugin-service", upstream_id: up, plugins: {
      "limit-conn": { conn: 100, burst: 50, default_conn_delay: 0.1, key: "remote_addr" },
      prometheus: { disable: false },
      "proxy-rewrite": { headers: { "X-Service": "test-service", "X-Version": "1.0" } } } }, "test-plugin-service");
    for (const p of ["limit-conn", "prometheus", "proxy-rewrite"]) assert.ok(s.plugins?.[p], p);
    const w = await c().services.create({ name: "service-with-upstream", upstream: { type: "chash", hash_on: "header", key: "user-id",
      nodes: { "127.0.0.1:8080": 1, "127.0.0.1:8081": 2 }, timeout: { connect: 5, send: 5, read: 5 } },
      plugins: { "response-rewrite": { headers: { "X-Upstream": "custom" } } } }, "service-with-upstream");
    assert.equal(w.upstream?.type, "chash");
    assert.equal(w.upstream?.hash_on, "header");
  });

  it("finds by name and host, pages, keeps hosts and websocket, clones", async () => {
    await c().services.create({ name: "search-user-service", upstream_id: up, hosts: ["api.example.com"] }, "search-service-1");
    await c().services.create({ name: "search-order-service", upstream_id: up, hosts: ["api.example.com"] }, "search-service-2");
    assert.ok((await c().services.findByName("search")).length >= 2);
    assert.ok((await c().services.findByHost("api.example.com")).length >= 2);
    const page = await c().services.listPaginated(1, 10);
    assert.ok(page.services.length > 0 && page.services.length <= 10);
    const m = await c().services.create({ name: "multi-host-service", upstream_id: up, hosts: ["api1.example.com", "api2.example.com"] }, "multi-host-service");
    assert.deepEqual(m.hosts, ["api1.example.com", "api2.example.com"]);
    assert.equal((await c().services.create({ name: "websocket-service", upstream_id: up, enable_websocket: true }, "websocket-service")).enable_websocket, true);
    await c().services.create({ name: "source-service", upstream_id: up, desc: "Source", plugins: { prometheus: { disable: false } } }, "clone-source");
    const cl = await c().services.clone("clone-source", { name: "cloned-service", desc: "Cloned from source" }, "clone-target");
    assert.equal(cl.id, "clone-target");
    assert.equal(cl.upstream_id, up);
  });

  it("creates a service with no fields (POST, an id assigned) and refuses a missing upstream", async () => {
    const s = await c().services.create({});
    assert.ok(s.id);
    await c().services.delete(s.id);
    await assert.rejects(c().services.get("non-existent-service"));
    await assert.rejects(c().services.create({ name: "invalid-upstream-service", upstream_id: "non-existent-upstream" }, "invalid-upstream-service"));
  });
});
