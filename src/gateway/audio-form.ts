/**
 * The audio APIs' bodies (`/v1/audio/transcriptions`, `/v1/audio/translations`): a multipart form holding
 * the audio file and text fields, `model` among them. Read with undici's form parser (the WHATWG one that
 * fetch uses), the fields the gateway acts on checked (audioFormProblem), and the parsed form handed to undici
 * as the request's body with the model the route resolved to: undici encodes it anew as it sends it. The
 * model server then reads exactly the fields the gateway read: two multipart parsers can read an odd body differently (a part
 * one of them skips, a second `model`), and the model decides which pool, and which of a pod's adapters,
 * serves the request.
 */
import { MIMEType } from 'node:util';
import { FormData, Response } from 'undici';
import { errors, type ApiError } from '../openai/errors.js';
import { audioFormProblem, formBoolean, problemMessage, type FormValue } from '../openai/validate.js';

/** The most parts a form may have (Starlette's own limit on fields and on files, under vLLM, is 1000 each). */
export const MAX_FORM_PARTS = 1000;

export interface AudioForm {
  form: FormData;
  model: string;
  stream: boolean;
}

/** The boundary of a multipart/form-data Content-Type; '' when the type is that but has none; undefined for any other type. */
export function formBoundary(contentType: string | undefined): string | undefined {
  if (contentType === undefined) return undefined;
  let mime: MIMEType;
  try {
    mime = new MIMEType(contentType);
  } catch {
    return undefined;
  }
  if (mime.essence !== 'multipart/form-data') return undefined;
  return mime.params.get('boundary') ?? '';
}

/** How many times the delimiter `--boundary` occurs in the body: its parts, plus the closing one. */
function delimiters(raw: Buffer, boundary: string, atMost: number): number {
  const delimiter = Buffer.from(`--${boundary}`, 'latin1');
  let n = 0;
  for (let at = raw.indexOf(delimiter); at !== -1 && n <= atMost; at = raw.indexOf(delimiter, at + delimiter.length)) n++;
  return n;
}

/**
 * What an audio request's Content-Type already decides, before its body: 415 when the body is not declared
 * a multipart form, 400 when the form type has no boundary; undefined when it is a form with one.
 */
export function formTypeProblem(path: string, contentType: string | undefined): ApiError | undefined {
  const boundary = formBoundary(contentType);
  if (boundary === undefined) return errors.notMultipart(path);
  if (boundary === '') return errors.invalidMultipart('its Content-Type has no boundary');
  return undefined;
}

/**
 * The form of an audio request sent to `path`, or the error to answer: those of `formTypeProblem`, and 400
 * when it does not parse as a form, has too many parts, or lacks what the API needs (a `file` part, one
 * `model`, a boolean `stream` if any).
 */
export async function readAudioForm(path: string, raw: Buffer, contentType: string | undefined): Promise<AudioForm | { error: ApiError }> {
  const typeProblem = formTypeProblem(path, contentType);
  if (typeProblem !== undefined) return { error: typeProblem };
  const boundary = formBoundary(contentType)!;
  // counted on the bytes before anything is parsed: a body of a million empty parts is refused at once
  if (delimiters(raw, boundary, MAX_FORM_PARTS + 1) > MAX_FORM_PARTS + 1) return { error: errors.invalidMultipart(`it has more than ${MAX_FORM_PARTS} parts`) };
  let form: FormData;
  try {
    form = await new Response(raw, { headers: { 'content-type': contentType! } }).formData();
  } catch {
    return { error: errors.invalidMultipart('its parts could not be read (each part needs a Content-Disposition with a name, and the body must end with the closing boundary)') };
  }
  const fields = new Map<string, FormValue[]>();
  for (const [name, value] of form) {
    const v: FormValue = typeof value === 'string' ? value : { filename: value.name, size: value.size };
    const list = fields.get(name);
    if (list === undefined) fields.set(name, [v]);
    else list.push(v);
  }
  const p = audioFormProblem(fields);
  if (p) return { error: errors.invalidField(p.param, problemMessage(p)) };
  const model = fields.get('model')?.[0];
  if (typeof model !== 'string' || model.length === 0) return { error: errors.missingModel() };
  const stream = fields.get('stream')?.[0];
  return { form, model, stream: typeof stream === 'string' && formBoolean(stream) === true };
}

/**
 * The form as sent on, with `model` in place of the client's (in the first one's place): undici encodes it
 * anew as it writes it (a new boundary, its own Content-Type), part by part.
 */
export function formForServer(form: FormData, model: string): FormData {
  form.set('model', model);
  return form;
}
