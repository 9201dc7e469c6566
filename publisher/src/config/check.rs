//! What `blocksieve-publisher check-config` prints about a valid
//! configuration: a short summary of what `serve` would run, and warnings
//! about what would fail at run time although the file is valid (a source
//! file that is missing, a data directory that cannot be written).
//!
//! Nothing here writes but the probe of the data directory (a file created
//! and removed at once), and nothing reaches the network: an HTTP source
//! or an object store is named, not fetched.

use std::path::Path;

use super::{FilterChoice, Role, Settings, SourceConfig, schedule};

/// The summary of `settings`: listen address, data directory, store, role,
/// signing key, then each list with its sources, allowlists, filter choice,
/// schedule and that schedule's next two firings after `now` (Unix
/// seconds), in UTC.
pub fn summary(settings: &Settings, now: u64) -> String {
    let mut out = String::new();
    let mut line = |text: String| {
        out.push_str(&text);
        out.push('\n');
    };
    line(format!("listen        {}", settings.listen));
    line(format!("data_dir      {}", settings.data_dir.display()));
    line(format!(
        "store         {}",
        settings
            .store
            .as_deref()
            .unwrap_or("the data directory (no `store`)")
    ));
    line(format!("role          {}", settings.role.name()));
    if settings.role.builds() {
        line(format!("signing_key   {}", settings.signing_key_path().display()));
    } else {
        line(format!(
            "public_key    {}",
            if let Some(key) = &settings.public_key {
                format!(
                    "key id {} (`public_key`; `serve --key` overrides it)",
                    hex::encode(key.id())
                )
            } else {
                public_key_file(settings).display().to_string()
            }
        ));
    }
    if !settings.previous_public_keys.is_empty() {
        let ids: Vec<String> = (settings.previous_public_keys.iter())
            .map(|k| hex::encode(k.id()))
            .collect();
        line(format!(
            "previous keys {} (key ids; generations they signed are still taken)",
            ids.join(", ")
        ));
    }
    line(format!("lists         {}", settings.lists.len()));
    for (i, list) in settings.lists.iter().enumerate() {
        line(format!("list {}", list.name));
        let sources = list.sources.iter().map(|s| ("source", s));
        for (kind, source) in sources.chain(list.allow.iter().map(|s| ("allow", s))) {
            // How long a feed may hold the build: its timeout and retries.
            let fetch = if source.url.is_some() {
                format!(
                    "; timeout {} s, {} retr{}",
                    source.timeout().as_secs(),
                    source.retries(),
                    if source.retries() == 1 { "y" } else { "ies" }
                )
            } else {
                String::new()
            };
            // How a CSV is read: its column and separator.
            let reading = if source.format == crate::SourceFormat::Csv {
                let delimiter = char::from(source.delimiter_byte().unwrap_or(b','));
                format!(
                    "; column {:?}, delimiter {:?}",
                    source.column.as_deref().unwrap_or("url"),
                    delimiter
                )
            } else {
                String::new()
            };
            line(format!(
                "  {kind:<12}{} ({}{reading}{fetch})",
                source.public_label(),
                source.format.name()
            ));
            // Its request headers by name, and where each value comes
            // from: never the value.
            if !source.headers.is_empty() {
                let headers: Vec<String> = (source.headers.iter())
                    .map(|(name, value)| match value.env_var() {
                        Some(var) => format!("{name} (from ${var})"),
                        None => name.clone(),
                    })
                    .collect();
                line(format!("  headers     {}", headers.join(", ")));
            }
        }
        let filter = match list.filter {
            FilterChoice::Kind(kind) => kind.name().to_owned(),
            FilterChoice::Auto(_) => format!(
                "auto (at most {} full-hash requests per 1,000 checks)",
                list.target_full_hash_requests_per_1000
            ),
        };
        line(format!("  filter      {filter}, {}-bit keys", list.key_bits));
        let cron = settings.schedule_of(i);
        let first = schedule::next_firing(cron, now);
        let second = first.and_then(|t| schedule::next_firing(cron, t));
        let firings: Vec<String> = [first, second].into_iter().flatten().map(utc).collect();
        let next = if firings.is_empty() {
            "never fires again".to_owned()
        } else {
            format!("next {}", firings.join(", then "))
        };
        line(format!("  schedule    {cron}: {next}"));
    }
    out
}

/// Unix seconds as `2027-01-15T10:30:00Z`.
fn utc(seconds: u64) -> String {
    i64::try_from(seconds)
        .ok()
        .and_then(|s| chrono::DateTime::from_timestamp(s, 0))
        .map_or_else(
            || format!("{seconds} (Unix seconds)"),
            |t| t.format("%Y-%m-%dT%H:%M:%SZ").to_string(),
        )
}

/// Where a replica without `public_key` reads its public key.
fn public_key_file(settings: &Settings) -> std::path::PathBuf {
    crate::storage::public_key_path(&settings.signing_key_path())
}

/// What would fail, or be done for the operator, when `serve` starts with
/// `settings`, although the configuration is valid: a source file that does
/// not exist or cannot be read, a signing key that does not exist yet (it
/// is created at first start) or cannot be read, a replica's missing
/// public key file, a public key given to a role that signs that is not its
/// signing key's (`serve` refuses it), a data directory that cannot be
/// created or written.
pub fn warnings(settings: &Settings) -> Vec<String> {
    let mut out = Vec::new();
    for list in &settings.lists {
        let sources = list.sources.iter().map(|s| ("source", s));
        for (kind, source) in sources.chain(list.allow.iter().map(|s| ("allow source", s))) {
            if let Some(problem) = source_problem(source, kind == "allow source") {
                out.push(format!(
                    "list {}: {kind} {}: {problem}",
                    list.name,
                    source.public_label()
                ));
            }
            // An option of another format does nothing: said, not refused
            // (configurations that set one needlessly keep starting).
            for (option, set, format) in [
                ("column", source.column.is_some(), crate::SourceFormat::Csv),
                ("json_key", source.json_key.is_some(), crate::SourceFormat::Json),
            ] {
                if set && source.format != format {
                    out.push(format!(
                        "list {}: {kind} {}: `{option}` applies to `format = \"{}\"` sources only; this {} source ignores it",
                        list.name,
                        source.public_label(),
                        format.name(),
                        source.format.name()
                    ));
                }
            }
        }
    }
    // Valid, and each agent may follow a few of them; but one full-hash
    // answer names at most this many lists, and an agent follows no more:
    // none can follow every list (the `check` example's default).
    // The WASM and C agents (the engine's session) follow fewer.
    let most = blocksieve_format::api::MAX_ANSWER_LISTS;
    let session_most = blocksieve_format::api::MAX_SESSION_LISTS;
    if settings.lists.len() > most {
        out.push(format!(
            "lists: {} lists; an agent follows at most {most}, so no agent can follow every list",
            settings.lists.len()
        ));
    } else if settings.lists.len() > session_most {
        out.push(format!(
            "lists: {} lists; the WASM and C agents follow at most {session_most} (the Rust and \
             Python agents {most}), so they cannot follow every list",
            settings.lists.len()
        ));
    }
    if let Some(problem) = data_dir_problem(&settings.data_dir) {
        out.push(format!("data_dir {}: {problem}", settings.data_dir.display()));
    }
    let key = settings.signing_key_path();
    let from = settings.signing_key_origin();
    if settings.role == Role::Replica {
        let file = public_key_file(settings);
        if settings.public_key.is_none() && !file.is_file() {
            out.push(format!(
                "public key {}: does not exist; a replica without `public_key` reads it there, so \
                 `serve` will fail: copy the builder's public.key there or set `public_key`",
                file.display()
            ));
        }
    } else {
        // A public key given to a role that signs (`public_key`, `--key`)
        // must be its signing key's: `serve` refuses another before it
        // creates anything, a signing key not created yet included.
        let refused = (settings.public_key.as_ref())
            .and_then(|given| {
                let own = crate::storage::load_signing_key(&key).ok()?;
                crate::Publisher::check_given_key(settings, given, own.as_ref()).err()
            })
            .map(|e| match e {
                crate::Error::Config { field, reason } => {
                    format!("{field}: {reason}; `serve` will refuse to start")
                }
                e => e.to_string(),
            });
        match std::fs::metadata(&key) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound && refused.is_some() => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let refused = crate::storage::load_signing_key(&key)
                    .and_then(|_| crate::Publisher::check_key_may_be_created(settings));
                match refused {
                    // Named as a public key file, or missing during a key
                    // rotation: refused, not created (the reason names
                    // the path).
                    Err(crate::Error::Config { reason, .. }) => {
                        out.push(format!(
                            "signing_key{from}: {reason}; `serve` will refuse to start"
                        ));
                    }
                    _ => out.push(format!(
                        "signing_key {}{from}: does not exist yet; the first `serve` or `build` creates it \
                         (mode 0600, with its public key beside it), or create it now with `keygen --out`",
                        key.display()
                    )),
                }
            }
            Err(e) => out.push(format!("signing_key {}{from}: {e}", key.display())),
            Ok(m) if !m.is_file() => {
                out.push(format!("signing_key {}{from}: is not a file", key.display()));
            }
            Ok(_) => {
                if let Err(e) = std::fs::File::open(&key) {
                    out.push(format!(
                        "signing_key {}{from}: cannot be read: {e}",
                        key.display()
                    ));
                } else if let Err(e) = crate::storage::load_signing_key(&key) {
                    // Read as `serve` reads it: a file that holds no key
                    // (empty, hex, cut short) makes `serve` refuse to start.
                    // (A refusal of the configuration names the path.)
                    let warning = match e {
                        crate::Error::Config { reason, .. } => format!("signing_key{from}: {reason}"),
                        crate::Error::SigningKey { reason, .. } => {
                            format!("signing_key {}{from}: {reason}", key.display())
                        }
                        e => format!("signing_key {}{from}: {e}", key.display()),
                    };
                    out.push(format!("{warning}; `serve` will refuse to start"));
                } else if let Some(exposure) = crate::storage::signing_key_exposure(&key) {
                    out.push(format!("signing_key {}{from}: {exposure}", key.display()));
                }
            }
        }
        out.extend(refused);
    }
    out
}

/// Warnings about each list's schedule as of `now` (Unix seconds): one
/// that never fires again (the list is built at start only, and goes
/// stale), one with two builds over the next eight days further apart
/// than `snapshot_ttl_s` (agents then hold an expired list between them: a
/// build renews the served version's freshness, and nothing else does),
/// and one with two builds less than a minute apart (each build fetches
/// every source).
pub fn schedule_warnings(settings: &Settings, now: u64) -> Vec<String> {
    let ttl = settings.snapshot_ttl.as_secs();
    let mut out = Vec::new();
    for (i, list) in settings.lists.iter().enumerate() {
        let cron = settings.schedule_of(i);
        let Some(first) = schedule::next_firing(cron, now) else {
            out.push(format!(
                "list {}: schedule {cron:?} never fires again: the list is built at start only, and \
                 agents see it stale snapshot_ttl_s ({ttl} s) after",
                list.name
            ));
            continue;
        };
        // The longest and shortest gaps between builds over the next eight
        // days (weekday schedules leave weekends; the next two firings
        // alone would depend on when this runs).
        let (mut longest, mut shortest, mut at) = (0u64, u64::MAX, first);
        for _ in 0..2_000 {
            let Some(next) = schedule::next_firing(cron, at) else {
                break;
            };
            longest = longest.max(next - at);
            shortest = shortest.min(next - at);
            at = next;
            if at > now.saturating_add(8 * 86_400) {
                break;
            }
        }
        if shortest == u64::MAX {
            continue;
        }
        let gap = longest;
        if gap > ttl {
            out.push(format!(
                "list {}: schedule {cron:?} builds {gap} s apart, longer than snapshot_ttl_s ({ttl} s): \
                 agents see the list stale for up to {} s before each build; build more often or raise \
                 snapshot_ttl_s",
                list.name,
                gap - ttl
            ));
        }
        if shortest < 60 {
            out.push(format!(
                "list {}: schedule {cron:?} builds {shortest} s apart: each build fetches every source (6-field \
                 cron: seconds come first; \"0 */30 * * * *\" is every 30 minutes)",
                list.name
            ));
        }
    }
    out
}

/// Why `source`, a local file, cannot be read now; `None` for a readable
/// file, an HTTP source (fetched at build time) or the built-in feed. What
/// a missing file does to the build depends on whether it is an `allow`
/// source: a block source fails the build, an allow source is left out.
fn source_problem(source: &SourceConfig, allow: bool) -> Option<String> {
    let path = source.path.as_ref()?;
    match std::fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && allow => Some(
            "does not exist; the list is built without it until it does (or with its last good \
             content, if a build ever read it)"
                .to_owned(),
        ),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Some(
            "does not exist; the list's build will fail until it does (or use the source's last \
             good content, if a build ever read it)"
                .to_owned(),
        ),
        Err(e) => Some(format!("cannot be read: {e}")),
        Ok(m) if m.is_dir() => Some("is a directory, not a file".to_owned()),
        Ok(_) => std::fs::File::open(path)
            .err()
            .map(|e| format!("cannot be read: {e}")),
    }
}

/// Why the data directory cannot be used now: it is not a directory, or a
/// file cannot be created in it (probed by creating and removing one), or
/// it does not exist and its nearest existing parent cannot be written.
fn data_dir_problem(dir: &Path) -> Option<String> {
    match std::fs::metadata(dir) {
        Ok(m) if !m.is_dir() => Some("is not a directory".to_owned()),
        Ok(_) => probe(dir).err().map(|e| format!("is not writable: {e}")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let parent = dir.ancestors().skip(1).find(|a| a.is_dir())?;
            match probe(parent) {
                Ok(()) => None,
                Err(e) => Some(format!(
                    "does not exist, and {} cannot be written to create it: {e}",
                    parent.display()
                )),
            }
        }
        Err(e) => Some(format!("cannot be read: {e}")),
    }
}

/// Creates and removes a file in `dir`: whether this process may write
/// there (permissions, a read-only mount, a sandbox).
fn probe(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(format!(".check-config-{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)?;
    std::fs::remove_file(&path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, ListConfig};

    /// 2027-01-15T10:07:00Z.
    const NOW: u64 = 1_800_007_620;

    #[test]
    fn the_summary_names_a_sources_headers_and_their_variables_never_their_values() {
        let mut source = SourceConfig::http("https://feed.example/u.txt", crate::SourceFormat::Urls);
        source.headers.insert(
            "Auth-Key".to_owned(),
            crate::HeaderValueConfig::env("BLOCKSIEVE_TEST_SUMMARY_KEY"),
        );
        source.headers.insert(
            "X-Api-Key".to_owned(),
            crate::HeaderValueConfig::literal("literal-secret-value"),
        );
        let config = Config {
            lists: vec![ListConfig::new("p", vec![source])],
            ..Config::default()
        };
        let env = |name: &str| (name == "BLOCKSIEVE_TEST_SUMMARY_KEY").then(|| "env-secret-value".to_owned());
        let settings = config.resolve_with(&env).unwrap();
        let text = summary(&settings, NOW);
        assert!(
            text.contains(
                "  source      https://feed.example/u.txt (urls; timeout 60 s, 2 retries)\n  headers     Auth-Key (from $BLOCKSIEVE_TEST_SUMMARY_KEY), X-Api-Key\n"
            ),
            "{text}"
        );
        assert!(!text.contains("secret-value"), "{text}");
        let warned = format!("{:?}", warnings(&settings));
        assert!(!warned.contains("secret-value"), "{warned}");
    }

    #[test]
    fn the_summary_names_every_list_with_its_sources_filter_and_next_two_firings() {
        let dir = tempfile::tempdir().unwrap();
        let mut list = ListConfig::new(
            "p",
            vec![
                SourceConfig::builtin(),
                SourceConfig::http("https://feed.example/u.txt", crate::SourceFormat::Urls),
            ],
        );
        list.allow = vec![SourceConfig::file(
            dir.path().join("allow.txt"),
            crate::SourceFormat::Domains,
        )];
        list.schedule = Some("0 0 * * * *".to_owned());
        let config = Config {
            data_dir: dir.path().join("data"),
            lists: vec![list, ListConfig::new("q", vec![SourceConfig::builtin()])],
            ..Config::default()
        };
        let settings = config.resolve().unwrap();
        let text = summary(&settings, NOW);
        for want in [
            "listen        127.0.0.1:8080\n",
            "role          all\n",
            "store         the data directory",
            "list p\n  source      builtin (urls)\n  source      https://feed.example/u.txt (urls; timeout 60 s, 2 retries)\n",
            "allow.txt (domains)\n",
            "  filter      binary_fuse8, 32-bit keys\n",
            "  schedule    0 0 * * * *: next 2027-01-15T11:00:00Z, then 2027-01-15T12:00:00Z\n",
            "list q\n",
            "  schedule    0 */30 * * * *: next 2027-01-15T10:30:00Z, then 2027-01-15T11:00:00Z\n",
        ] {
            assert!(text.contains(want), "{want:?} not in\n{text}");
        }
        // The missing allowlist, the missing data directory (its parent
        // is writable) and the signing key the first start creates.
        let warned = warnings(&settings);
        assert_eq!(warned.len(), 2, "{warned:#?}");
        assert!(warned[0].starts_with("list p: allow source ") && warned[0].contains("does not exist"));
        // A missing allowlist is left out of the build, which goes on.
        assert!(
            warned[0].contains("the list is built without it"),
            "{}",
            warned[0]
        );
        assert!(warned[1].starts_with("signing_key ") && warned[1].contains("first `serve`"));
    }

    /// A publisher may serve more lists than one agent can follow (a
    /// full-hash answer names at most 64; the WASM and C agents follow 32):
    /// said, so that the operator is not left to find out from agents
    /// refusing the subscription.
    #[test]
    fn more_lists_than_an_agent_follows_are_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let config = |n: usize| Config {
            data_dir: dir.path().join("data"),
            lists: (0..n)
                .map(|i| ListConfig::new(format!("l{i}"), vec![SourceConfig::builtin()]))
                .collect(),
            ..Config::default()
        };
        let about_lists = |n: usize| -> Vec<String> {
            (warnings(&config(n).resolve().unwrap()).into_iter())
                .filter(|w| w.starts_with("lists: "))
                .collect()
        };
        assert_eq!(about_lists(32), Vec::<String>::new());
        assert_eq!(
            about_lists(33),
            [
                "lists: 33 lists; the WASM and C agents follow at most 32 (the Rust and Python \
                 agents 64), so they cannot follow every list"
            ]
        );
        assert_eq!(about_lists(64).len(), 1);
        assert_eq!(
            about_lists(65),
            ["lists: 65 lists; an agent follows at most 64, so no agent can follow every list"]
        );
    }

    #[test]
    fn a_csv_source_shows_its_reading_and_an_option_of_another_format_is_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        for name in ["f.csv", "f.txt"] {
            std::fs::write(dir.path().join(name), "").unwrap();
        }
        let key = crate::storage::generate_signing_key().to_base64();
        std::fs::write(dir.path().join("signing.key"), key + "\n").unwrap();
        set_mode(&dir.path().join("signing.key"), 0o600);
        let csv = SourceConfig {
            delimiter: Some("\t".to_owned()),
            column: Some("AdresDomeny".to_owned()),
            ..SourceConfig::file(dir.path().join("f.csv"), crate::SourceFormat::Csv)
        };
        let urls = SourceConfig {
            column: Some("url".to_owned()),
            json_key: Some("blacklist".to_owned()),
            ..SourceConfig::file(dir.path().join("f.txt"), crate::SourceFormat::Urls)
        };
        let config = Config {
            data_dir: dir.path().join("data"),
            signing_key: Some(dir.path().join("signing.key")),
            lists: vec![ListConfig::new("p", vec![csv, urls])],
            ..Config::default()
        };
        let settings = config.resolve().unwrap();
        let text = summary(&settings, 1_800_000_000);
        assert!(
            text.contains("f.csv (csv; column \"AdresDomeny\", delimiter '\\t')"),
            "{text}"
        );
        assert!(text.contains("f.txt (urls)"), "{text}");
        let warned = warnings(&settings);
        assert_eq!(warned.len(), 2, "{warned:#?}");
        assert!(
            warned[0].ends_with(
                "`column` applies to `format = \"csv\"` sources only; this urls source ignores it"
            ),
            "{}",
            warned[0]
        );
        assert!(
            warned[1].contains("`json_key` applies to `format = \"json\"`"),
            "{}",
            warned[1]
        );
    }

    #[test]
    fn a_data_dir_that_is_a_file_and_a_source_that_is_a_directory_are_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let key = crate::storage::generate_signing_key().to_base64();
        std::fs::write(dir.path().join("signing.key"), key + "\n").unwrap();
        set_mode(&dir.path().join("signing.key"), 0o600);
        let config = Config {
            data_dir: file.clone(),
            signing_key: Some(dir.path().join("signing.key")),
            lists: vec![ListConfig::new(
                "p",
                vec![SourceConfig::file(dir.path(), crate::SourceFormat::Urls)],
            )],
            ..Config::default()
        };
        let warned = warnings(&config.resolve().unwrap());
        assert_eq!(warned.len(), 2, "{warned:#?}");
        assert!(warned[0].ends_with("is a directory, not a file"), "{}", warned[0]);
        assert!(warned[1].ends_with("is not a directory"), "{}", warned[1]);
        assert_eq!(probe(dir.path()).map_err(|e| e.to_string()), Ok(()));
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "the probe is removed"
        );
    }

    /// A schedule that never fires, one sparser than the snapshots'
    /// lifetime and one that fires every second are warned about; the
    /// default is not.
    #[test]
    fn schedules_that_leave_lists_stale_or_build_every_second_are_warned_about() {
        let config = |schedule: &str| Config {
            schedule: schedule.to_owned(),
            lists: vec![ListConfig::new("p", vec![SourceConfig::builtin()])],
            ..Config::default()
        };
        let warned = |schedule: &str| schedule_warnings(&config(schedule).resolve().unwrap(), NOW);
        assert_eq!(warned("0 */30 * * * *"), Vec::<String>::new());
        assert_eq!(warned("0 0 * * * *"), Vec::<String>::new());
        let daily = warned("0 0 0 * * *");
        assert!(
            daily.len() == 1 && daily[0].contains("86400 s apart, longer than snapshot_ttl_s (7200 s)"),
            "{daily:?}"
        );
        // Office hours: the nights and weekends, whenever this runs.
        let weekdays = warned("0 0 9-17 * * Mon-Fri");
        assert!(
            weekdays.len() == 1 && weekdays[0].contains("s apart, longer than"),
            "{weekdays:?}"
        );
        // Two builds a minute apart once a day: stale most of the day,
        // though its next two firings are close.
        let twice_a_day = warned("0 0,1 0 * * *");
        assert!(
            twice_a_day.len() == 1 && twice_a_day[0].contains("86340 s apart"),
            "{twice_a_day:?}"
        );
        let never = warned("0 0 0 31 2 *");
        assert!(
            never.len() == 1 && never[0].contains("never fires again"),
            "{never:?}"
        );
        let every_second = warned("* * * * * *");
        assert!(
            every_second.len() == 1 && every_second[0].contains("builds 1 s apart"),
            "{every_second:?}"
        );
    }

    #[test]
    fn a_replica_without_its_public_key_file_is_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            data_dir: dir.path().to_owned(),
            role: Role::Replica,
            store: Some("s3://bucket/prefix".to_owned()),
            ..Config::default()
        };
        let settings = config.resolve().unwrap();
        assert!(summary(&settings, NOW).contains("public_key    "));
        let warned = warnings(&settings);
        assert_eq!(warned.len(), 1, "{warned:#?}");
        assert!(warned[0].contains("public.key: does not exist"), "{}", warned[0]);
        assert_eq!(utc(0), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn previous_public_keys_are_shown_by_key_id_and_a_bad_one_is_refused() {
        let old = crate::storage::generate_signing_key().public_key().clone();
        let config = Config {
            previous_public_keys: vec![old.to_base64()],
            ..Config::default()
        };
        let shown = summary(&config.clone().resolve().unwrap(), NOW);
        assert!(
            shown.contains(&format!("previous keys {}", hex::encode(old.id()))),
            "{shown}"
        );
        // A replica's key by id too (a rotation's step 3 changes it).
        let next = crate::storage::generate_signing_key().public_key().clone();
        let replica = Config {
            role: Role::Replica,
            store: Some("s3://bucket/prefix".to_owned()),
            public_key: Some(next.to_base64()),
            ..config.clone()
        };
        let shown = summary(&replica.resolve().unwrap(), NOW);
        assert!(
            shown.contains(&format!("public_key    key id {}", hex::encode(next.id()))),
            "{shown}"
        );
        let bad = Config {
            previous_public_keys: vec!["not a key".to_owned()],
            ..config
        };
        let refused = bad.resolve().unwrap_err().to_string();
        assert!(
            refused.contains("previous_public_keys") && refused.contains("not a key"),
            "{refused}"
        );
    }

    /// A signing key file that holds no key: `serve` and `build` refuse to
    /// start (`invalid key: …`), so it is warned about. It was not: the
    /// file was only opened, and `check-config` said the configuration
    /// was valid with no warning.
    #[test]
    fn a_signing_key_file_that_holds_no_key_is_warned_that_serve_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Config {
            data_dir: dir.path().to_owned(),
            ..Config::default()
        }
        .resolve()
        .unwrap();
        let path = settings.signing_key_path();
        let secret = crate::storage::generate_signing_key().to_base64();
        let hex_secret = {
            use base64::Engine as _;
            let bytes = base64::engine::general_purpose::STANDARD.decode(&secret).unwrap();
            hex::encode(bytes)
        };
        for (content, why) in [
            (String::new(), "got 0 characters, 0 bytes"),
            (
                format!("{hex_secret}\n"),
                "got 64 characters, 48 bytes; that is 64 hex digits: give the key as base64",
            ),
            (secret[..40].to_owned(), "got 40 characters, 30 bytes"),
        ] {
            std::fs::write(&path, &content).unwrap();
            let warned = warnings(&settings);
            assert_eq!(warned.len(), 1, "{content:?}: {warned:#?}");
            assert!(
                warned[0].starts_with("signing_key ")
                    && warned[0].contains(why)
                    && warned[0].contains("`serve` will refuse to start"),
                "{content:?}: {}",
                warned[0]
            );
        }
        // A public key file's name, existing or not: refused by `serve`,
        // never created.
        for name in ["public.key", "missing.pub"] {
            let settings = Config {
                data_dir: dir.path().to_owned(),
                signing_key: Some(dir.path().join(name)),
                ..Config::default()
            }
            .resolve()
            .unwrap();
            std::fs::write(dir.path().join("public.key"), format!("{secret}\n")).unwrap();
            let warned = warnings(&settings);
            assert_eq!(warned.len(), 1, "{name}: {warned:#?}");
            assert!(
                warned[0].contains("public key file") && warned[0].contains("`serve` will refuse to start"),
                "{name}: {}",
                warned[0]
            );
        }
        // A key, with the newline keygen writes or none: no warning.
        for content in [format!("{secret}\n"), secret] {
            std::fs::write(&path, content).unwrap();
            set_mode(&path, 0o600);
            let warned = warnings(&settings);
            assert!(warned.is_empty(), "{warned:#?}");
        }
    }

    #[cfg(unix)]
    fn set_mode(path: &std::path::Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[cfg(not(unix))]
    fn set_mode(_: &std::path::Path, _: u32) {}

    /// A signing key others can read (a copy made with the default mode
    /// 0644, a secret mounted so) lets anyone who reads it sign snapshots
    /// every agent trusts: warned about, naming the fix. The key the
    /// publisher creates (0600) is not.
    #[cfg(unix)]
    #[test]
    fn a_signing_key_readable_by_others_is_warned_about() {
        let dir = tempfile::tempdir().unwrap();
        let settings = Config {
            data_dir: dir.path().to_owned(),
            ..Config::default()
        }
        .resolve()
        .unwrap();
        let path = settings.signing_key_path();
        crate::storage::load_or_create_signing_key(&path).unwrap();
        assert!(warnings(&settings).is_empty(), "{:#?}", warnings(&settings));
        for mode in [0o644, 0o640, 0o604, 0o620] {
            set_mode(&path, mode);
            let warned = warnings(&settings);
            assert_eq!(warned.len(), 1, "{mode:o}: {warned:#?}");
            assert!(
                warned[0].starts_with(&format!("signing_key {}", path.display()))
                    && warned[0].contains(&format!("mode {mode:04o} gives other users"))
                    && warned[0].contains("chmod 600"),
                "{}",
                warned[0]
            );
        }
        set_mode(&path, 0o400);
        assert!(warnings(&settings).is_empty(), "{:#?}", warnings(&settings));
    }

    /// A builder given a public key (`public_key`, or `check-config --key`
    /// as `serve --key`) that is not its signing key's: `serve` refuses to
    /// start, so it is warned about. It was not: a builder whose signing
    /// key did not exist yet was told the first `serve` creates it.
    #[test]
    fn a_builder_given_another_public_key_is_warned_that_serve_refuses_it() {
        let dir = tempfile::tempdir().unwrap();
        let other = crate::storage::generate_signing_key().public_key().clone();
        let config = Config {
            data_dir: dir.path().to_owned(),
            role: Role::Builder,
            public_key: Some(other.to_base64()),
            ..Config::default()
        };
        let settings = config.clone().resolve().unwrap();
        let warned = warnings(&settings);
        assert_eq!(warned.len(), 1, "{warned:#?}");
        assert!(
            warned[0].contains("does not exist yet") && warned[0].contains("only a replica"),
            "{}",
            warned[0]
        );
        // Its signing key made: another key is still refused, its own is not.
        let own = crate::storage::load_or_create_signing_key(&settings.signing_key_path()).unwrap();
        let warned = warnings(&settings);
        assert_eq!(warned.len(), 1, "{warned:#?}");
        assert!(warned[0].contains("is not the public key"), "{}", warned[0]);
        let given_own = Config {
            public_key: Some(own.public_key().to_base64()),
            ..config
        };
        let warned = warnings(&given_own.resolve().unwrap());
        assert!(warned.is_empty(), "{warned:#?}");
    }
}
