// The pick batcher both cluster shares use (Redis and IPC): one batch per event-loop turn, every pick
// counted once (sent ok, dropped or error), its bounds held, its own batches skipped on the way back, and
// malformed input counted rather than thrown.
import t from 'tap';
import { setImmediate as turn } from 'node:timers/promises';
import { PickBatcher, MAX_OUTSTANDING, MAX_BATCH_HASHES } from '../../src/cluster/batcher.js';
import { decode, decodeAnswers, MAX_RECORDS } from '../../src/cluster/codec.js';

function harness() {
  const sent: Buffer[] = [];
  const pending: Array<(err: Error | null) => void> = [];
  const counts = new Map<string, number>();
  const troubles: Array<Error | undefined> = [];
  const state = { ready: true, answer: 'now' as 'now' | 'later' | 'throw' };
  const b = new PickBatcher(
    {
      ready: () => state.ready,
      send: (bytes, done) => {
        if (state.answer === 'throw') throw new Error('channel closed');
        sent.push(bytes);
        if (state.answer === 'now') done(null);
        else pending.push(done);
      },
      trouble: (err) => troubles.push(err),
    },
    (d, r, n) => counts.set(`${d}:${r}`, (counts.get(`${d}:${r}`) ?? 0) + n),
  );
  return { b, sent, pending, counts, troubles, state, count: (k: string) => counts.get(k) ?? 0 };
}

const chain = Uint32Array.from([1, 2, 3, 4]);

t.test('the picks of one turn go out as one batch; the chain is copied at once', async (t) => {
  const h = harness();
  const buf = Uint32Array.from(chain);
  h.b.learned('p', 'a:1', buf, 3);
  buf.fill(9); // the router reuses its buffer after the call
  h.b.learned('p', 'b:1', chain, 4);
  t.equal(h.sent.length, 0, 'nothing sent during the turn');
  await turn();
  t.equal(h.sent.length, 1, 'one batch for the turn');
  const batch = decode(h.sent[0]);
  t.same(batch.records.map((r) => [r.endpoint, [...r.hashes]]), [['a:1', [1, 2, 3]], ['b:1', [1, 2, 3, 4]]]);
  t.ok(batch.sender.equals(h.b.sender));
  t.equal(h.count('sent:ok'), 2);
  h.b.learned('p', 'a:1', chain, 0); // no blocks: nothing to share, nothing counted
  await turn();
  t.equal(h.sent.length, 1);
});

t.test('dropped and counted: not ready, a full batch, a name too long, too many batches unanswered', async (t) => {
  const h = harness();
  h.state.ready = false;
  h.b.learned('p', 'a:1', chain, 4);
  t.equal(h.count('sent:dropped'), 1, 'transport away: dropped at once');
  h.state.ready = true;
  for (let i = 0; i < MAX_RECORDS + 3; i++) h.b.learned('p', 'a:1', chain, 4);
  h.b.learned('p', 'x'.repeat(300), chain, 4);
  t.equal(h.count('sent:dropped'), 1 + 3 + 1, 'past MAX_RECORDS and the long name');
  await turn();
  t.equal(decode(h.sent[0]).records.length, MAX_RECORDS);

  const big = new Uint32Array(8192).fill(7);
  const before = h.count('sent:dropped');
  for (let i = 0; i < MAX_BATCH_HASHES / 8192 + 2; i++) h.b.learned('p', 'a:1', big, big.length);
  t.equal(h.count('sent:dropped') - before, 2, 'past MAX_BATCH_HASHES hashes in one turn');
  await turn();

  // the transport stops answering: MAX_OUTSTANDING batches wait, the next is dropped and reported
  h.state.answer = 'later';
  for (let i = 0; i < MAX_OUTSTANDING; i++) {
    h.b.learned('p', 'a:1', chain, 4);
    await turn();
  }
  t.equal(h.pending.length, MAX_OUTSTANDING);
  const dropped = h.count('sent:dropped');
  h.b.learned('p', 'a:1', chain, 4);
  await turn();
  t.equal(h.count('sent:dropped'), dropped + 1, 'one batch too many: dropped');
  t.ok(h.troubles.length >= 1, 'and the share asked to re-read its backend');
  h.pending.splice(0).forEach((done, i) => done(i === 0 ? new Error('publish timed out') : null));
  t.equal(h.count('sent:error'), 1, 'a failed send counts its picks as errors');
  t.equal(h.troubles.at(-1)?.message, 'publish timed out');
  h.state.answer = 'now';
  h.b.learned('p', 'a:1', chain, 4);
  await turn();
  t.equal(h.sent.length, 2 + MAX_OUTSTANDING + 1, 'room again once answered');
});

t.test('a send that throws counts an error and leaves no batch outstanding', async (t) => {
  const h = harness();
  h.state.answer = 'throw';
  for (let i = 0; i < MAX_OUTSTANDING + 1; i++) {
    h.b.learned('p', 'a:1', chain, 4);
    await turn();
  }
  t.equal(h.count('sent:error'), MAX_OUTSTANDING + 1, 'every throwing send is an error, none held as outstanding');
  t.equal(h.count('sent:dropped'), 0);
});

t.test('received: the others applied, our own skipped, malformed counted', async (t) => {
  const me = harness();
  const other = harness();
  other.b.learned('p', 'a:1', chain, 4);
  me.b.learned('p', 'b:1', chain, 2);
  await turn();
  const applied: string[] = [];
  const apply = (pool: string, ep: string, hashes: Uint32Array) => applied.push(`${pool}/${ep}/${hashes.length}`);
  me.b.received(other.sent[0], apply);
  me.b.received(me.sent[0], apply);
  t.same(applied, ['p/a:1/4'], "the other's pick applied, our own skipped");
  t.equal(me.count('received:ok'), 1);
  me.b.received(Buffer.from('garbage'), apply);
  me.b.received(other.sent[0], () => {
    throw new Error('bad');
  });
  t.equal(me.count('received:invalid'), 2, 'a malformed message and a pick that failed to apply');
  me.b.close();
  me.b.learned('p', 'a:1', chain, 4);
  await turn();
  t.equal(me.sent.length, 1, 'closed: nothing more sent');
});

t.test('stored answers: a batch of their own per turn beside the picks, applied by the others, counted', async (t) => {
  const me = harness();
  const other = harness();
  const a = { id: 'resp_1', pool: 'p', endpoint: 'a:1', model: 'm', target: 'm', tenant: '' };
  other.b.learned('p', 'a:1', chain, 4);
  other.b.answered(a);
  other.b.answered({ ...a, id: 'resp_2', tenant: 'acme' });
  other.b.answered({ ...a, id: 'x'.repeat(300) }); // does not fit: dropped
  await turn();
  t.equal(other.sent.length, 2, 'one batch of picks, one of answers');
  t.same(decodeAnswers(other.sent[1]).answers.map((x) => x.id), ['resp_1', 'resp_2']);
  t.equal(other.count('sent:ok'), 3, 'a pick and two answers sent');
  t.equal(other.count('sent:dropped'), 1, 'the answer that does not fit');
  const remembered: string[] = [];
  const applied: string[] = [];
  me.b.received(other.sent[1], (p) => applied.push(p), (x) => remembered.push(`${x.id}/${x.tenant}`));
  t.same(remembered, ['resp_1/', 'resp_2/acme']);
  t.same(applied, [], 'no pick applied from a batch of answers');
  me.b.received(other.sent[1], () => {}); // a share that takes no answers
  t.equal(me.count('received:invalid'), 2, 'counted invalid where nobody takes them');
  me.b.answered(a);
  await turn();
  me.b.received(me.sent[0], () => {}, (x) => remembered.push(x.id));
  t.equal(remembered.length, 2, 'our own answers, back from the channel, skipped');
  me.state.ready = false;
  me.b.answered(a);
  t.equal(me.count('sent:dropped'), 1, 'not ready: dropped at once');
});
