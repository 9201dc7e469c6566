//! The accept loop: HTTP/1.1 connections with the per-connection timeouts
//! that layers cannot express, and graceful shutdown.
//!
//! `axum::serve` (axum 0.8) gives hyper no timer, so hyper enforces no
//! header-read timeout: a client sending its headers one byte at a time (a
//! "slowloris") keeps its connection, task and buffer forever, and so does a
//! client that never reads its response once the socket buffers are full.
//! Tower layers only see a request once its headers are complete and stop
//! watching once the response headers exist, so both cases need the
//! connection itself. [`serve`] is therefore a small hand-written loop over
//! hyper's HTTP/1 connection builder, the same shape as `axum::serve`:
//!
//! - [`ConnectionLimits::header_read_timeout`]: hyper closes a connection
//!   whose request line and headers are not complete this long after it
//!   started waiting for them (which also closes idle keep-alive
//!   connections);
//! - [`ConnectionLimits::max_head_bytes`]: a request head larger than this is
//!   answered `431` by hyper, so a slow client holds at most this much;
//! - [`ConnectionLimits::write_stall_timeout`]: [`GuardedStream`] fails a
//!   write that makes no progress for this long, which ends the connection;
//! - [`ConnectionLimits::max_connections`]: beyond this many open
//!   connections (over all serving threads) the loops stop accepting, so
//!   new ones wait in the kernel's accept backlog until one closes.
//!
//! The loop runs on one current-thread runtime per core, each on its own
//! thread with its own listener, so that a connection's requests are read,
//! answered and written on one thread, as nginx's workers do: on a
//! multi-thread runtime, a request woken on one worker was often run on the
//! other (a wake-up and a context switch per request, which cost the 304
//! answers more than their own work). Builds, schedules and the store
//! follower stay on the runtime that called [`serve`].
//!
//! And a lingering close ([`LINGER_TIME`], [`LINGER_MAX_BYTES`]): when the
//! server closes a connection whose client may still be sending (a `413`
//! answered on the declared length, before the body was read), closing at
//! once with unread bytes makes the kernel send a reset, which can destroy
//! the answer before the client reads it. [`GuardedStream`] therefore
//! half-closes, then reads and discards what still arrives for a moment.
//!
//! HTTP/2 is not served: the API's clients speak HTTP/1.1 (TLS and HTTP/2,
//! if wanted, belong to a reverse proxy in front).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use socket2::{Domain, SockRef, Socket, Type};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio::time::{Instant, Sleep};

/// Per-connection limits, enforced below the router.
#[derive(Debug, Clone, Copy)]
pub struct ConnectionLimits {
    /// Longest a client may take to send a request's line and headers,
    /// counted from when the server starts waiting for them.
    pub header_read_timeout: Duration,
    /// Longest a response write may make no progress (a client that stopped
    /// reading) before the connection is closed.
    pub write_stall_timeout: Duration,
    /// Largest request head (request line and headers) in bytes, complete
    /// or not; hyper answers a larger one `431` and closes the connection.
    pub max_head_bytes: usize,
    /// Most connections open at once; more wait in the accept backlog.
    pub max_connections: usize,
}

/// Longest a closing connection keeps reading and discarding what its
/// client still sends (see [`GuardedStream`]): long enough for a client
/// that writes its whole body before reading to finish writing it and read
/// the answer, short enough that a closing connection costs little.
pub const LINGER_TIME: Duration = Duration::from_secs(1);

/// Most bytes a closing connection reads and discards before it closes
/// anyway: a client still sending after this much is cut with a reset.
pub const LINGER_MAX_BYTES: usize = 1024 * 1024;

/// Serves `router` until `shutdown` completes, on one current-thread
/// runtime per core ([`serving_threads`]), each accepting on its own
/// listener and answering its own connections, as an nginx worker does:
/// a request never crosses threads. The listeners are `listener` and, when
/// it was bound with `SO_REUSEPORT` ([`bind`]), more bound to the same
/// address (the kernel spreads new connections over them); otherwise they
/// share `listener`'s accept queue. After `shutdown`, each stops accepting
/// and lets every open connection finish its current request; once all are
/// closed, or `drain` has passed (then the rest are aborted), this returns
/// `true` if all finished in time. Dropping this future aborts every
/// connection without waiting. While [`ConnectionLimits::max_connections`]
/// are open in all, nothing is accepted: new connections wait in the
/// kernel's accept backlog (and beyond it, their SYNs are retried by the
/// client's kernel).
pub async fn serve(
    listener: TcpListener,
    router: crate::server::Api,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) -> io::Result<bool> {
    let listeners = spread(listener, serving_threads())?;
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(Stop::Serve);
    let stop_tx = AbortOnDrop(stop_tx);
    let slots = Arc::new(Semaphore::new(limits.max_connections));
    let mut finished = Vec::new();
    for (i, std_listener) in listeners.into_iter().enumerate() {
        let (done_tx, done_rx) = tokio::sync::oneshot::channel::<()>();
        let (router, slots, mut stop) = (router.clone(), Arc::clone(&slots), stop_rx.clone());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        std::thread::Builder::new()
            .name(format!("serve-{i}"))
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = TcpListener::from_std(std_listener) else {
                        return;
                    };
                    let mut draining = stop.clone();
                    let draining = async move {
                        let _ = draining.wait_for(|s| *s != Stop::Serve).await;
                    };
                    tokio::select! {
                        () = serve_one(listener, router, limits, slots, draining) => {}
                        _ = stop.wait_for(|s| *s == Stop::Abort) => {}
                    }
                });
                // Dropping the runtime drops the connections still open.
                drop(runtime);
                drop(done_tx);
            })?;
        finished.push(done_rx);
    }
    shutdown.await;
    let _ = stop_tx.0.send(Stop::Drain);
    let deadline = tokio::time::Instant::now() + drain;
    let mut in_time = true;
    for mut done in finished {
        if in_time && tokio::time::timeout_at(deadline, &mut done).await.is_ok() {
            continue;
        }
        if in_time {
            in_time = false;
            let _ = stop_tx.0.send(Stop::Abort);
        }
        let _ = done.await;
    }
    Ok(in_time)
}

/// How many threads serve connections: one per core.
pub fn serving_threads() -> usize {
    std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
}

/// Binds a listener on `addr` with `SO_REUSEPORT` where the system has it,
/// so that [`serve`] can give each serving thread its own.
///
/// An address another process already listens on is refused, as a plain
/// bind would: `SO_REUSEPORT` alone would let a second publisher (of the
/// same user) share the port, and the kernel split connections between
/// the two. So the address is first bound without it.
///
/// # Errors
///
/// When the address cannot be bound; `AddrInUse` when something listens
/// on it.
pub fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    if addr.port() != 0 {
        let probe = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
        // Not refused for connections of an earlier run in TIME_WAIT.
        probe.set_reuse_address(true)?;
        probe.bind(&addr.into())?;
    }
    let socket = reuse_port_socket(addr)?;
    let listener = std::net::TcpListener::from(socket);
    TcpListener::from_std(listener)
}

fn reuse_port_socket(addr: SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    #[cfg(all(
        unix,
        not(any(target_os = "solaris", target_os = "illumos", target_os = "cygwin"))
    ))]
    socket.set_reuse_port(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket)
}

/// `listener` and `count - 1` more: bound to its address with
/// `SO_REUSEPORT` when it has that option, else copies of it.
fn spread(listener: TcpListener, count: usize) -> io::Result<Vec<std::net::TcpListener>> {
    let listener = listener.into_std()?;
    let addr = listener.local_addr()?;
    let reuse = SockRef::from(&listener).reuse_port().unwrap_or(false);
    let mut all = Vec::with_capacity(count);
    for _ in 1..count {
        all.push(if reuse {
            reuse_port_socket(addr)?.into()
        } else {
            listener.try_clone()?
        });
    }
    all.insert(0, listener);
    Ok(all)
}

/// What the serving threads are told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    /// Keep serving.
    Serve,
    /// Stop accepting, finish the open connections.
    Drain,
    /// Close everything now.
    Abort,
}

/// Tells the serving threads to abort when [`serve`] is dropped.
struct AbortOnDrop(tokio::sync::watch::Sender<Stop>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        let _ = self.0.send(Stop::Abort);
    }
}

/// One serving thread's loop: accepts on `listener` while `slots` has a
/// free connection slot, until `shutdown`; then lets every open connection
/// finish its current request, and returns once all are closed.
async fn serve_one(
    listener: TcpListener,
    router: crate::server::Api,
    limits: ConnectionLimits,
    slots: Arc<Semaphore>,
    shutdown: impl Future<Output = ()>,
) {
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout)
        .max_header_size(limits.max_head_bytes);
    let graceful = GracefulShutdown::new();
    // Owning the connection tasks means dropping this future ends them.
    let mut connections = tokio::task::JoinSet::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, slot) = tokio::select! {
            // A slot first, so that at the cap nothing is accepted.
            accepted = async {
                let slot = Arc::clone(&slots).acquire_owned().await;
                (listener.accept().await, slot)
            } => match accepted {
                (Ok((stream, _peer)), Ok(slot)) => (stream, slot),
                (Ok(_), Err(_)) => continue,
                (Err(e), _) => {
                    accept_error(e).await;
                    continue;
                }
            },
            // Reap finished connections so the set does not grow.
            Some(_) = connections.join_next(), if !connections.is_empty() => continue,
            () = &mut shutdown => break,
        };
        // As nginx on keep-alive connections (`tcp_nodelay`): a response's
        // last short segment is not held back by Nagle's algorithm until the
        // client's delayed ACK (40 ms on Linux), which set the p99 of a full
        // snapshot download (6-53 ms against nginx's 4-5 ms).
        let _ = stream.set_nodelay(true);
        let stream = crate::sendfile::SendfileStream::new(stream);
        let io = TokioIo::new(GuardedStream::new(stream, limits.write_stall_timeout));
        let service = TowerToHyperService::new(router.clone());
        let connection = graceful.watch(http.serve_connection(io, service));
        connections.spawn(async move {
            if let Err(e) = connection.await {
                // Header timeouts, stalled writes and resets end up here;
                // they are the client's problem, not the server's.
                tracing::debug!(error = %e, "connection closed with an error");
            }
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
}

/// What to do when `accept` fails: errors about one connection are skipped;
/// anything else (e.g. out of file descriptors) is logged and retried after
/// a second, as `axum::serve` does, so the server never stops accepting.
async fn accept_error(e: io::Error) {
    if matches!(
        e.kind(),
        io::ErrorKind::ConnectionRefused | io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset
    ) {
        return;
    }
    tracing::error!(error = %e, "accept failed; retrying in 1 s");
    tokio::time::sleep(Duration::from_secs(1)).await;
}

/// A connection's stream with two guards hyper does not have:
///
/// - writes fail with [`io::ErrorKind::TimedOut`] once they have made no
///   progress for a set time: a client that stops reading cannot hold a
///   connection (its task, socket and response) forever;
/// - shutting down is a lingering close: after the write side is shut
///   (the client sees the end of the answer), what the client still sends
///   is read and discarded until it closes its side, for at most
///   [`LINGER_TIME`] and [`LINGER_MAX_BYTES`]. Closing a socket with unread
///   bytes makes the kernel answer with a reset (RFC 1122 §4.2.2.13), and a
///   client that writes its whole request body before reading (most HTTP
///   libraries) would get that reset instead of the `413` sent before the
///   body was read. hyper shuts the stream down only on a close it chose
///   (`Connection: close`, an unread body, a graceful shutdown), not on
///   errors or timeouts, which drop it.
///
/// Reads are passed through; their deadlines are hyper's header-read
/// timeout and the router's body-read timeout.
#[derive(Debug)]
pub struct GuardedStream<S> {
    /// The connection.
    inner: S,
    /// How long a write may stay blocked.
    limit: Duration,
    /// Armed when a write first returns `Pending`; cleared by any progress.
    stalled_since: Option<Pin<Box<Sleep>>>,
    /// Where the lingering close is.
    closing: Closing,
}

/// The steps of [`GuardedStream`]'s lingering close.
#[derive(Debug)]
enum Closing {
    /// Not closing: the write side is open.
    Open,
    /// The write side is shut; discarding what arrives until the deadline.
    Lingering {
        /// When to stop waiting for the client to close.
        deadline: Pin<Box<Sleep>>,
        /// Bytes discarded so far.
        discarded: usize,
    },
    /// Done: the client closed, or the time or byte budget ran out.
    Closed,
}

impl<S> GuardedStream<S> {
    /// Wraps `inner`, failing writes blocked for longer than `limit`.
    pub fn new(inner: S, limit: Duration) -> Self {
        Self {
            inner,
            limit,
            stalled_since: None,
            closing: Closing::Open,
        }
    }

    /// Passes `result` through, tracking stalls: `Pending` arms the timer
    /// (once), anything else clears it; an expired timer turns `Pending`
    /// into an error.
    fn watch<T>(&mut self, cx: &mut Context<'_>, result: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if result.is_ready() {
            self.stalled_since = None;
            return result;
        }
        let limit = self.limit;
        let timer = self
            .stalled_since
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(Instant::now() + limit)));
        if timer.as_mut().poll(cx).is_ready() {
            self.stalled_since = None;
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("response write stalled for {limit:?}"),
            )));
        }
        Poll::Pending
    }
}

impl<S: AsyncRead + Unpin> GuardedStream<S> {
    /// Reads and discards until the client closes its side, an error, the
    /// deadline or the byte budget; `Pending` while none of these happened.
    fn poll_linger(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let Closing::Lingering { deadline, discarded } = &mut self.closing else {
            return Poll::Ready(());
        };
        let mut scratch = [0u8; 8 * 1024];
        loop {
            if deadline.as_mut().poll(cx).is_ready() || *discarded >= LINGER_MAX_BYTES {
                break;
            }
            let mut buf = ReadBuf::new(&mut scratch);
            match Pin::new(&mut self.inner).poll_read(cx, &mut buf) {
                Poll::Ready(Ok(())) if !buf.filled().is_empty() => *discarded += buf.filled().len(),
                // End of stream or an error: nothing more to wait for.
                Poll::Ready(_) => break,
                Poll::Pending => return Poll::Pending,
            }
        }
        self.closing = Closing::Closed;
        Poll::Ready(())
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for GuardedStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for GuardedStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.watch(cx, result)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let result = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.watch(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let result = Pin::new(&mut self.inner).poll_flush(cx);
        self.watch(cx, result)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if matches!(self.closing, Closing::Open) {
            let result = Pin::new(&mut self.inner).poll_shutdown(cx);
            match self.watch(cx, result) {
                Poll::Ready(Ok(())) => {
                    self.closing = Closing::Lingering {
                        deadline: Box::pin(tokio::time::sleep(LINGER_TIME)),
                        discarded: 0,
                    };
                }
                other => return other,
            }
        }
        self.poll_linger(cx).map(Ok)
    }
}

/// SIGUSR1 ("build now", [`Publisher::run`](crate::Publisher::run))
/// caught from now on: by default it ends the process. The signals are
/// kept for `run`: a signal before it listens is followed by the first
/// builds, which start later, and a replica logs it as ignored. (Only the
/// handler was kept, and `run` listened from when it started: a signal
/// between, such as one sent as soon as `serve` said it listens, went
/// unanswered.)
pub fn catch_build_requests() {
    #[cfg(unix)]
    if let Ok(requests) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1())
        && let Ok(mut caught) = CAUGHT_BUILD_REQUESTS.lock()
    {
        *caught = Some(requests);
    }
}

/// What [`catch_build_requests`] caught, until `run` takes it.
#[cfg(unix)]
static CAUGHT_BUILD_REQUESTS: std::sync::Mutex<Option<tokio::signal::unix::Signal>> =
    std::sync::Mutex::new(None);

/// SIGUSR1 from [`catch_build_requests`] on, a signal since then included;
/// without it (`run` in a process that did not call it), from now on.
#[cfg(unix)]
pub(crate) fn build_requests() -> std::io::Result<tokio::signal::unix::Signal> {
    let caught = CAUGHT_BUILD_REQUESTS.lock().ok().and_then(|mut c| c.take());
    caught.map_or_else(
        || tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1()),
        Ok,
    )
}

/// SIGINT (Ctrl-C) and SIGTERM, caught from when this is made: `serve`
/// makes it before it says it listens, so a signal right after that line
/// drains rather than ending the process half started. SIGHUP is caught
/// too, and only logged: the configuration is read at start, and by
/// default SIGHUP would end the process without draining (which systemd
/// counts as a clean exit, so `Restart=on-failure` does not restart it).
pub struct Signals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    hangup: Option<tokio::signal::unix::Signal>,
}

impl Signals {
    /// SIGINT, SIGTERM and SIGHUP caught from now on.
    #[must_use]
    pub fn catch() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            Self {
                interrupt: signal(SignalKind::interrupt()).ok(),
                terminate: signal(SignalKind::terminate()).ok(),
                hangup: signal(SignalKind::hangup()).ok(),
            }
        }
        #[cfg(not(unix))]
        {
            Self {}
        }
    }

    /// The next SIGINT or SIGTERM: its number (2 or 15). A SIGHUP
    /// meanwhile is logged as ignored.
    pub async fn next(&mut self) -> i32 {
        #[cfg(unix)]
        {
            async fn next_of(signal: &mut Option<tokio::signal::unix::Signal>) {
                match signal {
                    Some(s) => {
                        s.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            loop {
                tokio::select! {
                    () = next_of(&mut self.interrupt) => return 2,
                    () = next_of(&mut self.terminate) => return 15,
                    () = next_of(&mut self.hangup) => tracing::warn!(
                        "SIGHUP ignored: the configuration is read at start only; restart the publisher to apply a change (SIGTERM drains and stops it)"
                    ),
                }
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            2
        }
    }
}

#[cfg(test)]
mod tests {
    /// A second publisher on the address of a running one fails to start,
    /// as without `SO_REUSEPORT`, instead of sharing its connections.
    #[tokio::test]
    async fn a_second_bind_of_a_listening_address_is_refused() {
        let first = super::bind("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = first.local_addr().unwrap();
        let second = super::bind(addr);
        assert_eq!(
            second.err().map(|e| e.kind()),
            Some(std::io::ErrorKind::AddrInUse)
        );
        drop(first);
        assert!(super::bind(addr).is_ok(), "the address is free again");
    }

    use tokio::io::AsyncWriteExt as _;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn a_write_nobody_reads_fails_after_the_limit() {
        // A 64-byte pipe whose other end never reads.
        let (client, _server) = tokio::io::duplex(64);
        let mut guarded = GuardedStream::new(client, Duration::from_secs(5));
        let started = Instant::now();
        let err = guarded.write_all(&[0u8; 1024]).await.err();
        assert_eq!(err.map(|e| e.kind()), Some(io::ErrorKind::TimedOut));
        assert_eq!(started.elapsed(), Duration::from_secs(5));
    }

    #[tokio::test(start_paused = true)]
    async fn shutdown_discards_what_the_client_still_sends_until_it_closes() {
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut guarded = GuardedStream::new(server, Duration::from_secs(5));
        guarded.write_all(b"HTTP/1.1 413 ...").await.ok();
        let started = Instant::now();
        let peer = tokio::spawn(async move {
            // The rest of a body the server did not want, then the answer.
            for _ in 0..10 {
                client.write_all(&[b'x'; 1000]).await.ok();
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let mut answer = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut client, &mut answer)
                .await
                .ok();
            answer
        });
        assert!(guarded.shutdown().await.is_ok());
        // Returned when the client closed (after reading to the end), not
        // at the linger limit.
        assert_eq!(started.elapsed(), Duration::from_millis(200));
        assert_eq!(peer.await.ok(), Some(b"HTTP/1.1 413 ...".to_vec()));
        match guarded.closing {
            Closing::Closed => {}
            ref other => panic!("{other:?}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn lingering_stops_at_the_time_limit() {
        let (server, _client) = tokio::io::duplex(64);
        let mut guarded = GuardedStream::new(server, Duration::from_secs(5));
        let started = Instant::now();
        assert!(guarded.shutdown().await.is_ok());
        assert_eq!(started.elapsed(), LINGER_TIME);
    }

    #[tokio::test(start_paused = true)]
    async fn lingering_stops_at_the_byte_limit() {
        let (server, mut client) = tokio::io::duplex(64 * 1024);
        let mut guarded = GuardedStream::new(server, Duration::from_secs(5));
        let writer = tokio::spawn(async move {
            let mut sent = 0usize;
            while client.write_all(&[b'x'; 4096]).await.is_ok() {
                sent += 4096;
            }
            sent
        });
        let started = Instant::now();
        assert!(guarded.shutdown().await.is_ok());
        assert!(started.elapsed() < LINGER_TIME);
        drop(guarded);
        let sent = writer.await.unwrap_or(0);
        assert!(
            (LINGER_MAX_BYTES..LINGER_MAX_BYTES + 128 * 1024).contains(&sent),
            "{sent} bytes sent before the close"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_slow_reader_that_keeps_up_is_not_cut() {
        let (client, mut server) = tokio::io::duplex(64);
        let mut guarded = GuardedStream::new(client, Duration::from_secs(5));
        let reader = tokio::spawn(async move {
            let mut buf = [0u8; 64];
            let mut total = 0;
            while total < 1024 {
                // Reads every 4 s: each write waits less than the limit.
                tokio::time::sleep(Duration::from_secs(4)).await;
                total += tokio::io::AsyncReadExt::read(&mut server, &mut buf)
                    .await
                    .unwrap_or(0);
            }
            total
        });
        assert!(guarded.write_all(&[0u8; 1024]).await.is_ok());
        assert_eq!(reader.await.ok(), Some(1024));
    }
}
