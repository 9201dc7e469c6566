//! `blocksieve-publisher`: builds signed filter snapshots from blocklists and
//! serves them. This file only parses the command line, sets up logging and
//! hands a listener and a shutdown signal to the library.

use std::io::Write as _;
use std::path::PathBuf;

use anyhow::Context as _;
use blocksieve_format::{
    DecodeLimits, TrustedKey, canonicalize, check_unverified, decode_ignoring_expiry, parse_header_unverified,
};
use blocksieve_publisher::SourceFormat;
use blocksieve_publisher::internal::sources::{EntryOutcome, read_line};
use blocksieve_publisher::internal::{listener, storage};
use blocksieve_publisher::{Config, Publisher, Role};
use clap::{Parser, Subcommand};

mod report;
use report::{print_advice, print_summary, print_timings, timings_json_of};

/// Builds signed Safe-Browsing-style filter snapshots from blocklists and
/// serves them, with a k-anonymous full-hash lookup endpoint.
#[derive(Debug, Parser)]
#[command(version, about, long_about = None, after_help = "\
Examples:
  blocksieve-publisher serve                       built-in list on 127.0.0.1:8080
  blocksieve-publisher serve --config lists.toml   your lists (see docs/configuration.md)
  blocksieve-publisher build --config lists.toml --out /tmp/out
  blocksieve-publisher check-config /etc/blocksieve/publisher.toml
  blocksieve-publisher expressions 'http://a.b.c/1/2.html?param=1'
  blocksieve-publisher expressions --feed-line urls 'http://a.example/p # seen 2020-01-01'
  blocksieve-publisher inspect \"$(ls blocksieve-data/lists/phishing/builds/*.snapshot | tail -n 1)\" \\
      --key blocksieve-data/public.key")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Serve snapshots and full hashes; build at start and on the schedule.
    ///
    /// Without --config, serves one list `phishing` built from the feed
    /// shipped with the publisher, on 127.0.0.1:8080, with data in
    /// ./blocksieve-data.
    Serve {
        /// TOML configuration file.
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Override the listen address (e.g. 127.0.0.1:0).
        #[arg(long, value_name = "ADDR")]
        listen: Option<std::net::SocketAddr>,
        /// Publish the first build of every list even if a gate (empty,
        /// shrink, canary) refuses it. Applies once.
        #[arg(long)]
        force: bool,
        /// What this process does (overrides `role`): all (fetch, build,
        /// store, serve), builder (fetch, build, store; serve only the
        /// status page / and its history route, /healthz, /readyz,
        /// /metrics) or replica (build nothing; follow the object store
        /// and serve the whole API from memory).
        #[arg(long, value_name = "ROLE", value_parser = parse_role)]
        role: Option<Role>,
        /// A replica's public key (overrides `public_key`): base64, 64 hex
        /// digits, or a file holding either (such as the builder's
        /// `public.key`).
        #[arg(long, value_name = "BASE64|HEX|FILE")]
        key: Option<String>,
    },
    /// Build every list once into a data directory, print the sizing report and exit.
    ///
    /// The report has a row for every list; a list not published (its build
    /// failed, or a gate refused it) says `no` and is followed by the reason;
    /// one that built the same filter and full hashes as the version the
    /// data directory serves says `unchanged` (that version stays, with a
    /// new freshness record; `yes` when it is re-signed as a new version,
    /// past half its lifetime or with other settings).
    /// Exits 1 if any list failed or was refused by a gate.
    Build {
        /// TOML configuration file (without it, the built-in list).
        #[arg(long, value_name = "FILE")]
        config: Option<PathBuf>,
        /// Data directory to build into (overrides `data_dir`), and only
        /// into it: a configured `store` is neither read nor written, so
        /// the build touches nothing served.
        #[arg(long, value_name = "DIR")]
        out: Option<PathBuf>,
        /// Publish even if a gate refuses.
        #[arg(long)]
        force: bool,
        /// Also print each list's build stages (read, parse — canonicalize
        /// and hash —, source cache, sort/dedup, filter, canary, compress,
        /// sign, deltas, write) with their
        /// wall time and peak RSS, and the time SHA-256 alone takes over the
        /// same expressions (re-read from the stored sources after the build).
        #[arg(long)]
        timings: bool,
        /// Write the same stage timings as JSON to FILE (implies the
        /// SHA-256 reference measurement).
        #[arg(long, value_name = "FILE")]
        timings_json: Option<PathBuf>,
        /// Build as of this time (Unix seconds, > 0) instead of the clock:
        /// the snapshots' versions, created and expiry times, and the seed
        /// of the canary measurement. The same sources, signing key and time
        /// into an empty data directory give byte-identical snapshots.
        #[arg(long, value_name = "UNIX_SECONDS", value_parser = clap::value_parser!(u64).range(1..))]
        now: Option<u64>,
    },
    /// Check a configuration file as `serve` reads it, print what it runs,
    /// and warn about what would fail at run time.
    ///
    /// The summary (stdout) gives the listen address, data directory, store,
    /// role, and each list with its sources, allowlists, filter and schedule
    /// with its next two firings (UTC). Warnings (stderr, `warning: …`) name
    /// what is valid but would fail or be created when `serve` starts: a
    /// source file that is missing or unreadable, a signing key not created
    /// yet, a data directory that cannot be written. Nothing is fetched.
    /// Exits 0 when the file is valid (warnings or not), 1 naming the field
    /// when it is not.
    CheckConfig {
        /// TOML configuration file.
        #[arg(value_name = "FILE")]
        file: PathBuf,
        /// The role `serve` is given (overrides `role`), as `serve --role`.
        #[arg(long, value_name = "ROLE", value_parser = parse_role)]
        role: Option<Role>,
        /// The public key `serve` is given (overrides `public_key`), as
        /// `serve --key`.
        #[arg(long, value_name = "BASE64|HEX|FILE")]
        key: Option<String>,
    },
    /// Write a new Ed25519 signing key (mode 0600) and print its public key.
    Keygen {
        /// Where to write the private key (never overwritten); its public key
        /// goes beside it, as `public.key` for `signing.key`, else as `<FILE>.pub`.
        #[arg(long, value_name = "FILE", default_value = "blocksieve-data/signing.key")]
        out: PathBuf,
    },
    /// Print each URL's canonical form, then every expression with its full
    /// hash and 32-bit hash prefix; with --feed-line, how a build reads each
    /// argument as a line of a feed.
    ///
    /// A URL that cannot be canonicalized is printed as `invalid <url>:
    /// <reason>` and the others are still explained; the command then exits
    /// 1, saying on stderr how many of the URLs were invalid. With
    /// --feed-line, each line prints what was cleaned from it, then each
    /// entry as the build reads it with the expressions it publishes, or
    /// `rejected <entry>: <reason>`; the command exits 1 when an entry was
    /// rejected.
    Expressions {
        /// Explain each argument as a line of a feed in FORMAT (urls, hosts,
        /// domains, adblock-hosts, csv, json, sha256; for csv a URL value,
        /// for json an array string), as the build reads it: white space,
        /// quotes, columns and comments removed, the feed's own rules
        /// applied (public-suffix and loopback hosts, a doubled scheme,
        /// `&amp;`).
        #[arg(long, value_name = "FORMAT", value_parser = parse_format)]
        feed_line: Option<SourceFormat>,
        /// URLs (or feed lines) to explain. Taken as raw bytes: a byte that
        /// is not UTF-8 (e.g. bash's $'http://a.example/\xff') is escaped by
        /// canonicalization, as in a feed, not refused. Without --feed-line
        /// this explains a URL as an agent checks it, not a feed line.
        #[arg(required = true)]
        urls: Vec<std::ffi::OsString>,
    },
    /// Print a snapshot file's header and check it.
    ///
    /// Without --key, every check that needs no key is run — header, limits,
    /// body length and SHA-256 against the header, the zstd frame, the
    /// filter layout — so a damaged file (a flipped bit in the body) fails;
    /// only the signature is left unchecked. With --key, the signature too.
    /// Exits 1 when a check fails.
    Inspect {
        /// Snapshot file.
        file: PathBuf,
        /// Public key to verify the signature with: base64, as `keygen`
        /// prints it, 64 hex digits, or a file holding either (such as the
        /// publisher's `public.key`).
        #[arg(long, value_name = "BASE64|HEX|FILE")]
        key: Option<String>,
    },
}

/// A `--role` name.
fn parse_role(name: &str) -> Result<Role, String> {
    Role::from_name(name).ok_or_else(|| format!("unknown role {name:?}, expected all, builder or replica"))
}

/// A `--feed-line` format name.
fn parse_format(name: &str) -> Result<SourceFormat, String> {
    SourceFormat::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = SourceFormat::ALL.iter().map(|f| f.name()).collect();
        format!("unknown format {name:?}, expected one of {}", names.join(", "))
    })
}

/// Writes to `out` how the build reads each of `lines` as a line of a
/// `format` feed; returns how many entries were rejected.
fn explain_feed_lines(
    out: &mut impl std::io::Write,
    format: SourceFormat,
    lines: &[std::ffi::OsString],
) -> std::io::Result<usize> {
    let mut rejected = 0;
    for line in lines {
        let bytes = os_bytes(line);
        writeln!(out, "line {}", bytes.escape_ascii())?;
        let outcome = read_line(format, &bytes);
        for kind in &outcome.cleaned {
            writeln!(out, "  cleaned: {kind}")?;
        }
        if outcome.is_skipped() {
            writeln!(out, "  skipped: blank, a comment or hosts boilerplate")?;
        }
        for entry in &outcome.entries {
            match entry {
                EntryOutcome::Accepted(readings) => {
                    for r in readings {
                        writeln!(out, "  entry {}", r.text.escape_ascii())?;
                        for (e, h) in r.expressions.iter().zip(&r.full_hashes) {
                            writeln!(out, "    {e}\t{h}\t{}", h.prefix())?;
                        }
                        if r.expressions.is_empty() {
                            for h in &r.full_hashes {
                                writeln!(out, "    {h}\t{}", h.prefix())?;
                            }
                        }
                    }
                }
                EntryOutcome::Rejected { text, reason } => {
                    rejected += 1;
                    writeln!(out, "  rejected {}: {reason}", text.escape_ascii())?;
                }
            }
        }
    }
    Ok(rejected)
}

/// Writes to `out` each of `urls` canonicalized, with its expressions and
/// their full hashes; returns how many could not be canonicalized.
fn explain_urls(out: &mut impl std::io::Write, urls: &[std::ffi::OsString]) -> std::io::Result<usize> {
    let mut invalid = 0usize;
    for url in urls {
        match canonicalize(os_bytes(url).as_ref()) {
            Ok(c) => {
                writeln!(out, "{c}")?;
                for e in c.expressions() {
                    let h = e.full_hash();
                    writeln!(out, "  {e}\t{h}\t{}", h.prefix())?;
                }
            }
            Err(e) => {
                invalid += 1;
                writeln!(out, "invalid {}: {e}", os_bytes(url).escape_ascii())?;
            }
        }
    }
    Ok(invalid)
}

/// Runs `write` on a buffered, locked stdout. A reader that stops reading
/// (`… | head`) ends the output quietly: `Ok(None)`, as command-line tools
/// do, rather than a panic or an error. Every subcommand prints through it
/// (`println!` panics on a closed pipe).
fn until_closed<T>(
    write: impl FnOnce(&mut std::io::BufWriter<std::io::StdoutLock<'static>>) -> std::io::Result<T>,
) -> anyhow::Result<Option<T>> {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    match write(&mut out).and_then(|value| std::io::Write::flush(&mut out).map(|()| value)) {
        Ok(value) => Ok(Some(value)),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(None),
        Err(e) => Err(anyhow::Error::new(e).context("writing to standard output")),
    }
}

/// An argument's bytes as the shell passed them (Unix), or its text with
/// any unpaired surrogate replaced (Windows, where arguments are UTF-16).
fn os_bytes(arg: &std::ffi::OsStr) -> std::borrow::Cow<'_, [u8]> {
    #[cfg(unix)]
    {
        std::borrow::Cow::Borrowed(std::os::unix::ffi::OsStrExt::as_bytes(arg))
    }
    #[cfg(not(unix))]
    {
        match arg.to_string_lossy() {
            std::borrow::Cow::Borrowed(s) => std::borrow::Cow::Borrowed(s.as_bytes()),
            std::borrow::Cow::Owned(s) => std::borrow::Cow::Owned(s.into_bytes()),
        }
    }
}

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    // Colour only for a terminal: a log file gets no escape codes.
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_writer(std::io::stderr);
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

fn load_config(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    Ok(match path {
        Some(p) => Config::from_file(p)?,
        None => Config::default(),
    })
}

/// `eprintln!` that ignores a failed write: with stderr closed (`2>&1 |
/// head`) the exit code still says how the command went, not a panic.
macro_rules! to_stderr {
    ($($arg:tt)*) => {{ let _ = writeln!(std::io::stderr(), $($arg)*); }};
}

/// Runs the command; an error is printed as one line with its causes
/// (`Error: context: cause`) and exits 1, without a backtrace even where
/// `RUST_BACKTRACE` is set: it is a message for an operator.
fn main() -> std::process::ExitCode {
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            to_stderr!("Error: starting the async runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let mut exit_grace = None;
    let result = runtime.block_on(run(Cli::parse(), &mut exit_grace));
    // Blocking work still running once `serve` has stopped (a cancelled
    // build before its next check, or one blocked in the kernel: a read
    // from a pipe whose writer sends nothing, a store that does not
    // answer) gets `exit_grace`; dropping the runtime waited for it
    // forever, deaf to the second signal that stops the process at once
    // (whose listener has a thread of its own: `shutdown_signal`).
    if let Some(grace) = exit_grace {
        let started = std::time::Instant::now();
        runtime.shutdown_timeout(grace);
        if started.elapsed() >= grace {
            tracing::warn!(
                drain_s = grace.as_secs(),
                "blocking work (a cancelled build's source read, a store request) did not stop within drain_timeout_s; exiting without it"
            );
        }
        // Once a cancelled build has said so, not before it.
        if result.is_ok() {
            tracing::info!("publisher stopped");
        }
    }
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            to_stderr!("Error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Runs `cli`'s command; `serve` sets `exit_grace`, how long its blocking
/// work may go on once it has stopped.
async fn run(cli: Cli, exit_grace: &mut Option<std::time::Duration>) -> anyhow::Result<()> {
    let json_logs = match &cli.command {
        Command::Serve { config, .. } | Command::Build { config, .. } => config
            .as_ref()
            .and_then(|p| Config::from_file(p).ok())
            .is_some_and(|c| c.log_format == blocksieve_publisher::LogFormat::Json),
        _ => false,
    };
    init_logging(json_logs);
    match cli.command {
        Command::Serve {
            config,
            listen,
            force,
            role,
            key,
        } => {
            let mut config = load_config(config.as_ref())?;
            if let Some(addr) = listen {
                config.listen = addr;
            }
            role_and_key(&mut config, role, key.as_deref())?;
            serve(config, force, exit_grace).await
        }
        Command::Build {
            config,
            out,
            force,
            timings,
            timings_json,
            now,
        } => build(config, out, force, timings, timings_json, now).await,
        Command::CheckConfig { file, role, key } => {
            let mut config = Config::from_file(&file)?;
            role_and_key(&mut config, role, key.as_deref())?;
            check_config(&file, config)
        }
        Command::Keygen { out } => {
            if storage::is_public_key_file_name(&out) {
                anyhow::bail!(
                    "{}: named as a public key file (`public.key`, `<file>.pub`), which the publisher \
                     refuses as its signing key; give the private key another name (`signing.key`)",
                    out.display()
                );
            }
            for existing in [out.clone(), storage::public_key_path(&out)] {
                // (`symlink_metadata`: a dangling link is in the way too.)
                if std::fs::symlink_metadata(&existing).is_ok() {
                    anyhow::bail!(
                        "{} exists: keygen never overwrites a key (agents trust the public key of the one \
                         there); give another --out, or remove it first if it is really to be replaced",
                        existing.display()
                    );
                }
            }
            let key = storage::generate_signing_key();
            storage::write_key_pair(&key, &out)?;
            until_closed(|out| writeln!(out, "{}", key.public_key().to_base64()))?;
            to_stderr!(
                "wrote {} (private, mode 0600) and {}; key id {} (as errors name a key)",
                out.display(),
                storage::public_key_path(&out).display(),
                hex::encode(key.public_key().id())
            );
            Ok(())
        }
        Command::Expressions {
            feed_line: Some(format),
            urls,
        } => {
            let Some(rejected) = until_closed(|out| explain_feed_lines(out, format, &urls))? else {
                return Ok(());
            };
            if rejected > 0 {
                to_stderr!("{rejected} entries of {} lines were rejected", urls.len());
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Expressions {
            feed_line: None,
            urls,
        } => {
            let Some(invalid) = until_closed(|out| explain_urls(out, &urls))? else {
                return Ok(());
            };
            if invalid > 0 {
                to_stderr!("{invalid} of {} URLs could not be canonicalized", urls.len());
                std::process::exit(1);
            }
            Ok(())
        }
        Command::Inspect { file, key } => inspect(&file, key.as_deref()),
    }
}

/// `--role` and `--key` over the configuration's `role` and `public_key`.
fn role_and_key(config: &mut Config, role: Option<Role>, key: Option<&str>) -> anyhow::Result<()> {
    if let Some(role) = role {
        config.role = role;
    }
    if let Some(key) = key {
        config.public_key = Some(key_arg(key)?.to_base64());
    }
    Ok(())
}

/// `check-config`: `file`, read as `config`, validated as `serve` reads
/// it, then its summary and warnings.
fn check_config(file: &std::path::Path, config: Config) -> anyhow::Result<()> {
    use blocksieve_publisher::internal::config::check;
    let settings = config.resolve()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let mut warnings = check::warnings(&settings);
    warnings.extend(check::schedule_warnings(&settings, now));
    let Some(()) = until_closed(|out| {
        std::io::Write::write_all(out, check::summary(&settings, now).as_bytes())?;
        writeln!(
            out,
            "{} is valid ({} warning{})",
            file.display(),
            warnings.len(),
            if warnings.len() == 1 { "" } else { "s" }
        )
    })?
    else {
        return Ok(());
    };
    for warning in &warnings {
        to_stderr!("warning: {warning}");
    }
    Ok(())
}

async fn serve(
    config: Config,
    force: bool,
    exit_grace: &mut Option<std::time::Duration>,
) -> anyhow::Result<()> {
    listener::catch_build_requests();
    // Bound first: an address in use ends the start before the data
    // directory is touched (it made a signing key there, then failed).
    let listen = config.listen;
    let listener = listener::bind(listen).with_context(|| {
        format!("binding {listen} (another process listening there? give another address with --listen or `listen`)")
    })?;
    let publisher = Publisher::open(config)?;
    if force {
        publisher.force_next_build();
    }
    let signals = listener::Signals::catch();
    tracing::info!(
        addr = %listener.local_addr()?,
        public_key = %publisher.public_key().to_base64(),
        key_id = %hex::encode(publisher.public_key().id()),
        previous_key_ids = ?publisher.config().previous_public_keys.iter().map(|k| hex::encode(k.id())).collect::<Vec<_>>(),
        role = publisher.config().role.name(),
        lists = publisher.config().lists.len(),
        "publisher listening"
    );
    let drain = publisher.config().drain_timeout.as_secs();
    *exit_grace = Some(publisher.config().drain_timeout);
    // "publisher stopped" is logged by `main`, once the blocking work has
    // stopped too.
    publisher.run(listener, shutdown_signal(signals, drain)).await?;
    Ok(())
}

async fn build(
    config_path: Option<PathBuf>,
    out: Option<PathBuf>,
    force: bool,
    timings: bool,
    timings_json: Option<PathBuf>,
    now: Option<u64>,
) -> anyhow::Result<()> {
    let mut config = load_config(config_path.as_ref())?;
    if let Some(dir) = out {
        // `--out` reproduces a build beside the served data (the
        // alerts' runbook says so): writing the store from here would
        // publish, or renew the served version's freshness.
        if let Some(store) = config.store.take() {
            tracing::info!(%store, out = %dir.display(), "--out: building into the directory only; the store is not used");
            // A replica's configuration builds there too, with a key of
            // the directory's own (its builders' public keys, current and
            // previous, are not it).
            if config.role == Role::Replica {
                config.previous_public_keys.clear();
            }
            config.role = Role::All;
            config.public_key = None;
        }
        // A key of the directory's own (no `signing_key` given) has no
        // past: a key rotation's `previous_public_keys` name the served
        // key's, and would only make the build refuse to create it.
        let own_key = config.signing_key.is_none()
            && std::env::var_os(blocksieve_publisher::internal::config::SIGNING_KEY_ENV)
                .is_none_or(|v| v.is_empty());
        if own_key {
            config.previous_public_keys.clear();
        }
        config.data_dir = dir;
    }
    let publisher = Publisher::open(config)?;
    if force {
        publisher.force_next_build();
    }
    if let Some(now) = now {
        publisher.set_build_time(now);
    }
    let bar = indicatif::ProgressBar::new(publisher.config().lists.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{spinner} [{elapsed_precise}] {pos}/{len} lists: {msg}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_spinner()),
    );
    bar.enable_steady_tick(std::time::Duration::from_millis(200));
    let mut failed = false;
    // Every list, in configuration order: its outcome, and the SHA-256
    // reference when asked for.
    let mut outcomes = Vec::new();
    for (i, list) in publisher.config().lists.iter().enumerate() {
        bar.set_message(format!("building {}", list.name));
        let outcome = publisher.build_list(i).await;
        bar.inc(1);
        failed |= outcome.result.is_err();
        // Measured after the build, so it adds nothing to the build's
        // stages; it re-reads the stored sources.
        let reference = (outcome.report.is_some() && (timings || timings_json.is_some()))
            .then(|| publisher.hash_reference(i))
            .flatten();
        outcomes.push((outcome, reference));
    }
    bar.finish_and_clear();
    // Stage timings exist only for lists that got as far as a report.
    let rows: Vec<_> = outcomes
        .iter()
        .filter_map(|(o, reference)| {
            o.report
                .as_ref()
                .map(|r| (o.list.as_str(), r, reference.as_ref()))
        })
        .collect();
    // A reader that stops (`build … | head`) ends the report quietly; the
    // build is done and its exit status stands.
    until_closed(|out| {
        print_summary(out, outcomes.iter().map(|(o, _)| o))?;
        print_advice(out, &publisher, outcomes.iter().map(|(o, _)| o))?;
        if timings {
            for (name, r, reference) in &rows {
                print_timings(out, name, &r.timings, *reference)?;
            }
        }
        Ok(())
    })?;
    if let Some(path) = timings_json {
        let lists: Vec<serde_json::Value> = rows
            .iter()
            .map(|(name, r, reference)| timings_json_of(name, r, *reference))
            .collect();
        let text = serde_json::to_string_pretty(&serde_json::json!({ "lists": lists }))?;
        std::fs::write(&path, text + "\n").with_context(|| format!("writing {}", path.display()))?;
    }
    if failed {
        std::process::exit(1);
    }
    Ok(())
}

/// The first SIGINT or SIGTERM: `serve` drains (up to `drain_s` seconds
/// for requests, then as long again for a first build, and as long again
/// for a cancelled build's blocking work as the process exits). A second
/// one ends the process at once, then too (exit 130 after SIGINT, 143
/// after SIGTERM, as a
/// shell reports a program a signal ended), as an
/// operator pressing Ctrl-C twice expects; every write is crash-safe, and
/// the data directory's lock goes with the process.
async fn shutdown_signal(mut signals: listener::Signals, drain_s: u64) {
    signals.next().await;
    tracing::info!(
        drain_timeout_s = drain_s,
        "shutdown signal received; draining (requests get up to drain_timeout_s, then a first or requested build as long again, then what a cancelled build still runs as long again at most); a second signal stops at once"
    );
    // On a thread and runtime of its own: the process's runtime is shut
    // down once `serve` returns, while the exit still waits for blocking
    // work (`main`), and a task of it would no longer hear the signal.
    let second = std::thread::Builder::new()
        .name("second-signal".into())
        .spawn(move || {
            let Ok(runtime) = tokio::runtime::Builder::new_current_thread().enable_io().build() else {
                return;
            };
            let signal = runtime.block_on(signals.next());
            tracing::warn!("second shutdown signal: stopping now, without draining");
            // 128 + the signal, as a shell reports a process it ended.
            std::process::exit(128 + signal);
        });
    if let Err(e) = second {
        tracing::warn!(error = %e, "cannot wait for a second signal; draining to the end");
    }
}

/// A public key given on the command line: base64, hex, or a file holding
/// either.
fn key_arg(value: &str) -> anyhow::Result<TrustedKey> {
    let path = std::path::Path::new(value);
    if path.is_file() {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("--key: reading key file {value}"))?;
        // An editor may have written a byte-order mark before the key.
        let text = text.trim_start_matches('\u{feff}');
        return TrustedKey::from_base64_or_hex(text.trim())
            .with_context(|| format!("--key: key file {value}"));
    }
    if path.is_dir() {
        anyhow::bail!("--key: {value} is a directory, not a key file");
    }
    TrustedKey::from_base64_or_hex(value.trim()).context("--key is not an existing key file")
}

fn inspect(file: &PathBuf, key: Option<&str>) -> anyhow::Result<()> {
    // A key that does not parse is an error before anything is printed.
    let key = key.map(key_arg).transpose()?;
    let bytes = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let h = parse_header_unverified(&bytes).with_context(|| format!("{}", file.display()))?;
    // Checked before anything is printed: a reader that stops (`inspect …
    // | head -1`) ends the output, and the exit code is still the checks'.
    let limits = DecodeLimits::default();
    let (verdict, failed) = match key {
        Some(key) => match decode_ignoring_expiry(&bytes, &[key], &limits) {
            Ok(_) => (
                "verification          ok (signature, body SHA-256, zstd frame, filter layout)".to_owned(),
                false,
            ),
            Err(e) => (format!("verification          FAILED: {e}"), true),
        },
        None => match check_unverified(&bytes, &limits) {
            Ok(_) => (
                "integrity             ok (body SHA-256, zstd frame, filter layout)\n\
                 verification          signature not checked (pass --key)"
                    .to_owned(),
                false,
            ),
            Err(e) => (format!("integrity             FAILED: {e}"), true),
        },
    };
    until_closed(|out| {
        writeln!(out, "list_name             {}", h.list_name)?;
        writeln!(out, "version               {}", h.version)?;
        writeln!(out, "created_at            {}", h.created_at)?;
        writeln!(out, "expires_at            {}", h.expires_at)?;
        writeln!(out, "key_bits              {}", h.key_bits.bits())?;
        writeln!(out, "request_prefix_bits   {}", h.request_prefix_bits)?;
        writeln!(out, "filter_kind           {}", h.filter_kind)?;
        writeln!(out, "entry_count           {}", h.entry_count)?;
        writeln!(out, "full_hash_count       {}", h.full_hash_count)?;
        writeln!(out, "body_compressed       {} bytes", h.body_compressed_bytes)?;
        writeln!(out, "body_decompressed     {} bytes", h.body_decompressed_bytes)?;
        writeln!(out, "body_sha256           {}", hex::encode(h.body_sha256))?;
        writeln!(out, "theoretical_fpr       {:e}", h.theoretical_fpr)?;
        writeln!(out, "measured_fpr          {:e}", h.measured_fpr)?;
        writeln!(out, "key_id                {}", hex::encode(h.key_id))?;
        writeln!(out, "file_bytes            {}", bytes.len())?;
        if h.entry_count > 0 {
            let bits = bytes.len() as f64 * 8.0 / h.entry_count as f64;
            writeln!(out, "bits_per_key          {bits:.3}")?;
        }
        writeln!(out, "{verdict}")
    })?;
    if failed {
        std::process::exit(1);
    }
    Ok(())
}
