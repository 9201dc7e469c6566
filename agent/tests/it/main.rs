//! Agent tests against fake publishers on real sockets (127.0.0.1:0), from
//! `blocksieve_tests::fake`: one binary, one module per area.
#![allow(clippy::unwrap_used, missing_docs, unreachable_pub, dead_code)]

mod background;
mod behind;
mod cache_lock;
mod chain_end;
mod check;
mod clock;
mod config;
mod crash;
mod deltas;
mod faults;
mod kept_chain;
mod not_served;
mod persistence;
mod privacy;
mod readers;
mod redirects;
mod soak;
mod trust;
mod update;

/// Held by the tests that measure under load or make it (the readers'
/// swap count, the soak's two busy threads): run side by side, the soak
/// took the cores the readers' updater needs (7 swaps where 10 are asked).
pub static CPU_BOUND: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// [`CPU_BOUND`], whatever a test that held it before did.
pub fn cpu_bound() -> std::sync::MutexGuard<'static, ()> {
    CPU_BOUND
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
