// The cluster wire form (learned picks, and stored answers: the Responses API's ids): what one replica encodes
// another decodes unchanged, and anything malformed is refused with an error (never a crash, a hang or a
// giant allocation).
import t from 'tap';
import { randomBytes } from 'node:crypto';
import { answerFits, decode, decodeAnswers, encode, encodeAnswers, MAX_HASHES, MAX_RECORDS, SENDER_BYTES } from '../../src/cluster/codec.js';

const sender = randomBytes(SENDER_BYTES);

t.test('a batch round-trips, names said once, hashes as uint32', async (t) => {
  const records = [
    { pool: 'llama', endpoint: '10.0.0.1:8000', hashes: Uint32Array.from([1, 0xffffffff, 42]) },
    { pool: 'llama', endpoint: '10.0.0.2:8000', hashes: Uint32Array.from([7]) },
    { pool: 'qwen-ü', endpoint: '10.0.0.1:8000', hashes: Uint32Array.from([0, 3]) },
  ];
  const buf = encode(sender, records);
  const names = 'llama10.0.0.1:800010.0.0.2:8000qwen-ü';
  t.equal(buf.length, 2 + 8 + 4 + 4 + Buffer.byteLength(names) + 3 * 6 + 6 * 4, 'compact: each name once, 4 bytes a hash');
  const back = decode(buf);
  t.ok(back.sender.equals(sender));
  t.same(back.records.map((r) => ({ ...r, hashes: [...r.hashes] })), records.map((r) => ({ ...r, hashes: [...r.hashes] })));
});

t.test('a record keeps at most MAX_HASHES hashes; a batch at most MAX_RECORDS records', async (t) => {
  const long = new Uint32Array(MAX_HASHES + 10).fill(5);
  t.equal(decode(encode(sender, [{ pool: 'p', endpoint: 'e', hashes: long }])).records[0].hashes.length, MAX_HASHES);
  const many = Array.from({ length: MAX_RECORDS + 1 }, () => ({ pool: 'p', endpoint: 'e', hashes: new Uint32Array(1) }));
  t.throws(() => encode(sender, many));
  t.throws(() => encode(sender, [{ pool: 'x'.repeat(256), endpoint: 'e', hashes: new Uint32Array(1) }]));
});

t.test('malformed input is refused', async (t) => {
  const good = encode(sender, [{ pool: 'p', endpoint: 'e:1', hashes: Uint32Array.from([1, 2, 3]) }]);
  t.throws(() => decode(Buffer.alloc(0)), /shorter/);
  t.throws(() => decode(Buffer.from('hello world, not ours')), /not an infergate/);
  const v2 = Buffer.from(good);
  v2[1] = 2;
  t.throws(() => decode(v2), /version/);
  for (let cut = 1; cut < good.length; cut++) t.throws(() => decode(good.subarray(0, cut)), `cut at ${cut}`);
  t.throws(() => decode(Buffer.concat([good, Buffer.from([0])])), /trailing/);
  const badIndex = Buffer.from(good);
  badIndex.writeUInt16LE(9, good.length - 3 * 4 - 6); // the record's pool index
  t.throws(() => decode(badIndex), /string/);
  const huge = Buffer.from(good);
  huge.writeUInt16LE(0xffff, 2 + 8 + 2); // record count
  t.throws(() => decode(huge), /too many/);
  // random bytes with the right magic and version: refused or decoded, never anything else
  for (let i = 0; i < 2000; i++) {
    const b = randomBytes(10 + (i % 60));
    b[0] = 0x49;
    b[1] = 1;
    try {
      decode(b);
    } catch (e) {
      if (!(e instanceof Error)) throw e;
    }
  }
  t.pass('2000 random messages handled');
});

const answer = { id: 'resp_0123456789abcdef0123456789abcdef', pool: 'llama', endpoint: '10.0.0.1:8000', model: 'chat', target: 'llama-3-8b', tenant: 'team-ü' };

t.test('a batch of stored answers round-trips; the tenant may be empty, nothing else', async (t) => {
  const answers = [answer, { ...answer, id: 'resp_2', tenant: '' }];
  const buf = encodeAnswers(sender, answers);
  t.equal(buf[1], 2, 'version 2: a batch of stored answers');
  const back = decodeAnswers(buf);
  t.ok(back.sender.equals(sender));
  t.same(back.answers, answers);
  t.throws(() => decode(buf), /version 2/, 'a reader of picks refuses it (a gateway of version 1 counts it invalid)');
  t.throws(() => decodeAnswers(encode(sender, [{ pool: 'p', endpoint: 'e', hashes: new Uint32Array(1) }])), /not a batch of stored answers/);
  t.notOk(answerFits({ ...answer, endpoint: '' }), 'an empty endpoint does not fit');
  t.notOk(answerFits({ ...answer, id: 'r'.repeat(256) }), 'nor an id over 255 bytes');
  t.throws(() => encodeAnswers(sender, [{ ...answer, pool: '' }]));
  t.throws(() => encodeAnswers(sender, Array.from({ length: MAX_RECORDS + 1 }, () => answer)));
});

t.test('a malformed batch of stored answers is refused', async (t) => {
  const good = encodeAnswers(sender, [answer]);
  for (let cut = 1; cut < good.length; cut++) t.throws(() => decodeAnswers(good.subarray(0, cut)), `cut at ${cut}`);
  t.throws(() => decodeAnswers(Buffer.concat([good, Buffer.from([0])])), /trailing/);
  const huge = Buffer.from(good);
  huge.writeUInt16LE(0xffff, 2 + 8);
  t.throws(() => decodeAnswers(huge), /too many/);
  const emptyId = Buffer.from(good);
  emptyId[2 + 8 + 2] = 0;
  t.throws(() => decodeAnswers(emptyId), /id is empty/);
  for (let i = 0; i < 2000; i++) {
    const b = randomBytes(12 + (i % 80));
    b[0] = 0x49;
    b[1] = 2;
    try {
      decodeAnswers(b);
    } catch (e) {
      if (!(e instanceof Error)) throw e;
    }
  }
  t.pass('2000 random messages handled');
});
