// A tenant's authorization server against the official conformance suite's authorization-server
// scenarios (`conformance authorization`: its metadata endpoint, then the authorization code
// grant). The suite prints the authorization URL for a person to open and waits on a local
// callback; here headless Chromium opens it, signs the user in and allows. The client is
// registered by DCR with the suite's callback as its redirect URI.
//
//   node oauth_conformance.mjs <mcp-url> <username> <password> <results-dir>
//
// Environment: CONFORMANCE_DIR (where the 0.2 suite is installed, default
// ~/.cache/mcp-harbor/conformance-2026), CHROMIUM, INTEROP_DIR (see browser.mjs). Prints
// "OAUTH CONFORMANCE OK" when every check of both scenarios succeeded.
import { spawn } from 'node:child_process';
import { createServer } from 'node:net';
import { readdirSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { check, closeBrowser, fail, finished, launch } from './browser.mjs';

const [mcpUrl, username, password, results] = process.argv.slice(2);
if (!mcpUrl || !username || !password || !results) {
  console.error('usage: node oauth_conformance.mjs <mcp-url> <username> <password> <results-dir>');
  process.exit(2);
}
const conformanceDir = process.env.CONFORMANCE_DIR ?? join(homedir(), '.cache', 'mcp-harbor', 'conformance-2026');

// The issuer, found as a client finds it (the protected resource's metadata).
const unauthorized = await fetch(mcpUrl, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{}' });
check(unauthorized.status === 401, 'the MCP endpoint asks for a token (401)');
const prmUrl = /resource_metadata="([^"]+)"/.exec(unauthorized.headers.get('www-authenticate') ?? '')?.[1];
const issuer = (await (await fetch(prmUrl)).json()).authorization_servers[0];
const asUrl = new URL(issuer);
const metadata = await (await fetch(`${asUrl.origin}/.well-known/oauth-authorization-server${asUrl.pathname}`)).json();
check(metadata.issuer === issuer, `authorization server metadata of ${issuer}`);

// A free loopback port for the suite's callback server, registered as the redirect URI.
const port = await new Promise((resolve) => {
  const s = createServer();
  s.listen(0, '127.0.0.1', () => {
    const { port } = s.address();
    s.close(() => resolve(port));
  });
});
const redirectUri = `http://127.0.0.1:${port}/callback`;
const registration = await fetch(metadata.registration_endpoint, {
  method: 'POST',
  headers: { 'content-type': 'application/json' },
  body: JSON.stringify({ client_name: 'Conformance suite', redirect_uris: [redirectUri], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'none' }),
});
check(registration.status === 201, 'the suite\'s client registered by DCR');
const { client_id } = await registration.json();

const suite = spawn(
  'npx',
  ['--no-install', 'conformance', 'authorization', '--url', issuer, '--client-id', client_id, '--resource', mcpUrl, '--port', String(port), '-o', results],
  { cwd: conformanceDir, stdio: ['ignore', 'pipe', 'inherit'] },
);
const exited = new Promise((resolve) => suite.on('exit', (code) => resolve(code)));
let output = '';
const authorizationUrl = await new Promise((resolve, reject) => {
  suite.stdout.on('data', (chunk) => {
    process.stdout.write(chunk);
    output += chunk;
    const line = output.split('\n').find((l) => l.startsWith(`${metadata.authorization_endpoint}?`));
    if (line) resolve(line.trim());
  });
  exited.then((code) => reject(new Error(`the suite ended (${code}) before printing the authorization URL`)));
}).catch((e) => fail(e.message));
check(new URL(authorizationUrl).searchParams.get('client_id') === client_id, 'the suite asks for authorization');

const browser = await launch();
const page = await browser.newPage();
await page.goto(authorizationUrl);
await page.fill('#username', username);
await page.fill('#password', password);
await Promise.all([page.waitForURL((u) => u.href.startsWith(redirectUri), { timeout: 15_000 }), page.click('button[value="allow"]')]);
await closeBrowser();
check(true, 'signed in and allowed; the browser reached the suite\'s callback');

const code = await exited;
let checks = [];
for (const dir of readdirSync(results)) {
  checks = checks.concat(JSON.parse(readFileSync(join(results, dir, 'checks.json'), 'utf8')));
}
for (const c of checks) {
  console.log(`${c.status.padEnd(8)} ${c.id}${c.errorMessage ? `: ${c.errorMessage}` : ''}`);
}
check(checks.some((c) => c.id.startsWith('authorization-server-metadata')), 'the metadata scenario ran');
check(checks.some((c) => /code/i.test(c.id)), 'the authorization code grant scenario ran');
check(checks.every((c) => c.status === 'SUCCESS'), 'every check succeeded');
check(code === 0, `the suite exited 0 (${code})`);
finished();
console.log('OAUTH CONFORMANCE OK');
