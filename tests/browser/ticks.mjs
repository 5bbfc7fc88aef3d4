// What the browser tests share: counting the live page's completed polls. Every tick of the
// page ends by rewriting #status; `countTicks(page)` makes `window.__hotlistTicks` count those
// rewrites from the page's first load on.
export async function countTicks(page) {
  await page.addInitScript(() => {
    window.__hotlistTicks = 0;
    document.addEventListener("DOMContentLoaded", () => {
      const status = document.getElementById("status");
      if (status) {
        new MutationObserver(() => window.__hotlistTicks++).observe(status, {
          childList: true,
          characterData: true,
          subtree: true,
        });
      }
    });
  });
}
