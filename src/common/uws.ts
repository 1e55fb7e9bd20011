/**
 * The one loader of uWebSockets.js, for the gateway's front and the mock's server. Facts that shape it
 * (see the gateway README):
 * - two builds are installed, and each loads on different hosts: 20.57 (@btc-vision/uwebsockets.js, an
 *   optional dependency) has binaries for Node 20/22/24/25 but needs glibc >= 2.38; 20.30 (the
 *   `uWebSockets.js` alias of @trufflesuite/uws-js-unofficial) needs only glibc 2.27 but stops at Node 20.
 *   We take the first that loads natively, in that order (`chooseUws`, pure, tested with fake loaders);
 * - its request-header limit comes from UWS_HTTP_MAX_HEADERS_SIZE, read once when the module loads, so
 *   the variable must be set before the first load (whoever loads first sets it);
 * - when its native binary fails to load, 20.30 silently falls back to a slow ws-based copy (20.57
 *   throws). We refuse to run on that fallback.
 * - every answer would carry a `uWebSockets: 20` header; it is switched off here for the process.
 * - inside the single executable (scripts/build-binary.mjs) no package can be required: the build that
 *   loaded on the building host is embedded as a SEA asset (`uwsAssetName`), written to a private
 *   temporary file (a fresh 0700 directory) and loaded with `process.dlopen`; the file is deleted as soon
 *   as it is loaded (the mapping outlives it), or at exit where the system keeps a loaded file open.
 *   A build not embedded is skipped like one that does not load.
 * Synchronous (the packages are CommonJS), so a constructor can call it.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as sea from 'node:sea';
import type * as UWS from 'uWebSockets.js';

/** The API we use, typed from the 20.30 declarations; 20.57 offers the same calls. */
export type Uws = typeof UWS;

export interface UwsBuild {
  /** as logged and in infergate_build_info: "20.57" */
  readonly version: string;
  /** the package name to require */
  readonly module: string;
  /** where its binaries load, for the failure message */
  readonly needs: string;
  /** `endWithoutBody(n)` ends a HEAD answer with `Content-Length: n` (20.30 never ends it, and aborts) */
  readonly headLength: boolean;
}

/** In order of preference. Exact versions are pinned in package.json. */
export const UWS_BUILDS: readonly UwsBuild[] = [
  {
    version: '20.57',
    module: '@btc-vision/uwebsockets.js',
    needs: 'Node 20, 22, 24 or 25 (modules ABI 115/127/137/141) on Linux x64/arm64 with glibc >= 2.38, macOS x64/arm64 or Windows x64',
    headLength: true,
  },
  {
    version: '20.30',
    module: 'uWebSockets.js',
    needs: 'Node 18 or 20 (modules ABI 108/115) on Linux x64/arm64 with glibc >= 2.27, macOS x64/arm64 or Windows x64',
    headLength: false,
  },
];

export interface UwsHost {
  node: string;
  abi: string;
  platform: string;
  /** the C library: "glibc 2.36", "musl or none" */
  libc: string;
}

export interface UwsChoice<T> {
  build: UwsBuild;
  uws: T;
  /** the builds tried before it, each with why it did not load */
  skipped: Array<{ build: UwsBuild; reason: string }>;
}

/** The first build whose loader returns a native module; else an Error that says what each one needs. */
export function chooseUws<T>(
  builds: readonly UwsBuild[],
  load: (build: UwsBuild) => T,
  isNative: (uws: T) => boolean,
  host: () => UwsHost,
): UwsChoice<T> {
  const skipped: Array<{ build: UwsBuild; reason: string }> = [];
  for (const build of builds) {
    let uws: T;
    try {
      uws = load(build);
    } catch (err) {
      skipped.push({ build, reason: firstUsefulLine(err) });
      continue;
    }
    if (isNative(uws)) return { build, uws, skipped };
    skipped.push({ build, reason: 'only its slow ws-based fallback loaded (no native binary for this host)' });
  }
  const h = host();
  const lines = skipped.map(({ build, reason }) => `  uws ${build.version} (${build.module}) needs ${build.needs}; here: ${reason}`);
  return fail(
    `no native uWebSockets.js build loads on this host (Node ${h.node}, modules ABI ${h.abi}, ${h.platform}, ${h.libc}):\n` +
      lines.join('\n') +
      '\ninfergate does not run on the slow fallback. Use Node 24 on Debian 13 / Ubuntu 24.04 or newer (glibc >= 2.38), or Node 20 on an older glibc.',
  );
}

function fail(message: string): never {
  throw new Error(message);
}

/** 20.57's error puts its own banner first and the loader's reason (missing GLIBC_2.38, no such file) after. */
function firstUsefulLine(err: unknown): string {
  const text = err instanceof Error ? err.message : String(err);
  const lines = text.split('\n').map((l) => l.trim()).filter(Boolean);
  const reason = lines.find((l) => /GLIBC_|cannot open|No such file|not find|invalid ELF|wrong ELF|NODE_MODULE_VERSION/i.test(l));
  return reason ?? lines[lines.length - 1] ?? 'failed to load';
}

function hostInfo(): UwsHost {
  let libc = 'musl or no glibc';
  const report = process.report?.getReport() as { header?: { glibcVersionRuntime?: string } } | undefined;
  if (report?.header?.glibcVersionRuntime) libc = `glibc ${report.header.glibcVersionRuntime}`;
  return { node: process.versions.node, abi: process.versions.modules, platform: `${process.platform}-${process.arch}`, libc };
}

/** The SEA asset that holds a build's binary for a host: "uws-20.30/uws_linux_x64_115.node". */
export function uwsAssetName(build: UwsBuild, platform = process.platform, arch = process.arch, abi = process.versions.modules): string {
  return `uws-${build.version}/uws_${platform}_${arch}_${abi}.node`;
}

/** Inside the single executable: the embedded binary of `build`, through a private temporary file. */
function loadEmbedded(build: UwsBuild): Uws {
  const name = uwsAssetName(build);
  let bytes: ArrayBuffer;
  try {
    bytes = sea.getAsset(name);
  } catch {
    throw new Error(`not embedded in this executable (it holds no ${name})`);
  }
  const dir = mkdtempSync(join(tmpdir(), 'infergate-uws-')); // mode 0700: no one else may swap the file
  const file = join(dir, name.replace('/', '-'));
  const remove = (): void => rmSync(dir, { recursive: true, force: true });
  try {
    writeFileSync(file, new Uint8Array(bytes), { mode: 0o700 });
    const module = { exports: {} as Uws };
    process.dlopen(module, file);
    return module.exports;
  } finally {
    try {
      remove();
    } catch {
      // Windows keeps a loaded DLL's file locked: delete it when the process ends instead
      process.once('exit', () => {
        try {
          remove();
        } catch {
          // nothing more to do: it is in the temporary directory
        }
      });
    }
  }
}

let loaded: UwsChoice<Uws> | undefined;

/**
 * uWS's own head limit for a gateway whose `limits.max_header_bytes` is `maxHeaderBytes`: twice that. The
 * gateway answers a head over its limit itself (431 `headers_too_large`, OpenAI's body), so uWS must let
 * such a head through: 20.57 checks every head against its limit and answers 431 with its own HTML page,
 * never reaching the gateway (20.30 checks only a head spanning several reads). Past twice the limit uWS
 * still refuses by itself, which bounds what one connection's head may hold.
 */
export function uwsHeadLimit(maxHeaderBytes: number): number {
  return 2 * maxHeaderBytes;
}

export function loadUws(maxHeaderBytes?: number): Uws {
  if (loaded) return loaded.uws;
  if (maxHeaderBytes !== undefined && process.env.UWS_HTTP_MAX_HEADERS_SIZE === undefined) {
    process.env.UWS_HTTP_MAX_HEADERS_SIZE = String(uwsHeadLimit(maxHeaderBytes));
  }
  const inSea = sea.isSea();
  const require = inSea ? undefined : createRequire(import.meta.url);
  loaded = chooseUws<Uws>(
    UWS_BUILDS,
    (build) => (require ? (require(build.module) as Uws) : loadEmbedded(build)),
    (uws) => typeof uws.getParts === 'function',
    hostInfo,
  );
  // No "uWebSockets: 20" header on every answer (it names the server software to anyone who asks).
  // `_cfg('silent')` is the addon's switch for that (checked on the wire with 20.30); it is process-wide,
  // so a mock server in the same process (the demo) is silent too.
  (loaded.uws as unknown as { _cfg?: (key: string) => void })._cfg?.('silent');
  return loaded.uws;
}

/** Which build serves, once loadUws has run (for the start log and infergate_build_info). */
export function uwsInUse(): { version: string; headLength: boolean; skipped: string[] } | undefined {
  if (!loaded) return undefined;
  const { version, headLength } = loaded.build;
  return { version, headLength, skipped: loaded.skipped.map((s) => `uws ${s.build.version}: ${s.reason}`) };
}
