// A stand-in for the agent's wasm-bindgen package, for running the extension
// test before that package is built (BLOCKSIEVE_EXTENSION_STANDIN=1). Test
// use only; never shipped. It has the package's JavaScript API and talks to
// a real publisher, but it does not decode snapshots: its "filter" is the
// set of listed 32-bit hash prefixes the test writes to filter.json beside
// it, and its expressions are a simplified form of the agent's. A filter
// miss sends nothing; a hit sends the hash prefixes to
// POST /v1/hashes:search and compares full hashes, as the agent does.

let filter = null;

export default async function init() {
  const response = await fetch(new URL("./filter.json", import.meta.url));
  filter = await response.json();
}

function failure(kind, message) {
  const error = new Error(message);
  error.kind = kind;
  return error;
}

async function sha256Hex(text) {
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return [...new Uint8Array(digest)].map((b) => b.toString(16).padStart(2, "0")).join("");
}

function expressions(url) {
  const host = url.hostname.toLowerCase().replace(/\.+$/, "");
  const labels = host.split(".");
  const hosts = [host];
  for (let i = Math.max(1, labels.length - 5); i < labels.length - 1; i++) {
    hosts.push(labels.slice(i).join("."));
  }
  const parts = url.pathname.split("/").filter(Boolean);
  const paths = new Set([url.pathname + url.search, url.pathname, "/"]);
  for (let i = 1; i <= Math.min(parts.length - 1, 3); i++) paths.add(`/${parts.slice(0, i).join("/")}/`);
  return hosts.flatMap((h) => [...paths].map((p) => h + p));
}

export class Agent {
  #options;
  #versions = new Map();
  #stats = { fullHashRequests: 0, cacheHits: 0, snapshotsApplied: 0, checks: 0 };
  #cache = new Map();

  constructor(options) {
    // `key` for one trusted key, `keys` for several, as the package takes
    // them (the stand-in verifies no signature).
    if (!options?.publisher || !Array.isArray(options.lists) || !(options.key || options.keys?.length)) {
      throw failure("invalid_input", "publisher, lists and key or keys are required");
    }
    this.#options = options;
  }

  async update() {
    const lists = [];
    for (const list of this.#options.lists) {
      const response = await fetch(`${this.#options.publisher}/v1/lists/${list}/snapshot`);
      if (!response.ok) throw failure("transport", `snapshot of ${list}: HTTP ${response.status}`);
      await response.arrayBuffer();
      const version = Number(/^"(\d+)-/.exec(response.headers.get("etag") ?? "")?.[1]);
      const changed = this.#versions.get(list) !== version;
      if (changed) this.#stats.snapshotsApplied += 1;
      this.#versions.set(list, version);
      lists.push({ list, version, changed });
    }
    return { lists };
  }

  async check(input) {
    let url;
    try {
      url = new URL(input);
    } catch {
      throw failure("invalid_input", `not a URL: ${input}`);
    }
    this.#stats.checks += 1;
    const hashes = await Promise.all(expressions(url).map(async (e) => [e, await sha256Hex(e)]));
    const hits = hashes.filter(([, h]) =>
      this.#options.lists.some((list) => filter[list]?.includes(h.slice(0, 8))),
    );
    if (hits.length === 0) return { kind: "safe", stale: false, block: false };
    const prefixes = [...new Set(hits.map(([, h]) => h.slice(0, 8)))];
    let matches = prefixes.flatMap((p) => this.#cache.get(p) ?? []);
    if (prefixes.every((p) => this.#cache.has(p))) {
      this.#stats.cacheHits += 1;
    } else {
      this.#stats.fullHashRequests += 1;
      const response = await fetch(`${this.#options.publisher}/v1/hashes:search`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        // Four random noise prefixes beside the real ones, as the agent sends.
        body: JSON.stringify({
          prefixes: [...prefixes, ...Array.from({ length: 4 }, () => crypto.getRandomValues(new Uint32Array(1))[0].toString(16).padStart(8, "0"))],
        }),
      });
      if (!response.ok) {
        return { kind: "unverified", stale: false, block: this.#options.failurePolicy === "closed" };
      }
      const body = await response.json();
      for (const result of body.results) this.#cache.set(result.prefix, result.matches);
      matches = body.results.flatMap((r) => r.matches);
    }
    for (const [expression, fullHash] of hits) {
      const match = matches.find((m) => m.full_hash === fullHash && this.#options.lists.includes(m.list));
      if (match) return { kind: "unsafe", list: match.list, expression, fullHash, stale: false, block: true };
    }
    return { kind: "safe", stale: false, block: false };
  }

  stats() {
    return { ...this.#stats };
  }
}
