// The extension's module service worker: one blocksieve agent (the
// wasm-bindgen build in pkg/, see build.sh) checks every navigation (of a
// tab, and of the frames in its page) and every download, turns a tab
// whose URL, or a frame's, is on a threat list to warning.html, and
// cancels a listed download before its file is saved.
//
// What leaves the browser: snapshot and delta downloads, and, only for a URL
// whose hash prefix the local filter holds, a full-hash request naming that
// hash prefix (plus noise prefixes), never the URL. A filter miss is decided
// locally, and a prefix hit alone is never reported unsafe: the agent
// compares full hashes before it says "unsafe".
//
// Chrome stops an idle service worker after about 30 seconds; the next event
// starts it again, and with it a new agent. The agent's lists are kept in
// IndexedDB after every update that changed them (`agent.save()`), and a
// new agent restores them (`agent.restore()`, verified again) before its
// first check: checks work at once, even offline, and the next update asks
// only for the deltas since. Event listeners are registered synchronously
// at the top level, as Chrome requires for them to wake the worker.

import init, { Agent } from "./pkg/blocksieve_wasm.js";

/** Where the agent's lists are kept across restarts: one IndexedDB
 * database, one object store, one record (the publisher and keys it is
 * for, and `agent.save()`'s array). */
const DB_NAME = "blocksieve";
const DB_STORE = "saved";
const DB_KEY = "lists";

/** The name of the periodic update alarm. */
const UPDATE_ALARM = "blocksieve-update";
/** Minutes between updates when the configuration names none. */
const DEFAULT_UPDATE_MINUTES = 30;
/** Chrome's shortest alarm period, in minutes. */
const MIN_UPDATE_MINUTES = 0.5;
/** How many recent verdicts status() keeps, for the options page. */
const RECENT_VERDICTS = 20;

/** The agent being started or running: a Promise<Agent>, or null. */
let agentPromise = null;
/** The outcome of the last update: { at, report } or { at, error }. */
let lastUpdate = null;
/** The most recent verdicts, newest last: { at, url, kind, list, block }. */
const recent = [];
/** Per tab, the URL of the navigation checked last, so that a late verdict
 * for an earlier navigation does not turn the tab away from a newer one. */
const pending = new Map();
/** Per tab, the URLs of the navigation in progress: its first URL and each
 * server redirect's target (`webRequest.onBeforeRedirect`), every one
 * checked; each mapped to its warning's "go back" target, the tab's last
 * page found safe when the navigation began (a redirector leading to a
 * listed page is no way back). */
const navigation = new Map();
/** Per tab, the URLs its current page was reached through since the user
 * last navigated (typed, bookmarked, reloaded, went back or forward): every
 * navigation's URLs and redirects since, including those a page started
 * itself (a script, a meta refresh, a form, a link). A "block" verdict for
 * any of them still turns the tab to the warning when it arrives after the
 * tab moved on: a listed page must not escape its warning by forwarding the
 * tab before its full-hash answer comes. Each URL is mapped to its "go
 * back" target, as in `navigation` (a page the listed one forwarded to is no
 * way back). At most CHAIN_URLS, the newest. */
const chain = new Map();
const CHAIN_URLS = 32;
/** Transitions only the user makes (chrome.webNavigation TransitionType;
 * with the `from_address_bar` qualifier too): a commit of one of these
 * starts a new `chain`. Not "reload" nor the `forward_back` qualifier: a
 * page's script makes those too (`location.reload()`, `history.go()`). */
const USER_TRANSITIONS = new Set(["typed", "auto_bookmark", "generated", "keyword", "keyword_generated", "start_page"]);
/** Per tab, the URLs whose check is running: kept in `navigation` and
 * `chain` until their verdict comes, whatever else the tab does. */
const checking = new Map();
/** Per tab, the last page committed and found safe (a redirector found
 * safe never commits: it is no way back). */
const lastSafe = new Map();
/** Per tab, the URL committed last, and the URLs found safe (at most
 * CHAIN_URLS, the newest): a page is `lastSafe` once both are known, in
 * whichever order its verdict and its commit come. */
const committed = new Map();
const foundSafe = new Map();
/** When a tab was last turned to a warning for a URL (a download of the
 * same URL then opens no second one). */
const warned = new Map();
/** How long a download is held for its check before its name is given
 * back (as a failed check: fail open unless `failurePolicy: "closed"`). */
const DOWNLOAD_CHECK_MS = 10_000;
/** How long a navigation's check may take before, under
 * `failurePolicy: "closed"`, its page is blocked as unchecked. */
const NAVIGATION_CHECK_MS = 5_000;
/** The most characters of an address quoted in the warning's query (the
 * blocked URL, the page that framed it): it is shown as text, which needs
 * no more, and quoted whole a long one (each "/", "?", "=", "&" or "%"
 * three characters there) takes the warning's address past Chrome's 2 MiB
 * limit for URLs: the tab cannot be turned to it, and the listed page
 * stays. */
const MAX_QUOTED_CHARS = 4096;
/** The longest "go back" address the warning offers (a link must be
 * whole): escaped, at most three times as long, it leaves the warning's
 * address under Chrome's limit. A longer one offers to close the tab. */
const MAX_BACK_CHARS = 512 * 1024;
/** URL -> when a tab warned of for a slow check was turned back to it. */
const reloaded = new Map();
/** Whether the configuration asks to block what cannot be checked
 * (`failurePolicy: "closed"`), as last read. */
let failClosed = false;

/**
 * The configuration: what the options page stored, else config.json in the
 * extension's directory. Shape: { publisher: "http(s)://host:port",
 * lists: ["name", ...], key: "<base64 Ed25519 public key>" (or several,
 * separated by white space or commas, or an array of them: every one is
 * trusted, as while the publisher rotates its signing key),
 * updateMinutes: number >= 0.5, failurePolicy: "open" | "closed" }.
 *
 * Throws an Error naming the source and the field when one is missing or
 * malformed. Each key's syntax is checked by the agent when it starts.
 */
async function readConfig() {
  const { config } = await chrome.storage.local.get("config");
  if (config) {
    // The policy asked for holds even when another field is refused.
    failClosed = config?.failurePolicy === "closed";
    return validateConfig(config, "the options page");
  }
  const response = await fetch(chrome.runtime.getURL("config.json"));
  if (!response.ok) {
    throw new Error(
      "no configuration: set the publisher, lists and key on the options page, or ship config.json",
    );
  }
  const packaged = await response.json();
  failClosed = packaged?.failurePolicy === "closed";
  return validateConfig(packaged, "config.json");
}

/** Checks a configuration's fields; returns it with defaults filled in. */
function validateConfig(config, source) {
  const fail = (what) => {
    throw new Error(`configuration from ${source}: ${what}`);
  };
  if (typeof config !== "object" || config === null) fail("not a JSON object");
  let publisher;
  try {
    publisher = new URL(config.publisher);
  } catch {
    fail(`publisher ${JSON.stringify(config.publisher)} is not a URL`);
  }
  if (publisher.protocol !== "http:" && publisher.protocol !== "https:") {
    fail(`publisher ${JSON.stringify(config.publisher)} is not http or https`);
  }
  // The agent itself refuses plain http to any other host: say so here,
  // naming the field, rather than leave every navigation unchecked.
  const loopback =
    publisher.hostname === "localhost" || publisher.hostname === "[::1]" || /^127(\.\d{1,3}){3}$/.test(publisher.hostname);
  if (publisher.protocol === "http:" && !loopback) {
    fail(`publisher ${JSON.stringify(config.publisher)} is plain http to a host that is not loopback: use https`);
  }
  if (!Array.isArray(config.lists) || config.lists.length === 0) fail("lists is not a non-empty array");
  for (const list of config.lists) {
    if (typeof list !== "string" || !/^[a-z0-9_-]{1,64}$/.test(list)) {
      fail(`list name ${JSON.stringify(list)} is not 1-64 characters of a-z 0-9 - _`);
    }
  }
  // `new Agent` takes several keys as `keys`; here every key is in `key`,
  // so that a `keys` beside it cannot leave one silently untrusted.
  if (config.keys !== undefined) {
    fail("keys is not read: list every trusted key in key (one string, or an array of strings)");
  }
  if (config.key === undefined || config.key === null) fail("key is missing");
  const keys = trustedKeys(config.key);
  if (keys === null) fail(`key ${JSON.stringify(config.key)} is not a string or an array of strings`);
  if (keys.length === 0) fail(`key ${JSON.stringify(config.key)} holds no key`);
  const updateMinutes = config.updateMinutes ?? DEFAULT_UPDATE_MINUTES;
  if (typeof updateMinutes !== "number" || !(updateMinutes >= MIN_UPDATE_MINUTES)) {
    fail(`updateMinutes ${JSON.stringify(updateMinutes)} is not a number of at least ${MIN_UPDATE_MINUTES}`);
  }
  const failurePolicy = config.failurePolicy ?? "open";
  if (failurePolicy !== "open" && failurePolicy !== "closed") {
    fail(`failurePolicy ${JSON.stringify(failurePolicy)} is not "open" or "closed"`);
  }
  return {
    publisher: config.publisher.replace(/\/+$/, ""),
    lists: [...config.lists],
    keys,
    updateMinutes,
    failurePolicy,
  };
}

/** The keys a configuration's `key` names, in order and each once: a
 * string holds one or several, separated by white space or commas (no
 * key, base64 or hex, holds either); an array, strings of them. Null when
 * `key` is neither. */
function trustedKeys(key) {
  const texts = Array.isArray(key) ? key : [key];
  if (!texts.every((text) => typeof text === "string")) return null;
  return [...new Set(texts.flatMap((text) => text.split(/[\s,]+/)).filter(Boolean))];
}

/** The running agent, started on first use; a failed start is retried on
 * the next call. */
function agent() {
  agentPromise ??= start().catch((error) => {
    agentPromise = null;
    throw error;
  });
  return agentPromise;
}

async function start() {
  const config = await readConfig();
  failClosed = config.failurePolicy === "closed";
  await init({ module_or_path: chrome.runtime.getURL("pkg/blocksieve_wasm_bg.wasm") });
  const started = new Agent({
    publisher: config.publisher,
    lists: config.lists,
    keys: config.keys,
    failurePolicy: config.failurePolicy,
  });
  started.owner = { publisher: config.publisher, keys: config.keys };
  const alarm = await chrome.alarms.get(UPDATE_ALARM);
  if (alarm?.periodInMinutes !== config.updateMinutes) {
    await chrome.alarms.create(UPDATE_ALARM, {
      delayInMinutes: config.updateMinutes,
      periodInMinutes: config.updateMinutes,
    });
  }
  const restored = await restoreSaved(started);
  if (restored === config.lists.length) {
    // Every list is back: check at once, catch up with deltas meanwhile.
    update(started);
  } else {
    // Without a snapshot every check fails and navigations go unchecked
    // (fail open); the alarm tries again.
    await update(started);
  }
  return started;
}

/** Downloads new snapshots or deltas, and keeps the lists when any
 * changed; records the outcome, never throws. */
async function update(running) {
  const applied = updatesApplied(running);
  try {
    const report = await running.update();
    lastUpdate = { at: Date.now(), report };
    if (report.lists.some((l) => l.changed)) await keep(running);
  } catch (error) {
    lastUpdate = { at: Date.now(), error: describe(error) };
    console.warn("blocksieve: update failed:", describe(error));
    // A round rejected for one list without a snapshot may have updated
    // the others: keep them.
    const after = updatesApplied(running);
    if (applied !== null && after !== null && after > applied) await keep(running);
  }
  return lastUpdate;
}

/** The IndexedDB database, opened (and created) on demand. */
function openDb() {
  return new Promise((resolve, reject) => {
    const request = indexedDB.open(DB_NAME, 1);
    request.onupgradeneeded = () => request.result.createObjectStore(DB_STORE);
    request.onsuccess = () => resolve(request.result);
    request.onerror = () => reject(request.error);
  });
}

/** Runs `action(store)` in one transaction; resolves with its request's result. */
async function withStore(mode, action) {
  const db = await openDb();
  try {
    return await new Promise((resolve, reject) => {
      const transaction = db.transaction(DB_STORE, mode);
      const request = action(transaction.objectStore(DB_STORE));
      transaction.oncomplete = () => resolve(request.result);
      transaction.onerror = () => reject(transaction.error);
      transaction.onabort = () => reject(transaction.error);
    });
  } finally {
    db.close();
  }
}

/** Keeps the agent's lists for the next start. A failure (storage full,
 * private mode) is logged: the next start downloads the snapshots. */
async function keep(running) {
  try {
    const record = { ...running.owner, lists: running.save() };
    await withStore("readwrite", (store) => store.put(record, DB_KEY));
  } catch (error) {
    console.warn("blocksieve: could not keep the lists:", describe(error));
  }
}

/** Restores the lists kept for this publisher, when every key they were
 * kept under is still trusted (a key added, as when the publisher's next
 * key is announced, keeps them; a key dropped does not: they may have been
 * verified under it); returns how many came back whole. What does not
 * verify is dropped, and its list downloads. */
async function restoreSaved(running) {
  try {
    const record = await withStore("readonly", (store) => store.get(DB_KEY));
    const { publisher, keys } = running.owner;
    if (!record || record.publisher !== publisher) return 0;
    // A record kept before the configuration took several keys has `key`.
    const keptUnder = record.keys ?? [record.key];
    if (!keptUnder.every((key) => keys.includes(key))) return 0;
    const outcome = running.restore(record.lists);
    for (const failed of outcome.lists.filter((l) => l.error || l.chainError)) {
      console.warn("blocksieve: a kept list did not verify:", failed.list, failed.error ?? failed.chainError);
    }
    // A list whose deltas were dropped is older than what was kept: it
    // checks meanwhile, but the first update is awaited as for a missing one.
    return outcome.lists.filter((l) => l.version !== undefined && !l.chainError).length;
  } catch (error) {
    console.warn("blocksieve: could not read the kept lists:", describe(error));
    return 0;
  }
}

function describe(error) {
  return { kind: error?.kind ?? "internal", message: String(error?.message ?? error) };
}

/** Checks a top-level navigation; turns the tab to the warning page when
 * the verdict says block. */
async function checkNavigation(tabId, url) {
  pending.set(tabId, url);
  // A URL found safe before is not known safe now: a list update may have
  // listed it since.
  foundSafe.get(tabId)?.delete(url);
  const running = checking.get(tabId) ?? new Map();
  running.set(url, (running.get(url) ?? 0) + 1);
  checking.set(tabId, running);
  try {
    await decide(tabId, url);
  } finally {
    const left = (running.get(url) ?? 1) - 1;
    if (left > 0) running.set(url, left);
    else running.delete(url);
  }
}

/** Snapshots and delta chains `running` has applied so far, or null when
 * it can no longer say: a new configuration freed it while a check was
 * out (that check's verdict stands). */
function updatesApplied(running) {
  try {
    const stats = running.stats();
    return stats.snapshotsApplied + stats.deltasApplied;
  } catch {
    return null;
  }
}

/** The agent's verdict for `url`, remembered for the status: the agent's
 * own (`block` true for `unsafe`, and for `unverified` under
 * `failurePolicy: "closed"`), or `{ kind: "error", block }` when the check
 * failed: unchecked URLs proceed (fail open), as the agent's own
 * "unverified" verdicts do, unless the configuration says
 * `failurePolicy: "closed"`. `what` ("navigation", "frame", "download")
 * is remembered with it. Never throws. */
async function verdictOf(url, what) {
  let verdict;
  try {
    const running = await agent();
    const applied = updatesApplied(running);
    verdict = await running.check(url);
    // A check the publisher refused as `prefix_too_short` updated the
    // lists itself: keep what it brought, as after an update.
    const after = updatesApplied(running);
    if (applied !== null && after !== null && after > applied) void keep(running);
  } catch (error) {
    remember({ url, what, kind: "error", error: describe(error), block: failClosed });
    console.warn(`blocksieve: could not check a ${what}:`, describe(error));
    return { kind: "error", block: failClosed };
  }
  remember({ url, what, kind: verdict.kind, list: verdict.list, stale: verdict.stale, block: verdict.block });
  return verdict;
}

async function decide(tabId, url) {
  const checked = verdictOf(url, "navigation");
  let timer;
  const late = await Promise.race([
    checked.then(() => false),
    new Promise((resolve) => {
      timer = setTimeout(() => resolve(true), NAVIGATION_CHECK_MS);
    }),
  ]);
  clearTimeout(timer);
  // No verdict in time (an agent waiting for its first snapshot, a hung
  // request): under "closed", the page cannot be checked, so it is blocked;
  // the verdict still counts when it comes.
  const shown = late && failClosed ? await warn(tabId, url, { kind: "error", block: true, timedOut: true }) : null;
  const verdict = await checked;
  if (verdict.kind === "error") {
    if (verdict.block) await warn(tabId, url, verdict);
    return;
  }
  // The tab was closed meanwhile.
  if (!pending.has(tabId)) return;
  if (!verdict.block) {
    // Only a page found safe is a "go back" target: an unverified one
    // (let through) may be the listed site's own.
    if (verdict.kind === "safe") {
      const safe = [...(foundSafe.get(tabId) ?? [])].filter((u) => u !== url);
      foundSafe.set(tabId, new Set([...safe, url].slice(-CHAIN_URLS)));
      if (committed.get(tabId) === url) lastSafe.set(tabId, url);
      // Warned of for having no verdict in time, and found safe since: the
      // page loads, if the tab still shows that warning.
      if (shown) await loadFoundSafe(tabId, url, shown);
    }
    return;
  }
  await warn(tabId, url, verdict);
}

/** Loads `url`, found safe after tab `tabId` was turned to the warning
 * `shown` for having no verdict in time, if the tab still shows it (the
 * user has not gone back or elsewhere). Once a minute per URL at most: its
 * next check should be quick (the lists are there now), and a check slow
 * every time must not reload a tab in a loop. */
async function loadFoundSafe(tabId, url, shown) {
  const at = reloaded.get(url);
  if (at !== undefined && Date.now() - at < 60_000) return;
  try {
    const tab = await chrome.tabs.get(tabId);
    if ((tab.url ?? tab.pendingUrl) !== shown) return;
    reloaded.set(url, Date.now());
    for (const [u, t] of reloaded) if (Date.now() - t >= 60_000) reloaded.delete(u);
    await chrome.tabs.update(tabId, { url });
  } catch (error) {
    // The tab was closed meanwhile.
    console.warn("blocksieve: could not load a page found safe:", describe(error));
  }
}

/** Turns tab `tabId` to the warning page for `url`, unless the tab has
 * moved on to a navigation `url` did not lead to; returns the warning's
 * address when the tab was turned to it, else null. */
async function warn(tabId, url, verdict) {
  const reached = navigation.get(tabId)?.has(url) ? navigation.get(tabId) : chain.get(tabId);
  if (pending.get(tabId) !== url && !reached?.has(url)) return null;
  const warning = warningFor(url, verdict);
  const back = reached?.has(url) ? reached.get(url) : lastSafe.get(tabId);
  return (await showWarning(tabId, warning, back)) ? warning.href : null;
}

/** Turns tab `tabId` to `warning` (warning.html with its query), offering
 * `back` as its way back; false when the tab could not be turned. */
async function showWarning(tabId, warning, back) {
  // The pages the listed one led to are no way back from later warnings
  // either: the tab's way back is the one this warning offers.
  if (back) lastSafe.set(tabId, back);
  else lastSafe.delete(tabId);
  if (back && back.length <= MAX_BACK_CHARS) warning.searchParams.set("back", back);
  warned.set(warning.blocked, Date.now());
  try {
    await chrome.tabs.update(tabId, { url: warning.href });
    return true;
  } catch (error) {
    // The tab was closed meanwhile.
    console.warn("blocksieve: could not show the warning:", describe(error));
    return false;
  }
}

/** warning.html's address for `url` and its verdict. */
function warningFor(url, verdict) {
  const warning = new URL(chrome.runtime.getURL("warning.html"));
  warning.searchParams.set("url", quoted(url));
  // The whole URL, for `warned` (the query may hold only its start).
  warning.blocked = url;
  if (verdict.list) warning.searchParams.set("list", verdict.list);
  warning.searchParams.set("kind", verdict.kind);
  if (verdict.stale) warning.searchParams.set("stale", "1");
  return warning;
}

/** `text` as the warning's query quotes it: whole, or its first
 * MAX_QUOTED_CHARS characters and an ellipsis. */
function quoted(text) {
  return text.length <= MAX_QUOTED_CHARS ? text : `${text.slice(0, MAX_QUOTED_CHARS)}…`;
}

/** Checks a page loading in a frame of tab `tabId` (an iframe of the page
 * `top`, the tab's committed page when the frame started): a listed page
 * in a frame turns the whole tab to the warning, naming the framed page
 * and the page that framed it, as Safe Browsing does for a subframe. Its
 * way back is the framing page's own (the framing page would load the
 * frame again). Dropped once the user navigated the tab themselves. */
async function checkFrame(tabId, url, top) {
  const verdict = await verdictOf(url, "frame");
  if (!verdict.block) return;
  // The framing page, or a page it led the tab to, is still the tab's
  // (`top` is unknown for a page committed before the service worker
  // last started: the frame is warned for then).
  const reached = chain.get(tabId);
  if (top !== undefined && !reached?.has(top)) return;
  const warning = warningFor(url, verdict);
  if (top !== undefined) warning.searchParams.set("framedIn", quoted(top));
  await showWarning(tabId, warning, top === undefined ? undefined : reached.get(top));
}

/** Checks a download's URLs (where it started and, after redirects, where
 * it came from) while Chrome holds its file name: a listed download is
 * cancelled before the file is saved, and a warning opens in a new tab
 * unless a tab was just turned to a warning for the same URL (a link to
 * it navigated the tab). Its name is given back once every URL is found
 * safe (or the check failed or took over DOWNLOAD_CHECK_MS, with
 * `failurePolicy: "open"`). A check that took over DOWNLOAD_CHECK_MS still
 * counts when it ends: a "block" verdict then cancels the download if it is
 * still running, and warns either way (saying whether the file was saved). */
async function checkDownload(item, suggest) {
  const urls = [...new Set([item.url, item.finalUrl].filter((u) => /^https?:/i.test(u ?? "")))];
  let current = urls[0];
  const checked = (async () => {
    for (const url of urls) {
      current = url;
      const verdict = await verdictOf(url, "download");
      if (verdict.block) return { url, verdict };
    }
    return null;
  })();
  let timer;
  const timedOut = {};
  const timeout = new Promise((resolve) => {
    timer = setTimeout(() => resolve(timedOut), DOWNLOAD_CHECK_MS);
  });
  let blocked = await Promise.race([checked, timeout]);
  clearTimeout(timer);
  let late = false;
  if (blocked === timedOut) {
    if (failClosed) {
      blocked = { url: current, verdict: { kind: "error", block: true, timedOut: true } };
    } else {
      // Held no longer (fail open); the verdict still counts when it comes.
      suggest();
      blocked = await checked;
      late = true;
    }
  } else if (!blocked) {
    suggest();
    return;
  }
  if (!blocked) return;
  let saved = false;
  if (late) {
    const [now] = await chrome.downloads.search({ id: item.id }).catch(() => []);
    saved = now?.state === "complete";
  }
  if (!saved) {
    try {
      await chrome.downloads.cancel(item.id);
    } catch (error) {
      console.warn("blocksieve: could not cancel a listed download:", describe(error));
    }
  }
  // Let a navigation to the same URL turn its tab first.
  await new Promise((r) => setTimeout(r, 500));
  if (Date.now() - (warned.get(blocked.url) ?? 0) < 10_000) return;
  const warning = warningFor(blocked.url, blocked.verdict);
  warning.searchParams.set("download", saved ? "saved" : "1");
  warned.set(blocked.url, Date.now());
  try {
    await chrome.tabs.create({ url: warning.href });
  } catch (error) {
    console.warn("blocksieve: could not show the warning:", describe(error));
  }
}

function remember(entry) {
  recent.push({ at: Date.now(), ...entry });
  if (recent.length > RECENT_VERDICTS) recent.shift();
}

/** What the options page shows: whether the agent runs, the last update,
 * the agent's counters and the recent verdicts. */
async function status() {
  let stats = null;
  let error = null;
  try {
    stats = (await agent()).stats();
  } catch (e) {
    error = describe(e);
  }
  return { running: stats !== null, error, lastUpdate, stats, recent: [...recent] };
}

chrome.webNavigation.onBeforeNavigate.addListener(
  (details) => {
    const { tabId, url } = details;
    if (details.frameId !== 0) {
      // A page loading in a frame (an iframe) of the tab's page.
      if (tabId >= 0) checkFrame(tabId, url, committed.get(tabId));
      return;
    }
    // What the last navigation left: URLs still being checked stay (a
    // redirect reported before this event, a navigation this one replaces).
    const urls = new Map([...(navigation.get(tabId) ?? [])].filter(([u]) => checking.get(tabId)?.has(u)));
    urls.set(url, lastSafe.get(tabId));
    navigation.set(tabId, urls);
    checkNavigation(tabId, url);
  },
  { url: [{ schemes: ["http", "https"] }] },
);

// Each server redirect of a top-level navigation (a shortener, a click
// tracker, an open redirect; several in a row) is checked as it happens:
// only its last target commits.
chrome.webRequest.onBeforeRedirect.addListener(
  (details) => {
    if (details.tabId < 0 || !/^https?:/.test(details.redirectUrl)) return;
    const urls = navigation.get(details.tabId) ?? new Map([[details.url, lastSafe.get(details.tabId)]]);
    // The way back from every hop is the navigation's own.
    urls.set(details.redirectUrl, urls.values().next().value);
    navigation.set(details.tabId, urls);
    checkNavigation(details.tabId, details.redirectUrl);
  },
  { urls: ["http://*/*", "https://*/*"], types: ["main_frame"] },
);

// Each server redirect of a page loading in a frame, likewise (an ad's
// click tracker): the frame's page is checked at each hop.
chrome.webRequest.onBeforeRedirect.addListener(
  (details) => {
    const { tabId, redirectUrl } = details;
    if (tabId < 0 || !/^https?:/.test(redirectUrl)) return;
    checkFrame(tabId, redirectUrl, committed.get(tabId));
  },
  { urls: ["http://*/*", "https://*/*"], types: ["sub_frame"] },
);

// A download is held while its name is determined: checked first
// (`checkDownload`). Registered only with the `downloads` permission.
chrome.downloads?.onDeterminingFilename.addListener((item, suggest) => {
  checkDownload(item, suggest).catch((error) => {
    console.warn("blocksieve: could not check a download:", describe(error));
    suggest();
  });
  return true;
});

// Every commit records how the tab reached its page (`chain`), and a URL no
// check named is checked here.
chrome.webNavigation.onCommitted.addListener(
  (details) => {
    if (details.frameId !== 0) return;
    const { tabId, url } = details;
    const qualifiers = details.transitionQualifiers ?? [];
    const byUser = USER_TRANSITIONS.has(details.transitionType) || qualifiers.includes("from_address_bar");
    const urls = navigation.get(tabId) ?? new Map();
    navigation.delete(tabId);
    const running = checking.get(tabId);
    // A user's navigation starts a new chain: a verdict still to come for
    // a page they left is dropped.
    const reached = new Map(byUser ? [] : chain.get(tabId));
    const add = (u, back) => {
      reached.delete(u); // to the newest place
      reached.set(u, back);
    };
    for (const [u, back] of urls) add(u, back);
    if (!urls.has(url)) add(url, reached.get(url) ?? lastSafe.get(tabId));
    // The oldest go first, but never one still being checked.
    for (const u of [...reached.keys()]) {
      if (reached.size <= CHAIN_URLS) break;
      if (!running?.has(u)) reached.delete(u);
    }
    chain.set(tabId, reached);
    committed.set(tabId, url);
    if (foundSafe.get(tabId)?.has(url)) lastSafe.set(tabId, url);
    if (!urls.has(url)) checkNavigation(tabId, url);
  },
  { url: [{ schemes: ["http", "https"] }] },
);

// A page's own route change (`history.pushState` / `replaceState`: a
// single-page app, or back and forward between its entries) fires none of
// the events above, and the tab shows the new URL: checked as a commit is.
chrome.webNavigation.onHistoryStateUpdated.addListener(
  (details) => {
    if (details.frameId !== 0) return;
    const { tabId, url } = details;
    const reached = new Map(chain.get(tabId));
    const back = reached.get(url) ?? lastSafe.get(tabId);
    reached.delete(url); // to the newest place
    reached.set(url, back);
    const running = checking.get(tabId);
    for (const u of [...reached.keys()]) {
      if (reached.size <= CHAIN_URLS) break;
      if (!running?.has(u)) reached.delete(u);
    }
    chain.set(tabId, reached);
    committed.set(tabId, url);
    checkNavigation(tabId, url);
  },
  { url: [{ schemes: ["http", "https"] }] },
);

function forgetTab(tabId) {
  for (const map of [pending, navigation, chain, lastSafe, committed, foundSafe, checking]) map.delete(tabId);
}

chrome.tabs.onRemoved.addListener(forgetTab);
chrome.tabs.onReplaced.addListener((_added, removed) => forgetTab(removed));

chrome.alarms.onAlarm.addListener((alarm) => {
  if (alarm.name === UPDATE_ALARM) agent().then(update, () => {});
});

chrome.runtime.onInstalled.addListener(() => agent().catch(() => {}));
chrome.runtime.onStartup.addListener(() => agent().catch(() => {}));

// A new configuration takes effect with a new agent.
chrome.storage.onChanged.addListener((changes, area) => {
  if (area === "local" && "config" in changes) {
    // Release the old agent's WebAssembly memory; a check still running
    // on it finishes first (the package keeps what it needs alive).
    agentPromise?.then((old) => old.free?.(), () => {});
    agentPromise = null;
    lastUpdate = null;
    chrome.alarms.clear(UPDATE_ALARM).then(() => agent().catch(() => {}));
  }
});

chrome.runtime.onMessage.addListener((message, _sender, reply) => {
  if (message?.type === "status") {
    status().then(reply);
    return true;
  }
  if (message?.type === "update") {
    agent()
      .then(update)
      .then(() => status())
      .then(reply, (e) => reply({ running: false, error: describe(e) }));
    return true;
  }
  return false;
});

// For the options page's console and automated tests.
self.blocksieve = { status, update: () => agent().then(update) };
