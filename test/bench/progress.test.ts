// Long benchmarks report progress on a terminal only: what runs, how far, the time left; nothing in a log.
import t from 'tap';
import { Progress } from '../../native-bench/common.js';

t.test('on a terminal: step k/N, a time-left estimate after the first step, results kept, a total', async (t) => {
  let out = '';
  const p = new Progress('overhead', 3, true, (s) => void (out += s));
  p.step('json c=10 nginx');
  t.match(out, /overhead \[1\/3\] json c=10 nginx$/, 'what runs and how far; no estimate before a step ended');
  p.stepDone('json c=10 nginx: 100 req/s');
  t.match(out, /overhead: json c=10 nginx: 100 req\/s\n$/, 'the result stays on its own line');
  p.step('json c=10 infergate');
  t.match(out, /overhead \[2\/3\] json c=10 infergate, about \d+ s left$/, 'an estimate of the time left');
  p.line('live detail');
  t.match(out, /\r\x1b\[Koverhead \[2\/3\] live detail, about \d+ s left$/, 'a live detail rewrites the line');
  p.stepDone();
  p.stepDone();
  p.finish();
  t.match(out, /overhead: done in \d+\.\d s\n$/);
});

t.test('not a terminal (a log, CI): quiet', async (t) => {
  let out = '';
  const p = new Progress('policies', 2, false, (s) => void (out += s));
  p.step('a');
  p.line('b');
  p.stepDone('c');
  p.finish();
  t.equal(out, '');
});
