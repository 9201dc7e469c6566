//! The `json` format: the strings of one array of a JSON document (the
//! block list's, or a source's allow array).

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
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(e) => {
            r.report.lines += 1;
            r.report.reject(b"<document>", format!("not valid JSON: {e}"));
            return;
        }
    };
    let Some(items) = value.get(key).and_then(|v| v.as_array()) else {
        if !options.json_key_optional {
            r.report.lines += 1;
            r.report
                .reject(b"<document>", format!("no array {key:?} in the JSON document"));
        }
        return;
    };
    for item in items {
        r.report.lines += 1;
        match item.as_str() {
            Some(name) => {
                read_line_with(SourceFormat::Json, name.as_bytes(), r);
            }
            None => r
                .report
                .reject(item.to_string().as_bytes(), reason::JSON_NOT_STRING),
        }
        r.sink.end_of_line();
    }
}

#[cfg(test)]
mod tests {
    use crate::config::SourceFormat;
    use crate::sources::tests::{collect, hashes};

    #[test]
    fn json_feed_with_a_byte_order_mark_is_read() {
        let json = b"\xEF\xBB\xBF{\"blacklist\": [\"metmask.com\", \"usermd.net\"]}";
        let (out, report) = collect(json, SourceFormat::Json);
        assert_eq!(out, hashes(&["metmask.com/", "usermd.net/"]));
        assert_eq!(report.rejected_total(), 0);
    }
}
