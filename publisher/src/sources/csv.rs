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
    let mut last_comment: Option<&[u8]> = None;
    while bytes.first() == Some(&b'#') {
        r.report.lines += 1;
        let end = memchr::memchr(b'\n', bytes).unwrap_or(bytes.len());
        last_comment = bytes.get(..end);
        bytes = bytes.get(end + 1..).unwrap_or_default();
    }
    let mut reader = ::csv::ReaderBuilder::new().flexible(true).from_reader(bytes);
    let mut index = match reader.byte_headers() {
        Ok(h) => column_of(h, column),
        Err(_) => None,
    };
    r.report.lines += 1; // the header row
    // A header written as the last comment (URLhaus's dumps:
    // `# id,dateadded,url,…`), when the first row names no such column:
    // that row is then data.
    if index.is_none()
        && let Some(commented) = last_comment.and_then(|c| commented_header(c, column))
    {
        index = Some(commented);
        r.report.lines -= 1; // counted with the comments
        reader = ::csv::ReaderBuilder::new()
            .flexible(true)
            .has_headers(false)
            .from_reader(bytes);
    }
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

/// The position of the field named `column` (ignoring ASCII case and
/// surrounding white space) in a header row.
fn column_of(header: &::csv::ByteRecord, column: &str) -> Option<usize> {
    header
        .iter()
        .position(|f| f.trim_ascii().eq_ignore_ascii_case(column.as_bytes()))
}

/// The position of `column` in a comment line read as a header row (`#`s
/// and white space before it removed).
fn commented_header(comment: &[u8], column: &str) -> Option<usize> {
    let text = comment.trim_ascii_start();
    let text = text.get(text.iter().take_while(|&&b| b == b'#').count()..)?;
    let mut reader = ::csv::ReaderBuilder::new()
        .flexible(true)
        .has_headers(false)
        .from_reader(text.trim_ascii());
    let mut header = ::csv::ByteRecord::new();
    match reader.read_byte_record(&mut header) {
        // One field is a sentence, not a header (`# url list`).
        Ok(true) if header.len() > 1 => column_of(&header, column),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use blocksieve_format::FullHash;

    use crate::config::SourceFormat;
    use crate::sources::options::FormatOptions;
    use crate::sources::tests::hashes;
    use crate::sources::{ParseReport, parse_source};

    fn read(csv: &[u8], column: Option<&str>) -> (Vec<FullHash>, ParseReport) {
        let opts = FormatOptions {
            column: column.map(str::to_owned),
            ..FormatOptions::default()
        };
        let mut out = Vec::new();
        let mut report = ParseReport::default();
        parse_source(csv, SourceFormat::Csv, &opts, &mut report, |h| out.push(h));
        (out, report)
    }

    /// URLhaus's CSV dumps write their header as the last comment line: it
    /// was skipped with the comments, the first row read as the header, and
    /// the whole dump refused (`no column named "url"`).
    #[test]
    fn a_header_written_as_the_last_comment_is_read() {
        let dump = b"################################################################\n\
# abuse.ch URLhaus Database Dump (CSV - recent URLs)           #\n\
#                                                              #\n\
################################################################\n\
#\n\
# id,dateadded,url,url_status,last_online,threat,tags,urlhaus_link,reporter\n\
\"3061593\",\"2024-08-01 10:01:06\",\"http://1.2.3.4/bins/x.sh\",\"online\",\"2024-08-01 10:01:06\",\"malware_download\",\"elf,mirai\",\"https://urlhaus.abuse.ch/url/3061593/\",\"r\"\n\
\"3061592\",\"2024-08-01 10:00:01\",\"https://evil.example/a.exe\",\"offline\",\"\",\"malware_download\",\"exe\",\"https://urlhaus.abuse.ch/url/3061592/\",\"r\"\n";
        let (out, report) = read(dump, None);
        assert_eq!(out, hashes(&["1.2.3.4/bins/x.sh", "evil.example/a.exe"]));
        assert_eq!(report.rejected_total(), 0, "{report:?}");
        assert_eq!(report.lines, 8);
        // A header row of its own still wins over a comment before it.
        let (out, _) = read(b"# id,url\nid,link\n1,http://a.example/x\n", Some("link"));
        assert_eq!(out, hashes(&["a.example/x"]));
        // A sentence in the last comment is no header: still refused.
        let (out, report) = read(b"# the url list\n1,http://a.example/x\n", None);
        assert!(out.is_empty());
        assert_eq!(report.rejected_total(), 1);
    }
}
