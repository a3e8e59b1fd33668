// URL-mode elicitation in a real browser (headless Chromium driven by playwright-core): a webhook
// tool (a local endpoint in this script) asks for a secret; an MCP session that declared
// `elicitation.url` gets `elicitation/create` with the platform's page; the page is opened in
// Chromium, the secret typed into its password field and submitted; the session then gets
// `notifications/elicitation/complete` and the tool's result, and the endpoint the secret.
// Screenshots of the page before and after go to <screenshot-dir>.
//
//   node elicitation_page.mjs <server-url> <admin-token> <screenshot-dir>
//
// The server must allow webhooks on loopback (egress.allow_private). Environment:
// CHROMIUM (default /usr/bin/chromium), INTEROP_DIR (where playwright-core is installed, default
// ~/.cache/mcp-harbor/interop). Prints "ELICITATION BROWSER FLOW OK".
import { randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { check, closeBrowser, fail, finished, launch } from './browser.mjs';

const [server, adminToken, shots] = process.argv.slice(2);
if (!server || !adminToken || !shots) {
  console.error('usage: node elicitation_page.mjs <server-url> <admin-token> <screenshot-dir>');
  process.exit(2);
}

// The tool's endpoint: round 1 asks for a secret, round 2 reports what it got.
const secret = `ghp_${randomBytes(18).toString('base64url')}`;
let delivered;
const endpoint = createServer(async (req, res) => {
  let body = '';
  for await (const chunk of req) body += chunk;
  const call = JSON.parse(body);
  let answer;
  if (call.round === 1) {
    answer = { input_request: { type: 'secret', name: 'github_token', message: 'Paste a GitHub token with repo scope.' }, state: { step: 1 } };
  } else {
    delivered = call.input;
    const ok = call.input?.action === 'accept';
    answer = { content: [{ type: 'text', text: ok ? `deployed with a ${call.input.secret.length}-character token` : `no token: ${JSON.stringify(call.input)}` }], isError: !ok };
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify(answer));
});
await new Promise((resolve) => endpoint.listen(0, '127.0.0.1', resolve));
const hookUrl = `http://127.0.0.1:${endpoint.address().port}/deploy`;

const admin = (method, path, body) =>
  fetch(`${server}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    body: body && JSON.stringify(body),
  });
const tenant = `elicit-${randomBytes(3).toString('hex')}`;
check((await admin('POST', '/tenants', { slug: tenant, auth: { mode: 'none' } })).status === 201, `tenant ${tenant} created`);
const published = await admin('POST', `/tenants/${tenant}/tools`, {
  name: 'deploy', description: 'Deploys; needs a GitHub token', input_schema: { type: 'object' },
  webhook: { url: hookUrl, secret: `whsec_${randomBytes(32).toString('base64')}`, timeout_ms: 5000 },
});
check(published.status === 201, `webhook tool published (${published.status})`);

// An MCP session that takes URL-mode elicitation.
const mcpUrl = `${server}/t/${tenant}/mcp`;
const post = (body, session) =>
  fetch(mcpUrl, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...(session ? { 'mcp-session-id': session, 'mcp-protocol-version': '2025-11-25' } : {}) },
    body: JSON.stringify(body),
  });
const init = await post({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: { elicitation: { url: {} } }, clientInfo: { name: 'elicitation-browser-test', version: '1' } } });
const session = init.headers.get('mcp-session-id');
check(init.status === 200 && Boolean(session), 'session opened (2025-11-25, elicitation.url)');
await init.text();
check((await post({ jsonrpc: '2.0', method: 'notifications/initialized' }, session)).status === 202, 'initialized');

// The tool call's stream, read message by message.
const call = await post({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'deploy', arguments: {} } }, session);
check(call.status === 200, 'tools/call streams');
const reader = call.body.getReader();
const decoder = new TextDecoder();
let buffered = '';
async function nextMessage() {
  for (;;) {
    const end = buffered.indexOf('\n\n');
    if (end >= 0) {
      const event = buffered.slice(0, end);
      buffered = buffered.slice(end + 2);
      const data = event.split('\n').filter((l) => l.startsWith('data:')).map((l) => l.slice(5).trim()).join('\n');
      if (data) return JSON.parse(data);
      continue;
    }
    const { value, done } = await reader.read();
    if (done) await fail('the stream ended early');
    buffered += decoder.decode(value, { stream: true }).replace(/\r\n/g, '\n');
  }
}
const request = await nextMessage();
check(request.method === 'elicitation/create' && request.params.mode === 'url', 'the client gets elicitation/create in URL mode');
const { elicitationId, url, message } = request.params;
check(url === `${server}/t/${tenant}/elicitations/${elicitationId}` && !url.includes(secret), `it points to the platform's page: ${url}`);
check(message === 'Paste a GitHub token with repo scope.', 'with the tool\'s message');
check((await post({ jsonrpc: '2.0', id: request.id, result: { action: 'accept' } }, session)).status === 202, 'the user agrees to open it');

// The page, in Chromium.
mkdirSync(shots, { recursive: true });
const browser = await launch();
const page = await browser.newPage();
const response = await page.goto(url);
check(response.status() === 200, 'the page opens');
check((await page.textContent('h1')).includes('needs a secret'), 'it says a secret is needed');
check((await page.textContent('blockquote')).includes('Paste a GitHub token'), 'and shows what is asked');
check((await page.getAttribute('#secret', 'type')) === 'password', 'the secret goes into a password field');
await page.fill('#secret', secret);
await page.screenshot({ path: join(shots, 'elicitation-page.png'), fullPage: true });
await Promise.all([page.waitForNavigation(), page.click('button[value=submit]')]);
check((await page.textContent('h1')).includes('Thank you'), 'submitted: the page thanks the user');
await page.screenshot({ path: join(shots, 'elicitation-done.png'), fullPage: true });
await closeBrowser();

// The session learns it is done, and the tool finishes with the secret.
const complete = await nextMessage();
check(complete.method === 'notifications/elicitation/complete' && complete.params.elicitationId === elicitationId, 'notifications/elicitation/complete names the elicitation');
const result = await nextMessage();
check(result.id === 2 && result.result?.content?.[0]?.text === `deployed with a ${secret.length}-character token`, `the tool's result: ${JSON.stringify(result.result?.content?.[0]?.text)}`);
check(delivered?.secret === secret && delivered?.action === 'accept', 'the endpoint received the secret');
const listed = await (await admin('GET', `/tenants/${tenant}/elicitations?status=completed`)).json();
check(listed.items.length === 1 && !JSON.stringify(listed).includes(secret), 'the admin API lists it completed, without the secret');
await admin('DELETE', `/tenants/${tenant}`);
endpoint.close();
finished();
console.log(`screenshots in ${shots}`);
console.log('ELICITATION BROWSER FLOW OK');
