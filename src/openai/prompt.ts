/**
 * The text a model server would see (and cache) for an OpenAI request body.
 *
 * Chat messages are rendered in order as `<|role|>\ncontent\n` — a stand-in for a chat template: what
 * matters for prefix caching is that the same leading messages always render to the same leading text,
 * and that a later message never changes the rendering of an earlier one. Completion prompts are used
 * as they are (a list of prompts is joined with newlines).
 *
 * Client values are serialised without recursion (stringifyJson): a part nested thousands of levels deep
 * renders instead of overflowing the stack. Pure: no I/O. Used by the gateway (the text the router hashes),
 * the mock server's tokenizer and the benchmarks.
 */
import { stringifyJson } from './json.js';

export function renderPrompt(body: Record<string, unknown>): string {
  const messages = body.messages;
  if (Array.isArray(messages)) {
    let out = '';
    for (const m of messages) {
      if (m === null || typeof m !== 'object') continue;
      const msg = m as Record<string, unknown>;
      const role = typeof msg.role === 'string' ? msg.role : 'user';
      out += `<|${role}|>\n${contentText(msg.content)}\n`;
    }
    return out + '<|assistant|>\n';
  }
  const prompt = body.prompt;
  if (typeof prompt === 'string') return prompt;
  if (Array.isArray(prompt)) return prompt.map((p) => (typeof p === 'string' ? p : stringifyJson(p))).join('\n');
  return '';
}

/** OpenAI content is a string or a list of parts; text parts count, other parts by their JSON. */
function contentText(content: unknown): string {
  if (typeof content === 'string') return content;
  if (Array.isArray(content)) {
    let s = '';
    for (const part of content) {
      if (part && typeof part === 'object' && typeof (part as { text?: unknown }).text === 'string') {
        s += (part as { text: string }).text;
      } else {
        s += stringifyJson(part);
      }
    }
    return s;
  }
  if (content === undefined || content === null) return '';
  return stringifyJson(content);
}
