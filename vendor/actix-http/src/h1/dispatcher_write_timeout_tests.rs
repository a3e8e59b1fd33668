//! mcp-harbor patch: a response whose client takes none of its bytes for the connection's
//! `WriteTimeout` ends the connection; one that goes on taking them is not cut off.

use std::{
    cell::Cell,
    future::Future,
    io,
    pin::{pin, Pin},
    rc::Rc,
    task::{Context, Poll},
    time::Duration,
};

use actix_service::fn_service;
use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::*;
use crate::{
    config::ServiceConfig,
    h1::{ExpectHandler, UpgradeHandler},
    service::HttpFlow,
    Extensions, OnConnectData, WriteTimeout,
};

const GET: &[u8] = b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n";
/// The answer: larger than what the client takes in a write.
const BODY_LEN: usize = 64 * 1024;

/// A connection whose client sent `GET` and then takes at most `per_write` bytes of the answer
/// per write, and only while `reading` (otherwise a write waits, as on a full socket). No read
/// or write ever wakes the dispatcher: only its timers do.
struct Client {
    request: Option<&'static [u8]>,
    reading: Rc<Cell<bool>>,
    per_write: usize,
    taken: Rc<Cell<usize>>,
}

impl AsyncRead for Client {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.request.take() {
            Some(request) => {
                buf.put_slice(request);
                Poll::Ready(Ok(()))
            }
            None => Poll::Pending,
        }
    }
}

impl AsyncWrite for Client {
    fn poll_write(
        self: Pin<&mut Self>,
        _: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if !self.reading.get() {
            return Poll::Pending;
        }
        let n = buf.len().min(self.per_write);
        self.taken.set(self.taken.get() + n);
        // The client takes a little, then its buffer is full again.
        self.reading.set(false);
        Poll::Ready(Ok(n))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

fn large_answer() -> impl Service<Request, Response = Response<Bytes>, Error = Error> {
    fn_service(|_: Request| async {
        Ok::<_, Error>(Response::with_body(
            StatusCode::OK,
            Bytes::from(vec![b'x'; BODY_LEN]),
        ))
    })
}

thread_local! {
    /// Responses given up for their write timeout on this test's thread.
    static EXPIRED: Cell<usize> = const { Cell::new(0) };
}

fn expired() {
    EXPIRED.with(|n| n.set(n.get() + 1));
}

fn with_write_timeout(timeout: Option<Duration>) -> OnConnectData {
    let mut data = Extensions::new();
    if let Some(after) = timeout {
        data.insert(WriteTimeout { after, expired });
    }
    OnConnectData(Some(data))
}

type Taken = (Rc<Cell<bool>>, Rc<Cell<usize>>);

fn connection(
    timeout: Option<Duration>,
) -> (impl Future<Output = Result<(), DispatchError>>, Taken) {
    let reading = Rc::new(Cell::new(true));
    let taken = Rc::new(Cell::new(0));
    let client = Client {
        request: Some(GET),
        reading: reading.clone(),
        per_write: 4096,
        taken: taken.clone(),
    };
    let flow = HttpFlow::new(large_answer(), ExpectHandler, None::<UpgradeHandler>);
    let h1 = Dispatcher::new(
        client,
        flow,
        ServiceConfig::default(),
        None,
        with_write_timeout(timeout),
    );
    (h1, (reading, taken))
}

#[actix_rt::test]
async fn a_client_that_takes_nothing_for_the_write_timeout_loses_its_connection() {
    let (h1, (_, taken)) = connection(Some(Duration::from_millis(100)));
    let ended = tokio::time::timeout(Duration::from_secs(5), h1).await;
    assert!(
        matches!(ended, Ok(Ok(()))),
        "the connection was still open after 5 s"
    );
    // It took the first 4 KiB, then nothing; the timeout's callback said so once.
    assert_eq!(taken.get(), 4096);
    assert_eq!(EXPIRED.with(Cell::get), 1);
}

#[actix_rt::test]
async fn without_a_write_timeout_a_stalled_client_keeps_its_connection_as_upstream() {
    let (h1, (_, taken)) = connection(None);
    let ended = tokio::time::timeout(Duration::from_millis(400), h1).await;
    assert!(ended.is_err(), "the connection ended: {ended:?}");
    assert_eq!(taken.get(), 4096);
}

#[actix_rt::test]
async fn a_client_taking_bytes_more_often_than_the_timeout_gets_the_whole_answer() {
    let timeout = Duration::from_millis(150);
    let (h1, (reading, taken)) = connection(Some(timeout));
    let mut h1 = pin!(h1);
    // It takes 4 KiB every 50 ms: the whole answer takes far longer than the timeout, and no
    // wait between two writes is as long.
    let started = std::time::Instant::now();
    loop {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "stuck at {} bytes",
            taken.get()
        );
        let step = tokio::time::timeout(Duration::from_millis(50), h1.as_mut()).await;
        assert!(
            step.is_err(),
            "the connection ended after {} bytes",
            taken.get()
        );
        let before = taken.get();
        reading.set(true);
        // The dispatcher is woken by nothing but its timers: poll it once to write.
        let _ = futures_util::future::lazy(|cx| h1.as_mut().poll(cx)).await;
        if taken.get() == before {
            break;
        }
    }
    assert!(taken.get() > BODY_LEN, "{} bytes", taken.get());
    assert_eq!(EXPIRED.with(Cell::get), 0);
    assert!(started.elapsed() > timeout * 2);
    // The connection stays for the next request.
    let step = tokio::time::timeout(Duration::from_millis(300), h1.as_mut()).await;
    assert!(
        step.is_err(),
        "the connection ended after the answer: {step:?}"
    );
}
