//! The blocksieve agent in WebAssembly, for JavaScript: browser
//! extensions (service workers included), web pages and node ≥ 18.
//!
//! The decisions are the engine's [`Session`](blocksieve_engine::session::Session)
//! — snapshot and delta verification, the atomic swap, URL lookups, the
//! full-hash cache, noise prefixes, backoff — the same code the Rust
//! agent's rules are made of; this crate only does the session's I/O with
//! what a JavaScript host has: `fetch` for HTTP, `crypto.getRandomValues`
//! to seed the RNG of each check, `Date.now()` for the time.
//!
//! ```js
//! import init, { Agent } from "./blocksieve_wasm.js";
//! await init(wasmUrl);
//! const agent = new Agent({ publisher: "https://publisher.example", lists: ["phishing"], key: "<base64>" });
//! await agent.update();
//! const verdict = await agent.check("http://example.com/x"); // { kind: "safe", stale: false, block: false }
//! ```
//!
//! [`api`] holds the shapes JavaScript sees as JSON values and runs on the
//! host too; `js` (wasm32 only) is the `wasm-bindgen` glue. See
//! `bindings/wasm/README.md` for the API.

pub mod api;
#[cfg(target_arch = "wasm32")]
mod js;
#[cfg(target_arch = "wasm32")]
pub use js::{Agent, canonicalize, full_hashes};
