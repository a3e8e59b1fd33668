// Loads the official TypeScript SDK v1 (`@modelcontextprotocol/sdk`) for the interop checks
// (ts_client.mjs, federation_ts.mjs) from $INTEROP_DIR (default ~/.cache/mcp-harbor/interop),
// where tests/interop/install.sh installs it under node_modules. NODE_PATH does not apply to ESM
// imports, so the package's ESM entry points are resolved here (through its "exports" with the
// "import" condition) and imported by file URL.
//
//   import { SDK, interopDir, importSdk, SdkLocateError } from './sdk_v1.mjs';
//   const { Client } = await importSdk('client/index.js');
//
// `importSdk` throws `SdkLocateError` when the package cannot be found under $INTEROP_DIR, and
// another error when it does not export the subpath or the module fails to load.

import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';

export const SDK = '@modelcontextprotocol/sdk';
export const interopDir = process.env.INTEROP_DIR ?? join(homedir(), '.cache', 'mcp-harbor', 'interop');

/** The SDK could not be located under `interopDir` (as opposed to a module that failed to load). */
export class SdkLocateError extends Error {}

function sdkRoot() {
  const require = createRequire(join(interopDir, 'noop.cjs'));
  let dir = dirname(require.resolve(`${SDK}/client`));
  while (true) {
    const pj = join(dir, 'package.json');
    if (existsSync(pj) && JSON.parse(readFileSync(pj, 'utf8')).name === SDK) return dir;
    const up = dirname(dir);
    if (up === dir) throw new Error(`cannot find ${SDK} package root under ${interopDir}`);
    dir = up;
  }
}

// The package root and its "exports", found on first use.
let located;
function locate() {
  if (!located) {
    try {
      const root = sdkRoot();
      located = { root, exportsMap: JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')).exports };
    } catch (err) {
      throw new SdkLocateError(err?.message ?? String(err));
    }
  }
  return located;
}

/** The file URL of the SDK's ESM entry point for `subpath` (e.g. `client/streamableHttp.js`). */
export function esmPath(subpath) {
  const { root, exportsMap } = locate();
  const key = `./${subpath}`;
  let target = exportsMap[key]?.import;
  if (!target) {
    for (const [pattern, conds] of Object.entries(exportsMap)) {
      const star = pattern.indexOf('*');
      if (star < 0) continue;
      const pre = pattern.slice(0, star);
      const post = pattern.slice(star + 1);
      if (key.startsWith(pre) && key.endsWith(post) && conds.import) {
        target = conds.import.replace('*', key.slice(pre.length, key.length - post.length));
        break;
      }
    }
  }
  if (!target) throw new Error(`${SDK} does not export ${key}`);
  return pathToFileURL(join(root, target)).href;
}

/** Imports `@modelcontextprotocol/sdk/<subpath>` from `interopDir`. */
export async function importSdk(subpath) {
  return import(esmPath(subpath));
}
