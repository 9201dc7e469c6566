// The WASM agent against a real publisher on 127.0.0.1, in node (>= 18).
//
//   bash .ci/bindings-wasm.sh        # builds everything below, then runs this
//
// or by hand, after building the package (`wasm-bindgen --target nodejs`),
// the publisher and the cross-language example:
//
//   BLOCKSIEVE_WASM_PKG=target/wasm-pkg/nodejs \
//   BLOCKSIEVE_PUBLISHER=target/debug/blocksieve-publisher \
//   BLOCKSIEVE_XLANG=target/debug/examples/xlang \
//   node --test bindings/wasm/tests/agent.test.mjs
//
// `xlang setup` writes the inputs (conformance vectors and a 10,000-URL
// real sample), a feed listing every other URL of the sample, and a
// publisher config; the publisher serves that feed as the threat list
// `xlang`. The second test compares the WASM agent's answer for every
// input with the Rust agent's (`xlang reference`), as JSON values.

import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createServer } from "node:http";
import { gzipSync } from "node:zlib";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";

import { requestsServed, searchesServed, startPublisher, waitReady } from "./publisher.mjs";

const need = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set; see the first lines of this file`);
  return resolve(value);
};
const require = createRequire(import.meta.url);
const { Agent, canonicalize, fullHashes } = require(join(need("BLOCKSIEVE_WASM_PKG"), "blocksieve_wasm.js"));
const PUBLISHER = need("BLOCKSIEVE_PUBLISHER");
const XLANG = need("BLOCKSIEVE_XLANG");

let dir;
let publisher;
let base;
let key;

/** `agent.update()`, retried while the publisher builds its first snapshot. */
async function firstUpdate(agent) {
  for (let attempt = 0; ; attempt++) {
    try {
      return await agent.update();
    } catch (error) {
      if (attempt >= 120) throw error;
      await new Promise((r) => setTimeout(r, 500));
    }
  }
}

/** The lines of a file, the last newline dropped (an empty line is an
 * input: the empty string). */
const lines = (path) => {
  const all = readFileSync(path, "utf8").split("\n");
  if (all.at(-1) === "") all.pop();
  return all;
};

const inputs = () => lines(join(dir, "inputs.txt")).map((hex) => Buffer.from(hex, "hex").toString("utf8"));

/** Whether `url` has a canonical form. */
const valid = (url) => {
  try {
    canonicalize(url);
    return true;
  } catch {
    return false;
  }
};

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "blocksieve-wasm-"));
  execFileSync(XLANG, ["setup", dir], { stdio: ["ignore", "ignore", "inherit"] });
  ({ child: publisher, base, key } = await startPublisher(PUBLISHER, join(dir, "config.toml")));
});

after(() => {
  publisher?.kill();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("the README example: update, unsafe, safe, errors, and no request for a filter miss", async () => {
  // Misconfiguration throws at once, with .kind.
  assert.throws(() => new Agent({}), (e) => e instanceof Error && e.kind === "misconfigured");
  // What JSON cannot hold is said as such.
  assert.throws(
    () => new Agent({ publisher: base, lists: ["xlang"], key, fullHashCacheBytes: 10n }),
    (e) => e.kind === "misconfigured" && /cannot be read as JSON: .*BigInt/.test(e.message),
  );
  assert.throws(
    () => new Agent({ publisher: base, lists: ["xlang"], key: "not a key" }),
    (e) => e.kind === "misconfigured" && /key/.test(e.message),
  );
  assert.throws(() => new Agent({ publisher: "http://publisher.example", lists: ["xlang"], key }), {
    kind: "misconfigured",
  });

  const agent = new Agent({ publisher: base, lists: ["xlang"], key });
  await assert.rejects(agent.check("http://example.com/"), { kind: "not_ready" });

  const report = await firstUpdate(agent);
  assert.equal(report.lists.length, 1);
  const [{ list, version, changed }] = report.lists;
  assert.deepEqual([list, changed], ["xlang", true]);
  assert.ok(Number.isInteger(version) && version > 0, `version ${version}`);
  // Nothing new: the same version, unchanged.
  assert.deepEqual(await agent.update(), { lists: [{ list: "xlang", version, changed: false }] });

  // A listed URL: the feed's first valid line.
  const listed = lines(join(dir, "feed.txt")).find(valid);
  const verdict = await agent.check(listed);
  assert.equal(verdict.kind, "unsafe", JSON.stringify(verdict));
  assert.equal(verdict.list, "xlang");
  assert.equal(verdict.block, true);
  assert.equal(verdict.stale, false);
  assert.ok(fullHashes(listed).includes(verdict.fullHash));
  const requests = agent.stats().fullHashRequests;
  assert.equal(requests, 1);
  // Again: from the full-hash cache, no request.
  assert.deepEqual(await agent.check(listed), verdict);
  assert.equal(agent.stats().fullHashRequests, 1);
  assert.equal(agent.stats().cacheHits, 1);

  const benign = await agent.check("http://example.com/x");
  assert.deepEqual(benign, { kind: "safe", stale: false, block: false });

  // A check whose expressions hit no filter makes no request; one that
  // hits makes exactly one (or none, from the cache).
  let misses = 0;
  for (let i = 0; i < 200; i++) {
    const before = agent.stats();
    const v = await agent.check(`http://benign-${i}.example/page/${i}.html`);
    const after = agent.stats();
    if (after.prefixHits === before.prefixHits) {
      misses++;
      assert.deepEqual(v, { kind: "safe", stale: false, block: false });
      assert.equal(after.fullHashRequests, before.fullHashRequests, `request for a miss: ${i}`);
    } else {
      assert.ok(after.fullHashRequests - before.fullHashRequests <= 1);
      assert.notEqual(v.kind, "unverified");
    }
  }
  assert.ok(misses > 150, `${misses} misses of 200`);
  // The publisher saw exactly the requests the agent counted.
  assert.equal(await searchesServed(base), agent.stats().fullHashRequests);

  // Invalid input is a thrown Error with .kind "invalid_input".
  await assert.rejects(agent.check("http://"), (e) => e instanceof Error && e.kind === "invalid_input");
  await assert.rejects(agent.check(42), { kind: "invalid_input" });
  assert.throws(() => canonicalize("http://"), { kind: "invalid_input" });
  assert.equal(canonicalize("HTTP://Example.COM/a/../b"), "http://example.com/b");

  // A publisher that is not there: a transport error, the filter kept.
  const orphan = new Agent({ publisher: "http://127.0.0.1:9", lists: ["xlang"], key });
  await assert.rejects(orphan.update(), { kind: "transport" });
  assert.equal(orphan.stats().updatesFailed, 1);
});

test("cross-language identity: the WASM agent answers every input as the Rust agent does", async () => {
  const started = performance.now();
  const output = execFileSync(XLANG, ["reference", base, key, dir], {
    maxBuffer: 256 * 1024 * 1024,
    stdio: ["ignore", "pipe", "inherit"],
  });
  const reference = output.toString().split("\n");
  reference.pop(); // after the last newline
  const referenceMs = performance.now() - started;

  const agent = new Agent({ publisher: base, lists: ["xlang"], key });
  await firstUpdate(agent);
  const all = inputs();
  assert.equal(reference.length, all.length);
  const counts = { safe: 0, unsafe: 0, unverified: 0, invalid: 0 };
  const checkStarted = performance.now();
  for (const [i, input] of all.entries()) {
    let canonical = null;
    let hashes = [];
    try {
      canonical = canonicalize(input);
      hashes = fullHashes(input);
    } catch (error) {
      assert.equal(error.kind, "invalid_input", `${JSON.stringify(input)}: ${error}`);
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
      assert.equal(error.kind, "invalid_input", `${JSON.stringify(input)}: ${error}`);
      line.verdict = "invalid";
    }
    counts[line.verdict]++;
    assert.deepEqual(line, JSON.parse(reference[i]), `input ${i}: ${JSON.stringify(input)}`);
  }
  const checkMs = performance.now() - checkStarted;
  const stats = agent.stats();
  // Again, every answer now in the full-hash cache: the cost of a check
  // itself (canonicalize, hash, probe, cache), no request.
  const validInputs = all.filter(valid);
  const againStarted = performance.now();
  for (const input of validInputs) await agent.check(input);
  const againMs = performance.now() - againStarted;
  assert.equal(agent.stats().fullHashRequests, stats.fullHashRequests, "the second pass made requests");
  console.log(
    `xlang: ${all.length} inputs identical (${counts.safe} safe, ${counts.unsafe} unsafe, ` +
      `${counts.unverified} unverified, ${counts.invalid} invalid); ` +
      `${stats.fullHashRequests} full-hash requests, ${stats.cacheHits} cache hits; ` +
      `WASM ${((checkMs * 1000) / all.length).toFixed(1)} us per check (canonicalize, hashes and check, ` +
      `requests included), ${((againMs * 1000) / validInputs.length).toFixed(1)} us per check from the cache; ` +
      `Rust reference process ${((referenceMs * 1000) / all.length).toFixed(1)} us per input ` +
      `(start, update and requests included)`,
  );
  assert.equal(counts.unverified, 0);
  assert.ok(counts.unsafe > 1000 && counts.safe > 1000, JSON.stringify(counts));
});

test("save and restore: a restarted agent checks at once and downloads no snapshot again", async () => {
  const first = new Agent({ publisher: base, lists: ["xlang"], key });
  const report = await firstUpdate(first);
  const [{ version }] = report.lists;
  const saved = first.save();
  assert.equal(saved.length, 1);
  assert.equal(saved[0].list, "xlang");
  for (const name of ["snapshot", "chain", "record"]) assert.ok(saved[0][name] instanceof Uint8Array, name);
  assert.ok(saved[0].snapshot.length > 1000, `snapshot of ${saved[0].snapshot.length} bytes`);
  // What a host gets back from storage: structured clones, ArrayBuffers.
  const stored = structuredClone(saved).map((e) => ({ ...e, snapshot: e.snapshot.buffer }));

  const snapshotRoute = "/v1/lists/{name}/snapshot";
  const snapshotsBefore = await requestsServed(base, snapshotRoute);
  const restarted = new Agent({ publisher: base, lists: ["xlang"], key });
  assert.deepEqual(restarted.restore(stored), { lists: [{ list: "xlang", version }] });
  assert.equal(restarted.stats().restored, 1);
  const listed = lines(join(dir, "feed.txt")).find(valid);
  assert.equal((await restarted.check(listed)).kind, "unsafe");
  assert.equal((await restarted.check("http://blocksieve-benign.example/")).kind, "safe");
  // The next round asks for the deltas since the version restored: nothing new.
  assert.deepEqual(await restarted.update(), { lists: [{ list: "xlang", version, changed: false }] });
  assert.equal(await requestsServed(base, snapshotRoute), snapshotsBefore, "a snapshot was downloaded again");

  // Tampered bytes are refused, and that list waits for an update.
  const forged = structuredClone(saved);
  forged[0].snapshot[forged[0].snapshot.length >> 1] ^= 1;
  const refusing = new Agent({ publisher: base, lists: ["xlang"], key });
  const outcome = refusing.restore(forged);
  assert.equal(outcome.lists[0].errorKind, "bad_data", JSON.stringify(outcome));
  await assert.rejects(refusing.check(listed), { kind: "not_ready" });
  assert.equal(refusing.restore([{ list: "xlang", snapshot: "x" }]).lists[0].errorKind, "invalid_input");
  // A chain that does not verify: the base comes back, and the entry says
  // the deltas were dropped.
  const badChain = structuredClone(saved);
  badChain[0].chain = new Uint8Array([1, 2, 3]);
  const [partial] = new Agent({ publisher: base, lists: ["xlang"], key }).restore(badChain).lists;
  assert.equal(partial.version, version, JSON.stringify(partial));
  assert.equal(partial.chainErrorKind, "bad_data", JSON.stringify(partial));
  assert.throws(() => refusing.restore("not an array"), { kind: "invalid_input" });
});

// A list that grows more than fourfold in one build lengthens its request
// prefixes past what the publisher still answers at the old length (100
// URLs at 8 bits become 20,001 at 12: about 78 full hashes under an 8-bit
// prefix, over twice `max_bucket_entries`, 32). An agent still on the old
// snapshot is refused, `400 prefix_too_short`: it updates and checks again,
// and the listed URL is unsafe, not unverified (let through by default).
test("a check refused as prefix_too_short updates the list and confirms at the new length", async () => {
  const own = mkdtempSync(join(tmpdir(), "blocksieve-wasm-grows-"));
  const feed = join(own, "feed.txt");
  const urls = (n) => Array.from({ length: n }, (_, i) => `http://listed.example/page/${i}\n`).join("");
  writeFileSync(feed, urls(100));
  writeFileSync(
    join(own, "config.toml"),
    [
      `data_dir = ${JSON.stringify(join(own, "data"))}`,
      `schedule = "*/2 * * * * *"`,
      `max_bucket_entries = 32`,
      `[[lists]]`,
      `name = "grows"`,
      `min_anonymity = 1`,
      `sources = [{ path = ${JSON.stringify(feed)}, format = "urls" }]`,
      "",
    ].join("\n"),
  );
  const started = await startPublisher(PUBLISHER, join(own, "config.toml"));
  try {
    await waitReady(started.base);
    const agent = new Agent({ publisher: started.base, lists: ["grows"], key: started.key });
    const [{ version: first }] = (await firstUpdate(agent)).lists;
    const listed = "http://listed.example/page/7";

    writeFileSync(feed, `${urls(20_000)}http://newly-listed.example/page\n`);
    // The build of the grown feed (the schedule rebuilds every 2 s).
    let entries = 0;
    for (let i = 0; i < 300 && entries < 20_000; i++) {
      await new Promise((r) => setTimeout(r, 200));
      const lists = await (await fetch(`${started.base}/v1/lists`)).json();
      entries = lists.lists.find((l) => l.name === "grows")?.snapshot?.entries ?? 0;
    }
    assert.ok(entries > 20_000, `the grown list was not built after version ${first}: ${entries} entries`);

    const verdict = await agent.check(listed);
    assert.equal(verdict.kind, "unsafe", JSON.stringify(verdict));
    assert.equal((await agent.check("http://newly-listed.example/page")).kind, "unsafe");
    const stats = agent.stats();
    assert.equal(stats.fullHashFailures, 1, JSON.stringify(stats));
    assert.equal(stats.confirmedUnsafe, 2, JSON.stringify(stats));
  } finally {
    started.child.kill();
    rmSync(own, { recursive: true, force: true });
  }
});

test("update requests bypass the browser's HTTP cache; full-hash requests may use it", async () => {
  const seen = [];
  const original = globalThis.fetch;
  globalThis.fetch = (url, init) => {
    seen.push({ url: String(url), cache: init?.cache ?? "default" });
    return original(url, init);
  };
  try {
    const agent = new Agent({ publisher: base, lists: ["xlang"], key });
    await firstUpdate(agent);
    await agent.update();
    const listed = lines(join(dir, "feed.txt")).find(valid);
    assert.equal((await agent.check(listed)).kind, "unsafe");
  } finally {
    globalThis.fetch = original;
  }
  const updates = seen.filter((r) => /\/(snapshot|updates)/.test(r.url));
  const others = seen.filter((r) => !/\/(snapshot|updates)/.test(r.url));
  // A snapshot asked for without a validator (the first one, a rebase)
  // would otherwise be answerable from a cached copy up to max-age old.
  assert.ok(updates.length >= 2, JSON.stringify(seen));
  assert.ok(updates.every((r) => r.cache === "no-store"), JSON.stringify(updates));
  assert.ok(others.length >= 1 && others.every((r) => r.cache === "default"), JSON.stringify(others));
});

// Found by an adversarial review of the Rust agent: fetch follows an
// `https` publisher's redirect to plain `http`, where anyone on the path can
// answer "not listed" for a listed URL. Such a response is a failed request.
test("a full-hash answer redirected from https to plain http is refused: the hit is unverified", async () => {
  const original = globalThis.fetch;
  const front = "https://publisher.blocksieve.test";
  globalThis.fetch = async (url, init) => {
    const to = String(url).replace(front, base);
    const response = await original(to, init);
    if (/\/(snapshot|updates)/.test(to)) return response;
    // The answer as it would come from a plain-http host a redirect led to.
    Object.defineProperty(response, "redirected", { value: true });
    Object.defineProperty(response, "url", { value: to });
    return response;
  };
  try {
    const agent = new Agent({ publisher: front, lists: ["xlang"], key });
    await firstUpdate(agent);
    const listed = lines(join(dir, "feed.txt")).find(valid);
    const verdict = await agent.check(listed);
    assert.equal(verdict.kind, "unverified", JSON.stringify(verdict));
    assert.match(verdict.reason ?? JSON.stringify(verdict), /does not follow https to plain http/);
  } finally {
    globalThis.fetch = original;
  }
});

// Found by an adversarial review: the check above sees only where fetch
// ended. `https` to plain `http`, whose answer (anyone on the path) is a
// redirect on to an `https` host of the forger's, ends at an `https` URL,
// and its "not listed" made a listed URL safe. An answer is now taken only
// from the origin asked.
test("a full-hash answer redirected through plain http on to another https host is refused", async () => {
  const original = globalThis.fetch;
  const front = "https://publisher.blocksieve.test";
  const forger = "https://forger.blocksieve.test";
  globalThis.fetch = async (url, init) => {
    const to = String(url).replace(front, base);
    if (/\/(snapshot|updates)/.test(to)) return original(to, init);
    // What the forger's https host answers at the end of the chain: no
    // match under any prefix asked.
    const path = new URL(String(url)).pathname;
    const body =
      init?.method === "POST"
        ? {
            results: JSON.parse(new TextDecoder().decode(init.body)).prefixes.map((prefix) => ({ prefix, matches: [] })),
            cache_duration_s: 3600,
          }
        : { prefix: path.split("/").pop(), matches: [], cache_duration_s: 3600 };
    const response = new Response(JSON.stringify(body), { headers: { "content-type": "application/json" } });
    Object.defineProperty(response, "redirected", { value: true });
    Object.defineProperty(response, "url", { value: forger + path });
    return response;
  };
  try {
    const agent = new Agent({ publisher: front, lists: ["xlang"], key });
    await firstUpdate(agent);
    const listed = lines(join(dir, "feed.txt")).find(valid);
    const verdict = await agent.check(listed);
    assert.equal(verdict.kind, "unverified", JSON.stringify(verdict));
    assert.match(verdict.reason ?? JSON.stringify(verdict), /another origin than asked/);
  } finally {
    globalThis.fetch = original;
  }
});

// ---- response size limits, counted on the bytes as read ----------------

const MiB = 1024 * 1024;

/** A server on 127.0.0.1:0 answering every request with `handler`. */
const serve = (handler) =>
  new Promise((ok) => {
    const server = createServer(handler);
    server.listen(0, "127.0.0.1", () => ok(server));
  });

// Found by an adversarial review: the limits (`maxSnapshotBytes` here) were
// checked against `Content-Length` alone and the body then read whole, so
// a chunked body (no length) or a gzip one (fetch inflates it; the length
// is the compressed size) from a mirror or cache was read past any limit:
// 200 MiB against 1 MiB grew the process by 810 MiB, and 3.6 GiB trapped
// the module (`unreachable`), the update's promise never settling. Bodies
// are now read a chunk at a time and cut at the limit.
test("a chunked body is read no further than the limit", async () => {
  let written = 0;
  const total = 64 * MiB;
  const server = await serve((req, res) => {
    res.writeHead(200, { "content-type": "application/octet-stream" });
    const chunk = Buffer.alloc(MiB);
    const pump = () => {
      while (written < total) {
        written += chunk.length;
        if (!res.write(chunk)) return res.once("drain", pump);
      }
      res.end();
    };
    res.on("close", () => {});
    pump();
  });
  try {
    const agent = new Agent({ publisher: `http://127.0.0.1:${server.address().port}`, lists: ["xlang"], key, maxSnapshotBytes: MiB });
    const error = await agent.update().then(() => null, (e) => e);
    assert.equal(error?.kind, "bad_data", String(error));
    assert.match(error.message, /larger than the limit of 1048576 bytes/);
    // What the socket buffers held when the read stopped, not the body.
    assert.ok(written <= 16 * MiB, `${written / MiB} MiB written of a body limited to 1 MiB`);
  } finally {
    server.close();
  }
});

test("a gzip body is counted as inflated, and cut at the limit", async () => {
  const inflated = 256 * MiB;
  const body = gzipSync(Buffer.alloc(inflated), { level: 9 });
  const server = await serve((req, res) => {
    res.writeHead(200, {
      "content-type": "application/octet-stream",
      "content-encoding": "gzip",
      "content-length": body.length,
    });
    res.end(body);
  });
  try {
    const agent = new Agent({ publisher: `http://127.0.0.1:${server.address().port}`, lists: ["xlang"], key, maxSnapshotBytes: MiB });
    const before = process.memoryUsage().rss;
    const error = await agent.update().then(() => null, (e) => e);
    const grown = process.memoryUsage().rss - before;
    assert.equal(error?.kind, "bad_data", String(error));
    assert.match(error.message, /larger than the limit of 1048576 bytes/);
    // Read whole, it grew the process by more than the 256 MiB inflated.
    assert.ok(grown < 96 * MiB, `a body limited to 1 MiB grew the process by ${(grown / MiB).toFixed(0)} MiB`);
  } finally {
    server.close();
  }
});
