// Federation failover drill through the load balancer (CI's multi-replica stage): a tenant whose
// catalog is an upstream MCP server (another mcp-harbor serving the reference catalog); a client
// calls the upstream's tools through nginx, the replica holding its session is killed with
// SIGKILL, and the next call of the same session, taken over by another replica, reaches the
// upstream (that replica opens its own upstream session) without the client initializing again.
//
//   node tests/interop/cluster_federated.mjs NGINX_URL ADMIN_TOKEN UPSTREAM_MCP_URL
// Exits 1 on any failure.
import { execFileSync } from "node:child_process";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

import { headers, sseEvents } from "./mcp_http.mjs";

const [base, token, upstreamUrl] = process.argv.slice(2);
if (!upstreamUrl) {
  console.error("usage: cluster_federated.mjs NGINX_URL ADMIN_TOKEN UPSTREAM_MCP_URL");
  process.exit(2);
}
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const fail = (msg) => {
  console.error(`cluster-federated: FAIL: ${msg}`);
  process.exit(1);
};
setTimeout(() => fail("did not finish within 60 s"), 60_000).unref();

const admin = async (method, path, body) => {
  const r = await fetch(`${base}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body && JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, body: text ? JSON.parse(text) : null };
};

let r = await admin("POST", "/tenants", { slug: "federated", catalogs: [], auth: { mode: "none" } });
if (r.status !== 201) fail(`creating the tenant answered ${r.status}: ${JSON.stringify(r.body)}`);
r = await admin("PUT", "/tenants/federated/upstreams/reference", { name: "reference", url: upstreamUrl, prefix: "ref" });
if (r.status !== 201 || r.body.state?.connected !== true) fail(`defining the upstream answered ${r.status}: ${JSON.stringify(r.body)}`);
console.log(`upstream defined through ${r.body.state?.server_info?.name}: ${r.body.state?.tools} tools`);

const url = `${base}/t/federated/mcp`;
const init = await fetch(url, {
  method: "POST",
  headers: headers(null),
  body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: {
    protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "federated-drill", version: "1" } } }),
});
if (init.status !== 200) fail(`initialize answered ${init.status}`);
const sid = init.headers.get("mcp-session-id");
await init.text();
const ack = await fetch(url, { method: "POST", headers: headers(sid),
  body: JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) });
if (ack.status !== 202) fail(`notifications/initialized answered ${ack.status}`);

// One federated call: its result text and the replica that answered.
async function call(id) {
  const resp = await fetch(url, { method: "POST", headers: headers(sid), body: JSON.stringify({
    jsonrpc: "2.0", id, method: "tools/call", params: { name: "ref_test_simple_text", arguments: {} } }) });
  const replica = resp.headers.get("x-harbor-replica") ?? "";
  if (resp.status !== 200) return { status: resp.status, replica, text: await resp.text() };
  let answer = null;
  if ((resp.headers.get("content-type") ?? "").startsWith("application/json")) {
    answer = await resp.json();
  } else {
    for await (const ev of sseEvents(resp)) {
      const m = ev.data ? JSON.parse(ev.data) : {};
      if (m.id === id) {
        answer = m;
        break;
      }
    }
  }
  return { status: 200, replica, answer };
}

// Replicas other than the one that took the definition serve the upstream's entries once they
// have fetched its lists (announced on the bus): wait for this session's replica to list them.
const listedBy = Date.now() + 10_000;
for (let id = 2; ; id++) {
  const r = await fetch(url, { method: "POST", headers: headers(sid),
    body: JSON.stringify({ jsonrpc: "2.0", id, method: "tools/list" }) });
  const body = (r.headers.get("content-type") ?? "").startsWith("application/json") ? await r.json() : {};
  if (body.result?.tools?.some((t) => t.name === "ref_test_simple_text")) {
    console.log(`the upstream's tools listed by ${r.headers.get("x-harbor-replica")} after ${id - 1} tools/list`);
    break;
  }
  if (Date.now() > listedBy) fail(`the upstream's tools were not listed within 10 s: ${JSON.stringify(body).slice(0, 300)}`);
  await new Promise((res) => setTimeout(res, 100));
}

let owner = "";
for (let id = 10; id < 13; id++) {
  const c = await call(id);
  const text = c.answer?.result?.content?.[0]?.text;
  if (c.status !== 200 || !text) fail(`federated call ${id}: ${c.status} ${JSON.stringify(c.answer ?? c.text)}`);
  owner = c.replica;
}
const index = Number(owner.replace(/^r/, ""));
if (!Number.isInteger(index) || index < 1) fail(`no owner replica in x-harbor-replica (${owner})`);
console.log(`3 federated calls answered by ${owner}; killing it`);
execFileSync("bash", [join(root, "deploy", "cluster.sh"), "kill", String(index)], { stdio: "inherit" });

let after = null;
const deadline = Date.now() + 15_000;
for (let id = 20; Date.now() < deadline; id++) {
  const c = await call(id);
  if (c.status === 200 && c.answer?.result) {
    after = c;
    break;
  }
  console.log(`call after the kill answered ${c.status} ${JSON.stringify(c.answer ?? c.text).slice(0, 200)}; retrying`);
  await new Promise((res) => setTimeout(res, 200));
}
if (!after) fail("no federated call succeeded within 15 s of the kill");
if (after.replica === owner) fail(`the call was answered by the killed replica ${owner}`);
const text = after.answer.result.content?.[0]?.text ?? "";
if (after.answer.result.isError || !text) fail(`unexpected result after the kill: ${JSON.stringify(after.answer)}`);
console.log(`after the kill: answered by ${after.replica} from the upstream ("${text}")`);
console.log("cluster-federated: 1 passed, 0 failed");
