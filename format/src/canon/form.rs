//! [`canonicalize_form`]: a URL's canonical parts, borrowed from the input
//! when the input is canonical as written, so that a caller that needs the
//! host and the most specific expression (a publisher reading a feed line)
//! neither allocates nor copies for most URLs.

use super::common::{Common, common_case, into_url};
use super::url::{CanonError, CanonicalUrl, HostKind, check_length};

/// A URL in canonical form: [`CanonicalForm::AsWritten`] when the input is
/// its own canonical form from the host on (a URL without a scheme gets
/// `http://`, which no part below includes), [`CanonicalForm::Built`]
/// otherwise. Every part equals the same part of
/// [`canonicalize`](super::canonicalize)'s answer, byte for byte.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CanonicalForm<'a> {
    /// The input, canonical as written: its parts are slices of it.
    AsWritten(AsWrittenUrl<'a>),
    /// The canonical URL, built from the input's parts.
    Built(CanonicalUrl),
}

/// A URL canonical as written: `text` is the input from its host to its
/// end, ASCII only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsWrittenUrl<'a> {
    text: &'a [u8],
    host_end: usize,
    path_end: usize,
    host_kind: HostKind,
}

/// [`canonicalize`](super::canonicalize), borrowing from `input` where it
/// can: see [`CanonicalForm`].
///
/// # Errors
///
/// As [`canonicalize`](super::canonicalize), for the same inputs.
///
/// ```
/// use blocksieve_format::{canonicalize_form, CanonicalForm};
/// let url = canonicalize_form(b"http://a.example/b/c?d").unwrap();
/// assert!(matches!(url, CanonicalForm::AsWritten(_)));
/// assert_eq!(url.host(), b"a.example");
/// assert_eq!(url.most_specific_expression(), b"a.example/b/c?d");
/// let url = canonicalize_form(b"http://A.example/./b").unwrap();
/// assert!(matches!(url, CanonicalForm::Built(_)));
/// assert_eq!(url.most_specific_expression(), b"a.example/b");
/// ```
pub fn canonicalize_form(input: &[u8]) -> Result<CanonicalForm<'_>, CanonError> {
    check_length(input)?;
    let built = match common_case(input) {
        // "example.com" without a path gets "/", which the input lacks: built.
        Some(Common::AsWritten {
            end,
            host_start,
            host_end,
            path_end,
            host_kind,
            add_slash: false,
            ..
        }) => {
            return Ok(CanonicalForm::AsWritten(AsWrittenUrl {
                text: &input[host_start..end],
                host_end: host_end - host_start,
                path_end: path_end - host_start,
                host_kind,
            }));
        }
        Some(common) => into_url(input, common),
        None => None,
    };
    match built {
        Some(url) => Ok(CanonicalForm::Built(url)),
        None => super::canonicalize_by_steps(input).map(CanonicalForm::Built),
    }
}

impl CanonicalForm<'_> {
    /// The canonical host: [`CanonicalUrl::host`].
    pub fn host(&self) -> &[u8] {
        match self {
            Self::AsWritten(u) => &u.text[..u.host_end],
            Self::Built(u) => u.host().as_bytes(),
        }
    }

    /// [`CanonicalUrl::host_kind`].
    pub fn host_kind(&self) -> HostKind {
        match self {
            Self::AsWritten(u) => u.host_kind,
            Self::Built(u) => u.host_kind(),
        }
    }

    /// The canonical path, starting with `/`: [`CanonicalUrl::path`].
    pub fn path(&self) -> &[u8] {
        match self {
            Self::AsWritten(u) => &u.text[u.host_end..u.path_end],
            Self::Built(u) => u.path().as_bytes(),
        }
    }

    /// The query without its `?`: [`CanonicalUrl::query`].
    pub fn query(&self) -> Option<&[u8]> {
        match self {
            Self::AsWritten(u) => u.text.get(u.path_end + 1..),
            Self::Built(u) => u.query().map(str::as_bytes),
        }
    }

    /// The most specific expression (host, path and query, but an empty
    /// query's `?`): [`CanonicalUrl::most_specific_expression`].
    pub fn most_specific_expression(&self) -> &[u8] {
        match self {
            Self::AsWritten(u) if u.text.len() > u.path_end + 1 => u.text,
            Self::AsWritten(u) => &u.text[..u.path_end],
            Self::Built(u) => u.most_specific_expression().as_bytes(),
        }
    }
}
