// Allocation per request, by function: V8's sampling heap profiler over a stretch of load, counting objects
// already collected too (what a request allocates, not what it keeps).
//
// In the process to measure (preloaded):
//   HEAP_SAMPLE_OUT=/tmp/heap.json node --import ./native-bench/heap-sample.mjs dist/cli.js serve --config …
//   kill -USR1 <pid>   # start sampling (after a warm-up)
//   …load with a known request count (wrk prints it)…
//   kill -USR2 <pid>   # stop and write HEAP_SAMPLE_OUT
// Then:
//   node native-bench/heap-sample.mjs summarize /tmp/heap.json REQUESTS [TOP]
// prints the bytes allocated per request in all, by function (self) and by file.
// Sampling every 512 bytes slows the process several times: read bytes per request from it, never speed.
// HEAP_SAMPLE_SURVIVORS=1 leaves out what the young generation's collections freed: what is left is what
// survived at least one scavenge (on its way to the old generation, or still alive at the stop).
import { readFileSync, writeFileSync } from 'node:fs';
import { Session } from 'node:inspector';

if (process.argv[2] === 'summarize') summarize(process.argv[3], Number(process.argv[4] ?? 1), Number(process.argv[5] ?? 30));
else install();

function install() {
  const session = new Session();
  session.connect();
  const post = (method, params) => new Promise((resolve, reject) => session.post(method, params ?? {}, (err, r) => (err ? reject(err) : resolve(r))));
  const out = process.env.HEAP_SAMPLE_OUT ?? `heap-sample-${process.pid}.json`;
  process.on('SIGUSR1', () => {
    const minor = process.env.HEAP_SAMPLE_SURVIVORS !== '1';
    post('HeapProfiler.startSampling', { samplingInterval: 512, includeObjectsCollectedByMajorGC: true, includeObjectsCollectedByMinorGC: minor })
      .then(() => process.stderr.write('heap-sample: sampling\n'), (err) => process.stderr.write(`heap-sample: ${err}\n`));
  });
  process.on('SIGUSR2', () => {
    post('HeapProfiler.stopSampling')
      .then(({ profile }) => {
        writeFileSync(out, JSON.stringify(profile));
        process.stderr.write(`heap-sample: wrote ${out}\n`);
      }, (err) => process.stderr.write(`heap-sample: ${err}\n`));
  });
}

function summarize(file, requests, top) {
  const profile = JSON.parse(readFileSync(file, 'utf8'));
  const short = (url) => url.replace(/.*\/(node_modules|dist|dist-bench)\//, '$1/');
  const self = new Map();
  const byFile = new Map();
  let total = 0;
  const stack = [profile.head];
  while (stack.length > 0) {
    const node = stack.pop();
    const cf = node.callFrame;
    const key = `${cf.functionName || '(anonymous)'} ${short(cf.url)}:${cf.lineNumber + 1}`;
    total += node.selfSize;
    self.set(key, (self.get(key) ?? 0) + node.selfSize);
    const f = short(cf.url) || '(native)';
    byFile.set(f, (byFile.get(f) ?? 0) + node.selfSize);
    stack.push(...node.children);
  }
  const per = (bytes) => String(Math.round(bytes / requests)).padStart(7);
  console.log(`${per(total)} bytes per request in all (${requests} requests)`);
  console.log('--- by function (self)');
  for (const [k, v] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(per(v), k);
  console.log('--- by file');
  for (const [k, v] of [...byFile].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(per(v), k);
}
