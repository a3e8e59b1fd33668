//! The POST of one OTLP/HTTP export, from the span export thread.
//!
//! A plain `http://` collector (a sidecar or node agent, the usual case) is written to over one
//! kept-alive connection, the body in pieces with the CPU yielded between them: the export
//! thread shares cores with the request workers, and a batch sent in one go would hold a worker
//! up for as long as it takes. `https://` goes through reqwest's blocking client.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);

pub struct Poster {
    url: reqwest::Url,
    headers: Vec<(String, String)>,
    /// The kept-alive connection to a plain-HTTP collector.
    plain: Option<BufReader<TcpStream>>,
    /// For HTTPS (built on the export thread: a blocking client may not live on a runtime's).
    tls: Option<reqwest::blocking::Client>,
}

impl Poster {
    pub fn new(url: &str, headers: Vec<(String, String)>) -> Result<Poster, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
        let tls = match url.scheme() {
            "http" => None,
            "https" => Some(
                reqwest::blocking::Client::builder()
                    .timeout(TIMEOUT)
                    .build()
                    .map_err(|e| e.to_string())?,
            ),
            other => return Err(format!("{other}: not an http(s) URL")),
        };
        Ok(Poster {
            url,
            headers,
            plain: None,
            tls,
        })
    }

    /// Posts a body (protobuf) given in pieces; Ok when the collector answered 2xx.
    pub fn post(&mut self, body: &[&[u8]]) -> Result<(), String> {
        if let Some(client) = &self.tls {
            let mut request = client
                .post(self.url.clone())
                .header("content-type", "application/x-protobuf")
                .body(body.concat());
            for (k, v) in &self.headers {
                request = request.header(k, v);
            }
            let response = request.send().map_err(|e| e.to_string())?;
            return match response.status() {
                s if s.is_success() => Ok(()),
                s => Err(format!("HTTP {s}")),
            };
        }
        // A kept-alive connection the collector closed fails on first use: one retry on a new
        // connection.
        let reused = self.plain.is_some();
        match self.post_plain(body) {
            Err(_) if reused => {
                self.plain = None;
                self.post_plain(body)
            }
            other => other,
        }
        .inspect_err(|_| self.plain = None)
    }

    fn post_plain(&mut self, body: &[&[u8]]) -> Result<(), String> {
        if self.plain.is_none() {
            let host = self.url.host_str().ok_or("no host")?;
            let port = self.url.port_or_known_default().unwrap_or(80);
            let stream = TcpStream::connect((host, port)).map_err(|e| e.to_string())?;
            stream.set_nodelay(true).map_err(|e| e.to_string())?;
            stream
                .set_read_timeout(Some(TIMEOUT))
                .map_err(|e| e.to_string())?;
            stream
                .set_write_timeout(Some(TIMEOUT))
                .map_err(|e| e.to_string())?;
            self.plain = Some(BufReader::new(stream));
        }
        let conn = self.plain.as_mut().ok_or("no connection")?;
        let mut head = format!(
            "POST {} HTTP/1.1\r\nhost: {}\r\ncontent-type: application/x-protobuf\r\ncontent-length: {}\r\n",
            &self.url[url::Position::BeforePath..url::Position::AfterQuery],
            &self.url[url::Position::BeforeHost..url::Position::AfterPort],
            body.iter().map(|p| p.len()).sum::<usize>()
        );
        for (k, v) in &self.headers {
            head.push_str(&format!("{k}: {v}\r\n"));
        }
        head.push_str("\r\n");
        let stream = conn.get_mut();
        stream
            .write_all(head.as_bytes())
            .map_err(|e| e.to_string())?;
        for piece in body {
            stream.write_all(piece).map_err(|e| e.to_string())?;
        }
        read_response(conn)
    }
}

/// Reads one response (status, headers, a `content-length` or chunked body), keeping the
/// connection ready for the next request.
fn read_response(conn: &mut BufReader<TcpStream>) -> Result<(), String> {
    let line = read_line(conn)?;
    let status: u16 = line
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not an HTTP response: {line:.60}"))?;
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let line = read_line(conn)?;
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            let value = value.trim();
            if name.eq_ignore_ascii_case("content-length") {
                length = value.parse().map_err(|_| "bad content-length")?;
            } else if name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = value.eq_ignore_ascii_case("chunked");
            }
        }
    }
    if chunked {
        loop {
            let size = read_line(conn)?;
            let size = usize::from_str_radix(size.split(';').next().unwrap_or("").trim(), 16)
                .map_err(|_| "bad chunk size")?;
            skip(conn, size)?;
            read_line(conn)?;
            if size == 0 {
                break;
            }
        }
    } else {
        skip(conn, length)?;
    }
    if (200..300).contains(&status) {
        Ok(())
    } else {
        Err(format!("HTTP {status}"))
    }
}

fn read_line(conn: &mut BufReader<TcpStream>) -> Result<String, String> {
    let mut line = String::new();
    match conn.by_ref().take(8192).read_line(&mut line) {
        Ok(0) => Err("the collector closed the connection".into()),
        Ok(_) => Ok(line.trim_end_matches(['\r', '\n']).to_string()),
        Err(e) => Err(e.to_string()),
    }
}

fn skip(conn: &mut BufReader<TcpStream>, n: usize) -> Result<(), String> {
    let copied = std::io::copy(&mut conn.by_ref().take(n as u64), &mut std::io::sink())
        .map_err(|e| e.to_string())?;
    if copied as usize == n {
        Ok(())
    } else {
        Err("the collector's answer was cut short".into())
    }
}
