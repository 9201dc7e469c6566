//! A server that writes scripted bytes on each TCP connection: for answers
//! a well-behaved HTTP framework will not produce (bodies cut short, bodies
//! without a length, hangs, drips, stalls).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::{OwnRuntime, etag_of, on_own_runtime};

/// How long a hanging or stalling connection is held open.
const HOLD: Duration = Duration::from_secs(60);

/// What the raw server does with one connection, after reading the request
/// head.
#[derive(Debug, Clone)]
pub enum Raw {
    /// Writes these bytes and closes.
    Respond(Vec<u8>),
    /// Never answers; holds the connection open for a minute.
    Hang,
    /// Writes these bytes, then holds the connection open for a minute
    /// without closing it.
    Stall(Vec<u8>),
    /// Writes `head`, then the body one byte every `every`.
    Drip {
        /// The status line and headers.
        head: Vec<u8>,
        /// The body, sent one byte at a time.
        body: Vec<u8>,
        /// The pause after each body byte.
        every: Duration,
    },
}

/// A server on 127.0.0.1:0 that answers each connection with the next
/// scripted [`Raw`] action.
#[derive(Debug)]
pub struct RawServer {
    /// `http://127.0.0.1:<port>`.
    pub base_url: String,
    /// Connections accepted so far.
    served: Arc<Mutex<usize>>,
    /// The runtime of a server started with [`RawServer::repeat_blocking`],
    /// stopped when the server is dropped.
    _own_runtime: Option<OwnRuntime>,
}

impl RawServer {
    /// Answers the n-th connection with `script[n]`, on the current tokio
    /// runtime; refuses connections once the script is done.
    ///
    /// # Panics
    ///
    /// When no port can be bound, or outside a tokio runtime.
    pub async fn start(script: Vec<Raw>) -> Self {
        Self::start_with(script.into_iter()).await
    }

    /// Answers every connection with `action`, on the current tokio runtime.
    ///
    /// # Panics
    ///
    /// When no port can be bound, or outside a tokio runtime.
    pub async fn repeat(action: Raw) -> Self {
        Self::start_with(std::iter::repeat(action)).await
    }

    /// [`RawServer::repeat`] on a runtime of its own, for tests that are not
    /// async; it serves until dropped.
    ///
    /// # Panics
    ///
    /// When no port can be bound or no runtime built.
    pub fn repeat_blocking(action: Raw) -> Self {
        let (mut server, runtime) = on_own_runtime(move || Self::repeat(action));
        server._own_runtime = Some(runtime);
        server
    }

    async fn start_with(script: impl Iterator<Item = Raw> + Send + 'static) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let served = Arc::new(Mutex::new(0));
        let count = Arc::clone(&served);
        tokio::spawn(async move {
            for action in script {
                let Ok((mut stream, _)) = listener.accept().await else {
                    return;
                };
                *count.lock().unwrap_or_else(PoisonError::into_inner) += 1;
                read_head(&mut stream).await;
                act(stream, action).await;
            }
        });
        Self {
            base_url: format!("http://{addr}"),
            served,
            _own_runtime: None,
        }
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        *self.served.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A complete `200` response with `Content-Length` and the fake
    /// publisher's ETag.
    pub fn ok(body: &[u8]) -> Raw {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nETag: {}\r\nConnection: close\r\n\r\n",
            body.len(),
            etag_of(body)
        )
        .into_bytes();
        r.extend_from_slice(body);
        Raw::Respond(r)
    }

    /// A `200` response that declares the whole body but sends only the
    /// first `sent` bytes before closing.
    ///
    /// # Panics
    ///
    /// When `sent` is longer than `body`.
    pub fn cut(body: &[u8], sent: usize) -> Raw {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(&body[..sent]);
        Raw::Respond(r)
    }

    /// A `200` snapshot response that declares the whole body, sends only
    /// the first `sent` bytes and then neither sends more nor closes.
    ///
    /// # Panics
    ///
    /// When `sent` is longer than `body`.
    pub fn stall(body: &[u8], sent: usize) -> Raw {
        let mut r = format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        r.extend_from_slice(&body[..sent]);
        Raw::Stall(r)
    }

    /// A `200` response with no `Content-Length`: the body runs until the
    /// connection closes, so only the bytes received can be limited.
    pub fn until_close(body: &[u8]) -> Raw {
        let mut r = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        r.extend_from_slice(body);
        Raw::Respond(r)
    }

    /// A `200` response whose body comes one byte every `every`.
    pub fn drip(body: &[u8], every: Duration) -> Raw {
        let head = format!(
            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        )
        .into_bytes();
        Raw::Drip {
            head,
            body: body.to_vec(),
            every,
        }
    }
}

/// Reads until the end of the request head (or of the connection).
async fn read_head(stream: &mut TcpStream) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        match stream.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&buf[..n]),
        }
    }
}

/// Carries out `action` on `stream`; hangs, stalls and drips go on in a
/// task of their own so that the next connection is accepted meanwhile.
async fn act(mut stream: TcpStream, action: Raw) {
    match action {
        Raw::Respond(bytes) => {
            let _ = stream.write_all(&bytes).await;
            let _ = stream.shutdown().await;
        }
        Raw::Hang => {
            tokio::spawn(async move {
                tokio::time::sleep(HOLD).await;
                drop(stream);
            });
        }
        Raw::Stall(bytes) => {
            tokio::spawn(async move {
                let _ = stream.write_all(&bytes).await;
                tokio::time::sleep(HOLD).await;
                drop(stream);
            });
        }
        Raw::Drip { head, body, every } => {
            tokio::spawn(async move {
                if stream.write_all(&head).await.is_err() {
                    return;
                }
                for byte in body {
                    if stream.write_all(&[byte]).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(every).await;
                }
            });
        }
    }
}

/// A base URL on 127.0.0.1 nobody listens on (a port bound, then freed).
///
/// # Panics
///
/// When no port can be bound.
pub fn unreachable_url() -> String {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("bind");
    format!("http://{addr}")
}
