// Ported from apisix-sdk's playground/tests/consumers.test.ts and
// credentials.test.ts (APISIX 3.x credentials).
import { describe, it, before, after } from "node:test";
import assert from "node:assert/strict";
import { c, gatewayURL, node, until } from "./client.mjs";

const users = ["test_consumer", "test_auth_consumer", "plugin_consumer", "duplicate_consumer", "group_consumer", "search_consumer_1", "search_consumer_2", "test_consumer_for_credentials"];
const cleanup = async () => {
  for (const u of users) await c().consumers.delete(u).catch(() => {});
  await c().consumerGroups.delete("test-consumer-group").catch(() => {});
  await c().routes.delete("sdk-key-auth").catch(() => {});
};

describe("consumers", { concurrency: 1 }, () => {
  before(cleanup);
  after(cleanup);

  it("creates, reads, lists, updates and deletes a consumer", async () => {
    const k = await c().consumers.create({ username: "test_consumer", desc: "Test consumer" });
    assert.equal(k.username, "test_consumer");
    assert.equal((await c().consumers.get("test_consumer")).desc, "Test consumer");
    assert.ok((await c().consumers.list()).some((x) => x.username === "test_consumer"));
    const upd = await c().consumers.update("test_consumer", { username: "test_consumer", desc: "Updated", labels: { env: "test", version: "2.0" } });
    assert.equal(upd.labels?.version, "2.0");
    assert.equal(await c().consumers.exists("test_consumer"), true);
    assert.equal(await c().consumers.exists("non-existent-consumer"), false);
    assert.equal(await c().consumers.delete("test_consumer"), true);
    assert.equal(await c().consumers.exists("test_consumer"), false);
  });

  it("adds key-auth, basic-auth and jwt-auth credentials", async () => {
    await c().consumers.create({ username: "test_auth_consumer" });
    const made = [
      ["key-auth", await c().consumers.addKeyAuth("test_auth_consumer", "test-api-key-123", "key-auth-credential")],
      ["basic-auth", await c().consumers.addBasicAuth("test_auth_consumer", "testuser", "testpass", "basic-auth-credential")],
      ["jwt-auth", await c().consumers.addJwtAuth("test_auth_consumer", "jwt-key", "jwt-secret", "jwt-auth-credential")],
    ];
    for (const [plugin, cred] of made) assert.ok(cred.plugins?.[plugin], plugin);
    for (const id of ["key-auth-credential", "basic-auth-credential", "jwt-auth-credential"])
      assert.equal(await c().consumers.deleteCredential("test_auth_consumer", id), true);
  });

  it("manages a custom credential", async () => {
    const cr = await c().consumers.createCredential("test_auth_consumer", "custom-credential",
      { plugins: { "key-auth": { key: "custom-api-key" } }, desc: "Custom credential for testing" });
    assert.equal(cr.id, "custom-credential");
    assert.equal((await c().consumers.getCredential("test_auth_consumer", "custom-credential")).desc, "Custom credential for testing");
    assert.ok((await c().consumers.listCredentials("test_auth_consumer")).some((x) => x.id === "custom-credential"));
    assert.equal((await c().consumers.updateCredential("test_auth_consumer", "custom-credential", { desc: "Updated custom credential" })).desc, "Updated custom credential");
    assert.equal(await c().consumers.deleteCredential("test_auth_consumer", "custom-credential"), true);
  });

  it("keeps consumer plugins, a group, labels; pages", async () => {
    const p = await c().consumers.create({ username: "plugin_consumer", plugins: { "key-auth": { key: "plugin_consumer_key" },
      "basic-auth": { username: "plugin_consumer", password: "test123" } } });
    assert.ok(p.plugins?.["key-auth"] && p.plugins?.["basic-auth"]);
    await c().consumerGroups.create({ desc: "group", plugins: { "limit-count": { count: 500, time_window: 60 } } }, "test-consumer-group");
    assert.equal((await c().consumers.create({ username: "group_consumer", group_id: "test-consumer-group" })).group_id, "test-consumer-group");
    await c().consumers.create({ username: "search_consumer_1", labels: { tier: "premium", env: "test" } });
    await c().consumers.create({ username: "search_consumer_2", labels: { tier: "basic", env: "test" } });
    assert.ok((await c().consumers.findByLabel("tier", "premium")).some((x) => x.username === "search_consumer_1"));
    assert.ok((await c().consumers.findByLabel("tier", "basic")).some((x) => x.username === "search_consumer_2"));
    const page = await c().consumers.listPaginated(1, 10);
    assert.ok(page.consumers.length > 0 && page.consumers.length <= 10);
    assert.equal(typeof page.total, "number");
  });

  it("overwrites a consumer on a second create (3.x) and refuses what APISIX refuses", async () => {
    await c().consumers.create({ username: "duplicate_consumer", desc: "first" });
    assert.equal((await c().consumers.create({ username: "duplicate_consumer", desc: "Duplicate consumer" })).desc, "Duplicate consumer");
    await assert.rejects(c().consumers.get("non-existent-consumer"));
    await assert.rejects(c().consumers.create({}));
    await assert.rejects(c().consumers.getCredential("non-existent-consumer", "some-credential"));
  });

  it("credentials: create, read, update, list, exists, delete; PUT of a missing one creates it", async () => {
    const user = "test_consumer_for_credentials";
    await c().consumers.create({ username: user });
    const cases = [["key-auth", { key: "test-api-key-123" }], ["basic-auth", { username: "testuser", password: "testpass123" }],
      ["jwt-auth", { key: "jwt-test-key", secret: "jwt-test-secret" }]];
    for (const [plugin, conf] of cases) {
      // credentials.create(user, data, id) in apisix-sdk 0.0.6 puts the id
      // in the path twice (…/credentials/ID/ID); consumers.createCredential
      // sends the same PUT to the right path.
      const cr = await c().consumers.createCredential(user, `test-${plugin}-credential`, { plugins: { [plugin]: conf } });
      assert.equal(cr.id, `test-${plugin}-credential`);
      assert.ok((await c().credentials.get(user, `test-${plugin}-credential`)).plugins?.[plugin], plugin);
    }
    const upd = await c().credentials.update(user, "test-key-auth-credential", { plugins: { "key-auth": { key: "updated-api-key-456" } } });
    assert.equal(typeof upd.plugins["key-auth"].key, "string");
    assert.ok((await c().credentials.list(user)).some((x) => x.id === "test-key-auth-credential"));
    assert.equal(await c().credentials.exists(user, "test-key-auth-credential"), true);
    assert.equal(await c().credentials.exists(user, "non-existent-credential"), false);
    await assert.rejects(c().credentials.get(user, "non-existent-credential"));
    assert.equal((await c().credentials.update(user, "non-existent-credential", { plugins: { "key-auth": { key: "test-key" } } })).id, "non-existent-credential");
    for (const [plugin] of cases) assert.equal(await c().credentials.delete(user, `test-${plugin}-credential`), true);
  });

  it("a key-auth credential made by the SDK lets a request through (linkgate addition)", async () => {
    const user = "test_consumer_for_credentials";
    await c().consumers.createCredential(user, "sdk-traffic-key", { plugins: { "key-auth": { key: "sdk-made-key" } } });
    await c().routes.create({ uri: "/sdk-auth", plugins: { "key-auth": {}, "proxy-rewrite": { uri: "/hello" } },
      upstream: { type: "roundrobin", nodes: { [node]: 1 } } }, "sdk-key-auth");
    await until("the key to open the route", async () => (await fetch(gatewayURL + "/sdk-auth", { headers: { apikey: "sdk-made-key" } })).status === 200);
    assert.equal((await fetch(gatewayURL + "/sdk-auth", { headers: { apikey: "wrong" } })).status, 401);
  });
});
