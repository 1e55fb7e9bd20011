/**
 * The attacker classes of `bench reliability`, each a generator of raw requests (rawhttp.ts) with what a
 * correct gateway does with them: answer with a well-formed status or close, within a deadline; refuse
 * (never forward) what `refuse` marks; never cut a 200 answer short while its framing says it is whole.
 */
import type { RawPlan } from './rawhttp.js';
import { chunked, head } from './rawhttp.js';

/** What the cases need to know of the gateway under test. */
export interface Target {
  host: string;
  port: number;
  /** `host:port`, for the Host header */
  authority: string;
  model: string;
  maxBodyBytes: number;
}

export interface CaseTry {
  plan: RawPlan;
  /** the gateway must not forward it (a client that sees an upstream's answer to it, or a mock that ran it, is a wrong accept) */
  refuse: boolean;
  /** the request asked for a stream (a 200 without `[DONE]` or an error event is a silent truncation) */
  stream: boolean;
  /** a short description, for the report of a failing try */
  label: string;
}

export interface CaseClass {
  name: string;
  /** try number i (0-based) of this class */
  make(t: Target, i: number): CaseTry;
}

const JSON_HEADERS = ['Content-Type: application/json'];
/** Bound for a try the gateway should answer at once. */
const QUICK_MS = 8_000;
/** Bound for tries that only the front's idle timeout (uWS: about 10 s) ends. */
const IDLE_MS = 20_000;

function chatBody(t: Target, i: number, extra: Record<string, unknown> = {}): Buffer {
  return Buffer.from(JSON.stringify({ model: t.model, messages: [{ role: 'user', content: `reliability case ${i}` }], max_tokens: 4, stream: true, ...extra }));
}

function post(t: Target, body: Buffer, lines: string[] = JSON_HEADERS, path = '/v1/chat/completions'): Buffer {
  return Buffer.concat([head('POST', path, t.authority, [...lines, `Content-Length: ${body.length}`]), body]);
}

function plan(t: Target, parts: RawPlan['parts'], more: Partial<RawPlan> = {}): RawPlan {
  return { host: t.host, port: t.port, parts, deadlineMs: QUICK_MS, ...more };
}

/** A smuggled request: valid on its own, so a gateway that reads it as a second request forwards it. */
function smuggled(t: Target, i: number): string {
  const body = chatBody(t, i, { stream: false });
  return `POST /v1/chat/completions HTTP/1.1\r\nHost: ${t.authority}\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body.toString()}`;
}

export const CASES: CaseClass[] = [
  {
    name: 'deep_json',
    make(t, i) {
      const depth = [100, 10_000, 500_000][i % 3];
      const body = Buffer.from(`{"model":"${t.model}","messages":[{"role":"user","content":${'['.repeat(depth)}${']'.repeat(depth)}}]}`);
      return { plan: plan(t, [post(t, body)]), refuse: true, stream: false, label: `content nested ${depth} deep` };
    },
  },
  {
    name: 'huge_token_ids',
    make(t, i) {
      // a valid completions body of token ids just under the body limit (the mock may refuse its length:
      // that is an answer too); every third one just over it (413 as the limit is crossed)
      const over = i % 3 === 2;
      const target = over ? t.maxBodyBytes + 1024 : Math.floor(t.maxBodyBytes * 0.95);
      const ids: number[] = [];
      let bytes = 64;
      for (let k = 0; bytes < target; k++) {
        const id = (k * 7919 + i) % 128_000;
        ids.push(id);
        bytes += String(id).length + 1;
      }
      const body = Buffer.from(JSON.stringify({ model: t.model, prompt: ids, max_tokens: 1 }));
      return { plan: plan(t, [post(t, body, JSON_HEADERS, '/v1/completions')], { deadlineMs: 30_000 }), refuse: over, stream: false, label: `${ids.length} token ids (${body.length} bytes)` };
    },
  },
  {
    name: 'chunked_1byte',
    make(t, i) {
      const body = chatBody(t, i);
      const parts: RawPlan['parts'] = [head('POST', '/v1/chat/completions', t.authority, [...JSON_HEADERS, 'Transfer-Encoding: chunked'])];
      chunked(body, 1).forEach((c, k) => {
        parts.push(c);
        if (k % 16 === 15) parts.push(1); // a pause now and then: the chunks arrive in many reads
      });
      return { plan: plan(t, parts, { deadlineMs: 20_000 }), refuse: false, stream: true, label: `${body.length} one-byte chunks` };
    },
  },
  {
    name: 'duplicate_keys',
    make(t, i) {
      const shapes = [
        `{"model":"${t.model}","model":"other","messages":[{"role":"user","content":"x"}]}`,
        `{"model":"${t.model}","messages":[{"role":"user","content":"x"}],"stream":false,"stream":true}`,
        `{"model":"${t.model}","messages":[{"role":"user","content":"a"}],"messages":[{"role":"user","content":"b"}]}`,
        `{"model":"${t.model}","mod\\u0065l":"other","messages":[{"role":"user","content":"x"}]}`,
      ];
      const body = Buffer.from(shapes[i % shapes.length]);
      return { plan: plan(t, [post(t, body)]), refuse: true, stream: false, label: body.toString().slice(0, 60) };
    },
  },
  {
    name: 'bad_utf8',
    make(t, i) {
      const bad = [[0xff], [0xc3, 0x28], [0xc0, 0xaf], [0xed, 0xa0, 0x80], [0xf4, 0x90, 0x80, 0x80], [0xe2, 0x82]][i % 6];
      const pre = Buffer.from(`{"model":"${t.model}","messages":[{"role":"user","content":"before `);
      const post_ = Buffer.from(` after"}],"max_tokens":4,"stream":true}`);
      const body = Buffer.concat([pre, Buffer.from(bad), post_]);
      return { plan: plan(t, [post(t, body)]), refuse: false, stream: true, label: `bytes ${bad.map((b) => b.toString(16)).join(' ')} in content` };
    },
  },
  {
    name: 'bad_headers',
    make(t, i) {
      const body = chatBody(t, i);
      const cl = `Content-Length: ${body.length}`;
      const shapes: Array<[string, string[]]> = [
        ['gzip body', [...JSON_HEADERS, cl, 'Content-Encoding: gzip']],
        ['NUL in a value', [...JSON_HEADERS, cl, 'X-Bad: a\u0000b']],
        ['control byte in a value', [...JSON_HEADERS, cl, 'X-Bad: a\u0001b']],
        ['space before the colon', [...JSON_HEADERS, cl, 'X-Bad : v']],
        ['no colon', [...JSON_HEADERS, cl, 'X-Bad-No-Colon']],
        ['obs-fold continuation', [...JSON_HEADERS, cl, 'X-Fold: a', ' folded']],
        ['negative Content-Length', [...JSON_HEADERS, 'Content-Length: -1']],
        ['Content-Length with a sign', [...JSON_HEADERS, `Content-Length: +${body.length}`]],
        ['hex Content-Length', [...JSON_HEADERS, `Content-Length: 0x${body.length.toString(16)}`]],
        ['a 64 KB header', [...JSON_HEADERS, cl, `X-Big: ${'b'.repeat(65_536)}`]],
        ['underscore in a name', [...JSON_HEADERS, cl, 'X_Tenant: a']],
      ];
      const [label, lines] = shapes[i % shapes.length];
      const bytes = Buffer.concat([Buffer.from(`POST /v1/chat/completions HTTP/1.1\r\nHost: ${t.authority}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`, 'latin1'), body]);
      // some of these get no answer from the uWS front until its idle timeout (see RELIABILITY.md)
      return { plan: plan(t, [bytes], { deadlineMs: IDLE_MS }), refuse: true, stream: true, label };
    },
  },
  {
    name: 'smuggling',
    make(t, i) {
      const body = chatBody(t, i, { stream: false });
      const chunkedBody = Buffer.concat(chunked(body, 64));
      const shapes: Array<[string, string[], Buffer]> = [
        ['two different Content-Length', [...JSON_HEADERS, `Content-Length: ${body.length}`, `Content-Length: ${body.length + 10}`], body],
        ['Content-Length and chunked', [...JSON_HEADERS, `Content-Length: ${body.length}`, 'Transfer-Encoding: chunked'], chunkedBody],
        ['TE chunked;q=1', [...JSON_HEADERS, 'Transfer-Encoding: chunked;q=1'], chunkedBody],
        ['TE identity, chunked', [...JSON_HEADERS, 'Transfer-Encoding: identity, chunked'], chunkedBody],
        ['TE chunked, identity', [...JSON_HEADERS, 'Transfer-Encoding: chunked, identity'], chunkedBody],
        ['TE xchunked', [...JSON_HEADERS, 'Transfer-Encoding: xchunked'], chunkedBody],
        ['two TE lines', [...JSON_HEADERS, 'Transfer-Encoding: chunked', 'Transfer-Encoding: identity'], chunkedBody],
        ['TE with a tab', [...JSON_HEADERS, 'Transfer-Encoding:\tchunked\t'], chunkedBody],
        ['GET: two different Content-Length', ['Content-Length: 0', `Content-Length: ${smuggled(t, i).length}`], Buffer.alloc(0)],
        ['GET: TE chunked;q=1', ['Transfer-Encoding: chunked;q=1'], Buffer.from('0\r\n\r\n')],
        ['PUT to no route: two different Content-Length', ['Content-Length: 0', `Content-Length: ${smuggled(t, i).length}`], Buffer.alloc(0)],
      ];
      const [label, lines, b] = shapes[i % shapes.length];
      const line = label.startsWith('GET') ? 'GET /v1/models' : label.startsWith('PUT') ? 'PUT /nowhere' : 'POST /v1/chat/completions';
      const bytes = Buffer.concat([Buffer.from(`${line} HTTP/1.1\r\nHost: ${t.authority}\r\n${lines.map((l) => `${l}\r\n`).join('')}\r\n`, 'latin1'), b, Buffer.from(smuggled(t, i))]);
      // `refuse`: the shape itself is refused and nothing after it is served; a tab around `chunked` is
      // optional whitespace (RFC 9110), so that one is a plain chunked request and its answer is right
      const plain = label === 'TE with a tab';
      return { plan: plan(t, [bytes], { deadlineMs: IDLE_MS, waitForClose: true }), refuse: !plain, stream: false, label: plain ? label : `${label} + a smuggled request` };
    },
  },
  {
    name: 'half_sent_body',
    make(t, i) {
      const body = chatBody(t, i);
      const whole = post(t, body);
      const cut = whole.subarray(0, whole.length - Math.ceil(body.length / 2));
      // half the body, then: a FIN (client done sending), or nothing more until the front gives up
      const fin = i % 2 === 0;
      return { plan: plan(t, [cut], fin ? { endAfterSend: true } : { deadlineMs: IDLE_MS }), refuse: true, stream: true, label: fin ? 'half the body, then FIN' : 'half the body, then silence' };
    },
  },
  {
    name: 'never_read_stream',
    make(t, i) {
      const body = chatBody(t, i, { max_tokens: 2000 });
      return { plan: plan(t, [post(t, body)], { neverReadMs: 1_000 + (i % 4) * 250 }), refuse: false, stream: true, label: 'a 2000-token stream never read, then dropped' };
    },
  },
  {
    name: 'client_abort_mid_stream',
    make(t, i) {
      const body = chatBody(t, i, { max_tokens: 500 });
      return { plan: plan(t, [post(t, body)], { abortAfterBytes: 300 + (i % 5) * 200 }), refuse: false, stream: true, label: 'hang up after a few events' };
    },
  },
];
