/**
 * Listening with uWebSockets.js without SO_REUSEPORT. uWS sets it by default on Linux, so a second process
 * started on a port a uWS process already holds (a second gateway, a mock) would silently share its
 * traffic instead of failing with "address in use". uWS 20.30 takes `(host, port, options, cb)`, though
 * its typings list options only in the form without a host.
 */
import type { TemplatedApp, us_listen_socket } from 'uWebSockets.js';

/** uWS's LIBUS_LISTEN_EXCLUSIVE_PORT */
const EXCLUSIVE_PORT = 1;

type ListenWithOptions = (host: string, port: number, options: number, cb: (socket: us_listen_socket | false) => void) => TemplatedApp;

export function listenExclusive(app: TemplatedApp, host: string, port: number, cb: (socket: us_listen_socket | false) => void): void {
  (app.listen as unknown as ListenWithOptions).call(app, host, port, EXCLUSIVE_PORT, cb);
}

/**
 * Listening with SO_REUSEPORT (and SO_REUSEADDR), uWS's default for a port other than 0: a second app of
 * this process can then listen on the same port while connections accepted by the first are still open (a
 * TLS listener's certificate reload, uws-front.ts). The caller takes the port exclusively first, so another
 * process's listener on it is still refused.
 */
export function listenShared(app: TemplatedApp, host: string, port: number, cb: (socket: us_listen_socket | false) => void): void {
  (app.listen as unknown as ListenWithOptions).call(app, host, port, 0, cb);
}

/**
 * After a uWS server's listeners are closed and its answers sent: exit shortly even if idle keep-alive
 * connections remain (uWS 20.30 cannot close them, and they keep the process alive until the client or
 * the idle timeout does). The timer is unref'd, so a process with nothing left exits on its own first.
 */
export function exitDespiteIdleConnections(code: number): void {
  setTimeout(() => process.exit(process.exitCode ?? code), 250).unref();
}
