//! gzip content decoded as it streams, member after member, as GNU gzip
//! decodes a file: zeros after the last complete member are padding (a
//! tape block, or `(cat feed.gz; head -c 512 /dev/zero) > feed`), ignored
//! as `gzip -d` ignores them ("decompression OK, trailing zero bytes
//! ignored"). flate2's `MultiGzDecoder` reads them as a new member and
//! fails on its header. Bytes other than zeros after a member are read as
//! the next member (an error when they are not one: `invalid gzip
//! header`), and after the padding they are an error.

use std::io::{self, BufRead, Read};

use flate2::bufread::GzDecoder;

/// Decodes the gzip members of `input` one after another (see the module's
/// documentation), never holding more than `input`'s buffer of them.
pub fn gunzip<R: BufRead>(input: R) -> Gunzip<R> {
    Gunzip {
        state: State::Member(Box::new(GzDecoder::new(input))),
    }
}

/// The decoded stream of [`gunzip`].
pub struct Gunzip<R: BufRead> {
    state: State<R>,
}

enum State<R: BufRead> {
    /// Inside a member (its header, data or trailer); boxed, as its
    /// inflate state is most of the decoder.
    Member(Box<GzDecoder<R>>),
    /// After a complete member; `padded` once zeros followed it.
    Between { input: R, padded: bool },
    /// Only for the moment a state is moved out.
    Done,
}

impl<R: BufRead> Read for Gunzip<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            match std::mem::replace(&mut self.state, State::Done) {
                State::Member(mut member) => match member.read(buf) {
                    // The member's trailer (CRC and size) checked.
                    Ok(0) => {
                        self.state = State::Between {
                            input: member.into_inner(),
                            padded: false,
                        };
                    }
                    read => {
                        self.state = State::Member(member);
                        return read;
                    }
                },
                State::Between { mut input, padded } => {
                    let (first, zeros) = match input.fill_buf() {
                        Ok(next) => (
                            next.first().copied(),
                            next.iter().take_while(|&&b| b == 0).count(),
                        ),
                        Err(e) => {
                            self.state = State::Between { input, padded };
                            return Err(e);
                        }
                    };
                    match first {
                        // The end of the input.
                        None => return Ok(0),
                        Some(0) => {
                            input.consume(zeros);
                            self.state = State::Between { input, padded: true };
                        }
                        Some(_) if padded => {
                            self.state = State::Between { input, padded };
                            return Err(io::Error::new(
                                io::ErrorKind::InvalidData,
                                "bytes other than zeros after the zero padding that follows the gzip data",
                            ));
                        }
                        Some(_) => self.state = State::Member(Box::new(GzDecoder::new(input))),
                    }
                }
                State::Done => return Ok(0),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{BufReader, Read as _, Write as _};

    use super::gunzip;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    fn decoded(bytes: &[u8], buffer: usize) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::new();
        gunzip(BufReader::with_capacity(buffer, bytes))
            .read_to_end(&mut out)
            .map(|_| out)
    }

    /// Members, padding and what follows, through input buffers of 1 byte
    /// to more than the whole: zeros split across many reads are padding
    /// still, and an error is one at every size.
    #[test]
    fn members_then_zeros_decode_and_anything_else_after_is_an_error() {
        let (one, two) = (gzip(b"first\n"), gzip(b"second\n"));
        let both = b"first\nsecond\n".to_vec();
        for buffer in [1, 2, 7, 64, 8192] {
            let ok = |bytes: Vec<u8>, expected: &[u8]| {
                let out = decoded(&bytes, buffer).unwrap_or_else(|e| panic!("{buffer}: {e}"));
                assert_eq!(out, expected, "{buffer}");
            };
            ok(one.clone(), b"first\n");
            ok([one.as_slice(), &two].concat(), &both);
            ok([one.as_slice(), &[0; 512]].concat(), b"first\n");
            ok([one.as_slice(), &two, &[0]].concat(), &both);
            ok([one.as_slice(), &gzip(b""), &[0; 3]].concat(), b"first\n");
            let error = |bytes: Vec<u8>| {
                decoded(&bytes, buffer).expect_err(&format!("{buffer}"));
            };
            error([one.as_slice(), b"junk"].concat());
            error([one.as_slice(), &[0; 9], b"junk"].concat());
            error([one.as_slice(), &[0; 9], &two].concat());
            error(one[..one.len() - 1].to_vec());
            error([one.as_slice(), &two[..5]].concat());
            error(b"not gzip".to_vec());
        }
    }
}
