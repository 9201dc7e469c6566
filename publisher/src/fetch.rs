//! Getting a source's bytes: local files (opened and checked, for the
//! build to stream), HTTP(S) feeds with conditional GET (the body as
//! received, gzip or not, spooled: in memory up to 8 MiB, then in an
//! unnamed temporary file, never held whole), size limits and HTML
//! detection; the build decompresses as it reads.
//!
//! A source that fails — unreadable file, network error, 4xx/5xx, an HTML
//! page instead of a list, over its size limit, a body that may be cut off
//! (its end unmarked, mid-line), a file changed while it was read, or
//! (decided in [`crate::build`]) a parse that collapses, most of its lines
//! rejected — keeps its last good content for that build, and the build
//! report says so. That content is kept by [`crate::storage`]; this module
//! does no more than get bytes.

use std::io::Read as _;
use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{BUILTIN_LIST, SourceConfig, SourceFormat};
use crate::sources::looks_like_html;

mod decode;
mod gunzip;
mod opened;

#[cfg(test)]
pub(crate) use decode::shipped as decode_shipped;
pub use decode::{ArchiveError, decoder, is_archive, member_head, read_member, unsupported};
pub use gunzip::{Gunzip, gunzip};
pub use opened::{FileChanged, PipeStalled};
use opened::{FileStamp, OpenedFile};

/// What fetching a source produced.
#[derive(Debug)]
pub enum Fetched {
    /// New content, as received: gzip stays compressed until the build
    /// reads it, line block by line block.
    Fresh {
        /// The bytes as received (gzip or plain).
        bytes: Vec<u8>,
        /// HTTP validators to send next time.
        validators: Validators,
    },
    /// New content in a local file, or a response body spooled as it
    /// arrived (in memory, then a temporary file), checked, read by the
    /// build as it parses (never held whole in memory).
    Stream(Stream),
    /// The server answered 304: the cached content is current.
    NotModified,
    /// The source failed; the reason.
    Failed(String),
}

/// Fresh content the build reads as it parses: a local file, or a
/// response body as received.
pub struct Stream {
    /// The content from its start, as stored.
    pub reader: Box<dyn std::io::Read + Send>,
    /// Its compression, by its magic number.
    pub encoding: ContentEncoding,
    /// Its size, in bytes.
    pub size: u64,
    /// HTTP validators to send next time (none for a file).
    pub validators: Validators,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("encoding", &self.encoding)
            .field("size", &self.size)
            .field("validators", &self.validators)
            .finish_non_exhaustive()
    }
}

/// How a source's bytes are encoded: what a fetch received, and how its
/// last good copy is stored (`encoding` in the cache's `.meta.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentEncoding {
    /// Plain text (a copy in the data directory of content received plain).
    #[default]
    Identity,
    /// gzip, as the source served it.
    Gzip,
    /// zstd, as the source served it, or of content received uncompressed
    /// (a copy held in memory for a `store`).
    Zstd,
    /// bzip2, as the source served it.
    Bzip2,
    /// xz, as the source served it.
    Xz,
}

/// HTTP cache validators of a fetched source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validators {
    /// The `ETag` the server sent.
    pub etag: Option<String>,
    /// The `Last-Modified` the server sent.
    pub last_modified: Option<String>,
    /// The response's `Date`, which tells whether `last_modified` may be
    /// sent back ([`Validators::to_send`]; absent from metadata stored
    /// before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub date: Option<String>,
}

impl Validators {
    /// The `If-None-Match` and `If-Modified-Since` values a conditional GET
    /// sends: neither while a `Last-Modified` is not settled
    /// ([`settled_before`]: the response's `Date` was not a second past
    /// it, or is not known), the next fetch then being unconditional. HTTP
    /// dates count whole seconds, and servers compare `If-Modified-Since`
    /// with the file's time at that resolution; a server that sends both
    /// validators usually makes its `ETag` of the same time and the size
    /// (nginx: `"<mtime seconds>-<size>"`), so a same-size rewrite later in
    /// that second keeps it too, and a server evaluates `If-None-Match`
    /// before `If-Modified-Since`. Either would answer `304 Not Modified`
    /// to content changed after the copy taken mid-change.
    pub fn to_send(&self) -> (Option<&str>, Option<&str>) {
        match &self.last_modified {
            Some(modified) if !settled_before(modified, self.date.as_deref()) => (None, None),
            modified => (self.etag.as_deref(), modified.as_deref()),
        }
    }
}

/// Decompressed bytes of the start of a source that HTML detection reads.
const HEAD_BYTES: usize = 64 * 1024;

/// The start of content that begins with `head` (all of it when
/// `complete`), decompressed when compressed, and of the file inside when
/// an archive ([`member_head`]): what HTML and text detection read. The
/// rest is decompressed by the build as it parses, which also enforces the
/// decompressed size limit.
fn decoded_head(head: &[u8], complete: bool, member: Option<&str>) -> Result<Vec<u8>, String> {
    if let Some(why) = unsupported(head) {
        return Err(why);
    }
    let encoding = ContentEncoding::sniff(head);
    if encoding == ContentEncoding::Identity {
        return Ok(member_head(head, member).into_owned());
    }
    let mut out = Vec::new();
    let read =
        decoder(head, encoding).and_then(|decoded| decoded.take(HEAD_BYTES as u64).read_to_end(&mut out));
    let name = encoding.name();
    match read {
        // Some decoders name themselves already (`bzip2: bz2 header missing`).
        Err(e) if complete && e.to_string().starts_with(&format!("{name}: ")) => Err(e.to_string()),
        Err(e) if complete => Err(format!("{name}: {e}")),
        // The head ended inside the compressed stream (even inside its
        // header, or a bzip2 block, which may run past the head): what it
        // held decoded is checked, and the build decodes the whole, and
        // reports a stream that really is cut short or damaged.
        _ => Ok(member_head(&out, member).into_owned()),
    }
}

/// Checks fetched content: its size as received, and that it is UTF-8
/// text and no HTML page (by its start, decompressed; content that
/// `labelled_html`, served as `text/html`, may not start with markup at
/// all: `<!-- -->`, `<meta>`, `<script>`, `<?xml`).
fn check_content(
    size: u64,
    head: &[u8],
    complete: bool,
    labelled_html: bool,
    source: &SourceConfig,
) -> Result<(), String> {
    if size > source.max_bytes {
        return Err(format!("{size} bytes exceeds max_bytes = {}", source.max_bytes));
    }
    let head = decoded_head(head, complete, source.member.as_deref())?;
    if looks_like_html(&head) {
        return Err("response is an HTML page, not a list".to_owned());
    }
    let start = head
        .strip_prefix(b"\xEF\xBB\xBF")
        .unwrap_or(&head)
        .trim_ascii_start();
    if labelled_html && start.starts_with(b"<") {
        return Err(
            "response is an HTML page (Content-Type text/html, starting with markup), not a list".to_owned(),
        );
    }
    if let Some(why) = not_utf8_text(&head) {
        return Err(why.to_owned());
    }
    Ok(())
}

/// Why an archive's file starting with `head` is no list: an HTML page,
/// or text that is not UTF-8. The checks made before a build see only the
/// start of the content, where a file of a `member` that comes after
/// others (UT1's `urls`, after `domains`) is not: the build makes them
/// again on the file itself ([`decode::read_member`]).
fn list_problem(head: &[u8]) -> Option<&'static str> {
    if looks_like_html(head) {
        return Some("an HTML page, not a list");
    }
    not_utf8_text(head)
}

/// Why content starting with `head` (decompressed) cannot be read as UTF-8
/// text, if it cannot: a UTF-16 or UTF-32 byte-order mark, or a NUL byte
/// (UTF-16 or UTF-32 without one, or a binary file). Read as UTF-8, such a
/// list gives one entry of junk per line (a NUL between every letter,
/// percent-escaped into the host), none of them a listed URL, and as many
/// entries as before: the shrink gate would not see it.
fn not_utf8_text(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") || head.starts_with(b"\0\0\xFE\xFF") {
        return Some(
            "content is UTF-16 or UTF-32 (it starts with that byte-order mark), not UTF-8: serve or save the list as UTF-8",
        );
    }
    // Text in UTF-16 is half NUL bytes (ASCII), in UTF-32 three quarters;
    // a stray NUL in UTF-8 text is that line's business.
    let nul = head.iter().filter(|&&b| b == 0).count();
    (nul > 0 && nul * 8 >= head.len()).then_some(
        "content holds NUL bytes: not a UTF-8 text list (UTF-16 or UTF-32 without a byte-order mark, or a binary file)",
    )
}

/// Opens a local source file and checks it (size, start) without reading
/// it whole: the start read, then the rest of the file, for the build to
/// read ([`OpenedFile`]: a regular file changed before the read's end fails
/// it there). Never seeks: a named pipe or `/dev/stdin` reads as well.
fn open_file(path: &Path, source: &SourceConfig) -> Result<Stream, String> {
    let mut file = open_without_waiting(path).map_err(|e| e.to_string())?;
    let metadata = file.metadata().map_err(|e| e.to_string())?;
    let size = metadata.len();
    let opened = metadata.is_file().then(|| FileStamp::of(&metadata));
    let mut head = Vec::new();
    // A named pipe stays non-blocking: each read waits at most the
    // source's wait for its writer ([`OpenedFile::idle`]).
    let idle = is_fifo(&metadata).then(|| source.timeout());
    match idle {
        Some(wait) => wait_for_writer(&mut file, &mut head, wait)?,
        None => set_blocking(&file).map_err(|e| e.to_string())?,
    }
    let mut reader = OpenedFile {
        head: std::io::Cursor::new(Vec::new()),
        file,
        opened,
        idle,
    };
    (&mut reader)
        .take(HEAD_BYTES as u64 - head.len() as u64)
        .read_to_end(&mut head)
        .map_err(|e| e.to_string())?;
    check_content(size, &head, head.len() as u64 == size, false, source)?;
    let encoding = ContentEncoding::sniff(&head);
    reader.head = std::io::Cursor::new(head);
    Ok(Stream {
        reader: Box::new(reader),
        encoding,
        size,
        validators: Validators::default(),
    })
}

/// Opens a source file for reading without waiting for a writer, its
/// reads non-blocking until [`set_blocking`]: a named pipe opened for
/// reading waits, in `open(2)`, until a process opens it for writing, and
/// a build reading one that nothing writes to waited forever (a file has
/// no timeout), its list's build lock held ([`wait_for_writer`] bounds
/// that wait).
#[cfg(target_os = "linux")]
fn open_without_waiting(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(target_os = "linux"))]
fn open_without_waiting(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// Makes `file`'s reads blocking again ([`open_without_waiting`]).
#[cfg(target_os = "linux")]
fn set_blocking(file: &std::fs::File) -> std::io::Result<()> {
    let flags = rustix::fs::fcntl_getfl(file)?;
    rustix::fs::fcntl_setfl(file, flags - rustix::fs::OFlags::NONBLOCK)?;
    Ok(())
}

#[cfg(not(target_os = "linux"))]
fn set_blocking(_file: &std::fs::File) -> std::io::Result<()> {
    Ok(())
}

/// Waits, for at most `wait` (60 s: `path` sources take no `timeout_s`),
/// until named pipe
/// `file` (opened non-blocking) has a writer, keeping in `head` what a
/// first read got. A read of a pipe with no writer ends at once, empty; one
/// with a writer that has written nothing yet would block. A writer that
/// starts after the build opened the pipe (the build waited in `open` for
/// it, as it waits now) is read; with none by then, the source fails.
fn wait_for_writer(file: &mut std::fs::File, head: &mut Vec<u8>, wait: Duration) -> Result<(), String> {
    let deadline = std::time::Instant::now() + wait;
    let mut buffer = [0u8; 8192];
    loop {
        match file.read(&mut buffer) {
            Ok(0) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(20)),
            Ok(0) => {
                return Err(format!(
                    "named pipe gave nothing: no process wrote to it within {} s of its opening",
                    wait.as_secs()
                ));
            }
            Ok(read) => {
                head.extend_from_slice(&buffer[..read]);
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Whether `metadata` is a named pipe's.
fn is_fifo(metadata: &std::fs::Metadata) -> bool {
    #[cfg(unix)]
    {
        std::os::unix::fs::FileTypeExt::is_fifo(&metadata.file_type())
    }
    #[cfg(not(unix))]
    {
        let _ = metadata;
        false
    }
}

/// Fetches `source` of list `list` (named in logs), conditionally when the
/// validators of its last good content, `cached`, exist: what it produced,
/// and how many times it was tried again (see `SourceConfig::retries`).
/// `client` fetches a `url` source (`None`: such a source fails).
pub async fn fetch(
    client: Option<&reqwest::Client>,
    list: &str,
    source: &SourceConfig,
    cached: Option<&Validators>,
) -> (Fetched, u32) {
    if source.builtin {
        let builtin = Fetched::Fresh {
            bytes: BUILTIN_LIST.to_vec(),
            validators: Validators::default(),
        };
        return (builtin, 0);
    }
    if let Some(path) = &source.path {
        let path = path.clone();
        let source = source.clone();
        let opened = tokio::task::spawn_blocking(move || open_file(&path, &source)).await;
        let fetched = match opened {
            Ok(Ok(stream)) => Fetched::Stream(stream),
            Ok(Err(e)) => Fetched::Failed(e),
            Err(e) => Fetched::Failed(format!("read task failed: {e}")),
        };
        return (fetched, 0);
    }
    let Some(url) = &source.url else {
        return (
            Fetched::Failed("source has no path, url or builtin".to_owned()),
            0,
        );
    };
    // The publisher makes a client for each kind of `url` source it has.
    let Some(client) = client else {
        let reason = "no HTTP client was made for this source at start";
        return (Fetched::Failed(reason.to_owned()), 0);
    };
    fetch_http(client, list, url, source, cached).await
}

/// How many of one list's sources (and allowlists) a build fetches at
/// once: each is a connection to a feed and up to 8 MiB of body held in
/// memory before it spools to a file, so this bounds both; a list with
/// more sources fetches the rest as the first finish.
pub const MAX_CONCURRENT_FETCHES: usize = 4;

/// The longest `Retry-After` a fetch waits for within a build; a server
/// asking for more is not tried again in that build (it keeps its last
/// good content, and the next scheduled build asks again).
const MAX_RETRY_AFTER: Duration = Duration::from_secs(60);

/// The wait before the first retry of a failed fetch; each retry after it
/// waits twice as long, up to [`MAX_RETRY_DELAY`], times a random factor
/// in 0.5–1 (jitter, so publishers fetching one feed do not retry in step).
const FIRST_RETRY_DELAY: Duration = Duration::from_secs(1);

/// The longest backoff wait between two attempts (before its jitter): ten
/// retries of a feed that never answers wait at most 1 + 2 + 4 + 8 + 16 +
/// 5 × 30 = 181 s in all, beside their timeouts.
const MAX_RETRY_DELAY: Duration = Duration::from_secs(30);

/// Why one attempt at a fetch failed.
#[derive(Debug)]
struct Failure {
    reason: String,
    /// Whether another attempt may succeed: the connection, a timeout or
    /// the server's state (`408`, `429`, `500`, `502`, `503`, `504`), not
    /// the content or the request itself.
    transient: bool,
    /// The server's `Retry-After`, with a `429` or `503`.
    retry_after: Option<Duration>,
    /// Whether the body's end may have been marked where it could not be
    /// seen: a body that ended mid-line with no `Content-Length` or
    /// chunked framing in sight, asked for with `Accept-Encoding: gzip`.
    /// reqwest decodes a gzip-encoded response and drops its
    /// `Content-Length`; the gzip trailer proved its end, but nothing says
    /// it was there. Asked for again at once, uncompressed ([`attempt`]).
    ask_uncompressed: bool,
}

impl Failure {
    fn permanent(reason: String) -> Self {
        Self {
            reason,
            transient: false,
            retry_after: None,
            ask_uncompressed: false,
        }
    }

    fn transient(reason: String) -> Self {
        Self {
            reason,
            transient: true,
            retry_after: None,
            ask_uncompressed: false,
        }
    }
}

/// Fetches `url` with up to `source.retries` retries of failures that may
/// pass (see [`Failure`]'s `transient`), waiting [`FIRST_RETRY_DELAY`],
/// doubling, with jitter, or the server's `Retry-After` up to
/// [`MAX_RETRY_AFTER`]. Each attempt has the source's whole timeout.
async fn fetch_http(
    client: &reqwest::Client,
    list: &str,
    url: &str,
    source: &SourceConfig,
    cached: Option<&Validators>,
) -> (Fetched, u32) {
    let mut retried = 0;
    loop {
        let failure = match attempt(client, url, source, cached).await {
            Ok(fetched) => return (fetched, retried),
            Err(failure) => failure,
        };
        let attempts = |n: u32| match n {
            0 => String::new(),
            n => format!(" ({} attempts)", n + 1),
        };
        if !failure.transient || retried >= source.retries() {
            return (
                Fetched::Failed(format!("{}{}", failure.reason, attempts(retried))),
                retried,
            );
        }
        let delay = match failure.retry_after {
            Some(asked) if asked > MAX_RETRY_AFTER => {
                let reason = format!(
                    "{}{}; the server asks to retry in {} s, later than this build waits ({} s)",
                    failure.reason,
                    attempts(retried),
                    asked.as_secs(),
                    MAX_RETRY_AFTER.as_secs()
                );
                return (Fetched::Failed(reason), retried);
            }
            Some(asked) => asked,
            None => {
                let ceiling = FIRST_RETRY_DELAY
                    .saturating_mul(1 << retried.min(16))
                    .min(MAX_RETRY_DELAY);
                ceiling.mul_f64(rand::Rng::gen_range(&mut rand::thread_rng(), 0.5..=1.0))
            }
        };
        retried += 1;
        tracing::warn!(
            list,
            source = %source.public_label(),
            reason = %failure.reason,
            retry = retried,
            of = source.retries(),
            delay_ms = delay.as_millis() as u64,
            "fetch failed; trying again"
        );
        tokio::time::sleep(delay).await;
    }
}

/// One attempt at fetching `url` (see [`fetch_http`]): a `GET`, and when
/// its body ended mid-line where its framing could not be seen (see
/// [`Failure::ask_uncompressed`]), a second one at once asking for the
/// content uncompressed (`Accept-Encoding: identity`), whose answer is the
/// attempt's.
async fn attempt(
    client: &reqwest::Client,
    url: &str,
    source: &SourceConfig,
    cached: Option<&Validators>,
) -> Result<Fetched, Failure> {
    match get(client, url, source, cached, false).await {
        Err(failure) if failure.ask_uncompressed => get(client, url, source, cached, true).await,
        got => got,
    }
}

/// A `GET` of `url`: see [`attempt`]. `uncompressed` asks for the content
/// with no content coding.
async fn get(
    client: &reqwest::Client,
    url: &str,
    source: &SourceConfig,
    cached: Option<&Validators>,
    uncompressed: bool,
) -> Result<Fetched, Failure> {
    let headers = source.request_headers().map_err(Failure::permanent)?;
    // A server that does not honour `identity` (an object store serves an
    // object uploaded gzip-encoded as it is) answers gzip again: a client
    // that decodes it would drop its `Content-Length` again, so this one
    // decodes nothing, and the body comes as sent, gzip content the build
    // decodes, its length seen.
    let undecoded;
    let client = if uncompressed {
        let redirects = if source.headers.is_empty() {
            reqwest::redirect::Policy::default()
        } else {
            same_origin_redirects()
        };
        undecoded = client_builder(redirects)
            .no_gzip()
            .build()
            .map_err(|e| Failure::permanent(format!("request failed: {}", error_chain(e))))?;
        &undecoded
    } else {
        client
    };
    let mut request = client.get(url).timeout(source.timeout()).headers(headers);
    if uncompressed {
        // Set, the client leaves it be (and a source may not set it:
        // `RESERVED_HEADERS`).
        request = request.header(reqwest::header::ACCEPT_ENCODING, "identity");
    }
    if let Some(validators) = cached {
        let (etag, last_modified) = validators.to_send();
        if let Some(etag) = etag {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        if let Some(lm) = last_modified {
            request = request.header(reqwest::header::IF_MODIFIED_SINCE, lm);
        }
    }
    let mut response = match request.send().await {
        Ok(r) => r,
        Err(e) => {
            // A request that cannot be built or is redirected in circles
            // fails the same way every time.
            let transient = !(e.is_builder() || e.is_redirect());
            let reason = format!("request failed: {}{}", timed_out(&e, source), error_chain(e));
            return Err(if transient {
                Failure::transient(reason)
            } else {
                Failure::permanent(reason)
            });
        }
    };
    let status = response.status();
    if status == reqwest::StatusCode::NOT_MODIFIED && cached.is_some() {
        return Ok(Fetched::NotModified);
    }
    if status.is_redirection()
        && !source.headers.is_empty()
        && let Some(target) = redirect_target(&response)
    {
        return Err(Failure::permanent(format!(
            "redirected to another host ({target}); a source with headers is not followed there"
        )));
    }
    if !status.is_success() {
        use reqwest::StatusCode as S;
        let transient = matches!(
            status,
            S::REQUEST_TIMEOUT
                | S::TOO_MANY_REQUESTS
                | S::INTERNAL_SERVER_ERROR
                | S::BAD_GATEWAY
                | S::SERVICE_UNAVAILABLE
                | S::GATEWAY_TIMEOUT
        );
        let retry_after = matches!(status, S::TOO_MANY_REQUESTS | S::SERVICE_UNAVAILABLE)
            .then(|| response.headers().get(reqwest::header::RETRY_AFTER))
            .flatten()
            .and_then(|v| v.to_str().ok())
            .and_then(|v| parse_retry_after(v, std::time::SystemTime::now()));
        return Err(Failure {
            reason: format!("HTTP {status}"),
            transient,
            retry_after,
            ask_uncompressed: false,
        });
    }
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    // Kept as received; whether they are sent back is decided when they
    // are (`Validators::to_send`), so that metadata stored before that
    // rule is held to it too.
    let validators = Validators {
        etag: header(reqwest::header::ETAG),
        last_modified: header(reqwest::header::LAST_MODIFIED),
        date: header(reqwest::header::DATE),
    };
    // A `Content-Type: text/html` alone decides nothing: some servers label
    // every text file so (PHP's default); with it, content that starts with
    // markup is refused (`check_content`).
    let labelled_html =
        header(reqwest::header::CONTENT_TYPE).is_some_and(|t| t.to_ascii_lowercase().contains("text/html"));
    // A length the server declares over the limit fails before any of the
    // body is read; one that is not declared is counted as it arrives.
    if let Some(length) = response.content_length()
        && length > source.max_bytes
    {
        return Err(Failure::permanent(format!(
            "response of {length} bytes exceeds max_bytes = {}",
            source.max_bytes
        )));
    }
    let end_marked = end_marked(&response);
    let mut spool = Spool::default();
    if let Err(failure) = receive(&mut response, source, labelled_html, &mut spool).await {
        spool.discard().await;
        return Err(failure);
    }
    let encoding = ContentEncoding::sniff(&spool.head);
    // A body whose end only the connection's close marks, cut off, looks
    // whole: its last line, cut anywhere, would be read as an entry (a URL
    // cut after its host lists the whole host). Content that ends a line,
    // is empty, is compressed (each stream's end is marked, and checked as
    // the build decodes it) or an archive (its file's size is in its
    // header, a zip's directory at its end) is whole; a JSON document cut
    // short does not parse.
    let mid_line = spool.last.is_some_and(|b| b != b'\n' && b != b'\r');
    let self_delimited = encoding != ContentEncoding::Identity || is_archive(&spool.head);
    if !end_marked && mid_line && !self_delimited && source.format != SourceFormat::Json {
        spool.discard().await;
        return Err(Failure {
            reason: "body ended mid-line with no Content-Length or chunked framing: may be cut off"
                .to_owned(),
            transient: true,
            retry_after: None,
            ask_uncompressed: !uncompressed,
        });
    }
    let size = spool.size;
    match spool.finish().await {
        Ok(reader) => Ok(Fetched::Stream(Stream {
            reader,
            encoding,
            size,
            validators,
        })),
        Err(e) => Err(Failure::permanent(format!("spooling the response: {e}"))),
    }
}

/// The builder of the clients that fetch `url` sources, following
/// redirects by `redirects`.
pub fn client_builder(redirects: reqwest::redirect::Policy) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        .user_agent(concat!("blocksieve-publisher/", env!("CARGO_PKG_VERSION")))
        .connect_timeout(CONNECT_TIMEOUT)
        .redirect(redirects)
        // reqwest's default sends a redirect's target the URL it came
        // from: a feed's key in its path or query (PhishTank's
        // `/data/<key>/…`, `?auth-key=`) would go to a CDN or mirror.
        .referer(false)
}

/// The redirect policy of the client that fetches sources with
/// `headers`: a redirect is followed (up to 10, as by default) only to
/// the same scheme, host and port as the source's URL. reqwest forwards a
/// request's headers to another host, dropping only `Authorization`,
/// `Cookie` and the like: an `Auth-Key` would reach whatever host a feed,
/// or whoever took it over, redirects to. The redirect not followed is
/// the response, which [`attempt`] refuses naming the host.
pub fn same_origin_redirects() -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(|attempt| {
        let same = (attempt.previous().first()).is_some_and(|first| first.origin() == attempt.url().origin());
        if same {
            reqwest::redirect::Policy::default().redirect(attempt)
        } else {
            attempt.stop()
        }
    })
}

/// Where a redirect response points, as its reason shows it: the host,
/// and the port when the URL names one (never userinfo, path or query).
fn redirect_target(response: &reqwest::Response) -> Option<String> {
    let location = response.headers().get(reqwest::header::LOCATION)?.to_str().ok()?;
    let target = response.url().join(location).ok()?;
    let host = target.host_str()?;
    Some(match target.port() {
        Some(port) => format!("{host}:{port}"),
        None => host.to_owned(),
    })
}

/// Whether `response`'s framing marks where its body ends, so that a body
/// cut off fails as it arrives (hyper's "end of file before message
/// length reached"): a `Content-Length`, chunked as its final transfer
/// coding, or HTTP/2 and later (frames). Otherwise (HTTP/1.x, RFC 9112
/// §6.3) the body ends where the server closes the connection, and a
/// connection lost looks the same. A gzip-encoded response that reqwest
/// decodes has lost its `Content-Length` here (see
/// [`Failure::ask_uncompressed`]).
fn end_marked(response: &reqwest::Response) -> bool {
    use reqwest::Version;
    if !matches!(
        response.version(),
        Version::HTTP_09 | Version::HTTP_10 | Version::HTTP_11
    ) {
        return true;
    }
    let headers = response.headers();
    let last_coding = (headers.get_all(reqwest::header::TRANSFER_ENCODING).iter())
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(str::trim)
        .rfind(|c| !c.is_empty());
    headers.contains_key(reqwest::header::CONTENT_LENGTH)
        || last_coding.is_some_and(|c| c.eq_ignore_ascii_case("chunked"))
}

/// How long the clients that fetch `url` sources wait for a connection
/// (TCP and TLS) to a feed, whatever the source's `timeout_s`.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// `timed out after N s (timeout_s): ` when `e` is the source's timeout,
/// which reqwest reports only as "operation timed out"; `could not
/// connect within 15 s: ` when it is the client's [`CONNECT_TIMEOUT`] (a
/// host that drops the connection's packets, or never completes its TLS
/// handshake), which a longer `timeout_s` does not lengthen.
fn timed_out(e: &reqwest::Error, source: &SourceConfig) -> String {
    if e.is_timeout() && e.is_connect() {
        format!("could not connect within {} s: ", CONNECT_TIMEOUT.as_secs())
    } else if e.is_timeout() {
        format!("timed out after {} s (timeout_s): ", source.timeout().as_secs())
    } else {
        String::new()
    }
}

/// Whether a `Last-Modified` value may be sent back as `If-Modified-Since`
/// ([`Validators::to_send`]):
/// the response's `Date` is at least a second past it (RFC 9110 §8.8.2.2).
/// HTTP dates count whole seconds, and servers compare `If-Modified-Since`
/// with the file's time at that resolution: content changed again later in
/// the second `Last-Modified` names (a feed written in steps, or twice,
/// while it was fetched) would be answered `304 Not Modified` to it, and
/// the copy taken mid-change would stand for the feed until it changed
/// again. Without a `Date` to tell, it is not sent either (the next fetch
/// is unconditional).
fn settled_before(last_modified: &str, date: Option<&str>) -> bool {
    let parse = |v: &str| httpdate::parse_http_date(v.trim()).ok();
    match (parse(last_modified), date.and_then(parse)) {
        (Some(modified), Some(date)) => date
            .duration_since(modified)
            .is_ok_and(|d| d >= Duration::from_secs(1)),
        _ => false,
    }
}

/// A `Retry-After` value (RFC 9110 §10.2.3): delay-seconds or an
/// HTTP-date, relative to `now` (a date past is no wait). `None` when it
/// is neither.
fn parse_retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit()) {
        // More seconds than a u64 holds is "very long": over any cap.
        return Some(Duration::from_secs(value.parse::<u64>().unwrap_or(u64::MAX)));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Receives `response`'s body into `spool`, checking its size against
/// `max_bytes` as it arrives and its start as soon as more than 64 KiB
/// arrived (an HTML page or a bad gzip stream fails without the rest of
/// its body; a body of exactly 64 KiB is checked whole, at its end). A
/// body cut off (the connection lost, the timeout) may be had whole on
/// another attempt; the rest are the content's own faults.
async fn receive(
    response: &mut reqwest::Response,
    source: &SourceConfig,
    labelled_html: bool,
    spool: &mut Spool,
) -> Result<(), Failure> {
    let mut checked = false;
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if spool.size + chunk.len() as u64 > source.max_bytes {
                    return Err(Failure::permanent(format!(
                        "response exceeds max_bytes = {}",
                        source.max_bytes
                    )));
                }
                spool
                    .write(&chunk)
                    .await
                    .map_err(|e| Failure::permanent(format!("spooling the response: {e}")))?;
                if !checked && spool.size > HEAD_BYTES as u64 {
                    checked = true;
                    check_content(spool.size, &spool.head, false, labelled_html, source)
                        .map_err(Failure::permanent)?;
                }
            }
            Ok(None) => break,
            Err(e) => {
                return Err(Failure::transient(format!(
                    "reading body failed: {}{}",
                    timed_out(&e, source),
                    error_chain(e)
                )));
            }
        }
    }
    if !checked {
        check_content(spool.size, &spool.head, true, labelled_html, source).map_err(Failure::permanent)?;
    }
    Ok(())
}

/// Bytes of a response body held in memory before it is spooled to a
/// temporary file; also how much is written to the file at a time.
const SPOOL_IN_MEMORY: usize = 8 * 1024 * 1024;

/// A response body as it arrives, for the build to read once it is whole:
/// in memory up to [`SPOOL_IN_MEMORY`] bytes (most feeds), beyond that in
/// an unnamed temporary file in the system's temporary directory
/// (`TMPDIR`), removed when the build has read it. The file is written on
/// the blocking pool, 8 MiB at a time, never on the runtime's threads.
///
/// The body is spooled whole before the build reads it, not read by the
/// build as it arrives: a source waits for the list's sources before it
/// to be parsed, and its connection, idle meanwhile, would count that
/// time against its timeout or be closed by the server.
#[derive(Default)]
struct Spool {
    /// Bytes not yet written to the file (all of them while there is none).
    memory: Vec<u8>,
    file: Option<std::fs::File>,
    /// Bytes received.
    size: u64,
    /// The first [`HEAD_BYTES`] received, for [`check_content`].
    head: Vec<u8>,
    /// The last byte received, if any: whether the body ends a line.
    last: Option<u8>,
}

impl Spool {
    async fn write(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        let room = HEAD_BYTES.saturating_sub(self.head.len());
        self.head.extend_from_slice(&bytes[..bytes.len().min(room)]);
        if let Some(&last) = bytes.last() {
            self.last = Some(last);
        }
        self.memory.extend_from_slice(bytes);
        self.size += bytes.len() as u64;
        if self.memory.len() >= SPOOL_IN_MEMORY {
            self.spill().await?;
        }
        Ok(())
    }

    /// Writes the bytes in memory to the file, created if need be.
    async fn spill(&mut self) -> std::io::Result<()> {
        use std::io::Write as _;
        let mut memory = std::mem::take(&mut self.memory);
        let file = self.file.take();
        let (file, mut memory) = tokio::task::spawn_blocking(move || {
            let mut file = match file {
                Some(file) => file,
                None => tempfile::tempfile()?,
            };
            file.write_all(&memory)?;
            memory.clear();
            Ok::<_, std::io::Error>((file, memory))
        })
        .await
        .map_err(std::io::Error::other)??;
        self.file = Some(file);
        // The same buffer again: no new pages for the next 8 MiB.
        std::mem::swap(&mut self.memory, &mut memory);
        Ok(())
    }

    /// Drops what was spooled of a body that failed: its file closed on
    /// the blocking pool (closing a large file can take tens of
    /// milliseconds).
    async fn discard(mut self) {
        if let Some(file) = self.file.take() {
            let _ = tokio::task::spawn_blocking(move || drop(file)).await;
        }
    }

    /// The whole body, from its start.
    async fn finish(mut self) -> std::io::Result<Box<dyn std::io::Read + Send>> {
        use std::io::Seek as _;
        if self.file.is_none() {
            return Ok(Box::new(std::io::Cursor::new(self.memory)));
        }
        self.spill().await?;
        // Its memory returned to the system, moving no allocator threshold.
        crate::build::memory::release(std::mem::take(&mut self.memory));
        let mut file = self
            .file
            .take()
            .ok_or_else(|| std::io::Error::other("spool file lost"))?;
        let file = tokio::task::spawn_blocking(move || file.rewind().map(|()| file))
            .await
            .map_err(std::io::Error::other)??;
        Ok(Box::new(file))
    }
}

/// A request error and its causes ("error sending request: client error
/// (Connect): tcp connect error: Connection refused"), without the URL:
/// the reason is shown with the source's public label
/// ([`SourceConfig::public_label`](crate::config::SourceConfig::public_label)),
/// and the URL may hold credentials.
fn error_chain(e: reqwest::Error) -> String {
    let e = e.without_url();
    let mut out = e.to_string();
    let mut cause = std::error::Error::source(&e);
    while let Some(c) = cause {
        out.push_str(": ");
        out.push_str(&c.to_string());
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use std::io::Read as _;

    use std::time::{Duration, SystemTime};

    use std::sync::{Arc, Mutex};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::{
        Fetched, HEAD_BYTES, SPOOL_IN_MEMORY, Spool, Stream, Validators, check_content, open_file,
        parse_retry_after, settled_before,
    };
    use crate::config::{SourceConfig, SourceFormat};

    /// What a conditional GET sends back: both validators once
    /// `Last-Modified` is settled; neither while it is not, nor for
    /// metadata stored before the response's `Date` was kept (a source a
    /// `304` held on a copy taken mid-change is fetched whole once).
    #[test]
    fn validators_are_sent_back_only_with_a_settled_last_modified() {
        let with = |etag: Option<&str>, modified: Option<&str>, date: Option<&str>| Validators {
            etag: etag.map(str::to_owned),
            last_modified: modified.map(str::to_owned),
            date: date.map(str::to_owned),
        };
        let modified = "Sun, 06 Nov 1994 08:49:37 GMT";
        let later = "Sun, 06 Nov 1994 09:19:37 GMT";
        let nginx = "\"2ecf8a11-12c\"";
        assert_eq!(
            with(Some(nginx), Some(modified), Some(later)).to_send(),
            (Some(nginx), Some(modified))
        );
        assert_eq!(
            with(Some(nginx), Some(modified), Some(modified)).to_send(),
            (None, None),
            "an ETag beside an unsettled Last-Modified is not sent either"
        );
        assert_eq!(
            with(Some(nginx), Some(modified), None).to_send(),
            (None, None),
            "stored before the Date was kept"
        );
        assert_eq!(with(Some(nginx), None, None).to_send(), (Some(nginx), None));
        assert_eq!(with(None, None, None).to_send(), (None, None));
    }

    #[test]
    fn a_last_modified_is_sent_back_only_once_its_date_is_a_second_past_it() {
        let modified = "Sun, 06 Nov 1994 08:49:37 GMT";
        assert!(!settled_before(modified, Some(modified)), "the same second");
        assert!(settled_before(modified, Some("Sun, 06 Nov 1994 08:49:38 GMT")));
        assert!(settled_before(modified, Some("Mon, 07 Nov 1994 08:00:00 GMT")));
        assert!(
            !settled_before(modified, Some("Sun, 06 Nov 1994 08:49:36 GMT")),
            "a Date before it"
        );
        assert!(!settled_before(modified, None), "no Date to tell");
        assert!(!settled_before(modified, Some("soon")));
        assert!(!settled_before(
            "yesterday",
            Some("Mon, 07 Nov 1994 08:00:00 GMT")
        ));
    }

    #[test]
    fn retry_after_is_seconds_or_an_http_date_and_nothing_else() {
        // Sun, 06 Nov 1994 08:49:37 GMT (RFC 9110's example date).
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        let secs = |s| Some(Duration::from_secs(s));
        assert_eq!(parse_retry_after("0", now), secs(0));
        assert_eq!(parse_retry_after(" 120 ", now), secs(120));
        assert_eq!(parse_retry_after("99999999999999999999999", now), secs(u64::MAX));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:50:07 GMT", now), secs(30));
        assert_eq!(parse_retry_after("Sun, 06 Nov 1994 08:00:00 GMT", now), secs(0));
        for bad in ["", "-1", "1.5", "soon", "Sun, 06 Nov 1994"] {
            assert_eq!(parse_retry_after(bad, now), None, "{bad:?}");
        }
    }

    /// Reads a spooled body back whole.
    async fn spooled(pieces: &[Vec<u8>]) -> (Vec<u8>, bool, Vec<u8>) {
        let mut spool = Spool::default();
        for piece in pieces {
            spool.write(piece).await.unwrap();
        }
        let on_file = spool.file.is_some();
        let head = spool.head.clone();
        let mut out = Vec::new();
        spool.finish().await.unwrap().read_to_end(&mut out).unwrap();
        (out, on_file, head)
    }

    /// A named pipe `feed.fifo` made in `dir`.
    #[cfg(target_os = "linux")]
    fn fifo_in(dir: &std::path::Path) -> std::path::PathBuf {
        let fifo = dir.join("feed.fifo");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
        assert!(made.success());
        fifo
    }

    /// A `path` source that is a named pipe (which the build reads, never
    /// seeking) with nothing writing to it held its build forever: opening
    /// it waited for a writer, with no timeout (a file has none), the
    /// list's build lock held, and its list never built again, without an
    /// error anywhere. It fails, keeping its last good content.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn regression_a_named_pipe_with_no_writer_fails_instead_of_hanging() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = fifo_in(dir.path());
        let mut source = SourceConfig::file(&fifo, SourceFormat::Urls);
        // How long it waits for a writer.
        source.timeout_s = Some(1);
        let fetched =
            tokio::time::timeout(Duration::from_secs(10), super::fetch(None, "l", &source, None)).await;
        let Ok(fetched) = fetched else {
            // A writer lets the blocked open return, and the test end.
            let _writer = std::fs::OpenOptions::new().write(true).open(&fifo);
            panic!("the fetch of a named pipe with no writer had not ended after 10 s");
        };
        match fetched {
            (Fetched::Failed(reason), 0) => assert!(reason.contains("named pipe"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    /// A named pipe with a writer is read to its end, as documented:
    /// one waiting in its `open` for a reader (as `producer > feed.fifo &`
    /// does), and one that opens it after the build did (within the
    /// source's `timeout_s`: the build waited in `open` for it).
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_named_pipe_with_a_writer_is_read_whole() {
        for writer_first in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let fifo = fifo_in(dir.path());
            let lines: String = (0..5000).map(|i| format!("http://e{i}.example/p\n")).collect();
            let writer = {
                let (fifo, lines) = (fifo.clone(), lines.clone());
                std::thread::spawn(move || {
                    if !writer_first {
                        std::thread::sleep(Duration::from_millis(500));
                    }
                    std::fs::write(fifo, lines)
                })
            };
            if writer_first {
                // The writer waits in its open until the fetch opens the pipe.
                tokio::time::sleep(Duration::from_millis(300)).await;
            }
            let source = SourceConfig::file(&fifo, SourceFormat::Urls);
            let (fetched, _) =
                tokio::time::timeout(Duration::from_secs(10), super::fetch(None, "l", &source, None))
                    .await
                    .unwrap();
            let Fetched::Stream(mut stream) = fetched else {
                panic!("writer first {writer_first}: {fetched:?}");
            };
            let mut read = Vec::new();
            std::io::Read::read_to_end(&mut stream.reader, &mut read).unwrap();
            writer.join().unwrap().unwrap();
            assert_eq!(read, lines.as_bytes(), "writer first {writer_first}");
        }
    }

    /// A named pipe whose writer sent part of a list and then stalled,
    /// holding the pipe open, held its build (and its list's build lock)
    /// forever: the read waited in the kernel with no timeout. The read
    /// now fails after the source's wait without a byte, and the build
    /// takes it as a failed fetch (the last good content is used); a writer
    /// slower than that between bytes but never that silent is read whole.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn regression_a_named_pipe_whose_writer_stalls_fails_its_read() {
        for stalls in [true, false] {
            let dir = tempfile::tempdir().unwrap();
            let fifo = fifo_in(dir.path());
            // Past the 64 KiB the fetch reads first.
            let first: String = (0..10_000).map(|i| format!("http://e{i}.example/p\n")).collect();
            let (release, released) = std::sync::mpsc::channel::<()>();
            let writer = {
                let (fifo, first) = (fifo.clone(), first.clone());
                std::thread::spawn(move || {
                    let mut pipe = std::fs::OpenOptions::new().write(true).open(fifo).unwrap();
                    std::io::Write::write_all(&mut pipe, first.as_bytes()).unwrap();
                    if stalls {
                        // Open and silent until the test is done.
                        let _ = released.recv_timeout(Duration::from_secs(30));
                    } else {
                        for _ in 0..4 {
                            std::thread::sleep(Duration::from_millis(300));
                            std::io::Write::write_all(&mut pipe, b"http://late.example/\n").unwrap();
                        }
                    }
                })
            };
            let mut source = SourceConfig::file(&fifo, SourceFormat::Urls);
            source.timeout_s = Some(1);
            let (fetched, _) =
                tokio::time::timeout(Duration::from_secs(10), super::fetch(None, "l", &source, None))
                    .await
                    .unwrap();
            let Fetched::Stream(mut stream) = fetched else {
                panic!("stalls {stalls}: {fetched:?}");
            };
            let started = std::time::Instant::now();
            let read = tokio::task::spawn_blocking(move || {
                let mut read = Vec::new();
                std::io::Read::read_to_end(&mut stream.reader, &mut read).map(|_| read)
            });
            let read = tokio::time::timeout(Duration::from_secs(10), read).await;
            drop(release);
            let read = read
                .expect("the read of a stalled pipe had not ended after 10 s")
                .unwrap();
            writer.join().unwrap();
            if stalls {
                let error = read.unwrap_err();
                assert_eq!(error.kind(), std::io::ErrorKind::TimedOut);
                assert!(error.to_string().contains("named pipe stalled"), "{error}");
                assert!(started.elapsed() >= Duration::from_millis(900));
            } else {
                let read = read.unwrap();
                assert_eq!(read.len(), first.len() + 4 * 21);
            }
        }
    }

    #[tokio::test]
    async fn a_body_is_spooled_in_memory_then_to_a_file_and_read_back_whole() {
        // Bytes that differ at every offset mod 251, in pieces of odd sizes
        // that straddle the 8 MiB boundary.
        let body: Vec<u8> = (0..SPOOL_IN_MEMORY * 2 + 12_345)
            .map(|i| (i % 251) as u8)
            .collect();
        for piece in [1, 16_384, 1_000_003, SPOOL_IN_MEMORY, SPOOL_IN_MEMORY + 1] {
            let pieces: Vec<Vec<u8>> = body.chunks(piece).map(<[u8]>::to_vec).collect();
            let (out, on_file, head) = spooled(&pieces[..pieces.len().min(4096)]).await;
            let sent = pieces.iter().take(4096).map(Vec::len).sum::<usize>();
            assert_eq!(out.len(), sent, "piece {piece}");
            assert!(out == body[..sent], "piece {piece}");
            assert_eq!(on_file, sent >= SPOOL_IN_MEMORY, "piece {piece}");
            assert_eq!(head, body[..HEAD_BYTES.min(sent)], "piece {piece}");
        }
        let (out, on_file, head) = spooled(&[]).await;
        assert!(out.is_empty() && !on_file && head.is_empty());
        // A body that failed past 8 MiB: its file is dropped off the
        // runtime's threads.
        let mut spool = Spool::default();
        spool.write(&body[..SPOOL_IN_MEMORY + 1]).await.unwrap();
        assert!(spool.file.is_some());
        spool.discard().await;
    }

    /// `https://drive.google.com/file/d/1AbC{i}xyz/view?usp=sharing`, for
    /// `i` in `0..n`, each on its line; and where line `cut_line` (from 0)
    /// is cut right after its host, `https://drive.google.com`.
    fn drive_lines(n: usize, cut_line: usize) -> (Vec<u8>, usize) {
        let text: String = (0..n)
            .map(|i| format!("https://drive.google.com/file/d/1AbC{i}xyz/view?usp=sharing\n"))
            .collect();
        let line = format!("https://drive.google.com/file/d/1AbC{cut_line}xyz/");
        let cut = text.find(&line).unwrap() + "https://drive.google.com".len();
        (text.into_bytes(), cut)
    }

    /// A server on 127.0.0.1:0 that answers each connection with what
    /// `answer` makes of its request head (lowercase), then closes it: the
    /// URL of its feed, and the request heads it saw.
    async fn raw_server(
        answer: impl Fn(&str) -> Vec<u8> + Send + 'static,
    ) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/feed.txt", listener.local_addr().unwrap());
        let heads = Arc::new(Mutex::new(Vec::new()));
        let seen = Arc::clone(&heads);
        tokio::spawn(async move {
            while let Ok((mut stream, _)) = listener.accept().await {
                let mut head = Vec::new();
                let mut buf = [0u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
                let response = answer(&head);
                seen.lock().unwrap().push(head);
                let _ = stream.write_all(&response).await;
                let _ = stream.shutdown().await;
            }
        });
        (url, heads)
    }

    fn response(head: &str, body: &[u8]) -> Vec<u8> {
        [head.as_bytes(), b"\r\n", body].concat()
    }

    /// A `200` whose end is only the connection closing: no
    /// `Content-Length`, not chunked.
    const UNFRAMED: &str = "HTTP/1.1 200 OK\r\nConnection: close\r\n";

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        use std::io::Write as _;
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    async fn fetched(url: &str, format: SourceFormat, retries: u32) -> (Fetched, u32) {
        let mut source = SourceConfig::http(url, format);
        source.retries = Some(retries);
        super::fetch(Some(&reqwest::Client::new()), "test", &source, None).await
    }

    fn content(stream: Stream) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        let mut reader = stream.reader;
        reader.read_to_end(&mut out).map(|_| out)
    }

    /// The reviewer's feed: 200 Google Drive URLs, the connection lost
    /// right after `https://drive.google.com` on line 101, sent with
    /// neither `Content-Length` nor chunked framing, so that the close
    /// looked like the end. The body was taken whole, and its last line
    /// listed all of Google Drive (`drive.google.com/`). Now it is a
    /// failure that may pass: tried again (each attempt asking once more
    /// at once for the content uncompressed, whose framing reqwest does
    /// not hide), then the source's last good content is used.
    #[tokio::test]
    async fn regression_a_body_without_framing_that_ends_mid_line_is_tried_again_then_fails() {
        let (lines, cut) = drive_lines(200, 100);
        let cut = response(UNFRAMED, &lines[..cut]);
        let (url, heads) = raw_server(move |_| cut.clone()).await;
        let (fetched, retried) = fetched(&url, SourceFormat::Urls, 1).await;
        let Fetched::Failed(reason) = fetched else {
            panic!("taken as whole: {fetched:?}")
        };
        assert_eq!(
            reason,
            "body ended mid-line with no Content-Length or chunked framing: may be cut off (2 attempts)"
        );
        assert_eq!(retried, 1);
        let heads = heads.lock().unwrap();
        let plain: Vec<bool> = heads
            .iter()
            .map(|h| h.contains("accept-encoding: identity\r\n"))
            .collect();
        assert_eq!(plain, [false, true, false, true], "{heads:#?}");
    }

    /// A body whose end its framing marks (`Content-Length`, chunked), or
    /// that ends a line, is empty, is a gzip file (its own trailer marks
    /// its end) or a JSON document (which does not parse when cut), is
    /// taken as before, in one request. A gzip-encoded response reqwest
    /// decodes loses its `Content-Length` on the way: asked again for the
    /// content uncompressed, its framing shows.
    #[tokio::test]
    async fn a_body_whose_end_is_marked_or_that_ends_a_line_is_taken() {
        let mid_line = b"https://a.example/1\nhttps://drive.google.com".to_vec();
        let json = br#"{"blacklist": ["a.example"], "whitelist": []}"#.to_vec();
        let chunked = {
            let (one, two) = mid_line.split_at(10);
            let chunk = |c: &[u8]| [format!("{:x}\r\n", c.len()).as_bytes(), c, b"\r\n"].concat();
            [chunk(one), chunk(two), b"0\r\n\r\n".to_vec()].concat()
        };
        let length = |body: &[u8]| {
            format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            )
        };
        let bzip2 = |bytes: &[u8]| super::decode::shipped::compressed(super::ContentEncoding::Bzip2, bytes);
        let tar = |bytes: &[u8]| super::decode::shipped::tar_of(&[("feed.txt", bytes)]);
        let line_ended = [mid_line.as_slice(), b"\n"].concat();
        let cr_ended = [mid_line.as_slice(), b"\r"].concat();
        let cases = [
            (
                "content-length",
                response(&length(&mid_line), &mid_line),
                mid_line.clone(),
                SourceFormat::Urls,
            ),
            (
                "chunked",
                response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n", &chunked),
                mid_line.clone(),
                SourceFormat::Urls,
            ),
            (
                "line feed",
                response(UNFRAMED, &line_ended),
                line_ended.clone(),
                SourceFormat::Urls,
            ),
            (
                "carriage return",
                response(UNFRAMED, &cr_ended),
                cr_ended.clone(),
                SourceFormat::Urls,
            ),
            ("empty", response(UNFRAMED, b""), Vec::new(), SourceFormat::Urls),
            (
                "gzip file",
                response(UNFRAMED, &gzip(&mid_line)),
                gzip(&mid_line),
                SourceFormat::Urls,
            ),
            (
                "bzip2 file",
                response(UNFRAMED, &bzip2(&mid_line)),
                bzip2(&mid_line),
                SourceFormat::Urls,
            ),
            (
                "tar archive (ends in zeros)",
                response(UNFRAMED, &tar(&mid_line)),
                tar(&mid_line),
                SourceFormat::Urls,
            ),
            (
                "http/1.0 with a length",
                response(&length(&mid_line).replace("HTTP/1.1", "HTTP/1.0"), &mid_line),
                mid_line.clone(),
                SourceFormat::Urls,
            ),
            (
                "json",
                response(UNFRAMED, &json),
                json.clone(),
                SourceFormat::Json,
            ),
        ];
        for (name, answer, body, format) in cases {
            let (url, heads) = raw_server(move |_| answer.clone()).await;
            let (fetched, _) = fetched(&url, format, 0).await;
            let Fetched::Stream(stream) = fetched else {
                panic!("{name}: {fetched:?}")
            };
            assert_eq!(content(stream).unwrap(), body, "{name}");
            assert_eq!(heads.lock().unwrap().len(), 1, "{name}");
        }

        let encoded = gzip(&mid_line);
        let plain = response(&length(&mid_line), &mid_line);
        let (url, heads) = raw_server(move |head| {
            if head.contains("accept-encoding: identity\r\n") {
                plain.clone()
            } else {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n",
                    encoded.len()
                );
                response(&head, &encoded)
            }
        })
        .await;
        let (fetched, retried) = fetched(&url, SourceFormat::Urls, 0).await;
        let Fetched::Stream(stream) = fetched else {
            panic!("gzip-encoded: {fetched:?}")
        };
        assert_eq!((content(stream).unwrap(), retried), (mid_line, 0));
        let heads = heads.lock().unwrap();
        assert!(heads[0].contains("accept-encoding: gzip"), "{heads:#?}");
        assert_eq!(heads.len(), 2, "{heads:#?}");
    }

    /// A feed stored gzip-encoded on an object store (S3 serves an object
    /// uploaded with `Content-Encoding: gzip` so whatever the request's
    /// `Accept-Encoding`), with a `Content-Length`, whose last line has no
    /// line end: reqwest decoded it and dropped its `Content-Length`, and
    /// the retry asking for it uncompressed got the same answer, decoded
    /// again. Every attempt failed as `body ended mid-line with no
    /// Content-Length or chunked framing`, untrue, and the source never
    /// took fresh content. Now the retry decodes no content coding: the
    /// body comes as sent, gzip content whose `Content-Length` is seen.
    #[tokio::test]
    async fn regression_a_gzip_encoded_body_with_a_length_is_taken_when_identity_is_not_honoured() {
        let mid_line = b"https://a.example/1\nhttps://drive.google.com/file/d/1AbCxyz/view".to_vec();
        let encoded = gzip(&mid_line);
        let answer = {
            let encoded = encoded.clone();
            move |_: &str| {
                let head = format!(
                    "HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: {}\r\n",
                    encoded.len()
                );
                response(&head, &encoded)
            }
        };
        let (url, heads) = raw_server(answer).await;
        let (fetched, retried) = fetched(&url, SourceFormat::Urls, 0).await;
        let Fetched::Stream(stream) = fetched else {
            panic!("not taken: {fetched:?}")
        };
        assert_eq!(stream.encoding, super::ContentEncoding::Gzip);
        assert_eq!((content(stream).unwrap(), retried), (encoded, 0));
        let heads = heads.lock().unwrap();
        assert_eq!(heads.len(), 2, "{heads:#?}");
        assert!(heads[1].contains("accept-encoding: identity\r\n"), "{heads:#?}");
    }

    /// A feed URL holding its key (PhishTank's `/data/<key>/online-valid.csv`,
    /// a `?auth-key=`) redirected to another host, a CDN: reqwest sent that
    /// host a `Referer` with the whole URL, key included. The publisher's
    /// clients send none.
    #[tokio::test]
    async fn regression_a_redirect_sends_no_referer_holding_the_feed_url() {
        let body = b"http://a.example/1\n";
        let (target, target_heads) = raw_server(move |_| {
            response(
                &format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n", body.len()),
                body,
            )
        })
        .await;
        let (first, _) = raw_server(move |_| {
            response(
                &format!("HTTP/1.1 302 Found\r\nLocation: {target}\r\nContent-Length: 0\r\n"),
                b"",
            )
        })
        .await;
        let client = super::client_builder(reqwest::redirect::Policy::default())
            .build()
            .unwrap();
        let mut source = SourceConfig::http(format!("{first}?auth-key=SECRET"), SourceFormat::Urls);
        source.retries = Some(0);
        let (fetched, _) = super::fetch(Some(&client), "test", &source, None).await;
        let Fetched::Stream(stream) = fetched else {
            panic!("not taken: {fetched:?}")
        };
        assert_eq!(content(stream).unwrap(), body);
        let heads = target_heads.lock().unwrap();
        assert_eq!(heads.len(), 1, "{heads:#?}");
        assert!(!heads[0].contains("referer:"), "{}", heads[0]);
    }

    /// A feed whose host accepts the connection and never completes its
    /// TLS handshake (or drops the packets: a firewall) fails when the
    /// client's 15-s connect timeout fires; that failure said `timed out
    /// after 60 s (timeout_s)`, untrue (it came after 15 s, and a longer
    /// `timeout_s` changes nothing). Now it names the connect timeout.
    #[tokio::test]
    async fn regression_a_connect_timeout_is_not_reported_as_the_sources_timeout() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("https://{}/feed.txt", listener.local_addr().unwrap());
        // Accepted, held open, never answered.
        tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((stream, _)) = listener.accept().await {
                held.push(stream);
            }
        });
        let client = reqwest::Client::builder()
            .connect_timeout(super::CONNECT_TIMEOUT)
            .build()
            .unwrap();
        let mut source = SourceConfig::http(&url, SourceFormat::Urls);
        source.retries = Some(0);
        let started = std::time::Instant::now();
        let (fetched, _) = super::fetch(Some(&client), "test", &source, None).await;
        let Fetched::Failed(reason) = fetched else {
            panic!("{fetched:?}")
        };
        assert!(started.elapsed() < source.timeout(), "{:?}", started.elapsed());
        assert!(
            reason.starts_with("request failed: could not connect within 15 s: "),
            "{reason}"
        );
    }

    /// The checks before a build look inside what maintainers ship: a
    /// small feed in a tar archive (GNU tar pads it to 10 KiB of zeros)
    /// was refused as `content holds NUL bytes`, and an HTML page inside
    /// any compression or archive is still an HTML page. Formats the build
    /// does not read are refused naming them.
    #[test]
    fn the_checks_before_a_build_read_inside_compression_and_archives() {
        use super::ContentEncoding;
        use super::decode::shipped::{ENCODINGS, compressed, tar_of, zip_of};
        let source = SourceConfig::file("feed", SourceFormat::Urls);
        let check = |bytes: &[u8]| check_content(bytes.len() as u64, bytes, true, false, &source);
        let small = b"https://a.example/1\n".as_slice();
        let html = b"<!DOCTYPE html><html><body>Sign in</body></html>".as_slice();
        let padded = |tar: Vec<u8>| [tar.as_slice(), &[0; 10240]].concat();
        for encoding in ENCODINGS {
            let name = encoding.name();
            check(&compressed(encoding, small)).unwrap();
            check(&compressed(encoding, &padded(tar_of(&[("feed.txt", small)])))).unwrap();
            let error = check(&compressed(
                encoding,
                &padded(tar_of(&[("d/", b"".as_slice()), ("f.txt", html)])),
            ))
            .unwrap_err();
            assert_eq!(error, "response is an HTML page, not a list", "{name}");
            let error = check(&compressed(encoding, html)).unwrap_err();
            assert_eq!(error, "response is an HTML page, not a list", "{name}");
        }
        check(&zip_of(&[("feed.txt", small)])).unwrap();
        let error = check(&zip_of(&[("f.txt", html)])).unwrap_err();
        assert_eq!(error, "response is an HTML page, not a list");
        let error = check(b"Rar!\x1a\x07\x00junk").unwrap_err();
        assert!(
            error.starts_with("content is a RAR archive, which the build does not read"),
            "{error}"
        );
        // A big bzip2 feed: its head holds no whole block to decode, and
        // is not refused for that (the build decodes the whole).
        let big: Vec<u8> = (0..200_000)
            .flat_map(|i| format!("https://a.example/{i}\n").into_bytes())
            .collect();
        let bz = compressed(ContentEncoding::Bzip2, &big);
        assert!(bz.len() > HEAD_BYTES);
        check_content(bz.len() as u64, &bz[..HEAD_BYTES], false, false, &source).unwrap();
    }

    /// A `path` source rewritten in place while the build reads it (a cron
    /// `curl -o`, or `>`): the build read the start of the old content and
    /// the rest of the new one as far as it had been written, and took
    /// that as the file, its last line cut anywhere (`https://drive.google.com`
    /// listed the host). Now the read fails at its end when the file's size
    /// or modification time is not what it was when opened. A file replaced
    /// by a rename is read whole as it was opened.
    #[test]
    fn regression_a_file_rewritten_while_it_is_read_fails_at_the_end_of_its_read() {
        use std::io::Write as _;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("feed.txt");
        // Past the start read when the file is opened.
        let (full, cut) = drive_lines(2000, 1500);
        assert!(cut > HEAD_BYTES, "{cut}");
        let source = SourceConfig::file(&path, SourceFormat::Urls);
        let changed = |e: std::io::Error| {
            let e = e.to_string();
            assert!(e.starts_with("file changed while it was read: "), "{e}");
        };

        std::fs::write(&path, &full).unwrap();
        let stream = open_file(&path, &source).unwrap();
        assert!(content(stream).unwrap() == full, "unchanged");

        // Truncated and written again as the new content arrives.
        let stream = open_file(&path, &source).unwrap();
        std::fs::write(&path, &full[..cut]).unwrap();
        changed(content(stream).map(|c| c.len()).unwrap_err());

        // Rewritten mid-read, the same size: its time tells.
        std::fs::write(&path, &full).unwrap();
        let mut stream = open_file(&path, &source).unwrap();
        let mut start = vec![0; HEAD_BYTES + 10];
        stream.reader.read_exact(&mut start).unwrap();
        let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all(&full).unwrap();
        file.set_modified(SystemTime::now() + Duration::from_secs(5))
            .unwrap();
        drop(file);
        changed(content(stream).map(|c| c.len()).unwrap_err());

        // Replaced by a rename: the file opened is read as it was.
        let stream = open_file(&path, &source).unwrap();
        let new = dir.path().join("feed.txt.new");
        std::fs::write(&new, &full[..cut]).unwrap();
        std::fs::rename(&new, &path).unwrap();
        assert!(content(stream).unwrap() == full, "renamed over");
    }

    /// `(cat feed.gz; head -c 512 /dev/zero) > feed`: `zcat` reads it
    /// ("trailing zero bytes ignored"); its start, checked whole when the
    /// body is small, was refused (`gzip: invalid gzip header`: the zeros
    /// read as a new member). Bytes other than zeros are still refused.
    #[test]
    fn regression_the_start_of_gzip_content_padded_with_zeros_is_read() {
        let source = SourceConfig::file("feed.gz", SourceFormat::Urls);
        let gz = gzip(b"https://a.example/1\n");
        let check = |bytes: &[u8]| check_content(bytes.len() as u64, bytes, true, false, &source);
        check(&[gz.as_slice(), &[0; 512]].concat()).unwrap();
        check(&[gz.as_slice(), &[0]].concat()).unwrap();
        check(&[gz.as_slice(), &gz, &[0; 7]].concat()).unwrap();
        let error = check(&[gz.as_slice(), b"junk"].concat()).unwrap_err();
        assert!(error.starts_with("gzip: "), "{error}");
        let error = check(&[gz.as_slice(), &[0; 8], b"junk"].concat()).unwrap_err();
        assert!(error.starts_with("gzip: "), "{error}");
    }

    /// A `path` source rewritten in place while the build reads it (a cron
    /// `curl -o`, or `>`, truncating the file and writing the new content as it
    /// arrives): the build read the start it had read when opening the file
    /// and the rest as far as it was written, here right after
    /// `https://drive.google.com` on line 1,501, and listed that host
    /// (all of Google Drive) as fresh content; the list lost a quarter of its
    /// entries, within `max_shrink`. Now the read fails at its end, the file's
    /// size and time no longer those it was opened with, and the source's last
    /// good content is used, as for a failed fetch.
    #[test]
    fn regression_a_path_source_rewritten_while_it_is_read_falls_back_to_its_last_good_content() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("feed.txt");
        let full: String = (0..2000)
            .map(|i| format!("https://drive.google.com/file/d/1AbC{i}xyz/view?usp=sharing\n"))
            .collect();
        let cut = full.find("https://drive.google.com/file/d/1AbC1500xyz/").unwrap()
            + "https://drive.google.com".len();
        std::fs::write(&path, &full).unwrap();
        let config = SourceConfig::file(&path, SourceFormat::Urls);
        let stream = open_file(&path, &config).unwrap();
        std::fs::write(&path, &full[..cut]).unwrap();
        use crate::build::{Cancel, KeepTo, LastGood, LoadedSource, PeakRssProbe, SourceRole, SourceUpdate};
        let meta = crate::storage::CacheMeta {
            validators: Default::default(),
            fetched_at: 0,
            accepted: 2000,
        };
        let source = LoadedSource {
            config,
            role: SourceRole::Block,
            fetched: Fetched::Stream(stream),
            last_good: LastGood::in_memory(full.clone().into_bytes(), meta),
            read_duration: Duration::ZERO,
            keep_to: KeepTo::memory(),
        };
        let mut updates = Vec::new();
        let read = crate::build::read_sources(
            "test",
            vec![source],
            1,
            PeakRssProbe::NONE,
            &mut updates,
            &Cancel::default(),
        )
        .unwrap();
        let error = read.sources[0].error.as_deref().unwrap_or_default();
        assert_eq!(read.sources[0].state, "last_good", "{error}");
        assert!(error.starts_with("file changed while it was read: "), "{error}");
        assert_eq!(read.hashes.len(), 2000);
        assert!(
            !read
                .hashes
                .contains(&blocksieve_format::FullHash::of(b"drive.google.com/"))
        );
        assert!(
            !updates
                .iter()
                .any(|(_, u)| matches!(u, SourceUpdate::Store { .. })),
            "the content read is not kept"
        );
    }
}
