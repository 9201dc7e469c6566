//! What the example tests share: the fake publisher set up as the
//! examples expect it (`malware` lists `evil.example/`; an `empty` list has
//! no snapshot yet), and runners for an example binary, one of which kills
//! an example that outlives its deadline.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use blocksieve_tests::fake::{FakePublisher, Served};
use blocksieve_tests::snapshot::{Snap, unix_now};

/// The one expression on the `malware` list.
pub const LISTED: &str = "evil.example/";

/// A publisher serving `malware` (listing `evil.example/`) and an `empty`
/// list without a snapshot yet, until dropped.
pub fn start() -> FakePublisher {
    start_valid_for(3600)
}

/// [`start`], with a snapshot that expires `seconds` from now.
pub fn start_valid_for(seconds: u64) -> FakePublisher {
    let now = unix_now();
    let publisher = FakePublisher::start_blocking();
    publisher.serve_snapshot(&Snap::new("malware", 1, &[LISTED]).valid(now, now + seconds));
    publisher.list_expressions("malware", &[LISTED]);
    publisher.serve("empty", Served::NotBuilt);
    publisher
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

/// A fresh empty directory to run the example in, removed with everything
/// in it when dropped (a test's files do not outlive it).
pub fn temp_dir() -> Scratch {
    Scratch(
        tempfile::Builder::new()
            .prefix("blocksieve-check-")
            .tempdir()
            .unwrap(),
    )
}

/// A directory removed when dropped; reads as the [`Path`] it is.
pub struct Scratch(tempfile::TempDir);

impl std::ops::Deref for Scratch {
    type Target = Path;

    fn deref(&self) -> &Path {
        self.0.path()
    }
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
