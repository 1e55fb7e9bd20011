// Build-time step of docker/Dockerfile: keep only the uWebSockets.js binary this image runs on.
// It loads the builds the way the gateway does (dist/common/uws.js), so the image build fails here,
// not at the first start, when no build loads natively on the base image. Then it uninstalls the other
// build (with its own dependencies: 20.30's ws fallback) and deletes every .node file of the chosen one
// except uws_<platform>_<arch>_<abi>.node (both packages carry binaries for every platform: about 113 MB
// each). Run after `npm prune --omit=dev`, in the app's folder.
import { execFileSync } from 'node:child_process';
import { existsSync, lstatSync, readdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const { loadUws, uwsInUse, UWS_BUILDS } = await import(new URL('../dist/common/uws.js', import.meta.url).href);
loadUws();
const inUse = uwsInUse().version;
const modules = fileURLToPath(new URL('../node_modules/', import.meta.url));
const keep = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;

function walk(dir, out = []) {
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    if (e.isDirectory()) walk(p, out);
    else out.push(p);
  }
  return out;
}

let freed = 0;
const unused = [];
for (const build of UWS_BUILDS) {
  const root = join(modules, build.module);
  if (!existsSync(root)) continue; // not installed (an optional dependency skipped on this platform)
  if (build.version !== inUse) {
    unused.push(build.module);
    continue;
  }
  for (const f of walk(root).filter((f) => f.endsWith('.node') && !f.endsWith(`/${keep}`))) {
    freed += lstatSync(f).size;
    rmSync(f);
  }
}
if (unused.length > 0) {
  const size = (dir) => walk(dir).reduce((n, f) => n + lstatSync(f).size, 0);
  const before = size(modules);
  // --no-save: package.json and the lock stay as they are; --omit=dev: the dev tree stays out
  execFileSync('npm', ['uninstall', '--no-save', '--omit=dev', '--no-audit', '--no-fund', '--loglevel=error', ...unused], { stdio: 'inherit', cwd: fileURLToPath(new URL('..', import.meta.url)) });
  freed += before - size(modules);
}
console.log(`uws ${inUse} native on Node ${process.versions.node}: kept ${keep}, removed ${(freed / 1048576).toFixed(0)} MB of other builds and platforms`);
