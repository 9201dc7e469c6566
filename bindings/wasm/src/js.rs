//! The `wasm-bindgen` glue: the `Agent` class, `canonicalize` and
//! `fullHashes`, and the session's I/O through the JavaScript global
//! object — `fetch`, `crypto.getRandomValues`, `Date.now()` — which
//! browsers, extension service workers and node ≥ 18 all have.
//!
//! JavaScript is single-threaded, but `update()` and `check()` may
//! interleave at their `await`s: the session is borrowed only between
//! them, never across one, and it checks each response against the state
//! in place when the response arrives.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use blocksieve_engine::Error;
use blocksieve_engine::lookup::Verdict;
use blocksieve_engine::session::{
    CheckStep, HttpRequest, HttpResponse, ListUpdate, MAX_SEARCH_RESPONSE_BYTES, RequestKind, SavedList,
    Session,
};
use js_sys::{Array, Function, Object, Promise, Reflect, Uint8Array};
use rand::SeedableRng;
use rand::rngs::StdRng;
use serde_json::{Value, json};
use wasm_bindgen::JsCast;
use wasm_bindgen::prelude::*;
use wasm_bindgen_futures::{JsFuture, future_to_promise};

use crate::api;

/// The response headers the session reads (a `fetch` response's headers
/// cannot be listed in every environment, but can be asked by name).
const RESPONSE_HEADERS: [&str; 5] = [
    "content-type",
    "etag",
    "retry-after",
    "x-blocksieve-freshness",
    "date",
];

/// How long one snapshot or delta request may take, as the Rust agent's
/// default snapshot timeout.
const UPDATE_TIMEOUT: Duration = Duration::from_secs(5 * 60);

/// How long one full-hash request may take, as the Rust agent's default
/// request timeout.
const SEARCH_TIMEOUT: Duration = Duration::from_secs(10);

/// The wall clock, from `Date.now()` (milliseconds since the Unix epoch).
fn now() -> SystemTime {
    let millis = js_sys::Date::now();
    // NaN and negative times (a clock set before 1970) read as the epoch.
    UNIX_EPOCH + Duration::from_millis(if millis > 0.0 { millis as u64 } else { 0 })
}

/// A thrown `Error` with `.kind` (see [`api::error_kind`]).
fn js_error(error: &Error) -> JsValue {
    let thrown = js_sys::Error::new(&error.to_string());
    // Setting a property on a fresh Error object cannot fail.
    let _ = Reflect::set(&thrown, &"kind".into(), &api::error_kind(error).into());
    thrown.into()
}

/// A JSON value as a plain JavaScript object.
fn to_js(value: &Value) -> JsValue {
    js_sys::JSON::parse(&value.to_string()).unwrap_or(JsValue::NULL)
}

/// The host's own problem (no `fetch`, no `crypto`): misconfigured.
fn host_missing(what: &'static str) -> Error {
    Error::InvalidSetting {
        setting: what,
        value: "missing from this JavaScript environment".to_owned(),
    }
}

/// The origin of `url` (scheme, host and port, as JavaScript's `URL`
/// serializes them), or `None` when it does not parse.
fn origin(url: &str) -> Option<String> {
    let constructor: Function = global("URL")?.dyn_into().ok()?;
    let parsed = Reflect::construct(&constructor, &Array::of1(&url.into())).ok()?;
    Reflect::get(&parsed, &"origin".into()).ok()?.as_string()
}

/// A property of the global object, if present.
fn global(name: &str) -> Option<JsValue> {
    Reflect::get(&js_sys::global(), &name.into())
        .ok()
        .filter(|v| !v.is_undefined() && !v.is_null())
}

/// An RNG seeded with 32 bytes of `crypto.getRandomValues`.
fn rng() -> Result<StdRng, Error> {
    let crypto = global("crypto").ok_or_else(|| host_missing("crypto.getRandomValues"))?;
    let get_random_values: Function = Reflect::get(&crypto, &"getRandomValues".into())
        .ok()
        .and_then(|f| f.dyn_into().ok())
        .ok_or_else(|| host_missing("crypto.getRandomValues"))?;
    let bytes = Uint8Array::new_with_length(32);
    get_random_values
        .call1(&crypto, &bytes)
        .map_err(|_| host_missing("crypto.getRandomValues"))?;
    let mut seed = [0u8; 32];
    bytes.copy_to(&mut seed);
    Ok(StdRng::from_seed(seed))
}

/// What a rejected `fetch` said: the error's message and its cause's (node
/// reports "fetch failed" with the reason as the cause).
fn describe(value: &JsValue) -> String {
    let message = |v: &JsValue| {
        v.dyn_ref::<js_sys::Error>()
            .map(|e| String::from(e.message()))
            .or_else(|| v.as_string())
    };
    let mut text = message(value).unwrap_or_else(|| "fetch rejected".to_owned());
    if let Some(cause) = Reflect::get(value, &"cause".into())
        .ok()
        .as_ref()
        .and_then(message)
    {
        text.push_str(": ");
        text.push_str(&cause);
    }
    text
}

/// The fetch `cache` mode of a request (Fetch standard, "request's cache
/// mode").
#[derive(Clone, Copy)]
enum Cache {
    /// The browser's HTTP cache as usual: full-hash requests, whose
    /// immutable bucket answers it may keep.
    Default,
    /// Past the browser's HTTP cache: update requests. A request with a
    /// validator bypasses the cache anyway; one without (the first
    /// snapshot, a rebase) could otherwise be answered by a cached copy up
    /// to its `max-age` old, holding back what was listed since.
    NoStore,
}

/// Sends `request` with the global `fetch`, within `timeout` where
/// `AbortSignal.timeout` exists, refusing a body over `limit_bytes` by
/// its `Content-Length` before reading it (the session checks the bytes
/// read as well).
async fn send(
    request: &HttpRequest,
    cache: Cache,
    timeout: Duration,
    limit_bytes: u64,
) -> Result<HttpResponse, Error> {
    let url = request.url.as_str();
    let transport = |reason: String, timed_out: bool| Error::Transport {
        url: url.to_owned(),
        reason,
        timed_out,
    };
    let fetch: Function = global("fetch")
        .and_then(|f| f.dyn_into().ok())
        .ok_or_else(|| host_missing("fetch"))?;
    let init = Object::new();
    let headers = Object::new();
    for (name, value) in &request.headers {
        let _ = Reflect::set(&headers, &name.into(), &value.into());
    }
    let _ = Reflect::set(&init, &"method".into(), &request.method.as_str().into());
    let _ = Reflect::set(&init, &"headers".into(), &headers);
    // Nothing of the page the agent runs in: its address (`Referer`, the
    // whole of it to its own origin) and its cookies would tell the
    // publisher which page the user is on, and who the user is.
    let _ = Reflect::set(&init, &"referrerPolicy".into(), &"no-referrer".into());
    let _ = Reflect::set(&init, &"credentials".into(), &"omit".into());
    if let Cache::NoStore = cache {
        let _ = Reflect::set(&init, &"cache".into(), &"no-store".into());
    }
    if !request.body.is_empty() {
        let _ = Reflect::set(&init, &"body".into(), &Uint8Array::from(request.body.as_slice()));
    }
    let signal = global("AbortSignal")
        .and_then(|a| Reflect::get(&a, &"timeout".into()).ok().map(|f| (a, f)))
        .and_then(|(a, f)| f.dyn_into::<Function>().ok().map(|f| (a, f)))
        .and_then(|(a, f)| f.call1(&a, &(timeout.as_millis() as f64).into()).ok());
    if let Some(signal) = signal {
        let _ = Reflect::set(&init, &"signal".into(), &signal);
    }
    let failed = |e: JsValue| {
        let timed_out = Reflect::get(&e, &"name".into())
            .ok()
            .and_then(|n| n.as_string())
            .is_some_and(|n| n == "TimeoutError");
        transport(describe(&e), timed_out)
    };
    let promise: Promise = fetch
        .call2(&JsValue::UNDEFINED, &url.into(), &init)
        .map_err(failed)?
        .dyn_into()
        .map_err(|_| transport("fetch did not return a promise".to_owned(), false))?;
    let response: web_sys::Response = JsFuture::from(promise)
        .await
        .map_err(failed)?
        .dyn_into()
        .map_err(|_| transport("fetch did not resolve to a Response".to_owned(), false))?;
    // fetch follows redirects, `https` to plain `http` too, where anyone on
    // the path can answer "not listed" (a full-hash answer is not signed):
    // the very path the base URL rules keep the agent off. Such an answer
    // is a failed request (an `unverified` hit), never an answer.
    if url.starts_with("https://") && response.redirected() && !response.url().starts_with("https://") {
        return Err(transport(
            format!(
                "redirected to {}: the agent does not follow https to plain http",
                response.url()
            ),
            false,
        ));
    }
    // Nor can it see the hops in between: `https` to plain `http` to an
    // `https` host of whoever answered the plain hop ends at an `https`
    // URL. An answer is taken only from the origin asked, which no hop can
    // stand in for without its certificate.
    if response.redirected() && (origin(url).is_none() || origin(url) != origin(&response.url())) {
        return Err(transport(
            format!(
                "redirected to {}, another origin than asked: fetch does not show the hops in between, \
                 which may have been plain http",
                response.url()
            ),
            false,
        ));
    }
    let received = response.headers();
    let mut headers = Vec::new();
    for name in RESPONSE_HEADERS {
        if let Ok(Some(value)) = received.get(name) {
            headers.push((name.to_owned(), value));
        }
    }
    let declared = received
        .get("content-length")
        .ok()
        .flatten()
        .and_then(|n| n.trim().parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit_bytes) {
        return Err(Error::ResponseTooLarge {
            url: url.to_owned(),
            limit_bytes,
        });
    }
    let body = read_limited(&response, limit_bytes).await.map_err(|e| {
        e.map_or_else(
            || Error::ResponseTooLarge {
                url: url.to_owned(),
                limit_bytes,
            },
            failed,
        )
    })?;
    Ok(HttpResponse {
        status: response.status(),
        headers,
        body,
    })
}

/// Reads `response`'s body chunk by chunk (as fetch decoded it: a
/// `Content-Encoding` inflated), stopping and cancelling the stream as soon
/// as it holds more than `limit_bytes`: `Err(None)` then, `Err(Some(e))`
/// when reading failed.
async fn read_limited(response: &web_sys::Response, limit_bytes: u64) -> Result<Vec<u8>, Option<JsValue>> {
    let stream = Reflect::get(response, &"body".into()).map_err(Some)?;
    if stream.is_null() || stream.is_undefined() {
        return Ok(Vec::new());
    }
    let get_reader: Function = Reflect::get(&stream, &"getReader".into())
        .map_err(Some)?
        .dyn_into()
        .map_err(Some)?;
    let reader = get_reader.call0(&stream).map_err(Some)?;
    let read: Function = Reflect::get(&reader, &"read".into())
        .map_err(Some)?
        .dyn_into()
        .map_err(Some)?;
    let mut body = Vec::new();
    loop {
        let promise: Promise = read.call0(&reader).map_err(Some)?.dyn_into().map_err(Some)?;
        let chunk = JsFuture::from(promise).await.map_err(Some)?;
        if Reflect::get(&chunk, &"done".into()).map_err(Some)?.is_truthy() {
            return Ok(body);
        }
        let value: Uint8Array = Reflect::get(&chunk, &"value".into())
            .map_err(Some)?
            .dyn_into()
            .map_err(Some)?;
        if body.len() as u64 + u64::from(value.length()) > limit_bytes {
            if let Ok(cancel) = Reflect::get(&reader, &"cancel".into()).and_then(|f| f.dyn_into::<Function>())
            {
                let _ = cancel.call0(&reader);
            }
            return Err(None);
        }
        let start = body.len();
        body.resize(start + value.length() as usize, 0);
        value.copy_to(&mut body[start..]);
    }
}

/// The agent's state, shared by the promises of its calls.
struct Inner {
    session: RefCell<Session>,
    /// Update requests that got no response, for `stats().updatesFailed`.
    update_transport_failures: Cell<u64>,
    /// The update round of checks refused as `prefix_too_short`, while one
    /// runs.
    refusal_round: RefCell<Option<Promise>>,
    /// The most bytes of a snapshot or delta chain.
    max_snapshot_bytes: u64,
}

impl Inner {
    /// One update request and the session's reading of its response.
    async fn update_step(&self, request: &HttpRequest) -> Result<HttpResponse, Error> {
        let sent = send(request, Cache::NoStore, UPDATE_TIMEOUT, self.max_snapshot_bytes).await;
        if sent.is_err() {
            self.update_transport_failures
                .set(self.update_transport_failures.get() + 1);
        }
        sent
    }

    /// An update round, as `Agent::update` in Rust: every list in turn; an
    /// error only when a list is left with no snapshot at all.
    async fn update(&self) -> Result<Value, Error> {
        let requests = self.session.borrow().update_requests();
        let mut lists = Vec::with_capacity(requests.len());
        let mut unready = None;
        for first in requests {
            let list = first.list.clone();
            let mut request = first;
            let outcome = loop {
                let result = match self.update_step(&request.request).await {
                    Ok(response) => {
                        self.session
                            .borrow_mut()
                            .handle_update_response(&request, response, now())
                    }
                    Err(error) => {
                        self.session.borrow_mut().update_not_sent(&request);
                        Err(error)
                    }
                };
                match result {
                    // No usable deltas, or a 304 that showed the ETag sent
                    // stale: the whole snapshot, in this round (the second
                    // request for a snapshot is unconditional, so this ends).
                    Ok(ListUpdate::NeedSnapshot { request: next, .. })
                        if matches!(
                            request.kind,
                            RequestKind::Deltas { .. } | RequestKind::Snapshot { conditional: true }
                        ) =>
                    {
                        request = next;
                    }
                    other => break other,
                }
            };
            let held = self.session.borrow().version(&list);
            match outcome {
                Ok(ListUpdate::Updated { version, .. }) => {
                    lists.push(json!({"list": list, "version": version, "changed": true}));
                }
                Ok(ListUpdate::Unchanged { version }) => {
                    lists.push(json!({"list": list, "version": version, "changed": false}));
                }
                // Not reached: an unconditional snapshot request never
                // falls back.
                Ok(ListUpdate::NeedSnapshot { .. }) => {
                    lists.push(json!({"list": list, "version": held, "changed": false}));
                }
                Err(error) => {
                    lists.push(json!({
                        "list": list, "version": held, "changed": false,
                        "error": error.to_string(), "errorKind": api::error_kind(&error),
                    }));
                    if held.is_none() && unready.is_none() {
                        unready = Some(error);
                    }
                }
            }
        }
        match unready {
            Some(error) => Err(error),
            None => Ok(json!({ "lists": lists })),
        }
    }

    /// A URL check, as `Agent::check_url` in Rust: when the publisher
    /// refuses the request prefix as too short for the list it now serves
    /// (the snapshot held is behind), an update round, then the check once
    /// more if that brought a new version.
    async fn check(self: &Rc<Self>, url: &str) -> Result<Value, Error> {
        let mut rng = rng()?;
        // Read before the probe: an update landing while the request is
        // out makes the count differ, and the URL is checked again.
        let before = self.applied();
        let mut verdict = self.check_once(url, &mut rng).await?;
        if let Verdict::Unverified { reason, .. } = &verdict
            && reason.is_prefix_too_short()
        {
            if self.applied() == before {
                self.refusal_round().await;
            }
            if self.applied() != before {
                verdict = self.check_once(url, &mut rng).await?;
            }
        }
        Ok(api::verdict_json(&verdict))
    }

    /// The update round of checks refused as `prefix_too_short`: one at a
    /// time, every such check waiting for the one in progress.
    async fn refusal_round(self: &Rc<Self>) {
        let running = self.refusal_round.borrow().clone();
        let round = running.unwrap_or_else(|| {
            let inner = Rc::clone(self);
            let round = future_to_promise(async move {
                let _ = inner.update().await;
                inner.refusal_round.borrow_mut().take();
                Ok(JsValue::UNDEFINED)
            });
            *self.refusal_round.borrow_mut() = Some(round.clone());
            round
        });
        let _ = JsFuture::from(round).await;
    }

    /// One check of `url` by the session, with its full-hash request if it
    /// needs one.
    async fn check_once(&self, url: &str, rng: &mut StdRng) -> Result<Verdict, Error> {
        let step = self.session.borrow_mut().check(url, now(), rng)?;
        match step {
            CheckStep::Done(verdict) => Ok(verdict),
            CheckStep::NeedFullHashes(query) => {
                let response = send(
                    &query.request,
                    Cache::Default,
                    SEARCH_TIMEOUT,
                    MAX_SEARCH_RESPONSE_BYTES as u64,
                )
                .await;
                self.session
                    .borrow_mut()
                    .complete_check(query, response, now(), rng)
            }
        }
    }

    /// How many snapshots and delta chains the session has applied: a
    /// different count means some list moved on.
    fn applied(&self) -> u64 {
        let stats = self.session.borrow().stats();
        stats.snapshots_applied + stats.deltas_applied
    }
}

/// The blocksieve agent: `new Agent({ publisher, lists, key })`.
#[wasm_bindgen]
pub struct Agent {
    inner: Rc<Inner>,
}

#[wasm_bindgen]
impl Agent {
    /// An agent with no snapshot yet; see the README for the options.
    /// Sends nothing. Throws an `Error` with `.kind` `"misconfigured"`
    /// for bad options.
    #[wasm_bindgen(constructor)]
    pub fn new(options: JsValue) -> Result<Agent, JsValue> {
        // `JSON.stringify` throws on what JSON cannot hold (a BigInt, a
        // cycle): said as such, not as "not an object".
        let json = match js_sys::JSON::stringify(&options) {
            Ok(s) => s.as_string(),
            Err(thrown) => {
                let reason = thrown
                    .dyn_ref::<js_sys::Error>()
                    .map_or_else(|| format!("{thrown:?}"), |e| String::from(e.message()));
                return Err(js_error(&Error::InvalidSetting {
                    setting: "options",
                    value: format!("cannot be read as JSON: {reason}"),
                }));
            }
        }
        .ok_or_else(|| {
            js_error(&Error::InvalidSetting {
                setting: "options",
                value: "not an object".to_owned(),
            })
        })?;
        let config = api::session_config(&json).map_err(|e| js_error(&e))?;
        let max_snapshot_bytes = config.max_snapshot_bytes;
        let session = Session::new(config).map_err(|e| js_error(&e))?;
        Ok(Agent {
            inner: Rc::new(Inner {
                session: RefCell::new(session),
                update_transport_failures: Cell::new(0),
                refusal_round: RefCell::new(None),
                max_snapshot_bytes,
            }),
        })
    }

    /// Brings every list up to date: a promise of `{ lists: [{ list,
    /// version, changed, error? }] }`, rejected with an `Error` (`.kind`)
    /// only when a list still has no snapshot.
    pub fn update(&self) -> Promise {
        let inner = Rc::clone(&self.inner);
        future_to_promise(async move {
            inner
                .update()
                .await
                .map(|report| to_js(&report))
                .map_err(|e| js_error(&e))
        })
    }

    /// Checks a URL: a promise of `{ kind, list?, expression?, fullHash?,
    /// stale, block }`, rejected with an `Error` whose `.kind` is
    /// `"invalid_input"` for a URL with no host (or not a string) and
    /// `"not_ready"` while a list has no snapshot (before the first update),
    /// unless the lists that have one confirm the URL unsafe.
    pub fn check(&self, url: JsValue) -> Promise {
        let inner = Rc::clone(&self.inner);
        future_to_promise(async move {
            let url = url.as_string().ok_or_else(|| not_a_string("url"))?;
            inner
                .check(&url)
                .await
                .map(|v| to_js(&v))
                .map_err(|e| js_error(&e))
        })
    }

    /// What to keep of every list that has a snapshot, to hand to
    /// `restore` after a restart (e.g. in IndexedDB): an array of `{ list,
    /// snapshot, chain, record }`, the last three `Uint8Array`s to store as
    /// they are. Save after an `update()` that changed a list, or a
    /// `check()` that updated the lists itself (`prefix_too_short`).
    pub fn save(&self) -> Array {
        let session = self.inner.session.borrow();
        let out = Array::new();
        for list in session.lists() {
            if let Some(saved) = session.saved(list) {
                let entry = Object::new();
                let _ = Reflect::set(&entry, &"list".into(), &saved.list.as_str().into());
                for (name, bytes) in [
                    ("snapshot", &saved.snapshot[..]),
                    ("chain", &saved.chain[..]),
                    ("record", &saved.record[..]),
                ] {
                    let _ = Reflect::set(&entry, &name.into(), &Uint8Array::from(bytes));
                }
                out.push(&entry);
            }
        }
        out
    }

    /// Restores lists from what `save()` gave, before the first update:
    /// every snapshot and delta is verified again (signature, limits, list,
    /// rollback floor), an expired snapshot answers `stale` until an update
    /// brings a newer one, and the next `update()` asks only for the deltas
    /// since. Returns `{ lists: [{ list, version, chainError?,
    /// chainErrorKind? } | { list, error, errorKind }] }`; an entry that
    /// fails verification is not used (discard it; that list's next update
    /// downloads the snapshot, not older than the entry's record, whose
    /// floor the session keeps); `chainError` says the kept deltas were
    /// dropped and the older base restored: update before relying on it.
    /// Throws an `Error` with `.kind` `"invalid_input"` when `saved` is not
    /// an array.
    pub fn restore(&self, saved: JsValue) -> Result<JsValue, JsValue> {
        let entries: Array = saved
            .dyn_into()
            .map_err(|_| invalid_input("saved must be an array"))?;
        let mut lists = Vec::new();
        for entry in entries.iter() {
            let list = Reflect::get(&entry, &"list".into())
                .ok()
                .and_then(|l| l.as_string());
            let outcome = saved_list(&entry).and_then(|saved| {
                self.inner
                    .session
                    .borrow_mut()
                    .restore(&saved, now())
                    .map_err(|e| (api::error_kind(&e), e.to_string()))
            });
            lists.push(match outcome {
                Ok(restored) => match restored.chain_error {
                    None => json!({ "list": list, "version": restored.version }),
                    Some(e) => json!({
                        "list": list, "version": restored.version,
                        "chainError": e.to_string(), "chainErrorKind": api::error_kind(&e),
                    }),
                },
                Err((kind, error)) => json!({ "list": list, "error": error, "errorKind": kind }),
            });
        }
        Ok(to_js(&json!({ "lists": lists })))
    }

    /// The counters: `{ fullHashRequests, cacheHits, snapshotsApplied, ... }`.
    pub fn stats(&self) -> JsValue {
        let stats = self.inner.session.borrow().stats();
        to_js(&api::stats_json(
            &stats,
            self.inner.update_transport_failures.get(),
        ))
    }
}

/// An `invalid_input` error.
fn invalid_input(message: &str) -> JsValue {
    let thrown = js_sys::Error::new(message);
    let _ = Reflect::set(&thrown, &"kind".into(), &"invalid_input".into());
    thrown.into()
}

/// An `invalid_input` error for an argument that is not a string.
fn not_a_string(what: &str) -> JsValue {
    invalid_input(&format!("{what} must be a string"))
}

/// One entry of `save()`'s array, read back: `list` a string, the rest
/// `Uint8Array`s or `ArrayBuffer`s (what IndexedDB and structured clones
/// give back).
fn saved_list(entry: &JsValue) -> Result<SavedList, (&'static str, String)> {
    let bad = |what: &str| ("invalid_input", format!("saved entry: {what}"));
    let list = Reflect::get(entry, &"list".into())
        .ok()
        .and_then(|l| l.as_string())
        .ok_or_else(|| bad("list must be a string"))?;
    let bytes = |name: &str| -> Result<Vec<u8>, (&'static str, String)> {
        let value = Reflect::get(entry, &name.into()).map_err(|_| bad(name))?;
        if let Some(array) = value.dyn_ref::<Uint8Array>() {
            Ok(array.to_vec())
        } else if value.is_instance_of::<js_sys::ArrayBuffer>() {
            Ok(Uint8Array::new(&value).to_vec())
        } else {
            Err(bad(&format!("{name} must be a Uint8Array or an ArrayBuffer")))
        }
    };
    Ok(SavedList {
        list,
        snapshot: bytes("snapshot")?.into(),
        chain: bytes("chain")?,
        record: bytes("record")?,
    })
}

/// The Safe Browsing canonical form of `url`; throws an `Error` with
/// `.kind` `"invalid_input"` when it names no host.
#[wasm_bindgen]
pub fn canonicalize(url: JsValue) -> Result<String, JsValue> {
    let url = url.as_string().ok_or_else(|| not_a_string("url"))?;
    api::canonicalize(&url).map_err(|e| js_error(&e))
}

/// The full hash (64 hex digits) of each of `url`'s expressions, in
/// expression order; throws as [`canonicalize`] does.
#[wasm_bindgen(js_name = fullHashes)]
pub fn full_hashes(url: JsValue) -> Result<Vec<String>, JsValue> {
    let url = url.as_string().ok_or_else(|| not_a_string("url"))?;
    api::full_hashes(&url).map_err(|e| js_error(&e))
}
