// Checks that the live page never stacks polls, for tests/blackbox/browser.rs.
//
//   node poll_overlap.mjs URL DELAY_MS WATCH_MS
//
// Opens URL with every /v1/windows request held DELAY_MS before it goes to the server (a slow
// server), watches the page for WATCH_MS, and prints {"requests":N,"max_in_flight":M}: how many
// /v1/windows requests the page made and the most that were in flight at once. Any error prints
// {"error":"…"} and exits 1. Uses the system Chromium ($CHROMIUM or /usr/bin/chromium).
import { chromium } from "playwright-core";

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

async function main() {
  const [url, delay, watch] = process.argv.slice(2);
  if (!url || !delay || !watch) throw new Error("usage: node poll_overlap.mjs URL DELAY_MS WATCH_MS");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
    timeout: 20_000,
  });
  try {
    const page = await browser.newPage();
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    let requests = 0;
    let inFlight = 0;
    let maxInFlight = 0;
    await page.route("**/v1/windows*", async (route) => {
      requests++;
      inFlight++;
      maxInFlight = Math.max(maxInFlight, inFlight);
      await new Promise((r) => setTimeout(r, Number(delay)));
      try {
        await route.continue();
      } finally {
        inFlight--;
      }
    });
    const response = await page.goto(url, { timeout: 20_000, waitUntil: "domcontentloaded" });
    if (!response || !response.ok()) throw new Error(`GET ${url}: ${response ? response.status() : "no response"}`);
    await new Promise((r) => setTimeout(r, Number(watch)));
    if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
    emit({ requests, max_in_flight: maxInFlight });
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
