//! Several replicas sharing Redis and one database, over real HTTP: any replica serves any
//! session (forwarding to a live owner, taking over a dead one's sessions with their streams),
//! answers reach the owner over the bus, tenants created on one are served by the others at once,
//! and a draining replica hands its sessions over.

use std::collections::HashSet;
use std::time::Duration;

use crate::helpers::{
    shared_replicas, spawn_app_with, stateless_body, test_redis_url, SseEvent, SseReader, TestApp,
    ADMIN_TOKEN,
};
use mcp_harbor::session::id::route_of;
use reqwest::Method;
use serde_json::{json, Value};

/// Two replicas (`a`, `b`) sharing a Redis key prefix and one SQLite database.
async fn two_replicas() -> Option<(TestApp, TestApp, tempfile::TempDir)> {
    let (apps, shared) = shared_replicas(&["a", "b"], |_| {}).await?;
    let [a, b]: [TestApp; 2] = apps.try_into().ok()?;
    Some((a, b, shared))
}

fn replica_of(resp: &reqwest::Response) -> String {
    resp.headers()
        .get("x-harbor-replica")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string()
}

/// A POST to `app` for a session opened elsewhere.
fn post_to(app: &TestApp, session: &str, body: &Value) -> reqwest::RequestBuilder {
    app.post("demo", Some(session), body)
        .header("mcp-protocol-version", "2025-11-25")
}

/// Checks that replica `by` answered `resp` with 200.
fn answered_by(resp: reqwest::Response, by: &TestApp) -> reqwest::Response {
    assert_eq!(resp.status(), 200, "{:?}", resp.headers());
    assert_eq!(
        replica_of(&resp),
        by.replica_id,
        "answered by {}",
        by.replica_id
    );
    resp
}

/// POSTs `body` for `session` to `app` and checks that replica `by` answered it with 200.
async fn served_by(app: &TestApp, session: &str, body: Value, by: &TestApp) -> reqwest::Response {
    answered_by(post_to(app, session, &body).send().await.unwrap(), by)
}

/// Resumes `session`'s stream at `app` after event `last` (a GET with `Last-Event-ID`).
async fn resume_at(app: &TestApp, session: &str, last: &str) -> reqwest::Response {
    app.http
        .get(app.mcp_url("demo"))
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .header("mcp-protocol-version", "2025-11-25")
        .header("last-event-id", last)
        .send()
        .await
        .unwrap()
}

async fn read_until_response(sse: &mut SseReader, id: i64, seen: &mut Vec<SseEvent>) -> Value {
    while let Some(e) = sse.next_event(Duration::from_secs(10)).await {
        seen.push(e.clone());
        if let Some(m) = e.json() {
            if m["id"] == json!(id) && (m.get("result").is_some() || m.get("error").is_some()) {
                return m;
            }
        }
    }
    panic!("no response to {id}; saw {seen:?}");
}

#[actix_rt::test]
async fn any_replica_serves_a_session_opened_on_another() {
    let Some((a, b, _db)) = two_replicas().await else {
        return;
    };
    let c = a.open_session("demo", "2025-11-25", json!({})).await;
    let resp = post_to(
        &b,
        &c.session,
        &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(
        replica_of(&resp),
        a.replica_id,
        "answered by the owner, forwarded by b"
    );
    let body: Value = resp.json().await.unwrap();
    assert!(body["result"]["tools"]
        .as_array()
        .is_some_and(|t| !t.is_empty()));
    // DELETE through b ends it everywhere.
    let resp = b
        .http
        .delete(b.mcp_url("demo"))
        .header("mcp-session-id", &c.session)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = post_to(
        &a,
        &c.session,
        &json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" }),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 404);
    // Sessions stay per tenant: the id is unknown at another tenant on either replica.
    let other = a.open_session("demo", "2025-11-25", json!({})).await;
    for app in [&a, &b] {
        let resp = app
            .post(
                "other",
                Some(&other.session),
                &json!({ "jsonrpc": "2.0", "id": 4, "method": "ping" }),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 404);
    }
}

#[actix_rt::test]
async fn a_dead_owners_session_is_taken_over_and_its_stream_resumes_exactly_once() {
    let Some((a, b, _db)) = two_replicas().await else {
        return;
    };
    let c = a.open_session("demo", "2025-11-25", json!({})).await;
    // b forwards a request to the owner first, so it holds a kept connection to it when it dies.
    let resp = post_to(
        &b,
        &c.session,
        &json!({ "jsonrpc": "2.0", "id": 6, "method": "ping" }),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(replica_of(&resp), a.replica_id, "forwarded to the owner");
    let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "slow_count", "arguments": { "steps": 6, "interval_ms": 150 },
        "_meta": { "progressToken": "p7" } } });
    let resp = c.send(&call).await;
    assert_eq!(resp.status(), 200);
    assert_eq!(replica_of(&resp), a.replica_id);
    let mut sse = SseReader::new(resp);
    let mut seen = Vec::new();
    // The priming event and two progress steps, then the owner dies.
    while seen
        .iter()
        .filter(|e: &&SseEvent| e.json().is_some())
        .count()
        < 2
    {
        let e = sse
            .next_event(Duration::from_secs(5))
            .await
            .expect("progress");
        seen.push(e);
    }
    let last = seen.last().unwrap().id.clone().expect("events have ids");
    a.handle.stop(false).await;
    drop(sse);

    // Resume through the other replica: it takes the session over and re-runs the idempotent
    // call on the same stream.
    let resumed = resume_at(&b, &c.session, &last).await;
    assert_eq!(resumed.status(), 200);
    assert_eq!(replica_of(&resumed), b.replica_id);
    let mut sse = SseReader::new(resumed);
    let response = read_until_response(&mut sse, 7, &mut seen).await;
    assert_eq!(
        response["result"]["content"][0]["text"], "counted 6",
        "{response}"
    );
    let ids: Vec<String> = seen.iter().filter_map(|e| e.id.clone()).collect();
    let unique: HashSet<&String> = ids.iter().collect();
    assert_eq!(unique.len(), ids.len(), "no event twice: {ids:?}");
    // Progress never goes back (the re-run reports none: it would count from 1 again).
    let progress: Vec<f64> = seen
        .iter()
        .filter_map(SseEvent::json)
        .filter(|m| m["method"] == "notifications/progress")
        .filter_map(|m| m["params"]["progress"].as_f64())
        .collect();
    assert!(progress.len() >= 2, "{progress:?}");
    assert!(
        progress.windows(2).all(|w| w[0] < w[1]),
        "progress must increase: {progress:?}"
    );

    // The session goes on at the new owner without a new initialize.
    let tools = json!({ "jsonrpc": "2.0", "id": 8, "method": "tools/list" });
    served_by(&b, &c.session, tools, &b).await;
    // The takeover is counted (the replicas of this test share the process's registry).
    let metrics = mcp_harbor::observe::metrics::global().render();
    let takeovers = metrics
        .lines()
        .find_map(|l| l.strip_prefix("mcp_harbor_session_takeovers_total{tenant=\"demo\"} "))
        .and_then(|v| v.trim().parse::<f64>().ok());
    assert_eq!(takeovers, Some(1.0), "{metrics}");
}

/// A session keeps at most 1 MiB of its calls' arguments to run them again after a failover
/// (each snapshot carries them): a call past that is answered as interrupted when its replica
/// dies, not re-run.
#[actix_rt::test]
async fn a_call_past_the_sessions_replay_budget_is_answered_as_interrupted() {
    let Some((a, b, _db)) = two_replicas().await else {
        return;
    };
    let c = a.open_session("demo", "2025-11-25", json!({})).await;
    let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "slow_count",
        "arguments": { "steps": 6, "interval_ms": 150, "pad": "x".repeat(1 << 20) } } });
    let resp = c.send(&call).await;
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let primed = sse
        .next_event(Duration::from_secs(5))
        .await
        .expect("the priming event");
    let last = primed.id.clone().expect("events have ids");
    // Its snapshot is saved before the stream is primed; then the owner dies.
    a.handle.stop(false).await;
    drop(sse);
    let resumed = resume_at(&b, &c.session, &last).await;
    assert_eq!(resumed.status(), 200);
    let mut sse = SseReader::new(resumed);
    let response = read_until_response(&mut sse, 7, &mut Vec::new()).await;
    assert_eq!(response["error"]["data"]["interrupted"], true, "{response}");
}

/// A call that was waiting for the client's answer when its replica died, and cannot go on
/// from there (a built-in tool): the replica that takes the session over tells the client the
/// old question is cancelled, on the call's stream, before the call's outcome.
#[actix_rt::test]
async fn a_question_of_an_interrupted_call_is_cancelled_at_takeover() {
    let Some((a, b, _db)) = two_replicas().await else {
        return;
    };
    let c = a
        .open_session(
            "demo",
            "2025-11-25",
            json!({ "elicitation": { "form": {} } }),
        )
        .await;
    let call = json!({ "jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "test_elicitation", "arguments": { "message": "Who are you?" } } });
    let resp = c.send(&call).await;
    assert_eq!(resp.status(), 200);
    let mut sse = SseReader::new(resp);
    let mut seen = Vec::new();
    let asked = loop {
        let e = sse
            .next_event(Duration::from_secs(5))
            .await
            .expect("the elicitation");
        seen.push(e.clone());
        if let Some(m) = e.json().filter(|m| m["method"] == "elicitation/create") {
            break m;
        }
    };
    let last = seen.last().unwrap().id.clone().expect("events have ids");
    a.handle.stop(false).await;
    drop(sse);

    let resumed = resume_at(&b, &c.session, &last).await;
    assert_eq!(resumed.status(), 200);
    let mut sse = SseReader::new(resumed);
    let mut after = Vec::new();
    let outcome = read_until_response(&mut sse, 7, &mut after).await;
    let messages: Vec<Value> = after.iter().filter_map(SseEvent::json).collect();
    let cancelled = messages
        .iter()
        .position(|m| {
            m["method"] == "notifications/cancelled" && m["params"]["requestId"] == asked["id"]
        })
        .unwrap_or_else(|| panic!("the old question is cancelled: {messages:?}"));
    let answered = messages.iter().position(|m| m["id"] == 7).unwrap();
    assert!(cancelled < answered, "{messages:?}");
    assert!(outcome.get("error").is_some() || outcome.get("result").is_some());
}

#[actix_rt::test]
async fn session_ids_name_their_replica_and_work_anywhere_even_once_it_is_gone() {
    // Replica `a-…` starts its session ids with `a.`, `b-…` with `b.` (cluster.session_route).
    let Some((apps, _db)) = shared_replicas(&["a", "b"], |c| {
        c.cluster.session_route = c.cluster.replica_id.split('-').next().unwrap().to_string();
    })
    .await
    else {
        return;
    };
    let [a, b]: [TestApp; 2] = apps.try_into().ok().unwrap();
    let on_a = a.open_session("demo", "2025-11-25", json!({})).await;
    let on_b = b.open_session("demo", "2025-11-25", json!({})).await;
    assert_eq!(route_of(&on_a.session), Some("a"), "{}", on_a.session);
    assert_eq!(route_of(&on_b.session), Some("b"), "{}", on_b.session);
    let random = on_a.session.split_once('.').unwrap().1;
    assert_eq!(random.len(), 32, "128 random bits: {}", on_a.session);

    // Through either replica: the named one answers (forwarded when needed).
    for (via, session, owner) in [
        (&a, &on_a.session, &a.replica_id),
        (&b, &on_a.session, &a.replica_id),
        (&a, &on_b.session, &b.replica_id),
    ] {
        let resp = post_to(
            via,
            session,
            &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(resp.status(), 200, "{session} via {}", via.replica_id);
        assert_eq!(&replica_of(&resp), owner, "{session}");
    }
    // The id's route is only a hint: another tenant, or a route with no such session, is 404.
    let resp = b
        .post(
            "other",
            Some(&on_a.session),
            &json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" }),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 404);
    let stranger = format!("zz.{random}");
    let resp = post_to(
        &b,
        &stranger,
        &json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" }),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 404);

    // The named replica dies: its session, id unchanged, goes on at the other one.
    a.handle.stop(false).await;
    for id in 4..6 {
        let resp = post_to(
            &b,
            &on_a.session,
            &json!({ "jsonrpc": "2.0", "id": id, "method": "tools/list" }),
        )
        .send()
        .await
        .unwrap();
        assert_eq!(resp.status(), 200);
        assert_eq!(replica_of(&resp), b.replica_id, "taken over by b");
        let body: Value = resp.json().await.unwrap();
        assert!(body["result"]["tools"].is_array(), "{body}");
    }
    // New sessions still name the replica that creates them.
    let again = b.open_session("demo", "2025-11-25", json!({})).await;
    assert_eq!(route_of(&again.session), Some("b"));
}

#[actix_rt::test]
async fn a_clients_answer_reaches_the_owner_over_the_bus() {
    let Some((a, b, _db)) = two_replicas().await else {
        return;
    };
    let c = a
        .open_session("demo", "2025-11-25", json!({ "elicitation": {} }))
        .await;
    let resp = c
        .send(
            &json!({ "jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "test_elicitation", "arguments": { "message": "Who are you?" } } }),
        )
        .await;
    let mut sse = SseReader::new(resp);
    let request = loop {
        let e = sse
            .next_event(Duration::from_secs(5))
            .await
            .expect("elicitation request");
        if let Some(m) = e.json().filter(|m| m["method"] == "elicitation/create") {
            break m;
        }
    };
    let answer = json!({ "jsonrpc": "2.0", "id": request["id"], "result": {
        "action": "accept", "content": { "username": "ada", "email": "ada@example.com" } } });
    let resp = post_to(&b, &c.session, &answer).send().await.unwrap();
    assert_eq!(resp.status(), 202, "the non-owner accepts the answer");
    let response = read_until_response(&mut sse, 5, &mut Vec::new()).await;
    let text = response["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("");
    assert!(
        text.contains("action=accept") && text.contains("ada"),
        "{response}"
    );
    // A batch of notifications is not part of 2025-11-25: the non-owner answers what the owner
    // answers (400), not a 202 for a message the owner would refuse.
    let batch = json!([{ "jsonrpc": "2.0", "method": "notifications/progress",
        "params": { "progressToken": 1, "progress": 1 } }]);
    let at_owner = post_to(&a, &c.session, &batch).send().await.unwrap();
    assert_eq!(at_owner.status(), 400);
    let elsewhere = post_to(&b, &c.session, &batch).send().await.unwrap();
    assert_eq!(elsewhere.status(), 400);
}

#[actix_rt::test]
async fn a_tenant_created_on_one_replica_is_served_by_the_other_at_once() {
    let Some((a, b, _db)) = two_replicas().await else {
        return;
    };
    let resp = a
        .admin(Method::POST, "/tenants")
        .json(&json!({ "slug": "fresh", "catalogs": ["demo"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let mut c = b.open_session("fresh", "2025-11-25", json!({})).await;
    let tools = c.result("tools/list", json!({})).await;
    assert!(tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["name"] == "echo"));
    // Suspending it through b ends its sessions on a too.
    let mut on_a = a.open_session("fresh", "2025-11-25", json!({})).await;
    on_a.result("ping", json!({})).await;
    let resp = b
        .http
        .patch(format!("{}/admin/v1/tenants/fresh", b.base))
        .bearer_auth(ADMIN_TOKEN)
        .json(&json!({ "status": "suspended" }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let mut refused = false;
    for _ in 0..50 {
        let resp = a
            .post(
                "fresh",
                Some(&on_a.session),
                &json!({ "jsonrpc": "2.0", "id": 9, "method": "ping" }),
            )
            .send()
            .await
            .unwrap();
        if resp.status() == 403 {
            refused = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(refused, "the suspension reached the other replica");
}

/// A list change a tool announces on one replica reaches the tenant's listen streams and
/// sessions on the other (over the bus), and a resource it updates reaches the listeners
/// following it there.
#[actix_rt::test]
async fn a_change_a_tool_announces_reaches_listeners_and_sessions_on_every_replica() {
    let Some((a, b, _db)) = two_replicas().await else {
        return;
    };
    let listen = stateless_body(
        5,
        "subscriptions/listen",
        json!({ "notifications": { "toolsListChanged": true, "resourceSubscriptions": ["demo://note"] } }),
        json!({}),
    );
    let resp = b.post_stateless("demo", &listen).send().await.unwrap();
    assert_eq!(resp.status(), 200);
    let mut listener = SseReader::new(resp);
    let ack = listener.next_json(Duration::from_secs(10)).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    let session = b.open_session("demo", "2025-11-25", json!({})).await;
    let mut standalone = SseReader::new(session.get_stream(None).await);

    let call = |id, name: &str, arguments: Value| {
        stateless_body(
            id,
            "tools/call",
            json!({ "name": name, "arguments": arguments }),
            json!({}),
        )
    };
    let resp = a
        .post_stateless("demo", &call(6, "test_trigger_tool_change", json!({})))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(replica_of(&resp), a.replica_id);
    let changed = listener.next_json(Duration::from_secs(10)).await;
    assert_eq!(
        changed["method"], "notifications/tools/list_changed",
        "{changed}"
    );
    assert_eq!(
        changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"],
        5
    );
    let heard = standalone.next_json(Duration::from_secs(10)).await;
    assert_eq!(heard["method"], "notifications/tools/list_changed");

    let resp = a
        .post_stateless("demo", &call(7, "set_note", json!({ "text": "from a" })))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let updated = listener.next_json(Duration::from_secs(10)).await;
    assert_eq!(
        updated["method"], "notifications/resources/updated",
        "{updated}"
    );
    assert_eq!(updated["params"]["uri"], "demo://note");
}

/// A change the bus never brings (a message published while Redis or a replica's subscription
/// was down) still reaches every replica: each compares the tenants it serves with the store
/// (`cluster.resync_secs`). Here the changes are written to the store directly, as such a lost
/// message leaves them: a new prompt, then a suspension, then a deletion.
#[actix_rt::test]
async fn a_change_the_bus_never_brought_is_caught_up_from_the_store() {
    let Some((apps, shared)) =
        crate::helpers::shared_replicas(&["a"], |c| c.cluster.resync_secs = 1).await
    else {
        return;
    };
    let a = &apps[0];
    let resp = a
        .admin(Method::POST, "/tenants")
        .json(&json!({ "slug": "quiet", "catalogs": ["demo"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let mut c = a.open_session("quiet", "2025-11-25", json!({})).await;
    let mut stream = SseReader::new(c.get_stream(None).await);
    let prompts = c.result("prompts/list", json!({})).await;
    assert!(!prompts.to_string().contains("written-elsewhere"));

    use mcp_harbor::store::{CatalogEntry, CatalogKind, CatalogStore, SqlStore, TenantStore};
    let url = format!("sqlite://{}/mcp-harbor.db", shared.path().display());
    let store = SqlStore::connect(&url, 1).await.unwrap();
    let now = mcp_harbor::store::now_millis();
    let prompt = json!({ "name": "written-elsewhere", "description": "d",
        "messages": [{ "role": "user", "text": "hi" }] });
    store
        .insert_entry(&CatalogEntry {
            tenant: "quiet".into(),
            kind: CatalogKind::Prompt,
            name: "written-elsewhere".into(),
            body: prompt,
            created_at: now,
            updated_at: now,
        })
        .await
        .unwrap();
    // The session hears the list changed, and the prompt is there.
    let mut heard = Vec::new();
    while let Some(e) = stream.next_event(Duration::from_secs(5)).await {
        if let Some(m) = e.json() {
            let done = m["method"] == "notifications/prompts/list_changed";
            heard.push(m);
            if done {
                break;
            }
        }
    }
    assert!(
        heard
            .iter()
            .any(|m| m["method"] == "notifications/prompts/list_changed"),
        "{heard:?}"
    );
    let prompts = c.result("prompts/list", json!({})).await;
    assert!(
        prompts.to_string().contains("written-elsewhere"),
        "{prompts}"
    );

    // Suspended in the store: refused here within a resync or two.
    let mut record = store.get_tenant("quiet").await.unwrap().unwrap();
    let seen = record.updated_at;
    record.status = mcp_harbor::store::TenantStatus::Suspended;
    record.updated_at = seen + 1;
    assert!(store.update_tenant(&record, seen).await.unwrap());
    let ping = json!({ "jsonrpc": "2.0", "id": 9, "method": "ping" });
    let status_within = |want: u16| {
        let ping = &ping;
        let session = c.session.clone();
        async move {
            for _ in 0..40 {
                let resp = a.post("quiet", Some(&session), ping).send().await.unwrap();
                if resp.status() == want {
                    return true;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            false
        }
    };
    assert!(status_within(403).await, "the suspension was caught up");

    // Deleted in the store: unknown here.
    assert!(store.delete_tenant("quiet", None).await.unwrap());
    assert!(status_within(404).await, "the deletion was caught up");
    store.close().await;
}

#[actix_rt::test]
async fn a_draining_replica_hands_its_sessions_over() {
    let Some((a, b, _db)) = two_replicas().await else {
        return;
    };
    let mut c = a.open_session("demo", "2025-11-25", json!({})).await;
    c.result("logging/setLevel", json!({ "level": "error" }))
        .await;
    let mut stream = SseReader::new(c.get_stream(None).await);
    a.drainer.drain().await;
    // The open stream is told to reconnect, then ends.
    let mut events = Vec::new();
    assert!(
        stream
            .ends_within(Duration::from_secs(5), &mut events)
            .await
    );
    // b restores the session.
    let call = json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "test_tool_with_logging", "arguments": {} } });
    let resp = served_by(&b, &c.session, call, &b).await;
    let (answer, others) = crate::helpers::read_answer(resp, 2).await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(
        others.is_empty(),
        "the log level moved with the session: {others:?}"
    );
}

/// A stand-in for a replica's advertised address: it reads the request on each connection,
/// reports it, and once told to closes the connection without an answer, as an owner that is
/// shutting down drops a request crossing its close. It goes on accepting connections, as the
/// owner's restarted process does at the same address. Connections that send nothing (a check
/// that something listens) are dropped at once.
struct DroppingFront {
    arrivals: tokio::sync::mpsc::UnboundedReceiver<()>,
    release: tokio::sync::watch::Sender<bool>,
}

impl DroppingFront {
    async fn start() -> (String, DroppingFront) {
        use tokio::io::AsyncReadExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (arrived, arrivals) = tokio::sync::mpsc::unbounded_channel();
        let (release, released) = tokio::sync::watch::channel(false);
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let (arrived, mut released) = (arrived.clone(), released.clone());
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = arrived.send(());
                    let _ = released.wait_for(|r| *r).await;
                });
            }
        });
        (url, DroppingFront { arrivals, release })
    }

    /// Waits for a request forwarded to the address.
    async fn request_arrived(&mut self) {
        tokio::time::timeout(Duration::from_secs(10), self.arrivals.recv())
            .await
            .expect("a request forwarded to the owner's address")
            .unwrap();
    }

    /// Closes the connections holding requests, unanswered.
    fn drop_requests(&self) {
        self.release.send(true).unwrap();
    }
}

/// Replicas named `names` sharing state, the first (`a`) advertising a `DroppingFront`'s
/// address instead of its own: the others forward to it there.
async fn behind_a_dropping_front(
    names: &[&str],
) -> Option<(Vec<TestApp>, tempfile::TempDir, DroppingFront)> {
    let (url, front) = DroppingFront::start().await;
    let (apps, db) = shared_replicas(names, |c| {
        if c.cluster.replica_id.starts_with("a-") {
            c.cluster.advertise_url = url.clone();
        }
    })
    .await?;
    Some((apps, db, front))
}

/// The rolling-restart race: a replica forwards a request to the session's owner, the owner
/// drains (handing the session over) and its connection closes without an answer, while its
/// address still accepts connections. The request is served by taking the session over, not
/// refused with a 502.
#[actix_rt::test]
async fn a_request_dropped_by_a_draining_owner_is_served_by_taking_the_session_over() {
    let Some((apps, _db, mut front)) = behind_a_dropping_front(&["a", "b"]).await else {
        return;
    };
    let [a, b]: [TestApp; 2] = apps.try_into().ok().unwrap();
    let mut c = a.open_session("demo", "2025-11-25", json!({})).await;
    c.result("logging/setLevel", json!({ "level": "error" }))
        .await;
    let sent = post_to(
        &b,
        &c.session,
        &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": { "name": "test_tool_with_logging", "arguments": {} } }),
    )
    .send();
    let sent = tokio::spawn(sent);
    front.request_arrived().await;
    a.drainer.drain().await;
    front.drop_requests();
    let resp = answered_by(sent.await.unwrap().unwrap(), &b);
    let (answer, others) = crate::helpers::read_answer(resp, 2).await;
    assert!(answer.get("result").is_some(), "{answer}");
    assert!(
        others.is_empty(),
        "the session moved with its log level: {others:?}"
    );
    // The session goes on at b.
    let ping = json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" });
    served_by(&b, &c.session, ping, &b).await;
}

/// The same drop, while a third replica takes the session over first: the request goes on to
/// that new owner rather than being told the session is gone.
#[actix_rt::test]
async fn a_dropped_request_follows_the_session_to_the_replica_that_took_it_over_first() {
    let Some((apps, _db, mut front)) = behind_a_dropping_front(&["a", "b", "c"]).await else {
        return;
    };
    let [a, b, c]: [TestApp; 3] = apps.try_into().ok().unwrap();
    let client = a.open_session("demo", "2025-11-25", json!({})).await;
    let sent = tokio::spawn(
        post_to(
            &b,
            &client.session,
            &json!({ "jsonrpc": "2.0", "id": 2, "method": "tools/list" }),
        )
        .send(),
    );
    front.request_arrived().await;
    a.drainer.drain().await;
    // c serves the session first (restoring it from its snapshot).
    let ping = json!({ "jsonrpc": "2.0", "id": 3, "method": "ping" });
    served_by(&c, &client.session, ping, &c).await;
    front.drop_requests();
    let resp = answered_by(sent.await.unwrap().unwrap(), &c);
    let (answer, _) = crate::helpers::read_answer(resp, 2).await;
    assert!(answer["result"]["tools"].is_array(), "{answer}");
}

/// The same drop for a legacy (HTTP+SSE) session: its stream was the session, so once its
/// owner has drained the message is answered 404 (start a new session), not 502 (retry).
#[actix_rt::test]
async fn a_legacy_message_dropped_by_a_draining_owner_is_answered_session_not_found() {
    let Some((apps, _db, mut front)) = behind_a_dropping_front(&["a", "b"]).await else {
        return;
    };
    let [a, b]: [TestApp; 2] = apps.try_into().ok().unwrap();
    let stream = a
        .http
        .get(format!("{}/t/demo/sse", a.base))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    let mut sse = SseReader::new(stream);
    let endpoint = sse.next_event(Duration::from_secs(5)).await.unwrap();
    assert!(endpoint.data.starts_with("/t/demo/messages?sessionId="));
    let sent = tokio::spawn(
        b.http
            .post(format!("{}{}", b.base, endpoint.data))
            .header("content-type", "application/json")
            .body(json!({ "jsonrpc": "2.0", "id": 1, "method": "ping" }).to_string())
            .send(),
    );
    front.request_arrived().await;
    a.drainer.drain().await;
    front.drop_requests();
    let resp = sent.await.unwrap().unwrap();
    assert_eq!(resp.status(), 404, "{:?}", resp.headers());
    let body: Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], json!(-32001), "{body}");
}

/// Redis goes away under a running replica (a proxy in front of it refuses connections), then
/// comes back: what needs it answers 503 with Retry-After at once (new sessions, readiness), the
/// open session keeps answering, a running call's events wait (logged before they are written)
/// and arrive once Redis is back, and the replica recovers by itself.
#[actix_rt::test]
async fn redis_outages_are_clear_503s_and_nothing_is_lost_when_it_returns() {
    use crate::helpers::redis_proxy::Mode;
    let Some((app, proxy)) = crate::helpers::app_behind_redis_proxy(|_| {}).await else {
        return;
    };
    let mut c = app.open_session("demo", "2025-11-25", json!({})).await;
    c.result("tools/list", json!({})).await;

    proxy.set(Mode::Refuse);
    let started = std::time::Instant::now();
    let resp = app.initialize("demo", "2025-11-25", json!({})).await;
    assert_eq!(resp.status(), 503, "a new session needs its lease in Redis");
    assert!(resp.headers().contains_key("retry-after"));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    let ready = app
        .http
        .get(format!("{}/readyz", app.base))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 503);
    // The open session still answers what needs no shared state.
    let echo = c
        .result(
            "tools/call",
            json!({ "name": "echo", "arguments": { "text": "still here" } }),
        )
        .await;
    assert_eq!(echo["content"][0]["text"], "still here");
    // A call whose answer streams: its events cannot be logged, so they wait.
    let call = c
        .post(
            &json!({ "jsonrpc": "2.0", "id": 40, "method": "tools/call", "params": {
            "name": "slow_count", "arguments": { "steps": 3, "interval_ms": 20 },
            "_meta": { "progressToken": "outage" } } }),
        )
        .send();
    let pending = actix_rt::spawn(call);
    tokio::time::sleep(Duration::from_millis(500)).await;

    proxy.set(Mode::Up);
    let resp = pending.await.unwrap().unwrap();
    let (answer, others) = crate::helpers::read_answer(resp, 40).await;
    assert_eq!(
        answer["result"]["content"][0]["text"], "counted 3",
        "{answer}"
    );
    let progress = others
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .count();
    assert_eq!(
        progress, 3,
        "every event arrived once Redis was back: {others:?}"
    );
    let mut recovered = false;
    for _ in 0..50 {
        let resp = app
            .post(
                "demo",
                None,
                &crate::helpers::initialize_body("2025-11-25", json!({})),
            )
            .send()
            .await
            .unwrap();
        if resp.status() == 200 {
            recovered = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(recovered, "new sessions open again once Redis is back");
}

/// `notifications/initialized` is answered by the HTTP worker (no trip through the session
/// actor), and the session's snapshot in the shared state still records it: a session that sent
/// it is saved initialized, one that did not is not.
#[actix_rt::test]
async fn the_snapshot_records_whether_the_client_sent_initialized() {
    let Some(redis_url) = test_redis_url().await else {
        return;
    };
    let db = tempfile::tempdir().unwrap();
    let prefix = format!("test-{}", uuid::Uuid::new_v4().simple());
    let app = spawn_app_with(|c| {
        c.redis.url = redis_url.clone();
        c.redis.key_prefix = prefix.clone();
        c.storage.data_dir = db.path().display().to_string();
    })
    .await;
    let mut redis = redis::Client::open(redis_url.as_str())
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .unwrap();

    // One session sends initialized (open_session checks the 202), the other does not.
    let mut told = app.open_session("demo", "2025-11-25", json!({})).await;
    let resp = app.initialize("demo", "2025-11-25", json!({})).await;
    assert_eq!(resp.status(), 200);
    let untold = resp.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_string();

    // A change of the log level is saved in a new snapshot.
    told.result("logging/setLevel", json!({ "level": "error" }))
        .await;
    let resp = post_to(
        &app,
        &untold,
        &json!({ "jsonrpc": "2.0", "id": 2, "method": "logging/setLevel",
                 "params": { "level": "error" } }),
    )
    .send()
    .await
    .unwrap();
    assert_eq!(resp.status(), 200);

    for (session, initialized) in [(&told.session, true), (&untold, false)] {
        let key = format!("{prefix}:snap:demo:{session}");
        let mut saved = None;
        for _ in 0..100 {
            let raw: Option<String> = redis::cmd("GET")
                .arg(&key)
                .query_async(&mut redis)
                .await
                .unwrap();
            let snapshot: Option<Value> = raw.map(|r| serde_json::from_str(&r).unwrap());
            if let Some(s) = snapshot.filter(|s| s["log_level"] == "error") {
                saved = Some(s);
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let saved = saved.unwrap_or_else(|| panic!("no snapshot with the new level at {key}"));
        assert_eq!(saved["initialized"], json!(initialized), "{saved}");
    }
}
