// Drives hotlist's live page in headless Chromium for tests/blackbox/browser.rs.
//
//   node live_page.mjs URL SCREENSHOT_PATH
//
// 1. Opens URL and waits (bounded) until a poll of the page completed and every
//    <section data-window> shows at least one <li data-item>; takes a full-page screenshot to
//    SCREENSHOT_PATH and prints {"ready":true,"lists":{window:[[item,count],…]},
//    "accuracy":{window:{"exact":"true"|"false","mark":bool,"text":"…"}}} (what each section
//    says its list is: data-exact, whether it shows the ≈ mark, the text of its .accuracy line).
// 2. Waits for a line `changed` on stdin, then (bounded) for a poll of the page that started
//    after that line and whose lists differ from step 1; takes a second screenshot
//    (SCREENSHOT_PATH with `-updated` before the extension) and prints
//    {"updated":true,"lists":…,"accuracy":…}.
// 3. If a line `accuracy-changed` follows (else stdin closes and it ends), waits (bounded) for a
//    completed poll after it in which what some list says it is differs from step 2 (a sealed
//    list turned exact and certified) and prints {"certified":true,"lists":…,"accuracy":…}.
// Any timeout or error (including the page's #status saying it cannot reach the server) prints
// {"error":"…"} and exits 1. Uses the system Chromium ($CHROMIUM or /usr/bin/chromium); never
// downloads a browser.
import path from "node:path";
import readline from "node:readline";
import { chromium } from "playwright-core";
import { countTicks } from "./ticks.mjs";

const TIMEOUT_MS = 20_000;
const POLL_MS = 100;

function emit(obj) {
  process.stdout.write(JSON.stringify(obj) + "\n");
}

function updatedPath(p) {
  const { dir, name, ext } = path.parse(p);
  return path.join(dir, `${name}-updated${ext}`);
}

// Reads the page: its lists and what each says it is, whether a poll completed, the poll
// counter and the status line.
function readPage() {
  const lists = {};
  const accuracy = {};
  for (const section of document.querySelectorAll("section[data-window]")) {
    lists[section.dataset.window] = [...section.querySelectorAll("li[data-item]")].map((li) => [
      li.dataset.item,
      Number((li.querySelector(".count")?.textContent ?? "").replace(/[^0-9]/g, "")),
    ]);
    accuracy[section.dataset.window] = {
      exact: section.dataset.exact ?? "",
      mark: section.querySelector(".approx") !== null,
      text: section.querySelector(".accuracy")?.textContent ?? "",
    };
  }
  const status = document.getElementById("status");
  return {
    lists,
    accuracy,
    ticks: window.__hotlistTicks ?? 0,
    statusText: status ? status.textContent : "",
    stale: status ? status.classList.contains("stale") || /cannot reach/i.test(status.textContent) : false,
  };
}

// Polls the page until `done(state)` holds; throws on the status line's error or the deadline.
async function waitFor(page, what, done) {
  const deadline = Date.now() + TIMEOUT_MS;
  let state;
  for (;;) {
    state = await page.evaluate(readPage);
    if (state.stale) throw new Error(`page cannot reach the server: ${state.statusText}`);
    if (done(state)) return state;
    if (Date.now() > deadline) {
      throw new Error(`timed out after ${TIMEOUT_MS} ms waiting for ${what}; last page state: ${JSON.stringify(state)}`);
    }
    await new Promise((r) => setTimeout(r, POLL_MS));
  }
}

// The next line on stdin (bounded by no timeout: the test harness sends it or closes stdin).
function lineReader() {
  const rl = readline.createInterface({ input: process.stdin });
  const lines = [];
  const waiters = [];
  let closed = false;
  rl.on("line", (l) => (waiters.length ? waiters.shift().resolve(l) : lines.push(l)));
  rl.on("close", () => {
    closed = true;
    while (waiters.length) waiters.shift().reject(new Error("stdin closed before `changed`"));
  });
  return {
    next: () =>
      lines.length
        ? Promise.resolve(lines.shift())
        : closed
          ? Promise.reject(new Error("stdin closed before `changed`"))
          : new Promise((resolve, reject) => waiters.push({ resolve, reject })),
    close: () => rl.close(),
  };
}

async function main() {
  const [url, shot] = process.argv.slice(2);
  if (!url || !shot) throw new Error("usage: node live_page.mjs URL SCREENSHOT_PATH");
  const stdin = lineReader();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: [
      "--headless=new",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
    timeout: TIMEOUT_MS,
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
    const pageErrors = [];
    page.on("pageerror", (e) => pageErrors.push(String(e)));
    await countTicks(page);
    const response = await page.goto(url, { timeout: TIMEOUT_MS, waitUntil: "domcontentloaded" });
    if (!response || !response.ok()) throw new Error(`GET ${url}: ${response ? response.status() : "no response"}`);

    const ready = await waitFor(
      page,
      "every window section to show at least one item",
      (s) =>
        s.statusText.startsWith("updated") &&
        Object.keys(s.lists).length > 0 &&
        Object.values(s.lists).every((l) => l.length > 0),
    );
    if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
    await page.screenshot({ path: shot, fullPage: true });
    emit({ ready: true, lists: ready.lists, accuracy: ready.accuracy });

    for (;;) {
      const line = (await stdin.next()).trim();
      if (line === "changed") break;
      if (line !== "") throw new Error(`unexpected line on stdin: ${JSON.stringify(line)}`);
    }
    // A poll that started after `changed` must have completed (two more #status rewrites), so
    // a list caught half-way through a store update is not reported.
    const { ticks: t0 } = await page.evaluate(readPage);
    const before = JSON.stringify(ready.lists);
    const updated = await waitFor(
      page,
      "the lists to change",
      (s) => s.ticks >= t0 + 2 && JSON.stringify(s.lists) !== before && Object.values(s.lists).every((l) => l.length > 0),
    );
    if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
    await page.screenshot({ path: updatedPath(shot), fullPage: true });
    emit({ updated: true, lists: updated.lists, accuracy: updated.accuracy });

    const next = await stdin.next().catch(() => null);
    if (next !== null && next.trim() === "accuracy-changed") {
      const { ticks: t1 } = await page.evaluate(readPage);
      const was = JSON.stringify(updated.accuracy);
      const changed = await waitFor(
        page,
        "what a list says it is to change",
        (s) => s.ticks >= t1 + 2 && JSON.stringify(s.accuracy) !== was,
      );
      if (pageErrors.length) throw new Error(`page errors: ${pageErrors.join("; ")}`);
      emit({ certified: true, lists: changed.lists, accuracy: changed.accuracy });
    } else if (next !== null && next.trim() !== "") {
      throw new Error(`unexpected line on stdin: ${JSON.stringify(next)}`);
    }
  } finally {
    stdin.close();
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
