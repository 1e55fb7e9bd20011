/**
 * The wire form of what replicas tell each other: a batch of learned picks (pool, endpoint, the request's
 * prefix block hashes), binary and compact; and a batch of stored answers (below). Pure: no I/O.
 *
 * Layout (little-endian):
 *   u8 magic 0x49 ('I'), u8 version 1, 8 bytes sender id, u16 string count, u16 record count,
 *   strings: u8 byte length + UTF-8 bytes each (pool and endpoint names, each said once per batch),
 *   records: u16 pool string index, u16 endpoint string index, u16 hash count, u32 hashes.
 * A pick whose pool or endpoint name is over 255 bytes is not sent (no such name is a real host:port).
 * decode() checks every length against the buffer and throws on anything malformed: the channel may carry
 * anything anyone with access to the Redis publishes.
 */

export const MAGIC = 0x49;
export const VERSION = 1;
export const SENDER_BYTES = 8;
/** the most hashes one record carries (prefix.max_blocks allows more; the deepest blocks are left out) */
export const MAX_HASHES = 8192;
/** the most records (and distinct names) a batch holds */
export const MAX_RECORDS = 1024;
const HEADER = 2 + SENDER_BYTES + 4;
const NAME_MAX = 255;

export interface Learned {
  pool: string;
  endpoint: string;
  /** the chain of block hashes (uint32), its first `length` entries */
  hashes: Uint32Array;
}

export interface Batch {
  sender: Buffer;
  records: Learned[];
}

/** Whether a name fits the wire form. */
export function nameFits(name: string): boolean {
  return name.length > 0 && Buffer.byteLength(name, 'utf8') <= NAME_MAX;
}

/** A message of `size` bytes with its magic, version and sender written (the rest is the caller's). */
function message(size: number, version: number, sender: Buffer): Buffer {
  const out = Buffer.allocUnsafe(size);
  out[0] = MAGIC;
  out[1] = version;
  sender.copy(out, 2);
  return out;
}

/** One batch as bytes. `records` must hold at most MAX_RECORDS, with names that fit (nameFits). */
export function encode(sender: Buffer, records: readonly Learned[]): Buffer {
  if (sender.length !== SENDER_BYTES) throw new Error(`the sender id is ${SENDER_BYTES} bytes`);
  if (records.length > MAX_RECORDS) throw new Error(`a batch holds at most ${MAX_RECORDS} records`);
  const names = new Map<string, number>();
  const nameBytes: Buffer[] = [];
  const index = (s: string): number => {
    let i = names.get(s);
    if (i === undefined) {
      i = nameBytes.length;
      names.set(s, i);
      nameBytes.push(Buffer.from(s, 'utf8'));
    }
    return i;
  };
  let size = HEADER;
  const refs: Array<[number, number, number]> = [];
  for (const r of records) {
    const n = Math.min(r.hashes.length, MAX_HASHES);
    refs.push([index(r.pool), index(r.endpoint), n]);
    size += 6 + 4 * n;
  }
  for (const b of nameBytes) {
    if (b.length > NAME_MAX || b.length === 0) throw new Error('a pool or endpoint name is empty or over 255 bytes');
    size += 1 + b.length;
  }
  const out = message(size, VERSION, sender);
  let o = 2 + SENDER_BYTES;
  out.writeUInt16LE(nameBytes.length, o);
  out.writeUInt16LE(records.length, o + 2);
  o += 4;
  for (const b of nameBytes) {
    out[o++] = b.length;
    b.copy(out, o);
    o += b.length;
  }
  records.forEach((r, k) => {
    const [p, e, n] = refs[k];
    out.writeUInt16LE(p, o);
    out.writeUInt16LE(e, o + 2);
    out.writeUInt16LE(n, o + 4);
    o += 6;
    for (let i = 0; i < n; i++, o += 4) out.writeUInt32LE(r.hashes[i] >>> 0, o);
  });
  return out;
}

/** The batch in `buf`; throws (with a reason) on any malformed input. */
export function decode(buf: Buffer): Batch {
  if (buf.length < HEADER) throw new Error('shorter than a header');
  if (buf[0] !== MAGIC) throw new Error('not an infergate cluster message');
  if (buf[1] !== VERSION) throw new Error(`version ${buf[1]} (this gateway reads ${VERSION})`);
  const sender = buf.subarray(2, 2 + SENDER_BYTES);
  let o = 2 + SENDER_BYTES;
  const nNames = buf.readUInt16LE(o);
  const nRecords = buf.readUInt16LE(o + 2);
  o += 4;
  if (nNames > 2 * MAX_RECORDS || nRecords > MAX_RECORDS) throw new Error('too many records');
  const names: string[] = [];
  for (let i = 0; i < nNames; i++) {
    if (o >= buf.length) throw new Error('truncated in the names');
    const len = buf[o++];
    if (len === 0 || o + len > buf.length) throw new Error('a name is empty or truncated');
    names.push(buf.toString('utf8', o, o + len));
    o += len;
  }
  const records: Learned[] = [];
  for (let k = 0; k < nRecords; k++) {
    if (o + 6 > buf.length) throw new Error('truncated in the records');
    const p = buf.readUInt16LE(o);
    const e = buf.readUInt16LE(o + 2);
    const n = buf.readUInt16LE(o + 4);
    o += 6;
    if (p >= names.length || e >= names.length) throw new Error('a record names a string the batch does not hold');
    if (n > MAX_HASHES || o + 4 * n > buf.length) throw new Error('a record\'s hashes are too many or truncated');
    const hashes = new Uint32Array(n);
    for (let i = 0; i < n; i++, o += 4) hashes[i] = buf.readUInt32LE(o);
    records.push({ pool: names[p], endpoint: names[e], hashes });
  }
  if (o !== buf.length) throw new Error('trailing bytes');
  return { sender: Buffer.from(sender), records };
}

/**
 * The second kind of message: a batch of stored answers (the Responses API's ids, with where each answer is
 * kept and whose it is: gateway/response-affinity.ts), so that a retrieve, a cancel or a follow-up reaching
 * another replica or worker finds the server that holds it. Same magic, version byte 2 (a gateway that
 * reads only version 1 counts it invalid and goes on).
 *
 * Layout (little-endian): u8 magic 0x49, u8 version 2, 8 bytes sender id, u16 answer count, then per answer
 * six strings, each u8 byte length + UTF-8 bytes: id, pool, endpoint, model, target, tenant (the tenant may
 * be empty: auth off; the others may not). An answer with a field over 255 bytes is not sent.
 */
export const ANSWERS_VERSION = 2;

export interface StoredAnswer {
  id: string;
  pool: string;
  endpoint: string;
  model: string;
  target: string;
  tenant: string;
}

const ANSWER_FIELDS = ['id', 'pool', 'endpoint', 'model', 'target', 'tenant'] as const;
const ANSWER_HEADER = 2 + SENDER_BYTES + 2;

/** Whether an answer fits the wire form: every field at most 255 bytes, all but the tenant non-empty. */
export function answerFits(a: StoredAnswer): boolean {
  for (const f of ANSWER_FIELDS) {
    const v = a[f];
    if (typeof v !== 'string' || Buffer.byteLength(v, 'utf8') > NAME_MAX || (v.length === 0 && f !== 'tenant')) return false;
  }
  return true;
}

/** A batch of stored answers as bytes: at most MAX_RECORDS, each one that fits (answerFits). */
export function encodeAnswers(sender: Buffer, answers: readonly StoredAnswer[]): Buffer {
  if (sender.length !== SENDER_BYTES) throw new Error(`the sender id is ${SENDER_BYTES} bytes`);
  if (answers.length > MAX_RECORDS) throw new Error(`a batch holds at most ${MAX_RECORDS} records`);
  const parts: Buffer[] = [];
  let size = ANSWER_HEADER;
  for (const a of answers) {
    if (!answerFits(a)) throw new Error('a stored answer has a field that is empty or over 255 bytes');
    for (const f of ANSWER_FIELDS) {
      const b = Buffer.from(a[f], 'utf8');
      parts.push(b);
      size += 1 + b.length;
    }
  }
  const out = message(size, ANSWERS_VERSION, sender);
  let o = 2 + SENDER_BYTES;
  out.writeUInt16LE(answers.length, o);
  o += 2;
  for (const b of parts) {
    out[o++] = b.length;
    b.copy(out, o);
    o += b.length;
  }
  return out;
}

/** The batch of stored answers in `buf`; throws (with a reason) on any malformed input. */
export function decodeAnswers(buf: Buffer): { sender: Buffer; answers: StoredAnswer[] } {
  if (buf.length < ANSWER_HEADER) throw new Error('shorter than a header');
  if (buf[0] !== MAGIC) throw new Error('not an infergate cluster message');
  if (buf[1] !== ANSWERS_VERSION) throw new Error(`version ${buf[1]} is not a batch of stored answers`);
  const sender = Buffer.from(buf.subarray(2, 2 + SENDER_BYTES));
  let o = 2 + SENDER_BYTES;
  const n = buf.readUInt16LE(o);
  o += 2;
  if (n > MAX_RECORDS) throw new Error('too many records');
  const answers: StoredAnswer[] = [];
  for (let k = 0; k < n; k++) {
    const v: string[] = [];
    for (const f of ANSWER_FIELDS) {
      if (o >= buf.length) throw new Error('truncated in the answers');
      const len = buf[o++];
      if ((len === 0 && f !== 'tenant') || o + len > buf.length) throw new Error(`an answer's ${f} is empty or truncated`);
      v.push(buf.toString('utf8', o, o + len));
      o += len;
    }
    answers.push({ id: v[0], pool: v[1], endpoint: v[2], model: v[3], target: v[4], tenant: v[5] });
  }
  if (o !== buf.length) throw new Error('trailing bytes');
  return { sender, answers };
}
