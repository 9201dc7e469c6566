//! The full-hash requests a session handed out and that are not completed
//! yet: a check needing a prefix one of them holds asks that request's
//! prefixes again, its noise included (see [`InFlightRequests::plan`]).

use blocksieve_format::api::MAX_PREFIXES_PER_REQUEST;
use rand::Rng;
use rand::seq::SliceRandom;

use crate::confirm::Versions;
use crate::prefix::{self, NoiseKey, PlannedRequest, RequestPrefix};

/// A full-hash request handed out and not yet completed: what a check of
/// the same prefixes meanwhile asks again.
#[derive(Debug)]
struct InFlight {
    id: u64,
    versions: Versions,
    prefixes: Vec<RequestPrefix>,
}

/// The most requests in flight remembered (a query the host drops is
/// never completed: the oldest are forgotten).
const MAX_IN_FLIGHT: usize = 64;

/// A session's full-hash requests handed out and not completed, oldest
/// first.
#[derive(Debug, Default)]
pub(super) struct InFlightRequests {
    requests: Vec<InFlight>,
    /// The id of the next one.
    next_id: u64,
    /// The session's noise key, drawn from the first generator a check
    /// gives ([`NoiseKey`]: each real prefix's noise the same every time).
    key: Option<NoiseKey>,
}

impl InFlightRequests {
    /// Records a request for `prefixes` at `versions`; its id, for
    /// [`Self::complete`].
    pub(super) fn add(&mut self, versions: &Versions, prefixes: &[RequestPrefix]) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        if self.requests.len() == MAX_IN_FLIGHT {
            self.requests.remove(0);
        }
        self.requests.push(InFlight {
            id,
            versions: versions.clone(),
            prefixes: prefixes.to_vec(),
        });
        id
    }

    /// Forgets request `id`: answered, or failed.
    pub(super) fn complete(&mut self, id: u64) {
        self.requests.retain(|f| f.id != id);
    }

    /// The request for the `misses` of a check at `versions`, and the real
    /// prefixes left out of it (over [`MAX_PREFIXES_PER_REQUEST`]). A miss
    /// that a request still in flight for the same versions holds is asked
    /// again with that request's prefixes, noise included: new noise
    /// around it would show it, by intersection, as the prefix the two
    /// requests share (the Rust agent waits for the first request instead:
    /// single flight). The other misses get noise of their own.
    pub(super) fn plan(
        &mut self,
        misses: &[RequestPrefix],
        versions: &Versions,
        noise: usize,
        rng: &mut impl Rng,
    ) -> (Option<PlannedRequest>, Vec<RequestPrefix>) {
        let key = self.key.get_or_insert_with(|| NoiseKey::new(rng)).clone();
        let mut again: Vec<RequestPrefix> = Vec::new();
        let mut fresh: Vec<RequestPrefix> = Vec::new();
        for &p in misses {
            let holding = self
                .requests
                .iter()
                .find(|f| f.versions == *versions && f.prefixes.contains(&p));
            match holding {
                Some(f) => {
                    for q in &f.prefixes {
                        if !again.contains(q) {
                            again.push(*q);
                        }
                    }
                }
                None => fresh.push(p),
            }
        }
        // One plan: a check's prefixes fit one request (`MAX_LISTS`).
        // Not sized by the lists' buckets (`listed` 0): one URL's few dozen
        // prefixes are one request, whose answer the routes' bucket limit
        // already bounds.
        let mut plans = if fresh.is_empty() {
            Vec::new()
        } else {
            prefix::plan_requests(&fresh, noise, 0, &key, rng)
        }
        .into_iter();
        let first = plans.next();
        let extra: Vec<RequestPrefix> = plans.flat_map(|p| p.real).collect();
        if again.is_empty() {
            return (first, extra);
        }
        let mut prefixes = again;
        for p in first.map(|f| f.prefixes).unwrap_or_default() {
            if !prefixes.contains(&p) {
                prefixes.push(p);
            }
        }
        if prefixes.len() > MAX_PREFIXES_PER_REQUEST {
            // Not reached by one URL's prefixes; asked anew.
            let mut plans = prefix::plan_requests(misses, noise, 0, &key, rng).into_iter();
            let first = plans.next();
            return (first, plans.flat_map(|p| p.real).collect());
        }
        prefixes.shuffle(rng);
        let mut real: Vec<RequestPrefix> = misses.iter().copied().filter(|p| !extra.contains(p)).collect();
        real.sort_unstable();
        real.dedup();
        (Some(PlannedRequest { prefixes, real }), extra)
    }
}
