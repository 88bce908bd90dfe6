// The browsable API in a real headless browser (Debian's chromium, driven by playwright-core;
// no browser download): sign in with the form of /api/docs/, use Swagger UI's "Try it out" on a
// read and on a write (which needs the session's CSRF token), sign out; and a page of another
// origin on the same site (so the SameSite cookie is sent) cannot make the browser write.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import test from 'ava';
import { chromium, type Browser, type Page } from 'playwright-core';
import { BROWSER_TESTS, CHROMIUM, chromiumMissing, startTestServer, type TestServer } from './helpers.ts';
import { FIXTURE_PASSWORD, makeUser, sql } from './site-fixtures.ts';

const maybe = BROWSER_TESTS ? test : test.skip;
const why = chromiumMissing ?? '';

let s: TestServer;
let browser: Browser;
let root: string;

test.before(async () => {
  if (!BROWSER_TESTS) return;
  s = await startTestServer();
  root = (await s.login()).access;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox'] });
});
test.after.always(async () => {
  await browser?.close();
  await s?.close();
});

/**
 * Opens an operation of Swagger UI by its deep link (Swagger UI renders only the tags in view),
 * presses "Try it out", optionally sets the JSON body, executes: the status Swagger UI shows.
 */
async function tryItOut(page: Page, tag: string, operationId: string, body?: unknown): Promise<string> {
  await page.goto('about:blank');
  await page.goto(`${s.url}/api/docs/#/${tag}/${operationId}`);
  const op = page.locator(`#operations-${tag}-${operationId}`);
  await op.locator('.try-out__btn').click();
  if (body !== undefined) await op.locator('textarea.body-param__text').fill(JSON.stringify(body));
  await op.locator('button.execute').click();
  const status = op.locator('.live-responses-table tr.response .response-col_status').first();
  await status.waitFor({ state: 'visible' });
  return ((await status.textContent()) ?? '').trim();
}

maybe(`sign in at /api/docs/, "Try it out" a read and a write with the session, sign out${why}`, async (t) => {
  const user = await makeUser(s, root);
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${s.url}/api/docs/`);
  t.is(await tryItOut(page, 'profile', 'profile_retrieve'), '401', 'signed out: the API refuses');
  await page.locator('#session-signin').waitFor({ state: 'visible' });

  await page.fill('#session-username', user.username);
  await page.fill('#session-password', 'wrong-password');
  await page.click('#session-submit');
  await t.notThrowsAsync(page.locator('#session-error', { hasText: 'No active account found with the given credentials.' }).waitFor());
  await page.fill('#session-password', FIXTURE_PASSWORD);
  await page.click('#session-submit');
  await page.locator('#session-user').waitFor({ state: 'visible' });
  t.is(await page.textContent('#session-name'), user.username);

  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'sessionid');
  t.like(session, { httpOnly: true, sameSite: 'Strict', path: '/' });
  t.false((await page.evaluate<string>('document.cookie')).includes('sessionid'), 'page scripts cannot read the session cookie');

  t.is(await tryItOut(page, 'profile', 'profile_retrieve'), '200');
  t.is(await tryItOut(page, 'profile', 'profile_update', { first_name: 'Browsed' }), '200', 'the write carries the CSRF token');
  t.is((await sql(s, 'SELECT first_name FROM public.users WHERE uuid = ?', [user.uuid]))[0].first_name, 'Browsed');

  // A new page load keeps the session (the page asks the server who is signed in).
  await page.locator('#session-user').waitFor({ state: 'visible' });
  t.is(await page.textContent('#session-name'), user.username);

  const signedOut = page.waitForResponse((r) => r.url().endsWith('/api/auth/session/') && r.request().method() === 'DELETE');
  await page.click('#session-signout');
  const answer = await signedOut;
  t.true(answer.ok(), `sign-out answered ${answer.status()}: ${await answer.text()}`);
  await page.locator('#session-signin').waitFor({ state: 'visible' });
  t.false((await context.cookies()).some((c) => c.name === 'sessionid'), 'sign-out clears the cookie');
  t.is((await sql(s, 'SELECT count(*)::int AS n FROM public.sessions WHERE user_uuid = ?', [user.uuid]))[0].n, 0);
  t.is(await tryItOut(page, 'profile', 'profile_retrieve'), '401');
  await context.close();
});

maybe(`a page of another origin cannot write with the signed-in browser's session${why}`, async (t) => {
  const user = await makeUser(s, root);
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(`${s.url}/api/docs/`);
  await page.fill('#session-username', user.username);
  await page.fill('#session-password', FIXTURE_PASSWORD);
  await page.click('#session-submit');
  await page.locator('#session-user').waitFor({ state: 'visible' });

  // Another port of the same address: another origin but the same site, so the browser does
  // send the SameSite=Strict cookie; the Origin and CSRF checks must stop the write.
  const target = `${s.url}/api/cloud/organizations/`;
  const evil = http.createServer((_req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end(`<form id="f" method="POST" action="${target}"><input name="name" value="Evil Corp"></form><script>document.getElementById('f').submit()</script>`);
  });
  await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
  try {
    const answered = page.waitForResponse((r) => r.url() === target);
    await page.goto(`http://127.0.0.1:${(evil.address() as AddressInfo).port}/`);
    const res = await answered;
    t.is(res.status(), 403);
    t.regex(await res.text(), /CSRF Failed: Origin/);
    t.truthy((await res.request().allHeaders()).cookie?.includes('sessionid='), 'the cookie did go along (same site)');
  } finally {
    await new Promise((resolve) => evil.close(resolve));
  }
  t.is((await sql(s, "SELECT count(*)::int AS n FROM public.organizations WHERE name = 'Evil Corp'"))[0].n, 0);
  await context.close();
});
