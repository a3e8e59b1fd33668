//! mcp-harbor patch: a response that says `Connection: close` is not held open by draining the
//! rest of a chunked request body the service left unread.

use std::pin::pin;

use actix_service::fn_service;
use futures_util::future::lazy;

use super::*;
use crate::{
    config::ServiceConfig,
    h1::{ExpectHandler, UpgradeHandler},
    service::HttpFlow,
    test::TestSeqBuffer,
};

const CHUNKED_HEAD: &str =
    "POST /slow HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\n";

/// Drops the request's payload unread and answers 408, closing the connection if `close`.
fn gives_up(
    close: bool,
) -> impl Service<Request, Response = Response<&'static str>, Error = Error> {
    fn_service(move |mut req: Request| async move {
        let _ = req.take_payload();
        let mut res = Response::with_body(StatusCode::REQUEST_TIMEOUT, "too slow");
        if close {
            res.head_mut().set_connection_type(ConnectionType::Close);
        }
        Ok::<_, Error>(res)
    })
}

fn written(buf: &TestSeqBuffer) -> String {
    String::from_utf8_lossy(&buf.take_write_buf()).into_owned()
}

#[actix_rt::test]
async fn closing_response_ends_the_connection_instead_of_draining_a_chunked_body() {
    let buf = TestSeqBuffer::new(CHUNKED_HEAD);
    let flow = HttpFlow::new(gives_up(true), ExpectHandler, None::<UpgradeHandler>);
    let h1 = Dispatcher::new(
        buf.clone(),
        flow,
        ServiceConfig::default(),
        None,
        OnConnectData::default(),
    );
    let mut h1 = pin!(h1);

    // The client is still sending its body (no terminating chunk): the answer goes out and the
    // connection ends, without waiting for the rest.
    let done = lazy(|cx| h1.as_mut().poll(cx).is_ready()).await;
    let res = written(&buf);
    assert!(res.starts_with("HTTP/1.1 408"), "{res}");
    assert!(res.contains("connection: close"), "{res}");
    assert!(res.ends_with("too slow"), "{res}");
    assert!(done, "the dispatcher kept the connection to drain the body");
}

#[actix_rt::test]
async fn keep_alive_response_still_drains_a_chunked_body_as_upstream() {
    let mut buf = TestSeqBuffer::new(CHUNKED_HEAD);
    let flow = HttpFlow::new(gives_up(false), ExpectHandler, None::<UpgradeHandler>);
    let h1 = Dispatcher::new(
        buf.clone(),
        flow,
        ServiceConfig::default(),
        None,
        OnConnectData::default(),
    );
    let mut h1 = pin!(h1);

    assert!(lazy(|cx| h1.as_mut().poll(cx).is_pending()).await);
    let res = written(&buf);
    assert!(res.starts_with("HTTP/1.1 408"), "{res}");
    assert!(!res.contains("connection: close"), "{res}");

    // The rest of the body is read and dropped, and the connection serves the next request.
    buf.extend_read_buf(b"1\r\nx\r\n0\r\n\r\nGET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    assert!(lazy(|cx| h1.as_mut().poll(cx).is_pending()).await);
    assert!(buf.read_buf().is_empty());
    assert!(written(&buf).starts_with("HTTP/1.1 408"));
}
