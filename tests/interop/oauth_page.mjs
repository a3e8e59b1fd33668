// The login and consent page in a real browser (headless Chromium driven by playwright-core):
// the client is registered by DCR, the user opens the authorization URL, sees the client's name,
// its redirect host and the scopes, signs in, allows, and lands on the redirect URI with a code
// (a local callback server receives it); the code is exchanged and the token opens an MCP
// session. Screenshots of the page and the callback go to <screenshot-dir>.
//
//   node oauth_page.mjs <mcp-url> <username> <password> <screenshot-dir>
//
// Environment: CHROMIUM (default /usr/bin/chromium), INTEROP_DIR (where playwright-core is
// installed, default ~/.cache/mcp-harbor/interop). Prints "OAUTH BROWSER FLOW OK".
import { createHash, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { check, closeBrowser, finished, launch } from './browser.mjs';

const [mcpUrl, username, password, shots] = process.argv.slice(2);
if (!mcpUrl || !username || !password || !shots) {
  console.error('usage: node oauth_page.mjs <mcp-url> <username> <password> <screenshot-dir>');
  process.exit(2);
}
const b64url = (buf) => buf.toString('base64url');

// Discovery, as a client does it: 401 -> resource metadata -> authorization server metadata.
const unauthorized = await fetch(mcpUrl, {
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'browser-test', version: '1' } } }),
});
check(unauthorized.status === 401, 'the MCP endpoint asks for a token (401)');
const prmUrl = /resource_metadata="([^"]+)"/.exec(unauthorized.headers.get('www-authenticate') ?? '')?.[1];
check(Boolean(prmUrl), 'WWW-Authenticate names the resource metadata');
const prm = await (await fetch(prmUrl)).json();
const issuer = prm.authorization_servers[0];
const asUrl = new URL(issuer);
const metadata = await (await fetch(`${asUrl.origin}/.well-known/oauth-authorization-server${asUrl.pathname}`)).json();
check(metadata.issuer === issuer, `authorization server metadata of ${issuer}`);

// A callback server standing in for the client's redirect URI.
let received;
const callbackServer = createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  if (url.pathname !== '/callback') {
    res.writeHead(404);
    return res.end();
  }
  received = url;
  res.writeHead(200, { 'content-type': 'text/html' });
  res.end('<!doctype html><title>Signed in</title><h1>Signed in: the client received its code</h1>');
});
await new Promise((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
const redirectUri = `http://127.0.0.1:${callbackServer.address().port}/callback`;

const registration = await fetch(metadata.registration_endpoint, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ client_name: 'Browser test', redirect_uris: [redirectUri], grant_types: ['authorization_code', 'refresh_token'], response_types: ['code'], token_endpoint_auth_method: 'none' }),
});
check(registration.status === 201, 'registered by DCR');
const { client_id } = await registration.json();

const verifier = b64url(randomBytes(48));
const challenge = b64url(createHash('sha256').update(verifier).digest());
const state = b64url(randomBytes(12));
const authorize = new URL(metadata.authorization_endpoint);
for (const [k, v] of Object.entries({ response_type: 'code', client_id, redirect_uri: redirectUri, state, code_challenge: challenge, code_challenge_method: 'S256', scope: 'mcp', resource: mcpUrl })) {
  authorize.searchParams.set(k, v);
}

mkdirSync(shots, { recursive: true });
const browser = await launch();
const page = await browser.newPage();
await page.goto(authorize.href);
await page.screenshot({ path: join(shots, 'login.png'), fullPage: true });
const text = await page.textContent('main');
check(text.includes('Browser test'), 'the page names the client');
check(text.includes('127.0.0.1'), 'the page names the redirect host');
check(text.includes('mcp'), 'the page lists the scopes');
for (const id of ['username', 'password']) {
  check((await page.locator(`label[for="${id}"]`).count()) === 1, `the ${id} field has a label`);
}
// A wrong password first: the page says so and stays.
await page.fill('#username', username);
await page.fill('#password', 'not the password');
await Promise.all([page.waitForLoadState('load'), page.click('button[value="allow"]')]);
check((await page.textContent('[role="alert"]'))?.includes('Wrong username or password'), 'a wrong password is shown on the page');
await page.fill('#password', password);
await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectUri), { timeout: 15_000 }), page.click('button[value="allow"]')]);
await page.screenshot({ path: join(shots, 'callback.png'), fullPage: true });
await closeBrowser();
check(received?.searchParams.get('state') === state, 'landed on the redirect URI with the state');
check(received?.searchParams.get('iss') === issuer, 'and the issuer (RFC 9207)');
const code = received?.searchParams.get('code');
check(Boolean(code), 'and a code');
callbackServer.close();

const tokenResponse = await fetch(metadata.token_endpoint, {
  method: 'POST',
  headers: { 'content-type': 'application/x-www-form-urlencoded' },
  body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: redirectUri, client_id, code_verifier: verifier, resource: mcpUrl }),
});
check(tokenResponse.status === 200, 'the code is exchanged for tokens');
const { access_token } = await tokenResponse.json();
const init = await fetch(mcpUrl, {
  method: 'POST',
  headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${access_token}` },
  body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'browser-test', version: '1' } } }),
});
check(init.status === 200 && Boolean(init.headers.get('mcp-session-id')), 'the token opens an MCP session');
finished();
console.log(`screenshots: ${join(shots, 'login.png')}, ${join(shots, 'callback.png')}`);
console.log('OAUTH BROWSER FLOW OK');
