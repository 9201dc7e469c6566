//! SIGUSR1 ("build now") against a running `serve`, when a build is
//! already running, on a replica, and at shutdown (README "Deploy",
//! `drain_timeout_s` in docs/configuration.md). A build is held open as
//! long as a test wants by a named pipe as its list's source ([`Feed`]), so
//! that "while a build runs" holds on any machine; the builds are counted
//! from the log once the process has exited, when every build it started
//! has ended. Each `serve` is killed when its test ends, passed or failed.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::BufRead as _;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use blocksieve_format::SigningKey;
use blocksieve_tests::KillOnDrop;

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");
/// A schedule that never fires during a test: builds come from the start
/// and the signals alone.
const YEARLY: &str = "schedule = \"0 0 0 1 1 *\"\n";
/// How long a test waits for what should come at once.
const PATIENCE: Duration = Duration::from_secs(30);
/// What `serve` logs for each SIGUSR1 it acts on.
const BUILDING: &str = "SIGUSR1: building every list now";

/// `serve --config config` on 127.0.0.1:0 with `args`, logging at `info`.
fn serve(config: &Path, args: &[&str]) -> (KillOnDrop, Log) {
    let mut child = KillOnDrop(
        Command::new(BIN)
            .args([
                "serve",
                "--config",
                config.to_str().unwrap(),
                "--listen",
                "127.0.0.1:0",
            ])
            .args(args)
            .env("RUST_LOG", "info")
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let (send, lines) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    let log = Log {
        lines,
        seen: Vec::new(),
        next: 0,
    };
    (child, log)
}

/// A process's log lines (stderr) as they come, every one kept.
struct Log {
    lines: Receiver<String>,
    seen: Vec<String>,
    /// The first line [`Log::wait_for`] has not yet looked at.
    next: usize,
}

impl Log {
    /// Waits for a line holding `text` after those waited for before, and
    /// returns it.
    fn wait_for(&mut self, text: &str) -> String {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let Some(at) = self.seen[self.next..].iter().position(|l| l.contains(text)) {
                self.next += at + 1;
                return self.seen[self.next - 1].clone();
            }
            self.next = self.seen.len();
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left.min(Duration::from_millis(200))) {
                Ok(line) => self.seen.push(line),
                Err(RecvTimeoutError::Timeout) if !left.is_zero() => {}
                Err(_) => panic!("no {text:?} in {:#?}", self.seen),
            }
        }
    }

    /// Every line, once the process has exited (its stderr is closed).
    fn all(mut self) -> Vec<String> {
        while let Ok(line) = self.lines.recv_timeout(PATIENCE) {
            self.seen.push(line);
        }
        self.seen
    }
}

/// How many of `lines` hold `text`.
fn count(lines: &[String], text: &str) -> usize {
    lines.iter().filter(|l| l.contains(text)).count()
}

fn kill(signal: &str, pid: u32) {
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// How `child` exited, within `within` (else the test fails, saying
/// `still`).
fn exit_within(child: &mut KillOnDrop, within: Duration, still: &str) -> ExitStatus {
    let started = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(started.elapsed() < within, "{still}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The status line and body of `GET path` on `addr`.
fn get(addr: &str, path: &str) -> (String, String) {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(PATIENCE)).unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap_or((&answer, ""));
    (
        head.lines().next().unwrap_or_default().to_owned(),
        body.to_owned(),
    )
}

/// The address `serve` says it listens on, once it says so.
fn listening(log: &mut Log) -> String {
    let line = log.wait_for("publisher listening");
    (line.split_whitespace())
        .find_map(|field| field.strip_prefix("addr="))
        .unwrap()
        .to_owned()
}

/// A configuration in `dir` of one list `good` over `dir/feed.txt`, with
/// `settings` (TOML lines) first and the data in `dir/data`.
fn one_list(dir: &Path, settings: &str) -> PathBuf {
    let config = dir.join("config.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\n{settings}[[lists]]\nname = \"good\"\n\
             sources = [{{ path = \"feed.txt\", format = \"urls\" }}]\n",
            dir.join("data")
        ),
    )
    .unwrap();
    config
}

/// A named pipe as a list's source, fed by a thread, one opening at a
/// time as the test lets it ([`Feed::open`]); a build that opens the pipe
/// before waits. An opening, numbered from 1, gets 10,000 lines and one
/// naming it (so that every build publishes), then is held open, a line
/// every 20 ms (a cancelled build stops at its next block of content),
/// until [`Feed::release`] ends it. (Letting the next opening in at once
/// would feed the build still reading the last one: while a reader has
/// the pipe open, opening it to write does not wait for another.)
struct Feed {
    opened: Receiver<u32>,
    opens: Sender<()>,
    releases: Sender<()>,
}

impl Feed {
    fn new(path: &Path) -> Self {
        let made = Command::new("mkfifo").arg(path).status().unwrap();
        assert!(made.success());
        let (opened, is_opened) = std::sync::mpsc::channel();
        let (opens, may_open) = std::sync::mpsc::channel::<()>();
        let (releases, released) = std::sync::mpsc::channel::<()>();
        let path = path.to_owned();
        std::thread::spawn(move || {
            let mut head = String::new();
            for i in 0..10_000 {
                head.push_str(&format!("http://evil{i}.example/path\n"));
            }
            for n in 1.. {
                if may_open.recv().is_err() {
                    return;
                }
                // Blocks until a build opens the source.
                let mut feed = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                // Past the 64 KiB `serve` reads first to check what the
                // source is: the build reads on.
                let written = feed.write_all(format!("{head}http://build{n}.example/\n").as_bytes());
                if written.is_err() || opened.send(n).is_err() {
                    continue;
                }
                let until = Instant::now() + Duration::from_secs(120);
                let mut i = 0u64;
                // Until released, the build gone (the write fails) or two
                // minutes.
                while Instant::now() < until {
                    match released.recv_timeout(Duration::from_millis(20)) {
                        Err(RecvTimeoutError::Timeout) => {}
                        Ok(()) | Err(RecvTimeoutError::Disconnected) => break,
                    }
                    let line = format!("http://trickle{n}-{i}.example/\n");
                    if feed.write_all(line.as_bytes()).is_err() {
                        break;
                    }
                    i += 1;
                }
            }
        });
        Self {
            opened: is_opened,
            opens,
            releases,
        }
    }

    /// Lets the next build to open the source (one waiting now, else the
    /// next to come) have it. Only once the last opening's build has ended.
    fn open(&self) {
        self.opens.send(()).unwrap();
    }

    /// The number of the next opening, once its build reads past the
    /// start of the source.
    fn next_opening(&self) -> u32 {
        (self.opened.recv_timeout(PATIENCE)).expect("no build opened its source")
    }

    /// Ends the source of the build holding it, else of the next one to
    /// open it.
    fn release(&self) {
        self.releases.send(()).unwrap();
    }
}

/// A replica builds nothing: SIGUSR1 is logged as ignored (saying where to
/// send it), from the moment it says it listens, and the replica serves
/// on; SIGTERM still stops it cleanly. By default SIGUSR1 would end the
/// process. A signal sent as soon as it said it listens went unanswered
/// (about one start in four here): `run` listened for SIGUSR1 only from
/// when it started, and the signals caught before were dropped.
#[test]
fn regression_a_replica_logs_sigusr1_as_ignored_from_its_start_and_serves_on() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("feed.txt"), "http://evil.example/x\n").unwrap();
    // A store nothing answers for: the replica starts and serves what it
    // has (nothing), trying the store again meanwhile.
    let builders = SigningKey::from_secret_bytes([7; 32]).public_key().to_base64();
    let config = one_list(
        dir.path(),
        &format!(
            "store = \"s3://unreachable/prefix\"\npublic_key = \"{builders}\"\n\
             store_options = {{ endpoint = \"http://127.0.0.1:1\", allow_http = \"true\", \
             region = \"us-east-1\", access_key_id = \"k\", secret_access_key = \"s\" }}\n{YEARLY}"
        ),
    );
    let (mut child, mut log) = serve(&config, &["--role", "replica"]);
    let addr = listening(&mut log);

    for _ in 0..2 {
        kill("-USR1", child.id());
        let ignored = log.wait_for("SIGUSR1 ignored");
        assert!(ignored.contains("send it to a builder"), "{ignored}");
        assert!(child.try_wait().unwrap().is_none(), "a replica ended on SIGUSR1");
        assert!(
            get(&addr, "/healthz").0.contains("200"),
            "no answer after SIGUSR1"
        );
    }

    kill("-TERM", child.id());
    let status = exit_within(&mut child, PATIENCE, "still running");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let lines = log.all();
    assert_eq!(count(&lines, BUILDING), 0, "{lines:#?}");
    assert_eq!(count(&lines, "published snapshot"), 0, "{lines:#?}");
    assert!(
        !dir.path().join("data/signing.key").exists(),
        "a replica made a signing key"
    );
}

/// SIGUSR1 while the list's build runs (the first one, held on its
/// source) is not lost: once that build ends, one more starts (it opens
/// the source anew) and publishes; and only one: two builds in all by the
/// time the process has exited.
#[test]
fn sigusr1_during_a_build_is_followed_by_one_more_after_it() {
    let dir = tempfile::tempdir().unwrap();
    let feed = Feed::new(&dir.path().join("feed.txt"));
    let (child, mut log) = serve(&one_list(dir.path(), YEARLY), &[]);
    let addr = listening(&mut log);
    feed.open();
    assert_eq!(feed.next_opening(), 1);

    kill("-USR1", child.id());
    log.wait_for(BUILDING);
    feed.release();
    log.wait_for("published snapshot");
    feed.open();
    assert_eq!(feed.next_opening(), 2, "no build after the signal");
    feed.release();
    log.wait_for("published snapshot");
    let (status, history) = get(&addr, "/v1/lists/good/history");
    assert!(status.contains("200"), "{status}");
    assert_eq!(
        history.matches(r#""outcome":"published""#).count(),
        2,
        "{history}"
    );
    ends_with_no_third_build(&feed, child, log);
}

/// Three SIGUSR1, each acted on (logged) while the list's build runs, are
/// merged into the one more build that waits for it to end: two builds in
/// all, not four.
#[test]
fn sigusr1s_while_one_more_build_waits_are_merged_into_it() {
    let dir = tempfile::tempdir().unwrap();
    let feed = Feed::new(&dir.path().join("feed.txt"));
    let (child, mut log) = serve(&one_list(dir.path(), YEARLY), &[]);
    listening(&mut log);
    feed.open();
    assert_eq!(feed.next_opening(), 1);

    // One at a time: signals sent at once may reach the process as one.
    for _ in 0..3 {
        kill("-USR1", child.id());
        log.wait_for(BUILDING);
    }
    feed.release();
    log.wait_for("published snapshot");
    feed.open();
    assert_eq!(feed.next_opening(), 2, "no build after the signals");
    feed.release();
    log.wait_for("published snapshot");
    let lines = ends_with_no_third_build(&feed, child, log);
    assert_eq!(count(&lines, BUILDING), 3, "{lines:#?}");
}

/// Once two builds have published: lets a third build, if any, read its
/// source whole, stops `serve` (SIGTERM: it waits for the builds it
/// started) and checks that there were two builds, neither cut off;
/// returns every log line.
fn ends_with_no_third_build(feed: &Feed, mut child: KillOnDrop, log: Log) -> Vec<String> {
    feed.open();
    feed.release();
    kill("-TERM", child.id());
    // A fourth build would wait for its source, and `serve` with it.
    let status = exit_within(&mut child, PATIENCE, "still running: more builds than two?");
    assert_eq!(status.code(), Some(0), "{status:?}");
    let lines = log.all();
    assert_eq!(count(&lines, "published snapshot"), 2, "{lines:#?}");
    assert_eq!(count(&lines, "list unchanged"), 0, "{lines:#?}");
    assert_eq!(
        count(&lines, "did not finish by the drain deadline"),
        0,
        "{lines:#?}"
    );
    assert!(feed.opened.try_recv().is_err(), "a third build opened the source");
    lines
}

/// SIGTERM while a build SIGUSR1 asked for still reads its source: the
/// build gets the drain deadline (it is not cut off at once), is then
/// cancelled and publishes nothing, and the process exits 0 within
/// twice `drain_timeout_s` (requests, then builds) and a little; the
/// snapshot served before stays the latest.
#[test]
fn sigterm_during_a_requested_build_cancels_it_at_the_drain_deadline() {
    const DRAIN_S: u64 = 2;
    let dir = tempfile::tempdir().unwrap();
    let feed = Feed::new(&dir.path().join("feed.txt"));
    let config = one_list(dir.path(), &format!("drain_timeout_s = {DRAIN_S}\n{YEARLY}"));
    let (mut child, mut log) = serve(&config, &[]);
    listening(&mut log);
    feed.open();
    feed.release();
    assert_eq!(feed.next_opening(), 1);
    log.wait_for("published snapshot");
    let latest = dir.path().join("data/lists/good/latest");
    let before = std::fs::read(&latest).unwrap();

    feed.open();
    kill("-USR1", child.id());
    log.wait_for(BUILDING);
    assert_eq!(feed.next_opening(), 2);
    let stopping = Instant::now();
    kill("-TERM", child.id());
    let status = exit_within(
        &mut child,
        Duration::from_secs(2 * DRAIN_S + 5),
        "serve still running: the requested build was not cancelled",
    );
    let took = stopping.elapsed();
    assert_eq!(status.code(), Some(0), "{status:?}");
    // The deadline starts after the signal: a slow machine only takes
    // longer.
    assert!(
        took >= Duration::from_secs(DRAIN_S),
        "the build was cut off before the drain deadline: stopped in {took:?}"
    );
    let lines = log.all();
    assert_eq!(
        count(
            &lines,
            "a requested build did not finish by the drain deadline; cancelled"
        ),
        1,
        "{lines:#?}"
    );
    assert_eq!(count(&lines, "build cancelled"), 1, "{lines:#?}");
    assert_eq!(count(&lines, "published snapshot"), 1, "{lines:#?}");
    assert_eq!(
        std::fs::read(&latest).unwrap(),
        before,
        "the cancelled build published"
    );
}
