//! Optimistic concurrency for the admin API's writes over an existing record (a tenant's PATCH,
//! a catalog entry's PUT, a user's PATCH, and the DELETE of each). A record's revision is its
//! `updated_at`, sent as a strong `ETag` (`"<updated_at>"`) with every representation of it. A
//! write reads the record, changes it and writes it back only if it is still the one read (the
//! store's compare-and-set):
//! - with `If-Match` (RFC 9110 §13.1.1), the write applies only if the current `ETag` is listed
//!   (or the value is `*`); otherwise 412, and nothing is written;
//! - without it, a write that lost the race to another reads the record again and applies its
//!   change to the newer one, so that two writes of different fields both land (a PATCH never
//!   puts back what another one changed meanwhile).
//!
//! A DELETE with entity tags in `If-Match` deletes the record only at a listed revision (412
//! otherwise); without them it deletes whatever is there ([`delete`]).

use actix_web::http::header::{self, HeaderValue};
use actix_web::http::StatusCode;
use actix_web::{HttpRequest, HttpResponseBuilder};

use super::AdminError;

/// How many times a write without `If-Match` reads again after losing a race before it answers
/// 409 (only under a storm of writes to the same record).
pub const ATTEMPTS: usize = 8;

/// The strong entity tag of a record last written at `updated_at`.
pub fn etag(updated_at: i64) -> String {
    format!("\"{updated_at}\"")
}

/// Sets the `ETag` of a record last written at `updated_at` on a response.
pub fn tagged(mut builder: HttpResponseBuilder, updated_at: i64) -> HttpResponseBuilder {
    builder.insert_header((header::ETAG, etag(updated_at)));
    builder
}

/// What a request's `If-Match` asks of the record it writes.
#[derive(Debug, Clone, PartialEq)]
pub enum IfMatch {
    /// No `If-Match`: the write goes on whatever the current revision.
    Absent,
    /// `*`: the record must exist (it does, once read).
    Any,
    /// One of these entity tags (as sent, quotes included; weak ones never match).
    Tags(Vec<String>),
}

impl IfMatch {
    /// Reads the request's `If-Match` fields (several are one comma-separated list). A value
    /// that is not `*` or a list of entity tags answers 400.
    pub fn of(req: &HttpRequest) -> Result<IfMatch, AdminError> {
        let values: Vec<&HeaderValue> = req.headers().get_all(header::IF_MATCH).collect();
        if values.is_empty() {
            return Ok(IfMatch::Absent);
        }
        let mut tags = Vec::new();
        let mut any = false;
        for value in values {
            match value.to_str().ok().and_then(parse) {
                Some(Parsed::Any) => any = true,
                Some(Parsed::Tags(t)) => tags.extend(t),
                None => {
                    return Err(AdminError::bad_request(
                        "If-Match must be * or a comma-separated list of entity tags \
                         (such as \"1764170000000\", as the ETag header gives them)",
                    ))
                }
            }
        }
        Ok(if any {
            IfMatch::Any
        } else {
            IfMatch::Tags(tags)
        })
    }

    /// 412 unless a record at revision `updated_at` satisfies the condition.
    pub fn check(&self, updated_at: i64) -> Result<(), AdminError> {
        match self {
            IfMatch::Absent | IfMatch::Any => Ok(()),
            IfMatch::Tags(tags) => {
                let current = etag(updated_at);
                if tags.contains(&current) {
                    Ok(())
                } else {
                    Err(AdminError::precondition_failed(current))
                }
            }
        }
    }
}

/// Deletes a record as its request's `If-Match` asks, answering whether there was one to delete
/// (`false`: 404). Without entity tags (no `If-Match`, or `*`) it is one delete of whatever is
/// there, `delete(None)`. With them, the record's revision is read (`revision`: its
/// `updated_at`, `None` when it is gone), checked (412 unless listed) and the record deleted
/// only if it is still at that revision, `delete(Some(seen))`; a write that landed in between
/// is read and checked again.
pub async fn delete<R, RF, D, DF>(
    condition: &IfMatch,
    mut revision: R,
    mut delete: D,
) -> Result<bool, AdminError>
where
    R: FnMut() -> RF,
    RF: std::future::Future<Output = Result<Option<i64>, AdminError>>,
    D: FnMut(Option<i64>) -> DF,
    DF: std::future::Future<Output = Result<bool, AdminError>>,
{
    if !matches!(condition, IfMatch::Tags(_)) {
        return delete(None).await;
    }
    for _ in 0..ATTEMPTS {
        let Some(seen) = revision().await? else {
            return Ok(false);
        };
        condition.check(seen)?;
        if delete(Some(seen)).await? {
            return Ok(true);
        }
    }
    Err(AdminError::write_contended())
}

pub(super) enum Parsed {
    Any,
    Tags(Vec<String>),
}

/// `*`, or `entity-tag *( OWS "," OWS entity-tag )` with optional whitespace around it, where an
/// entity tag is `[W/] DQUOTE *etagc DQUOTE` and etagc is a visible ASCII character other than
/// `"` (the header's pattern in openapi.json states the same). Weak tags are kept as `W/"…"`, so
/// they never equal a strong `ETag`.
pub(super) fn parse(value: &str) -> Option<Parsed> {
    const OWS: [char; 2] = [' ', '\t'];
    let value = value.trim_matches(OWS);
    if value == "*" {
        return Some(Parsed::Any);
    }
    let mut tags = Vec::new();
    let mut rest = value;
    loop {
        let opaque = rest.strip_prefix("W/").unwrap_or(rest);
        let inner = opaque.strip_prefix('"')?;
        let end = inner.find('"')?;
        if !inner[..end]
            .bytes()
            .all(|b| b == 0x21 || (0x23..=0x7e).contains(&b))
        {
            return None;
        }
        let tag_len = rest.len() - inner.len() + end + 1;
        tags.push(rest[..tag_len].to_string());
        rest = rest[tag_len..].trim_start_matches(OWS);
        if rest.is_empty() {
            return Some(Parsed::Tags(tags));
        }
        rest = rest.strip_prefix(',')?.trim_start_matches(OWS);
    }
}

impl AdminError {
    /// 412: `If-Match` names no current revision of the record (`current` is its `ETag`).
    pub fn precondition_failed(current: String) -> Self {
        AdminError {
            status: StatusCode::PRECONDITION_FAILED,
            code: "precondition_failed",
            message: format!(
                "the record has changed since it was read (If-Match); its ETag is now {current}: \
                 read it again and retry"
            ),
            field: None,
        }
    }

    /// 409: a write without `If-Match` kept losing the race to other writes of the record.
    pub fn write_contended() -> Self {
        AdminError::conflict("the record kept changing while this request was written; retry it")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use actix_web::test::TestRequest;

    fn if_match(values: &[&str]) -> Result<IfMatch, AdminError> {
        let mut req = TestRequest::default();
        for v in values {
            req = req.append_header((header::IF_MATCH, *v));
        }
        IfMatch::of(&req.to_http_request())
    }

    #[test]
    fn if_match_names_the_current_etag_or_anything() {
        assert_eq!(if_match(&[]).unwrap(), IfMatch::Absent);
        assert_eq!(if_match(&["*"]).unwrap(), IfMatch::Any);
        let tags = if_match(&["\"5\", W/\"7\"", "\"9\""]).unwrap();
        assert!(tags.check(5).is_ok() && tags.check(9).is_ok());
        // A weak tag never matches (strong comparison), nor another revision.
        assert_eq!(
            tags.check(7).unwrap_err().status,
            StatusCode::PRECONDITION_FAILED
        );
        assert_eq!(
            tags.check(6).unwrap_err().status,
            StatusCode::PRECONDITION_FAILED
        );
        for bad in ["5", "\"5", "\"a\"b\"", "\"5\",", "", "W/5", "*, \"5\""] {
            let e = if_match(&[bad]).unwrap_err();
            assert_eq!(e.status, StatusCode::BAD_REQUEST, "{bad:?}");
        }
    }
}
