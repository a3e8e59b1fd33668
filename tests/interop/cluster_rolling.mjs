// Rolling restart under load (CI's multi-replica stage, step c): several official TypeScript SDK
// clients loop tools/call and tools/list through the load balancer while every replica in turn
// gets SIGTERM (it drains: hands its sessions over) and starts again. Zero failed requests.
//
//   node tests/interop/cluster_rolling.mjs NGINX_URL REPLICAS     (deploy/cluster.sh up first)
// The SDK is loaded from $INTEROP_DIR (default ~/.cache/mcp-harbor/interop).
import { execFile } from "node:child_process";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { promisify } from "node:util";

const [base, replicasArg] = process.argv.slice(2);
if (!base) {
  console.error("usage: cluster_rolling.mjs NGINX_URL [REPLICAS]");
  process.exit(2);
}
const replicas = Number(replicasArg ?? 3);
const root = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const interopDir = process.env.INTEROP_DIR ?? join(homedir(), ".cache", "mcp-harbor", "interop");
const esm = (p) => pathToFileURL(join(interopDir, "node_modules", "@modelcontextprotocol", "sdk", "dist", "esm", p)).href;
const { Client } = await import(esm("client/index.js"));
const { StreamableHTTPClientTransport } = await import(esm("client/streamableHttp.js"));
const run = promisify(execFile);
setTimeout(() => {
  console.error("cluster-rolling: FAIL: did not finish within 150 s");
  process.exit(1);
}, 150_000).unref();

const CLIENTS = 4;
let requests = 0;
const failures = [];
let stop = false;

async function worker(n) {
  const client = new Client({ name: `rolling-${n}`, version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(`${base}/t/demo/mcp`)));
  let i = 0;
  while (!stop) {
    i++;
    try {
      if (i % 3 === 0) {
        const r = await client.listTools();
        if (!r.tools?.length) throw new Error("empty tools/list");
      } else {
        const text = `client ${n} call ${i}`;
        const r = await client.callTool({ name: "echo", arguments: { text } });
        if (r.content?.[0]?.text !== text) throw new Error(`echo answered ${JSON.stringify(r)}`);
      }
      requests++;
    } catch (e) {
      failures.push(`client ${n} request ${i}: ${e?.message ?? e}`);
    }
    await new Promise((res) => setTimeout(res, 5));
  }
  await client.close();
}

const workers = Array.from({ length: CLIENTS }, (_, n) => worker(n + 1));
await new Promise((res) => setTimeout(res, 1000));
const started = Date.now();
for (let i = 1; i <= replicas; i++) {
  const before = requests;
  const { stdout } = await run("bash", [join(root, "deploy", "cluster.sh"), "restart", String(i)]);
  process.stdout.write(stdout);
  console.log(`restarted r${i}: ${requests - before} requests served meanwhile, ${failures.length} failed so far`);
  await new Promise((res) => setTimeout(res, 500));
}
stop = true;
await Promise.all(workers);
console.log(`requests=${requests} failed=${failures.length} over ${((Date.now() - started) / 1000).toFixed(1)} s of restarts`);
for (const f of failures.slice(0, 10)) console.log(`  ${f}`);
if (requests === 0 || failures.length) {
  console.log("cluster-rolling: 0 passed, 1 failed");
  process.exit(1);
}
console.log("cluster-rolling: 1 passed, 0 failed");
