//! A real S3 API server for the object-store tests: moto's `moto_server`
//! on a free port of 127.0.0.1, with one bucket, stopped when dropped.
//!
//! `moto_server` is looked for in `BLOCKSIEVE_MOTO_SERVER` (a path), then
//! in the virtual environment `.ci/moto.sh` creates
//! (`target/moto-venv/bin/moto_server`), then on `PATH`. When it is found
//! nowhere, the first test that needs it installs it with `.ci/moto.sh`
//! (needs `python3` with `venv`, and the package index; one test binary at
//! a time, under a lock file, the others wait), so that `cargo test
//! --workspace` on a fresh clone runs them too; a failed install fails the
//! test with the installer's output. With `BLOCKSIEVE_SKIP_MOTO=1` set
//! outside CI (`CI` unset) nothing is installed: [`Moto::start`] returns
//! `None` and the test skips itself. CI never skips.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Environment variable naming the `moto_server` executable.
pub const MOTO_SERVER_ENV: &str = "BLOCKSIEVE_MOTO_SERVER";
/// Environment variable that, set to `1` outside CI, skips the tests that
/// need moto when it is not installed.
pub const SKIP_MOTO_ENV: &str = "BLOCKSIEVE_SKIP_MOTO";

/// How long moto may take to start answering.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// A running moto server with one empty bucket.
#[derive(Debug)]
pub struct Moto {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    /// The bucket it holds.
    pub bucket: String,
}

/// Where `moto_server` is, if anywhere.
pub fn find_moto_server() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(MOTO_SERVER_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/moto-venv/bin/moto_server");
    if venv.is_file() {
        return Some(venv);
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join("moto_server"))
        .find(|p| p.is_file())
}

/// Installs `moto_server` with `.ci/moto.sh` (see the module docs) and
/// finds it; the installer's failure otherwise. One process at a time,
/// under `target/moto-venv.lock`: a second one waits, then finds it.
fn install_moto_server() -> Result<PathBuf, String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = root.join("target");
    std::fs::create_dir_all(&target).map_err(|e| format!("creating {}: {e}", target.display()))?;
    let lock_path = target.join("moto-venv.lock");
    let lock =
        std::fs::File::create(&lock_path).map_err(|e| format!("creating {}: {e}", lock_path.display()))?;
    lock.lock()
        .map_err(|e| format!("locking {}: {e}", lock_path.display()))?;
    if let Some(found) = find_moto_server() {
        return Ok(found);
    }
    eprintln!("moto_server not found: installing it with .ci/moto.sh (once, into target/moto-venv)");
    let output = Command::new("bash")
        .arg(root.join(".ci/moto.sh"))
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("running .ci/moto.sh: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            ".ci/moto.sh failed ({}): {}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    find_moto_server().ok_or_else(|| ".ci/moto.sh ran, yet moto_server is not in target/moto-venv".to_owned())
}

impl Moto {
    /// Starts moto and creates a bucket; `None` when moto is missing and
    /// `BLOCKSIEVE_SKIP_MOTO=1` allows skipping (see the module docs).
    ///
    /// # Panics
    ///
    /// When moto is missing and may not be skipped, or does not start.
    pub async fn start() -> Option<Self> {
        // A free port: bound, read and released for moto to take.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        Self::start_on(port).await
    }

    /// [`Moto::start`] on `port` of 127.0.0.1: a store that a test points
    /// a publisher at before it answers.
    ///
    /// # Panics
    ///
    /// As [`Moto::start`].
    pub async fn start_on(port: u16) -> Option<Self> {
        let program = match find_moto_server() {
            Some(program) => program,
            None => {
                let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
                if !in_ci && std::env::var(SKIP_MOTO_ENV).is_ok_and(|v| v == "1") {
                    eprintln!("skipped: moto_server not found and {SKIP_MOTO_ENV}=1");
                    return None;
                }
                install_moto_server().unwrap_or_else(|reason| {
                    panic!(
                        "moto_server not found (in {MOTO_SERVER_ENV}, target/moto-venv or PATH) and not installed: \
                         {reason}; install it with `bash .ci/moto.sh`, or set {SKIP_MOTO_ENV}=1 to skip the \
                         object-store tests outside CI"
                    )
                })
            }
        };
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let child = Command::new(&program)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", program.display()));
        let moto = Self {
            child,
            addr,
            bucket: "blocksieve-test".to_owned(),
        };
        let client = reqwest::Client::new();
        let started = Instant::now();
        loop {
            if client.get(moto.endpoint()).send().await.is_ok() {
                break;
            }
            assert!(
                started.elapsed() < START_TIMEOUT,
                "moto did not start in {START_TIMEOUT:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let created = (client.put(format!("{}/{}", moto.endpoint(), moto.bucket)))
            .send()
            .await
            .expect("create the bucket");
        assert!(
            created.status().is_success(),
            "create the bucket: {}",
            created.status()
        );
        Some(moto)
    }

    /// `http://127.0.0.1:<port>`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The publisher's `store` for `prefix` in the bucket.
    pub fn store_url(&self, prefix: &str) -> String {
        format!("s3://{}/{prefix}", self.bucket)
    }

    /// The publisher's `store_options` for this server: its endpoint over
    /// plain HTTP and moto's placeholder credentials (requests are signed,
    /// as conditional writes need).
    pub fn store_options(&self) -> BTreeMap<String, String> {
        store_options_at(self.addr)
    }
}

/// [`Moto::store_options`] for a server at `addr`, running or not.
pub fn store_options_at(addr: SocketAddr) -> BTreeMap<String, String> {
    [
        ("endpoint", format!("http://{addr}")),
        ("allow_http", "true".to_owned()),
        ("region", "us-east-1".to_owned()),
        ("access_key_id", "testing".to_owned()),
        ("secret_access_key", "testing".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
