//! Content as feed maintainers ship it: compressed — gzip, bzip2, xz or
//! zstd, each told by its magic number, never by a file name or a
//! `Content-Type` — and archived, a tar or zip archive (tar also inside
//! any of the four) of one file, or of several with the file that is the
//! list named by the source's `member`. The build decodes as it reads
//! ([`decoder`], then [`read_member`]); the copy kept as last good content
//! is the content as received, decoded the same way when a later build
//! falls back to it.
//!
//! Formats nothing here reads (7z, RAR, lzip, LZ4, `compress`) are refused
//! by name ([`unsupported`]): read as text, their bytes give lines of junk,
//! none of them a listed URL. A tar archive read as text was worse: each
//! member's first line joined to the 512-byte header before it, so that
//! line's entry was lost, with nothing counted but one rejected line.

use std::borrow::Cow;
use std::io::{self, BufRead, Read, Seek as _};

use super::ContentEncoding;
use super::gunzip::gunzip;
use crate::config::archive_path;

/// Largest memory an xz stream may ask its decoder for (its dictionary),
/// in KiB: `xz -9` asks 64 MiB; a larger request is refused rather than
/// allocated for untrusted content.
const XZ_MEMORY_LIMIT_KIB: u32 = 256 * 1024;

/// A zip archive is read from its central directory, so it is first
/// received whole: in memory up to this size, then in an unnamed
/// temporary file.
const ZIP_SPOOL_IN_MEMORY: usize = 8 << 20;

impl ContentEncoding {
    /// The compression of content that starts with `head`, by its magic
    /// number (RFC 1952 §2.3.1, RFC 8878 §3.1.1, the xz file format
    /// §2.1.1.1, bzip2's `BZh` and block size); anything else is plain.
    pub fn sniff(head: &[u8]) -> Self {
        match head {
            [0x1f, 0x8b, ..] => Self::Gzip,
            // A frame, or a skippable frame first (pzstd writes one).
            [0x28, 0xb5, 0x2f, 0xfd, ..] | [0x50..=0x5f, 0x2a, 0x4d, 0x18, ..] => Self::Zstd,
            [0xfd, b'7', b'z', b'X', b'Z', 0x00, ..] => Self::Xz,
            [b'B', b'Z', b'h', b'1'..=b'9', ..] => Self::Bzip2,
            _ => Self::Identity,
        }
    }

    /// Its name, as errors and the copy's metadata say it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Identity => "plain text",
            Self::Gzip => "gzip",
            Self::Zstd => "zstd",
            Self::Bzip2 => "bzip2",
            Self::Xz => "xz",
        }
    }
}

/// The decoded stream of `encoding`'s bytes from `input`: gzip member
/// after member, zero padding after the last ignored ([`gunzip`]); bzip2
/// and xz stream after stream, as `bzip2 -d` and `xz -d` read a file of
/// several; zstd frame after frame. Each stream's check is verified at its
/// end, so content cut short fails there.
pub fn decoder<'a>(
    input: impl BufRead + Send + 'a,
    encoding: ContentEncoding,
) -> io::Result<Box<dyn Read + Send + 'a>> {
    Ok(match encoding {
        ContentEncoding::Identity => Box::new(input),
        ContentEncoding::Gzip => Box::new(gunzip(input)),
        ContentEncoding::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(input)?),
        ContentEncoding::Bzip2 => Box::new(bzip2::bufread::MultiBzDecoder::new(input)),
        ContentEncoding::Xz => Box::new(lzma_rust2::XzReader::new_mem_limit(
            input,
            true,
            XZ_MEMORY_LIMIT_KIB,
        )),
    })
}

/// Why content that starts with `head` (as received, or decompressed)
/// cannot be read, when it is a compressed or archive format the build
/// does not decode.
pub fn unsupported(head: &[u8]) -> Option<String> {
    let format = unsupported_format(head)?;
    Some(format!(
        "content is {format}, which the build does not read: serve or save the list as plain text, \
         gzip, bzip2, xz or zstd, or as a tar or zip archive"
    ))
}

/// The name of a format the build does not read that starts `head`.
fn unsupported_format(head: &[u8]) -> Option<&'static str> {
    Some(match head {
        [b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c, ..] => "a 7z archive",
        [b'R', b'a', b'r', b'!', 0x1a, 0x07, ..] => "a RAR archive",
        [b'L', b'Z', b'I', b'P', ..] => "lzip",
        [0x04, 0x22, 0x4d, 0x18, ..] => "LZ4",
        [0x1f, 0x9d, ..] => "compress (.Z)",
        [0x1f, 0xa0, ..] => "compress (LZH)",
        _ => return None,
    })
}

/// An archive format, told by the start of its (decompressed) content.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Archive {
    /// POSIX ustar, pax or GNU tar: `ustar` at offset 257 of the first
    /// header; a pre-POSIX v7 tar, which has no magic, by its first
    /// header's checksum.
    Tar,
    /// zip: a local file header, or an empty archive's end record.
    Zip,
}

/// Whether (decompressed) content that starts with `head` is a tar or zip
/// archive, whose end its own structure marks.
pub fn is_archive(head: &[u8]) -> bool {
    archive_of(head).is_some()
}

fn archive_of(head: &[u8]) -> Option<Archive> {
    // The ustar magic with its NUL (POSIX `ustar\0`, GNU `ustar  \0`),
    // which no text holds: a tar whose first header is damaged, refused
    // by its checksum as it is read (not read as text, its header's bytes
    // lines of junk and its file's first line lost).
    let magic = head.get(257..263) == Some(b"ustar\0") || head.get(257..265) == Some(b"ustar  \0");
    if magic || head.first_chunk::<TAR_BLOCK>().is_some_and(is_tar_header) {
        Some(Archive::Tar)
    } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
        Some(Archive::Zip)
    } else {
        None
    }
}

/// Whether `block` is a tar header (ustar, pax, GNU or pre-POSIX v7): a
/// name, a NUL among its fields, and its checksum. Never told by the
/// `ustar` magic alone: a text list whose bytes 257–262 spell it (a URL
/// with `mustard` in it, which anyone reporting URLs to a feed can place)
/// was taken for an archive and refused at every build, its new entries
/// never published; text holds no NUL, and no checksum of itself.
fn is_tar_header(block: &[u8; TAR_BLOCK]) -> bool {
    block[0] != 0
        && block.contains(&0)
        && tar::Header::from_byte_slice(block)
            .cksum()
            .is_ok_and(|sum| checksum_matches(block, sum))
}

/// Bytes of the decoded content looked at to tell an archive: a tar
/// header's block.
const PEEK: usize = 512;

/// Calls `read` with the content of `decoded`: the decoded stream itself,
/// or, when it is a tar or zip archive, the file `member` names (a source's
/// `member`), or, without one, the one file it holds (directories, links
/// and the metadata macOS adds — `__MACOSX/`, `._` files — aside).
/// Without `member`, an archive of no file or of more than one is refused
/// naming them: which of several files is the list is the operator's to
/// say. A `member` no file of the archive has, one named twice, or content
/// that is no archive is refused too. A tar archive is read as it streams,
/// the rest of it after the file read too (a second file there fails the
/// read once the first was parsed: the caller drops what it added); a zip
/// archive is received whole first (in memory up to 8 MiB, then in a
/// temporary file), as its central directory at the end says what it
/// holds, and its file's CRC-32 is checked at its end.
pub fn read_member<T>(
    decoded: impl Read + Send,
    member: Option<&str>,
    read: impl FnOnce(&mut (dyn Read + Send)) -> io::Result<T>,
) -> io::Result<T> {
    let mut decoded = decoded;
    let mut head = Vec::with_capacity(PEEK);
    (&mut decoded).take(PEEK as u64).read_to_end(&mut head)?;
    let archive = archive_of(&head);
    let mut whole = io::Cursor::new(head).chain(decoded);
    match (archive, member) {
        (None, None) => read(&mut checked_file(&mut whole, "the decompressed content", false)?),
        (None, Some(member)) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            ArchiveError(format!(
                "the source reads the archive's file {member} (`member`), but its content is no tar or zip archive"
            )),
        )),
        (Some(Archive::Tar), _) => read_tar(whole, member, true, read),
        (Some(Archive::Zip), _) => read_zip(whole, member, read),
    }
}

/// Whether `member` names the archive's entry `name`, a directory's with
/// or without its trailing `/`.
fn names_entry(member: &str, name: &str) -> bool {
    archive_path(member).trim_end_matches('/') == archive_path(name).trim_end_matches('/')
}

/// Whether the archive's entry `name` is the file a source's `member`
/// names (every file, without one).
fn is_member(name: &str, member: Option<&str>) -> bool {
    member.is_none_or(|member| archive_path(name) == archive_path(member))
}

/// Whether an archive's file named `name` is a file macOS adds beside
/// the real ones (resource forks, Finder data), never a list.
fn is_metadata(name: &str) -> bool {
    name.starts_with("__MACOSX/")
        || name
            .rsplit('/')
            .next()
            .is_some_and(|last| last.starts_with("._") || last == ".DS_Store")
}

/// What an archive holds, when it is not one file to read, or its zip
/// structure is damaged: the whole reason (the build adds no compression
/// name before it).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ArchiveError(String);

fn archive_kind(archive: Archive) -> &'static str {
    match archive {
        Archive::Tar => "tar",
        Archive::Zip => "zip",
    }
}

/// `names` as an error shows them: the first five (by `closest`, when
/// given: those sharing the longest start with it, a leading `./` aside),
/// then how many more.
fn shown_names(names: &[String], closest: Option<&str>) -> String {
    let mut shown: Vec<&str> = names.iter().map(String::as_str).collect();
    if let Some(closest) = closest {
        let shared = |name: &str| {
            (name.bytes().zip(closest.bytes()))
                .take_while(|(a, b)| a == b)
                .count()
        };
        shown.sort_by_key(|name| std::cmp::Reverse(shared(archive_path(name))));
    }
    let more = shown.len().saturating_sub(5);
    shown.truncate(5);
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    let shown: Vec<String> = shown.into_iter().map(shown_name).collect();
    format!("{}{more}", shown.join(", "))
}

/// Characters of an archive's file name (or link target) a reason shows.
const SHOWN_NAME_CHARS: usize = 200;

/// An archive's file name or link target as a reason shows it: the
/// archive's own bytes, written by whoever serves the feed, and reasons
/// go to the log, `/v1/lists` and the status page. Its control characters
/// are escaped (a line break in a name would start a line of its own in
/// the log, forged), and only its first [`SHOWN_NAME_CHARS`] are shown (a
/// tar's name may be 1 MiB: five of them made a reason of 5 MB, logged
/// twice per build, from a feed of 6 KB gzipped).
fn shown_name(name: &str) -> String {
    let mut out = String::new();
    for (i, c) in name.chars().enumerate() {
        if i == SHOWN_NAME_CHARS {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// What an archive of several files, read without a `member`, is refused
/// as.
const SEVERAL_FILES: &str = "archive holds several files";

/// Why an archive holding the files `names` has no file to read: none or
/// several (without a `member`), or none the `member` names.
fn archive_error(archive: Archive, names: &[String], member: Option<&str>) -> io::Error {
    let kind = archive_kind(archive);
    let reason = match (names, member) {
        ([], None) => format!("{kind} archive holds no file"),
        (_, None) => format!(
            "{kind} {SEVERAL_FILES} ({}): the build reads an archive of one file; \
             name the file that is the list with the source's `member`",
            shown_names(names, None)
        ),
        ([], Some(member)) => format!("{kind} archive holds no file (the source's `member` is {member})"),
        (_, Some(member)) => format!(
            "{kind} archive holds no file {member} (the source's `member`); it holds {}",
            shown_names(names, Some(archive_path(member)))
        ),
    };
    io::Error::new(io::ErrorKind::InvalidData, ArchiveError(reason))
}

/// A `member` the archive holds twice (a tar appended to): which of the
/// two is the list cannot be told.
fn member_twice(archive: Archive, member: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        ArchiveError(format!(
            "{} archive holds the source's `member` {member} twice (an archive appended to): \
             which is the list cannot be told",
            archive_kind(archive)
        )),
    )
}

/// A `member` naming an archive's entry that is no file: a directory or
/// a link (`what`).
fn member_not_a_file(archive: Archive, member: &str, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        ArchiveError(format!(
            "{} archive's {member} (the source's `member`) is {what}, not a file",
            archive_kind(archive)
        )),
    )
}

/// Reads a tar archive block by block (POSIX.1-2001 `pax` and ustar, and
/// GNU's long names): the tar crate parses each header, and the walk is
/// ours, as the crate's entries borrow its archive and could not be handed
/// to the build's reading thread.
fn read_tar<T>(
    content: impl Read + Send,
    member: Option<&str>,
    list_checks: bool,
    read: impl FnOnce(&mut (dyn Read + Send)) -> io::Result<T>,
) -> io::Result<T> {
    let mut content = content;
    let mut read = Some(read);
    let mut result = None;
    // The archive's files, and how many of them are the one to read.
    let mut names = Vec::new();
    let mut matched = 0;
    // The entry `member` names when it is no file: what it is.
    let mut not_a_file: Option<String> = None;
    // Why the one file read was refused, when the read went on.
    let mut refused: Option<io::Error> = None;
    // The next entry's name, from a GNU long name or a pax header before it.
    let mut next_name: Option<Vec<u8>> = None;
    let mut block = [0u8; TAR_BLOCK];
    // The end: two zero blocks (one is enough here), or the content's end
    // at a block's boundary, as GNU tar reads an archive without them.
    while read_block(&mut content, &mut block)? && block.iter().any(|&b| b != 0) {
        let header = tar::Header::from_byte_slice(&block);
        if !header.cksum().is_ok_and(|sum| checksum_matches(&block, sum)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "tar: a header's checksum does not match",
            ));
        }
        let size = header.entry_size().map_err(|_| {
            io::Error::new(io::ErrorKind::InvalidData, "tar: a header's size is not a number")
        })?;
        let kind = header.entry_type();
        if kind.is_gnu_longname() || kind.is_pax_local_extensions() {
            let mut data = Vec::new();
            (&mut content)
                .take(size.min(MAX_TAR_NAME))
                .read_to_end(&mut data)?;
            next_name = if kind.is_gnu_longname() {
                Some(data.split(|&b| b == 0).next().unwrap_or_default().to_vec())
            } else {
                pax_path(&data).or(next_name)
            };
            skip(&mut content, padded(size)? - data.len() as u64)?;
            continue;
        }
        let name = String::from_utf8_lossy(
            &next_name
                .take()
                .unwrap_or_else(|| header.path_bytes().into_owned()),
        )
        .into_owned();
        if kind.is_gnu_sparse() && is_member(&name, member) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                ArchiveError(format!(
                    "tar archive's file {} is a GNU sparse file, which the build does not read",
                    shown_name(&name)
                )),
            ));
        }
        // A v7 tar writes a directory as a regular file named with a `/`.
        let directory = kind.is_dir() || (kind.is_file() && name.ends_with('/'));
        if !(kind.is_file() || kind.is_contiguous()) || directory || is_metadata(&name) {
            if member.is_some_and(|member| names_entry(member, &name)) {
                let link = shown_name(&String::from_utf8_lossy(
                    &header.link_name_bytes().unwrap_or_default(),
                ));
                not_a_file = Some(if directory {
                    "a directory".to_owned()
                } else if kind.is_symlink() {
                    format!("a symbolic link to {link}")
                } else if kind.is_hard_link() {
                    format!("a hard link to {link}")
                } else if is_metadata(&name) {
                    "a file macOS adds beside the real ones".to_owned()
                } else {
                    "no regular file".to_owned()
                });
            }
            skip(&mut content, padded(size)?)?;
            continue;
        }
        let mut file = (&mut content).take(size);
        if is_member(&name, member) {
            matched += 1;
            if let Some(member) = member.filter(|_| matched > 1) {
                return Err(member_twice(Archive::Tar, member));
            }
            if let Some(read) = read.take() {
                let what = format!("the archive's file {}", shown_name(&name));
                match checked_file(&mut file, &what, list_checks).and_then(|mut file| read(&mut file)) {
                    Ok(read) => result = Some(read),
                    // Refused for what the file is, without a `member`:
                    // the walk goes on, so that an archive of several
                    // files says so (the operator is to name one), rather
                    // than that its first file is HTML.
                    Err(e) if member.is_none() && e.get_ref().is_some_and(|e| e.is::<ArchiveError>()) => {
                        refused = Some(e);
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        names.push(name);
        // What the read left of the file (all of it, for one not read).
        io::copy(&mut file, &mut io::sink())?;
        if file.limit() > 0 {
            // Without `member`, a second file seen says what is wrong
            // already (the checks before a build read only a head of the
            // archive, which often ends in it).
            return Err(if member.is_none() && names.len() > 1 {
                archive_error(Archive::Tar, &names, None)
            } else {
                cut_short()
            });
        }
        skip(&mut content, padded(size)? - size)?;
    }
    // Read to the content's end, so that a compression's check there is
    // verified and a file changed while it was read is seen
    // (`OpenedFile`): after the end blocks only zeros may follow (the
    // record's padding), not a second archive or anything else.
    let mut rest = [0u8; 8192];
    loop {
        match content.read(&mut rest) {
            Ok(0) => break,
            Ok(n) if rest[..n].iter().all(|&b| b == 0) => {}
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    ArchiveError(
                        "data after the tar archive's end (a second archive, or damage): \
                         the build reads one archive"
                            .to_owned(),
                    ),
                ));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    if names.len() == 1
        && let Some(refused) = refused
    {
        return Err(refused);
    }
    match (result, member) {
        (Some(result), Some(_)) => Ok(result),
        (Some(result), None) if names.len() == 1 => Ok(result),
        (None, Some(member)) => Err(match not_a_file {
            Some(what) => member_not_a_file(Archive::Tar, member, &what),
            None => archive_error(Archive::Tar, &names, Some(member)),
        }),
        _ => Err(archive_error(Archive::Tar, &names, None)),
    }
}

/// An archive's file, or content that came compressed, as the list it
/// must be: not compressed again, nor an archive, nor a format the build
/// does not read (`what` names it in the error); with `member` (an
/// archive's file, as the build reads it) no HTML page nor text that is not
/// UTF-8 either, by its first 64 KiB (`super::list_problem`). Read through
/// its first bytes, looked at here.
fn checked_file<'r>(
    file: &'r mut (dyn Read + Send),
    what: &str,
    member: bool,
) -> io::Result<impl Read + Send + 'r> {
    let peek = if member { super::HEAD_BYTES } else { PEEK };
    let mut head = Vec::with_capacity(peek);
    file.take(peek as u64).read_to_end(&mut head)?;
    let inner = match (ContentEncoding::sniff(&head), archive_of(&head)) {
        (ContentEncoding::Identity, None) => unsupported_format(&head).map(str::to_owned),
        (ContentEncoding::Identity, Some(Archive::Tar)) => Some("a tar archive".to_owned()),
        (ContentEncoding::Identity, Some(Archive::Zip)) => Some("a zip archive".to_owned()),
        (encoding, _) => Some(format!("{} content", encoding.name())),
    };
    if let Some(inner) = inner {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            ArchiveError(format!(
                "{what} is {inner}: the build reads one compression and one archive around the list, \
                 not one inside the other"
            )),
        ));
    }
    if member && let Some(why) = super::list_problem(&head) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            ArchiveError(format!("{what}: {why}")),
        ));
    }
    Ok(io::Cursor::new(head).chain(file))
}

const TAR_BLOCK: usize = 512;

/// Most of a GNU long name or pax extended header read for the name it
/// gives; longer data (no real path, but a pax header may carry long
/// records beside it: a comment) is skipped.
const MAX_TAR_NAME: u64 = 1 << 20;

/// `size` rounded up to whole blocks; a size no archive can hold is an
/// error (a base-256 size field can say up to 2^95).
fn padded(size: u64) -> io::Result<u64> {
    size.checked_next_multiple_of(TAR_BLOCK as u64)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "tar: a header's size is out of range"))
}

fn cut_short() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "tar: archive cut short")
}

/// Reads the next block: `false` at the content's end before it; a
/// block cut short is an error.
fn read_block(content: &mut impl Read, block: &mut [u8; TAR_BLOCK]) -> io::Result<bool> {
    let mut filled = 0;
    while filled < TAR_BLOCK {
        match content.read(&mut block[filled..]) {
            Ok(0) if filled == 0 => return Ok(false),
            Ok(0) => return Err(cut_short()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(true)
}

fn skip(content: &mut impl Read, bytes: u64) -> io::Result<()> {
    if io::copy(&mut content.take(bytes), &mut io::sink())? < bytes {
        return Err(cut_short());
    }
    Ok(())
}

/// Whether `sum` is the header's checksum: the sum of its bytes, the
/// checksum field read as spaces (POSIX.1 ustar), as unsigned bytes or as
/// the signed bytes some old tars summed (GNU tar accepts either).
fn checksum_matches(block: &[u8; TAR_BLOCK], sum: u32) -> bool {
    let field = |i: usize, b: u8| if (148..156).contains(&i) { b' ' } else { b };
    let unsigned: u32 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| u32::from(field(i, b)))
        .sum();
    let signed: i64 = block
        .iter()
        .enumerate()
        .map(|(i, &b)| i64::from(field(i, b) as i8))
        .sum();
    unsigned == sum || signed == i64::from(sum)
}

/// The `path` of a pax extended header's records (`<length> path=<value>\n`).
fn pax_path(data: &[u8]) -> Option<Vec<u8>> {
    let mut rest = data;
    let mut path = None;
    // A record cut off (data past MAX_TAR_NAME) or malformed ends the
    // reading, keeping a `path` found before it.
    while !rest.is_empty() {
        let Some(space) = rest.iter().position(|&b| b == b' ') else {
            break;
        };
        let Some(length) = std::str::from_utf8(&rest[..space])
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
        else {
            break;
        };
        let Some(record) = rest.get(space + 1..length) else {
            break;
        };
        let record = record.strip_suffix(b"\n").unwrap_or(record);
        if let Some(value) = record.strip_prefix(b"path=") {
            path = Some(value.to_vec());
        }
        rest = &rest[length..];
    }
    path
}

fn read_zip<T>(
    mut content: impl Read + Send,
    member: Option<&str>,
    read: impl FnOnce(&mut (dyn Read + Send)) -> io::Result<T>,
) -> io::Result<T> {
    let mut spooled = tempfile::SpooledTempFile::new(ZIP_SPOOL_IN_MEMORY);
    io::copy(&mut content, &mut spooled)?;
    spooled.rewind()?;
    let mut archive = zip::ZipArchive::new(spooled).map_err(zip_error)?;
    // The zip crate keeps one entry per name: two files of one name (a
    // zip appended to) would be read as one, the other's entries lost. It
    // counts its central directory's records as it reads them, zip64 too
    // (whose end record says 0xFFFF, where a count of ours was blind).
    if archive.has_duplicate_names() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            ArchiveError(format!(
                "zip archive's directory lists several entries under one name ({} names): which is the list \
                 cannot be told",
                archive.len()
            )),
        ));
    }
    let mut files = Vec::new();
    let mut not_a_file = None;
    for index in 0..archive.len() {
        let file = archive.by_index_raw(index).map_err(zip_error)?;
        let name = String::from_utf8_lossy(file.name_raw()).into_owned();
        if file.is_file() && !is_metadata(&name) {
            files.push((index, name, file.compression()));
        } else if member.is_some_and(|member| names_entry(member, &name)) {
            not_a_file = Some(if file.is_dir() {
                "a directory"
            } else if file.is_symlink() {
                "a symbolic link"
            } else {
                "a file macOS adds beside the real ones"
            });
        }
    }
    let chosen: Vec<usize> = (0..files.len())
        .filter(|&i| is_member(&files[i].1, member))
        .collect();
    let (index, ref name, method) = match (&chosen[..], member) {
        (&[one], _) => files.swap_remove(one),
        ([_, _, ..], Some(member)) => return Err(member_twice(Archive::Zip, member)),
        _ => {
            return Err(match (member, not_a_file) {
                (Some(member), Some(what)) => member_not_a_file(Archive::Zip, member, what),
                _ => {
                    let names: Vec<String> = files.into_iter().map(|(_, name, _)| name).collect();
                    archive_error(Archive::Zip, &names, member)
                }
            });
        }
    };
    let name = &shown_name(name);
    if !matches!(
        method,
        zip::CompressionMethod::Stored | zip::CompressionMethod::Deflated
    ) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            ArchiveError(format!(
                "zip archive's file {name} is compressed with {}, which the build does not read \
                 (it reads deflated or stored files)",
                zip_method_name(method)
            )),
        ));
    }
    let what = format!("the archive's file {name}");
    let mut file = ZipFileRead {
        file: archive.by_index(index).map_err(zip_error)?,
        name,
    };
    read(&mut checked_file(&mut file, &what, true)?)
}

/// A zip archive's file as it is read, its errors naming it (the zip
/// crate's say `Invalid checksum` or `corrupt deflate stream` alone).
struct ZipFileRead<'a, R: Read> {
    file: zip::read::ZipFile<'a, R>,
    name: &'a str,
}

impl<R: Read> Read for ZipFileRead<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.file.read(buf).map_err(|e| {
            let reason = match e.to_string().as_str() {
                "Invalid checksum" => "its CRC-32 does not match (damaged)".to_owned(),
                other => other.to_owned(),
            };
            io::Error::new(
                e.kind(),
                ArchiveError(format!("zip archive's file {}: {reason}", self.name)),
            )
        })
    }
}

/// A zip compression method's name (APPNOTE 4.4.5), with its number.
fn zip_method_name(method: zip::CompressionMethod) -> String {
    use zip::CompressionMethod as M;
    let known = [
        (M::DEFLATE64, "Deflate64", 9),
        (M::BZIP2, "bzip2", 12),
        (M::LZMA, "LZMA", 14),
        (M::ZSTD_DEPRECATED, "zstd", 20),
        (M::ZSTD, "zstd", 93),
        (M::XZ, "xz", 95),
        (M::PPMD, "PPMd", 98),
        (M::AES, "AES encryption", 99),
    ];
    match known.iter().find(|(known, ..)| *known == method) {
        Some((_, name, number)) => format!("{name} (zip method {number})"),
        None => "a method it does not know".to_owned(),
    }
}

fn zip_error(error: zip::result::ZipError) -> io::Error {
    match error {
        zip::result::ZipError::Io(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidData, ArchiveError(format!("zip: {other}"))),
    }
}

/// The start of the list inside decompressed content that starts with
/// `head`, for the checks made before a build (an HTML page, UTF-16):
/// the head itself, or, for an archive, as much of the file it reads
/// ([`read_member`]: the one `member` names, else its first) as `head`
/// holds (nothing for a zip whose file's size its header does not give).
/// Never fails: the build reads the whole and reports.
pub fn member_head<'h>(head: &'h [u8], member: Option<&str>) -> Cow<'h, [u8]> {
    match archive_of(head) {
        None => Cow::Borrowed(head),
        Some(Archive::Tar) => {
            let mut out = Vec::new();
            let read = read_tar(head, member, false, |file| {
                read_what_there_is(file, &mut out);
                Ok(())
            });
            // Several files and no `member`: no list to check (the build
            // refuses the archive, naming them, where the first file's
            // HTML or bytes gave another reason).
            if read.is_err_and(|e| e.to_string().contains(SEVERAL_FILES)) {
                out.clear();
            }
            Cow::Owned(out)
        }
        Some(Archive::Zip) => {
            let mut out = Vec::new();
            let mut rest = head;
            let mut read = false;
            while let Ok(Some(mut file)) = zip::read::read_zipfile_from_stream(&mut rest) {
                let name = String::from_utf8_lossy(file.name_raw()).into_owned();
                if file.is_file() && !is_metadata(&name) && is_member(&name, member) {
                    if read {
                        // Several files and no `member`: as for a tar.
                        out.clear();
                        break;
                    }
                    read = true;
                    // A file compressed or archived again: no head to
                    // check (the build refuses it, naming it).
                    if let Ok(mut file) = checked_file(&mut file, "", false) {
                        read_what_there_is(&mut file, &mut out);
                    }
                    if member.is_some() {
                        break;
                    }
                }
                if io::copy(&mut file, &mut io::sink()).is_err() {
                    break;
                }
            }
            Cow::Owned(out)
        }
    }
}

/// Most of an archive's file that [`member_head`] reads.
const MEMBER_HEAD_BYTES: u64 = 64 * 1024;

/// Reads `from` into `out`, at most [`MEMBER_HEAD_BYTES`], until its end
/// or its first error (a head cut inside the file), keeping what came
/// before it.
fn read_what_there_is(from: &mut (impl Read + ?Sized), out: &mut Vec<u8>) {
    let mut buf = [0u8; 8192];
    let mut from = from.take(MEMBER_HEAD_BYTES);
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
    }
}

/// Feeds compressed and archived as maintainers ship them, for tests.
#[cfg(test)]
pub(crate) mod shipped {
    use std::io::{self, Write};

    use super::ContentEncoding;

    /// `bytes` compressed with `encoding`.
    pub(crate) fn compressed(encoding: ContentEncoding, bytes: &[u8]) -> Vec<u8> {
        match encoding {
            ContentEncoding::Identity => bytes.to_vec(),
            ContentEncoding::Gzip => {
                let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
                e.write_all(bytes).unwrap();
                e.finish().unwrap()
            }
            ContentEncoding::Zstd => zstd::encode_all(bytes, 3).unwrap(),
            ContentEncoding::Bzip2 => {
                let mut e = bzip2::write::BzEncoder::new(Vec::new(), bzip2::Compression::default());
                e.write_all(bytes).unwrap();
                e.finish().unwrap()
            }
            ContentEncoding::Xz => {
                let mut e =
                    lzma_rust2::XzWriter::new(Vec::new(), lzma_rust2::XzOptions::with_preset(6)).unwrap();
                e.write_all(bytes).unwrap();
                e.finish().unwrap()
            }
        }
    }

    /// Every encoding.
    pub(crate) const ENCODINGS: [ContentEncoding; 5] = [
        ContentEncoding::Identity,
        ContentEncoding::Gzip,
        ContentEncoding::Zstd,
        ContentEncoding::Bzip2,
        ContentEncoding::Xz,
    ];

    /// A ustar archive of `files` (a name ending in `/` is a directory).
    /// A tar of `files` whose names are written as given, `./` kept (the
    /// tar crate's own paths drop it, as GNU tar writes it for `-C dir .`).
    pub(crate) fn tar_named(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, bytes) in files {
            let mut header = tar::Header::new_ustar();
            header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
            if name.ends_with('/') {
                header.set_entry_type(tar::EntryType::Directory);
            }
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append(&header, *bytes).unwrap();
        }
        builder.into_inner().unwrap()
    }

    pub(crate) fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut builder = tar::Builder::new(Vec::new());
        for (name, bytes) in files {
            let mut header = tar::Header::new_ustar();
            if name.ends_with('/') {
                header.set_entry_type(tar::EntryType::Directory);
            }
            header.set_size(bytes.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, name, *bytes).unwrap();
        }
        builder.into_inner().unwrap()
    }

    /// A zip archive of `files`, deflated (a name ending in `/` is a
    /// directory).
    pub(crate) fn zip_of(files: &[(&str, &[u8])]) -> Vec<u8> {
        let mut writer = zip::ZipWriter::new(io::Cursor::new(Vec::new()));
        for (name, bytes) in files {
            let options =
                zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Deflated);
            if name.ends_with('/') {
                writer.add_directory(*name, options).unwrap();
            } else {
                writer.start_file(*name, options).unwrap();
                writer.write_all(bytes).unwrap();
            }
        }
        writer.finish().unwrap().into_inner()
    }
}

#[cfg(test)]
mod tests {
    use super::shipped::{ENCODINGS, compressed, tar_named, tar_of, zip_of};
    use super::*;

    const FEED: &[u8] = b"http://a.example/1\nhttp://b.example/2/x.php?q=1\r\nc.example\n";

    fn read_all(content: &[u8]) -> io::Result<Vec<u8>> {
        let encoding = ContentEncoding::sniff(content);
        let decoded = decoder(content, encoding)?;
        read_member(decoded, None, |member| {
            let mut out = Vec::new();
            member.read_to_end(&mut out)?;
            Ok(out)
        })
    }

    #[test]
    fn every_compression_and_archive_reads_as_the_plain_feed() {
        for encoding in ENCODINGS {
            let bytes = compressed(encoding, FEED);
            assert_eq!(ContentEncoding::sniff(&bytes), encoding);
            assert_eq!(read_all(&bytes).unwrap(), FEED, "{encoding:?}");
        }
        // A tar of one file, plain and inside each compression; with a
        // directory and macOS metadata beside it.
        let tar = tar_of(&[
            ("feed/", b""),
            ("feed/._urls.txt", b"\0\x05junk"),
            ("feed/urls.txt", FEED),
        ]);
        for encoding in ENCODINGS {
            let bytes = compressed(encoding, &tar);
            assert_eq!(read_all(&bytes).unwrap(), FEED, "tar in {encoding:?}");
        }
        let zip = zip_of(&[("__MACOSX/._csv.txt", b"junk"), ("dir/", b""), ("csv.txt", FEED)]);
        assert_eq!(read_all(&zip).unwrap(), FEED);
    }

    #[test]
    fn several_files_or_none_are_refused_naming_them() {
        let tar = tar_of(&[("a.txt", FEED), ("b.txt", FEED)]);
        let error = read_all(&tar).unwrap_err().to_string();
        assert_eq!(
            error,
            "tar archive holds several files (a.txt, b.txt): the build reads an archive of one file; \
             name the file that is the list with the source's `member`"
        );
        let names: Vec<String> = (0..7).map(|i| format!("{i}.txt")).collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), FEED)).collect();
        let error = read_all(&zip_of(&files)).unwrap_err().to_string();
        assert!(
            error.starts_with(
                "zip archive holds several files (0.txt, 1.txt, 2.txt, 3.txt, 4.txt and 2 more)"
            ),
            "{error}"
        );
        assert_eq!(
            read_all(&tar_of(&[("d/", b"")])).unwrap_err().to_string(),
            "tar archive holds no file"
        );
        assert_eq!(
            read_all(&zip_of(&[])).unwrap_err().to_string(),
            "zip archive holds no file"
        );
    }

    #[test]
    fn content_cut_short_or_damaged_fails() {
        for encoding in &ENCODINGS[1..] {
            let encoding = *encoding;
            let bytes = compressed(encoding, FEED);
            assert!(read_all(&bytes[..bytes.len() - 4]).is_err(), "{encoding:?} cut");
        }
        let tar = tar_of(&[("a.txt", FEED)]);
        assert!(
            read_all(&tar[..512 + FEED.len() - 3]).is_err(),
            "tar cut in its file"
        );
        let zip = zip_of(&[("a.txt", FEED)]);
        assert!(read_all(&zip[..zip.len() - 10]).is_err(), "zip cut");
        // A zip whose file's bytes changed: its CRC-32 fails at the end.
        let mut damaged = zip_of(&[("a.txt", &FEED.repeat(20))]);
        let at = damaged.windows(5).position(|w| w == b"a.txt").unwrap() + 5 + 10;
        damaged[at] ^= 0x55;
        assert!(read_all(&damaged).is_err(), "zip damaged");
    }

    /// Review findings on the first version: a tar was read only up to its
    /// end blocks, so a damaged `.tar.gz` or `.tar.zst` past the checks
    /// before a build was published (its CRC at the content's end never
    /// read), a plain tar rewritten while it was read too (the end, where
    /// the file's change is seen, never reached), and a second archive or
    /// anything after the first was dropped unread.
    #[test]
    fn regression_a_tar_is_read_to_the_content_s_end() {
        let big: Vec<u8> = (0..20_000)
            .flat_map(|i| format!("http://evil{i}.example/p/{i}\n").into_bytes())
            .collect();
        let tar = tar_of(&[("list.txt", &big)]);
        // GNU tar's record padding after the end blocks is read past.
        let padded = [tar.as_slice(), &[0; 10240]].concat();
        assert_eq!(read_all(&padded).unwrap(), big);
        // A gzip whose CRC at its end is damaged fails.
        let mut gz = compressed(ContentEncoding::Gzip, &tar);
        let at = gz.len() - 6;
        gz[at] ^= 0x08;
        let error = read_all(&gz).unwrap_err().to_string();
        assert!(error.contains("checksum"), "{error}");
        // Anything but zeros after the end: a second archive, or junk.
        for after in [tar.clone(), b"GARBAGE".to_vec()] {
            let error = read_all(&[tar.as_slice(), &after].concat())
                .unwrap_err()
                .to_string();
            assert_eq!(
                error,
                "data after the tar archive's end (a second archive, or damage): the build reads one archive"
            );
        }
    }

    /// Further review findings: a v7 tar (no `ustar` magic) was read as
    /// text, losing its first line to the header; two zip entries of one
    /// name were read as one (the zip crate keeps one entry per name); a
    /// header size near 2^64 overflowed; content compressed twice, or an
    /// archive holding a compressed file or another archive, failed as a
    /// collapsed parse with reasons about hosts; pzstd's skippable frame
    /// was not taken for zstd; a zip's file in a method the build does not
    /// read gave a bare number.
    #[test]
    fn regression_archives_and_compressions_the_first_version_misread() {
        // v7: the ustar magic and version cleared, the checksum made again.
        let mut v7 = tar_of(&[("list.txt", FEED)]);
        v7[257..265].fill(0);
        v7[148..156].fill(b' ');
        let sum: u32 = v7[..512].iter().map(|&b| u32::from(b)).sum();
        v7[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        assert_eq!(read_all(&v7).unwrap(), FEED);
        // Two entries named alike (the writer refuses to write them: the
        // second's name is changed in place, in its local header and its
        // directory record, as an appended archive has them).
        let mut zip = zip_of(&[("list.txt", FEED), ("list.tzt", b"http://other.example/\n")]);
        let mut at = 0;
        while let Some(found) = zip[at..].windows(8).position(|w| w == b"list.tzt") {
            zip[at + found + 6] = b'x';
            at += found + 8;
        }
        let error = read_all(&zip).unwrap_err().to_string();
        assert!(error.contains("several entries under one name"), "{error}");
        // A size field of 2^64 − 1 (base-256).
        let mut huge = tar_of(&[("d/", b""), ("list.txt", FEED)]);
        huge[124] = 0x80;
        huge[125..136].fill(0xff);
        huge[148..156].fill(b' ');
        let sum: u32 = huge[..512].iter().map(|&b| u32::from(b)).sum();
        huge[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
        assert!(read_all(&huge).is_err());
        // One compression or archive inside another.
        let gz = compressed(ContentEncoding::Gzip, FEED);
        let error = read_all(&compressed(ContentEncoding::Gzip, &gz))
            .unwrap_err()
            .to_string();
        assert_eq!(
            error,
            "the decompressed content is gzip content: the build reads one compression and one archive \
             around the list, not one inside the other"
        );
        let error = read_all(&tar_of(&[("list.gz", &gz)])).unwrap_err().to_string();
        assert!(
            error.starts_with("the archive's file list.gz is gzip content"),
            "{error}"
        );
        let error = read_all(&zip_of(&[("l.tar", &tar_of(&[("l", FEED)]))]))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("the archive's file l.tar is a tar archive"),
            "{error}"
        );
        let error = read_all(&tar_of(&[("l.7z", b"7z\xbc\xaf\x27\x1c\x00\x04")]))
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("the archive's file l.7z is a 7z archive"),
            "{error}"
        );
        // pzstd: a skippable frame, then the frame.
        let pzstd = [
            b"\x50\x2a\x4d\x18\x04\x00\x00\x00abcd".as_slice(),
            &compressed(ContentEncoding::Zstd, FEED),
        ]
        .concat();
        assert_eq!(ContentEncoding::sniff(&pzstd), ContentEncoding::Zstd);
        assert_eq!(read_all(&pzstd).unwrap(), FEED);
    }

    /// Sets a tar header's checksum again after a test changed it.
    fn reseal(header: &mut [u8]) {
        header[148..156].fill(b' ');
        let sum: u32 = header[..512].iter().map(|&b| u32::from(b)).sum();
        header[148..155].copy_from_slice(format!("{sum:06o}\0").as_bytes());
    }

    /// A second review's findings on the fixes: a zip comment holding the
    /// end record's signature was read as the record (a false "share a
    /// name"); a v7 directory (a regular entry named with a `/`) counted as
    /// a file; a zip file in bzip2 said `Unsupported(12)`; a damaged tar
    /// header echoed its bytes under the compression's name; a zip holding
    /// a tar had its tar bytes checked as text before the build.
    #[test]
    fn regression_what_the_second_review_found() {
        let mut writer = zip::ZipWriter::new(io::Cursor::new(Vec::new()));
        writer
            .set_raw_comment(b"PK\x05\x06\0\0\0\0\x09\0\x09\0".to_vec().into_boxed_slice())
            .unwrap();
        let options = zip::write::SimpleFileOptions::default();
        writer.start_file("list.txt", options).unwrap();
        std::io::Write::write_all(&mut writer, FEED).unwrap();
        let commented = writer.finish().unwrap().into_inner();
        assert_eq!(read_all(&commented).unwrap(), FEED);

        let mut v7_dir = tar_of(&[("d/", b""), ("d/list.txt", FEED)]);
        v7_dir[156] = b'0';
        reseal(&mut v7_dir[..512]);
        assert_eq!(read_all(&v7_dir).unwrap(), FEED);

        let mut bz = zip_of(&[("list.txt", FEED)]);
        for (signature, offset) in [(b"PK\x03\x04", 8), (b"PK\x01\x02", 10)] {
            let at = bz.windows(4).position(|w| w == signature).unwrap() + offset;
            bz[at..at + 2].copy_from_slice(&12u16.to_le_bytes());
        }
        let error = read_all(&bz).unwrap_err().to_string();
        assert_eq!(
            error,
            "zip archive's file list.txt is compressed with bzip2 (zip method 12), which the build does not \
             read (it reads deflated or stored files)"
        );

        let mut junk = tar_of(&[("a.txt", FEED), ("b.txt", FEED)]);
        let second = 512 + FEED.len().next_multiple_of(512);
        junk[second + 148..second + 155].copy_from_slice(b"zzzzzzz");
        let error = read_all(&compressed(ContentEncoding::Gzip, &junk))
            .unwrap_err()
            .to_string();
        assert_eq!(error, "tar: a header's checksum does not match");

        let zip_of_tar = zip_of(&[("l.tar", &tar_of(&[("l", FEED)]))]);
        assert!(member_head(&zip_of_tar, None).is_empty());
    }

    fn read_named(content: &[u8], member: &str) -> io::Result<Vec<u8>> {
        let decoded = decoder(content, ContentEncoding::sniff(content))?;
        read_member(decoded, Some(member), |file| {
            let mut out = Vec::new();
            file.read_to_end(&mut out)?;
            Ok(out)
        })
    }

    /// Regression: the names an archive holds are the feed's, and went into
    /// the source's reason as they were: a name with a line break forged a
    /// line of the log ("source content unreadable … it holds phishing/url",
    /// then a line of the name's choosing), and five names of 1 MiB made a
    /// reason of 5 MB, logged twice per build and served in `/v1/lists`.
    #[test]
    fn regression_archive_names_in_a_reason_are_escaped_and_cut() {
        let forged = "phishing/url\n2026-01-01T00:00:00Z  INFO published snapshot version=9";
        let long = format!("phishing/{}", "a".repeat(1 << 19));
        for archive in [
            tar_of(&[(forged, FEED)]),
            zip_of(&[(forged, FEED)]),
            tar_of(&[(long.as_str(), FEED), ("phishing/b", FEED)]),
        ] {
            let error = read_named(&archive, "phishing/urls").unwrap_err().to_string();
            assert!(!error.contains('\n'), "{error}");
            assert!(error.chars().count() < 400, "{} chars", error.chars().count());
        }
        let error = read_named(&tar_of(&[(forged, FEED)]), "phishing/urls")
            .unwrap_err()
            .to_string();
        assert!(
            error
                .ends_with("it holds phishing/url\\n2026-01-01T00:00:00Z  INFO published snapshot version=9"),
            "{error}"
        );
        // The file read without a `member` is named in its own errors.
        let html = b"<!DOCTYPE html><html><body>blocked</body></html>\n";
        let error = read_member(
            decoder(&tar_of(&[(forged, html)])[..], ContentEncoding::Identity).unwrap(),
            None,
            |file| {
                let mut out = Vec::new();
                file.read_to_end(&mut out)?;
                Ok(out)
            },
        )
        .unwrap_err()
        .to_string();
        assert!(!error.contains('\n'), "{error}");
    }

    /// An archive of several files, as UT1 ships each category
    /// (`phishing/domains`, `phishing/urls`, `phishing/usage`): the file a
    /// source's `member` names is read, with or without the `./` that
    /// `tar -C dir .` writes.
    #[test]
    fn member_names_the_file_read_from_an_archive_of_several() {
        const URLS: &[u8] = b"a.example/p\nb.example/q/\n";
        let files: [(&str, &[u8]); 4] = [
            ("phishing/", b""),
            ("phishing/domains", FEED),
            ("phishing/urls", URLS),
            ("phishing/usage", b"# usage\nblack\n"),
        ];
        let tar = tar_of(&files);
        let dotted = tar_named(
            &files
                .map(|(name, bytes)| (format!("./{name}"), bytes))
                .each_ref()
                .map(|(n, b)| (n.as_str(), *b)),
        );
        assert_eq!(dotted[..2], *b"./");
        for encoding in ENCODINGS {
            for tar in [&tar, &dotted] {
                let bytes = compressed(encoding, tar);
                assert_eq!(read_named(&bytes, "phishing/urls").unwrap(), URLS, "{encoding:?}");
                assert_eq!(
                    read_named(&bytes, "./phishing/domains").unwrap(),
                    FEED,
                    "{encoding:?}"
                );
            }
        }
        let zip = zip_of(&files);
        assert_eq!(read_named(&zip, "phishing/urls").unwrap(), URLS);
        assert_eq!(read_named(&zip, "phishing/domains").unwrap(), FEED);
        // The checks before a build see the named file.
        assert_eq!(&*member_head(&tar, Some("phishing/urls")), URLS);
        assert_eq!(&*member_head(&zip, Some("phishing/urls")), URLS);
        // A one-file archive may name its file too.
        assert_eq!(
            read_named(&tar_of(&[("list.txt", FEED)]), "list.txt").unwrap(),
            FEED
        );
        // Without `member`, several files are refused, saying how to name one.
        let error = read_all(&tar).unwrap_err().to_string();
        assert_eq!(
            error,
            "tar archive holds several files (phishing/domains, phishing/urls, phishing/usage): the build \
             reads an archive of one file; name the file that is the list with the source's `member`"
        );
    }

    #[test]
    fn a_member_the_archive_lacks_or_holds_twice_or_that_is_no_file_is_refused() {
        let names: Vec<String> = [
            "adult", "phishing", "malware", "gambling", "dating", "drugs", "games",
        ]
        .iter()
        .flat_map(|c| [format!("blacklists/{c}/domains"), format!("blacklists/{c}/urls")])
        .collect();
        let files: Vec<(&str, &[u8])> = names.iter().map(|n| (n.as_str(), FEED)).collect();
        // A misspelt member: the names closest to it first.
        for archive in [tar_of(&files), zip_of(&files)] {
            let error = read_named(&archive, "blacklists/phising/domains")
                .unwrap_err()
                .to_string();
            assert!(
                error.ends_with(
                    "archive holds no file blacklists/phising/domains (the source's `member`); it holds \
                     blacklists/phishing/domains, blacklists/phishing/urls, blacklists/adult/domains, \
                     blacklists/adult/urls, blacklists/malware/domains and 9 more"
                ),
                "{error}"
            );
        }
        // Listed as `tar -C dir .` writes names, with `./`.
        let dotted: Vec<String> = names.iter().map(|n| format!("./{n}")).collect();
        let files: Vec<(&str, &[u8])> = dotted.iter().map(|n| (n.as_str(), FEED)).collect();
        let error = read_named(&tar_named(&files), "blacklists/phising/domains")
            .unwrap_err()
            .to_string();
        assert!(
            error.contains(
                "it holds ./blacklists/phishing/domains, ./blacklists/phishing/urls, ./blacklists/adult/"
            ),
            "{error}"
        );
        // Named twice: a tar appended to (the zip crate would keep one).
        let twice = tar_named(&[
            ("l/urls", FEED),
            ("l/domains", FEED),
            ("./l/urls", b"x.example\n"),
        ]);
        assert_eq!(
            read_named(&twice, "l/urls").unwrap_err().to_string(),
            "tar archive holds the source's `member` l/urls twice (an archive appended to): which is the \
             list cannot be told"
        );
        // A directory, a symbolic link.
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::Symlink);
        header.set_size(0);
        builder.append_link(&mut header, "bl/ads", "publicite").unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_size(FEED.len() as u64);
        builder
            .append_data(&mut header, "bl/publicite/domains", FEED)
            .unwrap();
        let linked = builder.into_inner().unwrap();
        assert_eq!(
            read_named(&linked, "bl/ads").unwrap_err().to_string(),
            "tar archive's bl/ads (the source's `member`) is a symbolic link to publicite, not a file"
        );
        let tar = tar_of(&[("d/", b""), ("d/a", FEED), ("d/b", FEED)]);
        for member in ["d", "d/", "./d/"] {
            assert_eq!(
                read_named(&tar, member).unwrap_err().to_string(),
                format!("tar archive's {member} (the source's `member`) is a directory, not a file")
            );
        }
        let zip = zip_of(&[("d/", b""), ("d/a", FEED), ("d/b", FEED)]);
        assert_eq!(
            read_named(&zip, "d").unwrap_err().to_string(),
            "zip archive's d (the source's `member`) is a directory, not a file"
        );
        // No archive at all: the content is not what the source says.
        for content in [FEED.to_vec(), compressed(ContentEncoding::Gzip, FEED)] {
            assert_eq!(
                read_named(&content, "phishing/domains").unwrap_err().to_string(),
                "the source reads the archive's file phishing/domains (`member`), but its content is no tar \
                 or zip archive"
            );
        }
        assert_eq!(
            read_named(&tar_of(&[("d/", b"")]), "d/a")
                .unwrap_err()
                .to_string(),
            "tar archive holds no file (the source's `member` is d/a)"
        );
    }

    /// A third review's findings: a text list with `ustar` at bytes
    /// 257–262 was taken for a tar archive (refused at every build, its
    /// new entries never published).
    #[test]
    fn regression_text_that_spells_ustar_where_a_tar_header_has_it_is_text() {
        // A comment line of 239 bytes, then a URL whose `ustar` (of
        // `mustard`) starts 18 bytes in: at byte 257.
        let text = [
            format!("#{}\n", "a".repeat(237)),
            "http://x.example/mustard-recipes/\n".repeat(30),
        ]
        .concat()
        .into_bytes();
        assert_eq!(&text[257..262], b"ustar");
        assert!(!is_archive(&text));
        assert_eq!(read_all(&text).unwrap(), text);
        assert_eq!(&*member_head(&text, None), text.as_slice());
    }

    /// A zip64 archive (over 65,535 entries: its end record counts
    /// 0xFFFF) holding one name twice was read as one of them.
    #[test]
    fn regression_a_zip64_archive_naming_a_file_twice_is_refused() {
        let mut writer = zip::ZipWriter::new(io::Cursor::new(Vec::new()));
        let options =
            zip::write::SimpleFileOptions::default().compression_method(zip::CompressionMethod::Stored);
        writer.start_file("list.txt", options).unwrap();
        std::io::Write::write_all(&mut writer, FEED).unwrap();
        for i in 0..65_540 {
            writer.start_file(format!("p/{i}"), options).unwrap();
        }
        writer.start_file("list.tzt", options).unwrap();
        std::io::Write::write_all(&mut writer, b"http://other.example/\n").unwrap();
        let mut zip = writer.finish().unwrap().into_inner();
        let mut at = 0;
        while let Some(found) = zip[at..].windows(8).position(|w| w == b"list.tzt") {
            zip[at + found + 6] = b'x';
            at += found + 8;
        }
        for member in [None, Some("list.txt")] {
            let decoded = decoder(zip.as_slice(), ContentEncoding::Identity).unwrap();
            let error = read_member(decoded, member, |_| Ok(())).unwrap_err().to_string();
            assert!(error.contains("several entries under one name"), "{error}");
        }
    }

    /// A third review's findings on `member` and the archives: without a
    /// `member`, an archive of several files whose first is an HTML page
    /// was refused as an HTML page, never saying to name the file; a
    /// member past the content's first 64 KiB got no HTML or UTF-16 check
    /// (refused as a collapsed parse); a pax header longer than 64 KiB
    /// lost its `path`; a damaged zip file said `Invalid checksum` alone.
    #[test]
    fn regression_what_the_third_review_found() {
        let html = b"<!DOCTYPE html><html><body>Moved</body></html>\n".as_slice();
        for archive in [
            tar_of(&[("feed/README.html", html), ("feed/urls", FEED)]),
            zip_of(&[("feed/README.html", html), ("feed/urls", FEED)]),
        ] {
            assert!(member_head(&archive, None).is_empty());
            assert_eq!(&*member_head(&archive, Some("feed/urls")), FEED);
            let error = read_all(&archive).unwrap_err().to_string();
            assert!(error.contains("archive holds several files"), "{error}");
        }
        // The member after 100 KiB of another file.
        let domains = "a.example\n".repeat(10_000);
        let utf16: Vec<u8> = "\u{feff}http://a.example/\n"
            .encode_utf16()
            .flat_map(u16::to_le_bytes)
            .collect();
        for (urls, says) in [
            (html, "the archive's file phishing/urls: an HTML page, not a list"),
            (
                utf16.as_slice(),
                "the archive's file phishing/urls: content is UTF-16",
            ),
        ] {
            let files = [("phishing/domains", domains.as_bytes()), ("phishing/urls", urls)];
            for archive in [tar_of(&files), zip_of(&files)] {
                let error = read_named(&archive, "phishing/urls").unwrap_err().to_string();
                assert!(error.starts_with(says), "{error}");
                assert_eq!(
                    read_named(&archive, "phishing/domains").unwrap(),
                    domains.as_bytes()
                );
            }
        }
        // A pax header with a 70 KB comment before its path.
        let record = |key: &str, value: &[u8]| {
            let body = [b" ".as_slice(), key.as_bytes(), b"=", value, b"\n"].concat();
            let mut length = body.len() + 1;
            while format!("{length}").len() + body.len() != length {
                length += 1;
            }
            [format!("{length}").into_bytes(), body].concat()
        };
        let pax = [
            record("comment", &[b'x'; 70_000]),
            record("path", "phishing/café".as_bytes()),
        ]
        .concat();
        let mut builder = tar::Builder::new(Vec::new());
        let mut header = tar::Header::new_ustar();
        header.set_entry_type(tar::EntryType::XHeader);
        header.set_size(pax.len() as u64);
        builder
            .append_data(&mut header, "PaxHeaders/caf", pax.as_slice())
            .unwrap();
        let mut header = tar::Header::new_ustar();
        header.set_size(FEED.len() as u64);
        builder.append_data(&mut header, "phishing/caf", FEED).unwrap();
        let archive = builder.into_inner().unwrap();
        assert_eq!(read_named(&archive, "phishing/café").unwrap(), FEED);
        // A damaged zip file names the archive, the file and the check.
        let mut damaged = zip_of(&[("a.txt", &FEED.repeat(20))]);
        let at = damaged.windows(5).position(|w| w == b"a.txt").unwrap() + 5 + 10;
        damaged[at] ^= 0x55;
        let error = read_all(&damaged).unwrap_err().to_string();
        assert!(error.starts_with("zip archive's file a.txt: "), "{error}");
    }

    /// A fourth review's findings: a tar whose first header's checksum is
    /// damaged was read as text (its header junk lines, its file's first
    /// line lost); an archive of several files without `member`, whose
    /// second file runs past the head the checks before a build read, had
    /// its first file checked (HTML) rather than said to be several.
    #[test]
    fn regression_what_the_fourth_review_found() {
        let big = "http://evil.example/p\n".repeat(5_000);
        let mut damaged = tar_of(&[("feed/urls", big.as_bytes())]);
        damaged[136] ^= 1;
        for content in [damaged.clone(), compressed(ContentEncoding::Gzip, &damaged)] {
            let error = read_all(&content).unwrap_err().to_string();
            assert_eq!(error, "tar: a header's checksum does not match");
        }
        let html = b"<!DOCTYPE html><html>see the list</html>\n".as_slice();
        let several = tar_of(&[("feed/README.html", html), ("feed/urls", big.as_bytes())]);
        assert!(several.len() > 65_536);
        assert!(member_head(&several[..65_536], None).is_empty());
        assert_eq!(&*member_head(&several[..65_536], Some("feed/README.html")), html);
    }

    #[test]
    fn formats_not_read_are_refused_by_name() {
        assert_eq!(
            unsupported(b"7z\xbc\xaf\x27\x1c\x00\x04").unwrap(),
            "content is a 7z archive, which the build does not read: serve or save the list as plain text, \
             gzip, bzip2, xz or zstd, or as a tar or zip archive"
        );
        assert!(
            unsupported(b"Rar!\x1a\x07\x01\x00")
                .unwrap()
                .contains("a RAR archive")
        );
        assert!(unsupported(b"LZIP\x01").unwrap().contains("lzip"));
        assert!(unsupported(b"http://a.example/\n").is_none());
        assert!(unsupported(&compressed(ContentEncoding::Gzip, FEED)).is_none());
    }

    #[test]
    fn the_checks_before_a_build_see_an_archive_s_file() {
        let tar = tar_of(&[("d/", b""), ("list.txt", b"<!DOCTYPE html><html>")]);
        assert_eq!(&*member_head(&tar, None), b"<!DOCTYPE html><html>");
        // A head that ends inside the file: what it holds of it.
        let tar = tar_of(&[("list.txt", &FEED.repeat(40))]);
        assert_eq!(&*member_head(&tar[..1024], None), &FEED.repeat(40)[..512]);
        let zip = zip_of(&[("dir/", b""), ("list.txt", FEED)]);
        assert_eq!(&*member_head(&zip, None), FEED);
        assert_eq!(&*member_head(FEED, None), FEED);
    }
}
