//! The command line as an operator runs it, its output piped (not a
//! terminal): exit codes, what goes to stdout and stderr.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use blocksieve_format::SigningKey;
use blocksieve_publisher::internal::storage;

const BIN: &str = env!("CARGO_BIN_EXE_blocksieve-publisher");

fn run(args: &[&str]) -> Output {
    Command::new(BIN)
        .args(args)
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LOG", "error")
        .output()
        .expect("run publisher")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A configuration in `dir`: list `good` over five URLs, `empty` over an
/// empty file (refused by the `min_entries` gate) and `missing` over a file
/// that does not exist (the build fails before it has a report).
fn write_config(dir: &Path, with_failures: bool) -> PathBuf {
    let feed: String = (1..=5).map(|i| format!("http://evil{i}.example/x\n")).collect();
    std::fs::write(dir.join("feed.txt"), feed).unwrap();
    std::fs::write(dir.join("empty.txt"), "").unwrap();
    let mut config = format!(
        "data_dir = {:?}\n[[lists]]\nname = \"good\"\nsources = [{{ path = \"feed.txt\", format = \"urls\" }}]\n",
        dir.join("data")
    );
    if with_failures {
        config.push_str(
            "[[lists]]\nname = \"empty\"\nsources = [{ path = \"empty.txt\", format = \"urls\" }]\n\
             [[lists]]\nname = \"missing\"\nsources = [{ path = \"nope.txt\", format = \"urls\" }]\n",
        );
    }
    let path = dir.join("config.toml");
    std::fs::write(&path, config).unwrap();
    path
}

#[test]
fn expressions_exits_1_and_counts_invalid_urls_on_stderr() {
    let all_valid = run(&["expressions", "http://a.b.c/1/2.html?param=1"]);
    assert_eq!(all_valid.status.code(), Some(0));
    assert!(text(&all_valid.stdout).contains("  a.b.c/1/2.html?param=1\t"));
    assert!(all_valid.stderr.is_empty(), "{}", text(&all_valid.stderr));

    let mixed = run(&["expressions", "http://", "http://a.b.c/1"]);
    assert_eq!(mixed.status.code(), Some(1));
    let stdout = text(&mixed.stdout);
    assert!(stdout.contains("invalid http://: "), "{stdout}");
    assert!(
        stdout.contains("http://a.b.c/1\n") && stdout.contains("  a.b.c/\t"),
        "{stdout}"
    );
    assert!(
        text(&mixed.stderr).contains("1 of 2 URLs"),
        "{}",
        text(&mixed.stderr)
    );

    let none_valid = run(&["expressions", "http://", "mailto:x@y.example"]);
    assert_eq!(none_valid.status.code(), Some(1));
    assert!(
        text(&none_valid.stderr).contains("2 of 2 URLs"),
        "{}",
        text(&none_valid.stderr)
    );

    let help = text(&run(&["expressions", "--help"]).stdout);
    assert!(help.contains("exits 1"), "{help}");
}

/// `expressions --feed-line FORMAT` explains lines as the build reads them:
/// what was cleaned, each entry with its expressions, or the rejection.
#[test]
fn expressions_explains_feed_lines_as_the_build_reads_them() {
    let out = run(&[
        "expressions",
        "--feed-line",
        "urls",
        "http://comment.example/p # seen 2020-01-01",
        "http://ulvis.net/IFHc\u{a0}",
        "# a comment",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for needle in [
        "line http://comment.example/p # seen 2020-01-01\n  cleaned: trailing comment removed\n  entry http://comment.example/p\n    comment.example/p\t",
        "  cleaned: Unicode white space trimmed\n  entry http://ulvis.net/IFHc\n    ulvis.net/IFHc\t",
        "line # a comment\n  skipped",
    ] {
        assert!(stdout.contains(needle), "{needle:?} not in\n{stdout}");
    }

    let out = run(&[
        "expressions",
        "--feed-line",
        "hosts",
        "0.0.0.0 s3.amazonaws.com evil.example",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("  rejected s3.amazonaws.com: host-wide entry on a public suffix"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  entry evil.example\n    evil.example/\t"),
        "{stdout}"
    );
    assert!(text(&out.stderr).contains("1 entries of 1 lines were rejected"));

    let bad = run(&["expressions", "--feed-line", "tsv", "x"]);
    assert_eq!(bad.status.code(), Some(2));
    assert!(
        text(&bad.stderr).contains("adblock-hosts"),
        "{}",
        text(&bad.stderr)
    );
}

/// No list got as far as a filter: no sizing advice, not an empty table.
#[test]
fn a_build_with_no_list_built_prints_no_advice() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\n[[lists]]\nname = \"missing\"\nsources = [{{ path = \"nope.txt\", format = \"urls\" }}]\n",
            dir.path().join("data")
        ),
    )
    .unwrap();
    let out = run(&["build", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("| list | published |"), "{stdout}");
    assert!(!stdout.contains("Sizing advice"), "{stdout}");
}

/// `build --out DIR` builds into DIR alone, as the alerts' runbook says
/// ("reproduces a build without touching the served data"): with a `store`
/// configured it wrote the store (publishing, or renewing the served
/// version's freshness). Here the store cannot be reached at all, so a
/// build that used it would fail.
#[test]
fn regression_build_out_builds_into_the_directory_only_and_not_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let text_config = std::fs::read_to_string(&config).unwrap();
    // A replica's configuration, with its builders' public key.
    let builders = SigningKey::from_secret_bytes([7; 32]).public_key().to_base64();
    let with_store = format!(
        "store = \"s3://unreachable/prefix\"\nrole = \"replica\"\npublic_key = \"{builders}\"\n\
         store_options = {{ endpoint = \"http://127.0.0.1:1\", allow_http = \"true\", region = \"us-east-1\", \
         access_key_id = \"k\", secret_access_key = \"s\" }}\n{text_config}"
    );
    std::fs::write(&config, with_store).unwrap();
    let out_dir = dir.path().join("out");
    let out = run(&[
        "build",
        "--config",
        config.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("| good | yes |"),
        "{}",
        text(&out.stdout)
    );
    let builds = std::fs::read_dir(out_dir.join("lists/good/builds")).unwrap();
    assert!(
        builds
            .flatten()
            .any(|e| e.path().extension().is_some_and(|x| x == "snapshot"))
    );
}

/// `serve` on an address in use fails naming how to give another, before
/// it touches the data directory (it made a signing key there first).
#[test]
fn regression_serve_on_an_address_in_use_fails_before_making_a_data_directory() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let out = run(&["serve", "--config", config.to_str().unwrap(), "--listen", &addr]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains(&format!("binding {addr}")) && stderr.contains("--listen"),
        "{stderr}"
    );
    assert!(!dir.path().join("data").exists());
}

/// A replica given no public key says where to give one (it failed with
/// the i/o error of the missing `public.key` alone).
#[test]
fn a_replica_without_a_public_key_is_told_how_to_give_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let text_config = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!(
            "store = \"s3://unreachable/prefix\"\nstore_options = {{ endpoint = \"http://127.0.0.1:1\", allow_http = \"true\" }}\n{text_config}"
        ),
    )
    .unwrap();
    let out = run(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--role",
        "replica",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("a replica needs the builders' public key") && stderr.contains("pass --key"),
        "{stderr}"
    );
}

/// A feed line that is not UTF-8 can be explained as it is: the byte is
/// escaped, as the publisher's build escapes it.
#[cfg(unix)]
#[test]
fn expressions_takes_arguments_that_are_not_utf8() {
    use std::os::unix::ffi::OsStrExt;
    let url = std::ffi::OsStr::from_bytes(b"http://evil.example/caf\xe9");
    let out = Command::new(BIN)
        .arg("expressions")
        .arg(url)
        .env("RUST_LOG", "error")
        .output()
        .expect("run publisher");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.starts_with("http://evil.example/caf%E9\n"), "{stdout}");
    assert!(stdout.contains("  evil.example/caf%E9\t"), "{stdout}");

    let invalid = Command::new(BIN)
        .arg("expressions")
        .arg(std::ffi::OsStr::from_bytes(b"http:///\xff"))
        .env("RUST_LOG", "error")
        .output()
        .expect("run publisher");
    assert_eq!(invalid.status.code(), Some(1));
    assert!(
        text(&invalid.stdout).starts_with("invalid http:///\\xff: "),
        "{}",
        text(&invalid.stdout)
    );
}

/// A second publisher on a data directory in use is refused, naming the
/// process that holds it; once that one is gone, the directory is free (no
/// stale lock).
#[test]
fn a_data_directory_in_use_is_refused_with_the_holder() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let cfg = blocksieve_publisher::Config::from_file(&config).unwrap();
    let holder = blocksieve_publisher::Publisher::open(cfg).unwrap();
    let refused = run(&["build", "--config", config.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1));
    let stderr = text(&refused.stderr);
    assert!(
        stderr.contains("data directory in use")
            && stderr.contains(&format!("(process {})", std::process::id())),
        "{stderr}"
    );
    // Nothing was published: no generation, no build objects.
    assert!(!dir.path().join("data/lists/good/latest").exists());
    assert!(
        !dir.path().join("data/lists/good/builds").exists()
            || std::fs::read_dir(dir.path().join("data/lists/good/builds"))
                .unwrap()
                .next()
                .is_none()
    );
    drop(holder);
    let built = run(&["build", "--config", config.to_str().unwrap()]);
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
}

#[test]
fn build_summary_has_a_row_for_every_list_with_the_reason_it_was_not_published() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), true);
    let out = run(&["build", "--config", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let stdout = text(&out.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| l.starts_with("| ")).collect();
    let row = |name: &str| {
        rows.iter()
            .position(|l| l.starts_with(&format!("| {name} |")))
            .unwrap_or_else(|| panic!("no row for {name}:\n{stdout}"))
    };
    assert!(rows[row("good")].starts_with("| good | yes | 5 |"), "{stdout}");
    let empty = row("empty");
    assert!(rows[empty].starts_with("| empty | no | 0 |"), "{stdout}");
    assert!(
        rows[empty + 1].starts_with("|   not published: refused: gate min_entries"),
        "{stdout}"
    );
    let missing = row("missing");
    assert!(rows[missing].starts_with("| missing | no | – |"), "{stdout}");
    assert_eq!(rows[missing].matches('|').count(), 18, "{stdout}");
    assert!(
        rows[missing + 1].starts_with("|   not published: source: ")
            && rows[missing + 1].contains("nope.txt"),
        "{stdout}"
    );
    // Built again from the same sources: the good list publishes nothing
    // new and says so.
    let again = run(&["build", "--config", config.to_str().unwrap()]);
    let stdout = text(&again.stdout);
    assert!(
        stdout.lines().any(|l| l.starts_with("| good | unchanged | 5 |")),
        "{stdout}"
    );
}

#[test]
fn inspect_verifies_with_a_base64_or_hex_public_key() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let secret = [7u8; 32];
    let key_path = dir.path().join("data/signing.key");
    storage::write_key_pair(&SigningKey::from_secret_bytes(secret), &key_path).unwrap();
    let built = run(&["build", "--config", config.to_str().unwrap()]);
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
    let snapshot = std::fs::read_dir(dir.path().join("data/lists/good/builds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "snapshot"))
        .unwrap();
    let snapshot = snapshot.to_str().unwrap();

    let base64 = std::fs::read_to_string(dir.path().join("data/public.key")).unwrap();
    let public = ed25519_dalek::SigningKey::from_bytes(&secret)
        .verifying_key()
        .to_bytes();
    let hex = hex::encode(public);
    for key in [base64.trim(), &hex, &hex.to_uppercase()] {
        let out = run(&["inspect", snapshot, "--key", key]);
        assert_eq!(out.status.code(), Some(0), "{key}: {}", text(&out.stderr));
        assert!(text(&out.stdout).contains("verification          ok"), "{key}");
    }

    // A well-formed key that did not sign it: the header, then FAILED.
    let other = hex::encode(
        ed25519_dalek::SigningKey::from_bytes(&[8; 32])
            .verifying_key()
            .to_bytes(),
    );
    let out = run(&["inspect", snapshot, "--key", &other]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("verification          FAILED"));

    // Neither form: an error naming both, before anything is printed.
    for bad in [&hex[..63], "not a key", &base64.trim()[..40]] {
        let out = run(&["inspect", snapshot, "--key", bad]);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        assert!(out.stdout.is_empty(), "{bad}: {}", text(&out.stdout));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("--key") && stderr.contains("base64") && stderr.contains("hex"),
            "{bad}: {stderr}"
        );
    }
}

#[test]
fn regression_inspect_without_a_key_fails_on_a_bit_flip_in_the_body_and_takes_a_key_file() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let built = run(&["build", "--config", config.to_str().unwrap()]);
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
    let snapshot = std::fs::read_dir(dir.path().join("data/lists/good/builds"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "snapshot"))
        .unwrap();
    let path = snapshot.to_str().unwrap();

    let out = run(&["inspect", path]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("integrity             ok"), "{stdout}");
    assert!(stdout.contains("signature not checked"), "{stdout}");

    // The key file the publisher wrote, as `check --key` takes it.
    let key_file = dir.path().join("data/public.key");
    let out = run(&["inspect", path, "--key", key_file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains("verification          ok"));

    // One flipped bit in the last byte of the body: without a key the
    // header still prints, then the integrity check fails.
    let mut bytes = std::fs::read(&snapshot).unwrap();
    *bytes.last_mut().unwrap() ^= 0x01;
    let flipped = dir.path().join("flipped.snapshot");
    std::fs::write(&flipped, &bytes).unwrap();
    let out = run(&["inspect", flipped.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stdout));
    let stdout = text(&out.stdout);
    assert!(stdout.contains("list_name             good"), "{stdout}");
    assert!(stdout.contains("integrity             FAILED"), "{stdout}");
    assert!(stdout.contains("SHA-256"), "{stdout}");
    let out = run(&[
        "inspect",
        flipped.to_str().unwrap(),
        "--key",
        key_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stdout).contains("verification          FAILED"));

    // A key file that holds no key: an error naming the file.
    let junk = dir.path().join("junk.key");
    std::fs::write(&junk, "not a key\n").unwrap();
    let out = run(&["inspect", path, "--key", junk.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("junk.key"), "{}", text(&out.stderr));
}

#[test]
fn keygen_writes_a_key_pair_under_a_bare_file_name() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(BIN)
        .args(["keygen", "--out", "k1"])
        .current_dir(dir.path())
        .env("RUST_BACKTRACE", "0")
        .env("RUST_LOG", "error")
        .output()
        .expect("run publisher");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let secret = std::fs::read_to_string(dir.path().join("k1")).unwrap();
    let public = std::fs::read_to_string(dir.path().join("k1.pub")).unwrap();
    let key = SigningKey::from_base64(secret.trim()).unwrap();
    assert_eq!(public.trim(), key.public_key().to_base64());
    assert!(text(&out.stdout).contains(public.trim()), "{}", text(&out.stdout));
    // Never over an existing key.
    let again = Command::new(BIN)
        .args(["keygen", "--out", "k1"])
        .current_dir(dir.path())
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("run publisher");
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("k1 exists: keygen never overwrites a key"),
        "{}",
        text(&again.stderr)
    );
    assert_eq!(std::fs::read_to_string(dir.path().join("k1")).unwrap(), secret);
    // Nor over a public key alone (a replica's data directory holds one).
    std::fs::write(dir.path().join("k2.pub"), "builders' key\n").unwrap();
    let over_public = Command::new(BIN)
        .args(["keygen", "--out", "k2"])
        .current_dir(dir.path())
        .output()
        .expect("run publisher");
    assert_eq!(over_public.status.code(), Some(1));
    assert!(
        text(&over_public.stderr).contains("k2.pub exists"),
        "{}",
        text(&over_public.stderr)
    );
    assert!(!dir.path().join("k2").exists());
    // Nor under a public key file's name, which `serve` refuses as a
    // signing key.
    for name in ["next.pub", "public.key"] {
        let named_public = Command::new(BIN)
            .args(["keygen", "--out", name])
            .current_dir(dir.path())
            .output()
            .expect("run publisher");
        assert_eq!(named_public.status.code(), Some(1));
        assert!(
            text(&named_public.stderr).contains("named as a public key file"),
            "{}",
            text(&named_public.stderr)
        );
        assert!(!dir.path().join(name).exists());
    }
    // The key id, as errors name keys (`signed by unknown key …`).
    let id = hex::encode(key.public_key().id());
    assert!(
        text(&out.stderr).contains(&format!("key id {id}")),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn errors_are_one_line_without_a_backtrace_even_with_rust_backtrace_set() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing.snapshot");
    let out = Command::new(BIN)
        .args(["inspect", missing.to_str().unwrap()])
        .env("RUST_BACKTRACE", "1")
        .env("RUST_LOG", "error")
        .output()
        .expect("run publisher");
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.starts_with("Error: "), "{stderr}");
    assert!(stderr.contains("missing.snapshot"), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(!stderr.to_lowercase().contains("backtrace"), "{stderr}");
}

#[test]
fn serve_role_is_checked_at_start_and_a_replica_needs_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let config = config.to_str().unwrap();
    let unknown = run(&["serve", "--config", config, "--role", "leader"]);
    assert_eq!(unknown.status.code(), Some(2));
    let stderr = text(&unknown.stderr);
    assert!(
        stderr.contains("unknown role \"leader\", expected all, builder or replica"),
        "{stderr}"
    );

    let replica = run(&[
        "serve",
        "--config",
        config,
        "--role",
        "replica",
        "--listen",
        "127.0.0.1:0",
    ]);
    assert_eq!(replica.status.code(), Some(1));
    let stderr = text(&replica.stderr);
    assert!(stderr.contains("role"), "{stderr}");
    assert!(stderr.contains("set store = \"s3://bucket/prefix\""), "{stderr}");
    // It refused before touching the data directory.
    assert!(!dir.path().join("data").exists());
}

/// The sample configuration the package installs in /etc/blocksieve.
fn sample_config() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/publisher.toml")
}

#[test]
fn check_config_passes_the_shipped_sample_and_summarizes_it() {
    let sample = sample_config();
    let out = run(&["check-config", sample.to_str().unwrap()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    for want in [
        "listen        127.0.0.1:8080\n",
        "data_dir      /var/lib/blocksieve\n",
        "role          all\n",
        "list phishing\n  source      builtin (urls)\n",
        "  filter      binary_fuse8, 32-bit keys\n",
        "  schedule    0 */30 * * * *: next ",
        "publisher.toml is valid (",
    ] {
        assert!(stdout.contains(want), "{want:?} not in\n{stdout}");
    }
    // Only warnings: the key the first start creates, and the data
    // directory when this user may not create it.
    for line in stderr.lines() {
        assert!(
            line.starts_with("warning: signing_key ") || line.starts_with("warning: data_dir "),
            "{stderr}"
        );
    }
}

#[test]
fn check_config_exits_1_naming_the_field_for_each_kind_of_error() {
    let dir = tempfile::tempdir().unwrap();
    let list = "[[lists]]\nname = \"p\"\nsources = [{ path = \"u.txt\", format = \"urls\" }]\n";
    let cases = [
        ("unreadable file", None, "configuration: "),
        ("not TOML", Some("listen = \n".to_owned()), "invalid string"),
        (
            "no list",
            Some("listen = \"127.0.0.1:1\"\n".to_owned()),
            "no [[lists]] configured",
        ),
        (
            "unknown field",
            Some(format!("ttl_s = 5\n{list}")),
            "unknown field `ttl_s`",
        ),
        (
            "a value out of range",
            Some(format!("{list}key_bits = 48\n")),
            "lists.p.key_bits: 48 is not 32 or 64",
        ),
        (
            "a bad schedule",
            Some(format!("schedule = \"*/30 * * * *\"\n{list}")),
            "schedule: \"*/30 * * * *\" is not a valid 6-field cron",
        ),
        (
            "a bad filter",
            Some(format!("{list}filter = \"cuckoo\"\n")),
            "unknown filter \"cuckoo\"",
        ),
        (
            "a source with two places",
            Some(list.replace(
                "path = \"u.txt\"",
                "path = \"u.txt\", url = \"https://a.example/\"",
            )),
            "lists.p.sources[0]: needs exactly one of",
        ),
        (
            "a replica without a store",
            Some(format!("role = \"replica\"\n{list}")),
            "configuration: role: a replica follows an object store",
        ),
        (
            "a required field left out",
            Some(list.replace("name = \"p\"\n", "")),
            "missing field `name`",
        ),
    ];
    for (i, (case, content, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("{i}.toml"));
        if let Some(content) = content {
            std::fs::write(&path, content).unwrap();
        }
        let out = run(&["check-config", path.to_str().unwrap()]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{case}: {stderr}");
        assert!(out.stdout.is_empty(), "{case}: {}", text(&out.stdout));
        assert!(stderr.starts_with("Error: configuration: "), "{case}: {stderr}");
        assert!(stderr.contains(want), "{case}: {want:?} not in {stderr}");
    }
}

#[test]
fn check_config_warns_about_what_fails_at_run_time_and_still_exits_0() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("feed.txt"), "http://evil.example/x\n").unwrap();
    std::fs::write(dir.path().join("data"), "a file, not a directory").unwrap();
    let config = dir.path().join("config.toml");
    std::fs::write(
        &config,
        format!(
            "data_dir = {:?}\n[[lists]]\nname = \"p\"\nschedule = \"0 0 3 * * *\"\n\
             sources = [{{ path = \"feed.txt\", format = \"urls\" }}, {{ path = \"gone.txt\", format = \"hosts\" }},\n\
             {{ url = \"https://feeds.example/u.txt\", format = \"urls\" }}]\n\
             allow = [{{ path = \"allow.txt\", format = \"domains\" }}]\n",
            dir.path().join("data")
        ),
    )
    .unwrap();
    let out = run(&["check-config", config.to_str().unwrap()]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("  schedule    0 0 3 * * *: next "), "{stdout}");
    assert!(stdout.contains("T03:00:00Z, then "), "{stdout}");
    assert!(stdout.contains("config.toml is valid (5 warnings)\n"), "{stdout}");
    let warnings: Vec<&str> = stderr.lines().collect();
    assert_eq!(warnings.len(), 5, "{stderr}");
    assert!(
        warnings[0].starts_with("warning: list p: source ")
            && warnings[0].contains("gone.txt: does not exist"),
        "{stderr}"
    );
    assert!(
        warnings[1].starts_with("warning: list p: allow source ")
            && warnings[1].contains("allow.txt: does not exist"),
        "{stderr}"
    );
    assert!(warnings[2].starts_with("warning: data_dir ") && warnings[2].ends_with("is not a directory"));
    // The key would go in the data directory, which is a file.
    assert!(warnings[3].starts_with("warning: signing_key "), "{stderr}");
    // Built once a day, the list is stale most of the day at the default
    // snapshot_ttl_s.
    assert!(
        warnings[4].starts_with("warning: list p: schedule \"0 0 3 * * *\" builds 86400 s apart"),
        "{stderr}"
    );
    // Nothing was fetched, created or written.
    let mut names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    assert_eq!(names, ["config.toml", "data", "feed.txt"]);
}

/// `check-config --role --key` checks what `serve --role --key` runs: a
/// replica's summary names the key it is given and the role it gets on the
/// command line, and a role the file cannot run is refused as `serve`
/// refuses it. Without them, a replica whose role comes from the command
/// line was checked as a builder (its `signing_key` shown, not its key).
#[test]
fn check_config_takes_the_role_and_key_serve_is_given() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let signing = SigningKey::from_secret_bytes([7; 32]);
    let key = signing.public_key();
    let with_store = dir.path().join("store.toml");
    std::fs::write(
        &with_store,
        format!(
            "store = \"s3://bucket/prefix\"\n{}",
            std::fs::read_to_string(&config).unwrap()
        ),
    )
    .unwrap();
    let out = run(&[
        "check-config",
        with_store.to_str().unwrap(),
        "--role",
        "replica",
        "--key",
        &key.to_base64(),
    ]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stdout}{stderr}");
    assert!(stdout.contains("role          replica\n"), "{stdout}");
    assert!(stdout.contains(&hex::encode(key.id())), "{stdout}");
    assert!(!stdout.contains("signing_key"), "{stdout}");

    // A replica needs a store: refused here as `serve` refuses it.
    let out = run(&["check-config", config.to_str().unwrap(), "--role", "replica"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("set store = \"s3://bucket/prefix\""), "{stderr}");
    // A key that is none is a usage error naming it.
    let out = run(&["check-config", config.to_str().unwrap(), "--key", "nonsense"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("--key"), "{}", text(&out.stderr));
}

#[test]
fn check_config_usage_errors_exit_2() {
    for args in [
        &["check-config"][..],
        &["check-config", "a.toml", "b.toml"],
        &["check-config", "--bogus", "a.toml"],
    ] {
        let out = run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("Usage: blocksieve-publisher check-config"),
            "{args:?}"
        );
    }
}

/// `serve --key` on a builder (meant for a replica) names both keys and the
/// file, and says which role takes another key; it said only
/// `public_key: is not the signing key's public key`, naming a field the
/// operator never set.
#[test]
fn regression_a_builder_given_another_key_names_both_keys_and_the_role_that_takes_one() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let other = SigningKey::from_secret_bytes([9; 32]).public_key().to_base64();
    let out = run(&[
        "serve",
        "--config",
        config.to_str().unwrap(),
        "--listen",
        "127.0.0.1:0",
        "--key",
        &other,
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("--key"), "{stderr}");
    assert!(
        stderr.contains("signing.key") && stderr.contains("--role replica"),
        "{stderr}"
    );
}

/// A builder given a public key before it has a signing key is refused
/// before anything is written: a key not created yet is not the given one,
/// wherever its path comes from (`<data_dir>/signing.key`, or
/// `BLOCKSIEVE_SIGNING_KEY`). It created a new key pair there, then
/// refused; the next start without `--key` built under that unwanted key.
#[test]
fn regression_a_builder_given_a_key_before_it_has_one_refuses_creating_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let given = SigningKey::from_secret_bytes([9; 32]).public_key().to_base64();
    let serve = |key_env: Option<&Path>| {
        let mut command = Command::new(BIN);
        command
            .args(["serve", "--config", config.to_str().unwrap()])
            .args(["--listen", "127.0.0.1:0", "--key", &given])
            .env("RUST_BACKTRACE", "0")
            .env_remove("BLOCKSIEVE_SIGNING_KEY");
        if let Some(path) = key_env {
            command.env("BLOCKSIEVE_SIGNING_KEY", path);
        }
        let out = command.output().unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        text(&out.stderr)
    };
    let stderr = serve(None);
    assert!(
        stderr.contains("data/signing.key")
            && stderr.contains("does not exist yet")
            && stderr.contains("--role replica"),
        "{stderr}"
    );
    assert!(!dir.path().join("data").exists(), "{stderr}");

    let env_key = dir.path().join("secrets/builder.key");
    let stderr = serve(Some(&env_key));
    assert!(
        stderr.contains("secrets/builder.key (from BLOCKSIEVE_SIGNING_KEY)")
            && stderr.contains("does not exist yet"),
        "{stderr}"
    );
    assert!(!dir.path().join("secrets").exists() && !dir.path().join("data").exists());
    // Another key there: refused as before, and still nothing created.
    storage::write_key_pair(&SigningKey::from_secret_bytes([3; 32]), &env_key).unwrap();
    let stderr = serve(Some(&env_key));
    assert!(
        stderr.contains("is not the public key of the signing key"),
        "{stderr}"
    );
    assert!(!dir.path().join("data").exists(), "{stderr}");
}

/// A builder's `public_key` that is its signing key's, the key named by
/// `BLOCKSIEVE_SIGNING_KEY` or by `signing_key`, is taken, and no other
/// key is created in the data directory.
#[test]
fn a_builder_given_its_own_key_from_the_environment_or_the_file_builds() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let key = SigningKey::from_secret_bytes([9; 32]);
    let key_file = dir.path().join("secrets/builder.key");
    storage::write_key_pair(&key, &key_file).unwrap();
    let (base, public_key) = (
        std::fs::read_to_string(&config).unwrap(),
        key.public_key().to_base64(),
    );
    for from_env in [true, false] {
        let line = if from_env {
            String::new()
        } else {
            format!("signing_key = {key_file:?}\n")
        };
        std::fs::write(&config, format!("public_key = {public_key:?}\n{line}{base}")).unwrap();
        let out = dir.path().join(if from_env { "env" } else { "file" });
        let mut command = Command::new(BIN);
        command
            .args([
                "build",
                "--config",
                config.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ])
            .env_remove("BLOCKSIEVE_SIGNING_KEY");
        if from_env {
            command.env("BLOCKSIEVE_SIGNING_KEY", &key_file);
        }
        let built = command.output().unwrap();
        assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
        assert!(out.join("lists/good").is_dir() && !out.join("signing.key").exists());
    }
}

/// A signing key others can read (copied with the default mode 0644)
/// lets anyone who reads it sign snapshots every agent trusts: the build
/// goes on, and says so with the fix. The key the publisher creates (0600)
/// is not warned about.
#[cfg(unix)]
#[test]
fn a_signing_key_readable_by_others_is_warned_about_at_start() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let build = || {
        Command::new(BIN)
            .args(["build", "--config", config.to_str().unwrap()])
            .env("RUST_BACKTRACE", "0")
            .env_remove("RUST_LOG")
            .env_remove("BLOCKSIEVE_SIGNING_KEY")
            .output()
            .unwrap()
    };
    let created = build();
    let stderr = text(&created.stderr);
    assert_eq!(created.status.code(), Some(0), "{stderr}");
    assert!(!stderr.contains("chmod 600"), "{stderr}");
    let key = dir.path().join("data/signing.key");
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let exposed = build();
    let stderr = text(&exposed.stderr);
    assert_eq!(exposed.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("mode 0644 gives other users than its owner access to the signing key")
            && stderr.contains(&format!("chmod 600 {}", key.display())),
        "{stderr}"
    );
}

/// During a key rotation (`previous_public_keys` set) a builder whose
/// signing key does not exist (a mistyped `signing_key`, or
/// `BLOCKSIEVE_SIGNING_KEY` naming the wrong file) refuses to start and
/// creates nothing. It created a key pair there and published every list
/// again under that key, which no agent trusts; `check-config` said only
/// that the first start would create it.
#[test]
fn regression_a_builder_rotating_keys_without_its_new_key_refuses_creating_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let old = SigningKey::from_secret_bytes([4; 32]).public_key().to_base64();
    let base = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("signing_key = \"nxet.key\"\nprevious_public_keys = [{old:?}]\n{base}"),
    )
    .unwrap();
    let built = Command::new(BIN)
        .args(["build", "--config", config.to_str().unwrap()])
        .current_dir(dir.path())
        .env("RUST_BACKTRACE", "0")
        .env_remove("BLOCKSIEVE_SIGNING_KEY")
        .output()
        .unwrap();
    let stderr = text(&built.stderr);
    assert_eq!(built.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("nxet.key does not exist, and previous_public_keys is set"),
        "{stderr}"
    );
    assert!(
        !dir.path().join("nxet.key").exists() && !dir.path().join("data").exists(),
        "{stderr}"
    );
    let checked = Command::new(BIN)
        .args(["check-config", config.to_str().unwrap()])
        .current_dir(dir.path())
        .env_remove("BLOCKSIEVE_SIGNING_KEY")
        .output()
        .unwrap();
    let stderr = text(&checked.stderr);
    assert_eq!(checked.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("previous_public_keys is set") && stderr.contains("`serve` will refuse to start"),
        "{stderr}"
    );
    // The key given: it builds.
    storage::write_key_pair(
        &SigningKey::from_secret_bytes([5; 32]),
        &dir.path().join("nxet.key"),
    )
    .unwrap();
    let built = Command::new(BIN)
        .args(["build", "--config", config.to_str().unwrap()])
        .current_dir(dir.path())
        .env_remove("BLOCKSIEVE_SIGNING_KEY")
        .output()
        .unwrap();
    assert_eq!(built.status.code(), Some(0), "{}", text(&built.stderr));
}

/// `build --out DIR` during a key rotation (`previous_public_keys` set),
/// as the alerts' runbook says to reproduce a build: with the default
/// `signing_key` (in the data directory, which `--out` replaces), and
/// with a replica's configuration (its builders' public keys are not the
/// directory's), the build signs with a key of DIR's own, as it does
/// outside a rotation. It was refused (`… does not exist, and
/// previous_public_keys is set …`): the refusal guards the served key, and
/// `--out` serves nothing.
#[test]
fn regression_build_out_during_a_key_rotation_builds_with_a_key_of_its_own() {
    let dir = tempfile::tempdir().unwrap();
    let config = write_config(dir.path(), false);
    let base = std::fs::read_to_string(&config).unwrap();
    let (old, next) = (
        SigningKey::from_secret_bytes([4; 32]).public_key().to_base64(),
        SigningKey::from_secret_bytes([5; 32]).public_key().to_base64(),
    );
    let replica = format!(
        "store = \"s3://unreachable/prefix\"\nrole = \"replica\"\npublic_key = {next:?}\n\
         store_options = {{ endpoint = \"http://127.0.0.1:1\", allow_http = \"true\", region = \"us-east-1\", \
         access_key_id = \"k\", secret_access_key = \"s\" }}\n"
    );
    for (name, head) in [("all", String::new()), ("replica", replica)] {
        std::fs::write(&config, format!("previous_public_keys = [{old:?}]\n{head}{base}")).unwrap();
        let out_dir = dir.path().join(name);
        let built = Command::new(BIN)
            .args([
                "build",
                "--config",
                config.to_str().unwrap(),
                "--out",
                out_dir.to_str().unwrap(),
            ])
            .env("RUST_BACKTRACE", "0")
            .env_remove("BLOCKSIEVE_SIGNING_KEY")
            .output()
            .unwrap();
        assert_eq!(
            built.status.code(),
            Some(0),
            "{name}: {}{}",
            text(&built.stdout),
            text(&built.stderr)
        );
        assert!(out_dir.join("signing.key").is_file(), "{name}");
        assert!(out_dir.join("lists/good/builds").is_dir(), "{name}");
    }
}
