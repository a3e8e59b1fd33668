// Steps of the interop scripts that run without a browser (browser.mjs has its own, which
// close the browser): each check printed, the first failure ending the run, and a deadline.

/** Ends the run as failed. */
export function fail(message) {
  console.error(`FAIL: ${message}`);
  process.exit(1);
}

/** Prints a step that held, or ends the run when it did not. */
export function check(ok, message) {
  if (!ok) fail(message);
  console.log(`ok   ${message}`);
}

/** Fails the run unless it clears the returned timer within 60 s. */
export function deadline() {
  return setTimeout(() => fail('the run did not finish within 60 s'), 60_000);
}
