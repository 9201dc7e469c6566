//! The `sha256` format: a line is a full hash, in hex.

use blocksieve_format::FullHash;

use super::entry::{Entry, Read};
use super::outcome::reason;
use super::visit::Visit;

pub(super) fn read_sha256(text: &[u8], v: &mut impl Visit) {
    let hash = std::str::from_utf8(text)
        .ok()
        .and_then(|t| FullHash::from_hex(t).ok());
    match hash {
        Some(h) => v.accepted(&[Read {
            text,
            entry: Entry::Hash(h),
        }]),
        None => v.rejected(text, reason::NOT_SHA256),
    }
}
