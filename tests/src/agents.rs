//! Agents for the fake servers of [`crate::fake`], trusting the test
//! publisher key ([`crate::snapshot::trusted`]). The fakes themselves know
//! only the wire format; this module ties them to the agent.

use blocksieve_agent::{Agent, AgentBuilder};

use crate::fake::{FakePublisher, RawServer};
use crate::snapshot::trusted;

impl FakePublisher {
    /// An agent builder for this publisher's threat lists `lists`, trusting
    /// the publisher key.
    pub fn agent_builder(&self, lists: &[&str]) -> AgentBuilder {
        Agent::builder(&self.base_url)
            .lists(lists.iter().copied())
            .trusted_key(trusted())
    }

    /// An agent for this publisher's threat lists `lists`, trusting the
    /// publisher key, with the default configuration.
    ///
    /// # Panics
    ///
    /// When the agent cannot be built (e.g. an invalid list name).
    pub fn agent(&self, lists: &[&str]) -> Agent {
        self.agent_builder(lists).build().expect("agent builds")
    }
}

impl RawServer {
    /// An agent builder for this server's `malware` list, trusting the
    /// publisher key.
    pub fn agent_builder(&self) -> AgentBuilder {
        Agent::builder(&self.base_url)
            .list("malware")
            .trusted_key(trusted())
    }
}
