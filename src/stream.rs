//! Subscriptions as `futures_core::Stream`s (cargo feature `stream`), for
//! async programs: no thread per subscriber, no polling timer.
//!
//! A stream is an ordinary subscriber (`batch/fanout.rs`: a bounded channel, a
//! backlog merged per path) whose reader is a task. It leaves its waker in
//! a [`Wake`] shared with the engine's side, which wakes it after every
//! delivery into the channel and when it lets go of the subscriber.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use crossbeam_channel::{Receiver, TryRecvError};
use futures_core::{FusedStream, Stream};

use crate::batch::change::ChangeBatch;
use crate::batch::event::Event;
use crate::batch::fanout::Wake;
use crate::status::WatchStatus;

/// The reader's half: the channel and the link to the engine's side.
/// Dropping it tells the engine to let go of the subscriber.
#[derive(Debug)]
struct Reader {
    rx: Receiver<Event>,
    wake: Arc<Wake>,
    /// `None` was returned: the stream has ended.
    done: bool,
}

impl Reader {
    fn poll_event(&mut self, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        if self.done {
            return Poll::Ready(None);
        }
        match self.rx.try_recv() {
            Ok(ev) => return Poll::Ready(Some(ev)),
            Err(TryRecvError::Disconnected) => return self.end(),
            Err(TryRecvError::Empty) => {}
        }
        self.wake.register(cx.waker());
        // A delivery between the first look and the registration woke
        // nobody: look again. Whether the engine has let go is read before
        // that look, so that every event it sent before is seen.
        let sender_gone = self.wake.sender_gone();
        match self.rx.try_recv() {
            Ok(ev) => Poll::Ready(Some(ev)),
            Err(TryRecvError::Disconnected) => self.end(),
            Err(TryRecvError::Empty) if sender_gone => self.end(),
            Err(TryRecvError::Empty) => Poll::Pending,
        }
    }

    fn end(&mut self) -> Poll<Option<Event>> {
        self.done = true;
        Poll::Ready(None)
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        self.wake.set_reader_gone();
    }
}

/// Every event of every spec, as a [`Stream`]: what
/// [`Manager::subscribe`](crate::Manager::subscribe)'s channel carries,
/// for an async task. Made by [`Manager::stream`](crate::Manager::stream),
/// which says what is promised; [`changes`](EventStream::changes) and
/// [`statuses`](EventStream::statuses) narrow it to one kind.
///
/// The stream ends (`None`) once the manager is dropped and every event
/// sent before has been read. Dropping the stream unsubscribes.
#[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
#[derive(Debug)]
#[must_use = "streams do nothing unless polled; dropping one unsubscribes"]
pub struct EventStream {
    reader: Reader,
}

impl EventStream {
    pub(crate) fn new(rx: Receiver<Event>, wake: Arc<Wake>) -> EventStream {
        EventStream {
            reader: Reader {
                rx,
                wake,
                done: false,
            },
        }
    }

    /// Only the change batches ([`Event::Changes`]); status snapshots and
    /// deletions are skipped.
    pub fn changes(self) -> ChangeStream {
        ChangeStream {
            reader: self.reader,
        }
    }

    /// Only the status snapshots ([`Event::Status`]); change batches and
    /// deletions are skipped.
    pub fn statuses(self) -> StatusStream {
        StatusStream {
            reader: self.reader,
        }
    }
}

impl Stream for EventStream {
    type Item = Event;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.get_mut().reader.poll_event(cx)
    }
}

impl FusedStream for EventStream {
    fn is_terminated(&self) -> bool {
        self.reader.done
    }
}

/// The change batches of every spec, as a [`Stream`]: an [`EventStream`]
/// without its status snapshots and deletions. Made by
/// [`EventStream::changes`].
#[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
#[derive(Debug)]
#[must_use = "streams do nothing unless polled; dropping one unsubscribes"]
pub struct ChangeStream {
    reader: Reader,
}

impl Stream for ChangeStream {
    type Item = Arc<ChangeBatch>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Arc<ChangeBatch>>> {
        let reader = &mut self.get_mut().reader;
        loop {
            match reader.poll_event(cx) {
                Poll::Ready(Some(Event::Changes(batch))) => return Poll::Ready(Some(batch)),
                Poll::Ready(Some(_)) => continue,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl FusedStream for ChangeStream {
    fn is_terminated(&self) -> bool {
        self.reader.done
    }
}

/// The status snapshots of every spec, as a [`Stream`]: an [`EventStream`]
/// without its change batches and deletions. Made by
/// [`EventStream::statuses`].
///
/// Each snapshot is sent when a spec's status changes; a reader that is
/// behind gets only the latest one of each spec.
#[cfg_attr(docsrs, doc(cfg(feature = "stream")))]
#[derive(Debug)]
#[must_use = "streams do nothing unless polled; dropping one unsubscribes"]
pub struct StatusStream {
    reader: Reader,
}

impl Stream for StatusStream {
    type Item = Arc<WatchStatus>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Arc<WatchStatus>>> {
        let reader = &mut self.get_mut().reader;
        loop {
            match reader.poll_event(cx) {
                Poll::Ready(Some(Event::Status(status))) => return Poll::Ready(Some(status)),
                Poll::Ready(Some(_)) => continue,
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

impl FusedStream for StatusStream {
    fn is_terminated(&self) -> bool {
        self.reader.done
    }
}
