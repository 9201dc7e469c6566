//! The sans-I/O functions: Safe Browsing canonicalization, the
//! host-suffix/path-prefix expressions of a URL and their SHA-256 full
//! hashes, exactly as the agent computes them before a lookup.

use blocksieve_format::{
    CanonError, CanonicalUrl, MAX_URL_BYTES, canonicalize as canonicalize_url, url_text,
};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::errors::{InvalidUrlError, shown_url};

/// A URL as Python hands it, as the text the agent checks:
/// - a `str` as it is; a character that a `surrogateescape` decode made of
///   a byte that is not UTF-8 (`os.fsdecode`, `sys.argv`, a WSGI
///   environment) is that byte again, and any other lone surrogate is
///   U+FFFD, as a browser's URL parser takes it (`\ud83d` of an emoji cut
///   in two: `%EF%BF%BD`). Refused before, such a `str` raised
///   `UnicodeEncodeError`, not a blocksieve error, failing a whole
///   `check_many`;
/// - `bytes`, as the C API reads them.
///
/// Each byte that is not part of valid UTF-8 is percent-escaped as the
/// canonicalizer escapes a raw byte ([`url_text`]).
pub(crate) struct UrlArg(pub(crate) String);

impl<'a, 'py> FromPyObject<'a, 'py> for UrlArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        let obj = obj.to_owned();
        if let Ok(text) = obj.cast::<PyString>() {
            if let Ok(text) = text.to_cow() {
                return Ok(Self(text.into_owned()));
            }
            // Each lone surrogate by itself, whatever else the text holds:
            // one that `surrogateescape` makes of a byte (U+DC80..U+DCFF)
            // is that byte, any other U+FFFD (a pair, as UTF-16 reads it,
            // its character). Decided per text, a `surrogateescape` byte
            // in a listed path became U+FFFD when a query held another
            // lone surrogate, and the listed URL was answered safe.
            let units = text.call_method1("encode", ("utf-16-le", "surrogatepass"))?;
            let units = units.cast::<PyBytes>()?.as_bytes();
            let units = units
                .chunks_exact(2)
                .map(|pair| u16::from_le_bytes([pair[0], pair[1]]));
            let mut bytes = Vec::with_capacity(units.len());
            for c in char::decode_utf16(units) {
                match c {
                    Ok(c) => bytes.extend_from_slice(c.encode_utf8(&mut [0; 4]).as_bytes()),
                    Err(e) => match e.unpaired_surrogate() {
                        #[allow(clippy::cast_possible_truncation)]
                        u @ 0xDC80..=0xDCFF => bytes.push((u - 0xDC00) as u8),
                        _ => bytes.extend_from_slice("\u{FFFD}".as_bytes()),
                    },
                }
            }
            return escaped(&bytes);
        }
        if let Ok(bytes) = obj.cast::<PyBytes>() {
            return escaped(bytes.as_bytes());
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "a URL is a str or bytes, not {}",
            obj.get_type().name()?
        )))
    }
}

/// `bytes` as text, each byte that is not UTF-8 percent-escaped; bytes over
/// 2 MiB are refused at their own length before any is escaped (as the C
/// API refuses them): escaping stops past the limit, so the length of the
/// escaped text would be neither the input's nor its whole escape's.
fn escaped(bytes: &[u8]) -> PyResult<UrlArg> {
    if bytes.len() > MAX_URL_BYTES {
        let error = CanonError::TooLong {
            len: bytes.len(),
            max: MAX_URL_BYTES,
        };
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(800)]);
        return Err(InvalidUrlError::new_err(format!(
            "{error}: {}",
            shown_url(&shown)
        )));
    }
    Ok(UrlArg(url_text(bytes).into_owned()))
}

/// `url` canonicalized, or `InvalidUrlError` with the reason (and the URL,
/// cut after 200 characters).
fn canonical(url: &str) -> PyResult<CanonicalUrl> {
    canonicalize_url(url).map_err(|e| InvalidUrlError::new_err(format!("{e}: {}", shown_url(url))))
}

/// The Safe Browsing canonical form of `url`, e.g.
/// `canonicalize("HTTP://Evil.Example") == "http://evil.example/"`.
///
/// Raises `InvalidUrlError` when the URL has no canonical form (no host,
/// an invalid host, or too long).
#[pyfunction]
pub(crate) fn canonicalize(url: UrlArg) -> PyResult<String> {
    Ok(canonical(&url.0)?.as_str().to_owned())
}

/// The host-suffix/path-prefix expressions of `url`, in expression order
/// (the exact URL first), e.g. `["a.b.example/1/2.html?x=1",
/// "a.b.example/1/2.html", ...]`, at most 30.
///
/// Raises `InvalidUrlError` when the URL has no canonical form.
#[pyfunction]
pub(crate) fn expressions(url: UrlArg) -> PyResult<Vec<String>> {
    let url = canonical(&url.0)?;
    Ok(url.expressions().map(|e| e.as_str().to_owned()).collect())
}

/// The SHA-256 full hash of each expression of `url`, in expression order,
/// each as 64 lowercase hex digits.
///
/// Raises `InvalidUrlError` when the URL has no canonical form.
#[pyfunction]
pub(crate) fn full_hashes(url: UrlArg) -> PyResult<Vec<String>> {
    let url = canonical(&url.0)?;
    let mut hashes = Vec::new();
    url.full_hashes_into(&mut hashes);
    Ok(hashes.iter().map(ToString::to_string).collect())
}
