//! Slow and hostile clients on a real socket: 1,000 connections sending
//! their headers one byte a second ("slowloris") and clients that pipeline
//! requests and never read the answers, while healthy clients keep being
//! served at their normal latency; the server cuts the hostile connections
//! by its header-read and write-stall timeouts. And graceful shutdown: an
//! in-flight request finishes, the drain deadline cuts the rest.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use blocksieve_publisher::Config;
use blocksieve_publisher::config::{SourceConfig, SourceFormat};
use blocksieve_tests::{RunningPublisher, config, heavy_test_lock, open_files_limit};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpSocket, TcpStream};

/// Both timeouts, in the test: short, so the test is short.
const TIMEOUT_S: u64 = 2;

/// A list of 20,000 generated URLs (a ~22 KB snapshot, so a few hundred
/// unread answers overflow every socket buffer).
fn slow_config(dir: &std::path::Path) -> Config {
    let feed = dir.join("feed.txt");
    let text: String = (0..20_000)
        .map(|i| format!("http://host{i}.example/p\n"))
        .collect();
    std::fs::write(&feed, text).unwrap();
    let mut cfg = config(
        &dir.join("data"),
        "phishing",
        vec![SourceConfig::file(&feed, SourceFormat::Urls)],
    );
    cfg.schedule = "0 0 0 1 1 *".into();
    cfg.header_read_timeout_s = TIMEOUT_S;
    cfg.write_stall_timeout_s = TIMEOUT_S;
    cfg
}

/// Latencies of healthy requests; any failure is recorded.
#[derive(Default)]
struct Healthy {
    latencies: Vec<Duration>,
    failures: Vec<String>,
}

impl Healthy {
    fn percentile(&self, p: f64) -> Duration {
        let mut l = self.latencies.clone();
        l.sort();
        l.get(((l.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or_default()
    }
}

/// What a healthy agent does, round robin, every 20 ms until `until`: a
/// conditional snapshot poll (304), a full-hash search, a prefix lookup and
/// a health check.
async fn healthy_requests(base: String, etag: String, until: Instant) -> Healthy {
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let mut out = Healthy::default();
    let mut i = 0usize;
    while Instant::now() < until {
        let started = Instant::now();
        let (what, expected, request) = match i % 4 {
            0 => (
                "snapshot",
                304,
                client
                    .get(format!("{base}/v1/lists/phishing/snapshot"))
                    .header("if-none-match", &etag),
            ),
            1 => (
                "search",
                200,
                client
                    .post(format!("{base}/v1/hashes:search"))
                    .json(&serde_json::json!({ "prefixes": ["abcd", "0123", "fedc", "7777", "8888"] })),
            ),
            2 => ("prefix", 200, client.get(format!("{base}/v1/hashes/abcd"))),
            _ => ("healthz", 200, client.get(format!("{base}/healthz"))),
        };
        match request.send().await {
            Ok(r) if r.status().as_u16() == expected => {
                let _ = r.bytes().await;
                out.latencies.push(started.elapsed());
            }
            Ok(r) => out.failures.push(format!("{what}: {}", r.status())),
            Err(e) => out.failures.push(format!("{what}: {e}")),
        }
        i += 1;
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    out
}

/// A slowloris: sends a request head one byte a second for up to `limit`;
/// returns how long until the server closed the connection (`None`: it
/// never did).
async fn slowloris(addr: SocketAddr, limit: Duration) -> Result<Option<Duration>, String> {
    let started = Instant::now();
    let stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let (mut reader, mut writer) = stream.into_split();
    let head = b"GET /v1/lists/phishing/snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    let mut sent = 0usize;
    let mut buf = [0u8; 256];
    loop {
        tokio::select! {
            _ = tick.tick() => {
                if started.elapsed() > limit {
                    return Ok(None);
                }
                let byte = head.get(sent).copied().unwrap_or(b'a');
                if writer.write_all(&[byte]).await.is_err() {
                    return Ok(Some(started.elapsed()));
                }
                sent += 1;
            }
            read = reader.read(&mut buf) => match read {
                Ok(0) | Err(_) => return Ok(Some(started.elapsed())),
                Ok(_) => {}
            },
        }
    }
}

/// A client that pipelines `requests` snapshot requests with a 4 KiB receive
/// buffer and reads nothing for `wait`; then reads what is left. Returns
/// whether the server had closed the connection (end of stream or reset
/// within 3 s of reading) and how many bytes it got.
async fn never_reads(addr: SocketAddr, requests: usize, wait: Duration) -> Result<(bool, usize), String> {
    let socket = TcpSocket::new_v4().map_err(|e| e.to_string())?;
    socket.set_recv_buffer_size(4096).map_err(|e| e.to_string())?;
    let stream = socket.connect(addr).await.map_err(|e| e.to_string())?;
    let (mut reader, mut writer) = stream.into_split();
    let pipeline = b"GET /v1/lists/phishing/snapshot HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".repeat(requests);
    let sending = tokio::spawn(async move {
        let _ = writer.write_all(&pipeline).await;
        writer
    });
    tokio::time::sleep(wait).await;
    let mut total = 0;
    let mut buf = vec![0u8; 64 * 1024];
    let deadline = Instant::now() + Duration::from_secs(3);
    let cut = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, reader.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => break true,
            Ok(Ok(n)) => total += n,
            Err(_) => break false,
        }
    };
    sending.abort();
    Ok((cut, total))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slowloris_and_non_reading_clients_are_cut_while_healthy_requests_are_served() {
    let _heavy = heavy_test_lock().await;
    let dir = tempfile::tempdir().unwrap();
    let server = RunningPublisher::start(slow_config(dir.path())).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let base = server.base_url();
    let addr = server.addr;
    let first = reqwest::get(format!("{base}/v1/lists/phishing/snapshot"))
        .await
        .unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let snapshot_bytes = first.bytes().await.unwrap().len();

    // Healthy latency alone.
    let baseline = healthy_requests(
        base.clone(),
        etag.clone(),
        Instant::now() + Duration::from_secs(1),
    )
    .await;
    assert!(baseline.failures.is_empty(), "{:?}", baseline.failures);

    // Each slowloris costs two descriptors here (client and server side).
    let slow_count = match open_files_limit() {
        Some(limit) if limit < 2_300 => {
            eprintln!("open files limit {limit}: fewer slowloris connections");
            ((limit.saturating_sub(300)) / 2) as usize
        }
        _ => 1_000,
    };
    let slow_limit = Duration::from_secs(3 * TIMEOUT_S + 2);
    let started = Instant::now();
    let slow: Vec<_> = (0..slow_count)
        .map(|_| tokio::spawn(slowloris(addr, slow_limit)))
        .collect();
    // ~400 unread answers of ~22 KB: 9 MB, far over the socket buffers.
    let pipelined = 400;
    let non_readers: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(never_reads(
                addr,
                pipelined,
                Duration::from_secs(2 * TIMEOUT_S + 1),
            ))
        })
        .collect();
    let during = healthy_requests(base.clone(), etag.clone(), started + slow_limit).await;

    let mut cut_after = Vec::new();
    for task in slow {
        match task.await.unwrap() {
            Ok(Some(after)) => cut_after.push(after),
            Ok(None) => panic!("a slowloris connection was never cut"),
            Err(e) => panic!("slowloris could not connect: {e}"),
        }
    }
    cut_after.sort();
    let mut non_reader_bytes = Vec::new();
    for task in non_readers {
        let (cut, bytes) = task.await.unwrap().unwrap();
        assert!(cut, "a client that never reads was not cut ({bytes} bytes read)");
        assert!(
            bytes < pipelined * snapshot_bytes,
            "the server wrote everything ({bytes} bytes): nothing stalled"
        );
        non_reader_bytes.push(bytes);
    }

    // Every slowloris was cut by the header-read timeout, not before, and
    // soon after.
    let timeout = Duration::from_secs(TIMEOUT_S);
    let (first_cut, last_cut) = (cut_after[0], cut_after[cut_after.len() - 1]);
    assert!(
        first_cut >= timeout - Duration::from_millis(200),
        "cut early: {first_cut:?}"
    );
    assert!(
        last_cut <= timeout + Duration::from_secs(3),
        "cut late: {last_cut:?}"
    );

    // Healthy requests: all served, at their normal latency.
    assert!(during.failures.is_empty(), "{:?}", during.failures);
    let (b50, b99) = (baseline.percentile(0.5), baseline.percentile(0.99));
    let (d50, d99, dmax) = (
        during.percentile(0.5),
        during.percentile(0.99),
        during.percentile(1.0),
    );
    assert!(
        d99 <= (b99 * 5).max(Duration::from_millis(250)),
        "healthy p99 {d99:?} under attack, {b99:?} alone"
    );
    eprintln!(
        "{slow_count} slowloris connections cut after {first_cut:.2?}..{last_cut:.2?} (header timeout {timeout:?}); \
         4 non-reading clients ({pipelined} pipelined requests of {snapshot_bytes} B) cut after reading {non_reader_bytes:?} bytes; \
         healthy: {} requests alone p50 {b50:.2?} p99 {b99:.2?}, {} during p50 {d50:.2?} p99 {d99:.2?} max {dmax:.2?}, 0 failures",
        baseline.latencies.len(),
        during.latencies.len()
    );
    server.stop().await;
}

/// Writes a search request's head and the first `sent` bytes of its body.
async fn partial_search(addr: SocketAddr, body: &[u8], sent: usize) -> TcpStream {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST /v1/hashes:search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    stream.write_all(&body[..sent]).await.unwrap();
    stream
}

/// Reads until the server closes the connection, at most `limit`.
async fn read_to_close(stream: &mut TcpStream, limit: Duration) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    tokio::time::timeout(limit, async {
        let mut buf = [0u8; 4096];
        loop {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
    })
    .await
    .ok()?;
    Some(out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_finishes_in_flight_requests_and_cuts_the_rest_at_the_drain_deadline() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = slow_config(dir.path());
    cfg.header_read_timeout_s = 60;
    cfg.request_timeout_s = 60;
    cfg.drain_timeout_s = 2;
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let addr = server.addr;
    let body = br#"{"prefixes": ["abcd", "0123"]}"#;

    // In flight at shutdown: one request that will finish, one that never
    // will, and an idle keep-alive connection.
    let mut finishing = partial_search(addr, body, 10).await;
    let mut stuck = partial_search(addr, body, 10).await;
    let mut idle = TcpStream::connect(addr).await.unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 1024];
    let n = idle.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    tokio::time::sleep(Duration::from_millis(200)).await;

    let started = Instant::now();
    let stopping = tokio::spawn(server.stop());
    tokio::time::sleep(Duration::from_millis(300)).await;

    // No new connections; the idle one is closed at once.
    assert!(TcpStream::connect(addr).await.is_err(), "still accepting");
    let idle_rest = read_to_close(&mut idle, Duration::from_secs(1)).await;
    assert_eq!(idle_rest.as_deref(), Some(&b""[..]), "idle connection not closed");

    // The in-flight request finishes with its answer.
    finishing.write_all(&body[10..]).await.unwrap();
    let answer = read_to_close(&mut finishing, Duration::from_secs(5))
        .await
        .unwrap();
    let text = String::from_utf8_lossy(&answer);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    assert!(text.contains("\"results\""), "{text}");

    // The stuck one holds the server until the drain deadline, no longer.
    stopping.await.unwrap();
    let took = started.elapsed();
    assert!(
        (Duration::from_millis(1800)..Duration::from_secs(5)).contains(&took),
        "shutdown took {took:?} with a 2 s drain deadline"
    );
    let stuck_rest = read_to_close(&mut stuck, Duration::from_secs(1)).await;
    assert!(
        stuck_rest.is_some(),
        "stuck connection still open after the drain deadline"
    );
    eprintln!(
        "shutdown: in-flight request answered, idle closed at once, stuck request cut at {took:.2?} (drain 2 s)"
    );
}
