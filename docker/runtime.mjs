#!/usr/bin/env node
// Prints the runtime a test run had: "runtime: Node <version>, uWS <build>", the uWebSockets.js build that
// loads natively here (src/common/uws.ts's own choice). Needs dist/ (npm run build). .ci/run labels the
// host's and the image's results with it; docker/test-in-image.sh runs it after the suite.
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
let uws = 'unknown (no dist/)';
try {
  const m = await import(pathToFileURL(join(root, 'dist', 'common', 'uws.js')).href);
  try {
    m.loadUws();
    uws = m.uwsInUse().version;
  } catch {
    uws = 'none loads';
  }
} catch {
  // dist/ not built: say so rather than fail
}
console.log(`runtime: Node ${process.versions.node}, uWS ${uws}`);
