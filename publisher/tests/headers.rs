//! A source's `headers` as an operator gives them: a value from an
//! environment variable (systemd's `EnvironmentFile=`) read by the
//! `blocksieve-publisher` process, sent to the feed, and never printed.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::mpsc;
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");
const KEY: &str = "env-secret-4f9c2a-never-shown";
const LITERAL: &str = "literal-secret-7d1e0b-never-shown";

/// A variable name no other test or process sets.
fn variable() -> String {
    format!("BLOCKSIEVE_TEST_AUTH_KEY_{}", std::process::id())
}

/// Runs the publisher with `args`, `variable()` set to `value` (unset when
/// `None`).
fn run(args: &[&str], value: Option<&str>) -> Output {
    let mut command = Command::new(BIN);
    command
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LOG", "warn");
    match value {
        Some(value) => command.env(variable(), value),
        None => command.env_remove(variable()),
    };
    command.output().expect("run publisher")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A configuration in `dir` with list `feed` over `url`, sending
/// `Auth-Key` from `variable()` and `X-Api-Key` written in the file.
fn write_config(dir: &Path, url: &str) -> PathBuf {
    let config = format!(
        "data_dir = {:?}\n[[lists]]\nname = \"feed\"\n\
         sources = [{{ url = \"{url}\", format = \"urls\", retries = 0, \
         headers = {{ \"Auth-Key\" = {{ env = \"{}\" }}, \"X-Api-Key\" = \"{LITERAL}\" }} }}]\n",
        dir.join("data"),
        variable()
    );
    let path = dir.join("config.toml");
    std::fs::write(&path, config).unwrap();
    path
}

#[test]
fn check_config_names_the_headers_and_their_variable_never_their_values() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), "https://urlhaus-api.abuse.ch/feed");
    let out = run(&["check-config", config.to_str().unwrap()], Some(KEY));
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    let want = format!("  headers     Auth-Key (from ${}), X-Api-Key\n", variable());
    assert!(stdout.contains(&want), "{want:?} not in\n{stdout}");
    for secret in [KEY, LITERAL] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{stdout}{stderr}"
        );
    }

    // Not set, or set empty: refused, naming the variable.
    for (value, says) in [(None, "is not set"), (Some(""), "is empty")] {
        let out = run(&["check-config", config.to_str().unwrap()], value);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        let want = format!(
            "lists.feed.sources[0].headers.Auth-Key: environment variable ${} {says}",
            variable()
        );
        assert!(stderr.contains(&want), "{want:?} not in {stderr}");
        assert!(!stderr.contains(LITERAL), "{stderr}");
    }
}

/// A feed on 127.0.0.1:0 answering one request: the list when it carries
/// `Auth-Key: KEY` and `X-Api-Key: LITERAL`, else 401. Its URL, and the
/// request's header lines once answered.
fn keyed_feed() -> (String, mpsc::Receiver<Vec<String>>) {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/feed.txt", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let Ok((stream, _)) = listener.accept() else {
            return;
        };
        let mut reader = BufReader::new(stream.try_clone().unwrap());
        let mut lines = Vec::new();
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line).unwrap_or(0) == 0 || line.trim().is_empty() {
                break;
            }
            lines.push(line.trim_end().to_ascii_lowercase());
        }
        let keyed = lines.contains(&format!("auth-key: {}", KEY.to_ascii_lowercase()))
            && lines.contains(&format!("x-api-key: {}", LITERAL.to_ascii_lowercase()));
        let (status, body) = if keyed {
            ("200 OK", "http://evil1.example/x\nhttp://evil2.example/x\n")
        } else {
            ("401 Unauthorized", "no key\n")
        };
        let mut stream = stream;
        let _ = write!(
            stream,
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = tx.send(lines);
    });
    (url, rx)
}

#[test]
fn build_sends_the_variables_value_and_publishes() {
    let dir = tempfile::tempdir().unwrap();
    let (url, seen) = keyed_feed();
    let config = write_config(dir.path(), &url);
    let out_dir = dir.path().join("out");
    let out = run(
        &[
            "build",
            "--config",
            config.to_str().unwrap(),
            "--out",
            out_dir.to_str().unwrap(),
        ],
        Some(KEY),
    );
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    let lines = seen
        .recv_timeout(Duration::from_secs(30))
        .expect("the feed was asked");
    assert!(
        lines.contains(&format!("auth-key: {}", KEY.to_ascii_lowercase())),
        "{lines:?}"
    );
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("| feed | yes |"), "{stdout}");
    for secret in [KEY, LITERAL] {
        assert!(
            !stdout.contains(secret) && !stderr.contains(secret),
            "{stdout}{stderr}"
        );
    }
}
