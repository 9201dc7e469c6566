// Loads a page in headless Chromium (playwright-core) and prints its
// Navigation Timing entry, as JSON, for each of several loads.
//
// Usage: node tests/status-page/timing.mjs URL LOADS
// Environment: CHROMIUM (default /usr/bin/chromium); PLAYWRIGHT_DIR, the
// node_modules directory holding playwright-core (the extension test's:
// bindings/wasm/extension/test/node_modules). Run by the e2e test
// `status::the_page_of_100_lists_with_1000_builds_each_renders_in_under_100_ms`.
import { createRequire } from "node:module";

const require = createRequire(`${process.env.PLAYWRIGHT_DIR}/`);
const { chromium } = require("playwright-core");
const [url, loads = "3"] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? "/usr/bin/chromium",
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--disable-background-networking"],
});
try {
  const page = await browser.newPage();
  for (let i = 0; i < Number(loads); i++) {
    await page.goto(url, { waitUntil: "load" });
    const timing = await page.evaluate(() => {
      const n = performance.getEntriesByType("navigation")[0];
      return {
        responseStart: n.responseStart,
        responseEnd: n.responseEnd,
        domContentLoadedEventEnd: n.domContentLoadedEventEnd,
        loadEventEnd: n.loadEventEnd,
        transferSize: n.transferSize,
      };
    });
    console.log(JSON.stringify(timing));
  }
} finally {
  await browser.close();
}
