//! End-to-end tests: a real publisher on 127.0.0.1:0 over real fixture
//! files, and real agents. One binary, one module per area.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod api;
mod deltas;
mod end_to_end;
mod feeds;
mod full_hashes;
mod hostile;
mod immutable_buckets;
mod key_rotation;
mod last_good_content;
mod load;
mod memory;
mod next_check;
mod outage;
mod publisher;
mod replica;
mod retired_list;
mod slow_clients;
mod source_headers;
mod stalled_builder;
mod status;
mod store;
mod store_races;
mod tidy;
