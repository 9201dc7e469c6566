//! Signals an operator sends to a running `serve`.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::BufRead as _;
use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");

/// Waits for a line of `lines` holding `text`, and returns it.
fn wait_for(lines: &Receiver<String>, text: &str) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        if let Ok(line) = lines.recv_timeout(Duration::from_millis(200)) {
            if line.contains(text) {
                return line;
            }
            seen.push(line);
        }
    }
    panic!("no {text:?} in {seen:#?}");
}

fn kill(signal: &str, pid: u32) {
    let sent = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
}

/// The status line of `GET /healthz` on `addr`.
fn healthz(addr: &str) -> String {
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    stream
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.lines().next().unwrap_or_default().to_owned()
}

/// SIGHUP, which operators send to make a daemon reload, leaves `serve`
/// running and says that the configuration is read at start only. It
/// ended the process at once, without draining or a line in the log; and
/// systemd counts a death by SIGHUP as a clean exit, so
/// `Restart=on-failure` left the service stopped.
#[test]
fn regression_sighup_neither_stops_serve_nor_goes_unanswered() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("feed.txt"), "http://evil.example/x\n").unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\n[[lists]]\nname = \"good\"\n\
             sources = [{{ path = \"feed.txt\", format = \"urls\" }}]\n",
            dir.path().join("data")
        ),
    )
    .unwrap();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            "--config",
            config.to_str().unwrap(),
            "--listen",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "info")
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let (send, lines) = std::sync::mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = send.send(line);
        }
    });
    let listening = wait_for(&lines, "publisher listening");
    let addr = listening
        .split_whitespace()
        .find_map(|field| field.strip_prefix("addr="))
        .unwrap()
        .to_owned();

    kill("-HUP", child.id());
    wait_for(&lines, "SIGHUP");
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "serve ended on SIGHUP");
    assert!(healthz(&addr).contains("200"), "no answer after SIGHUP");

    // SIGTERM still drains and stops it cleanly.
    kill("-TERM", child.id());
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        assert!(started.elapsed() < Duration::from_secs(30), "still running");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(0), "{status:?}");
}
