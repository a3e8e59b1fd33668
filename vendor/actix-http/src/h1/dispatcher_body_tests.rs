//! mcp-harbor patch: a request with a body is called once what has arrived of its body is in its
//! payload, so its service reads it at once, without waiting to be woken.

use std::{cell::Cell, pin::pin, rc::Rc};

use actix_service::fn_service;
use futures_util::{future::lazy, StreamExt as _};

use super::*;
use crate::{
    config::ServiceConfig,
    h1::{ExpectHandler, UpgradeHandler},
    service::HttpFlow,
    test::TestSeqBuffer,
};

/// Answers with the body's length; records whether the body's first chunk was there at the
/// service's first poll.
fn reads_body(
    ready_at_once: Rc<Cell<Option<bool>>>,
) -> impl Service<Request, Response = Response<String>, Error = Error> {
    fn_service(move |mut req: Request| {
        let ready_at_once = ready_at_once.clone();
        async move {
            let mut payload = req.take_payload();
            let first = lazy(|cx| payload.poll_next_unpin(cx)).await;
            ready_at_once.set(Some(first.is_ready()));
            let mut len = match first {
                Poll::Ready(Some(Ok(chunk))) => chunk.len(),
                _ => 0,
            };
            while let Some(chunk) = payload.next().await {
                len += chunk.map_or(0, |c| c.len());
            }
            Ok::<_, Error>(Response::ok().set_body(len.to_string()))
        }
    })
}

#[actix_rt::test]
async fn a_body_that_came_with_its_head_is_ready_when_the_service_starts() {
    for (framing, body) in [
        ("Content-Length: 11\r\n", "hello world"),
        ("Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"),
    ] {
        let ready_at_once = Rc::new(Cell::new(None));
        let buf = TestSeqBuffer::new(
            format!("POST / HTTP/1.1\r\nHost: localhost\r\n{framing}\r\n{body}").as_bytes(),
        );
        let flow = HttpFlow::new(
            reads_body(ready_at_once.clone()),
            ExpectHandler,
            None::<UpgradeHandler>,
        );
        let h1 = Dispatcher::new(
            buf.clone(),
            flow,
            ServiceConfig::default(),
            None,
            OnConnectData::default(),
        );
        let mut h1 = pin!(h1);

        // One poll reads the request, calls the service and writes its answer.
        assert!(lazy(|cx| h1.as_mut().poll(cx).is_pending()).await);
        let res = String::from_utf8_lossy(&buf.take_write_buf()).into_owned();
        assert!(res.starts_with("HTTP/1.1 200 OK"), "{framing}: {res}");
        assert!(res.ends_with("\r\n\r\n11"), "{framing}: {res}");
        assert_eq!(ready_at_once.get(), Some(true), "{framing}");
    }
}

#[actix_rt::test]
async fn a_body_still_on_its_way_is_waited_for() {
    let ready_at_once = Rc::new(Cell::new(None));
    let mut buf = TestSeqBuffer::new("POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 11\r\n\r\n");
    let flow = HttpFlow::new(
        reads_body(ready_at_once.clone()),
        ExpectHandler,
        None::<UpgradeHandler>,
    );
    let h1 = Dispatcher::new(
        buf.clone(),
        flow,
        ServiceConfig::default(),
        None,
        OnConnectData::default(),
    );
    let mut h1 = pin!(h1);

    assert!(lazy(|cx| h1.as_mut().poll(cx).is_pending()).await);
    assert_eq!(ready_at_once.get(), Some(false));
    assert!(buf.take_write_buf().is_empty());

    buf.extend_read_buf("hello world");
    assert!(lazy(|cx| h1.as_mut().poll(cx).is_pending()).await);
    let res = String::from_utf8_lossy(&buf.take_write_buf()).into_owned();
    assert!(res.ends_with("\r\n\r\n11"), "{res}");
}

#[actix_rt::test]
async fn pipelined_requests_are_answered_in_order() {
    let ready_at_once = Rc::new(Cell::new(None));
    let buf = TestSeqBuffer::new(
        "POST /first HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5\r\n\r\nhello\
         GET /second HTTP/1.1\r\nHost: localhost\r\n\r\n"
            .as_bytes(),
    );
    let flow = HttpFlow::new(
        reads_body(ready_at_once.clone()),
        ExpectHandler,
        None::<UpgradeHandler>,
    );
    let h1 = Dispatcher::new(
        buf.clone(),
        flow,
        ServiceConfig::default(),
        None,
        OnConnectData::default(),
    );
    let mut h1 = pin!(h1);

    assert!(lazy(|cx| h1.as_mut().poll(cx).is_pending()).await);
    let res = String::from_utf8_lossy(&buf.take_write_buf()).into_owned();
    // The POST's answer (its body's length, 5) before the GET's (no body, 0).
    let first = res.find("\r\n\r\n5").expect(&res);
    let second = res.find("\r\n\r\n0").expect(&res);
    assert!(first < second, "{res}");
}
