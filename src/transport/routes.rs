//! The MCP endpoints of every tenant — `/t/{tenant}/mcp` (Streamable HTTP), `/t/{tenant}/sse`
//! and `/t/{tenant}/messages` (legacy HTTP+SSE) — as one service matched without a regular
//! expression.
//!
//! actix-router matches a pattern with a `{tenant}` segment through a regex and allocates its
//! captures on every request (~1.3k instructions and ~1.5 % of the server's time per
//! `tools/call`). Here the app's router matches the static prefix `/t` and a guard reads the
//! rest of the path by hand ([`endpoint_of`]); a path under `/t` that is not one of these
//! endpoints fails the guard and goes on to the other routes (OAuth, discovery, elicitation
//! pages) or to the app's `not_found`, as before. The tenant is read from the path the same way
//! ([`tenant_of`]) from the path as the router reads it (its match info: percent-encoded
//! characters decoded, except `/`, `%` and `+`), so `/t/dem%6F/mcp` is `/t/demo/mcp`, as it is
//! on every other route.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use actix_web::dev::{
    AppService, HttpServiceFactory, ResourceDef, Service, ServiceFactory, ServiceRequest,
    ServiceResponse, Url,
};
use actix_web::guard::{Guard, GuardContext};
use actix_web::http::header::HeaderValue;
use actix_web::http::Method;
use actix_web::{web, Error, Route};
use futures_util::future::LocalBoxFuture;

use super::endpoint::{endpoint_of, Endpoint};
use super::{cors, legacy, method_not_allowed, streamable, REPLICA};

/// The endpoints, registered on the app with `App::service`; every response carries the
/// `x-harbor-replica` header (unless a handler set it).
pub struct Endpoints {
    replica: HeaderValue,
}

impl Endpoints {
    pub fn new(replica_id: &str) -> Self {
        Endpoints {
            // A replica id is a configured or generated name; one that is no header value
            // leaves the header empty rather than failing every request.
            replica: HeaderValue::from_str(replica_id).unwrap_or(HeaderValue::from_static("")),
        }
    }
}

impl HttpServiceFactory for Endpoints {
    fn register(self, config: &mut AppService) {
        config.register_service(
            ResourceDef::root_prefix("/t"),
            Some(vec![Box::new(IsEndpoint)]),
            EndpointsFactory {
                replica: self.replica,
            },
            None,
        );
    }
}

/// Lets the app's router pick [`Endpoints`] only for an endpoint's path.
struct IsEndpoint;

impl Guard for IsEndpoint {
    fn check(&self, ctx: &GuardContext<'_>) -> bool {
        let path = ctx.head().uri.path();
        if path.contains('%') {
            // Read as the router reads every path (`Url`): percent-encoded characters decoded,
            // except `/`, `%` and `+`. The service reads the same from the request's match info.
            return endpoint_of(Url::new(ctx.head().uri.clone()).path()).is_some();
        }
        endpoint_of(path).is_some()
    }
}

struct EndpointsFactory {
    replica: HeaderValue,
}

impl ServiceFactory<ServiceRequest> for EndpointsFactory {
    type Response = ServiceResponse;
    type Error = Error;
    type Config = ();
    type Service = EndpointsService;
    type InitError = ();
    type Future = LocalBoxFuture<'static, Result<EndpointsService, ()>>;

    fn new_service(&self, _: ()) -> Self::Future {
        let routes = [
            web::to(streamable::post),
            web::to(streamable::get),
            web::to(streamable::delete),
            web::to(legacy::open),
            web::to(legacy::message),
            web::to(cors::options),
            web::to(method_not_allowed),
        ]
        .map(|route: Route| route.new_service(()));
        let replica = self.replica.clone();
        Box::pin(async move {
            let [post, get, delete, open, message, options, not_allowed] = routes;
            Ok(EndpointsService {
                post: post.await?,
                get: get.await?,
                delete: delete.await?,
                open: open.await?,
                message: message.await?,
                options: options.await?,
                not_allowed: not_allowed.await?,
                replica,
            })
        })
    }
}

type RouteService = <Route as ServiceFactory<ServiceRequest>>::Service;

pub struct EndpointsService {
    post: RouteService,
    get: RouteService,
    delete: RouteService,
    open: RouteService,
    message: RouteService,
    /// `OPTIONS` on any endpoint (CORS preflights).
    options: RouteService,
    /// Any other method on an endpoint: 405.
    not_allowed: RouteService,
    replica: HeaderValue,
}

impl Service<ServiceRequest> for EndpointsService {
    type Response = ServiceResponse;
    type Error = Error;
    type Future = WithReplica;

    fn poll_ready(&self, _: &mut Context<'_>) -> Poll<Result<(), Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&self, req: ServiceRequest) -> Self::Future {
        let endpoint = endpoint_of(req.match_info().as_str()).map(|(_, endpoint)| endpoint);
        let route = match (endpoint, req.method()) {
            (Some(Endpoint::Mcp), &Method::POST) => &self.post,
            (Some(Endpoint::Mcp), &Method::GET) => &self.get,
            (Some(Endpoint::Mcp), &Method::DELETE) => &self.delete,
            (Some(Endpoint::Sse), &Method::GET) => &self.open,
            (Some(Endpoint::Messages), &Method::POST) => &self.message,
            (Some(_), &Method::OPTIONS) => &self.options,
            _ => &self.not_allowed,
        };
        WithReplica {
            response: route.call(req),
            replica: Some(self.replica.clone()),
        }
    }
}

/// A response with the replica header added, and the CORS headers when the request came from
/// a browser at an admitted origin.
pub struct WithReplica {
    response: LocalBoxFuture<'static, Result<ServiceResponse, Error>>,
    replica: Option<HeaderValue>,
}

impl Future for WithReplica {
    type Output = Result<ServiceResponse, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut response = match this.response.as_mut().poll(cx) {
            Poll::Pending => return Poll::Pending,
            Poll::Ready(response) => response?,
        };
        if let Some(replica) = this.replica.take() {
            if !response.headers().contains_key(&REPLICA) {
                response.headers_mut().insert(REPLICA, replica);
            }
        }
        cors::add_headers(&mut response);
        Poll::Ready(Ok(response))
    }
}
