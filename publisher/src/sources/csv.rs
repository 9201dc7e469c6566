//! The `csv` format: the values of one column, named in the header row.

use std::borrow::Cow;

use crate::config::SourceFormat;

use super::options::FormatOptions;
use super::outcome::reason;
use super::read::read_line_with;
use super::sink::EntrySink;
use super::visit::Reader;

pub(super) fn parse_csv<S: EntrySink>(bytes: &[u8], options: &FormatOptions, r: &mut Reader<'_, S>) {
    let column = options.column.as_deref().unwrap_or("url");
    let delimiter = options.delimiter.unwrap_or(b',');
    let mut bytes = bytes.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(bytes);
    // Comment lines before the header row are skipped (and counted); after
    // it, a row is a comment as `is_comment_row` says.
    // Blank lines among them are skipped too; a line ends at LF, CR LF or
    // a lone CR (as the CSV reader ends rows).
    let mut last_comment: Option<&[u8]> = None;
    loop {
        let end = memchr::memchr2(b'\n', b'\r', bytes).unwrap_or(bytes.len());
        let line = bytes.get(..end).unwrap_or_default();
        let comment = line.first() == Some(&b'#');
        if !comment && (!line.trim_ascii().is_empty() || end == bytes.len()) {
            break;
        }
        r.report.lines += 1;
        if comment {
            last_comment = Some(line);
        }
        let next = if bytes.get(end..end + 2) == Some(b"\r\n") {
            end + 2
        } else {
            end + 1
        };
        bytes = bytes.get(next..).unwrap_or_default();
    }
    let bytes = unspaced_quotes(bytes, delimiter);
    let bytes = &bytes[..];
    let mut reader = ::csv::ReaderBuilder::new()
        .flexible(true)
        .delimiter(delimiter)
        .from_reader(bytes);
    let (mut index, mut fields) = match reader.byte_headers() {
        Ok(h) => (column_of(h, column), h.len()),
        Err(_) => (None, 0),
    };
    let mut has_headers = true;
    r.report.lines += 1; // the header row
    // A header written as the last comment (URLhaus's dumps:
    // `# id,dateadded,url,…`), when the first row names no such column:
    // that row is then data.
    if index.is_none()
        && let Some((commented, len)) = last_comment.and_then(|c| commented_header(c, column, delimiter))
    {
        index = Some(commented);
        fields = len;
        has_headers = false;
        r.report.lines -= 1; // counted with the comments
        reader = ::csv::ReaderBuilder::new()
            .flexible(true)
            .delimiter(delimiter)
            .has_headers(false)
            .from_reader(bytes);
    }
    // Rows that all carry a column the header does not name (one more
    // field each) are not shifted: only a row wider than most are is.
    let fields = fields.max(usual_row_width(bytes, has_headers, delimiter));
    let Some(index) = index else {
        let hint = other_delimiter(bytes, column, delimiter)
            .map(|d| {
                let d = char::from(d).escape_default();
                format!(" (the header row is separated by \"{d}\": set delimiter = \"{d}\")")
            })
            .unwrap_or_default();
        r.report
            .reject(b"<header>", format!("no column named {column:?}{hint}"));
        return;
    };
    for record in reader.byte_records() {
        r.report.lines += 1;
        match record {
            Ok(row) if is_comment_row(&row) => {}
            // Trailing empty fields (a comma at the end of each row) are
            // no shift.
            Ok(row) if row.iter().skip(fields).any(|f| !f.trim_ascii().is_empty()) => {
                r.report.reject(row.as_slice(), reason::CSV_MORE_FIELDS);
            }
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

/// Whether a row after the header is a comment: one field starting with
/// `#`, or a first field that is `#` followed by anything but a digit
/// (`# format version, 1.1`, `#source,https://feed.example/`, whose value
/// in the URL column would otherwise be listed). A first column of `#` and
/// a number (`#3,http://…`, a numbered row) is data.
fn is_comment_row(row: &::csv::ByteRecord) -> bool {
    let Some(first) = row.get(0).map(<[u8]>::trim_ascii_start) else {
        return false;
    };
    match first.strip_prefix(b"#") {
        None => false,
        Some(_) if row.len() == 1 => true,
        Some(rest) => !rest.first().is_some_and(u8::is_ascii_digit),
    }
}

/// How many fields most of the first [`WIDTH_SAMPLE`] rows have (the
/// smallest such count on a tie; 0 without rows).
fn usual_row_width(bytes: &[u8], has_headers: bool, delimiter: u8) -> usize {
    let mut reader = ::csv::ReaderBuilder::new()
        .flexible(true)
        .delimiter(delimiter)
        .has_headers(has_headers)
        .from_reader(bytes);
    let mut widths = std::collections::BTreeMap::<usize, usize>::new();
    for row in reader.byte_records().take(WIDTH_SAMPLE).flatten() {
        *widths.entry(row.len()).or_default() += 1;
    }
    let most = widths.values().copied().max().unwrap_or(0);
    widths
        .into_iter()
        .find(|&(_, n)| n == most)
        .map_or(0, |(width, _)| width)
}

/// How many rows [`usual_row_width`] reads.
const WIDTH_SAMPLE: usize = 100;

/// The position of the field named `column` (ignoring ASCII case and
/// surrounding white space) in a header row.
fn column_of(header: &::csv::ByteRecord, column: &str) -> Option<usize> {
    header
        .iter()
        .position(|f| f.trim_ascii().eq_ignore_ascii_case(column.as_bytes()))
}

/// The position of `column` in a comment line read as a header row (`#`s
/// and white space before it removed), and the header's length.
fn commented_header(comment: &[u8], column: &str, delimiter: u8) -> Option<(usize, usize)> {
    let text = comment.trim_ascii_start();
    let text = text.get(text.iter().take_while(|&&b| b == b'#').count()..)?;
    let text = unspaced_quotes(text.trim_ascii(), delimiter);
    let mut reader = ::csv::ReaderBuilder::new()
        .flexible(true)
        .delimiter(delimiter)
        .has_headers(false)
        .from_reader(&text[..]);
    let mut header = ::csv::ByteRecord::new();
    match reader.read_byte_record(&mut header) {
        // One field is a sentence, not a header (`# url list`).
        Ok(true) if header.len() > 1 => Some((column_of(&header, column)?, header.len())),
        _ => None,
    }
}

/// `bytes` without the white space between a field separator and a
/// quoted field (`"a", "b"`, as ThreatFox's CSV export writes every row):
/// a CSV reader takes a field quoted only when the quote comes first, and
/// would read ` "http://evil.example/a` of `"…", "http://evil.example/a,b"`
/// up to the comma inside the quotes. Only a quote that some later quote
/// closes ([`closes`], on its line or a later one: a quoted field may
/// hold line breaks) starts a quoted field so: a stray one that nothing
/// closes (`1, "http://evil.example/a,2020`) is the field's own character,
/// as the CSV reader reads it, where a quoted field would run on over the
/// rows after it to the end, and they would be lost with nothing
/// rejected. For the same reason a quote opening a field that nothing
/// closes (`1,"http://evil.example/a,2020`) gets a space before it, so
/// that the reader takes it as the field's own. Quotes inside a field stay
/// as they are; borrowed when there is nothing to change.
fn unspaced_quotes(bytes: &[u8], delimiter: u8) -> Cow<'_, [u8]> {
    /// Where the reader is in the CSV text.
    #[derive(Clone, Copy, PartialEq)]
    enum At {
        /// At the start of a field.
        FieldStart,
        /// Inside an unquoted field (or after a quoted one closed).
        Unquoted,
        /// Inside a quoted field.
        Quoted,
        /// Just after a quote inside a quoted field: its end, or the first
        /// of `""`.
        QuoteInQuoted,
    }
    let mut out: Option<Vec<u8>> = None;
    let mut at = At::FieldStart;
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        at = match (at, b) {
            (At::Quoted, b'"') => At::QuoteInQuoted,
            (At::Quoted, _) | (At::QuoteInQuoted, b'"') => At::Quoted,
            (At::FieldStart, b'"') if closes(bytes.get(i + 1..).unwrap_or_default(), delimiter) => At::Quoted,
            (At::FieldStart, b'"') => {
                // A space first (a tab when fields are separated by
                // spaces: a space would end the field, and the quote open
                // the next) makes the CSV reader take the quote as the
                // field's own; a URL value after it is read as one after
                // `, "` is (`clean::after_lone_quote`).
                out.get_or_insert_with(|| bytes.get(..i).unwrap_or_default().to_vec())
                    .push(if delimiter == b' ' { b'\t' } else { b' ' });
                At::Unquoted
            }
            // Columns padded with spaces (`id  url date`, `  1 http://…`)
            // when spaces separate them: a run of spaces is one separator,
            // and spaces that start a line separate nothing (as `awk` and
            // `cut -w` read such files). Else every space past the first
            // is an empty field, and a header padded otherwise than its
            // rows names the wrong column.
            (_, b' ')
                if delimiter == b' '
                    && (i == 0
                        || matches!(bytes.get(i - 1), Some(b'\n' | b'\r'))
                        || bytes.get(i + 1) == Some(&b' ')) =>
            {
                let run = bytes
                    .get(i..)
                    .unwrap_or_default()
                    .iter()
                    .take_while(|&&c| c == b' ')
                    .count();
                let out = out.get_or_insert_with(|| bytes.get(..i).unwrap_or_default().to_vec());
                let line_start = i == 0 || matches!(bytes.get(i - 1), Some(b'\n' | b'\r'));
                if !line_start {
                    out.push(b' ');
                }
                i += run;
                at = At::FieldStart;
                continue;
            }
            (_, b) if b == delimiter => {
                let spaces = white_before(bytes.get(i + 1..).unwrap_or_default(), delimiter);
                let quote = i + 1 + spaces;
                if spaces > 0
                    && bytes.get(quote) == Some(&b'"')
                    && closes(bytes.get(quote + 1..).unwrap_or_default(), delimiter)
                {
                    let out = out.get_or_insert_with(|| bytes.get(..i).unwrap_or_default().to_vec());
                    out.push(delimiter);
                    i += 1 + spaces;
                    at = At::FieldStart;
                    continue;
                }
                At::FieldStart
            }
            (_, b'\n' | b'\r') => At::FieldStart,
            _ => At::Unquoted,
        };
        if let Some(out) = &mut out {
            out.push(b);
        }
        i += 1;
    }
    out.map_or(Cow::Borrowed(bytes), Cow::Owned)
}

/// Whether a quoted field whose text starts `rest` (just after its opening
/// quote) is closed: its next quote that is not doubled is followed by
/// white space up to a `,`, a line end or the text's end. Only up to that
/// quote is read, so the whole text is scanned about once.
fn closes(rest: &[u8], delimiter: u8) -> bool {
    let mut i = 0;
    while let Some(at) = memchr::memchr(b'"', rest.get(i..).unwrap_or_default()) {
        let quote = i + at;
        if rest.get(quote + 1) == Some(&b'"') {
            i = quote + 2;
            continue;
        }
        let after = rest.get(quote + 1..).unwrap_or_default();
        let spaces = white_before(after, delimiter);
        return matches!(after.get(spaces), None | Some(b'\n' | b'\r'))
            || after.get(spaces) == Some(&delimiter);
    }
    false
}

/// How many spaces and tabs `bytes` starts with, but not the delimiter
/// (a tab between two tab-separated fields is an empty field).
fn white_before(bytes: &[u8], delimiter: u8) -> usize {
    bytes
        .iter()
        .take_while(|&&c| (c == b' ' || c == b'\t') && c != delimiter)
        .count()
}

/// Another common field separator (`;`, a tab, `|`) that splits the first
/// row of `bytes` into fields one of which is `column`: what a feed that
/// names no such column with `delimiter` most likely uses.
fn other_delimiter(bytes: &[u8], column: &str, delimiter: u8) -> Option<u8> {
    [b';', b'\t', b'|', b',']
        .into_iter()
        .filter(|&d| d != delimiter)
        .find(|&d| {
            let mut header = ::csv::ByteRecord::new();
            ::csv::ReaderBuilder::new()
                .flexible(true)
                .delimiter(d)
                .has_headers(false)
                .from_reader(bytes)
                .read_byte_record(&mut header)
                .is_ok_and(|read| read && header.len() > 1 && column_of(&header, column).is_some())
        })
}

#[cfg(test)]
mod tests {
    use blocksieve_format::FullHash;

    use crate::config::SourceFormat;
    use crate::sources::options::FormatOptions;
    use crate::sources::tests::hashes;
    use crate::sources::{ParseReport, cleaned, parse_source};

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

    fn unspaced(text: &[u8]) -> std::borrow::Cow<'_, [u8]> {
        super::unspaced_quotes(text, b',')
    }

    /// A comment row after the header with the delimiter in it was read as
    /// data: `# source, https://urlhaus.abuse.ch/` listed `urlhaus.abuse.ch/`
    /// host-wide, `# format version, 1.1` the address `1.0.0.1/`. A row
    /// whose first field is `#` then anything but a digit is a comment; a
    /// numbered row (`#3,…`) is still data.
    #[test]
    fn regression_a_comment_row_with_the_delimiter_is_no_data() {
        let text = b"id,url\n1,http://a.example/x\n# format version, 1.1\n# source, https://urlhaus.abuse.ch/\n## x, http://b.example/\n#,http://c.example/\n#source,https://e.example/\n#3,http://d.example/y\n";
        let (out, report) = read(text, None);
        assert_eq!(out, hashes(&["a.example/x", "d.example/y"]), "{report:?}");
        assert_eq!(report.rejected_total(), 0, "{report:?}");
    }

    /// With `delimiter = " "`, a header padded with two spaces
    /// (`id  url date`) named the wrong column: every URL was lost, and
    /// the dates and numbers beside them listed as IPv4 addresses. A run
    /// of spaces is one separator, and spaces that start a line none.
    #[test]
    fn regression_columns_padded_with_spaces_are_one_separator_apart() {
        let text = b"id  url       date\n1   http://a.example/x   1.1\n  22 http://b.example/y 2021\n3 \"http://c.example/z\"  1.1\n";
        let opts = FormatOptions {
            delimiter: Some(b' '),
            ..FormatOptions::default()
        };
        let mut out = Vec::new();
        let mut report = ParseReport::default();
        parse_source(text, SourceFormat::Csv, &opts, &mut report, |h| out.push(h));
        assert_eq!(
            out,
            hashes(&["a.example/x", "b.example/y", "c.example/z"]),
            "{report:?}"
        );
        assert_eq!(report.rejected_total(), 0, "{report:?}");
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
        assert_eq!(
            out,
            hashes(&[
                "1.2.3.4/bins/x.sh",
                "[::ffff:1.2.3.4]/bins/x.sh",
                "evil.example/a.exe"
            ])
        );
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

    /// ThreatFox's CSV export writes `", "` between fields: a CSV reader
    /// takes a field quoted only when its quote comes first, so a URL
    /// holding a comma was read up to it (`"http://evil.example/a`,
    /// published as a path no visit has, 0 rejected) and a `""` escape
    /// kept doubled. The white space before a quoted field is dropped.
    #[test]
    fn fields_quoted_after_a_space_are_read_as_quoted() {
        let export = br#"################################################################
# ThreatFox IOCs: CSV format                                   #
################################################################
#
# "first_seen_utc","ioc_id","ioc_value","ioc_type","threat_type","fk_malware","malware_alias","malware_printable","last_seen_utc","confidence_level","reference","tags","anonymous","reporter"
"2024-07-16 06:45:19", "1301611", "http://rocheholding.top/rudolph/five/fre.php", "url", "botnet_cc", "win.lokipws", "Burkina,Loki,LokiBot,LokiPWS", "Loki Password Stealer (PWS)", "2024-07-16 08:11:39", "75", "https://bazaar.abuse.ch/sample/d5/", "lokibot", "0", "abuse_ch"
"2024-07-16 05:25:36", "1301612", "http://evil.example/a,b.php?x=1,2", "url", "botnet_cc", "x", "", "X", "", "100", "None", "", "0", "abuse_ch"
"2024-07-16 05:25:36", "1301614", "http://q.example/p?a=""b""", "url", "botnet_cc", "x", "", "X", "", "100", "None", "", "0", "abuse_ch"
"2024-07-16 05:25:36",	"1301615", "evil-domain.example", "domain", "botnet_cc", "x", "", "X", "", "100", "None", "a, b", "0", "abuse_ch"
"#;
        let (out, report) = read(export, Some("ioc_value"));
        assert_eq!(
            out,
            hashes(&[
                "rocheholding.top/rudolph/five/fre.php",
                "evil.example/a,b.php?x=1,2",
                "q.example/p?a=\"b\"",
                "evil-domain.example/",
            ])
        );
        assert_eq!(report.rejected_total(), 0, "{report:?}");
        // Unquoted fields and quotes inside a field are left as they are.
        assert_eq!(&*unspaced(b"a, b,c"), b"a, b,c");
        assert_eq!(&*unspaced(b"a,x \"q\", \"z\""), b"a,x \"q\",\"z\"");
        assert_eq!(
            &*unspaced(b"\"a, \"\"b\"\", \"\"c\"\"\", \"d\""),
            b"\"a, \"\"b\"\", \"\"c\"\"\",\"d\""
        );
    }

    /// A row with more non-empty fields than the header: a comma outside
    /// quotes shifted its columns. It was read as if aligned, listing
    /// another column's value (`amazon.com/`, the brand a phishing page
    /// targets) or a piece of the URL, with nothing rejected; it is now
    /// refused, saying why. Empty fields at the end (a comma closing each
    /// row) shift nothing, and neither does a column every row has and the
    /// header does not name.
    #[test]
    fn a_row_with_more_fields_than_the_header_is_refused() {
        let csv = b"id,target,url,date\n\
1,Amazon,amazon.com,http://evil.example/,2020\n\
2,Bank,http://evil2.example/a,b.php,2020\n\
3,Shop,http://evil3.example/x,2020,,\n\
4,Mail,http://evil4.example/y,2020\n\
5,Pay,http://evil5.example/z,2020\n";
        let (out, report) = read(csv, None);
        assert_eq!(
            out,
            hashes(&["evil3.example/x", "evil4.example/y", "evil5.example/z"])
        );
        assert_eq!(report.rejected_total(), 2, "{report:?}");
        assert_eq!(
            report.rejected.get(super::reason::CSV_MORE_FIELDS),
            Some(&2),
            "{report:?}"
        );
        // Every row with a column the header does not name: not a shift,
        // read as before; a row wider still is.
        let csv = b"id,url\n\
1,http://a.example/x,2020-01-01\n\
2,http://b.example/y,2020-01-02\n\
3,http://c.example/z,w,2020-01-03\n\
4,http://d.example/v,2020-01-04\n";
        let (out, report) = read(csv, None);
        assert_eq!(out, hashes(&["a.example/x", "b.example/y", "d.example/v"]));
        assert_eq!(report.rejected.get(super::reason::CSV_MORE_FIELDS), Some(&1));
        assert_eq!(report.rejected_total(), 1, "{report:?}");
    }

    /// The comment block before the header ends lines as the CSV reader
    /// does (LF, CR LF, a lone CR), and blank lines in or before it are
    /// skipped: a dump written with CR line ends, or starting with a blank
    /// line, was refused whole (`no column named "url"`) though its
    /// commented header names the column.
    #[test]
    fn a_comment_block_with_cr_line_ends_or_blank_lines_is_skipped() {
        for dump in [
            &b"# abuse.ch\r# id,url\r1,http://a.example/x\r2,http://b.example/y\r"[..],
            b"\n\n# abuse.ch\r\n\r\n# id,url\r\n1,http://a.example/x\r\n2,http://b.example/y\r\n",
            b"  \n# id,url\n1,http://a.example/x\n2,http://b.example/y\n",
        ] {
            let (out, report) = read(dump, None);
            assert_eq!(
                out,
                hashes(&["a.example/x", "b.example/y"]),
                "{}: {report:?}",
                dump.escape_ascii()
            );
            assert_eq!(report.rejected_total(), 0, "{report:?}");
        }
    }
    /// A quote after `, ` that nothing closes on its line (a stray one in a
    /// title column) made the rows after it one quoted field, read up to the
    /// next quote or the end of the feed: `c.example/z` and `d.example/w`
    /// were lost and nothing rejected. Such a quote is the field's own, as
    /// the CSV reader takes it without the white space.
    #[test]
    fn regression_a_stray_quote_after_a_space_loses_no_rows() {
        let csv = b"id,url,title,date\n\
1,http://a.example/x,Mail,2020\n\
2,http://b.example/y, \"Bank login,2020\n\
3,http://c.example/z,Shop,2020\n\
4,http://d.example/w,Pay,2020\n";
        let (out, report) = read(csv, None);
        assert_eq!(
            out,
            hashes(&["a.example/x", "b.example/y", "c.example/z", "d.example/w"]),
            "{report:?}"
        );
        assert_eq!(report.lines, 5, "{report:?}");
        assert_eq!(report.rejected_total(), 0, "{report:?}");
        // A quoted field that closes, maybe before white space, is still
        // read as quoted, also over line breaks; one whose next quote is
        // followed by more text is not.
        assert_eq!(&*unspaced(b"1, \"a,b\" \n2"), b"1,\"a,b\" \n2");
        assert_eq!(&*unspaced(b"1, \"a,b\n\""), b"1,\"a,b\n\"");
        assert_eq!(&*unspaced(b"1, \"a\"b\",c"), b"1, \"a\"b\",c");
        // A multi-line quoted field after `, ` loses no row (the rule
        // above, closing on its own line only, lost the URL beside it).
        let multi =
            b"id, desc, url\n1, \"line1\nline2\", http://evil.example/a\n2, \"x\", http://evil.example/b\n";
        let (out, report) = read(multi, None);
        assert_eq!(out, hashes(&["evil.example/a", "evil.example/b"]), "{report:?}");
        assert_eq!(report.rejected_total(), 0, "{report:?}");
    }

    /// A quote opening a field that nothing closes (a stray one in a
    /// title, or before a URL, with no white space before it) made the
    /// CSV reader read every row after it as that one field, to the end of
    /// the feed: the URLs of those rows were lost with nothing rejected
    /// (one row refused, or none). Such a quote is the field's own
    /// character; a quoted field that closes, on its line or a later one,
    /// is read as before.
    #[test]
    fn regression_an_unclosed_quote_opening_a_field_loses_no_rows() {
        let csv = b"id,url,title,date\n\
1,http://a.example/x,\"Bank login,2020\n\
2,\"http://b.example/y,Mail,2020\n\
3,http://c.example/z,Shop,2020\n\
4,http://d.example/w,\"Pay, \"\"card\"\"\",2020\n\
5,http://e.example/v,\"two\nlines\",2020\n\
6,http://f.example/u,Last,2020\n";
        let (out, report) = read(csv, None);
        assert_eq!(
            out,
            hashes(&[
                "a.example/x",
                "b.example/y",
                "c.example/z",
                "d.example/w",
                "e.example/v",
                "f.example/u",
            ]),
            "{report:?}"
        );
        assert_eq!(report.rejected_total(), 0, "{report:?}");
        assert_eq!(report.cleaned.get(cleaned::WRAPPER), Some(&1), "{report:?}");
        // The last field of the feed, and a quote whose next quote is
        // followed by more text (no close), are the field's own too.
        let (out, report) = read(b"id,url\n1,\"http://a.example/x\n2,http://b.example/y\n", None);
        assert_eq!(out, hashes(&["a.example/x", "b.example/y"]), "{report:?}");
        assert_eq!(&*unspaced(b"1,\"a\nb,\"c\""), b"1, \"a\nb,\"c\"");
        assert_eq!(&*unspaced(b"\"a,b\"\n\"c\""), b"\"a,b\"\n\"c\"");
    }

    /// Well-formed CSV, as a CSV writer quotes it, is read unchanged:
    /// every quote opening a field closes.
    #[test]
    fn well_formed_csv_is_left_as_written() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand::rngs::StdRng::seed_from_u64(18);
        let alphabet: &[u8] = b"ab\",;|\t\n\r #";
        for round in 0..2_000 {
            let delimiter = [b',', b';', b'\t', b'|'][round % 4];
            let style = if round % 8 < 4 {
                ::csv::QuoteStyle::Always
            } else {
                ::csv::QuoteStyle::Necessary
            };
            let mut writer = ::csv::WriterBuilder::new()
                .flexible(true)
                .delimiter(delimiter)
                .quote_style(style)
                .from_writer(Vec::new());
            for _ in 0..rng.gen_range(1..5) {
                let row: Vec<Vec<u8>> = (0..rng.gen_range(1..5))
                    .map(|_| {
                        (0..rng.gen_range(0..8))
                            .map(|_| alphabet[rng.gen_range(0..alphabet.len())])
                            .collect()
                    })
                    .collect();
                writer.write_record(&row).unwrap();
            }
            let text = writer.into_inner().unwrap();
            assert!(
                matches!(
                    super::unspaced_quotes(&text, delimiter),
                    std::borrow::Cow::Borrowed(_)
                ),
                "{}",
                text.escape_ascii()
            );
        }
    }

    /// A feed separated by `;`, a tab or `|` (`delimiter`) is read as a
    /// comma-separated one is, its quotes included; read with the wrong
    /// one, its refusal says which separator the header row uses.
    #[test]
    fn a_csv_with_another_delimiter_is_read_and_a_wrong_one_is_named() {
        let semi = b"id;url;title\n1;\"http://a.example/x;y\";Mail\n2; \"http://b.example/z\";Bank, Inc\n3;http://c.example/w;\"stray\n";
        let tab = b"# id\turl\n1\t\thttp://a.example/x\n2\t\"\"\thttp://b.example/z\n";
        let read_with = |csv: &[u8], delimiter: u8, column: &str| {
            let opts = FormatOptions {
                column: Some(column.to_owned()),
                delimiter: Some(delimiter),
                ..FormatOptions::default()
            };
            let mut out = Vec::new();
            let mut report = ParseReport::default();
            parse_source(csv, SourceFormat::Csv, &opts, &mut report, |h| out.push(h));
            (out, report)
        };
        let (out, report) = read_with(semi, b';', "url");
        assert_eq!(
            out,
            hashes(&["a.example/x;y", "b.example/z", "c.example/w"]),
            "{report:?}"
        );
        assert_eq!(report.rejected_total(), 0, "{report:?}");
        // Two tabs are an empty field between them, not white space.
        let (out, report) = read_with(tab, b'\t', "url");
        assert!(out.is_empty(), "{report:?}");
        let tab = b"# id\tx\turl\n1\t\thttp://a.example/x\n2\t\"\"\thttp://b.example/z\n";
        let (out, report) = read_with(tab, b'\t', "url");
        assert_eq!(out, hashes(&["a.example/x", "b.example/z"]), "{report:?}");
        assert_eq!(report.rejected_total(), 0, "{report:?}");
        // Read with commas, the refusal names the separator to set.
        let (out, report) = read(semi, None);
        assert!(out.is_empty());
        assert_eq!(
            report.samples.first().map(|(_, reason)| reason.as_str()),
            Some("no column named \"url\" (the header row is separated by \";\": set delimiter = \";\")"),
            "{report:?}"
        );
        let (_, report) = read(b"id\turl\n1\thttp://a.example/x\n", None);
        assert!(
            report
                .samples
                .first()
                .is_some_and(|(_, reason)| reason.ends_with("set delimiter = \"\\t\")")),
            "{report:?}"
        );
        // Separated by spaces, an unclosed quote opening a field is the
        // field's own too: the space put before it to say so was read as
        // one more separator, and the quote opened a field running over
        // every row after it.
        let (out, report) = read_with(
            b"id url date\n1 \"http://a.example/x 2020\n2 http://b.example/y 2020\n",
            b' ',
            "url",
        );
        assert_eq!(out, hashes(&["a.example/x", "b.example/y"]), "{report:?}");
        assert_eq!(report.rejected_total(), 0, "{report:?}");
        // A header with no such column under any separator says no more.
        let (_, report) = read(b"id;link\n1;http://a.example/x\n", None);
        assert_eq!(
            report.samples.first().map(|(_, reason)| reason.as_str()),
            Some("no column named \"url\""),
            "{report:?}"
        );
    }

    /// A domain value written as a wildcard (`*.evil.example`, as DNS
    /// firewall and indicator exports write every subdomain of a name) was
    /// listed as the host `*.evil.example`, which no visit to
    /// `evil.example` or its subdomains has among its expressions: nothing
    /// was rejected and none of them was found. It is the name after the
    /// `*.`, as a `domains` line's is.
    #[test]
    fn regression_a_wildcard_domain_value_lists_its_domain() {
        let csv = b"id,url\n1,*.evil.example\n2,*.files.example/dl/x.exe\n3,http://c.example/p\n";
        let (out, report) = read(csv, None);
        assert_eq!(
            out,
            hashes(&["evil.example/", "files.example/dl/x.exe", "c.example/p"]),
            "{report:?}"
        );
        assert_eq!(report.rejected_total(), 0, "{report:?}");
        // A wildcard on a public suffix is still refused.
        let (out, report) = read(b"id,url\n1,*.co.uk\n", None);
        assert!(out.is_empty());
        assert_eq!(report.rejected_total(), 1, "{report:?}");
    }

    /// A URL value with a lone opening quote (after white space the CSV
    /// reader takes it as the value's own) listed the host `"http`, a page
    /// no browser visits; it is read as the URL after the quote, as a
    /// `urls` line is. A quote inside a URL, or one closed, is left alone.
    #[test]
    fn regression_a_lone_quote_before_a_url_value_is_read_past() {
        let csv = b"id,url,date\n1, \"http://a.example/x,2020\n2,'https://b.example/y,2020\n3,http://c.example/p\"q,2020\n";
        let (out, report) = read(csv, None);
        assert_eq!(
            out,
            hashes(&["a.example/x", "b.example/y", "c.example/p\"q"]),
            "{report:?}"
        );
        assert_eq!(report.cleaned.get(cleaned::WRAPPER), Some(&2), "{report:?}");
    }
}
