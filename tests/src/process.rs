//! A `blocksieve-publisher serve` process in a test, and what tests do to
//! it: its log as it comes ([`Log`]), signals ([`kill`]), its exit within
//! a bound ([`exit_within`]), plain `GET`s ([`http_get`]), and a source
//! that holds a build open as long as a test wants ([`Feed`], a named
//! pipe). Unix only (signals, `mkfifo`). A step that fails panics: it
//! fails the test.

#![allow(clippy::unwrap_used)]

use std::io::{BufRead as _, Read as _, Write as _};
use std::path::Path;
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::time::{Duration, Instant};

use crate::KillOnDrop;

/// How long these helpers wait for what should come at once.
pub const PATIENCE: Duration = Duration::from_secs(30);

/// `bin serve --config config` on 127.0.0.1:0 with `args`, logging at
/// `info`: the process (killed when dropped) and its log.
///
/// # Panics
///
/// When the process cannot be started.
pub fn serve(bin: &str, config: &Path, args: &[&str]) -> (KillOnDrop, Log) {
    let mut child = KillOnDrop(
        Command::new(bin)
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
pub struct Log {
    lines: Receiver<String>,
    seen: Vec<String>,
    /// The first line [`Log::wait_for`] has not yet looked at.
    next: usize,
}

impl Log {
    /// Waits for a line holding `text` after those waited for before, and
    /// returns it.
    ///
    /// # Panics
    ///
    /// When no such line comes within [`PATIENCE`].
    pub fn wait_for(&mut self, text: &str) -> String {
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
    #[must_use]
    pub fn all(mut self) -> Vec<String> {
        while let Ok(line) = self.lines.recv_timeout(PATIENCE) {
            self.seen.push(line);
        }
        self.seen
    }
}

/// The address `serve` says it listens on, once it says so.
///
/// # Panics
///
/// When it does not say so within [`PATIENCE`].
pub fn listening(log: &mut Log) -> String {
    let line = log.wait_for("publisher listening");
    (line.split_whitespace())
        .find_map(|field| field.strip_prefix("addr="))
        .unwrap()
        .to_owned()
}

/// A configuration in `dir` of one list `good` over `dir/feed.txt` (not
/// written here), with `settings` (TOML lines) first and the data in
/// `dir/data`; its path.
pub fn one_list(dir: &Path, settings: &str) -> std::path::PathBuf {
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

/// Sends `signal` (`-TERM`, `-USR1`, …) to process `pid`.
///
/// # Panics
///
/// When `kill` fails.
pub fn kill(signal: &str, pid: u32) {
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// How `child` exited, within `within`.
///
/// # Panics
///
/// When it has not exited by then, saying `still`.
pub fn exit_within(child: &mut KillOnDrop, within: Duration, still: &str) -> ExitStatus {
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
///
/// # Panics
///
/// When the request cannot be made or read.
pub fn http_get(addr: &str, path: &str) -> (String, String) {
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

/// A named pipe as a list's source, fed by a thread, one opening at a
/// time as the test lets it ([`Feed::open`]); a build that opens the pipe
/// before waits. An opening, numbered from 1, gets 10,000 lines and one
/// naming it (so that every build publishes), then is held open, a line
/// every 20 ms (a cancelled build stops at its next block of content),
/// until [`Feed::release`] ends it. (Letting the next opening in at once
/// would feed the build still reading the last one: while a reader has
/// the pipe open, opening it to write does not wait for another.)
pub struct Feed {
    opened: Receiver<u32>,
    opens: Sender<()>,
    releases: Sender<()>,
}

impl Feed {
    ///
    /// # Panics
    ///
    /// When the pipe cannot be made.
    #[must_use]
    pub fn new(path: &Path) -> Self {
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
    ///
    /// # Panics
    ///
    /// When the feeding thread has ended.
    pub fn open(&self) {
        self.opens.send(()).unwrap();
    }

    /// The number of the next opening, once its build reads past the
    /// start of the source.
    ///
    /// # Panics
    ///
    /// When no build opens it within [`PATIENCE`].
    #[must_use]
    pub fn next_opening(&self) -> u32 {
        (self.opened.recv_timeout(PATIENCE)).expect("no build opened its source")
    }

    /// The number of the next opening, if a build reads past the start of
    /// the source within `within`.
    #[must_use]
    pub fn opening_within(&self, within: Duration) -> Option<u32> {
        self.opened.recv_timeout(within).ok()
    }

    /// Whether a build read past the start of the source since the last
    /// [`Feed::next_opening`], without waiting.
    #[must_use]
    pub fn opened_since(&self) -> bool {
        self.opened.try_recv().is_ok()
    }

    /// Ends the source of the build holding it, else of the next one to
    /// open it.
    ///
    /// # Panics
    ///
    /// When the feeding thread has ended.
    pub fn release(&self) {
        self.releases.send(()).unwrap();
    }
}
