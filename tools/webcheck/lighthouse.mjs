// Runs Lighthouse (performance, accessibility, best practices, SEO) on
// pages of a running linkgate serve, as phones and desktops see them, in
// one Chromium (CHROME_PATH: Debian's), and prints every score as JSON
// lines: {"page": …, "form_factor": …, "category": …, "score": 0.97,
// "benchmark_index": …} (Lighthouse's measure of the host's CPU at the
// start of the run).
// The Go test (cmd/linkgate/lighthouse_test.go) starts the server, signs
// in, and decides what passes and what to run again; this script only
// runs Lighthouse.
//
//	node lighthouse.mjs COOKIE mobile|desktop=URL...
import lighthouse from "lighthouse";
import desktopConfig from "lighthouse/core/config/desktop-config.js";
import * as chromeLauncher from "chrome-launcher";

const [cookie, ...audits] = process.argv.slice(2);
const chrome = await chromeLauncher.launch({
  chromePath: process.env.CHROME_PATH,
  chromeFlags: ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
let failed = false;
try {
  for (const audit of audits) {
    const i = audit.indexOf("=");
    const formFactor = audit.slice(0, i), url = audit.slice(i + 1);
    const config = formFactor === "desktop" ? desktopConfig : undefined;
    const r = await lighthouse(url, {
      port: chrome.port, output: "json", logLevel: "error",
      onlyCategories: ["performance", "accessibility", "best-practices", "seo"],
      extraHeaders: cookie ? { Cookie: cookie } : undefined,
    }, config);
    for (const [id, c] of Object.entries(r.lhr.categories)) {
      const below = Object.values(r.lhr.audits).filter((a) => c.auditRefs.some((ref) => ref.id === a.id && ref.weight > 0) && a.score !== null && a.score < 1).map((a) => a.id);
      const metrics = id !== "performance" ? undefined : Object.fromEntries(["first-contentful-paint", "largest-contentful-paint", "total-blocking-time", "cumulative-layout-shift", "speed-index"]
        .map((m) => [m, Math.round(r.lhr.audits[m].numericValue)]));
      console.log(JSON.stringify({ page: url, form_factor: formFactor, category: id, score: c.score, below, metrics, benchmark_index: Math.round(r.lhr.environment.benchmarkIndex) }));
    }
    if (r.lhr.runtimeError) { console.error(url, formFactor, r.lhr.runtimeError.message); failed = true; }
  }
} finally {
  await chrome.kill();
}
process.exit(failed ? 1 : 0);
