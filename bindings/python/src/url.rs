//! The sans-I/O functions: Safe Browsing canonicalization, the
//! host-suffix/path-prefix expressions of a URL and their SHA-256 full
//! hashes, exactly as the agent computes them before a lookup.

use blocksieve_format::{CanonicalUrl, canonicalize as canonicalize_url};
use pyo3::prelude::*;

use crate::errors::{InvalidUrlError, shown_url};

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
pub(crate) fn canonicalize(url: &str) -> PyResult<String> {
    Ok(canonical(url)?.as_str().to_owned())
}

/// The host-suffix/path-prefix expressions of `url`, in expression order
/// (the exact URL first), e.g. `["a.b.example/1/2.html?x=1",
/// "a.b.example/1/2.html", ...]`, at most 30.
///
/// Raises `InvalidUrlError` when the URL has no canonical form.
#[pyfunction]
pub(crate) fn expressions(url: &str) -> PyResult<Vec<String>> {
    let url = canonical(url)?;
    Ok(url.expressions().map(|e| e.as_str().to_owned()).collect())
}

/// The SHA-256 full hash of each expression of `url`, in expression order,
/// each as 64 lowercase hex digits.
///
/// Raises `InvalidUrlError` when the URL has no canonical form.
#[pyfunction]
pub(crate) fn full_hashes(url: &str) -> PyResult<Vec<String>> {
    let url = canonical(url)?;
    let mut hashes = Vec::new();
    url.full_hashes_into(&mut hashes);
    Ok(hashes.iter().map(ToString::to_string).collect())
}
