//! One agent per cache directory, enforced: the agent holds an advisory
//! lock on `<cache_dir>/lock` from its build to its drop, and a second
//! agent on the directory — of this process, or of another one (a real
//! child process: this test binary re-run as
//! `cache_lock::child_holds_the_cache_dir_until_killed`) — is refused at
//! build. The lock goes with its holder: dropped, or killed.

use std::io::BufRead as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use blocksieve_agent::{Agent, Error, ErrorKind};

use blocksieve_tests::fake::{FakePublisher, unreachable_url};
use blocksieve_tests::snapshot::{Snap, trusted, unix_now};

/// Set in the child's environment: the cache directory it holds.
const CHILD_DIR: &str = "BLOCKSIEVE_LOCK_CHILD_DIR";
/// The child test, by its path in this binary.
const CHILD_TEST: &str = "cache_lock::child_holds_the_cache_dir_until_killed";

fn build(dir: &Path) -> Result<Agent, Error> {
    Agent::builder(unreachable_url())
        .list("malware")
        .trusted_key(trusted())
        .cache_dir(dir)
        .build()
}

/// A copy of the files of the cache directory `dir`, for a start on them
/// while an agent holds `dir`.
pub(crate) fn copy_of(dir: &Path) -> tempfile::TempDir {
    let copy = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        if entry.file_type().unwrap().is_file() && entry.file_name() != "lock" {
            std::fs::copy(entry.path(), copy.path().join(entry.file_name())).unwrap();
        }
    }
    copy
}

/// The error of a refused build, checked to be the lock's, naming the
/// directory, and its holder's process id as the error gives it.
fn refused(dir: &Path) -> Option<u32> {
    let e = build(dir).expect_err("a second agent on the cache directory was built");
    assert_eq!(e.kind(), ErrorKind::Misconfigured, "{e}");
    let text = e.to_string();
    assert!(text.contains(&dir.display().to_string()), "{text}");
    assert!(text.contains("in use"), "{text}");
    match e {
        Error::CacheDirInUse { path, holder } => {
            assert_eq!(path, dir);
            holder
        }
        other => panic!("not the lock's error: {other:?}"),
    }
}

#[test]
fn a_second_agent_on_the_same_cache_dir_is_refused_until_the_first_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    // Not there yet: the builder creates it, then locks it.
    let dir = dir.path().join("cache");
    let first = build(&dir).unwrap();
    assert_eq!(refused(&dir), Some(std::process::id()));
    // The holder is this process: said so, with why an agent dropped may
    // still hold it (a round or a write it started, finishing).
    let text = build(&dir).unwrap_err().to_string();
    assert!(text.contains("in use by another agent of this process"), "{text}");
    assert!(text.contains("still be finishing"), "{text}");
    // A clone is the same agent: the lock stays until the last one goes.
    let clone = first.clone();
    drop(first);
    refused(&dir);
    drop(clone);
    let again = build(&dir).unwrap();
    refused(&dir);
    drop(again);
    // Another directory is another agent's business.
    let other = dir.with_file_name("other");
    let _a = build(&dir).unwrap();
    let _b = build(&other).unwrap();
}

/// What the lock protects: the snapshot an agent persisted is what the
/// next one on the directory loads.
#[tokio::test]
async fn the_next_agent_loads_what_the_one_before_persisted() {
    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    let fake = FakePublisher::start().await;
    let first = fake
        .agent_builder(&["malware"])
        .cache_dir(dir.path())
        .build()
        .unwrap();
    fake.serve_snapshot(&Snap::new("malware", 7, &["evil.example/"]).valid(now - 60, now + 3600));
    first.update().await.unwrap();
    refused(dir.path());
    drop(first);
    let next = build(dir.path()).unwrap();
    assert_eq!(next.snapshot_version("malware"), Some(7));
}

/// The child: an agent on `$BLOCKSIEVE_LOCK_CHILD_DIR`; prints `locked`
/// once built, then waits to be killed. Without the variable (e.g. `cargo
/// test -- --ignored`) it does nothing.
#[test]
#[ignore = "the child process of an_agent_of_another_process_holds_the_cache_dir_until_killed"]
fn child_holds_the_cache_dir_until_killed() {
    let Some(dir) = std::env::var_os(CHILD_DIR) else {
        return;
    };
    let agent = build(Path::new(&dir)).unwrap();
    println!("\nlocked");
    // A safety net: should the parent die without killing us, stop.
    std::thread::sleep(Duration::from_secs(60));
    drop(agent);
}

/// Kills the child if the parent test fails before it does.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn an_agent_of_another_process_holds_the_cache_dir_until_killed() {
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let mut child = KillOnDrop(
        Command::new(exe)
            .args([
                CHILD_TEST,
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(CHILD_DIR, dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let stdout = child.0.stdout.take().unwrap();
    let (tx, lines) = mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = lines.recv_timeout(wait).expect("the child did not start");
        // libtest may print its "test … ... " on the same line.
        if line.ends_with("locked") {
            break;
        }
    }
    // Refused, naming the child as the holder.
    assert_eq!(refused(dir.path()), Some(child.0.id()));
    // Killed (SIGKILL: no destructor runs), the child holds nothing.
    child.0.kill().unwrap();
    child.0.wait().unwrap();
    let agent = build(dir.path()).unwrap();
    drop(agent);
}

/// A directory this process may not write to: before the lock, such a
/// directory was read (its snapshots loaded) and every write failed,
/// reported in the status, by any number of agents at once. It still is:
/// the agent takes no lock there, whether `lock` exists (left by the run
/// that wrote the cache, as in a cache baked into an image) or not (it
/// cannot write, so it cannot overwrite another's files). Skipped when the
/// process may write anyway (root); `store.rs`
/// `a_lock_file_not_writable_is_not_locked` tests the decision as root too.
#[cfg(unix)]
#[tokio::test]
async fn a_read_only_cache_dir_is_still_read() {
    use std::os::unix::fs::PermissionsExt as _;

    let dir = tempfile::tempdir().unwrap();
    let now = unix_now();
    let fake = FakePublisher::start().await;
    let writer = fake
        .agent_builder(&["malware"])
        .cache_dir(dir.path())
        .build()
        .unwrap();
    fake.serve_snapshot(&Snap::new("malware", 3, &["evil.example/"]).valid(now - 60, now + 3600));
    writer.update().await.unwrap();
    drop(writer);
    let set_mode =
        |mode| std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(mode)).unwrap();
    set_mode(0o555);
    if std::fs::write(dir.path().join("probe"), b"").is_ok() {
        set_mode(0o755);
        eprintln!("skipped: this process writes to read-only directories (root?)");
        return;
    }

    // The lock file the writer left, read-only too (as in an image whose
    // files another user owns): not locked, so workers sharing the
    // directory all start. (A lock file this process may still write is
    // locked, the directory's mode aside.)
    let lock = dir.path().join("lock");
    std::fs::set_permissions(&lock, std::fs::Permissions::from_mode(0o444)).unwrap();
    let readers: Vec<Agent> = (0..3)
        .map(|_| {
            fake.agent_builder(&["malware"])
                .cache_dir(dir.path())
                .build()
                .unwrap()
        })
        .collect();
    for reader in &readers {
        assert_eq!(reader.snapshot_version("malware"), Some(3));
    }
    drop(readers);

    // No lock file, and none can be made: read all the same.
    set_mode(0o755);
    std::fs::remove_file(dir.path().join("lock")).unwrap();
    set_mode(0o555);
    let a = fake
        .agent_builder(&["malware"])
        .cache_dir(dir.path())
        .build()
        .unwrap();
    let b = fake
        .agent_builder(&["malware"])
        .cache_dir(dir.path())
        .build()
        .unwrap();
    assert_eq!(a.snapshot_version("malware"), Some(3));
    assert_eq!(b.snapshot_version("malware"), Some(3));
    fake.serve_snapshot(&Snap::new("malware", 4, &["evil.example/"]).valid(now - 60, now + 3600));
    a.update().await.unwrap();
    assert_eq!(a.snapshot_version("malware"), Some(4));
    assert_eq!(a.stats().persist_failures, 1);
    set_mode(0o755);
}
