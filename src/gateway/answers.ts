/** The gateway's own whole answers (health, lists, refusals outside an exchange), as the front sends them. */
import { errorBody, type ApiError } from '../openai/errors.js';
import type { Answer } from './client.js';

export function jsonAnswer(status: string, body: string): Answer {
  return { status, contentType: 'application/json', body };
}

/** An error in OpenAI's body shape, with Retry-After when it has one. */
export function errorAnswer(e: ApiError): Answer {
  return {
    status: e.statusText, contentType: 'application/json', retryAfterS: e.retryAfterS, wwwAuthenticate: e.wwwAuthenticate, body: errorBody(e),
    code: e.code, rejectReason: e.rejectReason,
  };
}
