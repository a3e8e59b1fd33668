//! `Last-Event-ID` (the SSE event ids `<stream>-<seq>` of `cluster::EventId`), as the transport
//! reads the header: bytes → `HeaderValue::to_str` → `parse::<EventId>()`.
//!
//! Input: the header bytes; its first 16 bytes also give a (stream, seq) pair to format.
//!
//! Invariants:
//! - formatter → parser: every `EventId` formats to a string that parses back to it;
//! - parser → formatter: a parsed id formats to its canonical spelling, which parses to the
//!   same id; an input already in canonical spelling (digits without leading zeros or sign,
//!   around one `-`) formats back to exactly itself;
//! - a stream id built from an ownership epoch and a count keeps both (`StreamId::new`).
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_harbor::cluster::{EventId, StreamId, STREAM_BITS};

fn canonical_number(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) && (s == "0" || !s.starts_with('0'))
}

fuzz_target!(|data: &[u8]| {
    if data.len() >= 16 {
        let stream = u64::from_le_bytes(data[..8].try_into().unwrap());
        let seq = u64::from_le_bytes(data[8..16].try_into().unwrap());
        let id = EventId {
            stream: StreamId(stream),
            seq,
        };
        assert_eq!(id.to_string().parse::<EventId>(), Ok(id));
        // Stream ids: the epoch in the high bits, the count in the low STREAM_BITS.
        let epoch = stream >> (STREAM_BITS + 1); // small enough to keep all its bits
        let n = seq & ((1 << STREAM_BITS) - 1);
        let s = StreamId::new(epoch, n);
        assert_eq!(
            (s.0 >> STREAM_BITS, s.0 & ((1 << STREAM_BITS) - 1)),
            (epoch, n)
        );
    }

    // As the transport reads the header.
    let Ok(header) = actix_web::http::header::HeaderValue::from_bytes(data) else {
        return;
    };
    let Ok(text) = header.to_str() else {
        return;
    };
    if let Ok(id) = text.parse::<EventId>() {
        let formatted = id.to_string();
        assert_eq!(formatted.parse::<EventId>(), Ok(id), "{formatted:?}");
        let trimmed = text.trim();
        if let Some((a, b)) = trimmed.split_once('-') {
            if canonical_number(a) && canonical_number(b) {
                assert_eq!(formatted, trimmed);
            }
        }
    }
});
