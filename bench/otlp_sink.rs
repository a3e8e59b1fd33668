//! `mcp-harbor-bench --otlp-sink`: an OTLP/HTTP receiver for bench/telemetry.sh. It answers 200
//! to every export (what a collector does) and counts what arrived: the spans by name and, per
//! `mcp.method.name`, the last cumulative count of `mcp.server.operation.duration`. `GET /counts`
//! prints them. It walks the protobuf wire format without decoding what it does not count, so the
//! sink's own CPU stays small beside the servers it measures.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Counts {
    bytes: u64,
    exports: u64,
    spans: BTreeMap<String, u64>,
    operations: BTreeMap<String, u64>,
    unreadable: u64,
}

/// Serves until killed; prints the port first.
pub fn serve() -> Result<(), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| format!("otlp sink: {e}"))?;
    let port = listener
        .local_addr()
        .map_err(|e| format!("otlp sink: {e}"))?
        .port();
    println!("{port}");
    let _ = std::io::stdout().flush();
    let counts = Arc::new(Mutex::new(Counts::default()));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let counts = counts.clone();
        std::thread::spawn(move || {
            let _ = connection(stream, &counts);
        });
    }
    Ok(())
}

fn connection(stream: TcpStream, counts: &Mutex<Counts>) -> std::io::Result<()> {
    // One write per answer, sent at once (no Nagle wait behind the exporter's delayed ACK).
    stream.set_nodelay(true)?;
    let mut reader = BufReader::with_capacity(1 << 16, stream.try_clone()?);
    let mut writer = stream;
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line)? == 0 {
            return Ok(());
        }
        let mut length = 0usize;
        loop {
            let mut line = String::new();
            if reader.read_line(&mut line)? == 0 {
                return Ok(());
            }
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some((name, value)) = line.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        let path = request_line.split_whitespace().nth(1).unwrap_or("");
        let answer = if request_line.starts_with("GET") && path == "/counts" {
            report(&counts.lock().unwrap_or_else(|e| e.into_inner()))
        } else {
            let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
            c.bytes += body.len() as u64;
            c.exports += 1;
            let read = if path.ends_with("/v1/traces") {
                count_spans(&body, &mut c.spans)
            } else if path.ends_with("/v1/metrics") {
                count_operations(&body, &mut c.operations)
            } else {
                Some(())
            };
            if read.is_none() {
                c.unreadable += 1;
            }
            String::new()
        };
        let response = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n\r\n{answer}",
            answer.len()
        );
        writer.write_all(response.as_bytes())?;
    }
}

fn report(c: &Counts) -> String {
    let mut out = format!(
        "received {} bytes in {} exports ({} unreadable)\n",
        c.bytes, c.exports, c.unreadable
    );
    for (name, n) in &c.spans {
        out.push_str(&format!("span {n} {name}\n"));
    }
    for (method, n) in &c.operations {
        out.push_str(&format!("operations {n} {method}\n"));
    }
    out
}

/// ExportTraceServiceRequest: resource_spans (1) → scope_spans (2) → spans (2) → name (5).
fn count_spans(body: &[u8], spans: &mut BTreeMap<String, u64>) -> Option<()> {
    for rs in submessages(body, 1)? {
        for ss in submessages(rs, 2)? {
            for span in submessages(ss, 2)? {
                let name = submessages(span, 5)?.into_iter().next().unwrap_or_default();
                *spans
                    .entry(String::from_utf8_lossy(name).into_owned())
                    .or_default() += 1;
            }
        }
    }
    Some(())
}

/// ExportMetricsServiceRequest: resource_metrics (1) → scope_metrics (2) → metrics (2) → name
/// (1), histogram (9) → data_points (1) → attributes (9), count (4, fixed64). Counts are
/// cumulative: the largest seen per method is the total.
fn count_operations(body: &[u8], operations: &mut BTreeMap<String, u64>) -> Option<()> {
    let mut this_export: BTreeMap<String, u64> = BTreeMap::new();
    for rm in submessages(body, 1)? {
        for sm in submessages(rm, 2)? {
            for metric in submessages(sm, 2)? {
                let name = submessages(metric, 1)?
                    .into_iter()
                    .next()
                    .unwrap_or_default();
                if name != b"mcp.server.operation.duration" {
                    continue;
                }
                for histogram in submessages(metric, 9)? {
                    for point in submessages(histogram, 1)? {
                        let mut method = String::new();
                        let mut count = 0;
                        for (field, value) in Fields(point) {
                            match (field, value?) {
                                (9, Value::Bytes(kv)) => {
                                    if let Some(m) = string_attribute(kv, b"mcp.method.name") {
                                        method = m;
                                    }
                                }
                                (4, Value::Fixed64(n)) => count = n,
                                _ => {}
                            }
                        }
                        *this_export.entry(method).or_default() += count;
                    }
                }
            }
        }
    }
    for (method, n) in this_export {
        let total = operations.entry(method).or_default();
        *total = (*total).max(n);
    }
    Some(())
}

/// KeyValue: key (1), value (2) → AnyValue string_value (1).
fn string_attribute(kv: &[u8], key: &[u8]) -> Option<String> {
    if submessages(kv, 1)?.first().copied() != Some(key) {
        return None;
    }
    let value = submessages(kv, 2)?.into_iter().next()?;
    let s = submessages(value, 1)?.into_iter().next()?;
    Some(String::from_utf8_lossy(s).into_owned())
}

enum Value<'a> {
    Varint,
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32,
}

/// The length-delimited fields numbered `number` of a message (None if it is malformed).
fn submessages(message: &[u8], number: u64) -> Option<Vec<&[u8]>> {
    let mut out = Vec::new();
    for (field, value) in Fields(message) {
        if let (true, Value::Bytes(b)) = (field == number, value?) {
            out.push(b);
        }
    }
    Some(out)
}

/// The fields of one protobuf message, in order.
struct Fields<'a>(&'a [u8]);

impl<'a> Iterator for Fields<'a> {
    type Item = (u64, Option<Value<'a>>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.0.is_empty() {
            return None;
        }
        let Some(key) = varint(&mut self.0) else {
            self.0 = &[];
            return Some((0, None));
        };
        let value = match key & 7 {
            0 => varint(&mut self.0).map(|_| Value::Varint),
            1 => take(&mut self.0, 8)
                .map(|b| Value::Fixed64(u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))),
            2 => varint(&mut self.0)
                .and_then(|n| take(&mut self.0, n as usize))
                .map(Value::Bytes),
            5 => take(&mut self.0, 4).map(|_| Value::Fixed32),
            _ => None,
        };
        if value.is_none() {
            self.0 = &[];
        }
        Some((key >> 3, value))
    }
}

fn varint(buf: &mut &[u8]) -> Option<u64> {
    let mut result = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = buf.split_first()?;
        *buf = rest;
        result |= u64::from(b & 0x7F) << shift;
        if b < 0x80 {
            return Some(result);
        }
    }
    None
}

fn take<'a>(buf: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if buf.len() < n {
        return None;
    }
    let (head, rest) = buf.split_at(n);
    *buf = rest;
    Some(head)
}
