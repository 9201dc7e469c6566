//! A real publisher daemon on 127.0.0.1:0 over real files.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use blocksieve_format::TrustedKey;
use blocksieve_publisher::{Config, ListConfig, Publisher, SourceConfig};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// [`Publisher::open`] on a data directory that a publisher of this
/// process has just let go of (dropped or stopped), tried again for up to
/// 5 s while its lock is held by this same process: a child process forked
/// meanwhile by a test running beside this one holds a copy of every open
/// descriptor, the lock's included, until it execs. Any other error, or a
/// lock held by another process, is returned at once.
///
/// # Errors
///
/// What [`Publisher::open`] returns.
pub fn reopen(cfg: Config) -> Result<Publisher, blocksieve_publisher::Error> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match Publisher::open(cfg.clone()) {
            Err(blocksieve_publisher::Error::InUse {
                holder: Some(holder), ..
            }) if holder == std::process::id() && std::time::Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// A configuration with one list `name` over `sources`, data in `data_dir`.
/// It rebuilds once a year: only the start-up build and the test's own
/// builds run, never one the wall clock happens to schedule (the default
/// rebuilds at :00 and :30, which a test waiting for one version would see
/// as a newer one).
pub fn config(data_dir: &Path, name: &str, sources: Vec<SourceConfig>) -> Config {
    Config {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        schedule: "0 0 0 1 1 *".to_owned(),
        data_dir: data_dir.to_owned(),
        lists: vec![ListConfig::new(name, sources)],
        ..Config::default()
    }
}

/// A publisher daemon serving on 127.0.0.1:0 until stopped or dropped.
pub struct RunningPublisher {
    /// Where it listens.
    pub addr: SocketAddr,
    /// The publisher (shares state with the running server).
    pub publisher: Publisher,
    shutdown: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<Result<(), blocksieve_publisher::Error>>>,
}

impl RunningPublisher {
    /// Opens `config` and runs the daemon (initial build in the background).
    ///
    /// # Panics
    ///
    /// When the publisher cannot be opened or the port cannot be bound.
    pub async fn start(config: Config) -> Self {
        Self::run(Publisher::open(config).expect("open publisher")).await
    }

    /// [`Self::start`], its builds recording `unix_seconds` as their time
    /// ([`Publisher::set_build_time`]): the version every build takes when
    /// there is no newer one before it, as two publishers whose builds
    /// start in the same second get.
    ///
    /// # Panics
    ///
    /// As [`Self::start`].
    pub async fn start_at(config: Config, unix_seconds: u64) -> Self {
        let publisher = Publisher::open(config).expect("open publisher");
        publisher.set_build_time(unix_seconds);
        Self::run(publisher).await
    }

    /// Runs a publisher already opened (by [`reopen`], say) as
    /// [`Self::start`] does.
    pub async fn run_opened(publisher: Publisher) -> Self {
        Self::run(publisher).await
    }

    async fn run(publisher: Publisher) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("local addr");
        let (tx, rx) = oneshot::channel();
        let task = tokio::spawn(publisher.clone().run(listener, async move {
            let _ = rx.await;
        }));
        Self {
            addr,
            publisher,
            shutdown: Some(tx),
            task: Some(task),
        }
    }

    /// `http://127.0.0.1:<port>`.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The key agents must trust.
    pub fn public_key(&self) -> TrustedKey {
        self.publisher.public_key().clone()
    }

    /// Waits until every list has a snapshot.
    ///
    /// # Panics
    ///
    /// When that takes longer than `timeout`.
    pub async fn wait_ready(&self, timeout: Duration) {
        assert!(
            blocksieve_publisher::wait_until_ready(&self.publisher.state(), timeout).await,
            "publisher not ready within {timeout:?}"
        );
    }

    /// Stops the server and waits for it to drain.
    pub async fn stop(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RunningPublisher {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
    }
}

/// Polls `done` every 20 ms for up to 20 s; panics naming `what` if it
/// never holds.
pub async fn until(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..1000 {
        if done() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("timed out waiting for {what}");
}
