// The audio APIs' forms as the gateway reads and re-encodes them (src/gateway/audio-form.ts): the fields it
// acts on, the form sent on with the resolved model and every other part byte for byte, and the refusals.
import t from 'tap';
import { FormData, Request, Response } from 'undici';
import { formBoundary, formForServer, MAX_FORM_PARTS, readAudioForm } from '../../src/gateway/audio-form.js';

/** Bytes a naive reader could trip on: CR LF, dashes, a fake delimiter line, NULs and high bytes. */
const AUDIO = Buffer.concat([Buffer.from('RIFF\r\n--\r\n--notTheBoundary\r\n\r\n'), Buffer.from([0, 255, 13, 10, 45, 45, 0x80])]);

/** A form's bytes and Content-Type as undici encodes it (for a client here, and for the gateway's request to the server). */
async function encoded(fd: FormData): Promise<{ raw: Buffer; type: string }> {
  const r = new Request('http://x/', { method: 'POST', body: fd });
  return { raw: Buffer.from(await r.arrayBuffer()), type: r.headers.get('content-type')! };
}

function clientForm(): FormData {
  const fd = new FormData();
  fd.append('model', 'alias');
  fd.append('file', new Blob([AUDIO], { type: 'audio/wav' }), 'talk "1".wav');
  fd.append('language', 'de');
  fd.append('stream', 'True');
  return fd;
}

t.test('the fields the gateway acts on, and the form sent on: the target model, every other part as sent', async (t) => {
  const { raw, type } = await encoded(clientForm());
  const f = await readAudioForm('/v1/audio/transcriptions', raw, type);
  if ('error' in f) throw new Error(f.error.message);
  t.equal(f.model, 'alias');
  t.equal(f.stream, true, 'stream "True" read as pydantic reads it');
  const out = await encoded(formForServer(f.form, 'org/target'));
  t.not(formBoundary(out.type), formBoundary(type), 'a boundary of its own');
  const again = await new Response(out.raw, { headers: { 'content-type': out.type } }).formData();
  t.same([...again.keys()], ['model', 'file', 'language', 'stream'], 'the parts in their order, the model in its place');
  t.equal(again.get('model'), 'org/target');
  t.equal(again.get('language'), 'de');
  const file = again.get('file') as File;
  t.equal(file.name, 'talk "1".wav');
  t.equal(file.type, 'audio/wav');
  t.same(Buffer.from(await file.arrayBuffer()), AUDIO, 'the audio byte for byte');
});

t.test('what a second parser could read otherwise is not sent on: text around the parts is dropped', async (t) => {
  const { raw, type } = await encoded(clientForm());
  const b = formBoundary(type)!;
  // a preamble and an epilogue holding a second "model" part: the WHATWG parser skips both
  const sneaky = Buffer.concat([
    Buffer.from(`preamble\r\n`),
    raw,
    Buffer.from(`--${b}\r\nContent-Disposition: form-data; name="model"\r\n\r\nsecret-adapter\r\n--${b}--\r\n`),
  ]);
  const f = await readAudioForm('/v1/audio/transcriptions', sneaky, type);
  if ('error' in f) throw new Error(f.error.message);
  t.equal(f.model, 'alias');
  const out = await encoded(formForServer(f.form, 'org/target'));
  t.notOk(out.raw.includes('secret-adapter'), 'the server never sees the epilogue');
  t.notOk(out.raw.includes('preamble'));
});

t.test('refusals', async (t) => {
  const { raw, type } = await encoded(clientForm());
  const code = async (body: Buffer, ct: string | undefined) => {
    const f = await readAudioForm('/v1/audio/translations', body, ct);
    return 'error' in f ? `${f.error.status} ${f.error.code} ${f.error.param}` : 'ok';
  };
  t.equal(await code(raw, undefined), '415 unsupported_content_type null');
  t.equal(await code(raw, 'application/json'), '415 unsupported_content_type null');
  t.equal(await code(raw, 'multipart/mixed; boundary=x'), '415 unsupported_content_type null');
  t.equal(await code(raw, 'multipart/form-data'), '400 invalid_multipart null');
  t.equal(await code(raw, 'not a / type ;;'), '415 unsupported_content_type null');
  t.equal(await code(raw, 'multipart/form-data; boundary=other'), '400 invalid_multipart null');
  t.equal(await code(raw.subarray(0, raw.length - 10), type), '400 invalid_multipart null', 'cut short');
  t.equal(await code(raw, type.replace('multipart/form-data', 'Multipart/Form-Data')), 'ok', 'the type is case-insensitive');
  const many = new FormData();
  many.append('model', 'm');
  many.append('file', new Blob([AUDIO]), 'a.wav');
  for (let i = 0; i < MAX_FORM_PARTS - 2; i++) many.append(`f${i}`, '');
  const at = await encoded(many);
  t.equal(await code(at.raw, at.type), 'ok', `${MAX_FORM_PARTS} parts`);
  many.append('one-more', '');
  const over = await encoded(many);
  t.equal(await code(over.raw, over.type), '400 invalid_multipart null', `${MAX_FORM_PARTS + 1} parts`);
  const noModel = new FormData();
  noModel.append('model', new Blob(['m']), 'model.txt');
  noModel.append('file', new Blob([AUDIO]), 'a.wav');
  const nm = await encoded(noModel);
  t.equal(await code(nm.raw, nm.type), '400 missing_model model', 'the model as a file part');
});
