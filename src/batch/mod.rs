//! The batch model: what a consumer is handed, and how raw changes become
//! it. All pure.
//!
//! - `change`: [`Change`](crate::Change), [`ChangeBatch`](crate::ChangeBatch)
//!   and the one netting rule (what existed before and exists now gives
//!   the kind);
//! - `content`: [`ContentHash`](crate::ContentHash), what a file held;
//! - `event`: [`Event`](crate::Event), what a subscriber receives;
//! - `coalesce`: an open batch, netting raw changes per path (and pairing
//!   renames);
//! - `fanout`: a slow subscriber's backlog, merged per path;
//! - `journal`: the changes-since journal
//!   ([`Manager::changes_since`](crate::Manager::changes_since)).

pub(crate) mod change;
pub(crate) mod coalesce;
pub(crate) mod content;
pub(crate) mod event;
pub(crate) mod fanout;
pub(crate) mod journal;
