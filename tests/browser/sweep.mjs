// Opens a sweep report (`ddscope lab sweep`) in Debian's headless Chromium and
// prints what it shows as JSON: page errors, every chart canvas (marks drawn,
// share of inked pixels, its title), the cells table as rendered text
// (header and rows) and every run's status.
//   node sweep.mjs URL SCREENSHOT.png [WAIT_MS]
import { chromium } from "playwright-core";

const [url, shot, waitMs = "1000"] = process.argv.slice(2);
if (!url || !shot) {
  console.error("usage: node sweep.mjs URL SCREENSHOT.png [WAIT_MS]");
  process.exit(2);
}
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  const errors = [];
  const requests = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") errors.push(m.type() + ": " + m.text()); });
  page.on("request", (r) => { if (!r.url().startsWith("file:") && !r.url().startsWith("data:")) requests.push(r.url()); });
  await page.goto(url, { waitUntil: "load" });
  await page.waitForTimeout(Number(waitMs));
  const charts = await page.$$eval("canvas.ddscope-chart", (cs) => cs.map((c) => {
    const d = c.getContext("2d").getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200)) ink++;
    const box = c.closest("[data-plot]");
    return { points: Number(c.dataset.points || 0), ink: ink / (d.length / 4), plot: box ? box.dataset.plot : "" };
  }));
  const table = await page.$$eval("table.sweep-table tr", (trs) => trs.map((tr) => [...tr.children].map((td) => td.textContent)));
  const runs = await page.$$eval("#runs tr", (trs) => trs.slice(1).map((tr) => [...tr.children].map((td) => td.textContent)));
  const machine = await page.$eval("#machine", (e) => e.textContent).catch(() => null);
  await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify({ errors, requests, charts, table, runs, machine, title: await page.title() }));
} finally {
  await browser.close();
}
