/**
 * The one loader of uWebSockets.js, for the gateway's front and the mock's server. Two facts shape it
 * (see the gateway README):
 * - its request-header limit comes from UWS_HTTP_MAX_HEADERS_SIZE, read once when the module loads, so
 *   the variable must be set before the first load (whoever loads first sets it);
 * - if the native binary fails to load, the package silently falls back to a slow ws-based copy. We
 *   refuse to run on that fallback.
 * - every answer would carry a `uWebSockets: 20` header; it is switched off here for the process.
 * Synchronous (the package is CommonJS), so a constructor can call it.
 */
import { createRequire } from 'node:module';
import type * as UWS from 'uWebSockets.js';

export type Uws = typeof UWS;
let loaded: Uws | undefined;

export function loadUws(maxHeaderBytes?: number): Uws {
  if (loaded) return loaded;
  if (maxHeaderBytes !== undefined && process.env.UWS_HTTP_MAX_HEADERS_SIZE === undefined) {
    process.env.UWS_HTTP_MAX_HEADERS_SIZE = String(maxHeaderBytes);
  }
  const uws = createRequire(import.meta.url)('uWebSockets.js') as Uws;
  if (typeof uws.getParts !== 'function') {
    throw new Error(
      'uWebSockets.js loaded its slow ws-based fallback instead of the native binary ' +
        `(platform ${process.platform}-${process.arch}, Node ${process.versions.node}, modules ABI ${process.versions.modules}). ` +
        'infergate needs the native binary: use Node 18 or 20 on linux-x64/arm64 with glibc >= 2.27, or macOS/Windows x64.',
    );
  }
  // No "uWebSockets: 20" header on every answer (it names the server software to anyone who asks).
  // `_cfg('silent')` is the addon's switch for that (checked on the wire with this build); it is
  // process-wide, so a mock server in the same process (the demo) is silent too.
  (uws as unknown as { _cfg?: (key: string) => void })._cfg?.('silent');
  loaded = uws;
  return uws;
}
