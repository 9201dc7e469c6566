//! Large response bodies sent with `sendfile(2)`, as nginx sends files.
//!
//! A snapshot body is served from memory ([`Bytes`]); hyper hands it to
//! the socket with `writev`, which copies it into the kernel's socket
//! buffers, and the receiver's kernel copies it again. `sendfile` from a
//! file's pages into a TCP socket skips the first copy: the socket
//! references the pages. On the full-snapshot download (`BENCHMARKS.md`
//! row 4.4, 0.9 MB a response) that copy is most of the server's CPU, and
//! on a machine short of memory bandwidth it decided the row against nginx.
//!
//! So a body made [`sendable`] is written, once, into a sealed anonymous
//! file (`memfd_create(2)`, Linux), and its memory range is registered
//! with that file. [`SendfileStream`], the connection's stream, looks up
//! the range of each buffer hyper writes: a buffer lying inside a
//! registered body is sent from the file at the same offset, anything else
//! is written as before. hyper and axum are unchanged, and so is every
//! byte on the wire (the file holds the body's bytes, sealed against
//! writes; a test downloads through both paths and compares).
//!
//! The registry is sound because a registration lives exactly as long as
//! its memory: the [`Bytes`] returned by [`sendable`] owns both the body
//! and the registration, and removes the registration before the body is
//! freed. A buffer hyper is writing is alive (hyper holds the `Bytes`), so
//! the only registered range that can contain it is its own body's.
//!
//! Elsewhere (another system, a body under [`MIN_SENDFILE_BYTES`], an
//! error making the file) bodies are plain `Bytes`, written as before.

use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};

use axum::body::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// Bodies shorter than this are written from memory: copying a few pages
/// costs less than the file and the extra system call for the headers.
pub(crate) const MIN_SENDFILE_BYTES: usize = 64 * 1024;

/// `body` as `Bytes` that [`SendfileStream`] sends with `sendfile`; `body`
/// itself when it is short, or not on Linux, or the file cannot be made.
pub(crate) fn sendable(body: Vec<u8>) -> Bytes {
    #[cfg(target_os = "linux")]
    if body.len() >= MIN_SENDFILE_BYTES {
        match linux::Registered::new(body) {
            Ok(registered) => return Bytes::from_owner(registered),
            Err((body, e)) => {
                tracing::warn!(error = %e, "no anonymous file for a snapshot body; it is written from memory");
                return Bytes::from(body);
            }
        }
    }
    Bytes::from(body)
}

/// Total bytes sent with `sendfile` by this process.
#[cfg(test)]
fn bytes_sent() -> u64 {
    SENT.load(std::sync::atomic::Ordering::Relaxed)
}

static SENT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
/// A registered body's file, shared with the connections sending from it.
type File = Arc<std::os::fd::OwnedFd>;

/// Registered bodies by the address of their first byte: `(length, id,
/// file)`. The id tells a body's own registration from another's at the
/// same address (the same memory made sendable twice).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
static REGISTRY: Mutex<BTreeMap<usize, (usize, u64, File)>> = Mutex::new(BTreeMap::new());

/// The file and offset holding `buf`, if `buf` lies inside a registered
/// body.
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
fn lookup(buf: &[u8]) -> Option<(File, u64)> {
    let start = buf.as_ptr() as usize;
    let registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
    let (&base, (len, _, file)) = registry.range(..=start).next_back()?;
    let offset = start - base;
    (offset.checked_add(buf.len())? <= *len).then(|| (Arc::clone(file), offset as u64))
}

#[cfg(target_os = "linux")]
mod linux {
    use std::io::Write;
    use std::os::fd::OwnedFd;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, PoisonError};

    use rustix::fs::{MemfdFlags, SealFlags};

    use super::REGISTRY;

    static NEXT_ID: AtomicU64 = AtomicU64::new(0);

    /// A body and its registration; dropping it unregisters first.
    pub(super) struct Registered {
        body: Vec<u8>,
        id: u64,
    }

    impl Registered {
        /// Writes `body` into a sealed anonymous file and registers it;
        /// `body` back with the error when that fails.
        pub(super) fn new(body: Vec<u8>) -> Result<Self, (Vec<u8>, std::io::Error)> {
            match file_of(&body) {
                Ok(file) => {
                    let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
                    let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
                    registry
                        .entry(body.as_ptr() as usize)
                        .or_insert((body.len(), id, Arc::new(file)));
                    drop(registry);
                    Ok(Self { body, id })
                }
                Err(e) => Err((body, e)),
            }
        }
    }

    /// A sealed anonymous file holding `body`.
    fn file_of(body: &[u8]) -> std::io::Result<OwnedFd> {
        let fd =
            rustix::fs::memfd_create("blocksieve-body", MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING)?;
        let mut file = std::fs::File::from(fd);
        file.write_all(body)?;
        let fd = OwnedFd::from(file);
        rustix::fs::fcntl_add_seals(
            &fd,
            SealFlags::WRITE | SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL,
        )?;
        Ok(fd)
    }

    impl AsRef<[u8]> for Registered {
        fn as_ref(&self) -> &[u8] {
            &self.body
        }
    }

    impl Drop for Registered {
        fn drop(&mut self) {
            let mut registry = REGISTRY.lock().unwrap_or_else(PoisonError::into_inner);
            let key = self.body.as_ptr() as usize;
            if registry.get(&key).is_some_and(|(_, id, _)| *id == self.id) {
                registry.remove(&key);
            }
        }
    }
}

/// A connection's TCP stream that sends buffers lying inside a
/// [`sendable`] body with `sendfile`, and everything else as `TcpStream`
/// does.
#[derive(Debug)]
pub(crate) struct SendfileStream(TcpStream);

impl SendfileStream {
    /// Wraps an accepted connection.
    pub(crate) const fn new(stream: TcpStream) -> Self {
        Self(stream)
    }

    /// Sends from `file` at `offset` up to `len` bytes once the socket can
    /// take them.
    #[cfg(target_os = "linux")]
    fn poll_sendfile(
        &self,
        cx: &mut Context<'_>,
        file: &File,
        offset: u64,
        len: usize,
    ) -> Poll<io::Result<usize>> {
        loop {
            std::task::ready!(self.0.poll_write_ready(cx))?;
            let sent = self.0.try_io(tokio::io::Interest::WRITABLE, || {
                let mut at = offset;
                rustix::fs::sendfile(&self.0, &**file, Some(&mut at), len).map_err(io::Error::from)
            });
            match sent {
                Ok(n) => {
                    SENT.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                    return Poll::Ready(Ok(n));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

#[cfg(target_os = "linux")]
impl SendfileStream {
    /// Writes `bufs` (a response's head) with `MSG_MORE`: the kernel holds
    /// a short last segment for the body that follows, so the head goes
    /// out in the body's first segment, as nginx's `tcp_nopush` does.
    fn poll_send_more(&self, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        use rustix::net::{SendAncillaryBuffer, SendFlags};
        loop {
            std::task::ready!(self.0.poll_write_ready(cx))?;
            let sent = self.0.try_io(tokio::io::Interest::WRITABLE, || {
                rustix::net::sendmsg(
                    &self.0,
                    bufs,
                    &mut SendAncillaryBuffer::default(),
                    SendFlags::MORE | SendFlags::NOSIGNAL,
                )
                .map_err(io::Error::from)
            });
            match sent {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                other => return Poll::Ready(other),
            }
        }
    }
}

impl AsyncRead for SendfileStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for SendfileStream {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        #[cfg(target_os = "linux")]
        if buf.len() >= MIN_SENDFILE_BYTES
            && let Some((file, offset)) = lookup(buf)
        {
            return self.poll_sendfile(cx, &file, offset, buf.len());
        }
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    /// The buffers before the first one inside a registered body are
    /// written together; a call that starts with such a buffer sends it
    /// alone from its file. (hyper writes a response's head and the start
    /// of its body in one call; the head goes first, then the body.)
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        #[cfg(target_os = "linux")]
        {
            let from_file = bufs.iter().enumerate().find_map(|(i, b)| {
                let (file, offset) = (b.len() >= MIN_SENDFILE_BYTES).then(|| lookup(b)).flatten()?;
                Some((i, file, offset))
            });
            match from_file {
                Some((i, file, offset)) if bufs[..i].iter().all(|b| b.is_empty()) => {
                    return self.poll_sendfile(cx, &file, offset, bufs[i].len());
                }
                Some((i, ..)) => return self.poll_send_more(cx, &bufs[..i]),
                None => {}
            }
        }
        Pin::new(&mut self.0).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.0.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(len: usize) -> Vec<u8> {
        (0..len).map(|i| (i % 251) as u8).collect()
    }

    #[test]
    fn short_bodies_are_not_registered() {
        let b = sendable(body(100));
        assert!(lookup(&b).is_none());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_body_is_found_by_any_range_inside_it_until_dropped() {
        let b = sendable(body(MIN_SENDFILE_BYTES * 2));
        let (_, offset) = lookup(&b).expect("registered");
        assert_eq!(offset, 0);
        let (_, offset) = lookup(&b[1000..5000]).expect("inside");
        assert_eq!(offset, 1000);
        assert!(lookup(&b[b.len() - 1..]).is_some());
        // Not a buffer reaching past it.
        let copy = b.to_vec();
        assert!(lookup(&copy).is_none());
        let clone = b.clone();
        drop(b);
        assert!(lookup(&clone[10..20]).is_some(), "a clone keeps it registered");
        let start = clone.as_ptr() as usize;
        drop(clone);
        let registry = REGISTRY.lock().unwrap();
        assert!(!registry.contains_key(&start), "unregistered with its memory");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_file_holds_the_body_and_is_sealed() {
        use std::io::{Read, Seek, Write};
        let original = body(MIN_SENDFILE_BYTES + 7);
        let b = sendable(original.clone());
        let (file, _) = lookup(&b).unwrap();
        let mut f = std::fs::File::from(file.try_clone().unwrap());
        let mut read = Vec::new();
        f.seek(std::io::SeekFrom::Start(0)).unwrap();
        f.read_to_end(&mut read).unwrap();
        assert_eq!(read, original);
        assert!(f.write_all(b"x").is_err(), "sealed against writes");
    }

    /// An HTTP/1.1 server over [`SendfileStream`] answering every request
    /// with `body`; its address.
    async fn serve(body: Bytes) -> std::net::SocketAddr {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let body = body.clone();
                let service = hyper::service::service_fn(move |_req| {
                    let body = body.clone();
                    async move {
                        Ok::<_, std::convert::Infallible>(hyper::Response::new(axum::body::Body::from(body)))
                    }
                });
                let io = hyper_util::rt::TokioIo::new(SendfileStream::new(stream));
                tokio::spawn(hyper::server::conn::http1::Builder::new().serve_connection(io, service));
            }
        });
        addr
    }

    #[tokio::test]
    async fn responses_sent_from_the_file_are_the_body_byte_for_byte() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let original: Vec<u8> = {
            let mut x = 0x9e37_79b9_7f4a_7c15_u64;
            (0..3_000_017)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        };
        let addr = serve(sendable(original.clone())).await;
        let before = bytes_sent();

        // Two answers on one keep-alive connection, read at full speed.
        let client = reqwest::Client::new();
        for _ in 0..2 {
            let got = client.get(format!("http://{addr}/")).send().await.unwrap();
            assert_eq!(got.content_length(), Some(original.len() as u64));
            assert!(got.bytes().await.unwrap() == original, "the body differs");
        }
        // A client reading slowly through a small receive buffer: the file
        // is sent in many partial calls, each resumed where the last ended;
        // then a second answer on the same connection is framed right.
        let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        socket.set_recv_buffer_size(16 * 1024).unwrap();
        socket.connect(&addr.into()).unwrap();
        socket.set_nonblocking(true).unwrap();
        let mut slow = tokio::net::TcpStream::from_std(socket.into()).unwrap();
        slow.write_all(b"GET / HTTP/1.1\r\nhost: x\r\n\r\nGET / HTTP/1.1\r\nhost: x\r\n\r\n")
            .await
            .unwrap();
        let mut received = Vec::new();
        let mut chunk = vec![0; 64 * 1024];
        let head = |r: &[u8]| r.windows(4).position(|w| w == b"\r\n\r\n").map(|p| p + 4);
        while received.len() < 2 * (original.len() + 200) {
            let n = slow.read(&mut chunk).await.unwrap();
            assert!(n > 0, "closed early after {} bytes", received.len());
            received.extend_from_slice(&chunk[..n]);
            if received.len() < 200_000 {
                tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            }
            let Some(first) = head(&received) else { continue };
            if received.len() < first + original.len() {
                continue;
            }
            let Some(second) = head(&received[first + original.len()..]) else {
                continue;
            };
            if received.len() == first + original.len() + second + original.len() {
                break;
            }
        }
        let first = head(&received).unwrap();
        assert!(received[..first].starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(
            received[first..first + original.len()] == original[..],
            "first body differs"
        );
        let rest = &received[first + original.len()..];
        let second = head(rest).unwrap();
        assert!(rest[..second].starts_with(b"HTTP/1.1 200 OK\r\n"));
        assert!(rest[second..] == original[..], "second body differs");

        #[cfg(target_os = "linux")]
        assert!(
            bytes_sent() - before >= 4 * original.len() as u64,
            "the bodies were not sent with sendfile"
        );
        let _ = before;
    }
}
