//! Publishing statuses: at the end of each pass (and during a long first
//! walk), the specs whose facts changed, as each owner noted, get their
//! status facts gathered from the owners and offered to `publish.rs`,
//! which publishes what a reader would see differ.

use super::Engine;
use super::publish::Facts;
use crate::index::SpecId;

impl Engine {
    /// Derives and offers the status of every spec whose facts changed.
    pub(super) fn publish(&mut self) {
        let mut touched = self.out.take_touched();
        touched.extend(self.index.take_touched());
        touched.extend(self.problems.take_touched());
        touched.extend(self.mounts.take_touched());
        touched.extend(self.recovery.take_touched());
        touched.extend(self.rescans.take_touched());
        touched.extend(self.holds.take_touched());
        touched.extend(self.contents.take_touched());
        if self.polls.take_changed() {
            // Which specs cover a polled directory can only be told by
            // looking: rare enough (the watch limit, links on a path
            // backend) to look at them all.
            touched.extend(self.specs.ids());
        }
        if touched.is_empty() {
            return;
        }
        touched.sort_unstable();
        touched.dedup();
        let mut any = false;
        for sid in touched {
            if let Some(facts) = self.facts(sid) {
                any |= self.out.offer(sid, facts);
            }
        }
        if any {
            self.out.notify();
        }
    }

    /// The status facts of `sid`, from their owners.
    fn facts(&self, sid: SpecId) -> Option<Facts> {
        let st = self.specs.get(sid)?;
        let (polled, link_polled) = if self.polls.is_empty() {
            (0, 0)
        } else {
            self.polls
                .count(|id| self.index.get(id).is_some_and(|n| n.covers(sid)))
        };
        let missing: Vec<String> = st
            .roots()
            .iter()
            .filter(|r| !self.index.root_present(sid, r))
            .map(|r| match crate::fs::blocked_by(r) {
                Some(f) => format!(
                    "{} (it cannot, while {} is not a directory)",
                    r.display(),
                    f.display()
                ),
                None => r.display().to_string(),
            })
            .collect();
        let errors = self.problems.dirs(sid).filter(|e| !e.is_empty());
        let down = self.recovery.down();
        let (hung, deadline) = self.polls.hung();
        let hung: Vec<String> = hung
            .iter()
            .filter_map(|&id| self.index.get(id))
            .filter(|n| n.covers(sid) || n.partial().iter().any(|p| p.spec == sid))
            .map(|n| n.path().display().to_string())
            .collect();
        let away: Vec<String> = st
            .roots()
            .iter()
            .filter(|r| self.mounts.away(r).is_some())
            .map(|r| r.display().to_string())
            .collect();
        let degraded = if missing.is_empty()
            && away.is_empty()
            && errors.is_none()
            && polled == 0
            && down.is_none()
            && hung.is_empty()
        {
            None
        } else {
            let mut parts = Vec::new();
            if !hung.is_empty() {
                let more = match hung.len() {
                    n if n > 3 => format!(" (and {} more)", n - 3),
                    _ => String::new(),
                };
                parts.push(format!(
                    "storage not answering: a poll of {}{more} under way for more than {deadline:?}",
                    hung[..hung.len().min(3)].join(", "),
                ));
            }
            if !away.is_empty() {
                parts.push(format!(
                    "storage gone: the file system holding {} is no longer mounted (the \
                     path leads to the one below it); the last known contents are kept, and \
                     what changed meanwhile is reported once it is back",
                    away.join(", ")
                ));
            }
            if let Some(d) = down {
                parts.push(format!(
                    "the event backend stopped ({}): nothing is reported until it is \
                     restarted ({} restarts tried so far)",
                    d.error, d.attempts
                ));
            }
            if link_polled > 0 {
                parts.push(format!(
                    "{link_polled} directories at or below followed symlinks polled every {:?} \
                     (the portable backend does not watch through links)",
                    self.polls.interval()
                ));
            }
            if polled > link_polled {
                let polled = polled - link_polled;
                parts.push(format!(
                    "{polled} directories polled every {:?} for want of OS watches ({})",
                    self.polls.interval(),
                    self.polls.limit_reason().unwrap_or("watch limit reached")
                ));
            }
            if !missing.is_empty() {
                parts.push(format!("waiting for {} to exist", missing.join(", ")));
            }
            if let Some(errors) = errors {
                let list: Vec<String> = errors
                    .iter()
                    .take(5)
                    .map(|(p, e)| format!("{}: {}", p.display(), e.msg))
                    .collect();
                let more = errors.len().saturating_sub(5);
                let tail = if more > 0 {
                    format!(" (and {more} more)")
                } else {
                    String::new()
                };
                parts.push(format!(
                    "{} directories not watched: {}{tail}",
                    errors.len(),
                    list.join("; ")
                ));
            }
            Some(parts.join("; "))
        };
        Some(Facts {
            name: st.name().to_owned(),
            generation: st.generation(),
            watched_dirs: self.index.covered_dirs(sid),
            polled_dirs: polled,
            roots: {
                let mut roots = st.root_statuses();
                for r in &mut roots {
                    r.unmounted_since = self.mounts.away(&r.path).map(|a| a.since);
                }
                roots
            },
            progress: self.progress.progress_of(sid),
            hashing_start: self.contents.starting(sid),
            watch_retries: self.recovery.attempts(sid),
            overflow_recoveries: self.recovery.overflows(sid),
            missed_by_os: self.rescans.missed(sid),
            last_error: self.problems.last(sid),
            degraded,
            vcs_lock: self.holds.vcs_lock(sid),
            holds: self.holds.status(sid),
        })
    }
}
