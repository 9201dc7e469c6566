//! A build's first stage: fetching a list's sources and allowlists.

use futures_util::{StreamExt, stream};

use super::{Publisher, unix_now};
use crate::build::{self, LastGood, LoadedSource, SourceRole};
use crate::config::SourceConfig;
use crate::fetch::{self, MAX_CONCURRENT_FETCHES};
use crate::status;
use crate::storage::SourceCache;

impl Publisher {
    /// Fetches list `index`'s sources, then its allowlists, each
    /// conditionally on its cached validators: what the build reads, in
    /// the configured order, and each one's source cache with its public
    /// label. Shows what each fetch got on the status page.
    pub(super) async fn fetch_sources(
        &self,
        index: usize,
    ) -> (Vec<LoadedSource>, Vec<(SourceCache, String)>) {
        let inner = &self.inner;
        let list = &inner.config.lists[index];
        // Up to `MAX_CONCURRENT_FETCHES` at a time, the next starting as
        // soon as any finishes (not in order: a finished fetch waiting
        // behind a slow one would hold its place): a slow or retried feed
        // holds the build up by its own time, not by the sum of every
        // source's. The build reads them in their configured order.
        let block = (list.sources.iter().enumerate()).map(|(i, s)| (i, s, SourceRole::Block));
        let allow = (list.allow.iter().enumerate()).map(|(i, s)| (i, s, SourceRole::Allow));
        let targets: Vec<_> = block
            .chain(allow)
            .map(|(i, source, role)| {
                let storage = inner.storage.clone();
                let cache = match role {
                    SourceRole::Block => SourceCache::source(storage, &list.name, i, source),
                    SourceRole::Allow => SourceCache::allow(storage, &list.name, i, source),
                };
                (source, role, cache)
            })
            .collect();
        let fetch_started = std::time::Instant::now();
        // Made before they are polled (not mapped lazily in the stream),
        // which keeps the build's future `Send` for the scheduler.
        let pending: Vec<_> = (targets.iter().enumerate())
            .map(|(i, (source, _, cache))| self.fetch_source(i, &list.name, source, cache))
            .collect();
        let mut fetches: Vec<_> = stream::iter(pending)
            .buffer_unordered(MAX_CONCURRENT_FETCHES)
            .collect()
            .await;
        fetches.sort_unstable_by_key(|(i, ..)| *i);
        // The fetch stage's wall time, counted once (on the first source).
        let mut fetch_wall = Some(fetch_started.elapsed());
        let mut loaded = Vec::new();
        let mut caches = Vec::new();
        let mut views = Vec::new();
        for ((source, role, cache), (_, fetched, validators, fetched_at)) in targets.into_iter().zip(fetches)
        {
            let role_name = if role == SourceRole::Block {
                "block"
            } else {
                "allow"
            };
            // Shown on the status page and in logs: without credentials,
            // as the build's report names it (which `record` matches).
            views.push(status::SourceView::of(
                source.public_label(),
                role_name,
                &fetched,
                validators,
                fetched_at,
            ));
            let last_good = {
                let cache = cache.clone();
                LastGood::deferred(move || cache.open_encoded())
            };
            let keep_to = {
                let cache = cache.clone();
                build::KeepTo::deferred(move || cache.stage())
            };
            loaded.push(LoadedSource {
                config: source.clone(),
                role,
                fetched,
                last_good,
                read_duration: fetch_wall.take().unwrap_or_default(),
                keep_to,
            });
            caches.push((cache, source.public_label()));
        }
        if let Ok(mut held) = inner.state.lists[index].watch.sources.lock() {
            *held = views;
        }
        (loaded, caches)
    }

    /// Fetches source `index` of `list` conditionally on its cached
    /// validators: `index`, what it fetched, those validators, and when. A
    /// failure is logged and counted as soon as it is known.
    async fn fetch_source(
        &self,
        index: usize,
        list: &str,
        source: &SourceConfig,
        cache: &SourceCache,
    ) -> (usize, fetch::Fetched, Option<fetch::Validators>, u64) {
        let inner = &self.inner;
        let validators = cache.meta().map(|m| m.validators);
        // A source's headers never follow a redirect to another host.
        let client = if source.headers.is_empty() {
            inner.http.as_ref()
        } else {
            inner.http_with_headers.as_ref()
        };
        let (fetched, retries) = fetch::fetch(client, list, source, validators.as_ref()).await;
        inner.state.metrics.source_retried(list, retries);
        if let fetch::Fetched::Failed(reason) = &fetched {
            tracing::warn!(%list, source = %source.public_label(), %reason, "source failed");
            inner.state.metrics.source_failed(list, 1);
        }
        (index, fetched, validators, unix_now())
    }
}
