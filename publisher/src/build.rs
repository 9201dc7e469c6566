//! One build of one threat list: sources → expressions → full hashes →
//! filter → canary → signed snapshot, and the gates that decide whether it
//! may be published.
//!
//! Allowlists (a list's `allow` sources, and the allow array of each JSON
//! source) are read like sources into a second set of full hashes; after
//! both sets are sorted and deduplicated, every allowed full hash is
//! removed from the list's (allow wins for the same expression, as in
//! MetaMask, uBlock Origin and Pi-hole). Removal is by full hash only: a
//! filter has no exceptions, so an allowed subdomain of a listed domain
//! stays blocked by the domain's `host/` expression.
//!
//! Each source is read as it streams ([`pipeline`]): decompressed block by
//! block, its lines parsed, canonicalized and hashed on every core, the
//! blocks' results merged in input order — the same hashes, counts and
//! reject samples as one pass. Fresh content's copy, the next last good
//! content, is taken on the way.

use std::time::{Duration, Instant};

use blocksieve_format::api::{AllowStatus, Sizing, SourceStatus};
use blocksieve_format::{
    FullHash, PrefixFilter, SigningKey, SnapshotHeader, SnapshotParams, compress_filter, sign_snapshot,
};
use rayon::prelude::*;

use crate::config::{ListConfig, SourceConfig};
use crate::error::{Error, GateRefusal};
use crate::fetch::{ContentEncoding, Fetched, Validators};
use crate::sources::{FormatOptions, ParseReport};
use crate::storage::CacheMeta;
use crate::storage::spill::{Spill, SpilledHashes};

// `pipeline` reads one source's content into full hashes (streamed,
// parallel); `reference` measures SHA-256 alone over the same expressions;
// `sizing` holds the canary and the filter and protocol sizing; `timings`
// the stage timings.
mod cancel;
mod collapse;
mod copy;
mod last_good;
pub(crate) mod memory;
mod pipeline;
mod reference;
mod sizing;
mod timings;
pub use cancel::{Cancel, CancelOnDrop};
#[cfg(test)]
use collapse::top_reasons;
pub use copy::KeepTo;
pub use last_good::LastGood;
use pipeline::{Content, Passes, read_content};
pub use reference::{HashReference, hash_reference, hash_reference_encoded};
pub(crate) use sizing::fpr_gate_bound;
pub use sizing::{
    Advice, CANARY_PROBES, MEAN_EXPRESSIONS_PER_URL, advice, capacity, expected_requests_per_1000,
    false_hit_per_probe, fill_ratio, measure_fpr, request_prefix_bits, request_prefix_bits_after,
};
use sizing::{RESPONSE_BYTES_PER_MATCH, filter_kind_for};
pub use timings::{BuildTimings, PeakRssProbe, STAGES, StageTiming};

/// Whether a source lists threats or allowed entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceRole {
    /// One of a list's `sources`: its entries are published (and a JSON
    /// source's allow array is read as an allowlist).
    Block,
    /// One of a list's `allow` sources: its entries are removed from the
    /// list.
    Allow,
}

/// A source's content after fetching: fresh bytes, or the reason it failed.
#[derive(Debug)]
pub struct LoadedSource {
    /// The source's configuration.
    pub config: SourceConfig,
    /// Whether it lists threats or allowed entries.
    pub role: SourceRole,
    /// What fetching produced.
    pub fetched: Fetched,
    /// Its last good content, for when the fetch failed, was not modified
    /// or does not parse.
    pub last_good: LastGood,
    /// How long fetching took: reading the file or the HTTP response, and
    /// gunzip (the build's `read` stage).
    pub read_duration: Duration,
    /// Where a copy of fresh content is written as it is read, to become
    /// its last good content if it parses.
    pub keep_to: KeepTo,
}

/// What a build asks its caller to keep of a source.
#[derive(Debug)]
pub enum SourceUpdate {
    /// Fresh content that parsed: the new last good content.
    Store {
        /// The content as received (compressed or plain), or zstd of what was
        /// received uncompressed when the copy is held in memory; written
        /// where [`LoadedSource::keep_to`] said, to be committed ([`crate::storage::SourceCache::store_staged`]).
        copy: crate::storage::Staged,
        /// How `copy` is encoded.
        encoding: ContentEncoding,
        /// Its metadata.
        meta: CacheMeta,
    },
    /// Only the metadata changes: the last good content is current (the
    /// server said not modified), or it could not be read and its
    /// validators are dropped (the next fetch is unconditional).
    Meta(CacheMeta),
    /// Fresh content that parsed but whose copy could not be made (a full
    /// disk): nothing is stored, so the source keeps its last good content
    /// and validators, but the per-source gates still measure its entries
    /// (`meta.accepted`), and a build that keeps its sources' content
    /// records them as the next baseline, as it would a stored copy's
    /// (dropping the stored content's validators).
    Unkept(CacheMeta),
}

/// The first half of a build: every source read into the list's full
/// hashes ([`read_sources`]).
#[derive(Debug)]
pub struct ReadSources {
    /// The list's full hashes, sorted and unique, every allowed one removed.
    pub hashes: Vec<FullHash>,
    /// Lines read and rejected, over all sources.
    pub parse: ParseReport,
    /// Per source: where its content came from.
    pub sources: Vec<SourceStatus>,
    /// What the allowlists read and removed.
    pub allow: AllowReport,
    /// The stages so far.
    pub timings: BuildTimings,
    /// Sources whose content came but was not taken: unreadable, or its
    /// parse collapsed ([`SourcesRead::content_failures`]).
    pub content_failures: u64,
    /// When reading began.
    started: Instant,
}

/// What a build that failed while reading its sources found of each: the
/// report a build that got further carries instead.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SourcesRead {
    /// Per source: where its content came from, or why it failed.
    pub sources: Vec<SourceStatus>,
    /// The allowlists, as read.
    pub allow: AllowStatus,
    /// Lines read and rejected, over the block sources read.
    pub parse: ParseReport,
    /// Sources (block and allow) whose fetch succeeded but whose content
    /// was not taken: unreadable, or its parse collapsed. A failure as a
    /// failed fetch is, which the fetch counts as it happens: this counts
    /// the others.
    pub content_failures: u64,
}

/// A [`read_sources`] that failed: why, and what it read of every source.
#[derive(Debug)]
pub struct ReadFailed {
    /// Why (the first block source that failed with no usable last good
    /// content).
    pub error: Error,
    /// Every source, the failed ones included.
    pub read: SourcesRead,
}

/// A built, signed, not yet published snapshot of one list.
#[derive(Debug)]
pub struct BuiltList {
    /// The snapshot version.
    pub version: u64,
    /// The signed snapshot bytes.
    pub snapshot: Vec<u8>,
    /// The list's full hashes, sorted and unique.
    pub hashes: Vec<FullHash>,
    /// The same full hashes as the `.hashes` object to publish, when the
    /// build wrote them out while it built the filter ([`BuildRequest::spill`]).
    pub spilled: Option<SpilledHashes>,
    /// What the build saw and produced.
    pub report: BuildReport,
}

/// What one build saw and produced.
#[derive(Debug, Clone)]
pub struct BuildReport {
    /// Lines read and rejected, over all sources.
    pub parse: ParseReport,
    /// Per source: where its content came from.
    pub sources: Vec<SourceStatus>,
    /// What the allowlists read and removed.
    pub allow: AllowReport,
    /// Sizing of the filter and the full-hash protocol.
    pub sizing: Sizing,
    /// Wall time of the build (from the parsed sources to the signed
    /// snapshot; reading and writing are in `timings`).
    pub duration: Duration,
    /// Wall time of each stage, from reading the sources to writing the
    /// snapshot.
    pub timings: BuildTimings,
}

/// What a build's allowlists read and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowReport {
    /// Allow lines read and rejected, over all allowlists.
    pub parse: ParseReport,
    /// Per allowlist: where its content came from (a JSON source's allow
    /// array is named `<source> (<json_allow_key>)`).
    pub sources: Vec<SourceStatus>,
    /// Distinct allowed full hashes.
    pub entries: u64,
    /// Distinct full hashes of the sources removed because allowed.
    pub removed: u64,
}

impl AllowReport {
    /// The `/v1/lists` form of this report.
    pub fn status(&self) -> AllowStatus {
        AllowStatus {
            lines: self.parse.lines,
            accepted: self.parse.accepted,
            rejected: self.parse.rejected_total(),
            rejected_by_reason: self.parse.rejected.clone(),
            cleaned_by_kind: self.parse.cleaned.clone(),
            entries: self.entries,
            removed: self.removed,
            sources: self.sources.clone(),
        }
    }
}

/// What a build needs besides its sources.
#[derive(Debug)]
pub struct BuildRequest<'a> {
    /// The list.
    pub list: &'a ListConfig,
    /// Header of the snapshot currently served, if any.
    pub previous: Option<&'a SnapshotHeader>,
    /// The version this build must pass besides `previous`'s (0: none): the
    /// store's newest generation when it is not the one served (its
    /// objects did not load), which publishing refuses to go below.
    pub after_version: u64,
    /// Build time, Unix seconds.
    pub now: u64,
    /// Snapshot lifetime: the snapshot expires this long after `now`.
    pub ttl: Duration,
    /// The signing key.
    pub key: &'a SigningKey,
    /// How the stage timings sample peak memory.
    pub probe: PeakRssProbe,
    /// Where the full hashes go while the filter is built, so that the two
    /// are never in memory at once; `None`: they stay in memory.
    pub spill: Option<&'a dyn Spill>,
    /// Stops the build between its stages once set ([`Error::Cancelled`]);
    /// `None`: it is never cancelled.
    pub cancel: Option<&'a Cancel>,
}

/// How a source's entries are read: its format options, with the JSON
/// array of its role (`json_key` for a block source, `json_allow_key` for
/// an allow source).
fn entry_options(config: &SourceConfig, role: SourceRole) -> FormatOptions {
    FormatOptions {
        column: config.column.clone(),
        delimiter: config.delimiter_byte(),
        json_key: match role {
            SourceRole::Block => config.json_key.clone(),
            SourceRole::Allow => config.json_allow_key().map(str::to_owned),
        },
        json_key_optional: false,
    }
}

/// The allow array of a JSON block source, read when the document has it.
fn allow_array_options(config: &SourceConfig, role: SourceRole) -> Option<FormatOptions> {
    let key = config.json_allow_key()?;
    (role == SourceRole::Block && config.format == crate::config::SourceFormat::Json).then(|| FormatOptions {
        json_key: Some(key.to_owned()),
        json_key_optional: true,
        ..FormatOptions::default()
    })
}

/// What one source's content gave: its entries' report, the report of a
/// JSON block source's allow array, and the copy of fresh content to keep.
struct SourceParse {
    entries: ParseReport,
    allow_array: ParseReport,
    kept: Option<pipeline::Kept>,
}

/// How one source of `role` is read: its entries, its JSON allow array (a
/// block source's), stopping once `cancel` is set.
fn passes_of<'a>(config: &'a SourceConfig, role: SourceRole, cancel: &'a Cancel) -> Passes<'a> {
    Passes {
        config,
        cancel,
        entries: entry_options(config, role),
        allow_array: allow_array_options(config, role),
    }
}

/// Reads one source's content per `passes` (of [`passes_of`]): a block
/// source's entries into `hashes` and its JSON allow array into `allowed`,
/// an allow source's entries into `allowed`, adding the read and parse
/// stages to `timings`. On an error (content unreadable, corrupt or over
/// its size limit, or the build cancelled) what it added is cut back.
fn parse_source_content(
    content: Content,
    keep_to: KeepTo,
    passes: &Passes<'_>,
    role: SourceRole,
    hashes: &mut Vec<FullHash>,
    allowed: &mut Vec<FullHash>,
    timings: &mut BuildTimings,
) -> Result<SourceParse, String> {
    let (before, allowed_before) = (hashes.len(), allowed.len());
    // An allow source has no allow array: its entries go to `allowed`.
    let read = match role {
        SourceRole::Block => read_content(content, keep_to, passes, hashes, allowed),
        SourceRole::Allow => read_content(content, keep_to, passes, allowed, &mut Vec::new()),
    };
    let read = match read {
        Ok(read) => read,
        Err(e) => {
            hashes.truncate(before);
            allowed.truncate(allowed_before);
            return Err(e);
        }
    };
    for streamed in [&read.entries, &read.allow_array] {
        timings.expressions_hashed += streamed.expressions;
        timings.expression_bytes += streamed.expression_bytes;
        if !streamed.read.is_zero() {
            timings.add("read", streamed.read);
        }
        if !streamed.parse.is_zero() || streamed.report.lines > 0 {
            timings.add("parse", streamed.parse);
        }
    }
    Ok(SourceParse {
        entries: read.entries.report,
        allow_array: read.allow_array.report,
        kept: read.kept,
    })
}

/// Parses every source and allowlist, falling back to a source's last good
/// content when it failed, was not modified or its parse collapsed; the
/// list's sorted, unique full hashes, every allowed one removed. What to
/// store of each source goes to `updates`, with the source's index in
/// `sources` — also when a later source fails the build — for the caller to
/// store before [`build_snapshot`], so the sources' bytes are freed before
/// the filter is built. `now` (Unix seconds) stamps fresh content; `probe`
/// samples peak memory for the stage timings. Once `cancel` is set, the
/// read stops at its next block of content.
///
/// # Errors
///
/// [`Error::Source`] when a block source failed and has no last good
/// content, with every source's status: the sources after it are still
/// read, so the failed build says which of them fail too (their fresh
/// copies go to `updates`, which the caller drops: only a published
/// build's content becomes last good). An allow source in that state is
/// left out (a missing allowlist only blocks more) and reported as
/// `failed` in `allow`. [`Error::Cancelled`] once `cancel` is set, with the
/// sources read until then.
pub fn read_sources(
    list: &str,
    sources: Vec<LoadedSource>,
    now: u64,
    probe: PeakRssProbe,
    updates: &mut Vec<(usize, SourceUpdate)>,
    cancel: &Cancel,
) -> Result<ReadSources, Box<ReadFailed>> {
    let started = Instant::now();
    let mut report = ParseReport::default();
    let mut statuses = Vec::new();
    let mut allow = AllowReport::default();
    let mut timings = BuildTimings::new(probe);
    let mut hashes = Vec::new();
    let mut allowed = Vec::new();
    let mut failed = None;
    let mut content_failures = 0;
    for (index, source) in sources.into_iter().enumerate() {
        if cancel.is_cancelled() {
            break;
        }
        let LoadedSource {
            config,
            role,
            fetched,
            last_good,
            read_duration,
            keep_to,
        } = source;
        timings.add("read", read_duration);
        let label = config.public_label();
        let mut update = None;
        let fresh = match fetched {
            Fetched::Fresh { bytes, validators } => Ok((Content::Fresh(bytes), validators)),
            Fetched::Stream(mut stream) => {
                let validators = std::mem::take(&mut stream.validators);
                Ok((Content::Stream(stream), validators))
            }
            Fetched::NotModified => Err(String::new()),
            Fetched::Failed(reason) => Err(reason),
        };
        let (parsed, content_fetched_at, failure) = match fresh {
            Ok((content, validators)) => {
                // Parsed straight into the sets; cut back if it collapsed.
                let (before, allowed_before) = (hashes.len(), allowed.len());
                match parse_source_content(
                    content,
                    keep_to,
                    &passes_of(&config, role, cancel),
                    role,
                    &mut hashes,
                    &mut allowed,
                    &mut timings,
                ) {
                    // Not the source's failure: nothing more is read.
                    Err(_) if cancel.is_cancelled() => break,
                    Err(reason) => {
                        tracing::warn!(source = %label, %reason, "source content unreadable");
                        content_failures += 1;
                        (None, None, reason)
                    }
                    Ok(mut parsed) => {
                        let r = &parsed.entries;
                        // Content that no longer reads as this format: the last
                        // good content is used instead, and this is not kept
                        // (`collapse::refused`).
                        if let Some(reason) = collapse::refused(r) {
                            content_failures += 1;
                            hashes.truncate(before);
                            allowed.truncate(allowed_before);
                            (None, None, reason)
                        } else {
                            let meta = CacheMeta {
                                validators,
                                fetched_at: now,
                                accepted: r.accepted,
                            };
                            update = match parsed.kept.take().map(|kept| (kept.copy, kept.encoding)) {
                                Some((Ok(copy), encoding)) => {
                                    Some(SourceUpdate::Store { copy, encoding, meta })
                                }
                                Some((Err(reason), _)) => {
                                    tracing::warn!(source = %label, %reason, "could not keep a copy of the source's content as its last good content");
                                    Some(SourceUpdate::Unkept(meta))
                                }
                                None => None,
                            };
                            (Some(parsed), Some(now), String::new())
                        }
                    }
                }
            }
            Err(reason) => (None, None, reason),
        };
        let (parsed, content_fetched_at, state) = match parsed {
            Some(parsed) => (parsed, content_fetched_at, "fresh"),
            None => {
                // Not modified, failed, or collapsed: use the last good content.
                let started = Instant::now();
                let cached = last_good.take();
                timings.add("read", started.elapsed());
                let cached = cached.map(|(reader, encoding, meta)| {
                    let content = Content::Cached { reader, encoding };
                    let parsed = parse_source_content(
                        content,
                        KeepTo::memory(),
                        &passes_of(&config, role, cancel),
                        role,
                        &mut hashes,
                        &mut allowed,
                        &mut timings,
                    );
                    (parsed, meta)
                });
                let (parsed, meta) = match cached {
                    Some((Ok(parsed), meta)) => (parsed, meta),
                    Some((Err(_), _)) if cancel.is_cancelled() => break,
                    cached => {
                        // A stored copy that cannot be used (it changed on
                        // storage, or no longer decodes or fits) is kept no
                        // longer as current: its validators are dropped, so
                        // the next fetch is unconditional and brings the
                        // content whole, where a conditional one would get
                        // `304 Not Modified` and this copy again for as
                        // long as the feed stands still.
                        let forget = match &cached {
                            Some((Err(_), meta)) if meta.validators != Validators::default() => {
                                Some(CacheMeta {
                                    validators: Validators::default(),
                                    ..meta.clone()
                                })
                            }
                            _ => None,
                        };
                        let reason = match (cached, failure.is_empty()) {
                            (Some((Err(e), _)), _) if failure.is_empty() => {
                                format!("last good content not usable: {e}")
                            }
                            (Some((Err(e), _)), _) => format!("{failure}; last good content not usable: {e}"),
                            (_, true) => "server said not modified but no cached content exists".to_owned(),
                            (_, false) => format!("{failure}; no last good content to fall back to"),
                        };
                        let reason = if let Some(meta) = forget {
                            updates.push((index, SourceUpdate::Meta(meta)));
                            format!(
                                "{reason} (dropping its validators: the next fetch asks for the whole content)"
                            )
                        } else {
                            reason
                        };
                        let status = SourceStatus {
                            source: label.clone(),
                            state: "failed".to_owned(),
                            error: Some(reason.clone()),
                            content_fetched_at: None,
                            lines: 0,
                            accepted: 0,
                            rejected: 0,
                        };
                        if role == SourceRole::Block {
                            statuses.push(status);
                            failed.get_or_insert(Error::Source {
                                list: list.to_owned(),
                                label,
                                reason,
                            });
                            continue;
                        }
                        tracing::warn!(source = %label, %reason, "allow source failed with no usable last good content; building without it");
                        allow.sources.push(status);
                        continue;
                    }
                };
                if failure.is_empty() {
                    update = Some(SourceUpdate::Meta(CacheMeta {
                        fetched_at: now,
                        ..meta.clone()
                    }));
                } else {
                    tracing::warn!(source = %label, reason = %failure, fetched_at = meta.fetched_at, "source failed; using its last good content");
                }
                let state = if failure.is_empty() {
                    "not_modified"
                } else {
                    "last_good"
                };
                (parsed, Some(meta.fetched_at), state)
            }
        };
        updates.extend(update.map(|u| (index, u)));
        let status = |source: String, r: &ParseReport| SourceStatus {
            source,
            state: state.to_owned(),
            error: (!failure.is_empty()).then(|| failure.clone()),
            content_fetched_at,
            lines: r.lines,
            accepted: r.accepted,
            rejected: r.rejected_total(),
        };
        match role {
            SourceRole::Block => {
                statuses.push(status(label.clone(), &parsed.entries));
                report.merge(&parsed.entries);
            }
            SourceRole::Allow => {
                allow.sources.push(status(label.clone(), &parsed.entries));
                allow.parse.merge(&parsed.entries);
            }
        }
        if parsed.allow_array.lines > 0 {
            let key = config.json_allow_key().unwrap_or_default();
            allow
                .sources
                .push(status(format!("{label} ({key})"), &parsed.allow_array));
            allow.parse.merge(&parsed.allow_array);
        }
    }
    if cancel.is_cancelled() {
        failed = Some(Error::Cancelled {
            list: list.to_owned(),
        });
    }
    if let Some(error) = failed {
        return Err(Box::new(ReadFailed {
            error,
            read: SourcesRead {
                sources: statuses,
                allow: allow.status(),
                parse: report,
                content_failures,
            },
        }));
    }
    let sorting = Instant::now();
    hashes.par_sort_unstable();
    hashes.dedup();
    allowed.par_sort_unstable();
    allowed.dedup();
    let listed = hashes.len();
    if !allowed.is_empty() {
        hashes.retain(|h| allowed.binary_search(h).is_err());
    }
    allow.entries = allowed.len() as u64;
    allow.removed = (listed - hashes.len()) as u64;
    hashes.shrink_to_fit();
    timings.add("sort_dedup", sorting.elapsed());
    Ok(ReadSources {
        hashes,
        parse: report,
        sources: statuses,
        allow,
        timings,
        content_failures,
        started,
    })
}

/// Builds and signs a snapshot of `req.list` from its loaded sources: the
/// whole build, pure — bytes, the time and the key in; the snapshot, its
/// full hashes and the report out. What [`read_sources`] asks to store is
/// dropped; the publisher, which stores it, calls the two halves itself.
/// The build opens no file itself (a source file comes as a reader the
/// caller opened; the full hashes go out of memory only through the
/// caller's [`BuildRequest::spill`]) and reads no clock but its stage
/// timers.
///
/// The new version is `max(previous + 1, after_version + 1, now)`: it
/// increases from build to build, and after a data directory or store is
/// lost it starts again from the clock, which is then above every earlier
/// version only if no earlier build's clock (or `--now`) ran ahead.
///
/// # Errors
///
/// [`Error::Source`] when a failed source has no fallback, [`Error::Filter`]
/// or [`Error::Encode`] when the filter cannot be built or encoded, as
/// [`build_snapshot`] when the spilled full hashes cannot be read back.
pub fn build_list(req: &BuildRequest<'_>, sources: Vec<LoadedSource>) -> Result<BuiltList, Error> {
    let read = read_sources(
        &req.list.name,
        sources,
        req.now,
        req.probe,
        &mut Vec::new(),
        req.cancel.unwrap_or(&Cancel::default()),
    )
    .map_err(|failed| failed.error)?;
    build_snapshot(req, read)
}

/// The second half of a build: the filter over `read`'s full hashes, its
/// canary, and the signed snapshot. With a [`BuildRequest::spill`] that
/// takes them, the full hashes are out of memory while the filter is built
/// (the filter keys read from the copy written; for a spill past the page
/// cache, computed before the full hashes are released), then read back.
///
/// # Errors
///
/// [`Error::Filter`] or [`Error::Encode`] when the filter cannot be built or
/// encoded; [`Error::Storage`] or [`Error::Corrupt`] when the spilled full
/// hashes cannot be read back as written (the build fails, and the version
/// served stays); [`Error::Cancelled`] once [`BuildRequest::cancel`] is set,
/// at the next stage (the full hashes written, the filter keys sorted, the
/// filter built).
pub fn build_snapshot(req: &BuildRequest<'_>, read: ReadSources) -> Result<BuiltList, Error> {
    let ReadSources {
        hashes,
        parse,
        sources: statuses,
        allow,
        mut timings,
        started,
        ..
    } = read;
    let list = req.list;
    // Checked between the stages below (`req.cancel`).
    let cancelled = || {
        req.cancel
            .is_some_and(Cancel::is_cancelled)
            .then(|| Error::Cancelled {
                list: list.name.clone(),
            })
    };
    if let Some(e) = cancelled() {
        return Err(e);
    }
    // The full hashes written out (as the `.hashes` object to publish)
    // and dropped while the filter is built, then read back: the keys come
    // from the copy written through the page cache, so the hashes and the
    // keys are not in memory at once either (a large spill aside, below).
    let entries = hashes.len();
    let key_bits = list.key_width();
    let started_spill = Instant::now();
    let mut spilled = req.spill.and_then(|s| s.spill(&hashes));
    timings.add("write", started_spill.elapsed());
    // A spill past the page cache (a large one) would be read from the
    // disk for the keys: they are taken from memory before the hashes go,
    // 8 bytes an entry held beside them for a moment. At 50M URLs that
    // raised the build's peak from 1,652 to 1,868 MiB (row 3.6 of
    // BENCHMARKS.md: 1.08× → 1.22× of hashes + filter, the bound is 2×);
    // with the keys read back from the disk instead (tried), the key pass
    // took what writing past the cache had saved.
    let started_keys = Instant::now();
    let early_keys = spilled.as_ref().filter(|s| s.is_direct()).map(|_| {
        hashes
            .par_iter()
            .map(|h| key_bits.key_of(h))
            .collect::<Vec<u64>>()
    });
    let keys_took = started_keys.elapsed();
    let started_release = Instant::now();
    let mut hashes = if spilled.is_some() {
        memory::release(hashes);
        Vec::new()
    } else {
        hashes
    };
    // The spilled file goes to disk while the keys and the filter are
    // made (a thread that waits on the disk, not a core): the commit's
    // sync then finds it written. A build that publishes nothing removes
    // it all the same. A failed sync here is the commit's to report.
    let syncing = spilled
        .as_mut()
        .and_then(SpilledHashes::file_handle)
        .and_then(|file| {
            std::thread::Builder::new()
                .name("spill-sync".to_owned())
                .spawn(move || {
                    let _ = file.sync_data();
                })
                .ok()
        });
    timings.add("write", started_release.elapsed());
    let started_keys = Instant::now();
    let mut keys: Vec<u64> = match (early_keys, &mut spilled) {
        (Some(keys), _) => keys,
        (None, Some(spilled)) => {
            let mut keys = Vec::with_capacity(entries);
            spilled.read_chunks(|chunk| keys.extend(chunk.iter().map(|h| key_bits.key_of(h))))?;
            keys
        }
        (None, None) => hashes.par_iter().map(|h| key_bits.key_of(h)).collect(),
    };
    keys.par_sort_unstable(); // 32-bit keys come sorted already; 64-bit keys too, but be sure
    keys.dedup();
    timings.add("sort_dedup", keys_took + started_keys.elapsed());
    if let Some(e) = cancelled() {
        return Err(e);
    }
    let started_filter = Instant::now();
    let kind = filter_kind_for(list, keys.len() as u64);
    let filter =
        PrefixFilter::build_with(kind, &keys, list.bloom_bits_per_key).map_err(|reason| Error::Filter {
            list: list.name.clone(),
            reason,
        })?;
    timings.add("filter", started_filter.elapsed());
    if let Some(e) = cancelled() {
        return Err(e);
    }
    let started_canary = Instant::now();
    let version = req
        .previous
        .map_or(req.now, |p| req.now.max(p.version + 1))
        .max(req.after_version.saturating_add(1));
    let measured_fpr = measure_fpr(&filter, &keys, key_bits, CANARY_PROBES, version);
    timings.add("canary", started_canary.elapsed());
    let n = keys.len() as u64;
    drop(keys);
    if let Some(spilled) = &mut spilled {
        let started_back = Instant::now();
        hashes = spilled.read_back()?;
        timings.add("write", started_back.elapsed());
    }
    debug_assert_eq!(hashes.len(), entries);
    let request_bits = list.request_prefix_bits.unwrap_or_else(|| {
        request_prefix_bits_after(
            req.previous.map(|p| p.request_prefix_bits),
            hashes.len() as u64,
            list.min_anonymity,
        )
    });
    let params = SnapshotParams {
        list_name: list.name.clone(),
        version,
        created_at: req.now,
        expires_at: req.now.saturating_add(req.ttl.as_secs()),
        key_bits,
        request_prefix_bits: request_bits,
        full_hash_count: hashes.len() as u64,
        measured_fpr,
        // Filter fingerprints are random bytes: on a 950 KB binary fuse8
        // body level 19 saved 53 bytes (0.006%) over level 1 and took 0.46 s
        // instead of 0.01 s (BENCHMARKS.md, row 3).
        zstd_level: 3,
    };
    let encode_error = |reason| Error::Encode {
        list: list.name.clone(),
        reason,
    };
    let started_compress = Instant::now();
    let body = compress_filter(&filter, params.zstd_level).map_err(encode_error)?;
    timings.add("compress", started_compress.elapsed());
    let started_sign = Instant::now();
    let snapshot = sign_snapshot(&params, &body, req.key).map_err(encode_error)?;
    drop(body);
    timings.add("sign", started_sign.elapsed());
    if let Some(syncing) = syncing {
        let started_sync = Instant::now();
        let _ = syncing.join();
        timings.add("write", started_sync.elapsed());
    }
    let theoretical_fpr = filter.theoretical_fpr();
    let anonymity_set = hashes.len() as f64 / 2f64.powi(i32::from(request_bits));
    let sizing = Sizing {
        entries: hashes.len() as u64,
        unique_keys: n,
        filter_kind: kind.to_string(),
        key_bits: key_bits.bits(),
        bits_per_key: if n == 0 {
            0.0
        } else {
            snapshot.len() as f64 * 8.0 / n as f64
        },
        snapshot_bytes: snapshot.len() as u64,
        theoretical_fpr,
        measured_fpr,
        prefix_collision_rate: n as f64 / 4_294_967_296.0,
        expected_full_hash_requests_per_1000: expected_requests_per_1000(false_hit_per_probe(
            theoretical_fpr,
            n,
            key_bits,
        )),
        request_prefix_bits: request_bits,
        anonymity_set,
        expected_response_bytes: anonymity_set * (RESPONSE_BYTES_PER_MATCH + list.name.len() as f64) + 60.0,
    };
    Ok(BuiltList {
        version,
        snapshot,
        hashes,
        spilled,
        report: BuildReport {
            parse,
            sources: statuses,
            allow,
            sizing,
            duration: started.elapsed(),
            timings,
        },
    })
}

/// Checks the publishing gates of `list` against a build. Returns the
/// refusal, naming the gate and the values, or `None` to publish.
pub fn check_gates(
    list: &ListConfig,
    previous: Option<&SnapshotHeader>,
    report: &BuildReport,
) -> Option<GateRefusal> {
    let g = &list.gates;
    let s = &report.sizing;
    if s.entries < g.min_entries {
        return Some(GateRefusal::MinEntries {
            entries: s.entries,
            min_entries: g.min_entries,
            lines: report.parse.lines,
            rejected: report.parse.rejected_total(),
        });
    }
    if let Some(prev) = previous {
        let floor = prev.full_hash_count as f64 * (1.0 - g.max_shrink);
        if (s.entries as f64) < floor {
            return Some(GateRefusal::MaxShrink {
                entries: s.entries,
                previous_entries: prev.full_hash_count,
                previous_version: prev.version,
                max_shrink: g.max_shrink,
            });
        }
    }
    if s.theoretical_fpr > 0.0 && sizing::fpr_over_bound(s.measured_fpr, s.theoretical_fpr, g.max_fpr_ratio) {
        return Some(GateRefusal::MaxFprRatio {
            measured_fpr: s.measured_fpr,
            theoretical_fpr: s.theoretical_fpr,
            max_fpr_ratio: g.max_fpr_ratio,
        });
    }
    None
}

#[cfg(test)]
mod tests;

/// Builds for tests of what comes after a build (storing, following).
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::config::SourceFormat;
    use crate::fetch::Validators;

    /// A build of list `phishing` from the URL feed `feed` at `now` (its
    /// version, with no previous one), signed with `key`.
    pub(crate) fn build_feed(feed: &str, now: u64, key: &SigningKey) -> BuiltList {
        build_feed_spilled(feed, now, key, None)
    }

    /// [`build_feed`], its full hashes out of memory through `spill`
    /// while the filter is built.
    pub(crate) fn build_feed_spilled(
        feed: &str,
        now: u64,
        key: &SigningKey,
        spill: Option<&dyn Spill>,
    ) -> BuiltList {
        let list = ListConfig::new("phishing", vec![]);
        let request = BuildRequest {
            list: &list,
            previous: None,
            after_version: 0,
            now,
            ttl: Duration::from_secs(3600),
            probe: PeakRssProbe::NONE,
            key,
            spill,
            cancel: None,
        };
        let source = LoadedSource {
            config: SourceConfig::file("feed.txt", SourceFormat::Urls),
            role: SourceRole::Block,
            fetched: Fetched::Fresh {
                bytes: feed.as_bytes().to_vec(),
                validators: Validators::default(),
            },
            last_good: LastGood::none(),
            read_duration: Duration::ZERO,
            keep_to: KeepTo::memory(),
        };
        build_list(&request, vec![source]).unwrap()
    }
}
