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
import { Provider, callAndRefresh, signIn as signInAs } from './oauth_common.mjs';
import { check, deadline, fail } from './steps.mjs';

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
const timer = deadline();

const issuer = mcpUrl.replace(/\/mcp$/, '');
const CLIENT_NAME = 'MCP SDK OAuth test';
const signIn = (url) => signInAs(url, { username, password, clientName: CLIENT_NAME, issuer });

const provider = new Provider(CLIENT_NAME);
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
const code = (await signIn(authUrl)).searchParams.get('code');
await transport.finishAuth(code);
check(Boolean(provider.saved?.access_token && provider.saved?.refresh_token), 'code exchanged for access and refresh tokens');

transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
await client.connect(transport);
const session = transport.sessionId;
check(Boolean(session), `connected with the token (session ${session})`);
const firstRefresh = await callAndRefresh(client, provider);
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
clearTimeout(timer);
console.log('OAUTH SDK FLOW OK');
