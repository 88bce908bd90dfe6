// A deployed single-page app in a real headless browser (Debian's chromium through playwright-core,
// issue 31): loaded through its worker host (`*.localhost` resolves to this machine), a
// client-side route followed (history.pushState), a deep link to that route reloaded (the SPA
// fallback), an asset fetched by the app's script, and a preview address serving another build.
import test from 'ava';
import { chromium, type Browser } from 'playwright-core';
import type { TestSite } from '../../shared/testing/sites.ts';
import { BROWSER_TESTS, CHROMIUM, chromiumMissing, request, startTestServer, type TestServer } from './helpers.ts';
import { twoSitesWithUsers } from './site-users.ts';
import { multipart, zipOf } from './worker-fixtures.ts';

const maybe = BROWSER_TESTS ? test : test.skip;
const why = chromiumMissing ?? '';

let s: TestServer;
let a: TestSite;
let browser: Browser;
const tok: Record<string, string> = {};

const app = (version: string) => ({
  'index.html': `<!doctype html><html><head><meta charset="utf-8"><title>Shop</title><script type="module" src="/assets/main-5e8d2c1a.js"></script></head>
<body><nav><a id="home" href="/">Home</a> <a id="about" href="/about">About</a></nav><main id="view"></main><p id="data"></p><p id="version">${version}</p></body></html>`,
  'assets/main-5e8d2c1a.js': `
const view = document.getElementById('view');
const render = () => { view.textContent = location.pathname === '/about' ? 'About page' : 'Home page'; };
document.addEventListener('click', (e) => {
  const a = e.target.closest('a');
  if (!a) return;
  e.preventDefault();
  history.pushState(null, '', a.getAttribute('href'));
  render();
});
window.addEventListener('popstate', render);
render();
fetch('/data/products.json').then((r) => r.json()).then((d) => { document.getElementById('data').textContent = d.products.join(', '); });
`,
  'data/products.json': JSON.stringify({ products: ['apples', 'pears'] }),
});

async function deploy(fields: Record<string, string>, version: string, path = '/api/frontend_workers/') {
  const { raw, headers } = multipart(fields, { filename: `shop-${version}.zip`, bytes: zipOf(app(version)) });
  const r = await request(s.url, 'POST', path, { host: a.domain, token: tok.adminA, raw, headers });
  if (r.status !== 201) throw new Error(r.text);
  return r.body.data;
}

test.before(async () => {
  if (!BROWSER_TESTS) return;
  s = await startTestServer();
  ({ a } = await twoSitesWithUsers(s, tok));
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
test.after.always(async () => {
  await browser?.close();
  await s?.close();
});

maybe(`a single-page app through its host: a client-side route, a deep link, an asset, a preview${why}`, async (t) => {
  const worker = await deploy({ name: 'Shop', subdomain_input: 'browser-shop', set_active: 'true' }, 'v1');
  const next = await deploy({}, 'v2', '/api/frontend_workers/browser-shop/builds/');
  const page = await (await browser.newContext()).newPage();
  // The test server listens on a port of its own (PORT=0): the addresses with that port.
  const at = (url: string) => Object.assign(new URL(url), { port: new URL(s.url).port }).toString();
  worker.web_url = at(worker.web_url);
  next.preview_url = at(next.preview_url);

  await page.goto(worker.web_url);
  await page.locator('#view', { hasText: 'Home page' }).waitFor();
  await page.locator('#data', { hasText: 'apples, pears' }).waitFor();
  t.is(await page.textContent('#version'), 'v1');

  await page.click('#about');
  await page.locator('#view', { hasText: 'About page' }).waitFor();
  t.is(new URL(page.url()).pathname, '/about');

  const deep = await page.goto(new URL('/about', worker.web_url).toString());
  t.is(deep?.status(), 200, 'the SPA fallback serves index.html for the route');
  await page.locator('#view', { hasText: 'About page' }).waitFor();

  const asset = await page.goto(new URL('/assets/main-5e8d2c1a.js', worker.web_url).toString());
  t.regex(asset?.headers()['content-type'] ?? '', /javascript/);

  await page.goto(next.preview_url);
  await page.locator('#view', { hasText: 'Home page' }).waitFor();
  t.is(await page.textContent('#version'), 'v2', 'the preview serves the new build');
  await page.goto(worker.web_url);
  t.is(await page.textContent('#version'), 'v1', 'the active build is unchanged');
});
