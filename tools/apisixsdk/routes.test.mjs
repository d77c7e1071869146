// Ported from apisix-sdk's playground/tests/routes.test.ts (DemoMacro/apisix-sdk):
// the same calls and expectations, run against linkgate.
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { c, node, gatewayURL, until } from "./client.mjs";

const up = "routes-upstream", svc = "routes-service", nodes = { [node]: 1 };
const cleanup = async () => {
  for (const id of ["test-route", "test-plugin-route", "search-route-1", "search-route-2", "clone-source", "clone-target", "upstream-route"])
    await c().routes.delete(id).catch(() => {});
  await c().services.delete(svc).catch(() => {});
  await c().upstreams.delete(up).catch(() => {});
};

describe("routes", { concurrency: 1 }, () => {
  before(async () => {
    await cleanup();
    await c().upstreams.create({ name: up, type: "roundrobin", nodes }, up);
    await c().services.create({ name: svc, upstream_id: up }, svc);
  });
  after(cleanup);

  it("creates, reads, lists, updates, disables and deletes a route", async () => {
    const r = await c().routes.create({ name: "test-route", desc: "Test route", uri: "/test-route", methods: ["GET", "POST"],
      service_id: svc, status: 1, labels: { env: "test", version: "1.0" } }, "test-route");
    assert.equal(r.id, "test-route");
    assert.equal(r.name, "test-route");
    assert.deepEqual(r.methods, ["GET", "POST"]);
    assert.equal(r.service_id, svc);

    const got = await c().routes.get("test-route");
    assert.equal(got.uri, "/test-route");
    assert.ok((await c().routes.list()).some((x) => x.id === "test-route"));

    const upd = await c().routes.update("test-route", { desc: "Updated test route", uri: "/test-route-updated",
      methods: ["GET", "POST", "PUT"], service_id: svc });
    assert.equal(upd.desc, "Updated test route");
    assert.equal(upd.uri, "/test-route-updated");
    assert.deepEqual(upd.methods, ["GET", "POST", "PUT"]);

    assert.equal(await c().routes.exists("test-route"), true);
    assert.equal(await c().routes.exists("non-existent-route"), false);
    assert.equal((await c().routes.disable("test-route")).status, 0);
    assert.equal((await c().routes.enable("test-route")).status, 1);
    assert.equal(await c().routes.delete("test-route"), true);
    assert.equal(await c().routes.exists("test-route"), false);
  });

  it("keeps plugins and an inline upstream", async () => {
    const r = await c().routes.create({ name: "test-plugin-route", uri: "/test-plugin-route", methods: ["GET"], service_id: svc,
      plugins: { "limit-count": { count: 100, time_window: 60, key: "remote_addr", policy: "local" },
        cors: { allow_origins: "*", allow_methods: "GET,POST,PUT,DELETE", allow_headers: "Content-Type,Authorization" },
        prometheus: { disable: false } } }, "test-plugin-route");
    for (const p of ["limit-count", "cors", "prometheus"]) assert.ok(r.plugins?.[p], p);

    const u = await c().routes.create({ name: "upstream-route", uri: "/upstream-route", methods: ["GET"],
      upstream: { type: "roundrobin", nodes, timeout: { connect: 6, send: 6, read: 6 } } }, "upstream-route");
    assert.equal(u.upstream?.type, "roundrobin");
  });

  it("finds routes by URI, method and host; pages", async () => {
    await c().routes.create({ name: "search-route-1", uri: "/api/users", methods: ["GET"], hosts: ["api.example.com"], service_id: svc }, "search-route-1");
    await c().routes.create({ name: "search-route-2", uri: "/api/orders", methods: ["POST"], hosts: ["api.example.com"], service_id: svc }, "search-route-2");
    assert.ok((await c().routes.findByUri("/api")).length >= 2);
    assert.ok((await c().routes.findByMethod("GET")).some((r) => r.methods?.includes("GET")));
    assert.ok((await c().routes.findByMethod("POST")).some((r) => r.methods?.includes("POST")));
    assert.ok((await c().routes.findByHost("api.example.com")).length >= 2);
    const page = await c().routes.listPaginated(1, 10);
    assert.ok(Array.isArray(page.routes) && page.routes.length <= 10 && page.routes.length > 0);
    assert.equal(typeof page.total, "number");
  });

  it("keeps wildcard and regex URIs, hosts, vars and remote_addrs as given", async () => {
    const cases = [
      [{ uri: "/api/v1/*" }, "uri"],
      [{ uris: ["/users/\\d+", "/orders/\\d+"] }, "uris"],
      [{ uri: "/test", hosts: ["api.example.com", "api2.example.com"] }, "hosts"],
      [{ uri: "/conditional", vars: [["http_user_agent", "~*", "curl/.*"]] }, "vars"],
      [{ uri: "/admin", remote_addrs: ["127.0.0.1", "192.168.1.0/24"] }, "remote_addrs"],
    ];
    for (const [fields, key] of cases) {
      const r = await c().routes.create({ name: `pattern-${key}`, methods: ["GET"], service_id: svc, ...fields }, `pattern-${key}`);
      assert.deepEqual(r[key], fields[key], key);
      await c().routes.delete(`pattern-${key}`);
    }
  });

  it("clones a route and allows two routes on one URI", async () => {
    await c().routes.create({ name: "source-route", uri: "/source", methods: ["GET"], service_id: svc }, "clone-source");
    const cl = await c().routes.clone("clone-source", { name: "cloned-route", uri: "/cloned", desc: "Cloned from source", service_id: svc }, "clone-target");
    assert.equal(cl.id, "clone-target");
    assert.equal(cl.uri, "/cloned");
    assert.equal(cl.desc, "Cloned from source");
    for (const id of ["conflict-route-1", "conflict-route-2"]) {
      const r = await c().routes.create({ name: id, uri: "/conflict", methods: ["GET"], service_id: svc }, id);
      assert.equal(r.uri, "/conflict");
    }
    for (const id of ["conflict-route-1", "conflict-route-2"]) await c().routes.delete(id);
    const st = await c().routes.getStatistics();
    assert.ok(st.total > 0);
  });

  it("creates in a batch, exports and imports OpenAPI", async () => {
    const res = await c().routes.batchOperations([1, 2].map((i) => ({ operation: "create",
      data: { name: `batch-route-${i}`, uri: `/batch/${i}`, methods: ["GET"], upstream: { type: "roundrobin", nodes } } })));
    assert.equal(res.total, 2);
    assert.equal(res.successful, 2, JSON.stringify(res.results));
    for (const x of res.results) await c().routes.delete(x.data.id);

    const imp = await c().routes.importFromOpenAPI({ openapi: "3.0.0", info: { title: "Test API", version: "1.0.0" }, paths: {
      "/openapi/users": { get: { operationId: "getUsers", "x-apisix-upstream": { type: "roundrobin", nodes }, "x-apisix-plugins": { cors: { allow_origins: "*" } } } },
      "/openapi/users/{id}": { get: { operationId: "getUserById", "x-apisix-upstream": { type: "roundrobin", nodes } } },
    } }, { strategy: "merge", validateBeforeImport: true });
    assert.equal(imp.total, 2);
    assert.equal(imp.created, 2, JSON.stringify(imp));
    for (const id of ["getUsers", "getUserById"]) await c().routes.delete(id).catch(() => {});
    const spec = await c().routes.exportToOpenAPI({ title: "Test Export API", version: "1.0.0", includeDisabled: false });
    assert.equal(spec.openapi, "3.0.0");
  });

  it("refuses what APISIX refuses", async () => {
    await assert.rejects(c().routes.get("non-existent-route"));
    await assert.rejects(c().routes.create({}));
  });

  it("routes traffic the SDK configured (linkgate addition)", async () => {
    await c().routes.create({ name: "traffic", uri: "/sdk-traffic", methods: ["GET"], service_id: svc,
      plugins: { "proxy-rewrite": { uri: "/hello" } } }, "test-route");
    let body = "";
    await until("the route to serve", async () => {
      const res = await fetch(gatewayURL + "/sdk-traffic");
      body = await res.text();
      return res.status === 200;
    });
    assert.equal(body, "hello from upstream");
  });
});
