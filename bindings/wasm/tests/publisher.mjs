// A real publisher for the WASM agent's node tests (agent.test.mjs,
// chromium.test.mjs): started on 127.0.0.1:0, its readiness and its
// full-hash search count read over HTTP.

import { spawn } from "node:child_process";

/** Starts `binary serve --config config --listen 127.0.0.1:0` and resolves
 * with `{ child, base, key }`, read from its
 * `publisher listening addr=... public_key=...` log line. */
export function startPublisher(binary, config) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(binary, ["serve", "--config", config, "--listen", "127.0.0.1:0"], {
      env: { ...process.env, NO_COLOR: "1" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let log = "";
    const timer = setTimeout(() => reject(new Error(`publisher did not start:\n${log}`)), 120_000);
    const read = (chunk) => {
      log += chunk.toString();
      // eslint-disable-next-line no-control-regex
      const plain = log.replace(/\x1b\[[0-9;]*m/g, "");
      const line = plain.split("\n").find((l) => l.includes("publisher listening"));
      const addr = line && /addr=(\S+)/.exec(line);
      const publicKey = line && /public_key=(\S+)/.exec(line);
      if (addr && publicKey) {
        clearTimeout(timer);
        resolvePromise({ child, base: `http://${addr[1]}`, key: publicKey[1] });
      }
    };
    child.stdout.on("data", read);
    child.stderr.on("data", read);
    child.on("exit", (code) => reject(new Error(`publisher exited with ${code}:\n${log}`)));
  });
}

/** Resolves once the publisher has a snapshot of every list (`/readyz`). */
export async function waitReady(base) {
  const deadline = Date.now() + 120_000;
  for (;;) {
    const response = await fetch(`${base}/readyz`).catch(() => null);
    if (response?.ok) return;
    if (Date.now() > deadline) throw new Error(`publisher at ${base} not ready after 120 s`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The publisher's `blocksieve_http_requests_total` for the routes whose
 * label includes `route` (any status). */
export async function requestsServed(base, route) {
  const text = await (await fetch(`${base}/metrics`)).text();
  return text
    .split("\n")
    .filter((l) => l.startsWith("blocksieve_http_requests_total") && l.includes(`route="${route}"`))
    .reduce((sum, l) => sum + Number(l.trim().split(/\s+/).pop()), 0);
}

/** The publisher's `blocksieve_http_requests_total` for the search route. */
export const searchesServed = (base) => requestsServed(base, "/v1/hashes:search");
