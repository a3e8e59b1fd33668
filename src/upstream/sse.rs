//! Reading Server-Sent Events as an upstream sends them (the HTML living standard's event stream
//! format): bytes in, events out, across any chunking, with `\n`, `\r\n` or `\r` line ends.

/// One event: its `data` lines joined with `\n`, the `id` it set (if any).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Event {
    pub data: String,
    pub id: Option<String>,
    pub event: Option<String>,
}

/// An incremental decoder. `max_event` bounds the bytes one event may buffer; past it the stream
/// is refused (an upstream cannot make the server hold an unbounded event).
pub struct Decoder {
    line: Vec<u8>,
    /// The previous byte was a `\r` (a following `\n` belongs to the same line end).
    after_cr: bool,
    data: String,
    has_data: bool,
    id: Option<String>,
    event: Option<String>,
    /// The reconnection time the stream last set (`retry:`), in ms.
    pub retry_ms: Option<u64>,
    /// The last event id seen (what a resumption sends as `Last-Event-ID`).
    pub last_id: Option<String>,
    max_event: usize,
}

#[derive(Debug, PartialEq, thiserror::Error)]
#[error("an event of the stream is larger than {0} bytes")]
pub struct TooLarge(pub usize);

impl Decoder {
    pub fn new(max_event: usize) -> Self {
        Decoder {
            line: Vec::new(),
            after_cr: false,
            data: String::new(),
            has_data: false,
            id: None,
            event: None,
            retry_ms: None,
            last_id: None,
            max_event,
        }
    }

    /// Feeds bytes; returns the events they completed.
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Event>, TooLarge> {
        let mut out = Vec::new();
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(event) = self.line_done(&line) {
                        out.push(event);
                    }
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
            if self.line.len() + self.data.len() > self.max_event {
                return Err(TooLarge(self.max_event));
            }
        }
        Ok(out)
    }

    fn line_done(&mut self, line: &[u8]) -> Option<Event> {
        if line.is_empty() {
            // Dispatch (an event without data is dropped, its id kept).
            let id = self.id.take();
            if let Some(id) = &id {
                self.last_id = Some(id.clone());
            }
            let event = self.event.take();
            if !std::mem::take(&mut self.has_data) {
                return None;
            }
            return Some(Event {
                data: std::mem::take(&mut self.data),
                id,
                event,
            });
        }
        if line[0] == b':' {
            return None; // a comment (heartbeats)
        }
        let text = String::from_utf8_lossy(line);
        let (field, value) = match text.find(':') {
            Some(i) => {
                let value = &text[i + 1..];
                (&text[..i], value.strip_prefix(' ').unwrap_or(value))
            }
            None => (&text[..], ""),
        };
        match field {
            "data" => {
                if self.has_data {
                    self.data.push('\n');
                }
                self.data.push_str(value);
                self.has_data = true;
            }
            "id" if !value.contains('\0') => self.id = Some(value.to_string()),
            "event" => self.event = Some(value.to_string()),
            "retry" => {
                if let Ok(ms) = value.parse() {
                    self.retry_ms = Some(ms);
                }
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same stream split at every byte, with every line ending, decodes to the same events;
    /// comments and data-less events carry nothing but an id.
    #[test]
    fn events_decode_across_any_split_and_line_end() {
        for end in ["\n", "\r\n", "\r"] {
            let stream = [
                ": heartbeat",
                "retry: 250",
                "id: s-1",
                "event: message",
                "data: {\"a\":",
                "data: 1}",
                "",
                "id: s-2",
                "",
                "data:x",
                "",
            ]
            .join(end)
                + end;
            for split in 0..stream.len() {
                let mut d = Decoder::new(1024);
                let mut events = d.push(&stream.as_bytes()[..split]).unwrap();
                events.extend(d.push(&stream.as_bytes()[split..]).unwrap());
                assert_eq!(
                    events,
                    vec![
                        Event {
                            data: "{\"a\":\n1}".into(),
                            id: Some("s-1".into()),
                            event: Some("message".into())
                        },
                        Event {
                            data: "x".into(),
                            id: None,
                            event: None
                        }
                    ],
                    "line end {end:?}, split at {split}"
                );
                assert_eq!(d.retry_ms, Some(250));
                assert_eq!(d.last_id.as_deref(), Some("s-2"));
            }
        }
    }

    #[test]
    fn an_event_past_the_bound_is_refused() {
        let mut d = Decoder::new(16);
        assert!(d.push(b"data: 0123456789\n").is_ok());
        assert_eq!(d.push(b"data: 0123456789\n"), Err(TooLarge(16)));
    }
}
