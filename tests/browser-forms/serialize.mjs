// Each feed entry as Chromium serializes it: what a browser (and the
// extension, which hands the agent `details.url`) holds when a user visits
// it. Reads JSON lines `{"k": N, "text": "..."}` (argv[2]) and writes
// `{"k": N, "href": "..."}` or `{"k": N, "error": "..."}` (argv[3]).
// An entry without a scheme is read as `http://` + entry, as a typed host
// is. Run by `tests/examples/browser_forms.rs`; needs Chromium
// ($CHROMIUM, else /usr/bin/chromium) and the extension test's
// playwright-core (`npm ci` in bindings/wasm/extension/test).
import fs from "node:fs";

const playwright = new URL(
  "../../bindings/wasm/extension/test/node_modules/playwright-core/index.mjs",
  import.meta.url,
);
const { chromium } = await import(playwright.href);
const [input, output] = process.argv.slice(2);
const entries = fs
  .readFileSync(input, "utf8")
  .split("\n")
  .filter((l) => l.length)
  .map((l) => JSON.parse(l));
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  args: ["--no-sandbox"],
});
const page = await browser.newPage();
const out = fs.createWriteStream(output);
const CHUNK = 20000;
for (let i = 0; i < entries.length; i += CHUNK) {
  const answers = await page.evaluate(
    (chunk) =>
      chunk.map(({ k, text }) => {
        // Leading and trailing C0 controls and spaces, as the URL parser
        // itself strips (JavaScript's trim() would strip more).
        let s = text.replace(/^[\u0000-\u0020]+|[\u0000-\u0020]+$/g, "");
        // A scheme as written (a special one may skip its slashes, as
        // browsers read `http:evil.example`), else a host typed alone.
        if (!/^([a-z][a-z0-9+.-]*:\/\/|(https?|ftp|wss?|file):)/i.test(s)) s = "http://" + s;
        try {
          return { k, href: new URL(s).href };
        } catch (e) {
          return { k, error: String(e) };
        }
      }),
    entries.slice(i, i + CHUNK),
  );
  out.write(answers.map((a) => JSON.stringify(a)).join("\n") + "\n");
}
await new Promise((resolve) => out.end(resolve));
await browser.close();
