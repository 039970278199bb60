//! Incident updates in the bucket: one small JSON object per update,
//! `updates/<node>/<check>/<first failure, unix ms>-<update time, unix ms>.json`,
//! beside the history's `history/<node>/`. The name is the update's key in
//! the store, so shipping an update again rewrites the same object with
//! the same bytes, and a restore puts it back where it was.
//!
//! The replicator ships the updates the store marked unshipped in every
//! cycle, before the history's segments ([`ship`]); a failure fails the
//! cycle, which the next interval retries, marks kept. [`restore`] lists
//! the node's updates and puts each back; a damaged or oversized object is
//! reported by name and skipped.

use std::fmt;

use super::bucket::{Bucket, Capped};
use super::{blocking, ReplicateError};
use crate::clock::unix_millis;
use crate::incident_update::{IncidentUpdate, MAX_TEXT};
use crate::sanitize::escape_controls;
use crate::store::IncidentUpdates;

/// The largest object an update can be: its text JSON-escaped (six bytes a
/// character at most) and the few fields around it.
pub const MAX_UPDATE_BYTES: u64 = 6 * MAX_TEXT as u64 + 4096;

/// Where a node's updates are.
pub fn node_prefix(node: &str) -> String {
    format!("updates/{node}/")
}

/// The object name of `update`.
pub fn object_name(node: &str, update: &IncidentUpdate) -> String {
    format!(
        "{}{}/{}-{}.json",
        node_prefix(node),
        update.check,
        unix_millis(update.since),
        unix_millis(update.at)
    )
}

/// Copies every unshipped update to the bucket, clearing each one's mark
/// once the bucket has it. Returns how many were copied.
pub async fn ship(bucket: &Bucket, updates: &IncidentUpdates) -> Result<u64, ReplicateError> {
    let pending = {
        let updates = updates.clone();
        blocking(move || updates.unshipped()).await??
    };
    let mut shipped = 0;
    for update in pending {
        // Invariant: strings and times only.
        let bytes = serde_json::to_vec(&update).expect("updates serialise to JSON");
        bucket
            .put(&object_name(bucket.node(), &update), bytes)
            .await?;
        let updates = updates.clone();
        blocking(move || updates.shipped(&update)).await??;
        shipped += 1;
    }
    Ok(shipped)
}

/// What a restore did with the node's updates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdatesRestored {
    /// Objects listed under `updates/<node>/`.
    pub listed: usize,
    /// Put back (the others were already there, or refused).
    pub added: usize,
    /// Objects that are not an update, by name, with why.
    pub refused: Vec<(String, String)>,
}

impl fmt::Display for UpdatesRestored {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "incident updates: {} listed, {} added",
            self.listed, self.added
        )?;
        for (name, why) in &self.refused {
            // Names come from the bucket: whoever can write there chooses them.
            write!(f, "\nignored {}: {why}", escape_controls(name))?;
        }
        Ok(())
    }
}

/// Puts every update of `bucket`'s node back into `updates`; restoring
/// twice adds nothing the second time.
pub async fn restore(
    bucket: &Bucket,
    updates: &IncidentUpdates,
) -> Result<UpdatesRestored, ReplicateError> {
    let node = bucket.node().to_string();
    let mut names = Vec::new();
    bucket
        .list(&node_prefix(&node), &mut |name| names.push(name))
        .await?;
    let mut report = UpdatesRestored {
        listed: names.len(),
        ..UpdatesRestored::default()
    };
    for name in names {
        let update = match bucket.get_capped(&name, MAX_UPDATE_BYTES, None).await? {
            Capped::Found { bytes, .. } => read(&node, &name, &bytes),
            Capped::Oversized { size, .. } => Err(format!(
                "it is {size} bytes, more than an update can be ({MAX_UPDATE_BYTES})"
            )),
            Capped::Missing | Capped::Unchanged => {
                Err("it was listed but is gone: deleted while restoring?".to_string())
            }
        };
        let update = match update {
            Ok(update) => update,
            Err(why) => {
                report.refused.push((name, why));
                continue;
            }
        };
        let target = updates.clone();
        if blocking(move || target.restore(&update)).await?? {
            report.added += 1;
        }
    }
    Ok(report)
}

/// The update in `bytes`, if it is one and its name is its own.
fn read(node: &str, name: &str, bytes: &[u8]) -> Result<IncidentUpdate, String> {
    let update: IncidentUpdate =
        serde_json::from_slice(bytes).map_err(|err| format!("not an incident update: {err}"))?;
    if let Some(why) = IncidentUpdate::refuse_text(&update.text) {
        return Err(why);
    }
    if object_name(node, &update) != name {
        return Err(format!(
            "its name is not the one its content gives ({})",
            escape_controls(&object_name(node, &update))
        ));
    }
    Ok(update)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alert::IncidentId;
    use crate::incident_update::UpdateState;
    use time::macros::datetime;

    fn update() -> IncidentUpdate {
        let since = datetime!(2026-12-07 10:00 UTC);
        IncidentUpdate {
            check: "site".to_string(),
            incident: IncidentId::new("site", since),
            since,
            at: datetime!(2026-12-07 10:05:00.250 UTC),
            state: UpdateState::Identified,
            text: "DNS".to_string(),
        }
    }

    #[test]
    fn an_update_reads_back_only_under_its_own_name() {
        let name = object_name("fra", &update());
        assert_eq!(name, "updates/fra/site/1796637600000-1796637900250.json");
        let bytes = serde_json::to_vec(&update()).unwrap();
        assert_eq!(read("fra", &name, &bytes).unwrap(), update());
        let moved = read("fra", "updates/fra/site/1-2.json", &bytes).unwrap_err();
        assert!(moved.contains("not the one its content gives"), "{moved}");
        let junk = read("fra", &name, b"{}").unwrap_err();
        assert!(junk.starts_with("not an incident update"), "{junk}");
    }
}
