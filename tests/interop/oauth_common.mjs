// What the SDK OAuth scripts share (oauth_sdk.mjs: the TypeScript SDK v1; oauth_sdk2.mjs: the v2
// client): the SDK's OAuth client provider, kept in memory, the user's browser on the tenant's
// login page (this plays it: it reads the form and posts it), and the call-and-refresh steps.

import { check } from './steps.mjs';

export const REDIRECT = 'http://127.0.0.1:38123/callback';

/** Signs `username` in on the login page at `authorizationUrl` and allows: the URL the server
 * redirects to (its `code`, `state` and `iss`). `clientName` is what the page must name,
 * `issuer` what the redirect's `iss` must be. */
export async function signIn(authorizationUrl, { username, password, clientName, issuer }) {
  const page = await fetch(authorizationUrl, { redirect: 'manual' });
  check(page.status === 200, `login page served (${page.status})`);
  const cookie = (page.headers.getSetCookie?.() ?? [])
    .map((c) => c.split(';')[0])
    .find((c) => c.startsWith('harbor_csrf='));
  check(Boolean(cookie), 'the login page sets its CSRF cookie');
  const html = await page.text();
  check(html.includes(clientName), 'the page names the client');
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
  return back;
}

/** A call with the token, then one after the access token is refused (as when it expires): the
 * SDK must refresh, retry, and save the rotated tokens. Answers the first refresh token. */
export async function callAndRefresh(client, provider) {
  const echo = await client.callTool({ name: 'echo', arguments: { text: 'over oauth' } });
  check(echo.content?.[0]?.text === 'over oauth', 'tools/call answered');
  const firstRefresh = provider.saved.refresh_token;
  provider.saved = { ...provider.saved, access_token: 'expired-or-revoked' };
  const again = await client.callTool({ name: 'echo', arguments: { text: 'after refresh' } });
  check(again.content?.[0]?.text === 'after refresh', 'the call succeeded after a refresh');
  check(provider.saved.access_token !== 'expired-or-revoked', 'a new access token was saved');
  check(provider.saved.refresh_token && provider.saved.refresh_token !== firstRefresh, 'the refresh token rotated');
  return firstRefresh;
}

/** The SDK's OAuth client provider, registering by DCR as `clientName`. */
export class Provider {
  constructor(clientName) {
    this.clientName = clientName;
    this.client = undefined;
    this.saved = undefined;
    this.verifier = undefined;
    this.pending = undefined;
    this.discovery = undefined;
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return {
      client_name: this.clientName,
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
  // The authorization server the flow started with (v2: checked against the callback's `iss`).
  saveDiscoveryState(state) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

