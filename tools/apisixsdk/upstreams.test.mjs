// Ported from apisix-sdk's playground/tests/upstreams.test.ts.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { c, node } from "./client.mjs";

const cleanup = async () => {
  for (const id of ["test-upstream", "test-cluster-upstream", "health-check-upstream", "search-test-1", "search-test-2", "clone-source", "clone-target"])
    await c().upstreams.delete(id).catch(() => {});
};

describe("upstreams", { concurrency: 1 }, () => {
  before(cleanup);
  after(cleanup);

  it("creates, reads, lists, updates and deletes an upstream", async () => {
    const u = await c().upstreams.create({ name: "test-upstream", desc: "Test upstream", type: "roundrobin",
      nodes: { [node]: 1, "127.0.0.2:80": 1 }, timeout: { connect: 6, send: 6, read: 6 } }, "test-upstream");
    assert.equal(u.id, "test-upstream");
    assert.equal(u.type, "roundrobin");
    assert.equal((await c().upstreams.get("test-upstream")).name, "test-upstream");
    assert.ok((await c().upstreams.list()).some((x) => x.id === "test-upstream"));
    const upd = await c().upstreams.update("test-upstream", { name: "test-upstream-updated", desc: "Updated test upstream",
      type: "roundrobin", nodes: { [node]: 1 }, timeout: { connect: 10, send: 10, read: 10 } });
    assert.equal(upd.desc, "Updated test upstream");
    assert.equal(upd.timeout?.connect, 10);
    assert.equal(await c().upstreams.exists("test-upstream"), true);
    assert.equal(await c().upstreams.exists("non-existent-upstream"), false);
    assert.equal(await c().upstreams.delete("test-upstream"), true);
    assert.equal(await c().upstreams.exists("test-upstream"), false);
  });

  it("adds, reweighs and removes nodes (PATCH, a null node removes it)", async () => {
    await c().upstreams.create({ name: "test-cluster-upstream", type: "roundrobin", nodes: { "127.0.0.1:8080": 1 } }, "test-cluster-upstream");
    let u = await c().upstreams.addNode("test-cluster-upstream", "127.0.0.1", 8081, 2);
    assert.deepEqual(u.nodes, { "127.0.0.1:8080": 1, "127.0.0.1:8081": 2 });
    u = await c().upstreams.updateNodeWeight("test-cluster-upstream", "127.0.0.1", 8080, 3);
    assert.equal(u.nodes["127.0.0.1:8080"], 3);
    u = await c().upstreams.removeNode("test-cluster-upstream", "127.0.0.1", 8081);
    assert.deepEqual(u.nodes, { "127.0.0.1:8080": 3 });
    await assert.rejects(c().upstreams.addNode("non-existent-upstream", "127.0.0.1", 8080));
  });

  it("keeps active health checks and array nodes", async () => {
    const u = await c().upstreams.create({ name: "health-check-upstream", type: "roundrobin",
      nodes: [{ host: "127.0.0.1", port: 8080, weight: 1 }, { host: "127.0.0.1", port: 8081, weight: 1 }],
      checks: { active: { type: "http", http_path: "/health", timeout: 5, healthy: { interval: 10, successes: 2 }, unhealthy: { interval: 5, http_failures: 3 } } } },
      "health-check-upstream");
    assert.equal(u.checks?.active?.type, "http");
    assert.equal(u.checks?.active?.http_path, "/health");
    assert.equal(u.nodes.length, 2);
  });

  it("finds by name and type (chash), pages, clones", async () => {
    await c().upstreams.create({ name: "search-test-roundrobin", type: "roundrobin", nodes: { "example.com:80": 1 } }, "search-test-1");
    await c().upstreams.create({ name: "search-test-chash", type: "chash", key: "remote_addr", nodes: { "example.com:80": 1 } }, "search-test-2");
    assert.ok((await c().upstreams.findByName("search-test")).length >= 2);
    assert.ok((await c().upstreams.findByType("chash")).some((u) => u.id === "search-test-2"));
    const page = await c().upstreams.listPaginated(1, 10); // the original asks for 5: APISIX 3.x (and linkgate) refuse page_size < 10
    assert.ok(page.upstreams.length > 0 && page.upstreams.length <= 10);
    await c().upstreams.create({ name: "source-upstream", type: "roundrobin", nodes: { "example.com:80": 1 } }, "clone-source");
    const cl = await c().upstreams.clone("clone-source", { name: "cloned-upstream", desc: "Cloned from source" }, "clone-target");
    assert.equal(cl.id, "clone-target");
    assert.equal(cl.desc, "Cloned from source");
    assert.equal((await c().upstreams.getStatistics()).typeDistribution.length >= 2, true);
  });

  it("refuses what APISIX refuses", async () => {
    await assert.rejects(c().upstreams.get("non-existent-upstream"));
    await assert.rejects(c().upstreams.create({}));
  });
});
