// The official TypeScript SDK client against a protected tenant, with its OAuth client provider:
// it discovers the authorization server from the 401, registers itself (DCR), the user signs in
// on the tenant's login page (this script plays the browser: it reads the form and posts it),
// the SDK exchanges the code (PKCE), calls a tool, refreshes when its access token is refused,
// and keeps its session; then refresh-token reuse revokes the family.
//
//   node oauth_sdk.mjs <mcp-url> <username> <password>
//
// Prints one line per step and "OAUTH SDK FLOW OK"; exits 1 on the first failure.
// The SDK is loaded from $INTEROP_DIR (default ~/.cache/mcp-harbor/interop, see install.sh).
import { homedir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const interopDir = process.env.INTEROP_DIR ?? join(homedir(), '.cache', 'mcp-harbor', 'interop');
const sdk = (path) =>
  import(pathToFileURL(join(interopDir, 'node_modules', '@modelcontextprotocol', 'sdk', 'dist', 'esm', path)).href);
const { Client } = await sdk('client/index.js');
const { StreamableHTTPClientTransport } = await sdk('client/streamableHttp.js');
const { UnauthorizedError } = await sdk('client/auth.js');

const [mcpUrl, username, password] = process.argv.slice(2);
if (!mcpUrl || !username || !password) {
  console.error('usage: node oauth_sdk.mjs <mcp-url> <username> <password>');
  process.exit(2);
}
const deadline = setTimeout(() => fail('the flow did not finish within 60 s'), 60_000);
function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}
function check(ok, message) {
  if (!ok) fail(message);
  console.log(`ok   ${message}`);
}

const issuer = mcpUrl.replace(/\/mcp$/, '');
const REDIRECT = 'http://127.0.0.1:38123/callback';

/** Plays the user's browser on the login page: returns the code the server redirects with. */
async function signIn(authorizationUrl) {
  const page = await fetch(authorizationUrl, { redirect: 'manual' });
  check(page.status === 200, `login page served (${page.status})`);
  const cookie = (page.headers.getSetCookie?.() ?? [])
    .map((c) => c.split(';')[0])
    .find((c) => c.startsWith('harbor_csrf='));
  check(Boolean(cookie), 'the login page sets its CSRF cookie');
  const html = await page.text();
  check(html.includes('MCP SDK OAuth test'), 'the page names the client');
  const unescape = (s) =>
    s.replaceAll('&quot;', '"').replaceAll('&#39;', "'").replaceAll('&lt;', '<').replaceAll('&gt;', '>').replaceAll('&amp;', '&');
  const form = new URLSearchParams();
  for (const m of html.matchAll(/<input type="hidden" name="([^"]*)" value="([^"]*)">/g)) {
    form.append(unescape(m[1]), unescape(m[2]));
  }
  form.append('username', username);
  form.append('password', password);
  form.append('decision', 'allow');
  const action = new URL(authorizationUrl);
  action.search = '';
  const answer = await fetch(action, {
    method: 'POST',
    redirect: 'manual',
    headers: { 'content-type': 'application/x-www-form-urlencoded', cookie },
    body: form,
  });
  check(answer.status === 303, `signed in and sent back (${answer.status})`);
  const back = new URL(answer.headers.get('location'));
  check(back.href.startsWith(REDIRECT), 'back at the registered redirect URI');
  check(back.searchParams.get('iss') === issuer, 'iss names the tenant issuer (RFC 9207)');
  check(back.searchParams.get('state') === new URL(authorizationUrl).searchParams.get('state'), 'state returned');
  return back.searchParams.get('code');
}

class Provider {
  constructor() {
    this.client = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.pending = undefined;
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return {
      client_name: 'MCP SDK OAuth test',
      redirect_uris: [REDIRECT],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  state() {
    return 'sdk-' + Math.random().toString(36).slice(2);
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info) {
    this.client = info;
  }
  tokens() {
    return this.saved;
  }
  saveTokens(tokens) {
    this.saved = tokens;
  }
  redirectToAuthorization(url) {
    this.pending = url;
  }
  saveCodeVerifier(v) {
    this.verifier = v;
  }
  codeVerifier() {
    return this.verifier;
  }
}

const provider = new Provider();
const client = new Client({ name: 'harbor-oauth-sdk', version: '1.0.0' }, { capabilities: {} });
let transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
try {
  await client.connect(transport);
  fail('connected without signing in');
} catch (e) {
  check(e instanceof UnauthorizedError, 'the 401 starts the OAuth flow');
}
check(Boolean(provider.client?.client_id), `registered by DCR as ${provider.client?.client_id}`);
check(Boolean(provider.pending), 'the SDK built an authorization URL');
const authUrl = provider.pending;
check(authUrl.searchParams.get('code_challenge_method') === 'S256', 'PKCE S256');
check(authUrl.searchParams.get('resource') === mcpUrl, 'resource names the MCP server (RFC 8707)');
const code = await signIn(authUrl);
await transport.finishAuth(code);
check(Boolean(provider.saved?.access_token && provider.saved?.refresh_token), 'code exchanged for access and refresh tokens');

transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
await client.connect(transport);
const session = transport.sessionId;
check(Boolean(session), `connected with the token (session ${session})`);
const echo = await client.callTool({ name: 'echo', arguments: { text: 'over oauth' } });
check(echo.content?.[0]?.text === 'over oauth', 'tools/call answered');

// The access token is refused (as when it expires): the SDK refreshes and retries.
const firstRefresh = provider.saved.refresh_token;
provider.saved = { ...provider.saved, access_token: 'expired-or-revoked' };
const again = await client.callTool({ name: 'echo', arguments: { text: 'after refresh' } });
check(again.content?.[0]?.text === 'after refresh', 'the call succeeded after a refresh');
check(provider.saved.access_token !== 'expired-or-revoked', 'a new access token was saved');
check(provider.saved.refresh_token && provider.saved.refresh_token !== firstRefresh, 'the refresh token rotated');
check(transport.sessionId === session, 'the session was kept across the refresh');

// Reusing the old refresh token revokes the family: the current one stops working too.
const refresh = (token) =>
  fetch(`${issuer}/oauth/token`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: token, client_id: provider.client.client_id }),
  });
let r = await refresh(firstRefresh);
check(r.status === 400 && (await r.json()).error === 'invalid_grant', 'a used refresh token is refused (invalid_grant)');
r = await refresh(provider.saved.refresh_token);
check(r.status === 400, 'reuse revoked the whole family');

await client.close();
clearTimeout(deadline);
console.log('OAUTH SDK FLOW OK');
