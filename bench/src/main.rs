//! The measurements of blocksieve's benchmark suite that criterion does not
//! fit, and the table rows of the ones it does. `bench/run.sh` runs the
//! whole suite and writes `BENCHMARKS.md`; each step by hand, from the
//! repository root, once the publisher has built the 854k list (see
//! `bench/run.sh`):
//!
//! ```sh
//! cargo build --release -p blocksieve-bench
//! target/release/blocksieve-bench swap --snapshot S --signing-key K --out target/bench
//! target/release/blocksieve-bench footprint --snapshot S --signing-key K --out target/bench
//! target/release/blocksieve-bench rows url --criterion target/criterion --out target/bench
//! ```
//!
//! - `swap` (row 5): `lookup_local` p99 while snapshots swap every 100 ms
//!   vs without swaps ([`swap`]);
//! - `footprint` (row 6): RSS of an agent holding the list, and process
//!   start to first answered lookup from the cache directory ([`footprint`]);
//! - `rows url|probe` (rows 1, 2): criterion's medians as table rows
//!   ([`criterion_rows`]);
//! - `profile-url`: row 1's workloads once each, for callgrind ([`profile`]).
//!
//! Real data comes from `../shared/data` beside the repository, or
//! `BLOCKSIEVE_DATA`.

use std::time::Instant;

use clap::{Parser, Subcommand};

mod criterion_rows;
mod footprint;
mod profile;
mod report;
mod swap;
mod workload;

#[derive(Debug, Parser)]
#[command(about = "blocksieve benchmark measurements (see bench/run.sh)")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Row 5: lookup_local latency with snapshots swapping every 100 ms vs without.
    Swap(swap::Args),
    /// Row 6: agent RSS and start-up to the first lookup from the cache directory.
    Footprint(footprint::Args),
    /// Rows 1 and 2 from criterion's output.
    Rows(criterion_rows::Args),
    /// Row 1's workloads once each, for callgrind.
    ProfileUrl(profile::Args),
    /// Row 6's child process.
    #[command(hide = true)]
    FootprintChild(footprint::ChildArgs),
    /// Row 6's reference: a process that only starts and answers.
    #[command(hide = true)]
    Noop,
}

fn main() -> anyhow::Result<()> {
    let started = Instant::now();
    match Cli::parse().command {
        Command::Noop => {
            println!("{{}}");
            Ok(())
        }
        Command::FootprintChild(args) => footprint::child(&args, started),
        Command::Swap(args) => swap::run(&args),
        Command::Footprint(args) => footprint::run(&args),
        Command::Rows(args) => criterion_rows::run(&args),
        Command::ProfileUrl(args) => profile::run(&args),
    }
}
