//! A raw HTTP/1.1 client over a TCP socket, for requests an HTTP library
//! would refuse or "fix": dot segments and bytes it would normalize, heads
//! of any size, malformed request lines. Each request is sent as given and
//! the answer is read until the server closes the connection.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// A response as read off the socket.
#[derive(Debug, Clone)]
pub struct RawResponse {
    /// The status code.
    pub status: u16,
    /// Header names (lowercase) and values.
    pub headers: Vec<(String, String)>,
    /// The body, de-chunked if needed.
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of header `name` (lowercase).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
}

/// `METHOD target HTTP/1.1` with `Host`, `Connection: close`, the extra
/// header lines given (each without CRLF) and a body with its length.
pub fn request_bytes(method: &str, target: &str, headers: &[&str], body: &[u8]) -> Vec<u8> {
    let mut out = format!("{method} {target} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
    for h in headers {
        out.push_str(h);
        out.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" {
        out.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    out.push_str("\r\n");
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Sends `request` to `addr` and reads the answer until the server closes
/// the connection (at most `timeout` in all).
///
/// # Errors
///
/// The I/O error, a timeout, or `InvalidData` when no HTTP response head
/// came back (e.g. the connection was closed without one: a crashed
/// handler).
pub async fn send(addr: SocketAddr, request: &[u8], timeout: Duration) -> io::Result<RawResponse> {
    tokio::time::timeout(timeout, async {
        let (mut reader, mut writer) = TcpStream::connect(addr).await?.into_split();
        // Write while reading: the server may answer (413, 431) and close
        // before reading all of a large request, and what it sent must be
        // read before the reset its close causes. The write half stays open
        // (held by the finished task) until the answer is read: a
        // half-close could end the exchange early.
        let request = request.to_vec();
        let sending = tokio::spawn(async move {
            let _ = writer.write_all(&request).await;
            writer
        });
        let mut bytes = Vec::new();
        let mut buf = [0u8; 16 * 1024];
        let result = loop {
            match reader.read(&mut buf).await {
                Ok(0) => break Ok(()),
                Ok(n) => bytes.extend_from_slice(&buf[..n]),
                // A reset after the answer (unread request bytes) is fine.
                Err(e) if !bytes.is_empty() && e.kind() == io::ErrorKind::ConnectionReset => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        sending.abort();
        result.and_then(|()| parse(&bytes))
    })
    .await
    .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "no complete answer in time"))?
}

fn parse(bytes: &[u8]) -> io::Result<RawResponse> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| invalid("no response head"))?;
    let head = String::from_utf8_lossy(&bytes[..end]);
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| invalid("bad status line"))?;
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &bytes[end + 4..];
    let chunked = headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked { dechunk(rest) } else { rest.to_vec() };
    Ok(RawResponse {
        status,
        headers,
        body,
    })
}

fn dechunk(mut rest: &[u8]) -> Vec<u8> {
    let mut body = Vec::new();
    while let Some(eol) = rest.windows(2).position(|w| w == b"\r\n") {
        let size = std::str::from_utf8(&rest[..eol])
            .ok()
            .and_then(|s| usize::from_str_radix(s.split(';').next().unwrap_or("").trim(), 16).ok())
            .unwrap_or(0);
        rest = &rest[eol + 2..];
        if size == 0 || rest.len() < size {
            break;
        }
        body.extend_from_slice(&rest[..size]);
        rest = rest.get(size + 2..).unwrap_or_default();
    }
    body
}
