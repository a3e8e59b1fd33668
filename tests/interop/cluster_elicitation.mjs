// Failover drill (CI's multi-replica stage, step b): a webhook tool waits on an elicitation; the
// replica running the call is killed with SIGKILL; the client's answer, posted afterwards through
// nginx, completes the call on another replica from the round the dead one recorded in the
// database; the result arrives on the resumed stream.
//
//   ADMIN_TOKEN=… node tests/interop/cluster_elicitation.mjs NGINX_URL HOOK_URL
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { headers, sseEvents as events } from "./mcp_http.mjs";

const [base, hook] = process.argv.slice(2);
if (!base || !hook || !process.env.ADMIN_TOKEN) {
  console.error("usage: ADMIN_TOKEN=… cluster_elicitation.mjs NGINX_URL HOOK_URL");
  process.exit(2);
}
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const fail = (msg) => {
  console.error(`cluster-elicitation: FAIL: ${msg}`);
  process.exit(1);
};
setTimeout(() => fail("did not finish within 60 s"), 60_000).unref();
const url = `${base}/t/demo/mcp`;

// The tool, published through the admin API (any replica).
const tool = `ask_name_${Date.now()}`;
const pub = await fetch(`${base}/admin/v1/tenants/demo/tools`, {
  method: "POST",
  headers: { "content-type": "application/json", authorization: `Bearer ${process.env.ADMIN_TOKEN}` },
  body: JSON.stringify({ name: tool, description: "Asks for a name, then greets", input_schema: { type: "object" },
    webhook: { url: `${hook}/ask`, timeout_ms: 5000 } }),
});
if (pub.status !== 201) fail(`publishing the tool answered ${pub.status}: ${await pub.text()}`);

const init = await fetch(url, { method: "POST", headers: headers(null), body: JSON.stringify({
  jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-11-25",
    capabilities: { elicitation: {} }, clientInfo: { name: "elicitation-drill", version: "1" } } }) });
const sid = init.headers.get("mcp-session-id");
await init.text();
if (init.status !== 200 || !sid) fail(`initialize answered ${init.status}`);
await fetch(url, { method: "POST", headers: headers(sid), body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });

const call = await fetch(url, { method: "POST", headers: headers(sid),
  body: JSON.stringify({ jsonrpc: "2.0", id: 5, method: "tools/call", params: { name: tool, arguments: {} } }) });
if (call.status !== 200) fail(`tools/call answered ${call.status}`);
const owner = call.headers.get("x-harbor-replica") ?? "";
let lastId = null;
let question = null;
for await (const ev of events(call)) {
  if (ev.id) lastId = ev.id;
  const m = ev.data ? JSON.parse(ev.data) : null;
  if (m?.method === "elicitation/create") {
    question = m;
    break;
  }
}
if (!question) fail("no elicitation/create on the call's stream");
execFileSync("bash", [join(root, "deploy", "cluster.sh"), "kill", owner.replace(/^r/, "")], { stdio: "inherit" });

// The answer comes after the owner died; another replica takes the session over.
const answer = await fetch(url, { method: "POST", headers: headers(sid), body: JSON.stringify({
  jsonrpc: "2.0", id: question.id, result: { action: "accept", content: { name: "Grace" } } }) });
await answer.text();
if (answer.status !== 202) fail(`the answer was refused: ${answer.status}`);

let result = null;
const deadline = Date.now() + 15_000;
while (!result && Date.now() < deadline) {
  const r = await fetch(url, { headers: headers(sid, { accept: "text/event-stream", "last-event-id": lastId }) });
  if (r.status !== 200) {
    await r.text();
    await new Promise((res) => setTimeout(res, 200));
    continue;
  }
  for await (const ev of events(r)) {
    const m = ev.data ? JSON.parse(ev.data) : null;
    if (m?.id === 5) {
      result = m;
      break;
    }
  }
}
if (!result) fail("the call's result never arrived");
const text = result.result?.content?.[0]?.text ?? "";
if (!text.startsWith("hello Grace (round 2")) fail(`unexpected result: ${JSON.stringify(result)}`);
console.log(`owner ${owner} killed while waiting; result: ${text}`);
console.log("cluster-elicitation: 1 passed, 0 failed");
