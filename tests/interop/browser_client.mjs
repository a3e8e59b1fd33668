// A browser-based MCP client (as the MCP Inspector's direct mode is one) in headless Chromium,
// driven by playwright-core: a page served from another origin calls the MCP endpoint with
// fetch, so every request crosses origins and goes through CORS (preflights for the JSON
// content type and MCP's headers, the session id read from a response header).
//
// 1. A page at http://localhost:<port> (a loopback origin, which the server admits) opens a
//    2025-11-25 session, calls `echo`, ends the session with DELETE, then makes a stateless
//    2026-07-28 `tools/call` (Mcp-Method / Mcp-Name headers): all must succeed.
// 2. The same page at http://app.example:<port> (mapped to 127.0.0.1 in the browser; an origin
//    the tenant does not allow) must be refused: the browser gets no grant, fetch fails.
// Screenshots of both pages go to <screenshot-dir>.
//
//   node browser_client.mjs <mcp-url> <screenshot-dir>
//
// Environment: CHROMIUM (default /usr/bin/chromium), INTEROP_DIR (where playwright-core is
// installed, default ~/.cache/mcp-harbor/interop). Prints "BROWSER CLIENT OK".
import { createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { check, closeBrowser, finished, launch } from './browser.mjs';

const [mcpUrl, shots] = process.argv.slice(2);
if (!mcpUrl || !shots) {
  console.error('usage: node browser_client.mjs <mcp-url> <screenshot-dir>');
  process.exit(2);
}

// The client, as it runs in the page: raw fetch, as a browser-based client does it.
const client = `
const V1 = '2025-11-25', V2 = '2026-07-28';
const base = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
async function answer(r) {
  const text = await r.text();
  if ((r.headers.get('content-type') || '').startsWith('application/json')) return JSON.parse(text);
  for (const event of text.split('\\n\\n')) {
    const data = event.split('\\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5)).join('');
    if (data) {
      const message = JSON.parse(data);
      if ('result' in message || 'error' in message) return message;
    }
  }
  throw new Error('no answer in the stream');
}
async function run(mcp) {
  const out = [];
  const say = (line) => { out.push(line); document.getElementById('log').textContent = out.join('\\n'); };
  const post = (body, headers = {}) => fetch(mcp, { method: 'POST', headers: { ...base, ...headers }, body: JSON.stringify(body) });
  let r = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: V1, capabilities: {}, clientInfo: { name: 'browser-page', version: '1' } } });
  const session = r.headers.get('mcp-session-id');
  const init = await answer(r);
  say('initialize: ' + r.status + ', session ' + (session ? 'readable' : 'NOT readable') + ', server ' + init.result?.serverInfo?.name);
  const inSession = { 'mcp-session-id': session, 'mcp-protocol-version': V1 };
  r = await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, inSession);
  say('initialized: ' + r.status);
  r = await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'echo', arguments: { text: 'hello from a browser' } } }, inSession);
  const call = await answer(r);
  say('tools/call echo: ' + r.status + ' ' + call.result?.content?.[0]?.text);
  r = await fetch(mcp, { method: 'DELETE', headers: inSession });
  const deleted = r.status;
  say('DELETE session: ' + deleted);
  const meta = { 'io.modelcontextprotocol/protocolVersion': V2, 'io.modelcontextprotocol/clientCapabilities': {}, 'io.modelcontextprotocol/clientInfo': { name: 'browser-page', version: '1' } };
  r = await post({ jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'echo', arguments: { text: 'stateless from a browser' }, _meta: meta } },
    { 'mcp-protocol-version': V2, 'mcp-method': 'tools/call', 'mcp-name': 'echo' });
  const modern = await answer(r);
  say('2026-07-28 tools/call echo: ' + r.status + ' ' + modern.result?.content?.[0]?.text);
  return { session: Boolean(session), init: init.result?.protocolVersion, text: call.result?.content?.[0]?.text, deleted, modern: modern.result?.content?.[0]?.text, out };
}
`;
const page = `<!doctype html><meta charset="utf-8"><title>Browser MCP client</title>
<h1>A browser-based MCP client</h1><p>Page origin: <b id="origin"></b><br>MCP endpoint: <b>${mcpUrl}</b></p>
<pre id="log" style="background:#f4f4f4;padding:8px"></pre>
<script>document.getElementById('origin').textContent = location.origin;${client}</script>`;

const pageServer = createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(page);
});
await new Promise((resolve) => pageServer.listen(0, '127.0.0.1', resolve));
const port = pageServer.address().port;
mkdirSync(shots, { recursive: true });

const browser = await launch(['--host-resolver-rules=MAP app.example 127.0.0.1']);
const context = await browser.newContext();

// 1. An admitted origin (loopback).
const admitted = await context.newPage();
await admitted.goto(`http://localhost:${port}/`);
const result = await admitted.evaluate((mcp) => run(mcp), mcpUrl).catch((e) => ({ error: String(e) }));
await admitted.screenshot({ path: join(shots, 'admitted-origin.png'), fullPage: true });
check(!result.error, `the page at http://localhost:${port} ran its calls${result.error ? ': ' + result.error : ''}`);
check(result.session, 'the page read Mcp-Session-Id (an exposed header)');
check(result.init === '2025-11-25', 'initialize answered across origins');
check(result.text === 'hello from a browser', 'tools/call in the session, after a preflight');
check(result.deleted >= 200 && result.deleted < 300, `DELETE ended the session (${result.deleted})`);
check(result.modern === 'stateless from a browser', 'a 2026-07-28 tools/call with Mcp-Method/Mcp-Name, after a preflight');
for (const line of result.out) console.log(`     ${line}`);

// 2. A refused origin: the same page elsewhere gets no grant.
const refused = await context.newPage();
await refused.goto(`http://app.example:${port}/`);
const outcome = await refused
  .evaluate((mcp) => run(mcp).then(() => 'answered', (e) => `refused: ${e}`), mcpUrl);
await refused.evaluate((o) => { document.getElementById('log').textContent = o; }, outcome);
await refused.screenshot({ path: join(shots, 'refused-origin.png'), fullPage: true });
check(outcome.startsWith('refused: TypeError'), `the page at http://app.example:${port} is refused by the browser (${outcome})`);

await closeBrowser();
pageServer.close();
finished();
console.log('BROWSER CLIENT OK');
