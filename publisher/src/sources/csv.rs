//! The `csv` format: the values of one column, named in the header row.

use crate::config::SourceFormat;

use super::options::FormatOptions;
use super::outcome::reason;
use super::read::read_line_with;
use super::sink::EntrySink;
use super::visit::Reader;

pub(super) fn parse_csv<S: EntrySink>(bytes: &[u8], options: &FormatOptions, r: &mut Reader<'_, S>) {
    let column = options.column.as_deref().unwrap_or("url");
    let mut bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // Comment lines before the header row are skipped (and counted); after
    // it, a row is a comment only when it is one field starting with `#`:
    // a row whose first column starts with `#` (`#3,http://…`) is data.
    while bytes.first() == Some(&b'#') {
        r.report.lines += 1;
        bytes = memchr::memchr(b'\n', bytes).map_or(&[][..], |i| bytes.get(i + 1..).unwrap_or_default());
    }
    let mut reader = ::csv::ReaderBuilder::new().flexible(true).from_reader(bytes);
    let index = match reader.byte_headers() {
        Ok(h) => h
            .iter()
            .position(|f| f.trim_ascii().eq_ignore_ascii_case(column.as_bytes())),
        Err(_) => None,
    };
    r.report.lines += 1; // the header row
    let Some(index) = index else {
        r.report
            .reject(b"<header>", format!("no column named {column:?}"));
        return;
    };
    for record in reader.byte_records() {
        r.report.lines += 1;
        match record {
            Ok(row)
                if row.len() == 1 && row.get(0).is_some_and(|f| f.trim_ascii_start().starts_with(b"#")) => {}
            Ok(row) => {
                let read = row
                    .get(index)
                    .is_some_and(|url| read_line_with(SourceFormat::Csv, url, r));
                if !read {
                    r.report
                        .reject(row.as_slice(), format!("row has no {column:?} value"));
                }
            }
            Err(e) => r
                .report
                .reject(format!("<row: {e}>").as_bytes(), reason::CSV_MALFORMED),
        }
        r.sink.end_of_line();
    }
}
