//! The SSE event log: every server→client message of a session's SSE streams is appended here
//! before it is written, so a client reconnecting with `Last-Event-ID` misses nothing. The log
//! owns stream and event numbering, so ids stay unique across a session actor's restarts.

mod memory;

pub use memory::InMemoryEventLog;

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;

/// A stream of one session: the standalone GET stream, or the stream of one POST.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StreamId(pub u64);

/// An SSE event id: `<stream>-<seq>`. It names its stream, so a `Last-Event-ID` leads back to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct EventId {
    pub stream: StreamId,
    pub seq: u64,
}

impl fmt::Display for EventId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.stream.0, self.seq)
    }
}

impl FromStr for EventId {
    type Err = ();
    fn from_str(s: &str) -> Result<Self, ()> {
        let (stream, seq) = s.trim().split_once('-').ok_or(())?;
        Ok(EventId {
            stream: StreamId(stream.parse().map_err(|_| ())?),
            seq: seq.parse().map_err(|_| ())?,
        })
    }
}

/// A stored event: its id and the JSON-RPC message (empty for a priming event).
#[derive(Debug, Clone, PartialEq)]
pub struct StoredEvent {
    pub id: EventId,
    pub data: Bytes,
}

/// Storage for SSE events, keyed by session. Implementations bound what they keep per session.
pub trait EventLog: Send + Sync + 'static {
    /// A fresh stream id, never handed out before for this session.
    fn open_stream(&self, session: &str) -> StreamId;
    /// Appends an event to a stream and returns its id.
    fn append(&self, session: &str, stream: StreamId, data: Bytes) -> EventId;
    /// The events of `after.stream` that follow `after`, oldest first. `None` when the log knows
    /// nothing of that stream in this session (never opened, or already evicted).
    fn replay_after(&self, session: &str, after: EventId) -> Option<Vec<StoredEvent>>;
    /// Forgets a session (it ended).
    fn remove_session(&self, session: &str);
}

#[cfg(test)]
pub(crate) mod contract {
    //! The contract every `EventLog` backend must meet.
    use super::*;

    pub fn run(log: &dyn EventLog) {
        let a = log.open_stream("s1");
        let b = log.open_stream("s1");
        assert_ne!(a, b, "stream ids are unique within a session");
        let a1 = log.append("s1", a, Bytes::from_static(b"a1"));
        let b1 = log.append("s1", b, Bytes::from_static(b"b1"));
        let a2 = log.append("s1", a, Bytes::from_static(b"a2"));
        assert_ne!(a1, a2);
        assert_ne!(
            a1.to_string(),
            b1.to_string(),
            "event ids are unique across streams"
        );
        assert_eq!(a1.to_string().parse::<EventId>(), Ok(a1));
        let replay = log.replay_after("s1", a1).expect("stream known");
        assert_eq!(
            replay.iter().map(|e| e.data.clone()).collect::<Vec<_>>(),
            vec![Bytes::from_static(b"a2")]
        );
        assert!(log.replay_after("s1", a2).unwrap().is_empty());
        assert!(
            log.replay_after("other", a1).is_none(),
            "sessions do not see each other's events"
        );
        log.remove_session("s1");
        assert!(log.replay_after("s1", a1).is_none());
    }
}
