// The request structure that the gateway and the mock both rely on (src/openai/validate.ts).
import t from 'tap';
import { bodyProblem, problemMessage } from '../../src/openai/validate.js';

const msgs = [{ role: 'user', content: 'hi' }];

t.test('well-formed bodies have no problem', async (t) => {
  t.equal(bodyProblem('chat', { model: 'm', messages: msgs }), null);
  t.equal(bodyProblem('chat', { messages: msgs, stream: null, max_tokens: 0, n: 1, max_completion_tokens: null }), null);
  t.equal(bodyProblem('completions', { prompt: 'x' }), null);
  t.equal(bodyProblem('completions', { prompt: ['a', 'b'], stream: true }), null);
  t.equal(bodyProblem('completions', { prompt: '' }), null, 'an empty string is a prompt (the server decides)');
});

t.test('each problem, in the order the checks run', async (t) => {
  const cases: Array<[string, 'chat' | 'completions', Record<string, unknown>, unknown]> = [
    ['stream not boolean', 'chat', { messages: msgs, stream: 'yes' }, { param: 'stream', issue: 'not_boolean' }],
    ['stream is checked first', 'chat', { stream: 1 }, { param: 'stream', issue: 'not_boolean' }],
    ['messages missing', 'chat', {}, { param: 'messages', issue: 'missing' }],
    ['messages empty', 'chat', { messages: [] }, { param: 'messages', issue: 'missing' }],
    ['messages not a list', 'chat', { messages: 'hi' }, { param: 'messages', issue: 'missing' }],
    ['a message without role', 'chat', { messages: [{ content: 'x' }] }, { param: 'messages', issue: 'bad_message' }],
    ['a message that is null', 'chat', { messages: [null] }, { param: 'messages', issue: 'bad_message' }],
    ['a role that is a number', 'chat', { messages: [{ role: 1 }] }, { param: 'messages', issue: 'bad_message' }],
    ['chat ignores prompt', 'chat', { prompt: 'x' }, { param: 'messages', issue: 'missing' }],
    ['prompt missing', 'completions', {}, { param: 'prompt', issue: 'missing' }],
    ['prompt empty list', 'completions', { prompt: [] }, { param: 'prompt', issue: 'missing' }],
    ['prompt a number', 'completions', { prompt: 5 }, { param: 'prompt', issue: 'missing' }],
    ['max_tokens negative', 'chat', { messages: msgs, max_tokens: -1 }, { param: 'max_tokens', issue: 'not_integer', min: 0 }],
    ['max_tokens fractional', 'completions', { prompt: 'x', max_tokens: 1.5 }, { param: 'max_tokens', issue: 'not_integer', min: 0 }],
    ['max_tokens a string', 'chat', { messages: msgs, max_tokens: '5' }, { param: 'max_tokens', issue: 'not_integer', min: 0 }],
    ['max_completion_tokens', 'chat', { messages: msgs, max_completion_tokens: -3 }, { param: 'max_completion_tokens', issue: 'not_integer', min: 0 }],
    ['n zero', 'chat', { messages: msgs, n: 0 }, { param: 'n', issue: 'not_integer', min: 1 }],
    ['max_tokens before n', 'chat', { messages: msgs, n: 0, max_tokens: -1 }, { param: 'max_tokens', issue: 'not_integer', min: 0 }],
  ];
  for (const [name, kind, body, want] of cases) t.same(bodyProblem(kind, body), want, name);
});

t.test('the gateway words each problem the OpenAI way, naming the field', async (t) => {
  t.equal(problemMessage({ param: 'stream', issue: 'not_boolean' }), 'The "stream" field must be a boolean.');
  t.match(problemMessage({ param: 'messages', issue: 'missing' }), /"messages" field is required/);
  t.match(problemMessage({ param: 'messages', issue: 'bad_message' }), /string "role"/);
  t.match(problemMessage({ param: 'prompt', issue: 'missing' }), /"prompt" field is required/);
  t.equal(problemMessage({ param: 'n', issue: 'not_integer', min: 1 }), 'The "n" field must be a non-negative integer.');
});
