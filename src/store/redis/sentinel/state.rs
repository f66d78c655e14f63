//! What the sentinels say, as pure data: their pub/sub announcements ([`Event`]), their answers
//! to a re-ask ([`View`]), and the one rule that turns both into where writes go ([`Route`]).
//! No I/O here; [`super`] feeds it and acts on the result.
//!
//! Message formats are the ones `redis-server --sentinel` publishes (sentinel.c,
//! `sentinelEvent`): an instance is `<type> <name> <ip> <port>`, followed by
//! `@ <master name> <master ip> <master port>` when it is not a master; `+switch-master` is
//! `<master name> <old ip> <old port> <new ip> <new port>`.

use std::collections::HashMap;
use std::fmt;

/// A Redis node as the sentinels name it: host (an IP, or a name with `announce-hostnames`)
/// and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Node {
    pub host: String,
    pub port: u16,
}

impl Node {
    fn parse(host: &str, port: &str) -> Option<Node> {
        Some(Node {
            host: host.to_string(),
            port: port.parse().ok()?,
        })
    }
}

impl fmt::Display for Node {
    /// `host:port`, the form the logs use.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host, self.port)
    }
}

/// Channels announcing that a failover of a master started or progresses, up to and including
/// the promotion of its replica. From the first of them on, the old master must take no write:
/// the promoted replica stops replicating it.
pub const FAILOVER_CHANNELS: &[&str] = &[
    "+try-failover",
    "+elected-leader",
    "+failover-state-select-slave",
    "+selected-slave",
    "+failover-state-send-slaveof-noone",
    "+failover-state-wait-promotion",
    "+promoted-slave",
    "+failover-state-reconf-slaves",
];

/// The channel naming the new master once a failover is done.
pub const SWITCH_CHANNEL: &str = "+switch-master";

/// Channels saying a failover ended (done, timed out or abandoned): a reason to ask again.
pub const SETTLED_CHANNELS: &[&str] = &[
    "+failover-end",
    "+failover-end-for-timeout",
    "-failover-abort-not-elected",
    "-failover-abort-no-good-slave",
    "-failover-abort-slave-timeout",
];

/// Every channel the gateway subscribes to on each sentinel.
pub fn channels() -> Vec<&'static str> {
    let mut all = vec![SWITCH_CHANNEL];
    all.extend_from_slice(FAILOVER_CHANNELS);
    all.extend_from_slice(SETTLED_CHANNELS);
    all
}

/// One announcement about the watched master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// `+switch-master`: the sentinels name `to` the master from now on.
    Switched { to: Node },
    /// A failover of the master at `of` is under way.
    FailingOver { of: Node },
    /// A failover ended one way or the other; the sentinels should be asked again.
    Settled,
}

/// The event `payload` on `channel` means for the master named `master`; `None` for other
/// masters, other channels and payloads of another shape.
pub fn parse_event(channel: &str, payload: &str, master: &str) -> Option<Event> {
    let words: Vec<&str> = payload.split_whitespace().collect();
    if channel == SWITCH_CHANNEL {
        return match words[..] {
            [name, _, _, host, port, ..] if name == master => Some(Event::Switched {
                to: Node::parse(host, port)?,
            }),
            _ => None,
        };
    }
    // `master <name> <ip> <port> ...` or `<type> <name> <ip> <port> @ <master> <ip> <port> ...`
    let (name, host, port) = match words[..] {
        ["master", name, host, port, ..] => (name, host, port),
        [_, _, _, _, "@", name, host, port, ..] => (name, host, port),
        _ => return None,
    };
    if name != master {
        return None;
    }
    if FAILOVER_CHANNELS.contains(&channel) {
        Some(Event::FailingOver {
            of: Node::parse(host, port)?,
        })
    } else if SETTLED_CHANNELS.contains(&channel) {
        Some(Event::Settled)
    } else {
        None
    }
}

/// One sentinel's answer about the watched master: `SENTINEL MASTER <name>` (the address it
/// monitors, its config epoch and flags) and `SENTINEL GET-MASTER-ADDR-BY-NAME <name>` (the
/// address clients should use, which is the promoted replica's once the failover reached it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct View {
    /// The address to write to, by this sentinel.
    pub named: Node,
    /// The address this sentinel monitors as the master.
    pub monitored: Node,
    /// Its configuration epoch: the higher, the more recent its word.
    pub epoch: u64,
    /// Its flags carry `failover_in_progress`: it is failing `monitored` over.
    pub failing_over: bool,
}

impl View {
    /// From the two replies; `None` when a field is missing or malformed.
    pub fn from_replies(master: &HashMap<String, String>, named: (String, u16)) -> Option<View> {
        let field = |k: &str| master.get(k).map(String::as_str);
        Some(View {
            named: Node {
                host: named.0,
                port: named.1,
            },
            monitored: Node::parse(field("ip")?, field("port")?)?,
            epoch: field("config-epoch")?.parse().ok()?,
            failing_over: field("flags")?
                .split(',')
                .any(|f| f == "failover_in_progress"),
        })
    }
}

/// The node the sentinels name: the address of the highest config epoch; among answers of that
/// epoch, the address most of them give (the first such, in `redis.urls` order, on a tie).
pub fn choose(views: &[View]) -> Option<Node> {
    let top = views.iter().map(|v| v.epoch).max()?;
    let latest: Vec<&Node> = views
        .iter()
        .filter(|v| v.epoch == top)
        .map(|v| &v.named)
        .collect();
    let votes = |n: &Node| latest.iter().filter(|m| **m == n).count();
    let mut best = latest[0];
    for n in &latest[1..] {
        if votes(n) > votes(best) {
            best = n;
        }
    }
    Some(best.clone())
}

/// Where decisions go: the master the sentinels name, and whether writes to it are held back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Route {
    pub master: Node,
    /// A failover of `master` is under way: it must take no write.
    pub held: bool,
}

/// The watcher's state: the master last named and the node being failed over. Every event
/// bumps `seq`; an ask's answers apply only if no event came in while it ran (an answer
/// collected before an announcement must not undo it).
#[derive(Debug, Default)]
pub struct Watch {
    master: Option<Node>,
    failing_over: Option<Node>,
    seq: u64,
}

impl Watch {
    /// Where decisions go now; `None` before the sentinels named anyone.
    pub fn route(&self) -> Option<Route> {
        let master = self.master.clone()?;
        let held = self.failing_over.as_ref() == Some(&master);
        Some(Route { master, held })
    }

    /// The sequence number to hand back to [`Watch::on_views`] with the answers of an ask
    /// that starts now.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Applies an announcement. Returns whether the sentinels should be asked again now.
    pub fn on_event(&mut self, event: &Event) -> bool {
        self.seq += 1;
        match event {
            Event::Switched { to } => {
                self.master = Some(to.clone());
                // Confirm with every sentinel (and learn whether another failover started).
                true
            }
            Event::FailingOver { of } => {
                self.failing_over = Some(of.clone());
                false
            }
            Event::Settled => true,
        }
    }

    /// Applies the answers of an ask that started at sequence `started` ([`Watch::seq`]).
    /// Returns false when they were discarded: an event came in meanwhile, or no sentinel
    /// answered (then nothing changes: a hold stays until a sentinel says otherwise).
    pub fn on_views(&mut self, started: u64, views: &[View]) -> bool {
        if started != self.seq {
            return false;
        }
        let Some(named) = choose(views) else {
            return false;
        };
        let failing: Vec<&Node> = views
            .iter()
            .filter(|v| v.failing_over)
            .map(|v| &v.monitored)
            .collect();
        self.failing_over = failing
            .iter()
            .find(|n| ***n == named)
            .or(failing.first())
            .map(|n| (*n).clone());
        self.master = Some(named);
        true
    }
}
