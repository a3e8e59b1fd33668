//! In-process event log (the embedded default): a bounded ring of events per session.

use std::collections::{HashMap, VecDeque};

use bytes::Bytes;
use parking_lot::Mutex;

use super::{EventId, EventLog, StoredEvent, StreamId};

#[derive(Default)]
struct SessionLog {
    next_stream: u64,
    /// Next sequence number per live stream.
    seqs: HashMap<StreamId, u64>,
    events: VecDeque<StoredEvent>,
}

/// Keeps at most `capacity` events per session; the oldest go first.
pub struct InMemoryEventLog {
    capacity: usize,
    sessions: Mutex<HashMap<String, SessionLog>>,
}

impl InMemoryEventLog {
    pub fn new(capacity: usize) -> Self {
        InMemoryEventLog {
            capacity: capacity.max(1),
            sessions: Mutex::new(HashMap::new()),
        }
    }
}

impl EventLog for InMemoryEventLog {
    fn open_stream(&self, session: &str) -> StreamId {
        let mut sessions = self.sessions.lock();
        let log = sessions.entry(session.to_string()).or_default();
        log.next_stream += 1;
        let id = StreamId(log.next_stream);
        log.seqs.insert(id, 0);
        id
    }

    fn append(&self, session: &str, stream: StreamId, data: Bytes) -> EventId {
        let mut sessions = self.sessions.lock();
        let log = sessions.entry(session.to_string()).or_default();
        let seq = log.seqs.entry(stream).or_insert(0);
        *seq += 1;
        let id = EventId { stream, seq: *seq };
        if log.events.len() >= self.capacity {
            log.events.pop_front();
        }
        log.events.push_back(StoredEvent { id, data });
        id
    }

    fn replay_after(&self, session: &str, after: EventId) -> Option<Vec<StoredEvent>> {
        let sessions = self.sessions.lock();
        let log = sessions.get(session)?;
        let issued = *log.seqs.get(&after.stream)?;
        if after.seq > issued {
            return None;
        }
        Some(
            log.events
                .iter()
                .filter(|e| e.id.stream == after.stream && e.id.seq > after.seq)
                .cloned()
                .collect(),
        )
    }

    fn remove_session(&self, session: &str) {
        self.sessions.lock().remove(session);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meets_the_contract() {
        super::super::contract::run(&InMemoryEventLog::new(64));
    }

    #[test]
    fn is_bounded_per_session() {
        let log = InMemoryEventLog::new(3);
        let s = log.open_stream("s");
        let first = log.append("s", s, Bytes::from_static(b"0"));
        for _ in 0..5 {
            log.append("s", s, Bytes::from_static(b"x"));
        }
        assert_eq!(log.replay_after("s", first).unwrap().len(), 3);
    }
}
