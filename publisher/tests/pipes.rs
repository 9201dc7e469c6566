//! The command line's output to a reader that goes away (`… | head`,
//! `… 2>&1 | head`): each subcommand ends its output quietly and exits as
//! the command went, never with a panic on the closed pipe (exit 101,
//! `failed printing to stdout`).

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A configuration in `dir`: list `good` over five URLs, data in
/// `dir/data`.
fn write_config(dir: &Path) -> PathBuf {
    let feed: String = (1..=5).map(|i| format!("http://evil{i}.example/x\n")).collect();
    std::fs::write(dir.join("feed.txt"), feed).unwrap();
    let path = dir.join("config.toml");
    std::fs::write(
        &path,
        format!(
            "data_dir = {:?}\n[[lists]]\nname = \"good\"\n\
             sources = [{{ path = \"feed.txt\", format = \"urls\" }}]\n",
            dir.join("data")
        ),
    )
    .unwrap();
    path
}

/// The publisher run with `args`, its stdout a pipe whose reader is gone
/// before it starts, so that its first write to stdout fails.
fn to_closed_stdout(args: &[&str]) -> Output {
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LOG", "error")
        .stdout(writer)
        .output()
        .expect("run publisher")
}

/// `inspect SNAPSHOT | head -1` and `keygen | …`, the reader gone before
/// anything is printed: the output ends quietly and the exit code is the
/// command's (inspect's checks', keygen's key written). Both printed with
/// `println!`, which panicked on the closed pipe (exit 101). Every other
/// subcommand that prints to stdout is held to the same.
#[test]
fn regression_every_subcommand_to_a_closed_stdout_exits_as_it_went() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let config = config.to_str().unwrap();
    let built = to_closed_stdout(&["build", "--config", config]);
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
    let snapshot = std::fs::read_dir(dir.path().join("data/lists/good/builds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "snapshot"))
        .unwrap();
    let mut bytes = std::fs::read(&snapshot).unwrap();
    *bytes.last_mut().unwrap() ^= 0x01;
    let damaged = dir.path().join("damaged.snapshot");
    std::fs::write(&damaged, &bytes).unwrap();
    let (snapshot, damaged) = (snapshot.to_str().unwrap(), damaged.to_str().unwrap());
    let public_key = dir.path().join("data/public.key");
    let new_key = dir.path().join("new.key");
    let cases: [(&[&str], i32); 9] = [
        (&["inspect", snapshot], 0),
        (&["inspect", snapshot, "--key", public_key.to_str().unwrap()], 0),
        (&["inspect", damaged], 1),
        (&["keygen", "--out", new_key.to_str().unwrap()], 0),
        (&["expressions", "http://a.example/b/c"], 0),
        (&["expressions", "--feed-line", "urls", "http://a.example/b"], 0),
        (&["check-config", config], 0),
        (&["build", "--config", config, "--timings"], 0),
        (&["--help"], 0),
    ];
    for (args, code) in cases {
        let out = to_closed_stdout(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("panicked") && !stderr.contains("failed printing"),
            "{args:?}: {stderr}"
        );
    }
    // The key was written all the same, its public key beside it.
    assert!(new_key.is_file() && dir.path().join("new.key.pub").is_file());
}

/// `expressions … | head`: a reader that stops reading ends the output
/// quietly (exit 0, nothing on stderr), in both modes.
#[test]
fn regression_expressions_piped_into_a_reader_that_stops_ends_quietly() {
    use std::io::Read as _;
    let urls: Vec<String> = (0..20_000).map(|i| format!("http://a{i}.example/x/y")).collect();
    for feed_line in [false, true] {
        let mut command = Command::new(BIN);
        command.arg("expressions");
        if feed_line {
            command.args(["--feed-line", "urls"]);
        }
        let mut child = command
            .args(&urls)
            .env("RUST_BACKTRACE", "0")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run publisher");
        let mut first = [0u8; 64];
        child.stdout.take().unwrap().read_exact(&mut first).unwrap();
        // The pipe's read end is closed here, with most of the output unread.
        let out = child.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "feed_line {feed_line}: {:?} {}",
            out.status,
            text(&out.stderr)
        );
        assert_eq!(text(&out.stderr), "", "feed_line {feed_line}");
    }
}

/// `build … | head -1`: the report's reader is gone before it is written.
/// The build still runs to its end and exits as it would (0 here), with
/// nothing on stderr about the pipe (it panicked with exit 101).
#[test]
fn regression_a_build_whose_report_nobody_reads_exits_as_built() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path());
    let mut child = Command::new(BIN)
        .args(["build", "--config", config.to_str().unwrap(), "--timings"])
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LOG", "error")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run publisher");
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
        "{stderr}"
    );
    assert!(dir.path().join("data/lists/good").is_dir(), "built anyway");
}

/// `check-config FILE 2>&1 | head -3` closes stderr before the warnings:
/// the exit code stays the file's verdict. The warnings' write panicked
/// (exit 101), so a valid file read as a crash.
#[test]
fn regression_check_config_with_stderr_closed_exits_by_the_file_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    // Valid, with a warning: the source file is missing.
    std::fs::write(
        &config,
        "[[lists]]\nname = \"p\"\nsources = [{ path = \"missing.txt\", format = \"urls\" }]\n",
    )
    .unwrap();
    let (reader, writer) = std::io::pipe().unwrap();
    drop(reader);
    let status = Command::new(BIN)
        .args(["check-config", config.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(writer)
        .status()
        .unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
}
