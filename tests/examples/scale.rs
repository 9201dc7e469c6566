//! Throughput through 1, 2 and 3 replicas, and the bytes an agent fleet
//! pulls from the origin vs a caching proxy, on one machine.
//!
//! ```text
//! cargo build --release -p blocksieve-publisher --bin blocksieve-publisher
//! cargo run --release -p blocksieve-tests --example scale -- \
//!     [--feed FILE] [--lines N] [--seconds S] [--rounds R] [--clients C] \
//!     [--agents A] [--buckets K] [--seed SEED] [--publisher BIN] [--nginx BIN]
//! ```
//!
//! Starts moto (S3, `blocksieve_tests::moto`), one `blocksieve-publisher
//! serve --role builder` over the first `--lines` lines of `--feed` (by
//! default 100,000 lines of the union phishing feed in
//! `$BLOCKSIEVE_DATA/feeds`, `../shared/data` by default; `--lines 0` reads
//! it whole), and three `--role replica` processes on 127.0.0.1, all real
//! processes of the release binary. Then:
//!
//! 1. **Throughput.** For each route — `GET /v1/hashes/{prefix}` with
//!    seeded random prefixes of the advertised length, binary answers; and
//!    `GET` of the versioned snapshot URL — and for N = 1, 2, 3, `--clients`
//!    keep-alive clients send requests round-robin over the first N replicas
//!    for `--seconds`, `--rounds` times (N in the order 1, 2, 3 then 3, 2,
//!    1, so that drift spreads over every N). Reports requests/s, p50/p99,
//!    errors, the ratio to N = 1 of the same run, and the CPU each replica
//!    and this load generator used, since they share the machine's cores.
//! 2. **Origin vs CDN bytes.** When nginx is found (`--nginx`, else `nginx`
//!    on `PATH` or in `/usr/sbin`), an nginx `proxy_cache` in front of the
//!    three replicas, honouring their `Cache-Control` and keyed on the
//!    `Accept` header as well (the full-hash answers say `Vary: Accept`).
//!    `--agents` seeded agents each fetch the latest snapshot, the versioned
//!    snapshot and `--buckets` full-hash buckets by `GET`, and search the
//!    same prefixes with `POST /v1/hashes:search` as the agent library does;
//!    nginx's access log (`$upstream_cache_status`,
//!    `$upstream_response_length`) says which bytes came from the replicas.
//!    The same is computed from the response headers alone (an ideal shared
//!    cache fetches each cacheable URL and `Accept` once) as a cross-check.
//!
//! Needs `moto_server` (`bash .ci/moto.sh`). Everything listens on
//! 127.0.0.1, every phase is bounded in time or count, and the processes are
//! stopped at the end. Prints Markdown tables on stdout and progress on
//! stderr; exits 2 on bad arguments, 1 when the run could not complete.

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use blocksieve_format::api::{FULL_HASHES_ACCEPT, ListsResponse, routes};
use blocksieve_tests::moto::Moto;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use reqwest::header::{ACCEPT, CACHE_CONTROL, CONTENT_TYPE};

type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The list every process serves.
const LIST: &str = "phishing";
/// How many replicas are started; throughput is measured through 1..=this.
const REPLICAS: usize = 3;
/// How long the builder's first build and the replicas' first load may take.
const READY_TIMEOUT: Duration = Duration::from_secs(300);
/// Concurrent agents in the fleet replay.
const FLEET_CONCURRENCY: usize = 32;
/// Warm-up before the throughput points, through all replicas.
const WARM_UP: Duration = Duration::from_secs(1);

/// The command line; see the module docs.
struct Args {
    /// The feed the builder publishes (`urls` format, gzip or plain).
    feed: PathBuf,
    /// Lines of the feed to publish; 0 = all.
    lines: usize,
    /// Length of one throughput point, in seconds.
    seconds: f64,
    /// Points per route and N, alternating the order of N.
    rounds: usize,
    /// Concurrent keep-alive clients of the throughput points.
    clients: usize,
    /// Agents in the fleet replay.
    agents: usize,
    /// Full-hash buckets each agent asks for.
    buckets: usize,
    /// Seed of every random draw (prefixes, the fleet).
    seed: u64,
    /// The `blocksieve-publisher` binary the builder and replicas run.
    publisher: PathBuf,
    /// The nginx binary, if given.
    nginx: Option<PathBuf>,
}

fn parse_args() -> Result<Args, BoxError> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let data = std::env::var_os("BLOCKSIEVE_DATA").map_or_else(|| root.join("../shared/data"), PathBuf::from);
    let mut args = Args {
        feed: data.join("feeds/phishing-urls-union-2018-2020.txt.gz"),
        lines: 100_000,
        seconds: 5.0,
        rounds: 2,
        clients: 32,
        agents: 10_000,
        buckets: 4,
        seed: 1,
        publisher: root.join("target/release/blocksieve-publisher"),
        nginx: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--feed" => args.feed = PathBuf::from(value()?),
            "--lines" => args.lines = value()?.parse()?,
            "--seconds" => args.seconds = value()?.parse()?,
            "--rounds" => args.rounds = value()?.parse()?,
            "--clients" => args.clients = value()?.parse()?,
            "--agents" => args.agents = value()?.parse()?,
            "--buckets" => args.buckets = value()?.parse()?,
            "--seed" => args.seed = value()?.parse()?,
            "--publisher" => args.publisher = PathBuf::from(value()?),
            "--nginx" => args.nginx = Some(PathBuf::from(value()?)),
            other => {
                return Err(format!("unknown argument {other:?} (see the example's first lines)").into());
            }
        }
    }
    // Bounded: a point lasts at most a minute, and at least one request.
    if !(0.1..=60.0).contains(&args.seconds) || !(1..=10).contains(&args.rounds) {
        return Err("--seconds must be 0.1..=60 and --rounds 1..=10".into());
    }
    if !(1..=1024).contains(&args.clients) || args.agents > 1_000_000 || args.buckets > 100 {
        return Err("--clients must be 1..=1024, --agents at most 1,000,000, --buckets at most 100".into());
    }
    if !args.publisher.is_file() {
        return Err(format!(
            "{} not found: cargo build --release -p blocksieve-publisher --bin blocksieve-publisher",
            args.publisher.display()
        )
        .into());
    }
    Ok(args)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("scale: {e}");
            return ExitCode::from(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("scale: tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("scale: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A child process killed when dropped, so that an error on the way stops
/// every server this run started.
struct Server {
    name: String,
    child: Child,
    addr: SocketAddr,
}

impl Server {
    fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> Result<u16, BoxError> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn path_str(path: &Path) -> Result<String, BoxError> {
    Ok(toml_str(
        path.to_str()
            .ok_or_else(|| format!("{} is not UTF-8", path.display()))?,
    ))
}

/// The publisher configuration shared by the builder and the replicas: one
/// list over `feed`, the moto store, a one-second replica poll.
fn publisher_config(
    listen: SocketAddr,
    data_dir: &Path,
    feed: &Path,
    moto: &Moto,
) -> Result<String, BoxError> {
    let options = moto
        .store_options()
        .iter()
        .map(|(k, v)| format!("{k} = {}", toml_str(v)))
        .collect::<Vec<_>>()
        .join(", ");
    Ok(format!(
        "listen = {listen}\ndata_dir = {data_dir}\nstore = {store}\nstore_options = {{ {options} }}\n\
         replica_poll_s = 1\n\n[[lists]]\nname = \"{LIST}\"\nsources = [{{ path = {feed}, format = \"urls\" }}]\n",
        listen = toml_str(&listen.to_string()),
        data_dir = path_str(data_dir)?,
        store = toml_str(&moto.store_url("scale")),
        feed = path_str(feed)?,
    ))
}

/// Writes the first `lines` lines of `feed` (gzip or plain; 0 = all) to
/// `out`; returns how many were written.
fn write_feed_slice(feed: &Path, lines: usize, out: &Path) -> Result<usize, BoxError> {
    let file = std::fs::File::open(feed).map_err(|e| format!("{}: {e}", feed.display()))?;
    let mut reader = BufReader::new(file);
    let gzip = reader.fill_buf()?.starts_with(&[0x1f, 0x8b]);
    let reader: Box<dyn BufRead> = if gzip {
        Box::new(BufReader::new(flate2::bufread::MultiGzDecoder::new(reader)))
    } else {
        Box::new(reader)
    };
    let mut writer = std::io::BufWriter::new(std::fs::File::create(out)?);
    let mut written = 0;
    for line in reader.split(b'\n') {
        if lines != 0 && written == lines {
            break;
        }
        writer.write_all(&line?)?;
        writer.write_all(b"\n")?;
        written += 1;
    }
    writer.flush()?;
    Ok(written)
}

fn spawn_publisher(
    bin: &Path,
    config: &Path,
    role: &str,
    extra: &[&str],
    log: &Path,
) -> Result<Child, BoxError> {
    let log = std::fs::File::create(log)?;
    Ok(Command::new(bin)
        .args(["serve", "--config"])
        .arg(config)
        .args(["--role", role])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log)
        .spawn()?)
}

async fn wait_ready(client: &reqwest::Client, server: &mut Server) -> Result<(), BoxError> {
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait()? {
            return Err(format!("{} exited ({status}) before it was ready", server.name).into());
        }
        let ready = client.get(format!("{}/readyz", server.base_url())).send().await;
        if ready.is_ok_and(|r| r.status() == 200) {
            return Ok(());
        }
        if started.elapsed() > READY_TIMEOUT {
            return Err(format!("{} not ready within {READY_TIMEOUT:?}", server.name).into());
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// What the replicas serve, from `GET /v1/lists`.
struct Served {
    version: u64,
    etag: String,
    snapshot_bytes: u64,
    entries: u64,
    request_prefix_bits: u8,
}

async fn served(client: &reqwest::Client, base: &str) -> Result<Served, BoxError> {
    let lists: ListsResponse = client
        .get(format!("{base}{}", routes::LISTS))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let list = lists
        .lists
        .into_iter()
        .find(|l| l.name == LIST)
        .ok_or("list missing")?;
    let s = list.snapshot.ok_or("no snapshot served")?;
    Ok(Served {
        version: s.version,
        etag: s.etag,
        snapshot_bytes: s.snapshot_bytes,
        entries: s.entries,
        request_prefix_bits: s.request_prefix_bits,
    })
}

/// A random request prefix of `bits` bits, as lowercase hex.
fn random_prefix(rng: &mut StdRng, bits: u8) -> String {
    let digits = usize::from(bits / 4);
    format!("{:08x}", rng.r#gen::<u32>())[..digits].to_owned()
}

/// CPU time (user + system) a process has used, from `/proc/PID/stat`
/// (`self` for this one); `None` off Linux.
fn cpu_time(pid: &str) -> Option<Duration> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces: utime and stime are the 12th and 13th of them.
    let fields: Vec<&str> = stat.get(stat.rfind(')')? + 2..)?.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // /proc reports clock ticks of USER_HZ, which Linux fixes at 100.
    Some(Duration::from_millis(ticks * 10))
}

/// Busy and total jiffies of the whole machine, from `/proc/stat`.
fn machine_jiffies() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let cpu: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let total: u64 = cpu.iter().take(8).sum();
    let idle = cpu.get(3)? + cpu.get(4)?;
    Some((total - idle, total))
}

/// CPU use over one measurement.
#[derive(Default, Clone)]
struct CpuUse {
    /// Each replica's CPU time, in replica order.
    replicas: Vec<Duration>,
    /// This process's (the load generator's) CPU time.
    load_generator: Duration,
    /// Busy and total jiffies of the machine (every process, other users' too).
    machine: (u64, u64),
}

fn cpu_snapshot(pids: &[String]) -> CpuUse {
    CpuUse {
        replicas: pids.iter().map(|p| cpu_time(p).unwrap_or_default()).collect(),
        load_generator: cpu_time("self").unwrap_or_default(),
        machine: machine_jiffies().unwrap_or_default(),
    }
}

fn cpu_delta(after: &CpuUse, before: &CpuUse) -> CpuUse {
    CpuUse {
        replicas: after
            .replicas
            .iter()
            .zip(&before.replicas)
            .map(|(a, b)| a.saturating_sub(*b))
            .collect(),
        load_generator: after.load_generator.saturating_sub(before.load_generator),
        machine: (
            after.machine.0.saturating_sub(before.machine.0),
            after.machine.1.saturating_sub(before.machine.1),
        ),
    }
}

fn cpu_add(sum: &mut CpuUse, d: &CpuUse) {
    if sum.replicas.is_empty() {
        sum.replicas = vec![Duration::ZERO; d.replicas.len()];
    }
    for (s, x) in sum.replicas.iter_mut().zip(&d.replicas) {
        *s += *x;
    }
    sum.load_generator += d.load_generator;
    sum.machine.0 += d.machine.0;
    sum.machine.1 += d.machine.1;
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Route {
    FullHashes,
    Snapshot,
}

/// What the clients of one measurement saw.
#[derive(Default)]
struct Tally {
    requests: u64,
    errors: u64,
    body_bytes: u64,
    /// Latency of each answered request to its last body byte, in µs.
    latencies_us: Vec<u32>,
    elapsed: Duration,
    cpu: CpuUse,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.requests += other.requests;
        self.errors += other.errors;
        self.body_bytes += other.body_bytes;
        self.latencies_us.extend(other.latencies_us);
    }

    fn per_second(&self) -> f64 {
        self.requests as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }

    fn percentile_ms(&mut self, p: f64) -> f64 {
        if self.latencies_us.is_empty() {
            return f64::NAN;
        }
        self.latencies_us.sort_unstable();
        let i = ((self.latencies_us.len() - 1) as f64 * p).round() as usize;
        f64::from(self.latencies_us[i]) / 1000.0
    }
}

/// Reads a response's body to the end, counting its bytes without keeping them.
async fn drain(mut response: reqwest::Response) -> Result<u64, reqwest::Error> {
    let mut bytes = 0;
    while let Some(chunk) = response.chunk().await? {
        bytes += chunk.len() as u64;
    }
    Ok(bytes)
}

/// One client: requests round-robin over `bases` until `deadline`.
async fn client_loop(
    bases: Arc<Vec<String>>,
    route: Route,
    snapshot_path: Arc<String>,
    bits: u8,
    seed: u64,
    deadline: Instant,
) -> Tally {
    let mut tally = Tally::default();
    let Ok(client) = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
    else {
        tally.errors += 1;
        return tally;
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let mut next = (seed as usize) % bases.len();
    while Instant::now() < deadline {
        let base = &bases[next];
        next = (next + 1) % bases.len();
        let request = match route {
            Route::FullHashes => client
                .get(format!("{base}/v1/hashes/{}", random_prefix(&mut rng, bits)))
                .header(ACCEPT, FULL_HASHES_ACCEPT),
            Route::Snapshot => client.get(format!("{base}{snapshot_path}")),
        };
        let started = Instant::now();
        tally.requests += 1;
        match request.send().await {
            Ok(response) if response.status() == 200 => match drain(response).await {
                Ok(bytes) => {
                    tally.body_bytes += bytes;
                    let us = started.elapsed().as_micros();
                    tally.latencies_us.push(u32::try_from(us).unwrap_or(u32::MAX));
                }
                Err(_) => tally.errors += 1,
            },
            _ => tally.errors += 1,
        }
    }
    tally
}

/// What every throughput point asks for.
struct Load<'a> {
    /// The replicas' process ids, for their CPU time.
    pids: &'a [String],
    /// The versioned snapshot's path.
    snapshot_path: Arc<String>,
    /// The advertised request prefix length.
    bits: u8,
    /// Concurrent keep-alive clients.
    clients: usize,
}

/// `load.clients` clients over `bases` for `duration`.
async fn measure(load: &Load<'_>, bases: &[String], route: Route, duration: Duration, seed: u64) -> Tally {
    let (pids, snapshot_path, bits, clients) = (load.pids, &load.snapshot_path, load.bits, load.clients);
    let bases = Arc::new(bases.to_vec());
    let before = cpu_snapshot(pids);
    let started = Instant::now();
    let deadline = started + duration;
    let tasks: Vec<_> = (0..clients)
        .map(|c| {
            tokio::spawn(client_loop(
                Arc::clone(&bases),
                route,
                Arc::clone(snapshot_path),
                bits,
                seed.wrapping_mul(1_000_003).wrapping_add(c as u64),
                deadline,
            ))
        })
        .collect();
    let mut tally = Tally::default();
    for task in tasks {
        match task.await {
            Ok(t) => tally.merge(t),
            Err(_) => tally.errors += 1,
        }
    }
    tally.elapsed = started.elapsed();
    tally.cpu = cpu_delta(&cpu_snapshot(pids), &before);
    tally
}

async fn run(args: Args) -> Result<(), BoxError> {
    let work = tempfile::Builder::new().prefix("blocksieve-scale-").tempdir()?;
    let dir = work.path();
    let feed = dir.join("feed.txt");
    let lines = write_feed_slice(&args.feed, args.lines, &feed)?;
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let feed_name = args
        .feed
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    eprintln!("scale: {lines} lines of {feed_name}; {cores} CPUs");

    let moto = Moto::start()
        .await
        .ok_or("moto_server not found (bash .ci/moto.sh)")?;
    let client = reqwest::Client::new();

    // The builder first: it creates the signing key the replicas trust.
    let builder_dir = dir.join("builder");
    std::fs::create_dir_all(&builder_dir)?;
    let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
    let config = dir.join("builder.toml");
    std::fs::write(&config, publisher_config(addr, &builder_dir, &feed, &moto)?)?;
    let started = Instant::now();
    let child = spawn_publisher(&args.publisher, &config, "builder", &[], &dir.join("builder.log"))?;
    let mut builder = Server {
        name: "builder".into(),
        child,
        addr,
    };
    wait_ready(&client, &mut builder).await?;
    eprintln!("scale: builder ready in {:.1} s", started.elapsed().as_secs_f64());

    let public_key = builder_dir.join("public.key");
    let public_key = public_key.to_str().ok_or("key path is not UTF-8")?;
    let mut replicas = Vec::new();
    for i in 0..REPLICAS {
        let replica_dir = dir.join(format!("replica-{i}"));
        std::fs::create_dir_all(&replica_dir)?;
        let addr = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let config = dir.join(format!("replica-{i}.toml"));
        std::fs::write(&config, publisher_config(addr, &replica_dir, &feed, &moto)?)?;
        let log = dir.join(format!("replica-{i}.log"));
        let child = spawn_publisher(&args.publisher, &config, "replica", &["--key", public_key], &log)?;
        replicas.push(Server {
            name: format!("replica {i}"),
            child,
            addr,
        });
    }
    for replica in &mut replicas {
        wait_ready(&client, replica).await?;
    }
    let info = served(&client, &replicas[0].base_url()).await?;
    for replica in &replicas[1..] {
        let other = served(&client, &replica.base_url()).await?;
        if (other.version, &other.etag) != (info.version, &info.etag) {
            return Err(format!(
                "{} serves {} {}, not {}",
                replica.name, other.version, other.etag, info.etag
            )
            .into());
        }
    }
    let snapshot_path = routes::versioned_snapshot(LIST, info.version);
    let bases: Vec<String> = replicas.iter().map(Server::base_url).collect();
    let pids: Vec<String> = replicas.iter().map(|r| r.child.id().to_string()).collect();
    println!(
        "{lines} lines of {feed_name} → {} full hashes; snapshot version {} of {} bytes; request prefix {} bits; \
         {cores} CPUs shared by moto, the builder, {REPLICAS} replicas and this load generator\n",
        info.entries, info.version, info.snapshot_bytes, info.request_prefix_bits
    );

    throughput(&args, &bases, &pids, &snapshot_path, info.request_prefix_bits).await;

    let nginx = args.nginx.clone().or_else(find_nginx);
    let plan = FleetPlan::new(&args, info.request_prefix_bits);
    let buckets_base = routes::list_hashes_base(LIST, info.version);
    let by_headers = fleet_by_headers(&client, &bases[0], &snapshot_path, &buckets_base, &plan).await?;
    match nginx {
        Some(nginx) => {
            let proxy = start_nginx(&nginx, dir, &bases).await?;
            let by_nginx = fleet_through(&proxy, &snapshot_path, &buckets_base, &plan).await;
            drop(proxy);
            let by_nginx = by_nginx?;
            print_fleet(&args, &plan, &by_nginx, &by_headers, &info);
        }
        None => {
            println!("nginx not found: origin vs CDN bytes from the response headers only\n");
            print_fleet_headers(&args, &plan, &by_headers, &info);
        }
    }
    drop(replicas);
    drop(builder);
    drop(moto);
    Ok(())
}

async fn throughput(args: &Args, bases: &[String], pids: &[String], snapshot_path: &str, bits: u8) {
    let duration = Duration::from_secs_f64(args.seconds);
    let load = Load {
        pids,
        snapshot_path: Arc::new(snapshot_path.to_owned()),
        bits,
        clients: args.clients,
    };
    // Warm-up: connections, page cache, each replica's allocator.
    for route in [Route::FullHashes, Route::Snapshot] {
        measure(&load, bases, route, WARM_UP, args.seed).await;
    }
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let mut rows = Vec::new();
    for (route, label) in [
        (
            Route::FullHashes,
            format!("`GET /v1/hashes/{{prefix}}` ({bits}-bit, binary)"),
        ),
        (Route::Snapshot, "`GET` versioned snapshot".to_owned()),
    ] {
        let mut totals: Vec<Tally> = (0..REPLICAS).map(|_| Tally::default()).collect();
        for round in 0..args.rounds {
            let order: Vec<usize> = if round % 2 == 0 {
                (1..=REPLICAS).collect()
            } else {
                (1..=REPLICAS).rev().collect()
            };
            for n in order {
                let seed = args.seed ^ ((round as u64) << 32 | n as u64);
                let t = measure(&load, &bases[..n], route, duration, seed).await;
                eprintln!(
                    "scale: {label}, {n} replica(s), round {}: {:.0}/s, {} errors",
                    round + 1,
                    t.per_second(),
                    t.errors
                );
                let total = &mut totals[n - 1];
                total.elapsed += t.elapsed;
                cpu_add(&mut total.cpu, &t.cpu);
                total.merge(t);
            }
        }
        rows.push((label, totals));
    }
    println!(
        "{} keep-alive clients, {:.1} s × {} rounds per point (N in the order 1, 2, 3 then 3, 2, 1), round-robin \
         over the first N replicas; CPU in % of one core over the point's wall time ({}00 % = every CPU)\n",
        args.clients,
        args.seconds,
        args.rounds,
        std::thread::available_parallelism().map_or(1, usize::from)
    );
    println!(
        "| route | replicas | requests/s | ratio to 1 | p50 ms | p99 ms | requests | errors | MB/s | CPU of each replica | requests per replica CPU-second | load generator CPU | CPU of other processes | machine busy |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|");
    for (label, mut totals) in rows {
        let one = totals[0].per_second();
        for (i, t) in totals.iter_mut().enumerate() {
            let wall = t.elapsed.as_secs_f64().max(1e-9);
            let share = |d: Duration| format!("{:.0} %", 100.0 * d.as_secs_f64() / wall);
            let replicas = t.cpu.replicas[..=i]
                .iter()
                .map(|d| share(*d))
                .collect::<Vec<_>>()
                .join(", ");
            let replica_cpu: Duration = t.cpu.replicas[..=i].iter().sum();
            let per_cpu_second = t.requests as f64 / replica_cpu.as_secs_f64().max(1e-9);
            let (busy, total) = t.cpu.machine;
            let busy_share = busy as f64 / total.max(1) as f64;
            // Moto, the idle builder, and whatever else runs on the machine.
            let elsewhere = busy_share * cores as f64 * 100.0
                - 100.0 * (replica_cpu + t.cpu.load_generator).as_secs_f64() / wall;
            println!(
                "| {label} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {} | {} | {:.1} | {replicas} | {per_cpu_second:.0} | {} | {elsewhere:.0} % | {:.0} % of {cores} CPUs |",
                i + 1,
                t.per_second(),
                t.per_second() / one,
                t.percentile_ms(0.50),
                t.percentile_ms(0.99),
                t.requests,
                t.errors,
                t.body_bytes as f64 / wall / 1e6,
                share(t.cpu.load_generator),
                100.0 * busy_share,
            );
        }
    }
    println!();
}

fn find_nginx() -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|d| d.join("nginx"))
        .find(|p| p.is_file())
}

/// nginx in the foreground with a `proxy_cache` in front of the replicas.
struct Proxy {
    server: Server,
    access_log: PathBuf,
}

async fn start_nginx(nginx: &Path, dir: &Path, bases: &[String]) -> Result<Proxy, BoxError> {
    let root = dir.join("nginx");
    for sub in ["cache", "tmp"] {
        std::fs::create_dir_all(root.join(sub))?;
    }
    let port = free_port()?;
    let upstreams: String = bases
        .iter()
        .map(|b| format!("        server {};\n", b.trim_start_matches("http://")))
        .collect();
    let access_log = root.join("access.log");
    let r = root.display();
    // The cache honours the replicas' Cache-Control (no proxy_cache_valid
    // overrides it); the key holds Accept since full-hash answers vary on
    // it (nginx also keeps a variant per Vary value); proxy_cache_lock
    // collapses concurrent misses of one key into one origin request, as
    // CDNs do.
    // One process (no master): stopping the child stops nginx, with no
    // worker left behind. Only the cache manager is missing, which trims
    // the cache to `max_size`, far above what a replay stores.
    let conf = format!(
        "daemon off;\nmaster_process off;\npid {r}/nginx.pid;\nerror_log {r}/error.log warn;\n\
         events {{ worker_connections 1024; }}\n\
         http {{\n\
         \x20   log_format cache '$upstream_cache_status $body_bytes_sent $upstream_response_length $request_method $uri';\n\
         \x20   access_log {log} cache;\n\
         \x20   client_body_temp_path {r}/tmp/body;\n    proxy_temp_path {r}/tmp/proxy;\n\
         \x20   fastcgi_temp_path {r}/tmp/fastcgi;\n    uwsgi_temp_path {r}/tmp/uwsgi;\n    scgi_temp_path {r}/tmp/scgi;\n\
         \x20   proxy_cache_path {r}/cache levels=1:2 keys_zone=blocksieve:16m max_size=4g inactive=1d use_temp_path=off;\n\
         \x20   upstream replicas {{\n{upstreams}        keepalive 32;\n    }}\n\
         \x20   server {{\n\
         \x20       listen 127.0.0.1:{port};\n\
         \x20       location / {{\n\
         \x20           proxy_pass http://replicas;\n\
         \x20           proxy_http_version 1.1;\n\
         \x20           proxy_set_header Connection \"\";\n\
         \x20           proxy_cache blocksieve;\n\
         \x20           proxy_cache_key \"$request_method $request_uri $http_accept\";\n\
         \x20           proxy_cache_lock on;\n\
         \x20           proxy_cache_lock_timeout 30s;\n\
         \x20           proxy_buffers 64 16k;\n\
         \x20       }}\n\
         \x20   }}\n\
         }}\n",
        log = access_log.display(),
    );
    let config = root.join("nginx.conf");
    std::fs::write(&config, conf)?;
    let child = Command::new(nginx)
        .arg("-p")
        .arg(&root)
        .arg("-c")
        .arg(&config)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(root.join("stderr.log"))?)
        .spawn()?;
    let mut server = Server {
        name: "nginx".into(),
        child,
        addr: SocketAddr::from(([127, 0, 0, 1], port)),
    };
    let client = reqwest::Client::new();
    let started = Instant::now();
    loop {
        if let Some(status) = server.child.try_wait()? {
            return Err(format!("nginx exited ({status}); see its error log").into());
        }
        if client
            .get(format!("{}/healthz", server.base_url()))
            .send()
            .await
            .is_ok()
        {
            break;
        }
        if started.elapsed() > Duration::from_secs(10) {
            return Err("nginx did not answer within 10 s".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(Proxy { server, access_log })
}

/// The fleet's requests, drawn from the seed before anything is sent, so
/// that the proxy replay and the header computation see the same ones.
struct FleetPlan {
    /// Each agent's full-hash request prefixes.
    agents: Vec<Vec<String>>,
}

impl FleetPlan {
    fn new(args: &Args, bits: u8) -> Self {
        // A bucket is the prefix of a URL's full hash that hit the agent's
        // filter: SHA-256 output, so uniform over the buckets whatever the
        // URL. Uniform draws are the worst case for a cache; popular URLs
        // only repeat buckets.
        let agents = (0..args.agents)
            .map(|a| {
                let mut rng = StdRng::seed_from_u64(args.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ a as u64);
                (0..args.buckets).map(|_| random_prefix(&mut rng, bits)).collect()
            })
            .collect();
        Self { agents }
    }

    fn requests(&self) -> usize {
        self.agents
            .iter()
            .map(|a| 2 + 2 * a.len() + usize::from(!a.is_empty()))
            .sum()
    }
}

/// The fleet's routes, as reported.
const FLEET_ROUTES: [&str; 5] = [
    "`GET` latest snapshot",
    "`GET` versioned snapshot",
    "`GET /v1/hashes/{prefix}` (binary)",
    "`POST /v1/hashes:search` (binary; agents before immutable buckets)",
    "`GET /v1/lists/{name}/hashes/{version}/{prefix}` (binary, immutable; the agent library)",
];

/// The fleet's two ways of confirming a filter hit: [`FLEET_ROUTES`] 3
/// (the search) and 4 (the immutable buckets). A total counts one of them.
const CONFIRMATIONS: [(usize, &str); 2] = [
    (4, "all, confirming by immutable buckets (the agent library)"),
    (3, "all, confirming by `POST` search"),
];

/// Which of [`FLEET_ROUTES`] a logged request is; `None` for the readiness
/// probe.
fn route_of(method: &str, uri: &str) -> Option<usize> {
    if method == "POST" {
        Some(3)
    } else if uri.starts_with("/v1/lists/") && uri.contains("/hashes/") {
        Some(4)
    } else if uri.starts_with("/v1/hashes/") {
        Some(2)
    } else if uri.contains("/snapshots/") {
        Some(1)
    } else if uri.ends_with("/snapshot") {
        Some(0)
    } else {
        None
    }
}

/// Bytes of one fleet route.
#[derive(Default, Clone, Copy)]
struct RouteBytes {
    requests: u64,
    /// Body bytes the agents received.
    to_agents: u64,
    /// Body bytes the replicas sent (to the proxy).
    from_origin: u64,
    /// Requests that reached a replica.
    origin_requests: u64,
    errors: u64,
}

async fn fleet_through(
    proxy: &Proxy,
    snapshot_path: &str,
    buckets_base: &str,
    plan: &FleetPlan,
) -> Result<[RouteBytes; 5], BoxError> {
    let base = Arc::new(proxy.server.base_url());
    let buckets_base = Arc::new(buckets_base.to_owned());
    let latest = Arc::new(routes::latest_snapshot(LIST));
    let versioned = Arc::new(snapshot_path.to_owned());
    let agents = Arc::new(plan.agents.clone());
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let workers: Vec<_> = (0..FLEET_CONCURRENCY)
        .map(|_| {
            let buckets_base = Arc::clone(&buckets_base);
            let (base, latest, versioned, agents, next) = (
                Arc::clone(&base),
                Arc::clone(&latest),
                Arc::clone(&versioned),
                Arc::clone(&agents),
                Arc::clone(&next),
            );
            tokio::spawn(async move {
                let mut seen = [RouteBytes::default(); 5];
                loop {
                    let a = next.fetch_add(1, Ordering::Relaxed);
                    let Some(prefixes) = agents.get(a) else { break };
                    // Each agent its own connections, as separate devices.
                    let Ok(client) = reqwest::Client::builder()
                        .timeout(Duration::from_secs(60))
                        .build()
                    else {
                        seen[0].errors += 1;
                        continue;
                    };
                    let mut requests = vec![
                        (0, client.get(format!("{base}{latest}"))),
                        (1, client.get(format!("{base}{versioned}"))),
                    ];
                    for p in prefixes {
                        requests.push((
                            2,
                            client
                                .get(format!("{base}/v1/hashes/{p}"))
                                .header(ACCEPT, FULL_HASHES_ACCEPT),
                        ));
                    }
                    for p in prefixes {
                        requests.push((
                            4,
                            client
                                .get(format!("{base}{buckets_base}{p}"))
                                .header(ACCEPT, FULL_HASHES_ACCEPT),
                        ));
                    }
                    if !prefixes.is_empty() {
                        let body = serde_json::json!({ "prefixes": prefixes }).to_string();
                        requests.push((
                            3,
                            client
                                .post(format!("{base}{}", routes::SEARCH))
                                .header(CONTENT_TYPE, "application/json")
                                .header(ACCEPT, FULL_HASHES_ACCEPT)
                                .body(body),
                        ));
                    }
                    for (route, request) in requests {
                        let s = &mut seen[route];
                        s.requests += 1;
                        match request.send().await {
                            Ok(r) if r.status() == 200 => match drain(r).await {
                                Ok(bytes) => s.to_agents += bytes,
                                Err(_) => s.errors += 1,
                            },
                            _ => s.errors += 1,
                        }
                    }
                }
                seen
            })
        })
        .collect();
    let mut client_side = [RouteBytes::default(); 5];
    for w in workers {
        let seen = w.await?;
        for (t, s) in client_side.iter_mut().zip(seen) {
            t.requests += s.requests;
            t.to_agents += s.to_agents;
            t.errors += s.errors;
        }
    }
    eprintln!(
        "scale: fleet of {} agents through nginx in {:.1} s",
        plan.agents.len(),
        started.elapsed().as_secs_f64()
    );
    // nginx writes a request's line once it has sent the answer, which may
    // be just after the agent read it: wait for every line, a bounded time.
    let expected: u64 = client_side.iter().map(|r| r.requests).sum();
    let waited = Instant::now();
    let mut log = std::fs::read_to_string(&proxy.access_log)?;
    while (log.lines().filter(|l| !l.ends_with("/healthz")).count() as u64) < expected
        && waited.elapsed() < Duration::from_secs(10)
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
        log = std::fs::read_to_string(&proxy.access_log)?;
    }
    let mut logged = [RouteBytes::default(); 5];
    for line in log.lines() {
        let f: Vec<&str> = line.split(' ').collect();
        let [status, sent, upstream, method, uri] = f[..] else {
            return Err(format!("unexpected access log line {line:?}").into());
        };
        let Some(route) = route_of(method, uri) else {
            continue;
        };
        let r = &mut logged[route];
        r.requests += 1;
        r.to_agents += sent.parse::<u64>().unwrap_or(0);
        // "-" when no replica was asked (a hit); "a, b" when nginx tried two.
        let from: u64 = upstream
            .split([',', ' '])
            .filter_map(|v| v.trim().parse::<u64>().ok())
            .sum();
        r.from_origin += from;
        if status != "HIT" {
            r.origin_requests += 1;
        }
    }
    for (l, c) in logged.iter_mut().zip(client_side) {
        if l.to_agents != c.to_agents {
            eprintln!(
                "scale: access log counts {} body bytes where the agents received {}",
                l.to_agents, c.to_agents
            );
        }
        l.errors = c.errors;
    }
    Ok(logged)
}

/// One distinct cacheable answer: its body size and freshness.
struct Answer {
    body_bytes: u64,
    cacheable: bool,
}

/// Whether a response may be stored by a shared cache, by its
/// `Cache-Control` alone (RFC 9111 §3 and §5.2.2).
fn shared_cacheable(cache_control: Option<&str>) -> bool {
    let Some(cc) = cache_control else { return false };
    let mut fresh = false;
    for directive in cc.split(',').map(|d| d.trim().to_ascii_lowercase()) {
        if directive == "no-store" || directive == "private" || directive == "no-cache" {
            return false;
        }
        if let Some(v) = directive
            .strip_prefix("s-maxage=")
            .or_else(|| directive.strip_prefix("max-age="))
        {
            fresh |= v.parse::<u64>().is_ok_and(|s| s > 0);
        }
    }
    fresh
}

/// The fleet's bytes by headers alone: each distinct `GET` (URL and
/// `Accept`) is fetched once from a replica; an ideal shared cache takes
/// the first request of each cacheable one from the origin and serves the
/// rest (the replay is shorter than every `max-age`). `POST` answers are
/// not stored by shared caches, so each is origin bytes; their sizes are
/// those of the replica's answers to the same searches.
async fn fleet_by_headers(
    client: &reqwest::Client,
    base: &str,
    snapshot_path: &str,
    buckets_base: &str,
    plan: &FleetPlan,
) -> Result<[RouteBytes; 5], BoxError> {
    let mut answers: HashMap<String, Answer> = HashMap::new();
    let mut out = [RouteBytes::default(); 5];
    let mut get = async |path: String,
                         accept: Option<&str>,
                         route: usize,
                         out: &mut [RouteBytes; 5]|
           -> Result<(), BoxError> {
        let key = format!("{path} {}", accept.unwrap_or(""));
        let r = &mut out[route];
        r.requests += 1;
        if let Some(answer) = answers.get(&key) {
            r.to_agents += answer.body_bytes;
            if !answer.cacheable {
                r.from_origin += answer.body_bytes;
                r.origin_requests += 1;
            }
            return Ok(());
        }
        let mut request = client.get(format!("{base}{path}"));
        if let Some(accept) = accept {
            request = request.header(ACCEPT, accept);
        }
        let response = request.send().await?.error_for_status()?;
        let cc = response
            .headers()
            .get(CACHE_CONTROL)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let body_bytes = drain(response).await?;
        let cacheable = shared_cacheable(cc.as_deref());
        r.to_agents += body_bytes;
        r.from_origin += body_bytes;
        r.origin_requests += 1;
        answers.insert(
            key,
            Answer {
                body_bytes,
                cacheable,
            },
        );
        Ok(())
    };
    for prefixes in &plan.agents {
        get(routes::latest_snapshot(LIST), None, 0, &mut out).await?;
        get(snapshot_path.to_owned(), None, 1, &mut out).await?;
        for p in prefixes {
            get(format!("/v1/hashes/{p}"), Some(FULL_HASHES_ACCEPT), 2, &mut out).await?;
        }
        for p in prefixes {
            get(
                format!("{buckets_base}{p}"),
                Some(FULL_HASHES_ACCEPT),
                4,
                &mut out,
            )
            .await?;
        }
    }
    // Searches: one per agent, never stored; sized by the replica's answer.
    let mut sizes: BTreeMap<Vec<String>, u64> = BTreeMap::new();
    for prefixes in plan.agents.iter().filter(|p| !p.is_empty()) {
        let bytes = match sizes.get(prefixes) {
            Some(b) => *b,
            None => {
                let response = client
                    .post(format!("{base}{}", routes::SEARCH))
                    .header(CONTENT_TYPE, "application/json")
                    .header(ACCEPT, FULL_HASHES_ACCEPT)
                    .body(serde_json::json!({ "prefixes": prefixes }).to_string())
                    .send()
                    .await?
                    .error_for_status()?;
                let b = drain(response).await?;
                // Only identical searches are remembered (a bounded map).
                if sizes.len() < 100_000 {
                    sizes.insert(prefixes.clone(), b);
                }
                b
            }
        };
        let r = &mut out[3];
        r.requests += 1;
        r.to_agents += bytes;
        r.from_origin += bytes;
        r.origin_requests += 1;
    }
    Ok(out)
}

/// `bytes` with thousands separators.
fn thousands(bytes: u64) -> String {
    let digits = bytes.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn print_fleet_header(args: &Args, plan: &FleetPlan, info: &Served) {
    println!(
        "Fleet: {} agents (seed {}), each: the latest snapshot, the versioned snapshot, {} full-hash buckets of {} bits \
         drawn uniformly by `GET`, the same prefixes in one `POST` search (how agents confirmed hits before immutable buckets) and as immutable buckets (how the agent library confirms them now); {} requests; snapshot {} bytes\n",
        args.agents,
        args.seed,
        args.buckets,
        info.request_prefix_bits,
        plan.requests(),
        info.snapshot_bytes
    );
}

fn print_fleet(
    args: &Args,
    plan: &FleetPlan,
    nginx: &[RouteBytes; 5],
    headers: &[RouteBytes; 5],
    info: &Served,
) {
    print_fleet_header(args, plan, info);
    println!(
        "| route | requests | bytes to agents | bytes from origin (nginx log) | origin requests (nginx) | share served by the cache | bytes from origin (headers) | origin requests (headers) | errors |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (i, (n, h)) in nginx.iter().zip(headers).enumerate() {
        print_fleet_row(FLEET_ROUTES[i], n, h);
    }
    for (confirmation, label) in CONFIRMATIONS {
        let mut total = (RouteBytes::default(), RouteBytes::default());
        for (i, (n, h)) in nginx.iter().zip(headers).enumerate() {
            if i >= 3 && i != confirmation {
                continue;
            }
            for (t, r) in [(&mut total.0, n), (&mut total.1, h)] {
                t.requests += r.requests;
                t.to_agents += r.to_agents;
                t.from_origin += r.from_origin;
                t.origin_requests += r.origin_requests;
                t.errors += r.errors;
            }
        }
        print_fleet_row(label, &total.0, &total.1);
    }
    println!();
}

/// One row of the fleet table: what nginx logged (`n`) beside what the
/// headers say (`h`).
fn print_fleet_row(label: &str, n: &RouteBytes, h: &RouteBytes) {
    println!(
        "| {label} | {} | {} | {} | {} | {:.2} % | {} | {} | {} |",
        n.requests,
        thousands(n.to_agents),
        thousands(n.from_origin),
        n.origin_requests,
        100.0 * (1.0 - n.from_origin as f64 / n.to_agents.max(1) as f64),
        thousands(h.from_origin),
        h.origin_requests,
        n.errors
    );
}

fn print_fleet_headers(args: &Args, plan: &FleetPlan, headers: &[RouteBytes; 5], info: &Served) {
    print_fleet_header(args, plan, info);
    println!(
        "| route | requests | bytes to agents | bytes from origin (headers) | origin requests | share served by a cache |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for (i, h) in headers.iter().enumerate() {
        println!(
            "| {} | {} | {} | {} | {} | {:.2} % |",
            FLEET_ROUTES[i],
            h.requests,
            thousands(h.to_agents),
            thousands(h.from_origin),
            h.origin_requests,
            100.0 * (1.0 - h.from_origin as f64 / h.to_agents.max(1) as f64)
        );
    }
    println!();
}
