//! The `json` format: the strings of one array of a JSON document (the
//! block list's, or a source's allow array).

use std::borrow::Cow;

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde_json::value::RawValue;

use crate::config::SourceFormat;

use super::options::FormatOptions;
use super::outcome::reason;
use super::read::read_line_with;
use super::sink::EntrySink;
use super::visit::Reader;

pub(super) fn parse_json<S: EntrySink>(bytes: &[u8], options: &FormatOptions, r: &mut Reader<'_, S>) {
    let key = options.json_key.as_deref().unwrap_or("blacklist");
    // A byte-order mark is no JSON, but editors write one.
    let bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    let items = match array_of(bytes, key) {
        Ok(Some(items)) => items,
        Ok(None) => {
            if !options.json_key_optional {
                r.report.lines += 1;
                r.report
                    .reject(b"<document>", format!("no array {key:?} in the JSON document"));
            }
            return;
        }
        Err(e) => {
            r.report.lines += 1;
            r.report.reject(b"<document>", format!("not valid JSON: {e}"));
            return;
        }
    };
    for item in items {
        r.report.lines += 1;
        match string_of(item) {
            Some(name) => {
                read_line_with(SourceFormat::Json, &name, r);
            }
            None => r.report.reject(item.get().as_bytes(), reason::JSON_NOT_STRING),
        }
        r.sink.end_of_line();
    }
}

/// The items of the document's top-level `key` array, as written; `None`
/// when the document is no object, or its `key` is missing or no array
/// (of a key written twice, the last, as `serde_json`'s own maps keep it).
///
/// The document must be JSON (RFC 8259): UTF-8, complete, well formed. It
/// is read without building it: nothing but the array's items is decoded,
/// so a string elsewhere that `serde_json` would refuse to decode (an
/// escaped lone surrogate, `"\ud83d"`, which the JSON grammar allows and
/// JavaScript's `JSON.stringify` writes for a string cut mid-character)
/// loses nothing, and one in an item spoils only that item ([`string_of`]).
fn array_of<'a>(bytes: &'a [u8], key: &str) -> serde_json::Result<Option<Vec<&'a RawValue>>> {
    let document: &RawValue = serde_json::from_slice(bytes)?;
    let text = document.get();
    if !text.starts_with('{') {
        return Ok(None);
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let array = de.deserialize_map(KeyValue { key: key.as_bytes() })?;
    // An array of anything: each item is judged on its own.
    Ok(array.and_then(|raw| serde_json::from_str::<Vec<&RawValue>>(raw.get()).ok()))
}

/// The bytes of a string item, its escapes decoded; a lone surrogate
/// (`\ud800`–`\udfff` not in a pair) becomes U+FFFD, as a browser's
/// `USVString` conversion makes it before it parses a URL (WHATWG Web IDL,
/// "convert to a scalar value string"). `None` for an item that is not a
/// string.
fn string_of(item: &RawValue) -> Option<Cow<'_, [u8]>> {
    if !item.get().starts_with('"') {
        return None;
    }
    // Decoded as bytes, `serde_json` writes a lone surrogate as WTF-8 (the
    // three bytes `0xED 0xA0..=0xBF x`, which UTF-8 never has) instead of
    // refusing it; the item is valid JSON, so nothing else can fail here.
    let mut de = serde_json::Deserializer::from_str(item.get());
    let bytes = de.deserialize_bytes(Bytes).ok()?;
    let surrogate = |w: &[u8]| w[0] == 0xED && w[1] >= 0xA0;
    if !bytes.windows(2).any(surrogate) {
        return Some(bytes);
    }
    let mut out = Vec::with_capacity(bytes.len());
    let mut rest = &bytes[..];
    while let Some(at) = rest.windows(2).position(surrogate) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice("\u{FFFD}".as_bytes());
        rest = rest.get(at + 3..).unwrap_or_default();
    }
    out.extend_from_slice(rest);
    Some(Cow::Owned(out))
}

/// Visits a JSON object for the value of one key, left undecoded.
struct KeyValue<'k> {
    key: &'k [u8],
}

impl<'de> Visitor<'de> for KeyValue<'_> {
    type Value = Option<&'de RawValue>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<M: MapAccess<'de>>(self, mut map: M) -> Result<Self::Value, M::Error> {
        let mut found = None;
        while let Some(key) = map.next_key_seed(BytesSeed)? {
            if *key == *self.key {
                found = Some(map.next_value::<&RawValue>()?);
            } else {
                map.next_value::<IgnoredAny>()?;
            }
        }
        Ok(found)
    }
}

/// A JSON string as bytes (WTF-8 for a lone surrogate), borrowed from the
/// document when it holds no escape.
struct Bytes;

impl<'de> Visitor<'de> for Bytes {
    type Value = Cow<'de, [u8]>;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a JSON string")
    }

    fn visit_borrowed_bytes<E: de::Error>(self, v: &'de [u8]) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.to_vec()))
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(v.as_bytes()))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(v.as_bytes().to_vec()))
    }
}

/// [`Bytes`] for an object's key.
struct BytesSeed;

impl<'de> DeserializeSeed<'de> for BytesSeed {
    type Value = Cow<'de, [u8]>;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_bytes(Bytes)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::outcome::reason;
    use crate::sources::tests::{collect, hashes};

    /// Before, the document was decoded whole into a `serde_json::Value`,
    /// which refuses an escaped lone surrogate anywhere: one such string
    /// (JavaScript writes them for a string cut mid-character) refused
    /// every entry of the document.
    #[test]
    fn regression_a_lone_surrogate_spoils_its_item_alone() {
        let json = br#"{"fuzzylist": ["cut \ud83d"], "comment": "\udc00",
            "blacklist": ["bad.example", "evil\ud83d.example", "\ud83d\ude00.example", "x\udc00"]}"#;
        let (out, report) = collect(json, SourceFormat::Json);
        assert_eq!(out, hashes(&["bad.example/", "xn--e28h.example/"]));
        assert_eq!(report.lines, 4);
        // Each lone surrogate is U+FFFD, as a browser would make it; no
        // host holds it (UTS #46 disallows it).
        assert_eq!(report.rejected.get(reason::IDNA_REFUSED), Some(&2), "{report:?}");
        assert_eq!(report.rejected_total(), 2);
        let shown: Vec<&str> = report.samples.iter().map(|(line, _)| line.as_str()).collect();
        assert_eq!(shown, ["evil\u{FFFD}.example", "x\u{FFFD}"]);
    }

    #[test]
    fn lone_surrogates_become_one_replacement_character_each() {
        for (item, bytes) in [
            (r#""a\ud800b""#, "a\u{FFFD}b"),
            (r#""\udfff""#, "\u{FFFD}"),
            (r#""\ud83d\ud83d\ude00""#, "\u{FFFD}\u{1F600}"),
            (r#""\ud83d\u0061""#, "\u{FFFD}a"),
            (r#""\u00e9t\u00e9""#, "été"),
            (r#""plain""#, "plain"),
        ] {
            let raw: &serde_json::value::RawValue = serde_json::from_str(item).unwrap();
            assert_eq!(super::string_of(raw).as_deref(), Some(bytes.as_bytes()), "{item}");
        }
        let raw: &serde_json::value::RawValue = serde_json::from_str("[1]").unwrap();
        assert_eq!(super::string_of(raw), None);
    }

    #[test]
    fn the_array_is_found_as_serde_json_finds_it() {
        let read = |json: &[u8]| {
            let (out, report) = collect(json, SourceFormat::Json);
            let reasons: Vec<String> = report.rejected.keys().cloned().collect();
            (out, reasons)
        };
        // A key written with escapes is the same key; of a key written
        // twice, the last counts.
        assert_eq!(
            read(br#"{"black\u006cist": ["a.example"]}"#).0,
            hashes(&["a.example/"])
        );
        assert_eq!(
            read(br#"{"blacklist": ["a.example"], "blacklist": ["b.example"]}"#).0,
            hashes(&["b.example/"])
        );
        assert_eq!(
            read(br#"{"blacklist": {"a": 1}, "x": [1, {"y": [null]}], "blacklist": ["b.example"]}"#).0,
            hashes(&["b.example/"])
        );
        // No object, no such array, or no array under the key.
        for json in [
            &br#"["a.example"]"#[..],
            br#"{"list": ["a.example"]}"#,
            br#"{"blacklist": "a.example"}"#,
            b"7",
        ] {
            assert_eq!(
                read(json),
                (
                    vec![],
                    vec!["no array \"blacklist\" in the JSON document".to_owned()]
                ),
                "{}",
                json.escape_ascii()
            );
        }
        // What is no JSON is refused whole, with where: cut short, invalid
        // UTF-8 (RFC 8259 section 8.1), trailing text.
        for (json, says) in [
            (
                &br#"{"blacklist": ["a.example", "b.ex"#[..],
                "EOF while parsing a string",
            ),
            (
                b"{\"blacklist\": [\"a.ex\xE9mple\"]}",
                "invalid unicode code point",
            ),
            (br#"{"blacklist": []} x"#, "trailing characters"),
        ] {
            let (out, reasons) = read(json);
            assert_eq!((out.len(), reasons.len()), (0, 1));
            assert!(
                reasons[0].starts_with(&format!("not valid JSON: {says} at line 1")),
                "{reasons:?}"
            );
        }
        // Items that are not strings are counted, shown as written.
        let (_, report) = collect(
            br#"{"blacklist": [7, {"u": "a.example"}, null]}"#,
            SourceFormat::Json,
        );
        assert_eq!(report.rejected.get(reason::JSON_NOT_STRING), Some(&3));
        assert_eq!(report.samples[1].0, r#"{"u": "a.example"}"#);
    }

    #[test]
    fn json_feed_with_a_byte_order_mark_is_read() {
        let json = b"\xEF\xBB\xBF{\"blacklist\": [\"metmask.com\", \"usermd.net\"]}";
        let (out, report) = collect(json, SourceFormat::Json);
        assert_eq!(out, hashes(&["metmask.com/", "usermd.net/"]));
        assert_eq!(report.rejected_total(), 0);
    }
}
