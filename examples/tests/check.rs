//! Runs the `check` example against a fake publisher on 127.0.0.1:0.
#![allow(clippy::unwrap_used, missing_docs)]

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use blocksieve_format::api::{FullHashMatch, FullHashResponse, ListStatus, ListsResponse, SnapshotStatus};
use blocksieve_format::{
    FilterKind, FullHash, HashPrefix, KeyBits, PrefixFilter, SigningKey, SnapshotParams, encode,
};

const LISTED: &str = "evil.example/";

fn key() -> SigningKey {
    SigningKey::from_secret_bytes([7u8; 32])
}

struct Fake {
    snapshot: Vec<u8>,
    fail_hashes: AtomicBool,
}

/// A publisher serving `malware` (listing `evil.example/`) and an `empty`
/// list without a snapshot yet. The runtime must outlive the test.
struct Publisher {
    base_url: String,
    state: Arc<Fake>,
    _runtime: tokio::runtime::Runtime,
}

fn start() -> Publisher {
    let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs();
    let hash = FullHash::of(LISTED.as_bytes());
    let filter = PrefixFilter::build(FilterKind::BinaryFuse8, &[hash.prefix().key()]).unwrap();
    let params = SnapshotParams {
        list_name: "malware".into(),
        version: 1,
        created_at: now,
        expires_at: now + 3600,
        key_bits: KeyBits::Bits32,
        request_prefix_bits: 32,
        full_hash_count: 1,
        measured_fpr: 0.0,
        zstd_level: 3,
    };
    let state = Arc::new(Fake {
        snapshot: encode(&params, &filter, &key()).unwrap(),
        fail_hashes: AtomicBool::new(false),
    });
    let app = Router::new()
        .route("/v1/lists", get(lists))
        .route("/v1/lists/{name}/snapshot", get(snapshot))
        .route("/v1/hashes/{prefix}", get(hashes))
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
    (StatusCode::OK, [(header::ETAG, "\"v1\"")], state.snapshot.clone()).into_response()
}

async fn hashes(State(state): State<Arc<Fake>>, Path(prefix): Path<String>) -> Response {
    if state.fail_hashes.load(Ordering::Relaxed) {
        return StatusCode::INTERNAL_SERVER_ERROR.into_response();
    }
    let Ok(parsed) = prefix.parse::<HashPrefix>() else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let hash = FullHash::of(LISTED.as_bytes());
    let matches = if parsed.matches(&hash) {
        vec![FullHashMatch {
            full_hash: hash.to_string(),
            list: "malware".into(),
        }]
    } else {
        Vec::new()
    };
    Json(FullHashResponse {
        prefix,
        matches,
        cache_duration_s: 300,
    })
    .into_response()
}

/// A fresh empty directory to run the example in.
fn temp_dir() -> PathBuf {
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

fn check(args: &[&str], stdin: Option<&str>, dir: &std::path::Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_check"))
        .args(args)
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

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn prints_one_line_per_url_and_exits_1_when_unsafe() {
    let publisher = start();
    let key = key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "http://evil.example/login",
            "https://good.example/",
            "mailto:someone@example.com",
        ],
        None,
        &temp_dir(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "unsafe malware http://evil.example/login\n\
         safe https://good.example/\n\
         invalid mailto:someone@example.com scheme is not followed by \"//\" (URL has no host)\n"
    );
    assert!(
        stderr.contains("3 urls: 1 unsafe, 1 safe, 1 invalid; 1 full-hash requests"),
        "{stderr}"
    );
}

#[test]
fn reads_urls_from_stdin_and_the_default_key_file() {
    let publisher = start();
    let dir = temp_dir();
    std::fs::create_dir_all(dir.join("blocksieve-data")).unwrap();
    std::fs::write(
        dir.join("blocksieve-data/public.key"),
        format!("{}\n", key().public_key().to_base64()),
    )
    .unwrap();
    let out = check(
        &["--publisher", &publisher.base_url, "--list", "malware"],
        Some("http://good.example/\n\n  https://also-good.example/a  \n"),
        &dir,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "safe http://good.example/\nsafe https://also-good.example/a\n"
    );
    assert!(
        stderr.contains("2 urls: 0 unsafe, 2 safe, 0 invalid; 0 full-hash requests"),
        "{stderr}"
    );
}

#[test]
fn key_from_file_argument() {
    let publisher = start();
    let dir = temp_dir();
    let key_file = dir.join("trusted.key");
    std::fs::write(&key_file, key().public_key().to_base64()).unwrap();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            key_file.to_str().unwrap(),
            "http://evil.example/",
        ],
        None,
        &dir,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn failed_full_hash_request_exits_2_and_is_not_safe() {
    let publisher = start();
    publisher.state.fail_hashes.store(true, Ordering::Relaxed);
    let key = key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(stdout.starts_with("error http://evil.example/ "), "{stdout}");
    assert!(stdout.contains("500"), "{stdout}");
}

#[test]
fn untrusted_key_exits_2() {
    let publisher = start();
    let stranger = SigningKey::from_secret_bytes([8u8; 32]).public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &stranger,
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown key"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_key_explains_how_to_pass_one() {
    let out = check(&["http://evil.example/"], None, &temp_dir());
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--key"), "{stderr}");
}

#[test]
fn unreachable_publisher_exits_2() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let key = key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &format!("http://{addr}"),
            "--key",
            &key,
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}
