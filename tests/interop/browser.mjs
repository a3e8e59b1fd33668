// What the headless-Chromium scripts share: playwright-core from INTEROP_DIR (default
// ~/.cache/mcp-harbor/interop), Chromium from CHROMIUM (default /usr/bin/chromium), a 90 s
// deadline for the whole run, and check/fail printing each step.
import { homedir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';

const interopDir = process.env.INTEROP_DIR ?? join(homedir(), '.cache', 'mcp-harbor', 'interop');
const { chromium } = createRequire(join(interopDir, 'noop.cjs'))('playwright-core');

let browser;
const deadline = setTimeout(() => fail('the run did not finish within 90 s'), 90_000);

/** Starts headless Chromium with `args` beside --no-sandbox. */
export async function launch(args = []) {
  browser = await chromium.launch({
    executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
    args: ['--no-sandbox', ...args],
  });
  return browser;
}

/** Closes the browser the run no longer needs. */
export async function closeBrowser() {
  await browser?.close();
  browser = undefined;
}

/** Ends the run as failed. */
export async function fail(message) {
  console.error(`FAIL: ${message}`);
  try {
    await browser?.close();
  } catch {}
  process.exit(1);
}

/** Prints a step that held, or ends the run when it did not. */
export function check(ok, message) {
  if (!ok) {
    console.error(`FAIL: ${message}`);
    process.exit(1);
  }
  console.log(`ok   ${message}`);
}

/** The run finished: the deadline no longer holds the process. */
export function finished() {
  clearTimeout(deadline);
}
