// vLLM's speech-to-text APIs (/v1/audio/transcriptions, /v1/audio/translations) through a real gateway (JWT
// auth on) to real mock vLLM servers: the official openai SDK uploads an audio file and gets what the
// server gives directly, streamed or whole; the form is routed by its `model` field (an alias sent on with
// its target's name); the audio APIs have their own body limit; and a body that is not a sound form is
// refused before any server is asked.
import t from 'tap';
import { execFile } from 'node:child_process';
import { connect } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI, { toFile } from 'openai';
import { FormData, request } from 'undici';
import { metric, scrape } from '../e2e/support.js';
import { MODEL, startApi } from './support.js';

// small limits, to show each route's own: JSON APIs 64 KB, the audio APIs 1 MB
const api = await startApi({ limits: { max_body_bytes: '64kb', max_audio_body_bytes: '1mb' } });
t.teardown(() => api.stop());
const { gw, token, otherToken } = api;

/** Three seconds of "audio" (the mock reckons 32,000 bytes a second), the same bytes every run. */
const AUDIO = Buffer.alloc(96_000);
for (let i = 0; i < AUDIO.length; i++) AUDIO[i] = (i * 7919) & 0xff;

function client(baseURL: string, apiKey = token) {
  return new OpenAI({ baseURL: `${baseURL}/v1`, apiKey, maxRetries: 0 });
}

/** A form as a client builds one: the fields in order, `file` as an uploaded file. */
function form(fields: Array<[string, string]>, file: Buffer | null = AUDIO): FormData {
  const f = new FormData();
  for (const [k, v] of fields) f.append(k, v);
  if (file !== null) f.append('file', new Blob([file], { type: 'audio/wav' }), 'speech.wav');
  return f;
}

async function post(base: string, path: string, body: FormData | string | Buffer, headers: Record<string, string> = {}, auth: string | null = token) {
  const h: Record<string, string> = { ...headers };
  if (auth !== null) h.authorization = `Bearer ${auth}`;
  const r = await request(`${base}${path}`, { method: 'POST', headers: h, body });
  const text = await r.body.text();
  return { status: r.statusCode, headers: r.headers, text, json: () => JSON.parse(text) as Record<string, any> };
}

/** How many audio requests the mocks were asked (GET /mock/requests keeps the last 64 of each). */
async function audioSeen(): Promise<number> {
  let n = 0;
  for (const ep of api.mocks.endpoints) {
    const r = await request(`http://${ep}/mock/requests`);
    for (const q of ((await r.body.json()) as { requests: Array<{ path: string }> }).requests) if (q.path.startsWith('/v1/audio/')) n++;
  }
  return n;
}

const direct = `http://${api.mocks.endpoints[0]}`;

t.test('the openai SDK transcribes and translates through the gateway as it does on the server directly', async (t) => {
  const file = () => toFile(AUDIO, 'speech.wav', { type: 'audio/wav' });
  const secondsBefore = metric(await scrape(gw.adminUrl), 'infergate_audio_seconds_total', { model: MODEL, pool: 'p' });
  const via = await client(gw.url).audio.transcriptions.create({ file: await file(), model: MODEL });
  t.equal(metric(await scrape(gw.adminUrl), 'infergate_audio_seconds_total', { model: MODEL, pool: 'p' }) - secondsBefore, 3, 'its audio seconds counted for the model');
  const straight = await client(direct).audio.transcriptions.create({ file: await file(), model: MODEL });
  t.ok(via.text.length > 0, 'a transcript');
  t.equal(via.text, straight.text, 'the same text as the server gives directly');
  t.same((via as unknown as { usage: unknown }).usage, { type: 'duration', seconds: 3 }, "the server's usage (audio seconds) passed on");
  const tr = await client(gw.url).audio.translations.create({ file: await file(), model: MODEL });
  const trStraight = await client(direct).audio.translations.create({ file: await file(), model: MODEL });
  t.equal(tr.text, trStraight.text, 'a translation too');
  t.not(tr.text, via.text, 'from its own path (the mock words a translation otherwise)');
  const srt = await client(gw.url).audio.transcriptions.create({ file: await file(), model: MODEL, response_format: 'srt' });
  t.match(srt, /^1\n00:00:00,000 --> 00:00:03,000\n/, 'a subtitle format, as text, untouched');
});

t.test('a streamed transcription: the SDK reads the chunks, the usage chunk is counted for the model', async (t) => {
  const before = metric(await scrape(gw.adminUrl), 'infergate_tokens_total', { model: MODEL, kind: 'completion' });
  const stream = await client(gw.url).audio.transcriptions.create({
    file: await toFile(AUDIO, 'speech.wav', { type: 'audio/wav' }),
    model: MODEL,
    stream: true,
    // vLLM's flattened stream option, a form field
    stream_include_usage: true,
  } as OpenAI.Audio.TranscriptionCreateParamsStreaming);
  let text = '';
  let usage: { completion_tokens: number } | undefined;
  const objects = new Set<string>();
  for await (const event of stream) {
    const e = event as unknown as { object: string; choices: Array<{ delta: { content?: string } }>; usage?: { completion_tokens: number } };
    objects.add(e.object);
    for (const c of e.choices) text += c.delta.content ?? '';
    if (e.usage) usage = e.usage;
  }
  const whole = await client(gw.url).audio.transcriptions.create({ file: await toFile(AUDIO, 'speech.wav'), model: MODEL });
  t.equal(text, whole.text, 'the streamed words are the transcript');
  t.same([...objects], ['transcription.chunk']);
  t.ok(usage && usage.completion_tokens > 0, 'a usage chunk');
  const after = metric(await scrape(gw.adminUrl), 'infergate_tokens_total', { model: MODEL, kind: 'completion' });
  t.equal(after - before, usage!.completion_tokens, "the stream's usage counted for the model");
});

t.test('curl -F, as the docs of every speech-to-text server show it (a large upload: curl asks to continue first)', async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'infergate-audio-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const path = join(dir, 'speech.wav');
  writeFileSync(path, Buffer.alloc(300_000, 3)); // over curl's 1 KB: it sends Expect: 100-continue
  const args = ['-sS', '--max-time', '20', '-w', '\n%{http_code}', '-H', `Authorization: Bearer ${token}`, '-F', `model=${MODEL}`, '-F', `file=@${path};type=audio/wav`, '-F', 'response_format=verbose_json', `${gw.url}/v1/audio/translations`];
  const out = await new Promise<string>((resolve, reject) => execFile('curl', args, (err, stdout) => (err ? reject(err) : resolve(stdout))));
  const [body, code] = [out.slice(0, out.lastIndexOf('\n')), out.slice(out.lastIndexOf('\n') + 1)];
  t.equal(code, '200', body.slice(0, 200));
  const v = JSON.parse(body) as { duration: string; segments: unknown[]; text: string };
  t.equal(v.duration, String(Math.ceil(300_000 / 32_000)), 'the whole file reached the server');
  t.equal(v.segments.length, 1, 'verbose_json, as the server gave it');
});

t.test('routed by the form\'s model: an alias reaches the server under its target\'s name', async (t) => {
  const r = await post(gw.url, '/v1/audio/transcriptions', form([['model', 'alias'], ['stream', 'true']]));
  t.equal(r.status, 200, r.text.slice(0, 200));
  t.match(r.headers['content-type'], /^text\/event-stream/);
  const models = new Set(r.text.split('\n').filter((l) => l.startsWith('data: {')).map((l) => JSON.parse(l.slice(6)).model));
  t.same([...models], [MODEL], 'the server was asked for the target model');
  const text = await post(gw.url, '/v1/audio/transcriptions', form([['model', 'alias'], ['response_format', 'text']]));
  t.equal(text.status, 200);
  t.match(text.headers['content-type'], /^text\/plain/);
  t.notMatch(text.text, /^\s*[{"]/, 'a plain-text answer, as the server sent it');
});

t.test('the audio APIs take bodies up to max_audio_body_bytes; the JSON APIs keep max_body_bytes', async (t) => {
  const big = Buffer.alloc(512 * 1024, 1); // over 64 KB, under 1 MB
  const r = await post(gw.url, '/v1/audio/transcriptions', form([['model', MODEL]], big));
  t.equal(r.status, 200, r.text.slice(0, 200));
  t.same(r.json().usage, { type: 'duration', seconds: Math.ceil(big.length / 32_000) }, 'the whole file reached the server');
  const json = await post(gw.url, '/v1/completions', JSON.stringify({ model: MODEL, prompt: 'x'.repeat(100_000) }), { 'content-type': 'application/json' });
  t.equal(json.status, 413, 'a JSON API: 64 KB');
  const huge = await post(gw.url, '/v1/audio/translations', form([['model', MODEL]], Buffer.alloc(1_100_000, 1)));
  t.equal(huge.status, 413, 'over 1 MB: 413');
  t.equal(huge.json().error.code, 'request_too_large');
});

t.test('a server that fails the upload: the same form is sent again, whole, to the other one', async (t) => {
  const [bad, good] = api.mocks.endpoints;
  const faults = (endpoint: string, body: unknown) => request(`http://${endpoint}/mock/faults`, { method: 'POST', body: JSON.stringify(body) }).then((r) => r.body.dump());
  await faults(bad, { fail_rate: 1, fail_mode: 'refuse' });
  t.teardown(() => faults(bad, { fail_rate: 0 }));
  const retries = async () => metric(await scrape(gw.adminUrl), 'infergate_retries_total');
  const before = await retries();
  // (the picker breaks ties at random: uploads until one was first sent to the failing server, 30 at most)
  let sent = 0;
  while (sent < 30 && (await retries()) === before) {
    const r = await post(gw.url, '/v1/audio/transcriptions', form([['model', MODEL], ['response_format', 'verbose_json']]));
    sent++;
    t.equal(r.status, 200, r.text.slice(0, 200));
    t.equal(r.headers['x-infergate-endpoint'], good, 'answered by the server that works');
    t.equal(r.json().duration, '3', 'the whole file reached it');
  }
  t.ok((await retries()) > before, `retried on the other server (upload ${sent})`);
});

t.test('refusals: OpenAI-style errors from the gateway, before any server is asked', async (t) => {
  const before = await audioSeen();
  const P = '/v1/audio/transcriptions';
  const many = form([['model', MODEL]]);
  for (let i = 0; i < 1001; i++) many.append(`f${i}`, 'x');
  const cases: Array<[string, FormData | string, Record<string, string>, number, string, string | null]> = [
    ['JSON, not a form', JSON.stringify({ model: MODEL, file: 'x' }), { 'content-type': 'application/json' }, 415, 'unsupported_content_type', null],
    ['no file', form([['model', MODEL]], null), {}, 400, 'invalid_field', 'file'],
    ['the file as a text field', form([['model', MODEL], ['file', 'abc']], null), {}, 400, 'invalid_field', 'file'],
    ['no model', form([]), {}, 400, 'missing_model', 'model'],
    ['two models', form([['model', MODEL], ['model', 'other']]), {}, 400, 'invalid_field', 'model'],
    ['stream not a boolean', form([['model', MODEL], ['stream', 'maybe']]), {}, 400, 'invalid_field', 'stream'],
    ['an unknown model', form([['model', 'no-such-model']]), {}, 404, 'model_not_found', 'model'],
    ['no boundary', '--x\r\n', { 'content-type': 'multipart/form-data' }, 400, 'invalid_multipart', null],
    ['not a form inside', 'just some bytes', { 'content-type': 'multipart/form-data; boundary=zzz' }, 400, 'invalid_multipart', null],
    ['no closing boundary', '--zzz\r\ncontent-disposition: form-data; name="model"\r\n\r\nm\r\n', { 'content-type': 'multipart/form-data; boundary=zzz' }, 400, 'invalid_multipart', null],
    ['over 1000 parts', many, {}, 400, 'invalid_multipart', null],
  ];
  for (const [name, body, headers, status, code, param] of cases) {
    const r = await post(gw.url, P, body, headers);
    t.equal(r.status, status, name);
    t.match(r.json(), { error: { code, param } }, name);
  }
  t.equal((await post(gw.url, P, form([['model', MODEL]]), {}, otherToken)).status, 403, 'a token for other models: 403');
  t.equal((await post(gw.url, '/v1/audio/translations', form([['model', MODEL]]), {}, null)).status, 401, 'no token: 401');
  t.equal(await audioSeen(), before, 'no server was asked');
});

t.test('a Content-Type that is not a form is refused from the head: the client need not send the body', async (t) => {
  const url = new URL(gw.url);
  // only the head of a 1 MB upload (the limit here) is sent; the answer must come without its body
  const headOnly = (contentType: string) =>
    new Promise<string>((resolve, reject) => {
      const sock = connect(Number(url.port), url.hostname);
      let got = '';
      const done = setTimeout(() => { sock.destroy(); resolve(got); }, 4_000);
      sock.on('data', (d: Buffer) => {
        got += d.toString('latin1');
        const end = got.indexOf('\r\n\r\n');
        const len = /content-length: (\d+)/i.exec(got.slice(0, end));
        if (end > 0 && len && got.length >= end + 4 + Number(len[1])) {
          clearTimeout(done);
          sock.destroy();
          resolve(got);
        }
      });
      sock.on('error', reject);
      sock.write(`POST /v1/audio/transcriptions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${token}\r\nContent-Type: ${contentType}\r\nContent-Length: 1000000\r\n\r\n`);
    });
  const json = await headOnly('application/json');
  t.match(json, /^HTTP\/1\.1 415 /, 'application/json: 415 at once');
  t.match(json, /"code":"unsupported_content_type"/);
  const noBoundary = await headOnly('multipart/form-data');
  t.match(noBoundary, /^HTTP\/1\.1 400 /, 'a form type without a boundary: 400 at once');
  t.match(noBoundary, /"code":"invalid_multipart"/);
});
