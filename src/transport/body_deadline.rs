//! A request body must arrive within `server.body_timeout_secs` of its head on every route that
//! reads one. The MCP endpoints read theirs with `transport::read_body`, which keeps the
//! deadline itself; the admin API, the authorization servers and the elicitation pages read
//! theirs through actix-web's extractors (`web::Bytes`, `web::Form`, the admin's JSON body),
//! which wait as long as the client likes: a client trickling a body a byte at a time held its
//! connection for ever, on public routes (`/token`, `/register`) as well. [`within`], wrapped
//! around those routes, gives the payload a deadline and answers 408 in the route's own error
//! shape with `Connection: close`: the connection ends after the answer, without reading the
//! rest of the body (for a chunked body, that is the vendored actix-http's patch: upstream
//! reads and drops it for as long as the client sends it). Their other refusals of a body not
//! read to its end (too large) close the connection the same way.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use actix_web::body::BoxBody;
use actix_web::dev::{Payload, ServiceRequest, ServiceResponse};
use actix_web::error::PayloadError;
use actix_web::http::ConnectionType;
use actix_web::middleware::Next;
use actix_web::{web, HttpResponse};
use bytes::Bytes;
use futures_util::Stream;

use crate::transport::EdgePolicy;

/// A route's answer to a body that did not arrive within the given time (in its own error
/// shape: the admin API's, OAuth's, an HTML page).
pub type TimedOut = fn(Duration) -> HttpResponse;

/// What a route's 408 says (in its own error shape).
pub fn too_slow(patience: Duration) -> String {
    format!(
        "the request body did not arrive within {} s",
        patience.as_secs_f64()
    )
}

/// Middleware (`actix_web::middleware::from_fn`): the request's body, if it has one, must
/// arrive within the server's body timeout ([`EdgePolicy::body_timeout`]), counted from here
/// (its head has just been read); after that the handler reading it gets an error, and the
/// client `timed_out`'s answer with `Connection: close`. Any other error answer given before
/// the body was read to its end also closes the connection. A request without a body, or
/// served without an [`EdgePolicy`], passes as it is.
pub async fn within(
    req: ServiceRequest,
    next: Next<BoxBody>,
    timed_out: TimedOut,
) -> Result<ServiceResponse<BoxBody>, actix_web::Error> {
    let Some(patience) = req
        .app_data::<web::Data<EdgePolicy>>()
        .map(|edge| edge.body_timeout)
    else {
        return next.call(req).await;
    };
    let (head, payload) = req.into_parts();
    if matches!(payload, Payload::None) {
        return next.call(ServiceRequest::from_parts(head, payload)).await;
    }
    let read = Rc::new(Cell::new(Read::Partly));
    let limited = Deadline {
        inner: payload,
        sleep: Box::pin(tokio::time::sleep(patience)),
        read: read.clone(),
    };
    let stream: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> = Box::pin(limited);
    let payload = Payload::Stream { payload: stream };
    // An `Err` is passed on as it is: handlers' and extractors' errors come back as responses,
    // and keeping a clone of the request to answer one here would break routing (it needs the
    // only reference to the request).
    let mut response = next.call(ServiceRequest::from_parts(head, payload)).await?;
    if read.get() == Read::Late {
        let mut late = timed_out(patience);
        late.head_mut().set_connection_type(ConnectionType::Close);
        return Ok(response.into_response(late));
    }
    // A refusal that left the body unread (too large, a handler that refused before reading
    // it) closes the connection as well: the rest is not read, nor, when chunked, drained for
    // as long as the client goes on sending it.
    let status = response.status();
    if read.get() != Read::Whole && (status.is_client_error() || status.is_server_error()) {
        response
            .response_mut()
            .head_mut()
            .set_connection_type(ConnectionType::Close);
    }
    Ok(response)
}

/// A payload that ends in an error once its time is up.
struct Deadline {
    inner: Payload,
    sleep: Pin<Box<tokio::time::Sleep>>,
    read: Rc<Cell<Read>>,
}

/// How much of a body its handler read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Read {
    /// Not to its end (yet).
    Partly,
    /// To its end.
    Whole,
    /// Its time was up first.
    Late,
}

impl Stream for Deadline {
    type Item = Result<Bytes, PayloadError>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = self.get_mut();
        // Over: a body read to its end stays so whenever it is polled again (its deadline no
        // longer applies), and a late one has said so once.
        if this.read.get() != Read::Partly {
            return Poll::Ready(None);
        }
        // The deadline first: a body trickled fast enough to be ready at every poll is still
        // cut off.
        if this.sleep.as_mut().poll(cx).is_ready() {
            this.read.set(Read::Late);
            return Poll::Ready(Some(Err(PayloadError::Io(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "the request body did not arrive in time",
            )))));
        }
        let next = Pin::new(&mut this.inner).poll_next(cx);
        if matches!(next, Poll::Ready(None)) {
            this.read.set(Read::Whole);
        }
        next
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::StreamExt;

    fn deadline(chunks: Vec<Result<Bytes, PayloadError>>, patience: Duration) -> Deadline {
        let inner: Pin<Box<dyn Stream<Item = Result<Bytes, PayloadError>>>> =
            Box::pin(futures_util::stream::iter(chunks));
        Deadline {
            inner: Payload::Stream { payload: inner },
            sleep: Box::pin(tokio::time::sleep(patience)),
            read: Rc::new(Cell::new(Read::Partly)),
        }
    }

    /// A body read to its end in time is not turned late by a poll after its deadline.
    #[tokio::test]
    async fn a_body_read_whole_in_time_stays_whole_past_its_deadline() {
        let mut body = deadline(
            vec![Ok(Bytes::from_static(b"{}"))],
            Duration::from_millis(30),
        );
        assert_eq!(
            body.next().await.and_then(Result::ok),
            Some(Bytes::from_static(b"{}"))
        );
        assert!(body.next().await.is_none());
        assert!(body.read.get() == Read::Whole);
        tokio::time::sleep(Duration::from_millis(60)).await;
        assert!(
            body.next().await.is_none(),
            "polled again past the deadline"
        );
        assert!(body.read.get() == Read::Whole);
    }

    /// A body still unread at its deadline ends in one timeout error, then nothing.
    #[tokio::test]
    async fn a_body_unread_at_its_deadline_times_out_once() {
        let mut body = deadline(
            vec![Ok(Bytes::from_static(b"{}"))],
            Duration::from_millis(10),
        );
        tokio::time::sleep(Duration::from_millis(30)).await;
        match body.next().await {
            Some(Err(PayloadError::Io(e))) => assert_eq!(e.kind(), std::io::ErrorKind::TimedOut),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert!(body.read.get() == Read::Late);
        assert!(body.next().await.is_none());
    }
}
