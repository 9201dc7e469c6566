//! The `embed` example: build, start updates, check, shut down.

use blocksieve_tests::snapshot::publisher_key;

use crate::support::{run_with_env, start, temp_dir, text};

#[test]
fn embeds_the_agent_checks_and_shuts_down() {
    let publisher = start();
    let dir = temp_dir();
    let cache = dir.join("cache");
    let out = run_with_env(
        env!("CARGO_BIN_EXE_embed"),
        &[
            &publisher.base_url,
            &publisher_key().public_key().to_base64(),
            "malware",
            "http://evil.example/login",
            "https://good.example/",
            "mailto:x@y",
        ],
        None,
        &dir,
        &[("BLOCKSIEVE_CACHE_DIR", cache.to_str().unwrap())],
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 3, "{stdout}");
    assert_eq!(lines[0], "unsafe malware http://evil.example/login");
    assert_eq!(lines[1], "safe https://good.example/");
    assert!(lines[2].starts_with("invalid mailto:x@y "), "{stdout}");
    assert!(stderr.contains("2 lookups, 1 full-hash requests"), "{stderr}");
    assert!(cache.join("malware.snapshot").is_file());
}

#[test]
fn usage_error_without_arguments() {
    let out = run_with_env(env!("CARGO_BIN_EXE_embed"), &[], None, &temp_dir(), &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("usage: embed"));
}
