// Drives the live page's group picker in headless Chromium for tests/blackbox/browser.rs.
//
//   node group_picker.mjs URL WINDOW SCREENSHOT_PATH
//
// Opens URL and waits (bounded) until WINDOW's section shows a group picker (<select> labelled
// "group of WINDOW") with at least two groups and a list; prints {"options":[…],"group":…,
// "list":[[item,count],…]} (the group shown first and its list). Then picks the picker's last
// group as a user would, waits until the section shows that group's list (a poll completed
// after the choice, the list changed), takes a screenshot and prints {"group":…,"list":…}.
// Any timeout or error prints {"error":"…"} and exits 1. Uses the system Chromium ($CHROMIUM or
// /usr/bin/chromium); never downloads a browser.
import { chromium } from "playwright-core";
import { countTicks } from "./ticks.mjs";

const TIMEOUT_MS = 20_000;
const POLL_MS = 100;

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

// WINDOW's section: its picker's options and choice, its list, and the page's poll count.
function readSection(name) {
  const section = document.querySelector(`section[data-window="${CSS.escape(name)}"]`);
  const sel = section?.querySelector(`select[aria-label="group of ${name}"]`);
  return {
    options: sel ? [...sel.options].map((o) => o.value) : [],
    group: sel ? sel.value : null,
    list: section
      ? [...section.querySelectorAll("li[data-item]")].map((li) => [
          li.dataset.item,
          Number((li.querySelector(".count")?.textContent ?? "").replace(/[^0-9]/g, "")),
        ])
      : [],
    ticks: window.__hotlistTicks ?? 0,
    status: document.getElementById("status")?.textContent ?? "",
  };
}

async function waitFor(page, name, what, done) {
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const s = await page.evaluate(readSection, name);
    if (/cannot reach/i.test(s.status)) throw new Error(`page cannot reach the server: ${s.status}`);
    if (done(s)) return s;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}; last state: ${JSON.stringify(s)}`);
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

async function main() {
  const [url, name, shot] = process.argv.slice(2);
  if (!url || !name || !shot) throw new Error("usage: node group_picker.mjs URL WINDOW SCREENSHOT_PATH");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
    timeout: TIMEOUT_MS,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    await countTicks(page);
    const response = await page.goto(url, { timeout: TIMEOUT_MS, waitUntil: "domcontentloaded" });
    if (!response || !response.ok()) throw new Error(`GET ${url}: ${response ? response.status() : "no response"}`);
    const first = await waitFor(page, name, "a group picker with two groups and a list", (s) => s.options.length >= 2 && s.list.length > 0);
    emit({ options: first.options, group: first.group, list: first.list });

    const wanted = first.options[first.options.length - 1];
    await page.selectOption(`select[aria-label="group of ${name}"]`, wanted);
    const t0 = (await page.evaluate(readSection, name)).ticks;
    const before = JSON.stringify(first.list);
    const second = await waitFor(
      page,
      name,
      `the list of group ${wanted}`,
      (s) => s.ticks >= t0 + 2 && s.group === wanted && JSON.stringify(s.list) !== before && s.list.length > 0,
    );
    if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
    await page.screenshot({ path: shot, fullPage: true });
    emit({ group: second.group, list: second.list });
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
