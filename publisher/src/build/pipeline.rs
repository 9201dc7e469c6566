//! Reading one source's content into full hashes as it streams: the raw
//! bytes (a file, or a response in memory) are decompressed block by block,
//! never held whole once decoded; a line format is cut into blocks of whole
//! lines that every core parses, canonicalizes and hashes at once, and the
//! blocks' results are merged in input order, so counts, reject samples and
//! hashes are those of one pass from the first line to the last. A fresh
//! source's copy to keep as its last good content is taken on the way, as
//! received (compressed or plain; plain content held in memory for a `store`
//! is compressed with zstd), and written to storage alongside the read, on a
//! thread of its own (`copy`).
//!
//! JSON and CSV documents are read whole (a document cannot be cut at a
//! line), then parsed on one thread.

use std::collections::BTreeMap;
use std::io::{self, BufReader, Cursor, Read, Write as _};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

use blocksieve_format::FullHash;

use super::Cancel;
use super::copy::{CopyWriter, Encode, KeepTo};
use crate::config::{SourceConfig, SourceFormat};
pub(crate) use crate::fetch::decoder;
use crate::fetch::{ContentEncoding, FileChanged, Stream, read_member};
use crate::sources::{EntrySink, FormatOptions, ParseReport, parse_source_into};
use crate::storage::StoredCopyError;

/// Bytes read for one block of lines (a block ends at the last line end
/// within them, or runs on to the next line end for a longer line).
const BLOCK_BYTES: usize = 256 * 1024;

/// Blocks per core queued, read ahead of the parse.
const BLOCKS_QUEUED_PER_THREAD: usize = 2;

/// zstd level of a last good copy of content received uncompressed and
/// held in memory (a `store`'s): fast, about 5× smaller than the text for
/// real URL lists. A copy written to the data directory is kept as
/// received ([`Encode::PlainUnlessInMemory`]).
const KEEP_ZSTD_LEVEL: i32 = 1;

/// A source's content, as the build gets it.
pub(crate) enum Content {
    /// Fresh bytes as received (compressed or plain).
    Fresh(Vec<u8>),
    /// Fresh content to read as it streams (a local file).
    Stream(Stream),
    /// A last good copy, as stored, read as it streams.
    Cached {
        /// The stored bytes.
        reader: Box<dyn Read + Send>,
        /// How they are encoded.
        encoding: ContentEncoding,
    },
}

/// The copy of fresh content to keep as its last good content.
#[derive(Debug)]
pub(crate) struct Kept {
    /// The copy, written (not yet committed), or why it could not be.
    pub(crate) copy: Result<crate::storage::Staged, String>,
    /// How it is encoded.
    pub(crate) encoding: ContentEncoding,
}

/// What reading one content gave.
#[derive(Debug, Default)]
pub(crate) struct Streamed {
    /// Its lines' report.
    pub(crate) report: ParseReport,
    /// Expressions hashed, and their bytes.
    pub(crate) expressions: u64,
    pub(crate) expression_bytes: u64,
    /// Wall time spent waiting for input (reading, decompressing and
    /// keeping the copy) that the parse did not hide.
    pub(crate) read: Duration,
    /// Wall time of the parse on every core (splitting, cleaning,
    /// canonicalizing, hashing).
    pub(crate) parse: Duration,
}

/// The raw bytes of a content.
enum Raw {
    Memory(Cursor<Vec<u8>>),
    Stream(Box<dyn Read + Send>),
}

impl Read for Raw {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Self::Memory(c) => c.read(buf),
            Self::Stream(r) => r.read(buf),
        }
    }
}

/// Where the raw bytes of fresh content are copied as they are read.
enum Keeper {
    /// Nothing to copy (cached content, or fresh gzip already in memory).
    Nothing,
    /// The raw bytes, stored with this encoding (as received, or plain
    /// bytes compressed with zstd when the copy is held in memory:
    /// [`Encode::PlainUnlessInMemory`]).
    Copy(CopyWriter, ContentEncoding),
    /// The copy failed, for this reason: the read goes on without it.
    Broken(String),
}

impl Keeper {
    /// A copy of raw bytes in `encoding` (compressed or plain), written by
    /// `keep_to`: compressed content as received; plain as received into a file, or
    /// compressed with zstd when held in memory.
    fn open(keep_to: KeepTo, encoding: ContentEncoding) -> Self {
        match encoding {
            ContentEncoding::Identity => match keep_to.open(Encode::PlainUnlessInMemory(KEEP_ZSTD_LEVEL)) {
                (copy, Encode::Zstd(_)) => Self::Copy(copy, ContentEncoding::Zstd),
                (copy, _) => Self::Copy(copy, ContentEncoding::Identity),
            },
            _ => Self::Copy(keep_to.open(Encode::AsRead).0, encoding),
        }
    }

    /// Copies `bytes`; a copy that fails is dropped, never the read.
    fn write(&mut self, bytes: &[u8]) {
        let written = match self {
            Self::Nothing | Self::Broken(_) => Ok(()),
            Self::Copy(copy, _) => copy.write_all(bytes),
        };
        if let Err(e) = written {
            *self = Self::Broken(e.to_string());
        }
    }
}

/// Reads raw bytes, copying them to a keeper; fails once the build is
/// cancelled, so that a long read stops at its next block.
struct Tee<'a> {
    raw: &'a mut Raw,
    keeper: &'a mut Keeper,
    cancel: &'a Cancel,
}

impl Read for Tee<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.cancel.check_io()?;
        let n = self.raw.read(buf)?;
        self.keeper.write(&buf[..n]);
        Ok(n)
    }
}

/// Fails a read once more than `max` bytes came through.
struct Limit<R> {
    inner: R,
    left: u64,
    max: u64,
}

impl<R: Read> Read for Limit<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        match self.left.checked_sub(n as u64) {
            Some(left) => {
                self.left = left;
                Ok(n)
            }
            None => Err(io::Error::new(
                io::ErrorKind::FileTooLarge,
                format!(
                    "content as read (decompressed, if compressed) exceeds max_bytes = {}",
                    self.max
                ),
            )),
        }
    }
}

/// A decoded stream cut into blocks of whole lines: each block but the
/// last ends with a line feed, so reading the blocks one after another
/// with [`feed_lines`](crate::sources::feed_lines) gives the lines of the
/// whole stream (a CRLF pair is never cut, and a lone CR splits within a
/// block's line as it does within the whole).
pub(crate) struct Blocks<R> {
    reader: R,
    /// The start of a line cut at the end of the previous block (holds no
    /// line feed).
    carry: Vec<u8>,
    done: bool,
}

impl<R: Read> Blocks<R> {
    pub(crate) fn new(reader: R) -> Self {
        Self {
            reader,
            carry: Vec::new(),
            done: false,
        }
    }

    /// The next block of whole lines, `None` at the end.
    pub(crate) fn next_block(&mut self) -> io::Result<Option<Vec<u8>>> {
        let mut block = std::mem::take(&mut self.carry);
        loop {
            if self.done {
                return Ok((!block.is_empty()).then_some(block));
            }
            let start = block.len();
            block.resize(start + BLOCK_BYTES, 0);
            let n = crate::storage::read_full(&mut self.reader, &mut block[start..])?;
            block.truncate(start + n);
            self.done = n < BLOCK_BYTES;
            if let Some(at) = memchr::memrchr(b'\n', &block[start..]) {
                let cut = start + at + 1;
                self.carry = block[cut..].to_vec();
                block.truncate(cut);
                return Ok(Some(block));
            }
        }
    }
}

/// The sink of one block: its full hashes, in order.
#[derive(Default)]
struct BlockSink {
    hashes: Vec<FullHash>,
    expressions: u64,
    expression_bytes: u64,
}

impl EntrySink for BlockSink {
    fn expression(&mut self, expression: &[u8]) {
        self.hashes.push(FullHash::of(expression));
        self.expressions += 1;
        self.expression_bytes += expression.len() as u64;
    }

    fn full_hash(&mut self, hash: FullHash) {
        self.hashes.push(hash);
    }
}

/// Parses a whole document (or block) on this thread into `out`.
fn parse_into(
    bytes: &[u8],
    format: SourceFormat,
    options: &FormatOptions,
    out: &mut Vec<FullHash>,
    streamed: &mut Streamed,
) {
    let started = Instant::now();
    let mut sink = BlockSink {
        hashes: std::mem::take(out),
        ..BlockSink::default()
    };
    parse_source_into(bytes, format, options, &mut streamed.report, &mut sink);
    *out = sink.hashes;
    streamed.expressions += sink.expressions;
    streamed.expression_bytes += sink.expression_bytes;
    streamed.parse += started.elapsed();
}

/// Parses a line format's blocks on every core into `out`, results in
/// input order.
///
/// A streaming pipeline with no barrier between blocks: one thread reads
/// (and decompresses) blocks into a bounded queue; one parse thread per
/// core (as many as rayon's pool has) takes the next block as soon as it
/// is done with the last; each block's result is merged as soon as every
/// block before it has been. A core never waits for the slowest block of
/// a batch, and at most `threads × (BLOCKS_QUEUED_PER_THREAD + 1) + 1`
/// blocks of text are in memory at once (the queue, one per parse thread,
/// one being read). A result that comes before its turn waits holding
/// only its full hashes, which the merge keeps anyway.
///
/// The threads are this source's own, not rayon tasks: a task that ran
/// for a whole source would hold a pool thread that a build of another
/// list, waiting on the same pool, might need to go on.
fn parse_lines<R: Read + Send>(
    blocks: &mut Blocks<R>,
    format: SourceFormat,
    options: &FormatOptions,
    out: &mut Vec<FullHash>,
    streamed: &mut Streamed,
) -> io::Result<()> {
    let threads = rayon::current_num_threads().max(1);
    let started = Instant::now();
    let (send, receive) =
        std::sync::mpsc::sync_channel::<(usize, Vec<u8>)>(threads * BLOCKS_QUEUED_PER_THREAD);
    let receive = Mutex::new(Some(receive));
    let merge = Mutex::new(InOrder {
        next: 0,
        waiting: BTreeMap::new(),
        out,
        streamed: &mut *streamed,
    });
    // Nanoseconds the parse threads spent waiting for the next block.
    let waited = AtomicU64::new(0);
    // Set when a parse thread panics: the others stop at their next block.
    let stop = AtomicBool::new(false);
    let spawn_error =
        |what: &str, e: io::Error| io::Error::new(e.kind(), format!("cannot start {what}: {e}"));
    let result = std::thread::scope(|scope| {
        let reader = std::thread::Builder::new()
            .name("source-read".into())
            .spawn_scoped(scope, move || -> io::Result<()> {
                let mut index = 0;
                while let Some(block) = blocks.next_block()? {
                    if send.send((index, block)).is_err() {
                        break;
                    }
                    index += 1;
                }
                Ok(())
            })
            .map_err(|e| spawn_error("the source's read thread", e))?;
        let parse = || {
            let _stop_on_panic = StopOnPanic(&stop);
            loop {
                let wait = Instant::now();
                // The lock is held only while the queue is empty or a block
                // is taken: every other thread is parsing.
                let next = receive
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .as_ref()
                    .map(std::sync::mpsc::Receiver::recv);
                waited.fetch_add(nanos(wait.elapsed()), Ordering::Relaxed);
                let Some(Ok((index, block))) = next else { break };
                if stop.load(Ordering::Relaxed) {
                    break;
                }
                let mut report = ParseReport::default();
                let mut sink = BlockSink::default();
                parse_source_into(&block, format, options, &mut report, &mut sink);
                drop(block);
                merge
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .add(index, report, sink);
            }
        };
        let mut parsers = Vec::with_capacity(threads);
        let mut started_all = Ok(());
        for _ in 0..threads {
            match std::thread::Builder::new()
                .name("source-parse".into())
                .spawn_scoped(scope, parse)
            {
                Ok(handle) => parsers.push(handle),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    started_all = Err(spawn_error("a parse thread", e));
                    break;
                }
            }
        }
        let mut panicked = None;
        for parser in parsers {
            if let Err(panic) = parser.join() {
                panicked.get_or_insert(panic);
            }
        }
        // The queue closed, so a reader blocked on it stops, whatever
        // stopped the parse.
        drop(receive.lock().unwrap_or_else(PoisonError::into_inner).take());
        let read = reader.join();
        if let Some(panic) = panicked {
            std::panic::resume_unwind(panic);
        }
        let read = read.unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        started_all.and(read)
    });
    let wall = started.elapsed();
    // Input the parse waited for is reading's share of the wall time.
    let waiting = Duration::from_nanos(waited.into_inner() / threads as u64).min(wall);
    streamed.read += waiting;
    streamed.parse += wall - waiting;
    result
}

/// Sets its flag when dropped by a panic's unwinding.
struct StopOnPanic<'a>(&'a AtomicBool);

impl Drop for StopOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.store(true, Ordering::Relaxed);
        }
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Blocks' results merged in input order.
struct InOrder<'a> {
    /// The index of the next block to merge.
    next: usize,
    /// Results of later blocks, until their turn.
    waiting: BTreeMap<usize, (ParseReport, BlockSink)>,
    out: &'a mut Vec<FullHash>,
    streamed: &'a mut Streamed,
}

impl InOrder<'_> {
    fn add(&mut self, index: usize, report: ParseReport, sink: BlockSink) {
        self.waiting.insert(index, (report, sink));
        while let Some((report, sink)) = self.waiting.remove(&self.next) {
            self.streamed.report.merge(&report);
            self.out.extend_from_slice(&sink.hashes);
            self.streamed.expressions += sink.expressions;
            self.streamed.expression_bytes += sink.expression_bytes;
            self.next += 1;
        }
    }
}

/// How one content is read: its format and the options of each pass (a
/// JSON block source's allow array is a second pass over the document).
pub(crate) struct Passes<'a> {
    pub(crate) config: &'a SourceConfig,
    /// Stops the read at its next block once set.
    pub(crate) cancel: &'a Cancel,
    pub(crate) entries: FormatOptions,
    pub(crate) allow_array: Option<FormatOptions>,
}

/// What reading one content gave: each pass's result, and the copy to keep
/// (fresh content only).
pub(crate) struct ContentRead {
    pub(crate) entries: Streamed,
    pub(crate) allow_array: Streamed,
    pub(crate) kept: Option<Kept>,
}

/// Reads `content` per `passes`: the entries into `out`, a JSON allow
/// array into `allowed`. An error (unreadable, corrupt, over `max_bytes`
/// decompressed) is the reason, with whatever was added to `out` and
/// `allowed` left for the caller to cut back.
pub(crate) fn read_content(
    content: Content,
    keep_to: KeepTo,
    passes: &Passes<'_>,
    out: &mut Vec<FullHash>,
    allowed: &mut Vec<FullHash>,
) -> Result<ContentRead, String> {
    let started = Instant::now();
    let fresh = !matches!(content, Content::Cached { .. });
    let max_bytes = passes.config.max_bytes;
    let (mut raw, encoding, mut keeper) = match content {
        Content::Fresh(bytes) => {
            let encoding = ContentEncoding::sniff(&bytes);
            let keeper = if encoding != ContentEncoding::Identity {
                Keeper::Nothing
            } else {
                Keeper::open(keep_to, encoding)
            };
            (Raw::Memory(Cursor::new(bytes)), encoding, keeper)
        }
        Content::Stream(stream) => {
            let encoding = stream.encoding;
            (
                Raw::Stream(stream.reader),
                encoding,
                Keeper::open(keep_to, encoding),
            )
        }
        Content::Cached { reader, encoding } => (Raw::Stream(reader), encoding, Keeper::Nothing),
    };
    let prepared = started.elapsed();
    let read = {
        let tee = BufReader::with_capacity(
            BLOCK_BYTES,
            Tee {
                raw: &mut raw,
                keeper: &mut keeper,
                cancel: passes.cancel,
            },
        );
        let decoded = decoder(tee, encoding).map_err(|e| e.to_string())?;
        // Stored copies too: theirs is checked only at their end, so a
        // copy that changed on disk is decoded before it is refused.
        let decoded = Limit {
            inner: decoded,
            left: max_bytes,
            max: max_bytes,
        };
        // An archive's one file, or the content itself; held to max_bytes
        // too (an archive's file is compressed inside it).
        read_member(decoded, passes.config.member.as_deref(), |member| {
            let member = Limit {
                inner: member,
                left: max_bytes,
                max: max_bytes,
            };
            read_passes(member, passes, out, allowed)
        })
    };
    // The copy's last pieces written and synced by its thread, and a
    // stored copy read to its end: part of reading it.
    let finishing = Instant::now();
    let mut read = match read {
        Ok(read) if fresh => read,
        Ok(read) => {
            // A stored copy read to its very end, where its reader checks
            // it (`SourceCache::open_encoded`), also when the decoder
            // stopped before: what was parsed of a copy that fails is
            // dropped.
            io::copy(&mut raw, &mut io::sink()).map_err(|e| describe(&e, encoding))?;
            read
        }
        // Cancelled: the rest of a stored copy is not read to check it
        // (from an object store, that would download it).
        Err(e) if fresh || is_stored_copy_error(&e) || passes.cancel.is_cancelled() => {
            return Err(describe(&e, encoding));
        }
        Err(e) => {
            // A stored copy that does not decode most often changed on
            // disk: its own check says so, where it fails too.
            return Err(match io::copy(&mut raw, &mut io::sink()) {
                Err(copy) if is_stored_copy_error(&copy) => describe(&copy, encoding),
                _ => describe(&e, encoding),
            });
        }
    };
    let kept = match keeper {
        _ if !fresh => None,
        Keeper::Nothing => match raw {
            Raw::Memory(cursor) => Some(Kept {
                copy: Ok(crate::storage::Staged::from_bytes(cursor.into_inner())),
                encoding,
            }),
            Raw::Stream(_) => None,
        },
        Keeper::Copy(copy, encoding) => Some(Kept {
            copy: copy.finish(),
            encoding,
        }),
        Keeper::Broken(reason) => Some(Kept {
            copy: Err(reason),
            encoding,
        }),
    };
    read.entries.read += prepared + finishing.elapsed();
    Ok(ContentRead { kept, ..read })
}

/// A read error as a source's failure reason: what failed, and where. A
/// local file changed while it was read says so alone (whatever the
/// decoder made of it, the cause is the file's).
fn describe(error: &io::Error, encoding: ContentEncoding) -> String {
    if is_stored_copy_error(error) {
        return format!("stored copy: {error}");
    }
    if error.get_ref().is_some_and(|inner| inner.is::<FileChanged>()) {
        return error.to_string();
    }
    if error
        .get_ref()
        .is_some_and(|inner| inner.is::<crate::fetch::ArchiveError>())
    {
        return error.to_string();
    }
    match (error.kind(), encoding) {
        (io::ErrorKind::FileTooLarge, _) => error.to_string(),
        (_, ContentEncoding::Identity) => format!("reading content: {error}"),
        // Some decoders name themselves already (`bzip2: bz2 header missing`).
        (_, compressed) if error.to_string().starts_with(&format!("{}: ", compressed.name())) => {
            error.to_string()
        }
        (_, compressed) => format!("{}: {error}", compressed.name()),
    }
}

/// Whether `error` is the stored copy's own (it is gone, or does not
/// match its metadata: [`StoredCopyError`]), passed on by the decoder.
fn is_stored_copy_error(error: &io::Error) -> bool {
    error.get_ref().is_some_and(|inner| inner.is::<StoredCopyError>())
}

/// The passes over a decoded stream.
fn read_passes(
    mut decoded: impl Read + Send,
    passes: &Passes<'_>,
    out: &mut Vec<FullHash>,
    allowed: &mut Vec<FullHash>,
) -> io::Result<ContentRead> {
    let format = passes.config.format;
    let mut entries = Streamed::default();
    let mut allow_array = Streamed::default();
    if matches!(format, SourceFormat::Json | SourceFormat::Csv) {
        let started = Instant::now();
        let mut document = Vec::new();
        decoded.read_to_end(&mut document)?;
        entries.read += started.elapsed();
        parse_into(&document, format, &passes.entries, out, &mut entries);
        if let Some(options) = &passes.allow_array {
            parse_into(&document, format, options, allowed, &mut allow_array);
        }
    } else {
        parse_lines(
            &mut Blocks::new(decoded),
            format,
            &passes.entries,
            out,
            &mut entries,
        )?;
    }
    Ok(ContentRead {
        entries,
        allow_array,
        kept: None,
    })
}

#[cfg(test)]
mod tests;
