//! Percent-escapes and byte classes, shared by the steps, the host and
//! path steps and the common case: step 4's unescaping and step 9's
//! escaping (v4 "Canonicalization"), and the byte-class table the scans use.

/// Whether `steps::assemble` still has to percent-unescape the parts it is given.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Unescape {
    /// The parts hold no escapes (or were unescaped as a whole already).
    No,
    /// The parts were split on the raw input's delimiters; each is unescaped
    /// on its own, so an escaped delimiter (`%2F`, `%40`) stays inside the
    /// part it was written in.
    PerComponent,
}

pub(super) fn hex_value(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Removes tab/CR/LF and percent-unescapes until no `%XX` remains.
pub(super) fn unescape_fully(input: &[u8]) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::with_capacity(input.len());
    let mut rest = input;
    while !rest.is_empty() {
        // A run without '%', tab, CR or LF is copied as it is, unless the
        // output ends within two bytes of a '%' (the run could complete an
        // escape): no byte of it can end a "%XY".
        if !out.iter().rev().take(2).any(|&b| b == b'%') {
            let run = rest
                .iter()
                .position(|&b| matches!(b, b'%' | b'\t' | b'\r' | b'\n'))
                .unwrap_or(rest.len());
            out.extend_from_slice(&rest[..run]);
            rest = &rest[run..];
        }
        let Some((&b, tail)) = rest.split_first() else {
            break;
        };
        rest = tail;
        if matches!(b, b'\t' | b'\r' | b'\n') {
            continue;
        }
        out.push(b);
        // Only the tail can have become an escape: decode while it is one.
        while let [.., b'%', hi, lo] = out[..] {
            match (hex_value(hi), hex_value(lo)) {
                (Some(h), Some(l)) => {
                    out.truncate(out.len() - 3);
                    out.push(h << 4 | l);
                }
                _ => break,
            }
        }
    }
    out
}

/// Byte classes, so that each scan of the hot path costs one table lookup
/// per byte.
pub(super) const ESCAPE: u8 = 1 << 0;
/// `/` and `\`: path separators (step 8).
pub(super) const SEPARATOR: u8 = 1 << 1;
/// `#`, `%`, tab, CR, LF: a fragment to cut or work for steps 1 and 4.
pub(super) const PREPASS: u8 = 1 << 2;
/// `/`, `\` and `?`: the end of the authority (step 6).
pub(super) const AUTHORITY_END: u8 = 1 << 3;
/// `?`: the start of the query (step 6).
pub(super) const QUERY: u8 = 1 << 5;
/// Bytes a host keeps as they are: ASCII except uppercase letters, `.`,
/// `@`, `:`, `[` and what step 9 escapes. A host of only these (and single
/// inner dots) is copied unchanged.
pub(super) const HOST_PLAIN: u8 = 1 << 4;

/// The class bits of every byte.
pub(super) static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        let b = i as u8;
        let mut c = 0;
        if b <= 0x20 || b >= 0x7f || b == b'#' || b == b'%' {
            c |= ESCAPE;
        } else if !(b.is_ascii_uppercase() || matches!(b, b'.' | b'@' | b':' | b'[')) {
            c |= HOST_PLAIN;
        }
        if b == b'/' || b == b'\\' {
            c |= SEPARATOR | AUTHORITY_END;
        }
        if b == b'?' {
            c |= AUTHORITY_END | QUERY;
        }
        if matches!(b, b'#' | b'%' | b'\t' | b'\r' | b'\n') {
            c |= PREPASS;
        }
        table[i] = c;
        i += 1;
    }
    table
};

/// Whether step 9 escapes `b`: `<= 0x20`, `>= 0x7f`, `#` or `%`.
pub(super) fn needs_escape(b: u8) -> bool {
    CLASS[usize::from(b)] & ESCAPE != 0
}

/// Pushes `b`, escaped as `%XX` (uppercase hex) when step 9 says so.
pub(super) fn push_escaped(b: u8, out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789ABCDEF";
    if needs_escape(b) {
        out.extend_from_slice(&[b'%', HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
    } else {
        out.push(b);
    }
}

/// Escapes bytes `<= 0x20`, `>= 0x7f`, `#` and `%` into `out`.
pub(super) fn escape_into(bytes: &[u8], out: &mut Vec<u8>) {
    let mut rest = bytes;
    // Copy the runs that need no escaping in one go.
    while let Some(i) = rest.iter().position(|&b| needs_escape(b)) {
        out.extend_from_slice(&rest[..i]);
        push_escaped(rest[i], out);
        rest = &rest[i + 1..];
    }
    out.extend_from_slice(rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unescape_fully_copies_runs_like_the_byte_loop() {
        // The byte-at-a-time definition that the run copying must match.
        fn bytewise(input: &[u8]) -> Vec<u8> {
            let mut out: Vec<u8> = Vec::new();
            for &b in input.iter().filter(|b| !matches!(b, b'\t' | b'\r' | b'\n')) {
                out.push(b);
                while let [.., b'%', hi, lo] = out[..] {
                    let (Some(h), Some(l)) = (hex_value(hi), hex_value(lo)) else {
                        break;
                    };
                    out.truncate(out.len() - 3);
                    out.push(h << 4 | l);
                }
            }
            out
        }
        use rand::{Rng, SeedableRng};
        let alphabet = b"%%%2255aF0g\t\n/";
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5afe);
        for _ in 0..50_000 {
            let len = rng.gen_range(0..14);
            let input: Vec<u8> = (0..len)
                .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                .collect();
            assert_eq!(
                unescape_fully(&input),
                bytewise(&input),
                "{:?}",
                input.escape_ascii().to_string()
            );
        }
    }
}
