//! The agent embedded in a tokio application, minimally: build it, start
//! its background updates, check URLs, shut down.
//!
//! ```text
//! cargo run -p blocksieve-examples --bin embed -- http://127.0.0.1:8080 "$(cat blocksieve-data/public.key)" phishing \
//!     https://alibaba666.bet/login https://www.wikipedia.org/
//! ```
//!
//! Arguments: publisher base URL, the publisher's public key (base64), the
//! list to subscribe to, then URLs. Prints one line per URL (`unsafe`,
//! `safe`, `unverified`, `invalid` or `error`) and keeps its cache in
//! `$BLOCKSIEVE_CACHE_DIR` when that is set. `examples/tests/it/embed.rs` runs
//! it against a fake publisher.

use std::time::Duration;

use anyhow::{Context, bail};
use blocksieve_agent::{Agent, Verdict};
use blocksieve_format::TrustedKey;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [publisher, key, list, urls @ ..] = args.as_slice() else {
        bail!("usage: embed PUBLISHER_URL PUBLIC_KEY_BASE64 LIST URL...");
    };

    // 1. Build: validated settings; a cache directory makes restarts answer
    //    at once, from the last verified snapshot, even offline.
    let mut builder = Agent::builder(publisher)
        .list(list)
        .trusted_key(TrustedKey::from_base64(key).context("public key")?);
    if let Some(dir) = std::env::var_os("BLOCKSIEVE_CACHE_DIR") {
        builder = builder.cache_dir(dir);
    }
    let agent = builder.build()?;

    // 2. Start the background updates (keep the handle: dropping it stops
    //    them). A cold agent fetches its first snapshot right away instead of
    //    waiting out the start-up jitter, so it can answer.
    let updates = agent.start_updates()?;
    if !agent.status().is_ready() {
        tokio::time::timeout(Duration::from_secs(30), agent.update())
            .await
            .context("first snapshot timed out")?
            .context("first snapshot")?;
    }

    // 3. Check: one batch, one full-hash request for all prefix hits.
    for (url, verdict) in urls.iter().zip(agent.check_urls(urls).await) {
        match verdict {
            Ok(Verdict::Unsafe { list, .. }) => println!("unsafe {list} {url}"),
            Ok(Verdict::Safe { .. }) => println!("safe {url}"),
            // Unverified, or a kind of verdict added later: never "safe".
            Ok(_) => println!("unverified {url}"),
            Err(e @ blocksieve_agent::Error::InvalidUrl { .. }) => println!("invalid {url} {e}"),
            Err(e) => println!("error {url} {e}"),
        }
    }

    // 4. Shut down: stop the updates and wait for the task to end.
    updates.shutdown().await;
    let stats = agent.stats();
    eprintln!(
        "{} lookups, {} full-hash requests, false-positive rate {:.3}",
        stats.lookups,
        stats.full_hash_requests,
        stats.false_prefix_hit_rate()
    );
    Ok(())
}
