// Which uWebSockets.js build serves: the choice with fake loaders (pure), then the real one on this host,
// as the gateway logs it at start and reports it in infergate_build_info.
import t from 'tap';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { chooseUws, UWS_BUILDS, type UwsBuild, type UwsHost } from '../../src/common/uws.js';
import { ROOT, gatewayConfig, startGateway } from '../helpers/process.js';
import { metric, scrape } from '../e2e/support.js';

const host: UwsHost = { node: '20.20.2', abi: '115', platform: 'linux-x64', libc: 'glibc 2.36' };
type FakeUws = { name: string; getParts?: () => void };
const native: FakeUws = { getParts: () => undefined, name: 'native' };
const fallback: FakeUws = { name: 'fallback' };
const isNative = (u: FakeUws) => typeof u.getParts === 'function';
// What 20.57's loader throws on glibc 2.36: its banner first, the dynamic loader's reason after.
const glibcError = new Error(
  'This version of uWS.js (v20.57.0) supports only Node.js versions 20, 22, 24 and 25 on (glibc) Linux, macOS and Windows.\n\n' +
    "Error: /lib/x86_64-linux-gnu/libc.so.6: version `GLIBC_2.38' not found (required by /x/uws_linux_x64_115.node)",
);

t.test('the builds are tried newest first', async (t) => {
  t.same(UWS_BUILDS.map((b) => b.version), ['20.57', '20.30']);
  t.match(UWS_BUILDS[0].needs, /glibc >= 2\.38/);
  t.match(UWS_BUILDS[1].needs, /Node 18 or 20/);
});

t.test('the first build that loads natively is chosen', async (t) => {
  const tried: string[] = [];
  let hostAsked = false;
  const choice = chooseUws(UWS_BUILDS, (b) => (tried.push(b.version), native), isNative, () => ((hostAsked = true), host));
  t.equal(choice.build.version, '20.57');
  t.equal(choice.uws, native);
  t.same(tried, ['20.57'], 'the second build is not loaded at all');
  t.same(choice.skipped, []);
  t.notOk(hostAsked, 'the host is only examined for a failure message');
});

t.test('a build that throws is skipped with the loader\'s reason, and the next one serves', async (t) => {
  const choice = chooseUws(
    UWS_BUILDS,
    (b) => {
      if (b.version === '20.57') throw glibcError;
      return native;
    },
    isNative,
    () => host,
  );
  t.equal(choice.build.version, '20.30');
  t.equal(choice.skipped.length, 1);
  t.equal(choice.skipped[0].build.version, '20.57');
  t.match(choice.skipped[0].reason, /^Error: .*GLIBC_2\.38' not found/, 'the useful line, not the banner');
});

t.test('a build that only loads its slow fallback is skipped too', async (t) => {
  const builds: UwsBuild[] = [
    { version: 'a', module: 'a', needs: 'A', headLength: false },
    { version: 'b', module: 'b', needs: 'B', headLength: false },
  ];
  const choice = chooseUws(builds, (b) => (b.version === 'a' ? fallback : native), isNative, () => host);
  t.equal(choice.build.version, 'b');
  t.match(choice.skipped[0].reason, /fallback/);
});

t.test('when none loads, the error says the host and what each build needs', async (t) => {
  const err = (() => {
    try {
      chooseUws(
        UWS_BUILDS,
        (b) => {
          if (b.version === '20.57') throw glibcError;
          return fallback;
        },
        isNative,
        () => ({ node: '24.22.3', abi: '137', platform: 'linux-x64', libc: 'glibc 2.36' }),
      );
    } catch (e) {
      return e as Error;
    }
    return undefined;
  })();
  t.ok(err, 'it throws');
  t.match(err!.message, /Node 24\.22\.3, modules ABI 137, linux-x64, glibc 2\.36/);
  t.match(err!.message, /uws 20\.57 \(@btc-vision\/uwebsockets\.js\) needs Node 20, 22, 24 or 25 .* glibc >= 2\.38.*; here: .*GLIBC_2\.38/);
  t.match(err!.message, /uws 20\.30 \(uWebSockets\.js\) needs Node 18 or 20 .* glibc >= 2\.27.*; here: only its slow ws-based fallback/);
  t.match(err!.message, /does not run on the slow fallback/);
});

t.test('a missing optional package is a reason like any other', async (t) => {
  const choice = chooseUws(
    UWS_BUILDS,
    (b) => {
      if (b.version === '20.57') throw new Error("Cannot find module '@btc-vision/uwebsockets.js'\nRequire stack:\n- /app/dist/common/uws.js");
      return native;
    },
    isNative,
    () => host,
  );
  t.equal(choice.build.version, '20.30');
  t.match(choice.skipped[0].reason, /^Cannot find module/);
});

/** The build this host should get: 20.57 where its binaries load (glibc >= 2.38, Node ABI it ships), else 20.30. */
function expectedHere(): string {
  const report = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  const [major, minor] = (report.header?.glibcVersionRuntime ?? '0.0').split('.').map(Number);
  const glibcOk = major > 2 || (major === 2 && minor >= 38);
  return glibcOk && ['115', '127', '137', '141'].includes(process.versions.modules) ? '20.57' : '20.30';
}

t.test('on this host the gateway logs which build serves and reports it in infergate_build_info', async (t) => {
  const want = expectedHere();
  const gw = await startGateway(gatewayConfig(['127.0.0.1:9'], { over: { logging: { level: 'info', access_log: false } } }));
  t.teardown(() => gw.stop());
  const [line] = await gw.proc.waitFor(/^\{.*"msg":"uws [\d.]+ native".*\}$/m);
  const log = JSON.parse(line) as { msg: string; uws: string; node: string; skipped: string[] };
  t.equal(log.msg, `uws ${want} native`, `Node ${process.versions.node} (ABI ${process.versions.modules})`);
  t.equal(log.node, process.versions.node);
  if (want === '20.30') t.match(log.skipped.join('\n'), /uws 20\.57: .*(GLIBC_2\.38|Cannot find module|No such file)/, 'says why 20.57 was passed over');
  else t.same(log.skipped, []);
  const samples = await scrape(gw.adminUrl);
  t.equal(metric(samples, 'infergate_build_info', { uws: want, node: process.versions.node, version: (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version }), 1);
});
