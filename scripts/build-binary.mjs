#!/usr/bin/env node
// Builds the single executable dist/bin/infergate with Node's single-executable applications (SEA):
//   1. esbuild bundles src/cli.ts and its dependencies into one CommonJS file (a SEA's main script must be
//      CommonJS and can require only Node's built-in modules), with the version written in;
//   2. the uWebSockets.js build that loads natively here (src/common/uws.ts's own choice) contributes its
//      binary for this platform, architecture and Node ABI as an asset; uws.ts loads it from there;
//   3. node --experimental-sea-config makes the blob, postject injects it into a copy of this node binary.
// The result runs on hosts like this one (same OS and architecture; the C library the uWS binary needs),
// with nothing else installed. Inputs unchanged since the last build (keyed by their sha256 in
// dist/bin/infergate.inputs): nothing is done. --force builds anyway.
// Run through `npm run build:binary` (which runs tsc first: the uWS choice is read from dist/).
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, readdirSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { execFileSync } from 'node:child_process';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const OUT = join(ROOT, 'dist', 'bin');
const BIN = join(OUT, process.platform === 'win32' ? 'infergate.exe' : 'infergate');
const STAMP = join(OUT, 'infergate.inputs');
const SENTINEL = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
const force = process.argv.includes('--force');

const require = createRequire(import.meta.url);
const { chooseUws, UWS_BUILDS, uwsAssetName } = await import(pathToFileURL(join(ROOT, 'dist', 'common', 'uws.js')).href);

// Which build loads here, and the file its package loaded it from (Node keeps addons in require.cache).
const binaryName = `uws_${process.platform}_${process.arch}_${process.versions.modules}.node`;
const choice = chooseUws(
  UWS_BUILDS,
  (build) => require(build.module),
  (uws) => typeof uws.getParts === 'function',
  () => ({ node: process.versions.node, abi: process.versions.modules, platform: `${process.platform}-${process.arch}`, libc: 'see above' }),
);
// The package's folder, from its main file: `<module>/package.json` is not resolvable where the package has
// an `exports` map without it (@btc-vision/uwebsockets.js, the 20.57 build).
const main = require.resolve(choice.build.module);
const marker = join('node_modules', choice.build.module);
const pkgRoot = main.slice(0, main.lastIndexOf(marker) + marker.length);
const uwsFile = Object.keys(require.cache).find((f) => f.startsWith(pkgRoot) && f.endsWith(binaryName));
if (!uwsFile) throw new Error(`uws ${choice.build.version} loaded, but not from a ${binaryName} under ${pkgRoot}`);
const asset = uwsAssetName(choice.build);

// The inputs: our sources, the locked dependencies, this script, the uWS binary, the node binary.
function files(dir) {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = join(dir, e.name);
    return e.isDirectory() ? files(p) : e.isFile() && !e.name.endsWith('.md') ? [p] : [];
  });
}
const hash = createHash('sha256');
for (const f of [...files(join(ROOT, 'src')).sort(), join(ROOT, 'package.json'), join(ROOT, 'package-lock.json'), fileURLToPath(import.meta.url), uwsFile]) {
  hash.update(relative(ROOT, f)).update('\0').update(readFileSync(f)).update('\0');
}
const node = statSync(process.execPath);
hash.update(`${process.execPath}\0${process.version}\0${node.size}\0${node.mtimeMs}\0${asset}`);
const inputs = hash.digest('hex');

if (!force && existsSync(BIN) && existsSync(STAMP) && readFileSync(STAMP, 'utf8').trim() === inputs) {
  console.log(`${relative(ROOT, BIN)} is up to date (inputs ${inputs.slice(0, 12)}; --force to rebuild)`);
  process.exit(0);
}

mkdirSync(OUT, { recursive: true });
rmSync(STAMP, { force: true });
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8'));

// 1. the bundle
const esbuild = await import('esbuild');
const bundle = join(OUT, 'infergate.cjs');
await esbuild.build({
  entryPoints: [join(ROOT, 'src', 'cli.ts')],
  outfile: bundle,
  bundle: true,
  platform: 'node',
  format: 'cjs',
  target: `node${process.versions.node.split('.')[0]}`,
  // import.meta does not exist in CommonJS: each of our modules gets the URL it would have in dist/ of a
  // checkout whose root is the executable's directory (so `config/demo.yaml` is looked for beside it)
  define: { __INFERGATE_VERSION__: JSON.stringify(pkg.version) },
  banner: {
    js: 'const __infergate_url = (rel) => require("node:url").pathToFileURL(require("node:path").join(require("node:path").dirname(process.execPath), rel)).href;',
  },
  plugins: [
    {
      name: 'import-meta-url',
      setup(b) {
        b.onLoad({ filter: /[\\/]src[\\/].*\.ts$/ }, (args) => {
          const rel = relative(join(ROOT, 'src'), args.path).replace(/\.ts$/, '.js').split('\\').join('/');
          const text = readFileSync(args.path, 'utf8').replaceAll('import.meta.url', `__infergate_url(${JSON.stringify(`dist/${rel}`)})`);
          return { contents: text, loader: 'ts' };
        });
      },
    },
  ],
  // loaded by uws.ts from the embedded asset, never required inside the executable
  external: UWS_BUILDS.map((b) => b.module),
  logLevel: 'warning',
});
// a SEA main script is compiled as a function body, where a #! line is a syntax error
const code = readFileSync(bundle, 'utf8').replace(/^#![^\n]*\n/, '');
writeFileSync(bundle, code);

// 2. the blob, with the uWS binary as an asset
const seaConfig = join(OUT, 'sea-config.json');
const blob = join(OUT, 'sea-prep.blob');
writeFileSync(
  seaConfig,
  JSON.stringify({ main: bundle, output: blob, disableExperimentalSEAWarning: true, useCodeCache: false, assets: { [asset]: uwsFile } }, null, 2),
);
execFileSync(process.execPath, ['--experimental-sea-config', seaConfig], { stdio: 'inherit' });

// 3. a copy of node with the blob injected
const tmp = `${BIN}.tmp`;
rmSync(tmp, { force: true });
copyFileSync(process.execPath, tmp);
chmodSync(tmp, 0o755);
if (process.platform === 'darwin') execFileSync('codesign', ['--remove-signature', tmp], { stdio: 'inherit' });
const { inject } = require('postject');
await inject(tmp, 'NODE_SEA_BLOB', readFileSync(blob), {
  sentinelFuse: SENTINEL,
  ...(process.platform === 'darwin' ? { machoSegmentName: 'NODE_SEA' } : {}),
});
if (process.platform === 'darwin') execFileSync('codesign', ['--sign', '-', tmp], { stdio: 'inherit' });
renameSync(tmp, BIN);
rmSync(blob, { force: true });
writeFileSync(STAMP, `${inputs}\n`);
const mb = (statSync(BIN).size / 1e6).toFixed(0);
console.log(`${relative(ROOT, BIN)}: ${mb} MB, node ${process.version}, uws ${choice.build.version} (${asset}), infergate ${pkg.version}`);
