//! The findings' facts that reach people as sentences, worded here once from their types (the JSON
//! keeps each sentence in its `text` field): the change a finding followed and why one replica
//! differs from its peers. A finding's steps are worded beside their types, in `steps.rs`.

use chrono::{DateTime, Utc};

use super::{Event, PrecededBy, ReplicaCause, ReplicaCauseKind};
use crate::units::sig;

impl PrecededBy {
    /// A finding's tie to the change it followed, worded here once: `began 2 min after a
    /// configuration change at 09:01:00 UTC: ...`, or for a problem there from the window's start
    /// (`from_start`, the window's start), `was there from the window's start at 09:00:00 UTC, 2 min
    /// after ...`.
    pub fn new(event: Event, lead_seconds: i64, from_start: Option<DateTime<Utc>>) -> PrecededBy {
        let clock = |t: &DateTime<Utc>| t.format("%H:%M:%S UTC").to_string();
        let lead = match lead_seconds {
            l if l < 60 => "right after".to_string(),
            l if l < 3600 => format!("{} min after", (l + 30) / 60),
            l => format!("{} h {} min after", l / 3600, (l % 3600 + 30) / 60),
        };
        let after = format!("{lead} {} at {}: {}", event.kind.phrase(), clock(&event.time), event.detail);
        let text = match from_start {
            None => format!("began {after}"),
            Some(start) => format!("was there from the window's start at {}, {after}", clock(&start)),
        };
        PrecededBy { event, lead_seconds, text }
    }
}

impl ReplicaCause {
    /// `load: a runs 25 requests at once against 8.5 on its peers (median), ...`, from its fields.
    pub fn words(&self) -> String {
        let (replica, running, peers) = (&self.replica, self.running.unwrap_or_default(), self.peers_running.unwrap_or_default());
        match self.kind {
            ReplicaCauseKind::Load => format!(
                "load: {replica} runs {} requests at once against {} on its peers (median), and its P95 ITL is {:.1}x theirs: it decodes a larger batch, not a faulty one",
                sig(running),
                sig(peers),
                self.itl_factor.unwrap_or_default()
            ),
            ReplicaCauseKind::Config => {
                let cap = self.value.unwrap_or_default();
                format!(
                    "config: {} {} on {replica}, {}{} on its peers: its running batch is held at {} with {} waiting while its peers run more",
                    self.setting.as_deref().unwrap_or("max_num_seqs"),
                    sig(cap),
                    if self.peers_capped { "" } else { "at least " },
                    sig(self.peers_value.unwrap_or_default()),
                    sig(cap),
                    sig(self.waiting.unwrap_or_default())
                )
            }
            ReplicaCauseKind::Hardware => format!(
                "hardware: neither its load ({} running against {} on its peers) nor a limit of its own explains it: the replica itself (its GPU or node) is the suspect",
                sig(running),
                sig(peers)
            ),
        }
    }
}
