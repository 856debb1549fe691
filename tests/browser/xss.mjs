// Loads the live dashboard in Debian's headless Chromium and reports whether
// anything an agent sent ran as code:
//   node xss.mjs URL SCREENSHOT.png [WAIT_MS]
// Prints JSON: the marker the payloads would set (window.__pwned), the page
// title (a payload would change it), <img> elements under <main> (a payload
// parsed as HTML would add one), dialogs opened, the page's text, and whether
// an inline event handler added by hand afterwards ran (the CSP must block it).
import { chromium } from "playwright-core";

const [url, shot, waitMs = "2500"] = process.argv.slice(2);
if (!url || !shot) {
  console.error("usage: node xss.mjs URL SCREENSHOT.png [WAIT_MS]");
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
  const dialogs = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => { if (m.type() === "error") errors.push(m.text()); });
  page.on("dialog", async (d) => { dialogs.push(d.message()); await d.dismiss(); });
  const resp = await page.goto(url, { waitUntil: "load" });
  const csp = (await resp.allHeaders())["content-security-policy"] || null;
  await page.waitForTimeout(Number(waitMs));
  const seen = await page.evaluate(() => ({
    pwned: window.__pwned ?? null,
    title: document.title,
    imgs: document.querySelectorAll("main img, main script, main iframe").length,
    updates: Number(document.body.dataset.updates || 0),
    text: document.body.innerText,
  }));
  // The second line of defence: an inline handler that does get into the DOM must not run.
  await page.evaluate(() => {
    const d = document.createElement("div");
    d.innerHTML = '<img src="data:," onload="window.__csp_bypassed=1" onerror="window.__csp_bypassed=1">';
    document.body.appendChild(d);
  });
  await page.waitForTimeout(500);
  const cspBypassed = await page.evaluate(() => window.__csp_bypassed ?? null);
  await page.screenshot({ path: shot, fullPage: true });
  console.log(JSON.stringify({ ...seen, csp, csp_bypassed: cspBypassed, dialogs, errors }));
} finally {
  await browser.close();
}
