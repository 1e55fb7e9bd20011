/**
 * The checks a client request passes before any model server is involved, as pure functions: its head
 * (size, declared length, encoding, shutdown), its body (JSON object, model, OpenAI structure), and the
 * headers forwarded upstream. They decide; the exchange answers.
 */
import { bodyProblem, isAudioKind, problemMessage, type ApiKind } from '../openai/validate.js';
import { errors, type ApiError } from '../openai/errors.js';
import { scanJson } from '../openai/json.js';
import type { ClientRequest } from './client.js';
import { formTypeProblem } from './audio-form.js';

/** Request headers never forwarded upstream: hop-by-hop ones, those we set ourselves, and the client's credentials. */
const DROP_REQUEST_HEADERS = new Set([
  'connection', 'keep-alive', 'proxy-authenticate', 'proxy-authorization', 'proxy-connection', 'te', 'trailer',
  'transfer-encoding', 'upgrade', 'host', 'content-length', 'authorization', 'expect', 'x-request-id',
]);

/** A declared body over this is refused with the connection closed rather than read and dropped. */
export const DISCARD_LIMIT = 64 * 1024 * 1024;
/**
 * A header value the model server can be sent (HTTP field-value octets; undici refuses anything else,
 * which would otherwise surface as a failure of the endpoint) and a header name that is an HTTP token.
 */
const BAD_VALUE = /[^\t\x20-\x7e\x80-\xff]/;
const TOKEN = /^[!#$%&'*+\-.^_`|~0-9a-z]+$/;
/** A client's request id longer than this is replaced by one of ours. */
const MAX_REQUEST_ID = 200;

/** What the gateway takes from a request's head. */
export interface RequestFacts {
  /** the client's x-request-id, or a new one */
  requestId: string;
  /** the client's Authorization header (several joined with ", "), never forwarded as is */
  authorization: string | undefined;
  /** the Origin header ('' when none): CORS */
  origin: string;
  /** the value of a `models[].sticky.header`, if the client sent one */
  stickyValue: string | undefined;
  /** the headers for the model server (x-request-id included) */
  forwarded: Record<string, string>;
  /** Content-Length: -1 when absent, NaN when not a number */
  declaredLength: number;
  /** the head's size as counted against max_header_bytes */
  headerBytes: number;
  /** Content-Encoding, '' when absent */
  encoding: string;
  /** the first header whose name or value cannot be sent on, if any */
  badHeader: string | undefined;
  /** why the body's framing is ambiguous (two lengths, an odd Transfer-Encoding), if it is */
  badFraming: string | undefined;
}

/** The head's facts. `newRequestId` is called only when the client sent no usable id. */
export function readRequest(req: ClientRequest, stickyHeaders: ReadonlySet<string>, newRequestId: () => string): RequestFacts {
  const headers = req.headers;
  const forwarded: Record<string, string> = {};
  let requestId = '';
  let stickyValue: string | undefined;
  let authorization: string | undefined;
  let origin = '';
  let headerBytes = req.method.length + req.url.length + req.query.length + 12;
  let connection = '';
  let encoding = '';
  let contentLength: string | undefined;
  let transferEncoding: string | undefined;
  let badFraming: string | undefined;
  let badHeader: string | undefined;
  for (let i = 0; i < headers.length; i += 2) {
    const key = headers[i];
    const value = headers[i + 1];
    headerBytes += key.length + value.length + 4;
    if (badHeader === undefined && (BAD_VALUE.test(value) || !TOKEN.test(key))) badHeader = key;
    if (key === 'connection') connection = value;
    else if (key === 'x-request-id') requestId = value;
    else if (key === 'origin') origin = value;
    else if (key === 'authorization') authorization = authorization === undefined ? value : `${authorization}, ${value}`;
    else if (key === 'content-encoding') encoding = encoding === '' ? value : `${encoding}, ${value}`;
    else if (key === 'content-length') {
      if (contentLength === undefined) contentLength = value;
      else if (contentLength !== value) badFraming = 'two different Content-Length headers';
    } else if (key === 'transfer-encoding') transferEncoding = transferEncoding === undefined ? value : `${transferEncoding}, ${value}`;
    if (stickyHeaders.has(key)) stickyValue = value;
    if (!DROP_REQUEST_HEADERS.has(key)) {
      // a repeated header is one list (RFC 9110 §5.3; cookies join with "; ")
      forwarded[key] = Object.hasOwn(forwarded, key) ? forwarded[key] + (key === 'cookie' ? '; ' : ', ') + value : value;
    }
  }
  // Headers the client named in Connection are hop-by-hop too (RFC 9110 §7.6.1).
  if (connection) for (const name of connection.split(',')) delete forwarded[name.trim().toLowerCase()];
  badFraming ??= framingProblem(contentLength, transferEncoding);
  if (!requestId || requestId.length > MAX_REQUEST_ID) requestId = newRequestId();
  forwarded['x-request-id'] = requestId;
  return {
    requestId,
    authorization,
    origin,
    stickyValue,
    forwarded,
    declaredLength: contentLength === undefined || contentLength === '' ? -1 : Number(contentLength),
    headerBytes,
    encoding,
    badHeader,
    badFraming,
  };
}

/** Why a request is refused from its head alone, and whether its connection is closed with the answer. */
export interface HeadRefusal {
  error: ApiError;
  closeConnection: boolean;
  /**
   * Cut the connection without an answer. uWS 20.30 serves a request pipelined behind this one from the
   * same read before it closes a connection after an answer, so for framing that smuggles a second request
   * only a cut keeps that request from being served (checked on the wire: see the gateway README).
   */
  cut?: boolean;
}

/** The limits a head is checked against (`limits` of the config). */
export interface HeadLimits {
  max_header_bytes: number;
  max_body_bytes: number;
}

/** The largest body a `kind` request may have: the audio APIs' own limit (an audio file), else max_body_bytes. */
export function maxBodyOf(limits: { max_body_bytes: number; max_audio_body_bytes: number }, kind: ApiKind): number {
  return isAudioKind(kind) ? limits.max_audio_body_bytes : limits.max_body_bytes;
}

/**
 * The first reason to refuse a request before reading its body, in this order, or undefined. `maxBody`:
 * the route's body limit (maxBodyOf), max_body_bytes unless said.
 */
export function headRefusal(facts: RequestFacts, limits: HeadLimits, draining: boolean, maxBody = limits.max_body_bytes): HeadRefusal | undefined {
  if (draining) return { error: errors.shuttingDown(), closeConnection: false };
  // uWS bounds headers only when they span several reads; a whole header block in one read is not
  // limited, so the limit is enforced here too.
  if (facts.headerBytes > limits.max_header_bytes) {
    return { error: errors.headersTooLarge(limits.max_header_bytes), closeConnection: false };
  }
  // Framing that two HTTP parsers could read differently (request smuggling): the connection is cut, so no
  // byte after this head is read as another request.
  if (facts.badFraming !== undefined) return { error: errors.invalidFraming(facts.badFraming), closeConnection: true, cut: true };
  // A header that cannot be sent on is the client's doing: refused here, it never counts against a pod.
  if (facts.badHeader !== undefined) return { error: errors.invalidHeader(facts.badHeader), closeConnection: false };
  const declared = facts.declaredLength;
  if (declared > maxBody) {
    // A body a little over the limit is read and dropped by uWS after the answer (closing on unread
    // data would reset the connection and could lose the 413); an absurd one is refused and cut.
    return { error: errors.bodyTooLarge(maxBody), closeConnection: declared > DISCARD_LIMIT };
  }
  const encoding = facts.encoding;
  if (encoding !== '' && encoding.toLowerCase() !== 'identity') {
    // A compressed body would only fail as "not JSON", with its bytes quoted back.
    return { error: errors.unsupportedEncoding(encoding), closeConnection: declared > DISCARD_LIMIT };
  }
  if (Number.isNaN(declared)) {
    return { error: errors.invalidField('content-length', 'The Content-Length header is not a number.'), closeConnection: true };
  }
  return undefined;
}

/**
 * An audio API's head refused for its Content-Type (not a multipart form: 415; no boundary: 400), decided
 * before the body as the other 413/415s are, so that a client is not left to upload 25 MB to be refused.
 */
export function formHeadRefusal(path: string, contentType: string | undefined, declaredLength: number): HeadRefusal | undefined {
  const error = formTypeProblem(path, contentType);
  return error === undefined ? undefined : { error, closeConnection: declaredLength > DISCARD_LIMIT };
}

/** A body that passed: a JSON object with a non-empty string `model` and a sound structure. */
export interface ValidBody {
  body: Record<string, unknown>;
  model: string;
  /** where the `model` string (quotes included) lies in the raw bytes: an alias rewrite replaces just that */
  modelStart: number;
  modelEnd: number;
}

/**
 * The parsed body, or the error to answer. Before parsing, on the bytes: nesting within `maxDepth` (before
 * anything walks the value), and no key the gateway acts on given twice (the gateway and the model server
 * must read the same model). Then JSON, an object, `model`, the structure.
 */
export function checkBody(kind: ApiKind, raw: Buffer, maxDepth: number): ValidBody | { error: ApiError } {
  const shape = scanJson(raw, maxDepth);
  if (shape.tooDeep) return { error: errors.jsonTooDeep(maxDepth) };
  let parsed: unknown;
  try {
    // a UTF-8 byte-order mark before the JSON is allowed (Python's json, under vLLM, accepts it too)
    const bom = raw.length >= 3 && raw[0] === 0xef && raw[1] === 0xbb && raw[2] === 0xbf;
    parsed = JSON.parse(raw.toString('utf8', bom ? 3 : 0));
  } catch (err) {
    return { error: errors.invalidJson(raw.length === 0 ? 'the body is empty' : (err as Error).message) };
  }
  if (parsed === null || typeof parsed !== 'object' || Array.isArray(parsed)) return { error: errors.notAnObject() };
  if (shape.duplicate !== null) {
    return { error: errors.invalidField(shape.duplicate, `The "${shape.duplicate}" field appears more than once.`) };
  }
  const body = parsed as Record<string, unknown>;
  const model = body.model;
  if (typeof model !== 'string' || model.length === 0) return { error: errors.missingModel() };
  // the OpenAI fields whose shape we rely on, or that any server would refuse, checked before a pod is used
  const p = bodyProblem(kind, body);
  if (p) return { error: errors.invalidField(p.param, problemMessage(p)) };
  return { body, model, modelStart: shape.modelStart, modelEnd: shape.modelEnd };
}

/**
 * The body with its `model` string replaced by `model` and every other byte as the client sent it (a
 * re-serialised body would round 64-bit integers, turn 1e400 into null and mend invalid UTF-8).
 */
export function withModel(raw: Buffer, valid: ValidBody, model: string): Buffer {
  return Buffer.concat([raw.subarray(0, valid.modelStart), Buffer.from(JSON.stringify(model)), raw.subarray(valid.modelEnd)]);
}

/**
 * Completes the forwarded headers once the pool is known: a JSON content type if none (a form's is left to
 * undici, which writes the one with the boundary it encodes the form with), and as Authorization either
 * the client's own (`clientAuthorization`: the pool has forward_client_auth) or the pool's key, or nothing.
 */
export function addUpstreamHeaders(forwarded: Record<string, string>, apiKey: string | undefined, clientAuthorization?: string, body: 'json' | 'form' = 'json'): void {
  if (body === 'form') delete forwarded['content-type'];
  else if (!('content-type' in forwarded)) forwarded['content-type'] = 'application/json';
  if (clientAuthorization !== undefined) forwarded.authorization = clientAuthorization;
  else if (apiKey) forwarded.authorization = `Bearer ${apiKey}`;
}

/** Headers that say who the client is, believed only from a trusted proxy. */
const CLIENT_HINTS = ['x-forwarded-for', 'x-forwarded-proto', 'x-forwarded-host', 'x-forwarded-port', 'x-real-ip', 'forwarded'];

/**
 * X-Forwarded-For and X-Forwarded-Proto for the model server. From a peer in `trusted_proxies` the
 * client's values are kept and the peer is appended to the chain; from any other peer whatever it sent
 * about the client (X-Forwarded-*, X-Real-IP, Forwarded) is dropped and the chain starts at the peer.
 * `peer` '' (unknown) adds no address.
 */
export function addForwardedFor(forwarded: Record<string, string>, peer: string, trusted: boolean, scheme: 'http' | 'https'): void {
  if (!trusted) for (const h of CLIENT_HINTS) delete forwarded[h];
  const chain = forwarded['x-forwarded-for'];
  if (peer) forwarded['x-forwarded-for'] = chain ? `${chain}, ${peer}` : peer;
  if (!forwarded['x-forwarded-proto']) forwarded['x-forwarded-proto'] = scheme;
}

/**
 * Why a request's framing could be read two ways (request smuggling), from its Content-Length (the first
 * value; two different ones are caught while reading) and its Transfer-Encoding values joined: the one
 * transfer coding a request may use is chunked, alone, and never next to a length. Undefined: none.
 * Every route applies it (POST here through readRequest, GET/HEAD and the fallback in the front).
 */
export function framingProblem(contentLength: string | undefined, transferEncoding: string | undefined): string | undefined {
  if (transferEncoding === undefined) return undefined;
  if (transferEncoding.trim().toLowerCase() !== 'chunked') return `Transfer-Encoding "${transferEncoding.slice(0, 50)}" (only "chunked" is accepted)`;
  if (contentLength !== undefined) return 'both Content-Length and Transfer-Encoding';
  return undefined;
}
