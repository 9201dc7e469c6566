//! The `check` example: flags, output lines, exit codes.

use std::time::Duration;

use axum::http::StatusCode;
use blocksieve_format::SigningKey;
use blocksieve_tests::fake::{FakePublisher, Raw, RawServer, SearchMode, Served};
use blocksieve_tests::snapshot::publisher_key;

use crate::support::{run_with_deadline, start, start_valid_for, temp_dir, text};

fn check(args: &[&str], stdin: Option<&str>, dir: &std::path::Path) -> std::process::Output {
    crate::support::run(env!("CARGO_BIN_EXE_check"), args, stdin, dir)
}

#[test]
fn prints_one_line_per_url_and_exits_1_when_unsafe() {
    let publisher = start();
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "http://evil.example/login",
            "https://good.example/",
            "mailto:someone@example.com",
        ],
        None,
        &temp_dir(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "unsafe malware http://evil.example/login\n\
         safe https://good.example/\n\
         invalid mailto:someone@example.com scheme is not followed by \"//\" (URL has no host)\n"
    );
    assert!(
        stderr.contains("3 urls: 1 unsafe, 1 safe, 1 invalid; 1 full-hash requests"),
        "{stderr}"
    );
    // The publisher's `empty` list has no snapshot: left out of the check,
    // which says so rather than answering `safe` as if it had been asked.
    assert!(
        stderr.contains("check: warning: list empty has no snapshot yet and is not checked"),
        "{stderr}"
    );
}

/// A publisher serving more lists than an agent follows (64): the default
/// of every list cannot be had, and the error says what to do, not that the
/// user passed too many lists (none were passed).
#[test]
fn more_lists_than_an_agent_follows_asks_for_list_flags() {
    let publisher = start();
    let now = blocksieve_tests::snapshot::unix_now();
    for i in 0..65 {
        let name = format!("l{i}");
        publisher
            .serve_snapshot(&blocksieve_tests::snapshot::Snap::new(&name, 1, &[]).valid(now, now + 3600));
    }
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "http://evil.example/login",
        ],
        None,
        &temp_dir(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("serves 66 lists with a snapshot, and an agent follows at most 64: name the lists to check with --list NAME (repeatable)"),
        "{stderr}"
    );
}

#[test]
fn reads_urls_from_stdin_and_the_default_key_file() {
    let publisher = start();
    let dir = temp_dir();
    std::fs::create_dir_all(dir.join("blocksieve-data")).unwrap();
    std::fs::write(
        dir.join("blocksieve-data/public.key"),
        format!("{}\n", publisher_key().public_key().to_base64()),
    )
    .unwrap();
    let out = check(
        &["--publisher", &publisher.base_url, "--list", "malware"],
        Some("http://good.example/\n\n  https://also-good.example/a  \n"),
        &dir,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "safe http://good.example/\nsafe https://also-good.example/a\n"
    );
    assert!(
        stderr.contains("2 urls: 0 unsafe, 2 safe, 0 invalid; 0 full-hash requests"),
        "{stderr}"
    );
}

/// Many batches from stdin with stderr piped (not a terminal): no progress
/// line, no escape code or carriage return; stderr is the summary line
/// alone and stdout one verdict line per URL, in order, as before progress
/// existed.
#[test]
fn a_long_run_from_stdin_with_stderr_piped_prints_the_summary_alone() {
    let publisher = start();
    let key = publisher_key().public_key().to_base64();
    // Three batches of 256 and a partial one: 900 URLs, every third listed.
    let urls: Vec<String> = (0..900)
        .map(|i| {
            if i % 3 == 0 {
                format!("http://evil.example/p{i}")
            } else {
                format!("https://good{i}.example/")
            }
        })
        .collect();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "--list",
            "malware",
        ],
        Some(&(urls.join("\n") + "\n")),
        &temp_dir(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let want: String = urls
        .iter()
        .enumerate()
        .map(|(i, url)| {
            if i % 3 == 0 {
                format!("unsafe malware {url}\n")
            } else {
                format!("safe {url}\n")
            }
        })
        .collect();
    assert!(text(&out.stdout) == want, "stdout differs");
    let requests = stderr
        .strip_prefix("900 urls: 300 unsafe, 600 safe, 0 invalid; ")
        .and_then(|rest| rest.strip_suffix(" full-hash requests\n"))
        .and_then(|n| n.parse::<u64>().ok());
    assert!(requests.is_some_and(|n| (1..=4).contains(&n)), "{stderr:?}");
}

#[test]
fn key_from_file_argument() {
    let publisher = start();
    let dir = temp_dir();
    let key_file = dir.join("trusted.key");
    std::fs::write(&key_file, publisher_key().public_key().to_base64()).unwrap();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            key_file.to_str().unwrap(),
            "http://evil.example/",
        ],
        None,
        &dir,
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
}

#[test]
fn failed_full_hash_request_is_unverified_and_exits_2() {
    let publisher = start();
    publisher.set_search_mode(SearchMode::Status(StatusCode::INTERNAL_SERVER_ERROR));
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "http://evil.example/",
            "http://good.example/",
        ],
        None,
        &temp_dir(),
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stdout.starts_with("unverified http://evil.example/ "), "{stdout}");
    assert!(stdout.contains("500"), "{stdout}");
    assert!(stdout.ends_with("safe http://good.example/\n"), "{stdout}");
    assert!(stderr.contains("1 unverified"), "{stderr}");
}

/// An invalid URL is neither safe nor unsafe: a run that has one exits 2,
/// never 0, which a script reads as "every URL checked and safe". A listed
/// host with a query that takes the URL over 2 MiB is refused so.
#[test]
fn an_invalid_url_exits_2_not_0() {
    let publisher = start();
    let key = publisher_key().public_key().to_base64();
    let long = format!("http://evil.example/?q={}\n", "a".repeat(2 * 1024 * 1024));
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "--list",
            "malware",
        ],
        Some(&long),
        &temp_dir(),
    );
    let stderr = text(&out.stderr);
    assert!(
        text(&out.stdout).starts_with("invalid http://evil.example/?q=aaa"),
        "{stderr}"
    );
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("1 urls: 0 unsafe, 0 safe, 1 invalid"), "{stderr}");
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "mailto:someone@example.com",
        ],
        None,
        &temp_dir(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

#[test]
fn fail_closed_blocks_unverified_urls_with_exit_1() {
    let publisher = start();
    publisher.set_search_mode(SearchMode::Status(StatusCode::INTERNAL_SERVER_ERROR));
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "--fail-closed",
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stdout).starts_with("unverified http://evil.example/ "));
}

#[test]
fn noise_flag_sets_the_prefixes_per_request() {
    let publisher = start();
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "--noise",
            "7",
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let searches = publisher.searches();
    assert_eq!(searches.len(), 1);
    assert_eq!(searches[0].prefixes.len(), 8, "{searches:?}");
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "--noise",
            "0",
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("noise_prefixes"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn cache_dir_lets_checks_run_offline() {
    let dir = temp_dir();
    let key = publisher_key().public_key().to_base64();
    let cache = dir.join("cache");
    let cache = cache.to_str().unwrap();
    {
        let publisher = start();
        let out = check(
            &[
                "--publisher",
                &publisher.base_url,
                "--key",
                &key,
                "--cache-dir",
                cache,
                "http://good.example/",
            ],
            None,
            &dir,
        );
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    }
    assert!(dir.join("cache/malware.snapshot").is_file());

    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let offline = format!("http://{addr}");
    let out = check(
        &[
            "--publisher",
            &offline,
            "--key",
            &key,
            "--list",
            "malware",
            "--cache-dir",
            cache,
            "http://good.example/",
            "http://evil.example/",
        ],
        None,
        &dir,
    );
    let stderr = text(&out.stderr);
    // The clean URL is answered from the cached filter; the hit cannot be
    // confirmed offline.
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let stdout = text(&out.stdout);
    assert!(
        stdout.starts_with("safe http://good.example/\nunverified http://evil.example/ "),
        "{stdout}"
    );
    assert!(
        stderr.contains("not updated, using the snapshot in use"),
        "{stderr}"
    );
}

/// Waits until the wall clock is past `unix` (Unix seconds).
fn wait_past(unix: u64) {
    while std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        <= unix
    {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Runs `check --cache-dir` against a publisher whose snapshot expires in a
/// second, then waits until it has expired; returns the publisher.
fn cache_a_snapshot_then_let_it_expire(dir: &std::path::Path, cache: &str) -> FakePublisher {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let publisher = start_valid_for(1);
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "--cache-dir",
            cache,
            "http://good.example/",
        ],
        None,
        dir,
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(dir.join("cache/malware.snapshot").is_file());
    wait_past(now + 1);
    publisher
}

/// A restart with `--cache-dir` after the snapshot
/// expired, with the publisher down, gives verdicts from the stale
/// snapshot, not exit 2 "loading snapshots".
#[test]
fn cache_dir_restart_after_expiry_with_the_publisher_down_gives_stale_verdicts() {
    let dir = temp_dir();
    let cache = dir.join("cache");
    let cache = cache.to_str().unwrap();
    drop(cache_a_snapshot_then_let_it_expire(&dir, cache));
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &format!("http://{addr}"),
            "--key",
            &key,
            "--list",
            "malware",
            "--cache-dir",
            cache,
            "--fail-closed",
            "http://good.example/",
            "http://evil.example/",
        ],
        None,
        &dir,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    // The hit cannot be confirmed offline: blocked under --fail-closed.
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(!stderr.contains("loading snapshots"), "{stderr}");
    assert!(
        stdout.starts_with("safe http://good.example/\nunverified http://evil.example/ "),
        "{stdout}"
    );
    assert!(
        stderr.contains("the snapshot of list malware has expired; verdicts may miss newer entries"),
        "{stderr}"
    );
    assert!(
        stderr.contains("2 urls: 0 unsafe, 1 safe, 0 invalid, 1 unverified"),
        "{stderr}"
    );
}

/// With the publisher answering 400 to snapshot requests
/// (its full-hash endpoint still works): the hit is confirmed online.
#[test]
fn cache_dir_restart_after_expiry_with_the_publisher_answering_400_confirms_hits() {
    let dir = temp_dir();
    let cache = dir.join("cache");
    let cache = cache.to_str().unwrap();
    let publisher = cache_a_snapshot_then_let_it_expire(&dir, cache);
    publisher.serve("malware", Served::Status(StatusCode::BAD_REQUEST));
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &key,
            "--list",
            "malware",
            "--cache-dir",
            cache,
            "http://good.example/",
            "http://evil.example/",
        ],
        None,
        &dir,
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "safe http://good.example/\nunsafe malware http://evil.example/\n"
    );
    assert!(stderr.contains("answered HTTP 400"), "{stderr}");
    assert!(
        stderr.contains("not updated, using the snapshot in use"),
        "{stderr}"
    );
    assert!(stderr.contains("has expired"), "{stderr}");
}

#[test]
fn mirror_takes_over_when_the_publisher_is_down() {
    let publisher = start();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &format!("http://{addr}"),
            "--mirror",
            &publisher.base_url,
            "--list",
            "malware",
            "--key",
            &key,
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "unsafe malware http://evil.example/\n");
}

/// Without `--list`, the lists are asked of the mirrors too when the
/// publisher is down (they were asked of the publisher only: exit 2).
#[test]
fn regression_mirror_takes_over_list_discovery_when_the_publisher_is_down() {
    let publisher = start();
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &format!("http://{addr}"),
            "--mirror",
            &publisher.base_url,
            "--key",
            &key,
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "unsafe malware http://evil.example/\n");
}

#[test]
fn untrusted_key_exits_2() {
    let publisher = start();
    let stranger = SigningKey::from_secret_bytes([8u8; 32]).public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &publisher.base_url,
            "--key",
            &stranger,
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown key"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn missing_key_explains_how_to_pass_one() {
    let out = check(&["http://evil.example/"], None, &temp_dir());
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--key"), "{stderr}");
}

#[test]
fn unreachable_publisher_exits_2() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let key = publisher_key().public_key().to_base64();
    let out = check(
        &[
            "--publisher",
            &format!("http://{addr}"),
            "--key",
            &key,
            "http://evil.example/",
        ],
        None,
        &temp_dir(),
    );
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
}

/// `--timeout` in the tests below, and how much longer than it the run may
/// take (process start, the agent's set-up) before the test fails.
const TIMEOUT: Duration = Duration::from_secs(1);
const SLACK: Duration = Duration::from_secs(4);

/// Runs `check --timeout 1` with `args`; fails the test if the run outlives
/// the timeout by more than [`SLACK`] (it used to wait out the agent's
/// 5-minute snapshot timeout).
fn check_with_timeout(args: &[&str]) -> (std::process::Output, Duration) {
    let timeout = TIMEOUT.as_secs().to_string();
    let mut all = vec!["--timeout", timeout.as_str()];
    all.extend_from_slice(args);
    let (out, elapsed) = run_with_deadline(env!("CARGO_BIN_EXE_check"), &all, &temp_dir(), TIMEOUT + SLACK);
    eprintln!("check {all:?} ran {elapsed:?}");
    assert!(elapsed >= TIMEOUT, "{elapsed:?}: no wait at all?");
    (out, elapsed)
}

#[test]
fn timeout_bounds_list_discovery_on_a_publisher_that_never_answers() {
    let silent = RawServer::repeat_blocking(Raw::Hang);
    let key = publisher_key().public_key().to_base64();
    let (out, _) = check_with_timeout(&[
        "--publisher",
        &silent.base_url,
        "--key",
        &key,
        "http://evil.example/",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("asking"), "{stderr}");
    assert!(stderr.contains("no answer within --timeout 1 s"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn timeout_bounds_the_snapshot_download_on_a_publisher_that_never_answers() {
    let silent = RawServer::repeat_blocking(Raw::Hang);
    let key = publisher_key().public_key().to_base64();
    let (out, _) = check_with_timeout(&[
        "--publisher",
        &silent.base_url,
        "--key",
        &key,
        "--list",
        "malware",
        "http://evil.example/",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("loading snapshots"), "{stderr}");
    assert!(stderr.contains("no answer within --timeout 1 s"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[test]
fn timeout_bounds_a_snapshot_download_that_stalls_after_its_headers() {
    // Headers promising a 1 MB snapshot, its first bytes, then nothing.
    let mut snapshot = b"BSNP".to_vec();
    snapshot.resize(1_000_000, 0);
    let stalling = RawServer::repeat_blocking(RawServer::stall(&snapshot, 4));
    let key = publisher_key().public_key().to_base64();
    let (out, _) = check_with_timeout(&[
        "--publisher",
        &stalling.base_url,
        "--key",
        &key,
        "--list",
        "malware",
        "http://evil.example/",
    ]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("loading snapshots"), "{stderr}");
    assert!(stderr.contains("no answer within --timeout 1 s"), "{stderr}");
}

#[test]
fn timeout_bounds_a_full_hash_request_that_never_answers() {
    let publisher = start();
    publisher.set_search_mode(SearchMode::Hang);
    let key = publisher_key().public_key().to_base64();
    let (out, _) = check_with_timeout(&[
        "--publisher",
        &publisher.base_url,
        "--key",
        &key,
        "http://evil.example/",
        "http://good.example/",
    ]);
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    // The hit cannot be confirmed in time: unverified (exit 2 when fail-open),
    // while the clean URL is answered from the filter.
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stdout.starts_with("unverified http://evil.example/ "), "{stdout}");
    assert!(stdout.contains("timed out"), "{stdout}");
    assert!(stdout.ends_with("safe http://good.example/\n"), "{stdout}");
}

/// A cached snapshot that fails verification is set aside at start; with
/// the publisher down, the run says so instead of only the network error.
#[test]
fn cache_dir_with_a_corrupt_snapshot_and_the_publisher_down_names_the_quarantined_file() {
    let dir = temp_dir();
    let cache = dir.join("cache");
    let publisher = start();
    let key = publisher_key().public_key().to_base64();
    let args = |base: &str| {
        vec![
            "--publisher".to_owned(),
            base.to_owned(),
            "--key".to_owned(),
            key.clone(),
            "--list".to_owned(),
            "malware".to_owned(),
            "--cache-dir".to_owned(),
            cache.to_str().unwrap().to_owned(),
            "http://good.example/".to_owned(),
        ]
    };
    let run = |base: &str| {
        let args = args(base);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        check(&args, None, &dir)
    };
    let out = run(&publisher.base_url);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    drop(publisher);
    let file = cache.join("malware.snapshot");
    let mut bytes = std::fs::read(&file).unwrap();
    *bytes.last_mut().unwrap() ^= 1;
    std::fs::write(&file, bytes).unwrap();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let out = run(&format!("http://{closed}"));
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("warning: list malware: cache file") && stderr.contains("quarantined"),
        "{stderr}"
    );
}
