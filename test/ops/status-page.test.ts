// The admin port's status page in a real browser (Debian's chromium driven by playwright-core): what a
// person sees — a row per endpoint, the in-flight count rising under load and falling after it, an endpoint
// turning stale when its mock's /metrics hangs, the last decisions — and that the page loads nothing from
// anywhere but the admin port. Leaves two screenshots in the test's fixture folder under .tap/fixtures/
// (kept: saveFixture).
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import t from 'tap';
import { chromium, type Page } from 'playwright-core';
import { startGateway, startMocks, gatewayConfig, chat, until } from '../e2e/support.js';
import { skipWithout } from '../helpers/tools.js';

const CHROMIUM = '/usr/bin/chromium';
const skip = skipWithout('chromium', existsSync(CHROMIUM), `apt-get install -y chromium for ${CHROMIUM} (.ci/run does it)`);

/** The in-flight counts the page shows, summed over its endpoint rows. */
function shownInFlight(page: Page): Promise<number> {
  return page.$$eval('tr[data-endpoint] td.in-flight', (tds) => tds.reduce((a, td) => a + Number(td.textContent), 0));
}

t.test('the status page shows endpoints, load, a stale endpoint and decisions', { saveFixture: true, skip }, async (t) => {
  // each process is stopped at the end even when a later start fails
  const mocks = await startMocks(2, ['--model', 'test-model', '--decode-ms', '20']);
  t.teardown(() => mocks.kill());
  const gw = await startGateway(
    gatewayConfig(mocks.endpoints, { pool: { policy: 'least_request', metrics: { interval: '100ms', stale_after: '500ms' } } }),
  );
  t.teardown(() => gw.stop());
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  });
  t.teardown(() => browser.close());

  const dir = t.testdir(); // kept after the run, for the screenshots
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  const foreign: string[] = [];
  page.on('request', (r) => {
    if (!r.url().startsWith(gw.adminUrl)) foreign.push(r.url());
  });
  const res = await page.goto(`${gw.adminUrl}/`);
  t.equal(res?.status(), 200, 'GET / answers 200');
  t.match(res?.headers()['content-type'], /^text\/html/, 'as HTML');
  t.equal(await page.title(), 'infergate status', 'its title');

  for (const ep of mocks.endpoints) {
    await page.waitForSelector(`tr[data-endpoint="${ep}"][data-state="live"]`, { timeout: 10_000 });
    t.pass(`a row for ${ep}, live`);
  }
  await page.waitForFunction(() => document.getElementById('readiness')?.textContent === 'ready', null, { timeout: 10_000 });
  t.pass('the summary says ready');
  t.equal(await shownInFlight(page), 0, 'nothing in flight before the load');

  // load: streams of about 150 decode steps (3 s)
  const load = Array.from({ length: 4 }, (_, i) =>
    chat(gw.url, { model: 'test-model', stream: true, max_tokens: 150, messages: [{ role: 'user', content: `load ${i}` }] }),
  );
  await page.waitForFunction(
    () => [...document.querySelectorAll('tr[data-endpoint] td.in-flight')].reduce((a, td) => a + Number(td.textContent), 0) > 0,
    null,
    { timeout: 10_000 },
  );
  const during = await shownInFlight(page);
  t.ok(during > 0 && during <= 4, `under load the page shows ${during} in flight`);
  await page.screenshot({ path: join(dir, 'status-page-under-load.png'), fullPage: true });
  const done = await Promise.all(load);
  t.ok(done.every((r) => r.complete), 'the load completed');
  await page.waitForFunction(
    () => [...document.querySelectorAll('tr[data-endpoint] td.in-flight')].reduce((a, td) => a + Number(td.textContent), 0) === 0,
    null,
    { timeout: 10_000 },
  );
  t.pass('after the load the page shows nothing in flight again');

  const decisions = await page.$$eval('#decisions tr.decision', (rows) => rows.length);
  t.ok(decisions >= 4, `the decisions table lists the picks (${decisions} rows)`);

  // freeze one mock's /metrics: its signals age past stale_after
  const [frozen, other] = mocks.endpoints;
  const r = await fetch(`http://${frozen}/mock/faults`, { method: 'POST', body: JSON.stringify({ metrics: 'hang' }) });
  t.equal(r.status, 200, 'the mock\'s metrics hang now');
  t.teardown(() => fetch(`http://${frozen}/mock/faults`, { method: 'POST', body: JSON.stringify({ metrics: 'ok' }) }).then(() => undefined, () => undefined));
  await page.waitForSelector(`tr[data-endpoint="${frozen}"][data-state="stale"]`, { timeout: 10_000 });
  t.pass(`${frozen} turns stale on the page`);
  const ageText = await page.textContent(`tr[data-endpoint="${frozen}"] td.age`);
  t.match(ageText, /\d+(\.\d)? s$|\d+ ms$/, `its signals' age is shown (${ageText})`);
  t.equal(await page.getAttribute(`tr[data-endpoint="${other}"]`, 'data-state'), 'live', `${other} stays live`);
  await until(async () => (await page.textContent('#updated'))?.startsWith('updated'), 5_000, 'a fresh refresh');
  await page.screenshot({ path: join(dir, 'status-page.png'), fullPage: true });
  t.comment(`screenshots in ${dir}`);
  t.same(foreign, [], 'the page fetched nothing from anywhere but the admin port');
  await page.close();
});
