//! A fake publisher for the examples: `malware` lists `evil.example/`; an
//! `empty` list has no snapshot yet. Serves snapshots and
//! `POST /v1/hashes:search`, records the prefixes it is asked for, and can
//! fail or stall full-hash requests and fail snapshot downloads. Also raw
//! TCP fault servers that accept connections and then hang, and a runner
//! that kills an example that outlives its deadline.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use blocksieve_format::api::{ListStatus, ListsResponse, SnapshotStatus};
use blocksieve_format::{FilterKind, FullHash, KeyBits, PrefixFilter, SigningKey, SnapshotParams, encode};
use serde_json::{Value, json};

pub const LISTED: &str = "evil.example/";

pub fn key() -> SigningKey {
    SigningKey::from_secret_bytes([7u8; 32])
}

pub struct Fake {
    snapshot: Vec<u8>,
    /// Answer full-hash requests with 500.
    pub fail_hashes: AtomicBool,
    /// Answer snapshot requests with 400.
    pub fail_snapshots: AtomicBool,
    /// Never answer full-hash requests.
    pub stall_hashes: AtomicBool,
    /// The prefixes of every full-hash request, oldest first.
    pub searches: Mutex<Vec<Vec<String>>>,
}

/// A publisher serving `malware` (listing `evil.example/`) and an `empty`
/// list without a snapshot yet. The runtime must outlive the test.
pub struct Publisher {
    pub base_url: String,
    pub state: Arc<Fake>,
    _runtime: tokio::runtime::Runtime,
}

pub fn start() -> Publisher {
    start_valid_for(3600)
}

/// [`start`], with a snapshot that expires `seconds` from now.
pub fn start_valid_for(seconds: u64) -> Publisher {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let hash = FullHash::of(LISTED.as_bytes());
    let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &[hash.prefix().key()]).unwrap();
    let params = SnapshotParams {
        list_name: "malware".into(),
        version: 1,
        created_at: now,
        expires_at: now + seconds,
        key_bits: KeyBits::Bits32,
        request_prefix_bits: 32,
        full_hash_count: 1,
        measured_fpr: 0.0,
        zstd_level: 3,
    };
    let state = Arc::new(Fake {
        snapshot: encode(&params, &filter, &key()).unwrap(),
        fail_hashes: AtomicBool::new(false),
        fail_snapshots: AtomicBool::new(false),
        stall_hashes: AtomicBool::new(false),
        searches: Mutex::new(Vec::new()),
    });
    let app = Router::new()
        .route("/v1/lists", get(lists))
        .route("/v1/lists/{name}/snapshot", get(snapshot))
        .route("/v1/hashes:search", post(search))
        .with_state(Arc::clone(&state));
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    runtime.spawn(async move { axum::serve(listener, app).await.unwrap() });
    Publisher {
        base_url,
        state,
        _runtime: runtime,
    }
}

async fn lists(State(state): State<Arc<Fake>>) -> Json<ListsResponse> {
    let status = SnapshotStatus {
        version: 1,
        created_at: 0,
        expires_at: 0,
        entries: 1,
        unique_prefixes: 1,
        snapshot_bytes: state.snapshot.len() as u64,
        filter_kind: "binary_fuse8".into(),
        bits_per_key: 9.0,
        request_prefix_bits: 32,
        etag: "\"v1\"".into(),
    };
    let list = |name: &str, snapshot| ListStatus {
        name: name.into(),
        snapshot,
        last_build: None,
    };
    Json(ListsResponse {
        lists: vec![list("malware", Some(status)), list("empty", None)],
    })
}

async fn snapshot(State(state): State<Arc<Fake>>, Path(name): Path<String>) -> Response {
    if name != "malware" {
        return StatusCode::NOT_FOUND.into_response();
    }
    if state.fail_snapshots.load(Ordering::Relaxed) {
        return StatusCode::BAD_REQUEST.into_response();
    }
    (StatusCode::OK, [(header::ETAG, "\"v1\"")], state.snapshot.clone()).into_response()
}

async fn search(State(state): State<Arc<Fake>>, Json(body): Json<Value>) -> Response {
    let prefixes: Vec<String> = body["prefixes"]
        .as_array()
        .map(|a| a.iter().filter_map(|p| p.as_str().map(str::to_owned)).collect())
        .unwrap_or_default();
    state.searches.lock().unwrap().push(prefixes.clone());
    if state.fail_hashes.load(Ordering::Relaxed) {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    if state.stall_hashes.load(Ordering::Relaxed) {
        std::future::pending::<()>().await;
    }
    let hash = FullHash::of(LISTED.as_bytes()).to_string();
    let results: Vec<Value> = prefixes
        .iter()
        .map(|p| {
            let matches = if hash.starts_with(p.as_str()) {
                vec![json!({"full_hash": hash, "list": "malware"})]
            } else {
                vec![]
            };
            json!({"prefix": p, "matches": matches})
        })
        .collect();
    Json(json!({"results": results, "cache_duration_s": 300})).into_response()
}

/// How a [`hanging_server`] treats each connection it accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hang {
    /// Reads the request and never answers.
    Silent,
    /// Answers `200 OK` headers promising a 1 MB body, sends a few bytes of
    /// it, and stalls.
    AfterHeaders,
}

/// A raw TCP server on 127.0.0.1:0 that accepts every connection and then
/// hangs as `hang` says, holding the connections open until the test
/// process exits; returns its base URL.
pub fn hanging_server(hang: Hang) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base_url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut held: Vec<TcpStream> = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let _ = stream.set_read_timeout(Some(Duration::from_millis(200)));
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head);
            if hang == Hang::AfterHeaders {
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\n\
                      content-length: 1000000\r\n\r\nBSNP",
                );
            }
            held.push(stream);
        }
    });
    base_url
}

/// Runs `bin` like [`run`], but kills it and panics if it has not exited
/// `deadline` after it started; returns its output and how long it ran.
pub fn run_with_deadline(
    bin: &str,
    args: &[&str],
    dir: &std::path::Path,
    deadline: Duration,
) -> (Output, Duration) {
    let started = Instant::now();
    let mut child = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    loop {
        if child.try_wait().unwrap().is_some() {
            let elapsed = started.elapsed();
            return (child.wait_with_output().unwrap(), elapsed);
        }
        if started.elapsed() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "{bin} {args:?} still running after {deadline:?}; stderr: {}",
                text(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A fresh empty directory to run the example in.
pub fn temp_dir() -> PathBuf {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "blocksieve-check-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

pub fn run(bin: &str, args: &[&str], stdin: Option<&str>, dir: &std::path::Path) -> Output {
    run_with_env(bin, args, stdin, dir, &[])
}

pub fn run_with_env(
    bin: &str,
    args: &[&str],
    stdin: Option<&str>,
    dir: &std::path::Path,
    env: &[(&str, &str)],
) -> Output {
    let mut child = Command::new(bin)
        .args(args)
        .envs(env.iter().copied())
        .current_dir(dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    input.write_all(stdin.unwrap_or("").as_bytes()).unwrap();
    drop(input);
    child.wait_with_output().unwrap()
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}
