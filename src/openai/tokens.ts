/**
 * The one token estimate: about 4 characters of English text per token (Llama 3's BPE averages that). The
 * gateway estimates a prompt's tokens with it, the router turns prefix blocks (characters) into tokens
 * with it, the simulated engine's tokenizer cuts text into tokens of this many characters, and the trace
 * tools build a prompt of N tokens as N × this many characters. Pure.
 */
export const CHARS_PER_TOKEN = 4;

/** Estimated tokens of a text: ceil(chars / CHARS_PER_TOKEN). */
export function estimateTokens(text: string): number {
  return tokensOfChars(text.length);
}

/** The same estimate from a length alone (the gateway counts a long prompt without rendering all of it). */
export function tokensOfChars(chars: number): number {
  return Math.ceil(chars / CHARS_PER_TOKEN);
}
