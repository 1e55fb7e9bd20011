/**
 * The text a model server would see (and cache) for an OpenAI request body.
 *
 * Chat messages are rendered in order as `<|role|>\ncontent\n` — a stand-in for a chat template: what
 * matters for prefix caching is that the same leading messages always render to the same leading text,
 * and that a later message never changes the rendering of an earlier one. As templates do, the request's
 * `tools` (function schemas, often thousands of tokens in an agent's requests) come first, as their JSON,
 * and an assistant message's `tool_calls` follow its content. Completion prompts are used
 * as they are (a list of prompts is joined with newlines).
 *
 * Client values are serialised without recursion (stringifyJson): a part nested thousands of levels deep
 * renders instead of overflowing the stack. Pure: no I/O. Used by the gateway (the text the router hashes),
 * the mock server's tokenizer and the benchmarks.
 */
import { jsonLength, stringifyJson } from './json.js';
import { CHARS_PER_TOKEN } from './tokens.js';
import type { ApiKind } from './validate.js';

/**
 * What one image, audio clip, video or file in a message weighs, in tokens: its real cost depends on the
 * model and the media (a LLaVA-1.5 image is 576 tokens, a Gemma 3 one 256, a Qwen2-VL one 4 per 28×28
 * pixels: about 1,200 for 1280×720; Whisper reads 1,500 for 30 s of audio). Its bytes, base64 in a data URL,
 * are not text: a 1 MB image counted as characters would weigh 260k tokens.
 */
export const MEDIA_PART_TOKENS = 1024;
const MEDIA_PART_CHARS = MEDIA_PART_TOKENS * CHARS_PER_TOKEN;

/** The content part types that carry media rather than text (OpenAI's chat and Responses APIs, and vLLM's). */
const MEDIA_TYPES: ReadonlySet<string> = new Set(['image_url', 'input_image', 'image', 'input_audio', 'audio_url', 'video_url', 'video', 'file', 'input_file']);

/** A long string stood for by its length and 32 slices of 8 characters spread over it; a short one as it is. */
function sampled(s: string): string {
  if (s.length <= 256) return s;
  let out = `${s.length}#`;
  for (let i = 0; i < 32; i++) {
    const at = Math.floor(((s.length - 8) * i) / 31);
    out += s.slice(at, at + 8);
  }
  return out;
}

/**
 * A media part's rendering: MEDIA_PART_CHARS characters (so it weighs MEDIA_PART_TOKENS in the one token
 * estimate, and in the mock's tokenizer) that start with its type and a key of its strings (a URL, a file
 * id, base64 data sampled), so that the same image renders alike and another one differently, as a model
 * server's prefix cache tells them apart. Undefined for a part that is not media.
 */
export function mediaStandIn(part: unknown): string | undefined {
  if (part === null || typeof part !== 'object' || Array.isArray(part)) return undefined;
  const type = (part as { type?: unknown }).type;
  if (typeof type !== 'string' || !MEDIA_TYPES.has(type)) return undefined;
  let key = '';
  for (const [k, v] of Object.entries(part)) {
    if (k === 'type') continue;
    if (typeof v === 'string') key += `${k}=${sampled(v)};`;
    else if (v !== null && typeof v === 'object' && !Array.isArray(v)) {
      for (const [k2, v2] of Object.entries(v)) if (typeof v2 === 'string') key += `${k}.${k2}=${sampled(v2)};`;
    }
  }
  const head = `<|${type}|${key}|>`;
  return head.length >= MEDIA_PART_CHARS ? head.slice(0, MEDIA_PART_CHARS) : head.padEnd(MEDIA_PART_CHARS, '.');
}

/**
 * The body as renderPrompt reads it, for each routed API: chat and completions as they are; tokenize's
 * `prompt` or `messages` as they are; embeddings' `input` as a completion prompt; a Responses request's
 * `instructions` and `input` as chat messages (a string input as one user message), with its `tools`; detokenize's
 * `tokens` as a prompt of token ids (its length only sizes the request); a rerank or score request's two
 * sides as one prompt list (see pairExtraChars); a classify or pooling request's `input` as embeddings'
 * (or its `messages` as chat's); an audio request's text `prompt` (its audio is not text: see the gateway's
 * audio-form.ts).
 */
export function promptBodyOf(kind: ApiKind, body: Record<string, unknown>): Record<string, unknown> {
  switch (kind) {
    case 'chat':
    case 'completions':
    case 'tokenize':
      return body;
    case 'embeddings':
      return { prompt: body.input };
    case 'classify':
    case 'pooling':
      // (vLLM takes either: a completion-style `input`, or chat `messages` rendered by the chat template)
      return body.input !== undefined && body.input !== null ? { prompt: body.input } : body;
    case 'detokenize':
      return { prompt: body.tokens };
    case 'rerank':
    case 'score': {
      // the texts of both sides, each once (pairExtraChars adds the repeats a pairing costs)
      const prompt: unknown[] = [];
      for (const side of pairSides(kind, body)) {
        if (Array.isArray(side)) for (const item of side as unknown[]) prompt.push(item); // (no spread: a huge list)
        else if (side !== undefined && side !== null) prompt.push(side);
      }
      return { prompt };
    }
    case 'responses': {
      const messages: unknown[] = [];
      if (typeof body.instructions === 'string') messages.push({ role: 'system', content: body.instructions });
      if (typeof body.input === 'string') messages.push({ role: 'user', content: body.input });
      else if (Array.isArray(body.input)) for (const item of body.input as unknown[]) messages.push(item); // (no spread: a huge list)
      return { messages, tools: body.tools };
    }
    case 'transcriptions':
    case 'translations':
      return { prompt: typeof body.prompt === 'string' ? body.prompt : '' };
  }
}

/** The two sides a rerank or score request pairs: query and documents; text_1 and text_2 (vLLM) or query and items (SGLang). */
function pairSides(kind: 'rerank' | 'score', body: Record<string, unknown>): [unknown, unknown] {
  if (kind === 'rerank') return [body.query, body.documents];
  return body.text_1 !== undefined && body.text_1 !== null ? [body.text_1, body.text_2] : [body.query, body.items];
}

/**
 * The characters a rerank or score request's model reads beyond its rendered prompt: a cross-encoder reads
 * one side with each item of the other, so a single query (or text_1) scored against n documents is read
 * n times, where the rendering counts it once. 0 for every other kind, and for lists paired one to one.
 */
export function pairExtraChars(kind: ApiKind, body: Record<string, unknown>): number {
  if (kind !== 'rerank' && kind !== 'score') return 0;
  const [a, b] = pairSides(kind, body);
  const one = (v: unknown) => (typeof v === 'string' ? v.length : v === undefined || v === null ? 0 : jsonLength(v));
  if (!Array.isArray(a) && Array.isArray(b) && b.length > 1) return (b.length - 1) * one(a);
  if (Array.isArray(a) && a.length > 1 && !Array.isArray(b)) return (a.length - 1) * one(b);
  return 0;
}

/** A non-empty list (`tools`, a message's `tool_calls`): rendered as its JSON; anything else renders nothing. */
function listed(v: unknown): v is unknown[] {
  return Array.isArray(v) && v.length > 0;
}

export function renderPrompt(body: Record<string, unknown>): string {
  const messages = body.messages;
  if (Array.isArray(messages)) {
    let out = listed(body.tools) ? `<|tools|>\n${stringifyJson(body.tools)}\n` : '';
    for (const m of messages) {
      if (m === null || typeof m !== 'object') continue;
      const msg = m as Record<string, unknown>;
      const role = typeof msg.role === 'string' ? msg.role : 'user';
      out += `<|${role}|>\n${contentText(msg.content)}${listed(msg.tool_calls) ? stringifyJson(msg.tool_calls) : ''}\n`;
    }
    return out + '<|assistant|>\n';
  }
  const prompt = body.prompt;
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt)) return prompt.map((p) => (typeof p === 'string' ? p : stringifyJson(p))).join('\n');
  return '';
}

/** OpenAI content is a string or a list of parts; text parts count, media parts by their stand-in (mediaStandIn), other parts by their JSON. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    let s = '';
    for (const part of content) {
      if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
        s += (part as { text: string }).text;
      } else {
        s += mediaStandIn(part) ?? stringifyJson(part);
      }
    }
    return s;
  }
  if (content === undefined || content === null) return '';
  return stringifyJson(content);
}

/** The first characters of a rendered prompt and the whole rendering's length. */
export interface PromptHead {
  /** renderPrompt(body).slice(0, maxChars) */
  text: string;
  /** renderPrompt(body).length */
  chars: number;
  /** the media parts (mediaStandIn) among them, each MEDIA_PART_TOKENS tokens of `chars` */
  media: number;
}

/**
 * renderPrompt(body) cut to its first `maxChars` characters, and the length of the whole rendering, at a
 * cost that does not grow with what lies past the cut beyond one walk over the parsed values: a part that
 * starts past the cut is measured (jsonLength), never serialised, and strings are never concatenated past
 * it. The prefix index reads only `max_blocks × block_chars` characters and the token estimate needs only
 * the length, so a 4 MB token-id prompt costs a few milliseconds here rather than building a 5 MB string
 * from a million pieces. Same text and length as renderPrompt, character for character (tested).
 */
export function renderPromptHead(body: Record<string, unknown>, maxChars: number): PromptHead {
  const w = new HeadWriter(Math.max(0, maxChars));
  const messages = body.messages;
  if (Array.isArray(messages)) {
    if (listed(body.tools)) {
      w.add('<|tools|>\n');
      w.json(body.tools);
      w.add('\n');
    }
    for (const m of messages) {
      if (m === null || typeof m !== 'object') continue;
      const msg = m as Record<string, unknown>;
      w.add(`<|${typeof msg.role === 'string' ? msg.role : 'user'}|>\n`);
      const content = msg.content;
      if (Array.isArray(content)) {
        for (const part of content) {
          if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') w.add((part as { text: string }).text);
          else {
            const media = mediaStandIn(part);
            if (media !== undefined) {
              w.add(media);
              w.media++;
            } else w.json(part);
          }
        }
      } else if (typeof content === 'string') w.add(content);
      else if (content !== undefined && content !== null) w.json(content);
      if (listed(msg.tool_calls)) w.json(msg.tool_calls);
      w.add('\n');
    }
    w.add('<|assistant|>\n');
  } else if (typeof body.prompt === 'string') {
    w.add(body.prompt);
  } else if (Array.isArray(body.prompt)) {
    const prompt = body.prompt as unknown[];
    let i = 0;
    for (; i < prompt.length && !w.full; i++) {
      if (i > 0) w.add('\n');
      const p = prompt[i];
      if (typeof p === 'string') w.add(p);
      else w.json(p);
    }
    // past the cut (a long token-id list): lengths only, in a loop that allocates nothing for a number
    let rest = i > 0 ? 0 : -1; // a newline before each but the first
    for (; i < prompt.length; i++) {
      const p = prompt[i];
      rest += 1 + (typeof p === 'string' ? p.length : jsonLength(p));
    }
    w.chars += Math.max(0, rest);
  }
  return { text: w.text, chars: w.chars, media: w.media };
}

/** Appends pieces while the head has room; counts every piece's length. */
class HeadWriter {
  text = '';
  chars = 0;
  media = 0;
  constructor(private readonly max: number) {}

  get full(): boolean {
    return this.text.length >= this.max;
  }

  add(s: string): void {
    this.chars += s.length;
    const room = this.max - this.text.length;
    if (room > 0) this.text += s.length <= room ? s : s.slice(0, room);
  }

  json(v: unknown): void {
    // a number (a token id) as String gives: the same text as JSON.stringify for a finite one, cheaper
    if (!this.full) this.add(typeof v === 'number' ? (Number.isFinite(v) ? String(v) : 'null') : stringifyJson(v));
    else this.chars += jsonLength(v);
  }
}
