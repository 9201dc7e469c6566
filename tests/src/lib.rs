//! Helpers for blocksieve's tests: a real publisher on 127.0.0.1:0 over
//! real files ([`RunningPublisher`]), and paths to the fixtures; a fault
//! proxy to put in front of it ([`fault`]); a fake publisher whose every
//! answer the test sets, recording the requests it sees, and a raw TCP
//! server for answers no HTTP framework gives ([`fake`]); signed test
//! snapshots and the fixed keys ([`snapshot`]); clocks for agents
//! ([`clock`]) and agents for the fakes ([`agents`]).
//!
//! The fake publisher and the test snapshots use only the wire format
//! (`blocksieve-format`): they stand in for the publisher.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use blocksieve_format::TrustedKey;
use blocksieve_publisher::{Config, Publisher};
use blocksieve_publisher::{ListConfig, SourceConfig, SourceFormat};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub mod agents;
pub mod clock;
pub mod fake;
pub mod fault;
pub mod feed;
pub mod feed_check;
pub mod raw;
pub mod snapshot;

/// Serializes the tests that load the machine (the load and slow-client
/// tests): run side by side on two cores, each would measure the other.
pub async fn heavy_test_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::OnceLock<tokio::sync::Mutex<()>> = std::sync::OnceLock::new();
    LOCK.get_or_init(|| tokio::sync::Mutex::new(())).lock().await
}

/// This process's resident set size in bytes (`VmRSS` in
/// `/proc/self/status`), where there is one.
pub fn vm_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// This process's soft limit on open files (`/proc/self/limits`), where it
/// can be read.
pub fn open_files_limit() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line.split_whitespace().nth(3)?.parse().ok()
}

/// The directory of the checked-in fixtures (`tests/fixtures`).
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Reads a fixture's non-empty, non-comment lines.
pub fn fixture_lines(name: &str) -> Vec<String> {
    let bytes = std::fs::read(fixtures().join(name)).unwrap_or_default();
    String::from_utf8_lossy(&bytes)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

/// A source reading `fixtures/<name>` in `format`.
pub fn fixture_source(name: &str, format: SourceFormat) -> SourceConfig {
    SourceConfig::file(fixtures().join(name), format)
}

/// A configuration with one list `name` over `sources`, data in `data_dir`.
pub fn config(data_dir: &Path, name: &str, sources: Vec<SourceConfig>) -> Config {
    Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        data_dir: data_dir.to_owned(),
        lists: vec![ListConfig::new(name, sources)],
        ..Config::default()
    }
}

/// A publisher daemon serving on 127.0.0.1:0 until stopped or dropped.
pub struct RunningPublisher {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The publisher (shares state with the running server).
    pub publisher: Publisher,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), blocksieve_publisher::Error>>>,
}

impl RunningPublisher {
    /// Opens `config` and runs the daemon (initial build in the background).
    ///
    /// # Panics
    ///
    /// When the publisher cannot be opened or the port cannot be bound.
    pub async fn start(config: Config) -> Self {
        let publisher = Publisher::open(config).expect("open publisher");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(publisher.clone().run(listener, async move {
            let _ = rx.await;
        }));
        Self {
            addr,
            publisher,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The key agents must trust.
    pub fn public_key(&self) -> TrustedKey {
        self.publisher.public_key().clone()
    }

    /// Waits until every list has a snapshot.
    ///
    /// # Panics
    ///
    /// When that takes longer than `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) {
        assert!(
            blocksieve_publisher::wait_until_ready(&self.publisher.state(), timeout).await,
            "publisher not ready within {timeout:?}"
        );
    }

    /// Stops the server and waits for it to drain.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningPublisher {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}
