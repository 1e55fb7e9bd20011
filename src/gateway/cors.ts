/**
 * Cross-origin access from browsers (the `cors` config section), as pure decisions: the headers an
 * actual answer carries for a request's `Origin`, and the answer to a preflight. The front and the
 * exchange write them; nothing here touches a socket.
 *
 * - An allowed origin gets `Access-Control-Allow-Origin` (its own value, or `*` when `origins: "*"`) and
 *   `Access-Control-Expose-Headers` (the gateway's own headers a script may read); any other origin gets
 *   none. With a list of origins every answer says `Vary: Origin` (a shared cache must not serve one
 *   origin's answer to another).
 * - A preflight (OPTIONS with `Origin` and `Access-Control-Request-Method`) needs no token (browsers send
 *   none): from an allowed origin it is answered 204 with the path's methods, the allowed request headers
 *   (the configured `allow_headers`, or else those the browser asked for) and `Access-Control-Max-Age`;
 *   from another origin 403 `origin_not_allowed`.
 * - No credentials mode: `Access-Control-Allow-Credentials` is never sent (a bearer token is a header,
 *   not a browser credential).
 */
import { errors } from '../openai/errors.js';
import { errorAnswer } from './answers.js';
import type { Answer } from './client.js';

export type HeaderList = ReadonlyArray<readonly [string, string]>;

export interface CorsConfig {
  origins: '*' | string[];
  allow_headers?: string[];
  /** milliseconds */
  max_age: number;
}

/** The gateway's own response headers a page's script may read (Content-Type is always readable). */
const EXPOSE = [
  'x-request-id', 'retry-after',
  'x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests',
  'x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens',
].join(', ');

/** A list of header names as Access-Control-Request-Headers carries it (anything else is not echoed). */
const HEADER_LIST = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+(?:[ \t]*,[ \t]*[!#$%&'*+\-.^_`|~0-9A-Za-z]+)*$/;
/** The longest Access-Control-Request-Headers echoed back. */
const MAX_ECHO = 2048;

const NONE: HeaderList = [];

export class Cors {
  private readonly any: boolean;
  private readonly allowed: ReadonlySet<string>;
  /** per allowed origin, the headers of its answers (made once each: the set is the config's) */
  private readonly byOrigin = new Map<string, HeaderList>();
  private readonly forAny: HeaderList;
  private readonly forOthers: HeaderList;
  private readonly allowHeaders: string | undefined;
  private readonly maxAge: string;

  constructor(cfg: CorsConfig) {
    this.any = cfg.origins === '*';
    this.allowed = new Set(cfg.origins === '*' ? [] : cfg.origins.map((o) => o.toLowerCase()));
    this.forAny = [['access-control-allow-origin', '*'], ['access-control-expose-headers', EXPOSE]];
    this.forOthers = this.any ? NONE : [['vary', 'Origin']];
    this.allowHeaders = cfg.allow_headers?.join(', ');
    this.maxAge = String(Math.floor(cfg.max_age / 1000));
  }

  /** Whether a page from `origin` may read the answers. */
  allows(origin: string): boolean {
    return origin !== '' && (this.any || this.allowed.has(origin.toLowerCase()));
  }

  /** The CORS headers of an answer to a request with this Origin ('' when it had none). */
  actual(origin: string): HeaderList {
    if (this.any) return this.forAny;
    if (!this.allows(origin)) return this.forOthers;
    let h = this.byOrigin.get(origin);
    if (h === undefined) {
      h = [['access-control-allow-origin', origin], ['access-control-expose-headers', EXPOSE], ['vary', 'Origin']];
      // bounded: only configured origins (in the spellings browsers send) get here
      if (this.byOrigin.size < 4 * this.allowed.size + 16) this.byOrigin.set(origin, h);
    }
    return h;
  }

  /**
   * The answer to a preflight from `origin` for a path that allows `methods` ("POST, OPTIONS"), the
   * browser asking for `requestHeaders` (Access-Control-Request-Headers, '' when none).
   */
  preflight(origin: string, methods: string, requestHeaders: string): Answer {
    if (!this.allows(origin)) {
      const e = errorAnswer(errors.originNotAllowed(origin));
      return { ...e, headers: [['vary', 'Origin']] };
    }
    const headers: Array<[string, string]> = [
      ['access-control-allow-origin', this.any ? '*' : origin],
      ['access-control-allow-methods', methods],
    ];
    const echo = requestHeaders.trim();
    if (this.allowHeaders !== undefined) {
      if (this.allowHeaders !== '') headers.push(['access-control-allow-headers', this.allowHeaders]);
    } else if (echo !== '' && echo.length <= MAX_ECHO && HEADER_LIST.test(echo)) {
      headers.push(['access-control-allow-headers', echo.toLowerCase()]);
    }
    headers.push(['access-control-max-age', this.maxAge]);
    headers.push(['vary', this.allowHeaders === undefined ? 'Origin, Access-Control-Request-Headers' : 'Origin']);
    return { status: '204 No Content', headers };
  }
}
