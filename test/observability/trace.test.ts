// W3C traceparent parsing, by the spec's rules: what is continued, what starts a new trace.
import t from 'tap';
import { formatTraceparent, newSpanId, newTraceId, parseTraceparent } from '../../src/observability/trace.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';

t.test('a valid version-00 header is read', async (t) => {
  t.same(parseTraceparent(`00-${TRACE}-${PARENT}-01`), { traceId: TRACE, parentId: PARENT, flags: 1 });
  t.same(parseTraceparent(`00-${TRACE}-${PARENT}-00`), { traceId: TRACE, parentId: PARENT, flags: 0 });
  t.same(parseTraceparent(`00-${TRACE}-${PARENT}-03`)?.flags, 3, 'unknown flag bits are read (only bit 0 is passed on)');
});

t.test('a later version is read for its first four fields, with what it appends', async (t) => {
  t.same(parseTraceparent(`01-${TRACE}-${PARENT}-01-what-the-future-adds`), { traceId: TRACE, parentId: PARENT, flags: 1 });
  t.same(parseTraceparent(`cc-${TRACE}-${PARENT}-01`), { traceId: TRACE, parentId: PARENT, flags: 1 });
});

t.test('anything else is refused', async (t) => {
  const bad = [
    undefined,
    '',
    `ff-${TRACE}-${PARENT}-01`, // version ff is invalid
    `00-${TRACE}-${PARENT}-01-extra`, // version 00 has exactly four fields
    `00-${'0'.repeat(32)}-${PARENT}-01`, // all-zero trace id
    `00-${TRACE}-${'0'.repeat(16)}-01`, // all-zero parent id
    `00-${TRACE.toUpperCase()}-${PARENT}-01`, // upper case
    `00-${TRACE.slice(1)}-${PARENT}-01`, // short trace id
    `00-${TRACE}-${PARENT}0-01`, // long parent id
    `00-${TRACE}-${PARENT}-1`, // one-digit flags
    `00_${TRACE}_${PARENT}_01`, // other separators
    ` 00-${TRACE}-${PARENT}-01`, // leading space
    `00-${TRACE}-${PARENT}-01, 00-${TRACE}-${PARENT}-01`, // the header sent twice
    `0g-${TRACE}-${PARENT}-01`, // not hex
    `01-${TRACE}-${PARENT}-01${'x'.repeat(600)}`, // too long to be one
  ];
  for (const v of bad) t.equal(parseTraceparent(v), null, JSON.stringify(v));
});

t.test('new ids: the right length, lower-case hex, not all zero, different each time', async (t) => {
  const traces = new Set<string>();
  const spans = new Set<string>();
  for (let i = 0; i < 200; i++) {
    const tr = newTraceId();
    const sp = newSpanId();
    t.ok(/^[0-9a-f]{32}$/.test(tr) && !/^0+$/.test(tr), `trace id ${tr}`, { diagnostic: false });
    t.ok(/^[0-9a-f]{16}$/.test(sp) && !/^0+$/.test(sp), `span id ${sp}`, { diagnostic: false });
    traces.add(tr);
    spans.add(sp);
  }
  t.equal(traces.size, 200);
  t.equal(spans.size, 200);
  const header = formatTraceparent(TRACE, PARENT, true);
  t.equal(header, `00-${TRACE}-${PARENT}-01`);
  t.same(parseTraceparent(header), { traceId: TRACE, parentId: PARENT, flags: 1 }, 'what we send, we read');
  t.equal(formatTraceparent(TRACE, PARENT, false).slice(-2), '00');
});
