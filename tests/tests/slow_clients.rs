//! Slow and hostile clients on a real socket: 1,000 connections sending
//! their headers one byte a second ("slowloris") and clients that pipeline
//! requests and never read the answers, while healthy clients keep being
//! served at their normal latency; the server cuts the hostile connections
//! by its header-read and write-stall timeouts. And graceful shutdown: an
//! in-flight request finishes, the drain deadline cuts the rest.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use blocksieve_publisher::Config;
use blocksieve_publisher::{SourceConfig, SourceFormat};
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

/// A client that sends a search request's head declaring a 100-byte body
/// and never sends the body; returns how long until the server answered
/// and closed, and the answer (`None`: not within `limit`).
async fn body_never_sent(addr: SocketAddr, limit: Duration) -> Result<(Duration, Option<Vec<u8>>), String> {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    stream
        .write_all(
            b"POST /v1/hashes:search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
              Content-Length: 100\r\n\r\n",
        )
        .await
        .map_err(|e| e.to_string())?;
    let answer = read_to_close(&mut stream, limit).await;
    Ok((started.elapsed(), answer))
}

/// Regression: a request whose body never comes used to hold one of the
/// `max_concurrency` slots until the 30 s request timeout, so 1,100 such
/// connections (over the default 1,024 slots) starved every healthy request
/// for 30 s. Bodies are now read before a slot is taken, within
/// `body_read_timeout_s` (2 s here): each stalled body is answered 408 and
/// closed at 2 s, and healthy requests never wait for a slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_whose_body_never_comes_hold_no_concurrency_slot_and_get_408() {
    let _heavy = heavy_test_lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = slow_config(dir.path());
    cfg.header_read_timeout_s = 10;
    cfg.body_read_timeout_s = TIMEOUT_S;
    // Each stalled connection costs two descriptors here (client and server
    // side); keep the default number of slots where the limit allows.
    let slots = match open_files_limit() {
        Some(limit) if limit < 2_500 => {
            eprintln!("open files limit {limit}: fewer slots and stalled bodies");
            ((limit.saturating_sub(400)) / 2) as usize - 76
        }
        _ => cfg.max_concurrency,
    };
    cfg.max_concurrency = slots;
    let stalled_count = slots + 76;
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let base = server.base_url();
    let first = reqwest::get(format!("{base}/v1/lists/phishing/snapshot"))
        .await
        .unwrap();
    let etag = first.headers()["etag"].to_str().unwrap().to_owned();
    let baseline = healthy_requests(
        base.clone(),
        etag.clone(),
        Instant::now() + Duration::from_secs(1),
    )
    .await;
    assert!(baseline.failures.is_empty(), "{:?}", baseline.failures);

    let started = Instant::now();
    let limit = Duration::from_secs(3 * TIMEOUT_S + 4);
    let stalled: Vec<_> = (0..stalled_count)
        .map(|_| tokio::spawn(body_never_sent(server.addr, limit)))
        .collect();
    // Healthy clients (10 s timeout) throughout: with the stalled bodies
    // holding every slot, they would wait for the 30 s request timeout.
    let during = healthy_requests(
        base.clone(),
        etag,
        started + Duration::from_secs(2 * TIMEOUT_S + 2),
    )
    .await;
    assert!(during.failures.is_empty(), "{:?}", during.failures);

    let mut answered_after = Vec::new();
    for task in stalled {
        let (after, answer) = task.await.unwrap().unwrap();
        let answer = answer.unwrap_or_else(|| panic!("a stalled body was not answered within {limit:?}"));
        let text = String::from_utf8_lossy(&answer);
        assert!(text.starts_with("HTTP/1.1 408"), "{text}");
        assert!(text.contains("\"request_timeout\""), "{text}");
        answered_after.push(after);
    }
    answered_after.sort();
    let timeout = Duration::from_secs(TIMEOUT_S);
    let (first_cut, last_cut) = (answered_after[0], answered_after[answered_after.len() - 1]);
    assert!(
        first_cut >= timeout - Duration::from_millis(200),
        "answered early: {first_cut:?}"
    );
    assert!(
        last_cut <= timeout + Duration::from_secs(3),
        "answered late: {last_cut:?}"
    );

    let (b50, b99) = (baseline.percentile(0.5), baseline.percentile(0.99));
    let (d50, d99, dmax) = (
        during.percentile(0.5),
        during.percentile(0.99),
        during.percentile(1.0),
    );
    // Queued behind stalled bodies, a healthy request would wait for the
    // 30 s request timeout to free a slot (and fail at its own 10 s).
    assert!(
        d99 <= (b99 * 5).max(Duration::from_millis(500)) && dmax < Duration::from_secs(5),
        "healthy p99 {d99:?} max {dmax:?} under attack, p99 {b99:?} alone"
    );
    eprintln!(
        "{stalled_count} requests whose 100-byte body never came ({slots} concurrency slots): each answered 408 \
         after {first_cut:.2?}..{last_cut:.2?} (body read timeout {timeout:?}); healthy: {} requests alone \
         p50 {b50:.2?} p99 {b99:.2?}, {} during p50 {d50:.2?} p99 {d99:.2?} max {dmax:.2?}, 0 failures",
        baseline.latencies.len(),
        during.latencies.len()
    );
    server.stop().await;
}

/// Sends `GET /healthz` on `stream` and reads one answer; whether it was a
/// 200 within `limit`.
async fn healthz_on(stream: &mut TcpStream, limit: Duration) -> bool {
    let exchange = async {
        stream
            .write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            .await
            .ok()?;
        let mut buf = [0u8; 1024];
        let n = stream.read(&mut buf).await.ok()?;
        Some(buf[..n].starts_with(b"HTTP/1.1 200"))
    };
    tokio::time::timeout(limit, exchange).await.ok().flatten() == Some(true)
}

/// With `max_connections` open, the server accepts no more: the next
/// connection waits in the accept backlog (its request unanswered) until
/// one of the open ones closes, then is served.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_max_connections_wait_in_the_backlog_until_one_closes() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = slow_config(dir.path());
    cfg.header_read_timeout_s = 60;
    cfg.max_connections = 20;
    let server = RunningPublisher::start(cfg).await;
    server.wait_ready(Duration::from_secs(60)).await;
    let addr = server.addr;

    // 20 keep-alive connections, each served once and left open.
    let mut open = Vec::new();
    for _ in 0..20 {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        assert!(healthz_on(&mut stream, Duration::from_secs(5)).await);
        open.push(stream);
    }
    // The 21st connects (the kernel completes the handshake into the
    // backlog) but is not accepted, so its request gets no answer.
    let mut waiting = TcpStream::connect(addr).await.unwrap();
    let pending = tokio::spawn(async move {
        let started = Instant::now();
        let served = healthz_on(&mut waiting, Duration::from_secs(10)).await;
        (served, started.elapsed())
    });
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert!(!pending.is_finished(), "the 21st connection was served");

    // One closes: the waiting one is accepted and served.
    let closed_at = Instant::now();
    drop(open.pop());
    let (served, waited) = pending.await.unwrap();
    assert!(served, "the waiting connection was not served after one closed");
    let after_close = closed_at.elapsed();
    assert!(
        after_close < Duration::from_secs(1),
        "served {after_close:?} after a slot freed"
    );
    // The 19 still open are still served.
    for stream in &mut open {
        assert!(healthz_on(stream, Duration::from_secs(5)).await);
    }
    eprintln!(
        "max_connections 20: the 21st connection waited {waited:.2?} unanswered, served {after_close:.2?} after one closed"
    );
    drop(open);
    server.stop().await;
}
