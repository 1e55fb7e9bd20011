// The raw-socket client's verdict on an answer (native-bench/rawhttp.ts `judge`), which the HTTP fuzz test
// reads: a whole stream is one that ends as its API ends it, [DONE] for chat and completions, a terminal
// event for the Responses API; anything else that stops is cut short.
import t from 'tap';
import { judge } from '../../native-bench/rawhttp.js';

const sse = (text: string) => ({ status: 200, headers: { 'content-type': 'text/event-stream' }, body: Buffer.from(text), complete: true });

t.test('streams: whole or cut short, per API', async (t) => {
  t.notOk(judge(sse('data: {"choices":[]}\n\ndata: [DONE]\n\n')).truncated, 'chat: [DONE]');
  t.ok(judge(sse('data: {"choices":[]}\n\n')).truncated, 'chat without [DONE]');
  const responses = 'event: response.created\ndata: {"type":"response.created"}\n\nevent: response.output_text.delta\ndata: {"delta":"hi"}\n\n';
  for (const end of ['completed', 'incomplete', 'failed']) {
    t.notOk(judge(sse(`${responses}event: response.${end}\ndata: {"type":"response.${end}"}\n\n`)).truncated, `Responses API: response.${end}`);
  }
  t.ok(judge(sse(responses)).truncated, 'Responses API without its terminal event');
  t.ok(judge(sse(`${responses}event: response.completed\ndata: {"type":"respo`)).truncated, 'its terminal event cut');
  t.notOk(judge(sse('data: {"error":{"message":"x"}}\n\n')).truncated, 'a stream ended by an error event');
});

t.test('JSON answers and error shapes', async (t) => {
  const json = (status: number, text: string) => ({ status, headers: { 'content-type': 'application/json' }, body: Buffer.from(text), complete: true });
  t.notOk(judge(json(200, '{"a":1}')).truncated);
  t.ok(judge(json(200, '{"a":')).truncated);
  t.ok(judge(json(400, '{"error":{"message":"bad"}}')).errorShape);
  t.notOk(judge(json(400, '{"detail":"Not Found"}')).errorShape);
});
