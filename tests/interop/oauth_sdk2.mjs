// The official TypeScript SDK v2 client (@modelcontextprotocol/client) against a protected
// tenant in its 2026-07-28 era, with its OAuth client provider: the probe meets the 401, the SDK
// discovers the authorization server, registers itself (DCR), the user signs in on the tenant's
// login page (played as in oauth_sdk.mjs), the SDK exchanges the code (PKCE) and connects by
// server/discover with the token, calls a tool (a bearer token on every stateless request), and
// refreshes when its access token is refused.
//
//   node oauth_sdk2.mjs <mcp-url> <username> <password>
//
// Environment: TS_SDK2_DIR (default ~/.cache/mcp-harbor/ts-sdk2). Prints "OAUTH SDK V2 FLOW OK".
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { Provider, callAndRefresh, signIn } from './oauth_common.mjs';
import { check, deadline, fail } from './steps.mjs';

const [mcpUrl, username, password] = process.argv.slice(2);
if (!mcpUrl || !username || !password) {
  console.error('usage: node oauth_sdk2.mjs <mcp-url> <username> <password>');
  process.exit(2);
}
const dir = process.env.TS_SDK2_DIR ?? join(homedir(), '.cache', 'mcp-harbor', 'ts-sdk2');
const require = createRequire(join(dir, 'noop.cjs'));
const { Client, StreamableHTTPClientTransport, UnauthorizedError } = await import(require.resolve('@modelcontextprotocol/client'));

const timer = deadline();

const issuer = mcpUrl.replace(/\/mcp$/, '');
const CLIENT_NAME = 'MCP SDK v2 OAuth test';
const provider = new Provider(CLIENT_NAME);
const options = { capabilities: {}, versionNegotiation: { mode: 'auto' } };
let client = new Client({ name: 'harbor-oauth-sdk2', version: '1.0.0' }, options);
let transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
try {
  await client.connect(transport);
  fail('connected without signing in');
} catch (e) {
  check(e instanceof UnauthorizedError, `the 401 starts the OAuth flow (${e?.constructor?.name})`);
}
check(Boolean(provider.client?.client_id), `registered by DCR as ${provider.client?.client_id}`);
const authUrl = provider.pending;
check(authUrl?.searchParams.get('code_challenge_method') === 'S256', 'PKCE S256');
check(authUrl.searchParams.get('resource') === mcpUrl, 'resource names the MCP server (RFC 8707)');
const back = await signIn(authUrl, { username, password, clientName: CLIENT_NAME, issuer });
// The callback's parameters: the SDK checks `iss` (RFC 9207) before it redeems the code.
await transport.finishAuth(back.searchParams);
check(Boolean(provider.saved?.access_token && provider.saved?.refresh_token), 'code exchanged for access and refresh tokens');

client = new Client({ name: 'harbor-oauth-sdk2', version: '1.0.0' }, options);
transport = new StreamableHTTPClientTransport(new URL(mcpUrl), { authProvider: provider });
await client.connect(transport);
check(client.getNegotiatedProtocolVersion() === '2026-07-28', `connected with the token at ${client.getNegotiatedProtocolVersion()}`);
await callAndRefresh(client, provider);

await client.close();
clearTimeout(timer);
console.log('OAUTH SDK V2 FLOW OK');
