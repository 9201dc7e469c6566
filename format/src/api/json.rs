//! The JSON answer of `GET /v1/hashes/{prefix}` written straight into its
//! bytes: the publisher's busiest JSON route. The bytes are those
//! `serde_json::to_vec` writes for [`FullHashAnswer::into_single`]'s
//! [`FullHashResponse`](super::FullHashResponse) (compact, fields in their
//! declared order, strings escaped as `serde_json` escapes them), without
//! its per-match `String`s: one allocation of the answer's exact size.

use super::{FullHashAnswer, ListedFullHash, RequestPrefix};

const HEX: &[u8; 16] = b"0123456789abcdef";

impl FullHashAnswer {
    /// The bytes of `serde_json::to_vec(&self.clone().into_single(prefix))`:
    /// the first result (an empty bucket of `prefix` if there is none) as
    /// `{"prefix":…,"matches":[{"full_hash":…,"list":…},…],"cache_duration_s":…}`.
    #[must_use]
    pub fn single_json(&self, prefix: RequestPrefix) -> Vec<u8> {
        let (prefix, matches): (RequestPrefix, &[ListedFullHash]) = match self.results.first() {
            Some(result) => (result.prefix, &result.matches),
            None => (prefix, &[]),
        };
        // Exact for list names that need no escaping (every valid one).
        // `{"prefix":"` `","matches":[` `],"cache_duration_s":` `}` around
        // 8 digits and 20; `{"full_hash":"` `","list":"` `"},` around 64
        // digits and the name.
        let size = 74 + matches.iter().map(|m| 92 + m.list.len()).sum::<usize>();
        let mut out = Vec::with_capacity(size);
        out.extend_from_slice(b"{\"prefix\":\"");
        let (value, _) = prefix.range32();
        let mut digits = [0u8; 8];
        for (i, digit) in digits.iter_mut().enumerate() {
            *digit = HEX[((value >> (28 - 4 * i)) & 0xf) as usize];
        }
        out.extend_from_slice(&digits[..usize::from(prefix.bits() / 4)]);
        out.extend_from_slice(b"\",\"matches\":[");
        for (i, m) in matches.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            out.extend_from_slice(b"{\"full_hash\":\"");
            let mut hex = [0u8; 64];
            for (pair, byte) in hex.chunks_exact_mut(2).zip(m.full_hash.0) {
                pair[0] = HEX[usize::from(byte >> 4)];
                pair[1] = HEX[usize::from(byte & 0xf)];
            }
            out.extend_from_slice(&hex);
            out.extend_from_slice(b"\",\"list\":");
            string(&mut out, &m.list);
            out.push(b'}');
        }
        out.extend_from_slice(b"],\"cache_duration_s\":");
        let mut n = self.cache_duration_s;
        let mut decimal = [0u8; 20];
        let mut at = decimal.len();
        loop {
            at -= 1;
            decimal[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        out.extend_from_slice(&decimal[at..]);
        out.push(b'}');
        out
    }
}

/// `text` as a JSON string, escaped as `serde_json` escapes it: `"` and
/// `\` by a backslash, the control characters under 0x20 as `\b`, `\t`,
/// `\n`, `\f`, `\r` or `\u00xx`; everything else as it is.
fn string(out: &mut Vec<u8>, text: &str) {
    out.push(b'"');
    for &b in text.as_bytes() {
        match b {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..0x20 => {
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            }
            _ => out.push(b),
        }
    }
    out.push(b'"');
}

#[cfg(test)]
mod tests {
    use rand::{Rng as _, SeedableRng as _};

    use super::super::PrefixAnswer;
    use super::*;
    use crate::FullHash;

    fn serde_bytes(answer: &FullHashAnswer, prefix: RequestPrefix) -> Vec<u8> {
        serde_json::to_vec(&answer.clone().into_single(prefix)).unwrap()
    }

    #[test]
    fn single_json_is_what_serde_json_writes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(18);
        let names = [
            "phishing",
            "malware",
            "a",
            "x_y-z9",
            "q\"\\\u{1}\n\u{8}\u{c}\r\t\u{1f}é/\u{7f}",
        ];
        for round in 0..2_000 {
            let bits = 4 * rng.gen_range(2..=8u8);
            let full = FullHash(rng.r#gen());
            let prefix = RequestPrefix::of(&full, bits);
            let results = if round % 7 == 0 {
                Vec::new()
            } else {
                vec![PrefixAnswer {
                    prefix,
                    matches: (0..rng.gen_range(0..5))
                        .map(|_| {
                            let mut h = FullHash(rng.r#gen());
                            h.0[..4].copy_from_slice(&prefix.range32().0.to_be_bytes());
                            ListedFullHash {
                                full_hash: h,
                                list: names[rng.gen_range(0..names.len())].to_owned(),
                            }
                        })
                        .collect(),
                }]
            };
            let answer = FullHashAnswer {
                cache_duration_s: [0, 1, 300, 86_400, u64::MAX][rng.gen_range(0..5)],
                results,
            };
            let asked = RequestPrefix::of(&FullHash(rng.r#gen()), bits);
            assert_eq!(
                String::from_utf8(answer.single_json(asked)).unwrap(),
                String::from_utf8(serde_bytes(&answer, asked)).unwrap(),
                "round {round}"
            );
        }
    }

    #[test]
    fn single_json_allocates_its_exact_size_for_valid_list_names() {
        let h = FullHash::of(b"a.b.c/");
        let prefix = RequestPrefix::of(&h, 32);
        for n in [0, 1, 3] {
            let answer = FullHashAnswer {
                cache_duration_s: 300,
                results: vec![PrefixAnswer {
                    prefix,
                    matches: vec![
                        ListedFullHash {
                            full_hash: h,
                            list: "phishing".to_owned()
                        };
                        n
                    ],
                }],
            };
            let bytes = answer.single_json(prefix);
            assert_eq!(bytes, serde_bytes(&answer, prefix));
            assert!(bytes.capacity() >= bytes.len() && bytes.capacity() <= bytes.len() + 40);
        }
    }
}
