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
  const page = await browser.newPage({ viewport: { width: Number(process.env.VIEWPORT_WIDTH || 1400), height: 1000 } });
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
    // what the series drew: coloured (saturated) pixels inside the plot area, where axes, grid and
    // labels are grey and legends never are
    let plotInk = null;
    if (c.dataset.plot) {
      const k = c.width / (parseFloat(c.style.width) || c.width);
      const [l, t, w, h] = JSON.parse(c.dataset.plot).map((v) => Math.round(v * k));
      const p = ctx.getImageData(l + 2, t + 2, Math.max(1, w - 4), Math.max(1, h - 4)).data;
      let n = 0;
      for (let i = 0; i < p.length; i += 4) if (p[i + 3] > 0 && Math.max(p[i], p[i + 1], p[i + 2]) - Math.min(p[i], p[i + 1], p[i + 2]) > 60) n++;
      plotInk = n;
    }
    const section = c.closest("section");
    return { points: Number(c.dataset.points || 0), ink: ink / (d.length / 4), width: c.width, height: c.height,
             plot_ink: plotInk, legend: c.dataset.legend ? JSON.parse(c.dataset.legend) : null,
             axes: c.dataset.axes ? JSON.parse(c.dataset.axes) : null,
             xrange: c.dataset.xrange ? JSON.parse(c.dataset.xrange) : null,
             xticks: c.dataset.xticks ? JSON.parse(c.dataset.xticks) : null,
             key: c.parentElement && c.parentElement.dataset.key || "",
             section: section ? (section.dataset.topic || section.id || "") : "" };
  }));
  // tables whose content reaches past their card without scrolling inside it
  const tables = await page.$$eval("table", (ts) => ts.map((t) => {
    const card = t.closest("section") || document.body;
    const tr = t.getBoundingClientRect(), cr = card.getBoundingClientRect();
    const scrolls = getComputedStyle(t).overflowX === "auto" || getComputedStyle(t).overflowX === "scroll";
    return { spills: tr.right > cr.right + 1 || (!scrolls && t.scrollWidth > t.clientWidth + 1), scrollable: scrolls && t.scrollWidth > t.clientWidth,
             rows: t.rows.length };
  }));
  const text = await page.evaluate(() => document.body.innerText);
  const found = Object.fromEntries(texts.map((t) => [t, text.includes(t)]));
  await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify({ charts, tables, errors, found, title: await page.title() }));
} finally {
  await browser.close();
}
