// The WASM agent in real headless Chromium against a real publisher: the
// cross-language check of agent.test.mjs, and the README's JavaScript
// example as written.
//
//   bash .ci/bindings-extension.sh   # installs and builds everything below, then runs this
//
// or by hand, after `bash .ci/bindings-wasm.sh` (the `--target web`
// package, the publisher and the cross-language example) and `npm ci` in
// bindings/wasm/extension/test (whose pinned playwright-core this test
// drives Chromium with):
//
//   BLOCKSIEVE_WASM_WEB_PKG=target/wasm-pkg/web \
//   BLOCKSIEVE_PUBLISHER=target/debug/blocksieve-publisher \
//   BLOCKSIEVE_XLANG=target/debug/examples/xlang \
//   node --test bindings/wasm/tests/chromium.test.mjs
//
// CHROMIUM names the browser (by default /usr/bin/chromium).
//
// Two publishers on 127.0.0.1:0: `xlang setup`'s (the threat list `xlang`)
// and one serving the same feed as the list `phishing`, the list the README
// example subscribes to. Each sits behind its own local origin that serves
// a blank test page, the package under /pkg/ and the inputs, and forwards
// /v1/* to its publisher unchanged, so the page's fetches are same-origin
// and need no CORS (the publisher sends no CORS headers).
//
// 1. In the page: `init`, `new Agent({publisher: location.origin, lists:
//    ["xlang"], key})`, `update()`, then every input of `DIR/inputs.txt`
//    answered into the JSON shape of `xlang reference` (as agent.test.mjs
//    builds it); each line must be the same JSON value as the Rust
//    agent's. The counts and the time per check in Chromium are printed.
// 2. The ```js block of README.md's "JavaScript (WASM)" section, as a
//    module served beside the package (so its `./blocksieve_wasm.js`
//    import resolves as written), after two lines that define `wasmUrl`
//    and `PUBLIC_KEY`, with the publisher URL pointed at the origin and
//    nothing else changed: it must complete and log `invalid_input`.

import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import http from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";

import { searchesServed, startPublisher, waitReady } from "./publisher.mjs";

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, "../../..");

const need = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set; see the first lines of this file`);
  return resolve(value);
};
const PKG = need("BLOCKSIEVE_WASM_WEB_PKG");
const PUBLISHER = need("BLOCKSIEVE_PUBLISHER");
const XLANG = need("BLOCKSIEVE_XLANG");
const CHROMIUM = process.env.CHROMIUM ?? "/usr/bin/chromium";

// playwright-core as the extension test pins and installs it.
const playwrightFrom = join(root, "bindings/wasm/extension/test/package.json");
let chromium;
try {
  ({ chromium } = createRequire(playwrightFrom)("playwright-core"));
} catch (error) {
  throw new Error(`playwright-core is not installed: run npm ci in ${dirname(playwrightFrom)} (${error.message})`);
}

/** The files of the package the origins serve under /pkg/. */
const PACKAGE_FILES = {
  "blocksieve_wasm.js": "text/javascript",
  "blocksieve_wasm_bg.wasm": "application/wasm",
};

let dir;
let browser;
const publishers = []; // every publisher started, to stop: { child, base, key }
let xlangPublisher; // serves `xlang setup`'s threat list `xlang`
let readmePublisher; // serves the same feed as `phishing`, for the README example and CORS
let corsOrigin; // an origin with no publisher behind it, allowed by readmePublisher's CORS
const origins = []; // http.Server
const forwarded = []; // each request forwarded to a publisher: { origin, url, headers }

/** A publisher on `config`, remembered to be stopped after the tests. */
async function launchPublisher(config) {
  const publisher = await startPublisher(PUBLISHER, config);
  publishers.push(publisher);
  return publisher;
}

/** One local origin: `/` a blank page (and an empty `/favicon.ico`), `/pkg/*` the package (and the
 * README module at `/pkg/readme.mjs`, when given), `/inputs.txt` the
 * cross-language inputs, `/v1/*` forwarded to the publisher at `upstream`
 * (bytes unchanged both ways; with no `upstream`, 404). Resolves with its URL. */
function startOrigin(upstream, readmeModule) {
  const target = upstream && new URL(upstream);
  const server = http.createServer((request, response) => {
    const path = new URL(request.url, "http://origin").pathname;
    const send = (status, type, body) => {
      response.writeHead(status, { "content-type": type, "cache-control": "no-store" });
      response.end(body);
    };
    if (path.startsWith("/v1/") && target) {
      forwarded.push({ origin: request.headers.host, url: request.url, headers: request.headers });
      const forward = http.request(
        {
          host: target.hostname,
          port: target.port,
          method: request.method,
          path: request.url,
          headers: { ...request.headers, host: target.host },
        },
        (answer) => {
          response.writeHead(answer.statusCode, answer.headers);
          answer.pipe(response);
        },
      );
      forward.on("error", (error) => send(502, "text/plain", `publisher unreachable: ${error.message}`));
      request.pipe(forward);
    } else if (path === "/favicon.ico") {
      // Asked for by the browser with every page; none, and no 404 logged.
      response.writeHead(204).end();
    } else if (path === "/") {
      send(200, "text/html; charset=utf-8", "<!doctype html><title>blocksieve WASM agent</title>");
    } else if (path === "/inputs.txt") {
      send(200, "text/plain; charset=utf-8", readFileSync(join(dir, "inputs.txt")));
    } else if (path === "/pkg/readme.mjs" && readmeModule) {
      send(200, "text/javascript", readmeModule);
    } else if (path.startsWith("/pkg/") && Object.hasOwn(PACKAGE_FILES, path.slice(5))) {
      send(200, PACKAGE_FILES[path.slice(5)], readFileSync(join(PKG, path.slice(5))));
    } else {
      send(404, "text/plain", "not found");
    }
  });
  origins.push(server);
  return new Promise((resolvePromise) => {
    server.listen(0, "127.0.0.1", () => resolvePromise(`http://127.0.0.1:${server.address().port}`));
  });
}

/** A new page at `origin`, its console messages and errors recorded. */
async function openPage(origin) {
  const page = await browser.newPage();
  const consoleMessages = [];
  const errors = [];
  page.on("console", (message) => consoleMessages.push({ type: message.type(), text: message.text() }));
  page.on("pageerror", (error) => errors.push(String(error)));
  await page.goto(`${origin}/`);
  return { page, consoleMessages, errors };
}

/** The ```js block of README.md's "### JavaScript (WASM)" section. */
function readmeExample() {
  const readme = readFileSync(join(root, "README.md"), "utf8");
  const section = readme.split(/^### JavaScript \(WASM\)$/m)[1];
  assert.ok(section, "README.md has no \"### JavaScript (WASM)\" section");
  const block = /^```js\n([\s\S]*?)^```$/m.exec(section.split(/^#{1,3} /m)[0]);
  assert.ok(block, "the JavaScript (WASM) section of README.md has no ```js block");
  return block[1];
}

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "blocksieve-chromium-"));
  execFileSync(XLANG, ["setup", dir], { stdio: ["ignore", "ignore", "inherit"] });
  // The README example's list: the same feed under the name it subscribes
  // to; pages at `corsOrigin` may call it directly.
  corsOrigin = await startOrigin(null);
  writeFileSync(
    join(dir, "readme.toml"),
    [
      `data_dir = ${JSON.stringify(join(dir, "readme-data"))}`,
      `listen = "127.0.0.1:0"`,
      `schedule = "0 0 0 1 1 *"`,
      `cors_allowed_origins = [${JSON.stringify(corsOrigin)}]`,
      ``,
      `[[lists]]`,
      `name = "phishing"`,
      `sources = [{ path = ${JSON.stringify(join(dir, "feed.txt"))}, format = "urls" }]`,
      ``,
    ].join("\n"),
  );
  const launched = chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    // .ci/chromium.sh: root needs --no-sandbox; the rest keep Chromium from
    // opening connections of its own. Playwright gives the browser a fresh
    // profile directory.
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  const started = await Promise.all([
    launchPublisher(join(dir, "config.toml")),
    launchPublisher(join(dir, "readme.toml")),
    launched,
  ]);
  [xlangPublisher, readmePublisher, browser] = started;
  await Promise.all([xlangPublisher, readmePublisher].map((p) => waitReady(p.base)));
});

after(async () => {
  await browser?.close();
  for (const server of origins) server.close();
  for (const { child } of publishers) child.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const identity = "cross-language identity in Chromium: every input answered as the Rust agent does";
test(identity, { timeout: 600_000 }, async () => {
  const publisher = xlangPublisher;
  const output = execFileSync(XLANG, ["reference", publisher.base, publisher.key, dir], {
    maxBuffer: 256 * 1024 * 1024,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const reference = output.toString().split("\n");
  reference.pop(); // after the last newline

  const origin = await startOrigin(publisher.base);
  const { page, errors } = await openPage(origin);
  const run = await page.evaluate(async (key) => {
    const pkg = `${location.origin}/pkg/blocksieve_wasm.js`;
    const { default: init, Agent, canonicalize, fullHashes } = await import(pkg);
    await init({ module_or_path: new URL("/pkg/blocksieve_wasm_bg.wasm", location.origin) });
    const agent = new Agent({ publisher: location.origin, lists: ["xlang"], key });
    const report = await agent.update();

    const text = await (await fetch("/inputs.txt")).text();
    const hexLines = text.split("\n");
    if (hexLines.at(-1) === "") hexLines.pop(); // an empty line is an input: the empty string
    const utf8 = new TextDecoder("utf-8", { fatal: true });
    const inputs = hexLines.map((hex, i) => {
      if (!/^(?:[0-9a-f]{2})*$/.test(hex)) throw new Error(`inputs.txt line ${i + 1} is not lowercase hex: ${hex}`);
      return utf8.decode(Uint8Array.from(hex.match(/../g) ?? [], (h) => parseInt(h, 16)));
    });

    /** A thrown error other than invalid input, kept so that the line differs. */
    const unexpected = (error) => `unexpected error: ${error?.kind ?? "no kind"}: ${error?.message ?? error}`;
    const lines = [];
    const valid = [];
    const checkStarted = performance.now();
    for (const input of inputs) {
      let canonical = null;
      let hashes = [];
      try {
        canonical = canonicalize(input);
        hashes = fullHashes(input);
        valid.push(input);
      } catch (error) {
        if (error.kind !== "invalid_input") canonical = unexpected(error);
      }
      const line = { canonical, full_hashes: hashes };
      try {
        const v = await agent.check(input);
        line.verdict = v.kind;
        if (v.kind === "unsafe") {
          line.list = v.list;
          line.expression = v.expression;
        }
      } catch (error) {
        line.verdict = error.kind === "invalid_input" ? "invalid" : unexpected(error);
      }
      lines.push(line);
    }
    const checkMs = performance.now() - checkStarted;
    const stats = agent.stats();
    // Again, every answer now in the full-hash cache: the cost of a check
    // itself in the browser (canonicalize, hash, probe, cache), no request.
    const againStarted = performance.now();
    for (const input of valid) await agent.check(input);
    const againMs = performance.now() - againStarted;
    return {
      report,
      lines,
      inputs,
      checkMs,
      againMs,
      validCount: valid.length,
      stats,
      statsAgain: agent.stats(),
    };
  }, publisher.key);
  await page.close();

  assert.deepEqual(errors, [], "errors in the page");
  assert.deepEqual(
    run.report.lists.map((l) => [l.list, l.changed]),
    [["xlang", true]],
  );
  assert.equal(run.lines.length, reference.length, "inputs in the page against lines of the reference");
  const counts = { safe: 0, unsafe: 0, unverified: 0, invalid: 0 };
  for (const [i, line] of run.lines.entries()) {
    assert.deepEqual(line, JSON.parse(reference[i]), `input ${i}: ${JSON.stringify(run.inputs[i])}`);
    counts[line.verdict]++;
  }
  assert.equal(run.statsAgain.fullHashRequests, run.stats.fullHashRequests, "the second pass made requests");
  // Every search the agent counted reached the publisher through the origin.
  assert.equal(await searchesServed(publisher.base), run.stats.fullHashRequests);
  console.log(
    `xlang in Chromium ${browser.version()}: ${run.lines.length} inputs identical (${counts.safe} safe, ` +
      `${counts.unsafe} unsafe, ${counts.unverified} unverified, ${counts.invalid} invalid); ` +
      `${run.stats.fullHashRequests} full-hash requests, ${run.stats.cacheHits} cache hits; ` +
      `${((run.checkMs * 1000) / run.lines.length).toFixed(1)} us per check (canonicalize, hashes and check, ` +
      `requests included), ${((run.againMs * 1000) / run.validCount).toFixed(1)} us per check from the cache`,
  );
  assert.equal(counts.unverified, 0);
  assert.ok(counts.unsafe > 1000 && counts.safe > 1000, JSON.stringify(counts));
});

// A page's fetches carry its address as `Referer` (the whole of it to its
// own origin, or to any with a `Referrer-Policy` such as `unsafe-url`) and,
// to its own origin, its cookies: the agent sends neither, whatever page
// it runs in, so that a publisher behind the page's own origin does not
// learn which page the user is on, nor who the user is.
test("a page's full-hash and update requests carry neither its address nor its cookies", { timeout: 120_000 }, async () => {
  const publisher = xlangPublisher;
  const origin = await startOrigin(publisher.base);
  const { page, errors } = await openPage(origin);
  const feed = readFileSync(join(dir, "feed.txt"), "utf8").split("\n").slice(0, 100);
  await page.goto(`${origin}/?user=alice&message=4711`);
  const verdict = await page.evaluate(
    async ([key, feed]) => {
      document.cookie = "session=alice-secret; path=/";
      const { default: init, Agent, canonicalize } = await import(`${location.origin}/pkg/blocksieve_wasm.js`);
      await init({ module_or_path: new URL("/pkg/blocksieve_wasm_bg.wasm", location.origin) });
      // The feed's first line that is a URL.
      const url = feed.find((line) => {
        try {
          return canonicalize(line) !== undefined;
        } catch {
          return false;
        }
      });
      const agent = new Agent({ publisher: location.origin, lists: ["xlang"], key });
      await agent.update();
      return agent.check(url);
    },
    [publisher.key, feed],
  );
  await page.close();
  assert.deepEqual(errors, [], "errors in the page");
  assert.equal(verdict.kind, "unsafe", JSON.stringify(verdict));
  const sent = forwarded.filter((r) => `http://${r.origin}` === origin);
  assert.ok(sent.some((r) => r.url === "/v1/hashes:search"), JSON.stringify(sent.map((r) => r.url)));
  for (const { url, headers } of sent) {
    assert.equal(headers.referer, undefined, `${url} carried Referer`);
    assert.equal(headers.cookie, undefined, `${url} carried Cookie`);
  }
});

test("the README's JavaScript example runs in Chromium as written", { timeout: 120_000 }, async (t) => {
  const publisher = readmePublisher;
  const block = readmeExample();
  const placeholder = '"http://127.0.0.1:8080"';
  assert.ok(block.includes(placeholder), `the example no longer names ${placeholder}:\n${block}`);
  const source = 'from "./blocksieve_wasm.js"';
  assert.ok(block.includes(source), `the example no longer imports ./blocksieve_wasm.js:\n${block}`);
  const module =
    `const wasmUrl = new URL("./blocksieve_wasm_bg.wasm", import.meta.url);\n` +
    `const PUBLIC_KEY = ${JSON.stringify(publisher.key)};\n` +
    block.replaceAll(placeholder, "location.origin");

  const origin = await startOrigin(publisher.base, module);
  const { page, consoleMessages, errors } = await openPage(origin);
  // The import settles once the module, top-level awaits included, has run.
  const outcome = await page.evaluate(async () => {
    try {
      await import(`${location.origin}/pkg/readme.mjs`);
      return { completed: true };
    } catch (error) {
      return { completed: false, error: `${error?.kind ?? ""} ${error?.stack ?? error}` };
    }
  });
  await page.close();

  for (const { type, text } of consoleMessages.filter((m) => m.type !== "log")) {
    t.diagnostic(`console.${type}: ${text}`);
  }
  assert.deepEqual(outcome, { completed: true }, `the example threw:\n${module}`);
  assert.deepEqual(errors, [], "errors in the page");
  assert.deepEqual(
    consoleMessages.filter((m) => m.type === "log").map((m) => m.text),
    ["invalid_input"],
  );
  // The example's `agent.update()` took the list's snapshot from the publisher.
  const metrics = await (await fetch(`${publisher.base}/metrics`)).text();
  assert.match(
    metrics,
    /^blocksieve_http_requests_total\{route="\/v1\/lists\/\{name\}\/snapshot",status="200"\} 1$/m,
    "the example's update did not download the snapshot",
  );
});

test("a page on another origin calls the publisher directly once the publisher allows it (CORS)", { timeout: 120_000 }, async () => {
  const publisher = readmePublisher;
  // Candidates for a listed URL: the page takes the first with a host.
  const candidates = readFileSync(join(dir, "feed.txt"), "utf8")
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => /^https?:\/\//.test(line))
    .slice(0, 50);
  assert.ok(candidates.length > 0, "feed.txt has no URL line");
  /** `update()` twice, a listed and a benign URL checked, in a page at `origin`. */
  const run = async (origin) => {
    const { page } = await openPage(origin);
    const result = await page.evaluate(
      async ({ base, key, candidates }) => {
        const { default: init, Agent, canonicalize } = await import(`${location.origin}/pkg/blocksieve_wasm.js`);
        await init({ module_or_path: new URL("/pkg/blocksieve_wasm_bg.wasm", location.origin) });
        const listed = candidates.find((url) => {
          try {
            return canonicalize(url) !== "";
          } catch {
            return false;
          }
        });
        const agent = new Agent({ publisher: base, lists: ["phishing"], key });
        try {
          const first = await agent.update();
          const second = await agent.update();
          const bad = await agent.check(listed);
          const good = await agent.check("https://blocksieve-benign.example/");
          return { first, second, bad, good, stats: agent.stats() };
        } catch (error) {
          return { error: error.kind, message: error.message };
        }
      },
      { base: publisher.base, key: publisher.key, candidates },
    );
    await page.close();
    return result;
  };

  const allowed = await run(corsOrigin);
  assert.equal(allowed.error, undefined, allowed.message);
  assert.deepEqual(
    allowed.first.lists.map((l) => [l.list, l.changed]),
    [["phishing", true]],
  );
  // The second round's conditional request (If-None-Match, preflighted)
  // was answered and read: nothing new.
  assert.deepEqual(
    allowed.second.lists.map((l) => [l.list, l.changed, l.error]),
    [["phishing", false, undefined]],
  );
  assert.equal(allowed.bad.kind, "unsafe", JSON.stringify(allowed.bad));
  assert.equal(allowed.good.kind, "safe", JSON.stringify(allowed.good));
  assert.equal(allowed.stats.fullHashRequests, 1, JSON.stringify(allowed.stats));

  // An origin the publisher does not allow: the browser withholds every
  // response, and the first update fails.
  const refused = await run(await startOrigin(null));
  assert.equal(refused.error, "transport", JSON.stringify(refused));
});
