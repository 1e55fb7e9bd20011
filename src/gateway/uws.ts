/**
 * Loading uWebSockets.js. Two facts shape this file (see shared/notes/STACK.md):
 * - its request-header limit comes from UWS_HTTP_MAX_HEADERS_SIZE, read once when the module loads, so
 *   the variable must be set before the first import;
 * - if the native binary fails to load, the package silently falls back to a slow ws-based copy. We
 *   refuse to run on that fallback.
 */
import type * as UWS from 'uWebSockets.js';

export type Uws = typeof UWS;
let loaded: Uws | undefined;

export async function loadUws(maxHeaderBytes?: number): Promise<Uws> {
  if (loaded) return loaded;
  if (maxHeaderBytes !== undefined && process.env.UWS_HTTP_MAX_HEADERS_SIZE === undefined) {
    process.env.UWS_HTTP_MAX_HEADERS_SIZE = String(maxHeaderBytes);
  }
  const mod = (await import('uWebSockets.js')) as unknown as { default: Uws };
  const uws = mod.default;
  if (typeof uws.getParts !== 'function') {
    throw new Error(
      'uWebSockets.js loaded its slow ws-based fallback instead of the native binary ' +
        `(platform ${process.platform}-${process.arch}, Node ${process.versions.node}, modules ABI ${process.versions.modules}). ` +
        'infergate needs the native binary: use Node 18 or 20 on linux-x64/arm64 with glibc >= 2.27, or macOS/Windows x64.',
    );
  }
  loaded = uws;
  return uws;
}

/** The header limit uWS is actually running with (it may have been loaded earlier with another value). */
export function effectiveMaxHeaderBytes(): number {
  const v = Number(process.env.UWS_HTTP_MAX_HEADERS_SIZE);
  return Number.isFinite(v) && v > 0 ? v : 4096;
}
