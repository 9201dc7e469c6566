//! Getting a source's bytes: local files, HTTP(S) feeds with conditional
//! GET, gzip, size limits, and an on-disk copy of the last good content.
//!
//! A source that fails — unreadable file, network error, 4xx/5xx, an HTML
//! page instead of a list, over its size limit, or (decided in
//! [`crate::build`]) a parse that collapses, most of its lines rejected —
//! keeps its last good content for that build, and the build report says so.
//! That content is kept by [`crate::storage`]; this module does no more than
//! get bytes.

use std::io::Read as _;

use serde::{Deserialize, Serialize};

use crate::config::{BUILTIN_LIST, SourceConfig};
use crate::sources::looks_like_html;

/// What fetching a source produced.
#[derive(Debug)]
pub enum Fetched {
    /// New content.
    Fresh {
        /// The (decompressed) bytes.
        bytes: Vec<u8>,
        /// HTTP validators to send next time.
        validators: Validators,
    },
    /// The server answered 304: the cached content is current.
    NotModified,
    /// The source failed; the reason.
    Failed(String),
}

/// HTTP cache validators of a fetched source.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Validators {
    /// The `ETag` the server sent.
    pub etag: Option<String>,
    /// The `Last-Modified` the server sent.
    pub last_modified: Option<String>,
}

/// Decompresses gzip content (detected by its magic bytes), up to `max_bytes`.
fn maybe_gunzip(bytes: Vec<u8>, max_bytes: u64) -> Result<Vec<u8>, String> {
    if !bytes.starts_with(&[0x1f, 0x8b]) {
        return Ok(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(4).min(64 << 20));
    flate2::read::MultiGzDecoder::new(bytes.as_slice())
        .take(max_bytes + 1)
        .read_to_end(&mut out)
        .map_err(|e| format!("gzip: {e}"))?;
    if out.len() as u64 > max_bytes {
        return Err(format!("decompressed content exceeds max_bytes = {max_bytes}"));
    }
    Ok(out)
}

fn check_content(bytes: Vec<u8>, source: &SourceConfig) -> Result<Vec<u8>, String> {
    if bytes.len() as u64 > source.max_bytes {
        return Err(format!(
            "{} bytes exceeds max_bytes = {}",
            bytes.len(),
            source.max_bytes
        ));
    }
    let bytes = maybe_gunzip(bytes, source.max_bytes)?;
    if looks_like_html(&bytes) {
        return Err("response is an HTML page, not a list".to_owned());
    }
    Ok(bytes)
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
        let read = tokio::task::spawn_blocking(move || std::fs::read(&path)).await;
        return match read {
            Ok(Ok(bytes)) => match check_content(bytes, source) {
                Ok(bytes) => Fetched::Fresh {
                    bytes,
                    validators: Validators::default(),
                },
                Err(e) => Fetched::Failed(e),
            },
            Ok(Err(e)) => Fetched::Failed(e.to_string()),
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
        Err(e) => return Fetched::Failed(format!("request failed: {e}")),
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
            Err(e) => return Fetched::Failed(format!("reading body failed: {e}")),
        }
    }
    match check_content(bytes, source) {
        Ok(bytes) => Fetched::Fresh { bytes, validators },
        Err(e) => Fetched::Failed(e),
    }
}
