/**
 * Server-sent events as OpenAI streams them: each event is one `data: <json>` line and a blank line; the
 * stream ends with `data: [DONE]`. Pure string building (no I/O).
 */

/** One SSE event carrying `json` (already serialised). */
export function sseEvent(json: string): string {
  return `data: ${json}\n\n`;
}

/** The event prefix, for a caller that builds an event's JSON in parts. */
export const SSE_DATA_PREFIX = 'data: ';

/** The event that closes an OpenAI stream. */
export const SSE_DONE = 'data: [DONE]\n\n';
