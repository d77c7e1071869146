// The client under test: apisix-sdk (npm), a published TypeScript client of
// APISIX's admin and control APIs, pointed at a live `linkgate gateway` by
// cmd/linkgate's TestAPISIXSDK through the environment.
//
// apisix-sdk 0.0.6 keeps every GET answer for 30 s and does not forget it on
// a write, so a read after a write would see its own cache, not the gateway
// (against APISIX too). c() empties that cache before each call: the tests
// check the gateway's answers.
import { ApisixSDK } from "apisix-sdk";

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`${name} is not set (TestAPISIXSDK sets it)`);
  return v;
};

const sdk = new ApisixSDK({
  adminAPI: { baseURL: env("APISIX_ADMIN_URL"), apiKey: env("APISIX_ADMIN_KEY"), timeout: 10000 },
  controlAPI: { baseURL: env("APISIX_CONTROL_URL"), timeout: 10000 },
});

export function c() {
  sdk.getClient().clearCache();
  return sdk;
}

// node is the one upstream node every case points at: the test's own HTTP
// server on loopback (the original cases use httpbin.org, which this
// machine cannot reach and which nothing here sends traffic to).
export const node = env("APISIX_UPSTREAM");
export const gatewayURL = env("APISIX_GATEWAY_URL");
export const certFile = env("APISIX_CERT_FILE");
export const keyFile = env("APISIX_KEY_FILE");

// until polls fn until it returns true: a write through the admin API
// reaches the data plane when the gateway's watch swaps its router, not
// when the admin call answers (as in APISIX).
export async function until(what, fn, ms = 10000) {
  const end = Date.now() + ms;
  for (;;) {
    if (await fn()) return;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
