// The official TypeScript SDK v2 client (@modelcontextprotocol/client) against one MCP URL in
// its 2026-07-28 era: `versionNegotiation: { mode: 'auto' }` probes with server/discover and must
// settle on the stateless revision; then lists, calls (plain, with input_required rounds that
// the client fulfils through its own handlers: an elicitation, a sample and roots in one round,
// two rounds in turn), gets a prompt that asks, reads a resource, listens for the change a tool
// makes (subscriptions/listen); and a client left in its
// default (legacy) mode still gets a session on the same URL.
//
//   node ts_modern.mjs <mcp-url>
//
// Environment: TS_SDK2_DIR (where @modelcontextprotocol/client is installed, default
// ~/.cache/mcp-harbor/ts-sdk2). Prints "TS SDK v2 OK".
import { createRequire } from 'node:module';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { check, deadline } from './steps.mjs';

const url = process.argv[2];
if (!url) {
  console.error('usage: node ts_modern.mjs <mcp-url>');
  process.exit(2);
}
const dir = process.env.TS_SDK2_DIR ?? join(homedir(), '.cache', 'mcp-harbor', 'ts-sdk2');
const require = createRequire(join(dir, 'noop.cjs'));
const { Client, StreamableHTTPClientTransport } = await import(require.resolve('@modelcontextprotocol/client'));

const timer = deadline();
const text = (result) => result.content?.find((c) => c.type === 'text')?.text ?? '';

const client = new Client(
  { name: 'mcp-harbor-ts-v2', version: '1.0.0' },
  { capabilities: { elicitation: {}, sampling: {}, roots: {} }, versionNegotiation: { mode: 'auto' } },
);
const asked = [];
client.setRequestHandler('elicitation/create', async (request) => {
  asked.push('elicitation');
  const field = Object.keys(request.params.requestedSchema?.properties ?? {})[0] ?? 'name';
  return { action: 'accept', content: { [field]: field === 'color' ? 'teal' : 'Ada' } };
});
client.setRequestHandler('sampling/createMessage', async () => {
  asked.push('sampling');
  return { role: 'assistant', content: { type: 'text', text: 'Good day' }, model: 'stub-model', stopReason: 'endTurn' };
});
client.setRequestHandler('roots/list', async () => {
  asked.push('roots');
  return { roots: [{ uri: 'file:///srv/project', name: 'project' }] };
});
await client.connect(new StreamableHTTPClientTransport(new URL(url)));
check(client.getProtocolEra() === 'modern', `auto negotiation settles on the stateless era (${client.getProtocolEra()})`);
check(client.getNegotiatedProtocolVersion() === '2026-07-28', `at 2026-07-28 (${client.getNegotiatedProtocolVersion()})`);

const { tools } = await client.listTools();
check(tools.some((t) => t.name === 'echo'), `tools/list (${tools.length} tools)`);
const echoed = await client.callTool({ name: 'echo', arguments: { text: 'hello v2' } });
check(text(echoed) === 'hello v2', 'tools/call echo');

const several = await client.callTool({ name: 'test_input_required_result_multiple_inputs', arguments: {} });
const got = text(several);
check(got.includes('Ada') && got.includes('Good day') && got.includes('file:///srv/project'), `one round of three questions fulfilled: ${got}`);
check(['elicitation', 'sampling', 'roots'].every((k) => asked.includes(k)), 'through the client\'s own handlers');
const rounds = await client.callTool({ name: 'test_input_required_result_multi_round', arguments: {} });
check(text(rounds) === "Ada's favorite color is teal", `two rounds in turn: ${text(rounds)}`);

const prompt = await client.getPrompt({ name: 'test_input_required_result_prompt', arguments: {} });
check(prompt.messages?.[0]?.content?.text?.includes('Ada'), 'prompts/get of a prompt that asks');
const resource = await client.readResource({ uri: 'test://static-text' });
check(resource.contents?.[0]?.text?.includes('static text'), 'resources/read');

// subscriptions/listen: a change the client itself makes reaches its listen stream.
let updated;
const arrived = new Promise((resolve) => {
  client.setNotificationHandler('notifications/resources/updated', (n) => {
    updated = n.params.uri;
    resolve();
  });
});
const subscription = await client.listen({ resourceSubscriptions: ['demo://note'] });
check(subscription.honoredFilter.resourceSubscriptions?.includes('demo://note'), 'subscriptions/listen acknowledged');
await client.callTool({ name: 'set_note', arguments: { text: 'from the v2 client' } });
await Promise.race([arrived, new Promise((resolve) => setTimeout(resolve, 5000))]);
check(updated === 'demo://note', 'notifications/resources/updated on the listen stream');
await subscription.close();
check((await subscription.closed) === 'local', 'the subscription closes');
await client.close();

// The default mode: the plain 2025 handshake, a session on the same URL.
const legacy = new Client({ name: 'mcp-harbor-ts-v2-legacy', version: '1.0.0' });
await legacy.connect(new StreamableHTTPClientTransport(new URL(url)));
check(legacy.getProtocolEra() === 'legacy', `the default mode opens a session (${legacy.getNegotiatedProtocolVersion()})`);
const legacyEcho = await legacy.callTool({ name: 'echo', arguments: { text: 'hello session' } });
check(text(legacyEcho) === 'hello session', 'tools/call in the session');
await legacy.close();

clearTimeout(timer);
console.log('TS SDK v2 OK');
