/**
 * A program a test needs from the system, other than Node. `.ci/run` installs every one of them on the host,
 * so one missing there is an error. A run that lacks one on purpose names it in INFERGATE_TEST_WITHOUT
 * (comma-separated; the test image of docker/test.Dockerfile sets `chromium`): the tests that need it then
 * skip, saying why, instead of failing.
 */

/**
 * undefined when the tool is `present`; otherwise the reason to skip when INFERGATE_TEST_WITHOUT names it.
 * Throws (with `install`, how to get it) when it is missing without being named there.
 */
export function skipWithout(name: string, present: boolean, install: string): string | undefined {
  if (present) return undefined;
  const listed = (process.env.INFERGATE_TEST_WITHOUT ?? '').split(',').map((s) => s.trim());
  if (!listed.includes(name)) throw new Error(`${name} is missing: ${install}`);
  return `${name} is not installed in this run (INFERGATE_TEST_WITHOUT=${process.env.INFERGATE_TEST_WITHOUT}): ${install}`;
}

/**
 * The uWebSockets.js build ('20.57' or '20.30') a gateway or mock started by this test serves with: they
 * run on this same node with these same packages, so src/common/uws.ts chooses the same one. For the
 * facts that differ between the builds (README, "Supported runtimes" and "HTTP surface").
 */
export async function uwsBuild(): Promise<string> {
  const { loadUws, uwsInUse } = await import('../../src/common/uws.js');
  loadUws();
  const used = uwsInUse();
  if (used === undefined) throw new Error('no uWS build loaded');
  return used.version;
}
