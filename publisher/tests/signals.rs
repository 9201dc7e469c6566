//! Signals an operator sends to a running `serve`. Each `serve` is killed
//! when its test ends, passed or failed: a failed assertion left it
//! running, bound to its port and holding its data directory.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::io::Write as _;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use blocksieve_tests::process::{Feed, exit_within, http_get, kill, listening, serve};

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");
/// A schedule that never fires during a test: builds come from the start
/// and the signals alone.
const YEARLY: &str = "schedule = \"0 0 0 1 1 *\"\n";

/// A configuration in `dir` of one list `good` over `dir/feed.txt`, one
/// URL; its path.
fn one_list(dir: &Path, settings: &str) -> std::path::PathBuf {
    std::fs::write(dir.join("feed.txt"), "http://evil.example/x\n").unwrap();
    blocksieve_tests::process::one_list(dir, settings)
}

#[test]
fn regression_sighup_neither_stops_serve_nor_goes_unanswered() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut lines) = serve(BIN, &one_list(dir.path(), ""), &[]);
    let addr = listening(&mut lines);

    kill("-HUP", child.id());
    lines.wait_for("SIGHUP");
    std::thread::sleep(Duration::from_millis(300));
    assert!(child.try_wait().unwrap().is_none(), "serve ended on SIGHUP");
    assert!(
        http_get(&addr, "/healthz").0.contains("200"),
        "no answer after SIGHUP"
    );

    // SIGTERM still drains and stops it cleanly.
    kill("-TERM", child.id());
    let status = exit_within(&mut child, Duration::from_secs(30), "still running");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// Ctrl-C twice stops `serve` at once: the first signal drains (here up to
/// 30 s for a first build stuck on a source that never answers), the
/// second ends the process (exit 130). The second was ignored: the
/// operator waited out the drain.
#[test]
fn regression_a_second_signal_stops_serve_without_draining() {
    let dir = tempfile::tempdir().unwrap();
    // Accepts connections and never answers.
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let silent_addr = silent.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut open = Vec::new();
        for socket in silent.incoming() {
            open.push(socket);
        }
    });
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\ndrain_timeout_s = 30\n[[lists]]\nname = \"slow\"\n\
             sources = [{{ url = \"http://{silent_addr}/feed.txt\", format = \"urls\" }}]\n",
            dir.path().join("data")
        ),
    )
    .unwrap();
    let (mut child, mut lines) = serve(BIN, &config, &[]);
    // Signals are caught from the start line on (made before it, they
    // ended a process signalled right after it).
    lines.wait_for("publisher listening");
    kill("-INT", child.id());
    lines.wait_for("a second signal stops at once");
    kill("-INT", child.id());
    let status = exit_within(&mut child, Duration::from_secs(10), "still draining");
    assert_eq!(status.code(), Some(130), "{status:?}");
}

/// SIGUSR1 builds every list at once ("build now": an allowlist or a local
/// source was edited and must not wait for the schedule), and `serve`
/// keeps serving. By default the signal ended the process.
#[test]
fn sigusr1_builds_every_list_now_and_serve_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut lines) = serve(BIN, &one_list(dir.path(), YEARLY), &[]);
    let addr = listening(&mut lines);
    let feed = dir.path().join("feed.txt");
    assert!(lines.wait_for("published snapshot").contains("entries=1"));

    std::fs::write(&feed, "http://evil.example/x\nhttp://added.example/now\n").unwrap();
    kill("-USR1", child.id());
    lines.wait_for("SIGUSR1: building every list now");
    let published = lines.wait_for("published snapshot");
    assert!(published.contains("entries=2"), "{published}");
    assert!(child.try_wait().unwrap().is_none(), "serve ended on SIGUSR1");
    assert!(
        http_get(&addr, "/healthz").0.contains("200"),
        "no answer after SIGUSR1"
    );

    kill("-TERM", child.id());
    let status = exit_within(&mut child, Duration::from_secs(30), "still running");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// SIGUSR1 as soon as `serve` says it listens (a deploy script's "build
/// now" right after a start) neither ends it nor is lost: SIGUSR1 was
/// caught only once `run` had started its schedules, and before that it
/// ended the process (exit by signal 10).
#[test]
fn regression_sigusr1_right_after_listening_does_not_end_serve() {
    let dir = tempfile::tempdir().unwrap();
    let (mut child, mut lines) = serve(BIN, &one_list(dir.path(), YEARLY), &[]);
    listening(&mut lines);
    kill("-USR1", child.id());
    assert!(lines.wait_for("published snapshot").contains("entries=1"));
    assert!(
        child.try_wait().unwrap().is_none(),
        "serve ended on an early SIGUSR1"
    );

    kill("-TERM", child.id());
    let status = exit_within(&mut child, Duration::from_secs(30), "still running");
    assert_eq!(status.code(), Some(0), "{status:?}");
}

/// SIGTERM while a build is still reading its source: the build stops
/// within the drain deadline, publishes nothing and keeps nothing, and
/// the process exits. Cancelling the build's task only dropped its handle:
/// the reading went on on a blocking thread, which the process waited for
/// after "publisher stopped" (tens of seconds for a list of millions of
/// lines), holding the data directory, and then it published. Here the
/// source is a FIFO fed a line every 20 ms, so the read lasts as long as
/// the test lets it, on any machine: before, `serve` never ended.
#[test]
fn regression_a_build_still_reading_at_shutdown_stops_and_publishes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    // Each build that opens it gets 10,000 lines, then one every 20 ms.
    let feed = Feed::new(&dir.path().join("feed.txt"));
    feed.open();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\ndrain_timeout_s = 1\n{YEARLY}[[lists]]\nname = \"slow\"\n\
             sources = [{{ path = \"feed.txt\", format = \"urls\" }}]\n",
            dir.path().join("data")
        ),
    )
    .unwrap();
    let (mut child, mut lines) = serve(BIN, &config, &[]);
    listening(&mut lines);
    assert_eq!(feed.next_opening(), 1);
    std::thread::sleep(Duration::from_millis(300));

    kill("-TERM", child.id());
    // Up to 1 s for requests, 1 s for the build, and a block to read.
    let status = exit_within(
        &mut child,
        Duration::from_secs(10),
        "serve still running: the cancelled build reads on",
    );
    assert_eq!(status.code(), Some(0), "{status:?}");
    lines.wait_for("build cancelled");
    // Said once the build has stopped: it was said first, and the
    // cancelled build's line came after it.
    lines.wait_for("publisher stopped");
    let list = dir.path().join("data/lists/slow");
    assert!(!list.join("latest").exists(), "a cancelled build published");
    let kept: Vec<_> = std::fs::read_dir(dir.path().join("data/sources/slow"))
        .map(|d| d.map(|e| e.unwrap().file_name()).collect())
        .unwrap_or_default();
    assert!(kept.is_empty(), "a cancelled build kept {kept:?}");
}

/// SIGTERM while builds are blocked on sources that send nothing: a FIFO
/// whose writer paused after its first lines (the read waits in the
/// kernel, where no cancelled build's check is reached) and one no
/// process has opened for writing (its fetch waited in `open` for good;
/// it now waits for a writer for at most 60 s). The
/// process exits once the drain deadlines and as long again have passed.
/// Its blocking threads held the exit until the writer wrote or closed
/// (forever here): "publisher stopped" was logged and the process stayed,
/// deaf to the second signal that stops it at once, until SIGKILL.
#[test]
fn regression_builds_blocked_on_sources_that_send_nothing_do_not_hold_the_exit() {
    let dir = tempfile::tempdir().unwrap();
    for fifo in ["paused.txt", "unopened.txt"] {
        let made = Command::new("mkfifo")
            .arg(dir.path().join(fifo))
            .status()
            .unwrap();
        assert!(made.success());
    }
    let (reading, is_reading) = std::sync::mpsc::channel();
    let (done, test_done) = std::sync::mpsc::channel::<()>();
    let writer_path = dir.path().join("paused.txt");
    std::thread::spawn(move || {
        // Blocks until `serve` opens the source.
        let mut feed = std::fs::OpenOptions::new().write(true).open(writer_path).unwrap();
        // Past the 64 KiB `serve` reads first to check what the source is.
        let mut head = String::new();
        for i in 0..10_000 {
            head.push_str(&format!("http://evil{i}.example/path\n"));
        }
        if feed.write_all(head.as_bytes()).is_ok() {
            let _ = reading.send(());
            // Held open, silent, until the test ends.
            let _ = test_done.recv_timeout(Duration::from_secs(120));
        }
    });
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\ndrain_timeout_s = 1\n{YEARLY}\
             [[lists]]\nname = \"paused\"\nsources = [{{ path = \"paused.txt\", format = \"urls\" }}]\n\
             [[lists]]\nname = \"unopened\"\nsources = [{{ path = \"unopened.txt\", format = \"urls\" }}]\n",
            dir.path().join("data")
        ),
    )
    .unwrap();
    let (mut child, mut lines) = serve(BIN, &config, &[]);
    listening(&mut lines);
    is_reading.recv_timeout(Duration::from_secs(30)).unwrap();
    std::thread::sleep(Duration::from_millis(300));

    kill("-TERM", child.id());
    // Up to 1 s for requests, 1 s for the builds, 1 s for their threads.
    let status = exit_within(
        &mut child,
        Duration::from_secs(10),
        "serve still running: its blocked builds hold the exit",
    );
    drop(done);
    assert_eq!(status.code(), Some(0), "{status:?}");
    lines.wait_for("exiting without it");
    lines.wait_for("publisher stopped");
    for list in ["paused", "unopened"] {
        let latest = dir.path().join("data/lists").join(list).join("latest");
        assert!(!latest.exists(), "a cancelled build of {list} published");
    }
}

/// A second SIGTERM while the exit waits for a cancelled build's blocked
/// work (here a FIFO whose writer, the test, never writes) ends the process at once,
/// as a second signal does while `serve` drains. The listener for it ran on
/// the runtime that was shut down for that wait: the signal was ignored and
/// the process exited 0 once `drain_timeout_s` had passed.
#[test]
fn regression_a_second_signal_stops_the_exit_waiting_for_blocked_work() {
    let dir = tempfile::tempdir().unwrap();
    let made = Command::new("mkfifo")
        .arg(dir.path().join("unopened.txt"))
        .status()
        .unwrap();
    assert!(made.success());
    // Opened for reading and writing, it never blocks, and it is a writer
    // that sends nothing: the build's read waits in the kernel.
    let _silent = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(dir.path().join("unopened.txt"))
        .unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\ndrain_timeout_s = 4\n{YEARLY}[[lists]]\nname = \"unopened\"\n\
             sources = [{{ path = \"unopened.txt\", format = \"urls\" }}]\n",
            dir.path().join("data")
        ),
    )
    .unwrap();
    let (mut child, mut lines) = serve(BIN, &config, &[]);
    listening(&mut lines);
    kill("-TERM", child.id());
    // Then the build's blocked thread gets 4 s more.
    lines.wait_for("a first build did not finish by the drain deadline");
    std::thread::sleep(Duration::from_millis(500));
    kill("-TERM", child.id());
    let status = exit_within(
        &mut child,
        Duration::from_secs(2),
        "serve still running: the second signal was ignored",
    );
    assert_eq!(status.code(), Some(143), "{status:?}");
}
