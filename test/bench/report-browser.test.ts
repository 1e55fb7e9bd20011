// The policy report as a person opens it: `infergate simulate --html` from a real (small) run, loaded in
// Debian's chromium through playwright-core at a laptop's 1280 px: it renders, the verdict is on top and
// names a candidate, the colours mark best/worst, the CDF has labelled ticks, and nothing overflows sideways.
// Leaves a screenshot in the test's fixture folder under .tap/fixtures/.
import t from 'tap';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';
import { simulateMain } from '../../src/sim/index.js';
import { skipWithout } from '../helpers/tools.js';

const CHROMIUM = '/usr/bin/chromium';
const skip = skipWithout('chromium', existsSync(CHROMIUM), `apt-get install -y chromium for ${CHROMIUM} (.ci/run does it)`);

t.test('simulate --html opens in Chromium: verdict, colours, ticks, no horizontal overflow at 1280 px', { saveFixture: true, skip }, async (t) => {
  const dir = t.testdir();
  const html = join(dir, 'report.html');
  let errs = '';
  const code = await simulateMain(
    ['--generate', 'burst', '--requests', '200', '--rate-scale', '6', '--endpoints', '3', '--slo-ttft', '1s', '--html', html],
    { out: () => undefined, err: (s) => void (errs += s) },
  );
  t.equal(code, 0, errs);
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update'],
  });
  t.teardown(() => browser.close());
  const page = await browser.newPage({ viewport: { width: 1280, height: 800 } });
  const foreign: string[] = [];
  page.on('request', (r) => {
    if (!r.url().startsWith('file:')) foreign.push(r.url());
  });
  await page.goto(pathToFileURL(html).href);

  const verdict = page.locator('#verdict');
  t.ok(await verdict.isVisible(), 'the verdict is visible');
  const text = (await verdict.textContent()) ?? '';
  t.match(text, /^(round_robin|least_request|random|scored) (wins on goodput at TTFT ≤ 1 s, ITL ≤ 100 ms|and \w+ tie)/, `verdict: ${text}`);
  t.notMatch(text, /^oracle/, 'the yardstick is never the winner');
  const box = await verdict.boundingBox();
  t.ok(box && box.y < 120, 'the verdict is at the top of the page');

  const overflow = await page.evaluate(() => ({ doc: document.documentElement.scrollWidth, view: window.innerWidth }));
  t.ok(overflow.doc <= overflow.view, `no horizontal overflow (page ${overflow.doc} px wide in a ${overflow.view} px window)`);
  const fit = await page.$$eval('div.wide', (ds) => ds.map((d) => [d.scrollWidth, d.clientWidth]));
  t.ok(fit.length >= 1 && fit.every(([sw, cw]) => sw <= cw), `every table fits its column without scrolling (${JSON.stringify(fit)})`);

  t.ok((await page.locator('td.better').count()) > 0, 'best values are marked');
  t.ok((await page.locator('td.worse').count()) > 0, 'worst values are marked');
  const better = await page.locator('td.better').first().evaluate((el) => getComputedStyle(el).backgroundColor);
  const worse = await page.locator('td.worse').first().evaluate((el) => getComputedStyle(el).backgroundColor);
  t.not(better, worse, `better (${better}) and worse (${worse}) look different`);

  const ticks = await page.$$eval('svg[aria-label^="TTFT CDF"] text', (ts) => ts.map((x) => x.textContent ?? ''));
  t.ok(ticks.filter((s) => /^[\d.]+[kM]?$/.test(s)).length >= 6, `the CDF's axes carry numbers (${ticks.slice(0, 12).join(' ')})`);
  t.same(foreign, [], 'nothing is fetched from anywhere');
  await page.screenshot({ path: join(dir, 'report-1280.png'), fullPage: true });
  t.comment(`screenshot in ${dir}`);
});
