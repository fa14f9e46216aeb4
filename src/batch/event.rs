//! What a subscriber receives: [`Event`].

use std::sync::Arc;

use crate::batch::change::ChangeBatch;
use crate::status::WatchStatus;

/// One message to a subscriber.
#[derive(Clone, Debug)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum Event {
    /// A batch of changes of one spec.
    Changes(Arc<ChangeBatch>),
    /// A new status snapshot of one spec (sent whenever its status changes).
    Status(Arc<WatchStatus>),
    /// The named spec was deleted; no more events will come for it (until it
    /// is applied again).
    Deleted(String),
}
