//! Getting a source's bytes: local files (opened and checked, for the
//! build to stream), HTTP(S) feeds with conditional GET (the body as
//! received, gzip or not), size limits and HTML detection; the build
//! decompresses as it reads.
//!
//! A source that fails — unreadable file, network error, 4xx/5xx, an HTML
//! page instead of a list, over its size limit, or (decided in
//! [`crate::build`]) a parse that collapses, most of its lines rejected —
//! keeps its last good content for that build, and the build report says so.
//! That content is kept by [`crate::storage`]; this module does no more than
//! get bytes.

use std::io::Read as _;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::{BUILTIN_LIST, SourceConfig};
use crate::sources::looks_like_html;

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
    /// New content in a local file, opened and checked, read by the build
    /// as it parses (never held whole in memory).
    Stream(Stream),
    /// The server answered 304: the cached content is current.
    NotModified,
    /// The source failed; the reason.
    Failed(String),
}

/// Fresh content the build reads as it parses: a local file.
pub struct Stream {
    /// The content from its start, as stored.
    pub reader: Box<dyn std::io::Read + Send>,
    /// Whether it is gzip.
    pub gzip: bool,
    /// Its size, in bytes.
    pub size: u64,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stream")
            .field("gzip", &self.gzip)
            .field("size", &self.size)
            .finish_non_exhaustive()
    }
}

/// How a source's bytes are encoded: what a fetch received, and how its
/// last good copy is stored (`encoding` in the cache's `.meta.json`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContentEncoding {
    /// Plain text (caches written before copies were kept compressed).
    #[default]
    Identity,
    /// gzip, as the source served it.
    Gzip,
    /// zstd, of content received uncompressed.
    Zstd,
}

/// Whether `bytes` start with the gzip magic number.
pub fn is_gzip(bytes: &[u8]) -> bool {
    bytes.starts_with(&[0x1f, 0x8b])
}

/// HTTP cache validators of a fetched source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validators {
    /// The `ETag` the server sent.
    pub etag: Option<String>,
    /// The `Last-Modified` the server sent.
    pub last_modified: Option<String>,
}

/// Decompressed bytes of the start of a source that HTML detection reads.
const HEAD_BYTES: usize = 64 * 1024;

/// The start of content that begins with `head` (all of it when
/// `complete`), decompressed when gzip: what HTML detection reads. The rest
/// is decompressed by the build as it parses, which also enforces the
/// decompressed size limit.
fn decoded_head(head: &[u8], complete: bool) -> Result<Vec<u8>, String> {
    if !is_gzip(head) {
        return Ok(head.to_vec());
    }
    let mut out = Vec::new();
    let read = flate2::read::MultiGzDecoder::new(head)
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut out);
    match read {
        // The head ended inside the gzip stream (even inside its header,
        // which may run past the head): the build decodes the rest, and
        // reports a stream that really is cut short.
        Err(e) if !complete && e.kind() == std::io::ErrorKind::UnexpectedEof => Ok(out),
        Err(e) if complete || out.is_empty() => Err(format!("gzip: {e}")),
        _ => Ok(out),
    }
}

/// Checks fetched content: its size as received, and that it is no HTML
/// page (by its start, decompressed).
fn check_content(size: u64, head: &[u8], complete: bool, source: &SourceConfig) -> Result<(), String> {
    if size > source.max_bytes {
        return Err(format!("{size} bytes exceeds max_bytes = {}", source.max_bytes));
    }
    if looks_like_html(&decoded_head(head, complete)?) {
        return Err("response is an HTML page, not a list".to_owned());
    }
    Ok(())
}

/// Opens a local source file and checks it (size, start) without reading
/// it whole: the start read, then the rest of the file, for the build to
/// read. Never seeks: a named pipe or `/dev/stdin` reads as well.
fn open_file(path: &Path, source: &SourceConfig) -> Result<Stream, String> {
    let mut file = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    let mut head = Vec::new();
    (&mut file)
        .take(HEAD_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(|e| e.to_string())?;
    check_content(size, &head, head.len() as u64 == size, source)?;
    let gzip = is_gzip(&head);
    Ok(Stream {
        reader: Box::new(std::io::Cursor::new(head).chain(file)),
        gzip,
        size,
    })
}

/// Fetches `source`, conditionally when the validators of its last good
/// content, `cached`, exist.
pub async fn fetch(client: &reqwest::Client, source: &SourceConfig, cached: Option<&Validators>) -> Fetched {
    if source.builtin {
        return Fetched::Fresh {
            bytes: BUILTIN_LIST.to_vec(),
            validators: Validators::default(),
        };
    }
    if let Some(path) = &source.path {
        let path = path.clone();
        let source = source.clone();
        let opened = tokio::task::spawn_blocking(move || open_file(&path, &source)).await;
        return match opened {
            Ok(Ok(stream)) => Fetched::Stream(stream),
            Ok(Err(e)) => Fetched::Failed(e),
            Err(e) => Fetched::Failed(format!("read task failed: {e}")),
        };
    }
    let Some(url) = &source.url else {
        return Fetched::Failed("source has no path, url or builtin".to_owned());
    };
    fetch_http(client, url, source, cached).await
}

async fn fetch_http(
    client: &reqwest::Client,
    url: &str,
    source: &SourceConfig,
    cached: Option<&Validators>,
) -> Fetched {
    let mut request = client.get(url).timeout(source.timeout());
    if let Some(validators) = cached {
        if let Some(etag) = &validators.etag {
            request = request.header(reqwest::header::IF_NONE_MATCH, etag);
        }
        if let Some(lm) = &validators.last_modified {
            request = request.header(reqwest::header::IF_MODIFIED_SINCE, lm);
        }
    }
    let mut response = match request.send().await {
        Ok(r) => r,
        Err(e) => return Fetched::Failed(format!("request failed: {}", error_chain(e))),
    };
    let status = response.status();
    if status == reqwest::StatusCode::NOT_MODIFIED && cached.is_some() {
        return Fetched::NotModified;
    }
    if !status.is_success() {
        return Fetched::Failed(format!("HTTP {status}"));
    }
    let header = |name| {
        response
            .headers()
            .get(name)
            .and_then(|v: &reqwest::header::HeaderValue| v.to_str().ok())
            .map(str::to_owned)
    };
    let validators = Validators {
        etag: header(reqwest::header::ETAG),
        last_modified: header(reqwest::header::LAST_MODIFIED),
    };
    let is_html =
        header(reqwest::header::CONTENT_TYPE).is_some_and(|t| t.to_ascii_lowercase().contains("text/html"));
    if is_html {
        return Fetched::Failed("response is an HTML page (Content-Type text/html), not a list".to_owned());
    }
    let mut bytes = Vec::new();
    loop {
        match response.chunk().await {
            Ok(Some(chunk)) => {
                if (bytes.len() + chunk.len()) as u64 > source.max_bytes {
                    return Fetched::Failed(format!("response exceeds max_bytes = {}", source.max_bytes));
                }
                bytes.extend_from_slice(&chunk);
            }
            Ok(None) => break,
            Err(e) => return Fetched::Failed(format!("reading body failed: {}", error_chain(e))),
        }
    }
    let head = &bytes[..bytes.len().min(HEAD_BYTES)];
    match check_content(bytes.len() as u64, head, head.len() == bytes.len(), source) {
        Ok(()) => Fetched::Fresh { bytes, validators },
        Err(e) => Fetched::Failed(e),
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
