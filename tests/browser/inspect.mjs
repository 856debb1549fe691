// Opens a page in Debian's headless Chromium, waits for the charts, takes a
// screenshot and prints what the page shows as JSON:
//   node inspect.mjs URL SCREENSHOT.png [WAIT_MS] [SELECTOR_TEXT...]
// For every canvas.ddscope-chart: its data-points attribute and the share of
// non-background pixels (so an empty or blank chart is visible to the test).
import { chromium } from "playwright-core";

const [url, shot, waitMs = "1500", ...texts] = process.argv.slice(2);
if (!url || !shot) {
  console.error("usage: node inspect.mjs URL SCREENSHOT.png [WAIT_MS] [TEXT...]");
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
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  await page.goto(url, { waitUntil: "load" });
  await page.waitForTimeout(Number(waitMs));
  const charts = await page.$$eval("canvas.ddscope-chart", (cs) => cs.map((c) => {
    const ctx = c.getContext("2d");
    const d = ctx.getImageData(0, 0, c.width, c.height).data;
    let ink = 0;
    for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 200 || d[i + 1] < 200 || d[i + 2] < 200)) ink++;
    const section = c.closest("section");
    return { points: Number(c.dataset.points || 0), ink: ink / (d.length / 4), width: c.width, height: c.height,
             section: section ? (section.dataset.topic || section.id || "") : "" };
  }));
  const text = await page.evaluate(() => document.body.innerText);
  const found = Object.fromEntries(texts.map((t) => [t, text.includes(t)]));
  await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify({ charts, errors, found, title: await page.title() }));
} finally {
  await browser.close();
}
