//! What the blocksieve publisher and agent must agree on byte for byte.
//!
//! Data flows through these types in one direction:
//!
//! 1. [`canonicalize`] turns a URL into a [`CanonicalUrl`] (Safe Browsing v4
//!    canonicalization), and [`CanonicalUrl::expressions`] yields its
//!    host-suffix/path-prefix [`Expression`]s; [`full_hashes`] gives the
//!    full hashes of all of a URL's expressions at once, as a client's
//!    check needs them; [`canonicalize_form`] gives a URL's host and most
//!    specific expression borrowed from the input when it is canonical as
//!    written, as a publisher reading feed lines needs them.
//! 2. [`FullHash::of`] hashes an expression (SHA-256); its [`HashPrefix`] is
//!    the first four bytes, big-endian.
//! 3. The publisher builds a [`PrefixFilter`] over the prefixes of a threat
//!    list and [`encode`]s it into a signed, zstd-compressed snapshot.
//! 4. The agent [`decode`]s the bytes into a [`VerifiedSnapshot`] — the only
//!    way to get one — and probes it; a hit is confirmed against the
//!    publisher's [`api::FullHashResponse`].
//! 5. Between whole snapshots, the publisher signs a [`encode_delta`] per
//!    build (the prefixes added) and, for an unchanged list, a
//!    [`FreshnessRecord`]; the agent [`decode_chain`]s the deltas from the
//!    version it holds and adds them to its filter's prefixes.
//!
//! This crate does no I/O and reads no clock: times are parameters.

pub mod api;
mod canon;
mod delta;
mod error;
mod filter;
#[doc(hidden)]
pub mod fuzzing;
mod hash;
mod keys;
mod reader;
mod scan;
mod snapshot;
mod zstd_frame;

pub use api::RequestPrefix;
pub use canon::{
    AsWrittenUrl, CanonError, CanonicalForm, CanonicalUrl, Expression, Expressions, HashedUrl, HostKind,
    MAX_EXPRESSIONS, MAX_URL_BYTES, canonicalize, canonicalize_form, full_hashes, is_text_white_space,
    trim_url_text, url_text,
};
pub use delta::{
    DELTA_CONTEXT, DELTA_MAGIC, DELTA_VERSION, DeltaEnd, DeltaError, DeltaHeader, DeltaParams,
    FRESHNESS_MAGIC, FreshnessRecord, MAX_CHAIN_DELTAS, MAX_DELTA_ADDITIONS, MAX_RICE_K, VerifiedDelta,
    additions_between, decode_chain, decode_chain_up_to, decode_delta, encode_delta, merge_additions,
    parse_delta_header,
};
pub use error::DecodeError;
pub use filter::{
    BLOOM_SEED, BuildError, DEFAULT_BLOOM_BITS_PER_KEY, FilterKind, MAX_FILTER_KEYS, PrefixFilter,
};
pub use hash::{FullHash, HashPrefix, HexError};
pub use keys::{KeyError, KeyId, SigningKey, TrustedKey};
pub use snapshot::{
    CompressedFilter, DecodeLimits, EncodeError, FORMAT_VERSION, KeyBits, MAGIC, MAX_LIST_NAME_BYTES,
    RawBody, SnapshotHeader, SnapshotParams, VerifiedSnapshot, check_unverified, compress_filter,
    dangerous_encode_raw, decode, decode_ignoring_expiry, encode, is_valid_list_name,
    parse_header_unverified, sign_snapshot,
};
