// Drives hotlist's live page in headless Chromium for tests/blackbox/browser.rs's trend test.
//
//   node trend_page.mjs URL TREND_WINDOW AT OUT_DIR
//
// At a phone width (390 px) and a desktop width (1280 px): opens URL, waits (bounded) until a
// poll completed and every <section data-window> shows a list, reads what a user sees — the
// sections' order, each row's item, count, bar width and row width, and for the trend window
// each row's "× usual" text and sparkline (its data-history and polyline points) — and whether
// the page is wider than the screen; takes a screenshot (OUT_DIR/trend-page-<width>.png); then
// types AT into "lists as of" and waits for the trend window's section to show another
// instance (its data-start changes), reads it again and takes a second screenshot
// (…-history.png). Prints one JSON line per width: {"width":…,"live":{…},"history":{…}}.
// Any timeout or page error prints {"error":"…"} and exits 1. Uses the system Chromium
// ($CHROMIUM or /usr/bin/chromium); never downloads a browser.
import path from "node:path";
import { chromium } from "playwright-core";
import { countTicks } from "./ticks.mjs";

const TIMEOUT_MS = 20_000;
const POLL_MS = 100;

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

// What the page shows.
function readPage(trend) {
  const sections = [...document.querySelectorAll("section[data-window]")];
  const rows = (section) =>
    [...section.querySelectorAll("li[data-item]")].map((li) => {
      const spark = li.querySelector("svg.spark");
      return {
        item: li.dataset.item,
        count: Number((li.querySelector(".count")?.textContent ?? "").replace(/[^0-9]/g, "")),
        bar: li.querySelector(".bar")?.getBoundingClientRect().width ?? -1,
        row: li.getBoundingClientRect().width,
        ratio: li.querySelector(".ratio")?.textContent ?? null,
        history: spark ? spark.dataset.history : null,
        points: spark ? spark.querySelector("polyline")?.getAttribute("points") ?? "" : null,
      };
    });
  const t = sections.find((s) => s.dataset.window === trend);
  return {
    order: sections.map((s) => s.dataset.window),
    filled: sections.length > 0 && sections.every((s) => s.querySelector("li[data-item]")),
    lists: Object.fromEntries(sections.map((s) => [s.dataset.window, rows(s)])),
    start: t ? t.dataset.start : null,
    overflow: document.documentElement.scrollWidth > window.innerWidth,
    ticks: window.__hotlistTicks ?? 0,
    status: document.getElementById("status")?.textContent ?? "",
  };
}

async function waitFor(page, trend, what, done) {
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const s = await page.evaluate(readPage, trend);
    if (/cannot reach/i.test(s.status)) throw new Error(`page cannot reach the server: ${s.status}`);
    if (done(s)) return s;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last state: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

async function atWidth(browser, url, trend, at, outDir, width) {
  const page = await browser.newPage({ viewport: { width, height: 900 } });
  const pageErrors = [];
  page.on("pageerror", (e) => pageErrors.push(String(e)));
  await countTicks(page);
  const response = await page.goto(url, { timeout: TIMEOUT_MS, waitUntil: "domcontentloaded" });
  if (!response || !response.ok()) throw new Error(`GET ${url}: ${response ? response.status() : "no response"}`);
  const live = await waitFor(page, trend, "every list shown", (s) => s.ticks >= 1 && s.filled);
  await page.screenshot({ path: path.join(outDir, `trend-page-${width}.png`), fullPage: true });
  await page.fill("#at", at);
  const t0 = (await page.evaluate(readPage, trend)).ticks;
  const history = await waitFor(
    page,
    trend,
    `the instance at ${at}`,
    (s) => s.ticks >= t0 + 2 && s.start !== live.start && s.filled,
  );
  await page.screenshot({ path: path.join(outDir, `trend-page-${width}-history.png`), fullPage: true });
  if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
  await page.close();
  return { width, live, history };
}

async function main() {
  const [url, trend, at, outDir] = process.argv.slice(2);
  if (!url || !trend || !at || !outDir) throw new Error("usage: node trend_page.mjs URL TREND_WINDOW AT OUT_DIR");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
    timeout: TIMEOUT_MS,
  });
  try {
    for (const width of [390, 1280]) {
      emit(await atWidth(browser, url, trend, at, outDir, width));
    }
  } finally {
    await browser.close().catch(() => {});
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    emit({ error: String(e && e.message ? e.message : e) });
    process.exit(1);
  },
);
