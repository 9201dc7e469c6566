//! The streamed, parallel read gives what one sequential pass over the
//! whole decoded document gives: the same hashes in the same order, the
//! same counts and the same reject samples.

use std::io::Write as _;

use super::*;
use crate::sources::{feed_lines, parse_source};
use crate::storage::StoredCopyError;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(bytes).unwrap();
    encoder.finish().unwrap()
}

/// One pass over the whole document, on this thread.
fn sequential(bytes: &[u8], format: SourceFormat, options: &FormatOptions) -> (Vec<FullHash>, ParseReport) {
    let mut report = ParseReport::default();
    let mut hashes = Vec::new();
    parse_source(bytes, format, options, &mut report, |h| hashes.push(h));
    (hashes, report)
}

/// The copy kept: its encoding and its bytes.
#[derive(Debug)]
struct KeptBytes {
    encoding: ContentEncoding,
    bytes: Vec<u8>,
}

fn read(
    content: Content,
    config: &SourceConfig,
) -> Result<(Vec<FullHash>, ParseReport, Option<KeptBytes>), String> {
    read_keeping(content, KeepTo::memory(), config)
}

fn read_keeping(
    content: Content,
    keep_to: KeepTo,
    config: &SourceConfig,
) -> Result<(Vec<FullHash>, ParseReport, Option<KeptBytes>), String> {
    let passes = Passes {
        config,
        cancel: &Cancel::default(),
        entries: FormatOptions::default(),
        allow_array: None,
    };
    let (mut out, mut allowed) = (Vec::new(), Vec::new());
    let read = read_content(content, keep_to, &passes, &mut out, &mut allowed)?;
    assert!(allowed.is_empty());
    let kept = read.kept.map(|kept| KeptBytes {
        encoding: kept.encoding,
        bytes: kept.copy.unwrap().contents().unwrap(),
    });
    Ok((out, read.entries.report, kept))
}

/// Several blocks of a `urls` feed with every kind of line, rejects spread
/// thin (so the ten samples come from several blocks), CRLF and lone-CR
/// line ends, a byte-order mark, quotes, columns, comments, and no final
/// line feed.
fn fixture() -> Vec<u8> {
    let mut feed = Vec::new();
    for i in 0..60_000u32 {
        let line: Vec<u8> = match i % 20 {
            0 if i % 6_000 == 0 => format!("not a url {i}").into_bytes(),
            1 if i % 7_000 == 1 => b"http://com/".to_vec(),
            2 => format!("\u{feff}http://bom.example/{i}\r").into_bytes(),
            3 => format!("\"http://quoted.example/{i},x\",2020-01-01").into_bytes(),
            4 => format!("http://tab.example/{i}\t2020").into_bytes(),
            5 => format!("http://a.example/{i}\rhttp://b.example/{i}").into_bytes(),
            6 => b"# a comment".to_vec(),
            7 => Vec::new(),
            8 => format!("http://space.example/a b{i}").into_bytes(),
            9 => format!("http://amp.example/?a=1&amp;b={i} # seen").into_bytes(),
            _ => format!("https://host{}.example/path/{i}?q={i}", i % 97).into_bytes(),
        };
        feed.extend_from_slice(&line);
        feed.push(b'\n');
    }
    feed.extend_from_slice(b"http://last.example/no-line-feed");
    feed
}

#[test]
fn a_feed_read_in_parallel_blocks_is_read_as_in_one_pass() {
    let feed = fixture();
    assert!(feed.len() > 4 * BLOCK_BYTES, "{}", feed.len());
    let config = SourceConfig::file("feed.txt", SourceFormat::Urls);
    let (hashes, report) = sequential(&feed, SourceFormat::Urls, &FormatOptions::default());
    assert!(report.samples.len() == REJECT_SAMPLES_SEEN && report.rejected_total() > 10);
    // More threads than cores: blocks finish out of order.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(5).build().unwrap();
    let (out, parallel, kept) = pool
        .install(|| read(Content::Fresh(feed.clone()), &config))
        .unwrap();
    assert_eq!(parallel, report);
    assert!(out == hashes, "hashes differ from one pass's");
    // Received plain and held in memory: kept as zstd of what was received.
    let kept = kept.unwrap();
    assert_eq!(kept.encoding, ContentEncoding::Zstd);
    assert_eq!(zstd::stream::decode_all(kept.bytes.as_slice()).unwrap(), feed);
    assert!(kept.bytes.len() * 3 < feed.len());
}

const REJECT_SAMPLES_SEEN: usize = crate::sources::REJECT_SAMPLES;

#[test]
fn sources_read_at_once_on_one_pool_thread_each_read_as_in_one_pass() {
    // The parse threads are each source's own: two sources read at once,
    // from two rayon tasks of a one-thread pool, neither waits for the
    // other's whole source (nor for a pool thread the other holds).
    let feed = fixture();
    let gz = gzip(&feed);
    let config = SourceConfig::file("feed.txt", SourceFormat::Urls);
    let expected = sequential(&feed, SourceFormat::Urls, &FormatOptions::default());
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let (plain, gzipped) = pool.install(|| {
        rayon::join(
            || read(Content::Fresh(feed.clone()), &config),
            || read(Content::Fresh(gz.clone()), &config),
        )
    });
    for read in [plain, gzipped] {
        let (out, report, _) = read.unwrap();
        assert!(
            (&out, &report) == (&expected.0, &expected.1),
            "differs from one pass"
        );
    }
}

#[test]
fn gzip_is_streamed_and_kept_as_received() {
    let feed = fixture();
    let gz = gzip(&feed);
    let config = SourceConfig::file("feed.txt.gz", SourceFormat::Urls);
    let expected = sequential(&feed, SourceFormat::Urls, &FormatOptions::default());

    let (out, report, kept) = read(Content::Fresh(gz.clone()), &config).unwrap();
    assert_eq!((out, report), expected);
    let kept = kept.unwrap();
    assert_eq!((kept.encoding, kept.bytes == gz), (ContentEncoding::Gzip, true));

    // A file: read as it streams, its bytes kept as they came.
    let stream = Stream {
        reader: Box::new(Cursor::new(gz.clone())),
        encoding: ContentEncoding::Gzip,
        size: gz.len() as u64,
        validators: Default::default(),
    };
    let (out, report, kept) = read(Content::Stream(stream), &config).unwrap();
    assert_eq!((out, report), expected);
    let kept = kept.unwrap();
    assert_eq!((kept.encoding, kept.bytes == gz), (ContentEncoding::Gzip, true));

    // Written to the data directory as it is read, through its own thread.
    let dir = tempfile::tempdir().unwrap();
    let storage = crate::storage::LocalStorage::open(dir.path()).unwrap();
    for plain in [false, true] {
        let bytes = if plain { feed.clone() } else { gz.clone() };
        let stream = Stream {
            size: bytes.len() as u64,
            reader: Box::new(Cursor::new(bytes)),
            encoding: if plain {
                ContentEncoding::Identity
            } else {
                ContentEncoding::Gzip
            },
            validators: Default::default(),
        };
        let storage = storage.clone();
        let keep_to = KeepTo::deferred(move || crate::storage::Storage::stage(&storage, "sources/l"));
        let (out, report, kept) = read_keeping(Content::Stream(stream), keep_to, &config).unwrap();
        assert_eq!((out, report), expected);
        let kept = kept.unwrap();
        let decoded = if plain {
            // Written to a file: kept as received.
            assert_eq!(kept.encoding, ContentEncoding::Identity);
            kept.bytes.clone()
        } else {
            assert_eq!((kept.encoding, &kept.bytes), (ContentEncoding::Gzip, &gz));
            feed.clone()
        };
        assert_eq!(decoded, feed);
    }
    // Each staged copy was dropped uncommitted: nothing of it is left.
    assert!(
        crate::storage::Storage::list(&storage, "sources/l")
            .unwrap()
            .is_empty()
    );

    // Two gzip members (`cat a.gz b.gz`) read as one.
    let (head, tail) = feed.split_at(feed.len() / 3);
    let members = [gzip(head), gzip(tail)].concat();
    let (out, report, _) = read(Content::Fresh(members), &config).unwrap();
    assert_eq!((out, report), expected);
}

#[test]
fn every_stored_encoding_reads_back_the_same_and_is_not_kept_again() {
    let feed = fixture();
    let config = SourceConfig::file("feed.txt", SourceFormat::Urls);
    let expected = sequential(&feed, SourceFormat::Urls, &FormatOptions::default());
    for (bytes, encoding) in [
        // Plain: a copy written to a file (and by versions before copies
        // were compressed).
        (feed.clone(), ContentEncoding::Identity),
        (gzip(&feed), ContentEncoding::Gzip),
        (
            zstd::stream::encode_all(feed.as_slice(), 1).unwrap(),
            ContentEncoding::Zstd,
        ),
    ] {
        let reader = Box::new(Cursor::new(bytes));
        let (out, report, kept) = read(Content::Cached { reader, encoding }, &config).unwrap();
        assert_eq!((out, report), expected, "{encoding:?}");
        assert!(kept.is_none());
    }
}

/// Feeds as maintainers ship them — bzip2, xz and zstd as well as gzip, a
/// tar archive of one file (plain or compressed), a zip archive — read as
/// the plain feed: fresh from memory (a response) and as a stream (a
/// file), kept as received, and read back the same from that kept copy
/// when a later build falls back to it. A tar read as text lost each
/// member's first line to the header joined to it.
#[test]
fn every_shipped_form_reads_as_the_plain_feed_fresh_and_from_its_kept_copy() {
    use crate::fetch::decode_shipped::{ENCODINGS, compressed, tar_of, zip_of};
    let feed = fixture();
    let config = SourceConfig::file("feed", SourceFormat::Urls);
    let expected = sequential(&feed, SourceFormat::Urls, &FormatOptions::default());
    let tar = tar_of(&[("list/", b""), ("list/urls.txt", &feed)]);
    let mut forms: Vec<(String, Vec<u8>)> = Vec::new();
    for encoding in ENCODINGS {
        forms.push((encoding.name().to_owned(), compressed(encoding, &feed)));
        forms.push((format!("tar in {}", encoding.name()), compressed(encoding, &tar)));
    }
    forms.push(("zip".to_owned(), zip_of(&[("urls.txt", &feed)])));
    for (form, bytes) in forms {
        let encoding = ContentEncoding::sniff(&bytes);
        let (out, report, kept) = read(Content::Fresh(bytes.clone()), &config).unwrap();
        assert_eq!((out, report), expected, "{form}, in memory");
        let kept = kept.unwrap();
        if encoding != ContentEncoding::Identity {
            assert_eq!(
                (kept.encoding, kept.bytes == bytes),
                (encoding, true),
                "{form}: kept as received"
            );
        }
        let stream = Stream {
            size: bytes.len() as u64,
            reader: Box::new(Cursor::new(bytes.clone())),
            encoding,
            validators: Default::default(),
        };
        let (out, report, _) = read(Content::Stream(stream), &config).unwrap();
        assert_eq!((out, report), expected, "{form}, streamed");
        let reader = Box::new(Cursor::new(kept.bytes));
        let (out, report, again) = read(
            Content::Cached {
                reader,
                encoding: kept.encoding,
            },
            &config,
        )
        .unwrap();
        assert_eq!((out, report), expected, "{form}, from its kept copy");
        assert!(again.is_none());
    }
    // An archive of two files fails the read, naming them, whatever was
    // parsed of the first.
    let two = compressed(
        ContentEncoding::Gzip,
        &tar_of(&[("a.txt", &feed), ("b.txt", b"x")]),
    );
    let e = read(Content::Fresh(two), &config).err().unwrap_or_default();
    assert_eq!(
        e,
        "tar archive holds several files (a.txt, b.txt): the build reads an archive of one file; \
         name the file that is the list with the source's `member`"
    );
    // Named by the source's `member`, one of them is read.
    let named = SourceConfig {
        member: Some("b.txt".to_owned()),
        ..config.clone()
    };
    let two = compressed(
        ContentEncoding::Xz,
        &tar_of(&[("a.txt", b"http://a.example/\n"), ("b.txt", &feed)]),
    );
    let (out, report, _) = read(Content::Fresh(two), &named).unwrap();
    assert_eq!((out, report), expected, "member b.txt");
    // A zip's file is held to max_bytes as it is decompressed.
    let small = SourceConfig {
        max_bytes: 100_000,
        ..config.clone()
    };
    let e = read(Content::Fresh(zip_of(&[("urls.txt", &feed)])), &small)
        .err()
        .unwrap_or_default();
    assert!(e.contains("exceeds max_bytes = 100000"), "{e}");
}

/// Reads `bytes`, then fails where it would end (as a stored copy's
/// reader does when the copy does not match its metadata).
struct FailsAtEnd(Cursor<Vec<u8>>);

impl Read for FailsAtEnd {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.read(buf)? {
            0 if !buf.is_empty() => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                StoredCopyError("copy refused at its end".into()),
            )),
            n => Ok(n),
        }
    }
}

#[test]
fn a_stored_copy_is_read_to_its_end_and_refused_there_in_every_encoding() {
    let feed = fixture();
    let config = SourceConfig::file("feed.txt", SourceFormat::Urls);
    // Whether the decoder itself reads on to the end or stops at the end
    // of its frame, the read fails there, and nothing is kept.
    for (bytes, encoding) in [
        (feed.clone(), ContentEncoding::Identity),
        (gzip(&feed), ContentEncoding::Gzip),
        (
            zstd::stream::encode_all(feed.as_slice(), 1).unwrap(),
            ContentEncoding::Zstd,
        ),
    ] {
        let reader = Box::new(FailsAtEnd(Cursor::new(bytes)));
        let e = read(Content::Cached { reader, encoding }, &config).err();
        assert_eq!(
            e.as_deref(),
            Some("stored copy: copy refused at its end"),
            "{encoding:?}"
        );
    }
    // A compressed copy changed on disk may stop decoding before its end
    // (gzip's CRC; zstd's frames here have no checksum, and decode to
    // other text): either way, the copy's own check says why.
    for (mut bytes, encoding, name) in [
        (gzip(&feed), ContentEncoding::Gzip, "gzip"),
        (
            zstd::stream::encode_all(feed.as_slice(), 1).unwrap(),
            ContentEncoding::Zstd,
            "zstd",
        ),
    ] {
        let middle = bytes.len() / 2;
        bytes[middle] ^= 0xff;
        bytes[middle + 1] ^= 0xff;
        let reader = Box::new(FailsAtEnd(Cursor::new(bytes)));
        let e = read(Content::Cached { reader, encoding }, &config).err();
        assert_eq!(
            e.as_deref(),
            Some("stored copy: copy refused at its end"),
            "{name}"
        );
    }
    // Decoded, a stored copy is held to `max_bytes` like fresh content:
    // it is checked only at its end.
    let small = SourceConfig {
        max_bytes: 1000,
        ..config.clone()
    };
    let reader = Box::new(Cursor::new(zstd::stream::encode_all(feed.as_slice(), 1).unwrap()));
    let e = read(
        Content::Cached {
            reader,
            encoding: ContentEncoding::Zstd,
        },
        &small,
    )
    .err()
    .unwrap_or_default();
    assert!(e.contains("exceeds max_bytes = 1000"), "{e}");
}

#[test]
fn decompressed_content_over_max_bytes_or_corrupt_is_an_error_not_a_panic() {
    let feed = fixture();
    let mut config = SourceConfig::file("feed.txt.gz", SourceFormat::Urls);
    config.max_bytes = feed.len() as u64 - 1;
    let err = read(Content::Fresh(gzip(&feed)), &config).unwrap_err();
    assert!(err.contains("exceeds max_bytes"), "{err}");
    config.max_bytes = feed.len() as u64;
    assert!(read(Content::Fresh(gzip(&feed)), &config).is_ok());

    let mut corrupt = gzip(&feed);
    let middle = corrupt.len() / 2;
    corrupt[middle..middle + 64].fill(0xAA);
    let err = read(Content::Fresh(corrupt.clone()), &config).unwrap_err();
    assert!(err.starts_with("gzip: "), "{err}");
    corrupt.truncate(middle);
    let err = read(Content::Fresh(corrupt), &config).unwrap_err();
    assert!(err.starts_with("gzip: "), "{err}");
}

#[test]
fn blocks_end_at_line_feeds_and_give_the_lines_of_the_whole() {
    let long = vec![b'x'; 2 * BLOCK_BYTES + 17];
    let cases: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"\n".to_vec(),
        b"\n\n\n".to_vec(),
        b"a\r\nb\rc\n\n".to_vec(),
        // A CRLF pair across the end of the first read.
        [vec![b'a'; BLOCK_BYTES - 1], b"\r\nb\n".to_vec()].concat(),
        // A line feed as the last byte of the first read, then an empty line.
        [vec![b'a'; BLOCK_BYTES - 1], b"\n\nc".to_vec()].concat(),
        // A line longer than two reads, between short ones.
        [b"a\n".to_vec(), long.clone(), b"\nb\r\n".to_vec()].concat(),
        long,
    ];
    for whole in cases {
        let mut blocks = Blocks::new(whole.as_slice());
        let mut lines: Vec<Vec<u8>> = Vec::new();
        let mut joined = Vec::new();
        while let Some(block) = blocks.next_block().unwrap() {
            assert!(!block.is_empty());
            lines.extend(feed_lines(&block).map(<[u8]>::to_vec));
            joined.extend_from_slice(&block);
        }
        let expected: Vec<Vec<u8>> = feed_lines(&whole).map(<[u8]>::to_vec).collect();
        assert_eq!(joined, whole);
        assert!(
            lines == expected,
            "lines differ for a case of {} bytes",
            whole.len()
        );
    }
}

#[test]
fn a_json_document_is_read_whole_with_its_allow_array() {
    let json = br#"{"blacklist": ["evil.example", "bad.example", "com"], "whitelist": ["bad.example"]}"#;
    let mut config = SourceConfig::file("config.json", SourceFormat::Json);
    config.json_allow_key = Some("whitelist".to_owned());
    let allow_options = FormatOptions {
        json_key: Some("whitelist".to_owned()),
        json_key_optional: true,
        ..FormatOptions::default()
    };
    let passes = Passes {
        config: &config,
        cancel: &Cancel::default(),
        entries: FormatOptions::default(),
        allow_array: Some(allow_options.clone()),
    };
    let (mut out, mut allowed) = (Vec::new(), Vec::new());
    let read = read_content(
        Content::Fresh(gzip(json)),
        KeepTo::memory(),
        &passes,
        &mut out,
        &mut allowed,
    )
    .unwrap();
    let entries = sequential(json, SourceFormat::Json, &FormatOptions::default());
    let allow = sequential(json, SourceFormat::Json, &allow_options);
    assert_eq!((out, read.entries.report), entries);
    assert_eq!((allowed, read.allow_array.report), allow);
}

/// `(cat feed.gz; head -c 512 /dev/zero) > feed`: zeros after a complete
/// gzip member are padding, ignored as GNU gzip ignores them ("trailing
/// zero bytes ignored"). They were read as a new, corrupt member and the
/// feed refused at every build (`gzip: invalid gzip header`). Bytes other
/// than zeros after a member, or after its padding, are still an error,
/// and so is a member cut short.
#[test]
fn regression_zero_padding_after_gzip_content_is_ignored() {
    let feed = fixture();
    let config = SourceConfig::file("feed.txt.gz", SourceFormat::Urls);
    let (expected, expected_report, _) = read(Content::Fresh(feed.clone()), &config).unwrap();
    let (head, tail) = feed.split_at(feed.len() / 3);
    let padded = [
        ("512 zeros", [gzip(&feed), vec![0; 512]].concat()),
        ("one zero", [gzip(&feed), vec![0]].concat()),
        (
            "two members, zeros past a block",
            [gzip(head), gzip(tail), vec![0; BLOCK_BYTES + 3]].concat(),
        ),
    ];
    for (name, bytes) in padded {
        for streamed in [false, true] {
            let content = if streamed {
                Content::Stream(Stream {
                    reader: Box::new(Cursor::new(bytes.clone())),
                    encoding: ContentEncoding::Gzip,
                    size: bytes.len() as u64,
                    validators: Default::default(),
                })
            } else {
                Content::Fresh(bytes.clone())
            };
            let (out, report, kept) = read(content, &config).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(out == expected && report == expected_report, "{name}");
            // Kept as received, padding and all.
            let kept = kept.unwrap();
            assert_eq!(
                (kept.encoding, kept.bytes == bytes),
                (ContentEncoding::Gzip, true),
                "{name}"
            );
        }
        let mut decoded = Vec::new();
        decoder(&bytes[..], ContentEncoding::Gzip)
            .unwrap()
            .read_to_end(&mut decoded)
            .unwrap();
        assert!(decoded == feed, "{name}");
    }
    let refused = [
        ("junk", [gzip(&feed), b"junk".to_vec()].concat()),
        (
            "zeros, then junk",
            [gzip(&feed), vec![0; 16], b"junk".to_vec()].concat(),
        ),
        (
            "zeros, then a member",
            [gzip(head), vec![0; 16], gzip(tail)].concat(),
        ),
        ("a member cut short after one", {
            let second = gzip(tail);
            [gzip(head), second[..second.len() - 4].to_vec()].concat()
        }),
    ];
    for (name, bytes) in refused {
        let err = read(Content::Fresh(bytes), &config).unwrap_err();
        assert!(err.starts_with("gzip: "), "{name}: {err}");
    }
}
