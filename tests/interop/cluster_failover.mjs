// Failover drill through the load balancer (CI's multi-replica stage, step a):
// a client with an open standalone GET stream and a long-running, idempotent tool call whose SSE
// answer it is reading; the replica owning the session is killed with SIGKILL; the client
// resumes the call's stream with Last-Event-ID through nginx; every event arrives exactly once,
// the result arrives, and the session goes on without a new initialize.
//
//   node tests/interop/cluster_failover.mjs NGINX_URL      (deploy/cluster.sh up first)
// Prints takeover_ms (kill -> first byte of the resumed stream). Exits 1 on any failure.
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { headers, sseEvents } from "./mcp_http.mjs";

const base = process.argv[2];
if (!base) {
  console.error("usage: cluster_failover.mjs NGINX_URL");
  process.exit(2);
}
const url = `${base}/t/demo/mcp`;
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const fail = (msg) => {
  console.error(`cluster-failover: FAIL: ${msg}`);
  process.exit(1);
};
setTimeout(() => fail("did not finish within 60 s"), 60_000).unref();

// Reads SSE events from a fetch response, calling onEvent({id, data}) for each until it returns
// "stop"; says how the stream ended.
async function readSse(resp, onEvent) {
  const state = {};
  for await (const ev of sseEvents(resp, state)) {
    if (onEvent(ev) === "stop") return "stopped";
  }
  return state.end ?? "ended";
}

// 1. A session, through the balancer.
const init = await fetch(url, {
  method: "POST",
  headers: headers(null),
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
    protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "failover-drill", version: "1" } } }),
});
if (init.status !== 200) fail(`initialize answered ${init.status}`);
const sid = init.headers.get("mcp-session-id");
await init.text();
const ack = await fetch(url, { method: "POST", headers: headers(sid),
  body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
if (ack.status !== 202) fail(`notifications/initialized answered ${ack.status}`);

// 2. The standalone stream stays open meanwhile.
const standalone = await fetch(url, { headers: headers(sid, { accept: "text/event-stream" }) });
if (standalone.status !== 200) fail(`GET stream answered ${standalone.status}`);
const standaloneDone = readSse(standalone, () => {});

// 3. A long call (idempotent tool: re-run after a takeover) with progress.
const STEPS = 12;
const call = await fetch(url, { method: "POST", headers: headers(sid), body: JSON.stringify({
  jsonrpc: "2.0", id: 7, method: "tools/call", params: { name: "slow_count",
    arguments: { steps: STEPS, interval_ms: 250 }, _meta: { progressToken: "drill" } } }) });
if (call.status !== 200) fail(`tools/call answered ${call.status}`);
const owner = call.headers.get("x-harbor-replica") ?? "";
const index = Number(owner.replace(/^r/, ""));
if (!Number.isInteger(index) || index < 1) fail(`no owner replica in x-harbor-replica (${owner})`);
const seen = [];
let lastId = null;
let progressBefore = 0;
let killedAt = 0;
const firstLeg = await readSse(call, (ev) => {
  if (ev.id) {
    seen.push(ev.id);
    lastId = ev.id;
  }
  if (ev.data && JSON.parse(ev.data).method === "notifications/progress") progressBefore++;
  if (progressBefore === 3 && !killedAt) {
    execFileSync("bash", [join(root, "deploy", "cluster.sh"), "kill", String(index)], { stdio: "inherit" });
    killedAt = Date.now();
  }
  if (ev.data && JSON.parse(ev.data).id === 7) return "stop";
});
if (!killedAt) fail(`the call ended before the owner was killed (${firstLeg})`);
console.log(`first leg: ${progressBefore} progress events from ${owner}, then ${firstLeg}`);
await standaloneDone;

// 4. Resume through the balancer: another replica takes the session over.
let resumed = null;
let firstByteAt = 0;
const deadline = Date.now() + 15_000;
while (Date.now() < deadline) {
  const r = await fetch(url, { headers: headers(sid, { accept: "text/event-stream", "last-event-id": lastId }) });
  if (r.status === 200) {
    resumed = r;
    firstByteAt = Date.now();
    break;
  }
  await r.text();
  console.log(`resume answered ${r.status}; retrying`);
  await new Promise((res) => setTimeout(res, 200));
}
if (!resumed) fail("could not resume within 15 s");
const newOwner = resumed.headers.get("x-harbor-replica");
let response = null;
const secondLeg = await readSse(resumed, (ev) => {
  if (ev.id) seen.push(ev.id);
  if (ev.data) {
    const m = JSON.parse(ev.data);
    if (m.id === 7) {
      response = m;
      return "stop";
    }
  }
});
if (!response) fail(`the resumed stream ended without the result (${secondLeg})`);
const text = response.result?.content?.[0]?.text;
if (text !== `counted ${STEPS}`) fail(`unexpected result ${JSON.stringify(response)}`);
const dupes = seen.filter((id, i) => seen.indexOf(id) !== i);
if (dupes.length) fail(`events delivered twice: ${dupes.join(", ")}`);
console.log(`takeover_ms=${firstByteAt - killedAt} (resumed on ${newOwner}, ${seen.length} events, none twice)`);

// 5. The session goes on without a new initialize.
const list = await fetch(url, { method: "POST", headers: headers(sid),
  body: JSON.stringify({ jsonrpc: "2.0", id: 8, method: "tools/list" }) });
const body = await list.json().catch(() => ({}));
if (list.status !== 200 || !body.result?.tools) fail(`tools/list after failover: ${list.status}`);
console.log("cluster-failover: 1 passed, 0 failed");
