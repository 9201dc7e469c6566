//! Bodies of the fuzz targets in `fuzz/` for the untrusted input the
//! publisher parses: feed content as received (compressed, archived),
//! feed lines and full-hash requests (the snapshot
//! target's body is `blocksieve_format::fuzzing::check_snapshot`). Each
//! target is a one-line shim over a function here, and the unit tests below
//! call the same functions on the seed corpora's kind of input, so a fuzz
//! finding reproduces with `cargo test`. Not a stable API.
//!
//! Every function panics, with the input, when an invariant does not hold:
//! that is what the fuzzer looks for. Errors are expected and fine.

use crate::config::SourceFormat;
use crate::fetch::{ContentEncoding, decoder, is_archive, member_head, read_member, unsupported};
use crate::server::{parse_request_prefix, parse_search_request};
use crate::sources::{
    EntryOutcome, FormatOptions, MAX_AMP_LEVELS, ParseReport, REJECT_SAMPLES, feed_lines, parse_source,
    read_line,
};

/// The source format the first byte of a feed fuzz input selects, in
/// [`SourceFormat::ALL`] order.
pub fn feed_format(selector: u8) -> SourceFormat {
    SourceFormat::ALL[usize::from(selector) % SourceFormat::ALL.len()]
}

/// Feed parsing: the first byte of `data` selects the format
/// ([`feed_format`]; its top bit also sets the CSV column and JSON key to
/// non-defaults, and the CSV delimiter by its two bits below), the rest is the feed, parsed with [`parse_source`]. Every
/// accepted entry must emit at least one full hash (each reading one, or
/// for a URL written with `&amp;` one per level of decoding, at most
/// [`MAX_AMP_LEVELS`] + 2, and one more for an IPv6 host written with an
/// embedded IPv4 address), line formats must count every line, the
/// report must keep at most [`REJECT_SAMPLES`] samples, and for line
/// formats [`read_line`] over each line must find exactly the entries,
/// rejections and full hashes the build did.
///
/// # Panics
///
/// When an invariant does not hold.
pub fn check_feed(data: &[u8]) {
    let Some((&selector, feed)) = data.split_first() else {
        return;
    };
    let format = feed_format(selector);
    let options = if selector & 0x80 == 0 {
        FormatOptions::default()
    } else {
        FormatOptions {
            column: Some("URL".to_owned()),
            delimiter: Some([b',', b';', b'\t', b'|'][usize::from((selector >> 5) & 3)]),
            json_key: Some("fuzz".to_owned()),
            json_key_optional: true,
        }
    };
    let mut report = ParseReport::default();
    let mut emitted = Vec::new();
    parse_source(feed, format, &options, &mut report, |h| emitted.push(h));
    let emitted_count = emitted.len() as u64;
    let broken = |rule: &str| -> ! {
        panic!(
            "{rule} ({format:?}): {report:?}, {emitted_count} hashes emitted\ninput: {:?}",
            feed.escape_ascii().to_string()
        )
    };
    if emitted_count < report.accepted {
        broken("each accepted entry emits at least one full hash");
    }
    if report.samples.len() > REJECT_SAMPLES {
        broken("too many rejection samples kept");
    }
    if !matches!(format, SourceFormat::Csv | SourceFormat::Json) {
        let lines = feed_lines(feed).count() as u64;
        if report.lines != lines {
            broken("line formats count every line once");
        }
        // A hosts-file line holds several names, also in an adblock list.
        let one_entry_a_line = !matches!(format, SourceFormat::Hosts | SourceFormat::AdblockHosts);
        if one_entry_a_line && report.accepted + report.rejected_total() > lines {
            broken("one line is at most one entry");
        }
        // The per-line reader finds what the build found, line by line.
        let (mut accepted, mut rejected, mut hashes) = (0u64, 0u64, Vec::new());
        for line in feed_lines(feed) {
            for entry in read_line(format, line).entries {
                match entry {
                    EntryOutcome::Accepted(readings) => {
                        accepted += 1;
                        if readings.is_empty() {
                            broken("an accepted entry has a reading");
                        }
                        for r in readings {
                            // One expression, or for a URL with `&amp;` one
                            // per level of decoding: the line as written, the
                            // first `MAX_AMP_LEVELS` levels, the whole; one
                            // more for a defanged URL's path refanged too;
                            // for an IPv6 host, each also on its other
                            // form (dotted or hexadecimal).
                            if !(1..=2 * (MAX_AMP_LEVELS + 4)).contains(&r.full_hashes.len()) {
                                broken(
                                    "a reading publishes one full hash, or one per `&amp;` level, IPv6 form and refanged path",
                                );
                            }
                            hashes.extend(r.full_hashes);
                        }
                    }
                    EntryOutcome::Rejected { .. } => rejected += 1,
                }
            }
        }
        if accepted != report.accepted || rejected != report.rejected_total() || hashes != emitted {
            broken("read_line finds what the build found");
        }
    }
}

/// The full-hash API's request parsing: `data` as the body of `POST
/// /v1/hashes:search` ([`parse_search_request`], limit 1,000 prefixes) and
/// as the `{prefix}` of `GET /v1/hashes/{prefix}` ([`parse_request_prefix`]).
/// Errors must be 4xx; accepted prefixes number 1 to 1,000 and print back
/// to text that parses to the same prefix.
///
/// # Panics
///
/// When an invariant does not hold.
pub fn check_search_request(data: &[u8]) {
    match parse_search_request(data, 1000) {
        Ok(prefixes) => {
            assert!(
                (1..=1000).contains(&prefixes.len()),
                "{} prefixes accepted",
                prefixes.len()
            );
            for p in prefixes {
                let text = p.to_string();
                assert_eq!(
                    parse_request_prefix(&text).ok(),
                    Some(p),
                    "{text:?} does not round-trip"
                );
            }
        }
        Err(e) => assert!(
            e.status().is_client_error(),
            "{} {} for {:?}",
            e.status(),
            e.code(),
            data.escape_ascii().to_string()
        ),
    }
    if let Ok(text) = std::str::from_utf8(data) {
        match parse_request_prefix(text) {
            Ok(p) => assert_eq!(p.to_string(), text, "prefix {text:?} printed back differently"),
            Err(e) => assert!(e.status().is_client_error()),
        }
    }
}

/// Content as received, decoded as a build decodes it: its magic number
/// picks the decompression ([`ContentEncoding::sniff`]), then the archive's
/// one file or the content itself ([`read_member`]), at most 4 MiB of it
/// decoded; the checks before a build ([`member_head`], [`unsupported`])
/// run on its start. Errors are fine; a panic, a hang or memory beyond the
/// fuzzer's limit is not. Content with no magic number (of a format read
/// or refused) and no archive header must come out as it went in.
///
/// # Panics
///
/// When an invariant does not hold.
pub fn check_content_decode(data: &[u8]) {
    use std::io::Read as _;
    let _ = unsupported(data);
    let encoding = ContentEncoding::sniff(data);
    let mut decoded_head = Vec::new();
    if let Ok(decoder) = decoder(data, encoding) {
        let _ = decoder.take(64 * 1024).read_to_end(&mut decoded_head);
    }
    let _ = member_head(&decoded_head, None);
    let Ok(decoder) = decoder(data, encoding) else {
        return;
    };
    let read = read_member(decoder.take(4 << 20), None, |member| {
        let mut out = Vec::new();
        member.take(4 << 20).read_to_end(&mut out)?;
        Ok(out)
    });
    let plain = encoding == ContentEncoding::Identity && !is_archive(data) && unsupported(data).is_none();
    if plain && read.as_deref().ok() != Some(data) {
        panic!(
            "plain content read back changed\ninput: {:?}",
            data.escape_ascii().to_string()
        );
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// The committed seed corpus of fuzz target `target`.
    fn corpus(target: &str) -> Vec<Vec<u8>> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("../fuzz/corpus")
            .join(target);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .map(|d| d.flatten().map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        files
            .iter()
            .map(|f| std::fs::read(f).unwrap_or_default())
            .collect()
    }

    #[test]
    fn seed_corpora_pass_the_checks() {
        let feeds = corpus("feed_parse");
        assert!(!feeds.is_empty(), "feed seeds missing");
        for data in &feeds {
            check_feed(data);
        }
        let contents = corpus("feed_decode");
        assert!(!contents.is_empty(), "content seeds missing");
        for data in &contents {
            check_content_decode(data);
        }
        let requests = corpus("full_hash_request");
        assert!(!requests.is_empty(), "request seeds missing");
        for data in &requests {
            check_search_request(data);
        }
    }

    /// The content seeds, made by the real tools (gzip, bzip2, xz, zstd,
    /// GNU tar in its ustar, v7, GNU long-name and pax formats, Info-ZIP's zip
    /// to a file and to a pipe, which writes data descriptors), read as the
    /// plain file they hold; two files or a 7z are refused.
    #[test]
    fn content_made_by_real_tools_reads_as_its_plain_file() {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/feed_decode");
        let plain = std::fs::read(dir.join("plain")).unwrap();
        for name in [
            "urls.gz",
            "urls.bz2",
            "urls.xz",
            "urls.zst",
            "ustar.tar",
            "v7.tar",
            "gnu-longname.tar.gz",
            "pax.tar.xz",
            "urls.zip",
            "stream.zip",
        ] {
            let data = std::fs::read(dir.join(name)).unwrap();
            let decoded = decoder(data.as_slice(), ContentEncoding::sniff(&data)).unwrap();
            let read = read_member(decoded, None, |member| {
                let mut out = Vec::new();
                member.read_to_end(&mut out)?;
                Ok(out)
            });
            assert_eq!(read.unwrap(), plain, "{name}");
        }
        let data = std::fs::read(dir.join("two-files.tar")).unwrap();
        let error = read_member(data.as_slice(), None, |_| Ok(()))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("tar archive holds several files (urls.txt, more.txt)"),
            "{error}"
        );
        assert!(unsupported(&std::fs::read(dir.join("7z-signature")).unwrap()).is_some());
    }

    /// A hosts-file line in an adblock list holds several names, each an
    /// entry (found by `feed_parse` once such lines were read there): the
    /// check allowed more entries than lines for `hosts` only.
    #[test]
    fn regression_an_adblock_lists_hosts_line_of_several_names_passes_the_checks() {
        let format = SourceFormat::ALL
            .iter()
            .position(|&f| f == SourceFormat::AdblockHosts)
            .and_then(|i| u8::try_from(i).ok())
            .unwrap();
        check_feed(
            &[
                &[format][..],
                b"0.0.0.0 a.example b.example c.example\n||d.example^\n",
            ]
            .concat(),
        );
    }

    #[test]
    fn feed_lines_of_every_format_pass_the_checks() {
        let feeds: [&[u8]; 7] = [
            b"http://a.example/x?y=1&amp;z=2\nhttp://https://b.example/\n\n# c\nnot a url\n",
            b"0.0.0.0 a.example b.example # x\n127.0.0.1 localhost\n0.0.0.0\n",
            b"*.a.example\ncom\nfoo/bar\n",
            b"||a.example^\n||b.example/x^$all\n@@||c.example^\n! c\n",
            b"id,URL\n1,http://a.example/\n2,\n\"3\n",
            br#"{"blacklist": ["a.example", 7], "fuzz": ["b.example"]}"#,
            b"0000000000000000000000000000000000000000000000000000000000000000\nzz\n",
        ];
        for (i, feed) in feeds.iter().enumerate() {
            for selector in [i as u8, i as u8 | 0x80] {
                let mut data = vec![selector];
                data.extend_from_slice(feed);
                check_feed(&data);
            }
        }
        check_feed(b"");
        check_feed(b"\x00");
    }

    #[test]
    fn search_requests_good_and_bad_pass_the_checks() {
        for body in [
            &br#"{"prefixes": ["ab", "abcdef01", "abc"]}"#[..],
            br#"{"prefixes": []}"#,
            br#"{"prefixes": ["AB"]}"#,
            br#"{"prefixes": "ab"}"#,
            b"{",
            b"ab",
            b"abcdef012",
            b"",
        ] {
            check_search_request(body);
        }
        let many = format!("{{\"prefixes\": [{}]}}", vec!["\"ab\""; 1001].join(","));
        check_search_request(many.as_bytes());
    }
}
