// The serving contract (serving.ts header): methods, path decoding and resolution, the order of
// rules, files, SPA fallback and 404.html, headers, encoding negotiation, ETag/304, hashed assets,
// the manifest builder, the no-build answer, and deploy-time precompression.
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { DomainError } from '../errors.ts';
import { compressible, precompress } from './precompress.ts';
import { buildManifest, isHashedAsset, plan, planWithoutBuild, type BuildFile, type Manifest, type ServeOptions, type ServePlan, type ServeRequest } from './serving.ts';

const sha = (c: string) => c.repeat(64);
const f = (c: string, type: string, extra: Partial<BuildFile> = {}): BuildFile => ({ sha256: sha(c), size: 1000, type, ...extra });

const FILES: [string, BuildFile][] = [
  ['index.html', f('a', 'text/html')],
  ['about.html', f('b', 'text/html')],
  ['docs/index.html', f('c', 'text/html')],
  ['docs/guide', f('d', 'text/plain')],
  ['old', f('e', 'text/plain')],
  ['forced', f('1', 'text/plain')],
  ['assets/app-3f9a1b2c.js', f('2', 'application/javascript', { br: 300, gz: 400 })],
  ['assets/logo.png', f('3', 'image/png')],
  ['café.txt', f('4', 'text/plain; charset=iso-8859-1')],
  ['a b/c.txt', f('5', 'text/plain')],
  ['new.html', f('6', 'text/html')],
  ['404.html', f('7', 'text/html', { gz: 100 })],
  ['special-404.html', f('8', 'text/html')],
  ['gone.html', f('9', 'text/html')],
  ['_redirects', f('f', 'text/plain')],
];
const REDIRECTS = [
  '/old /new 301', // shadowed: the file `old` exists
  '/forced /new 302!', // wins over the file `forced`
  '/blog/* /news/:splat 301',
  '/app/* /index.html 200',
  '/rewrite /new 200',
  '/missing-target /nothing 200',
  '/special /special-404.html 404',
  '/retired /gone.html 410',
  '/vanished /nothing 410',
  '/ext https://example.com/x 308',
].join('\n');
const HEADERS = ['/*', '  X-Frame-Options: DENY', '/assets/*', '  X-Robots-Tag: all', '  Vary: Origin', '/docs/*', '  Content-Type: text/markdown', '  Cache-Control: max-age=5'].join('\n');

const manifest: Manifest = buildManifest(new Map(FILES), { redirects: REDIRECTS, headers: HEADERS });
const SITE: ServeOptions = { spa: false, preview: false };
const get = (path: string, more: Partial<ServeRequest> = {}, options: ServeOptions = SITE, m: Manifest = manifest): ServePlan =>
  plan(m, { method: 'GET', path, ...more }, options);
/** What the plan sends: the file's SHA-256 initial, a redirect's location, or an empty answer's status. */
const served = (p: ServePlan) =>
  p.kind === 'file' ? `${p.status} ${p.file.sha256[0]}` : p.kind === 'redirect' ? `${p.status} ${p.location}` : p.kind === 'empty' ? `${p.status}` : '304';

test('only GET and HEAD; HEAD is the same plan with head: true', (t) => {
  const post = plan(manifest, { method: 'POST', path: '/' }, SITE);
  t.like(post, { kind: 'empty', status: 405, headers: { Allow: 'GET, HEAD' } });
  const head = plan(manifest, { method: 'HEAD', path: '/' }, SITE);
  t.deepEqual(head, { ...get('/'), head: true } as ServePlan);
  t.like(head, { kind: 'file', head: true });
});

test('paths: decoded once, index.html, x → x, x.html, x/index.html; bad paths 400', (t) => {
  t.is(served(get('/')), '200 a');
  t.is(served(get('/about')), '200 b');
  t.is(served(get('/about.html')), '200 b');
  t.is(served(get('/docs')), '200 c');
  t.is(served(get('/docs/')), '200 c');
  t.is(served(get('/docs/guide')), '200 d');
  t.is(served(get('/caf%C3%A9.txt')), '200 4');
  t.is(served(get('/a%20b/c.txt')), '200 5');
  t.is(served(get('/a%2520b/c.txt')), '404 7', 'decoded once only');
  for (const bad of ['/../index.html', '/docs/%2e%2e/index.html', '/a%00', '/a%5Cb', '/a\\b', '/%E0%A4%A', 'index.html']) {
    t.like(get(bad), { kind: 'empty', status: 400 }, bad);
  }
  t.is(served(get('/constructor')), '404 7', 'own keys only');
  t.is(served(get('/_redirects')), '404 7', 'rule files are not served');
});

test('order: forced rules, then files, then other rules; rewrites, 404 and 410 rules', (t) => {
  t.is(served(get('/old')), '200 e', 'a file shadows a non-forced redirect');
  t.is(served(get('/forced')), '302 /new', 'a forced rule wins over the file');
  t.is(served(get('/blog/2024/post')), '301 /news/2024/post');
  t.is(served(get('/app/settings/profile')), '200 a', '200 rewrite');
  t.is(served(get('/rewrite')), '200 6', 'the target resolves like a path (new → new.html)');
  t.is(served(get('/missing-target')), '404 7', 'a rewrite to nothing is the 404 page');
  t.is(served(get('/special')), '404 8');
  t.is(served(get('/retired')), '410 9');
  t.is(served(get('/vanished')), '410');
  t.like(get('/ext'), { kind: 'redirect', status: 308, location: 'https://example.com/x', headers: { Location: 'https://example.com/x' } });
  // One level only: a rewrite's target is not matched against the rules again.
  const chain = buildManifest(new Map([['b.txt', f('b', 'text/plain')]]), { redirects: '/a /b 200\n/b /b.txt 200' });
  t.is(served(get('/a', {}, SITE, chain)), '404');
  t.is(served(get('/b', {}, SITE, chain)), '200 b');
});

test('SPA fallback for extension-less paths, 404.html otherwise, else an empty 404', (t) => {
  const spa = { spa: true, preview: false };
  t.is(served(get('/users/42', {}, spa)), '200 a');
  t.is(served(get('/users/', {}, spa)), '200 a');
  t.is(served(get('/.well-known', {}, spa)), '200 a');
  t.is(served(get('/assets/missing-1234abcd.js', {}, spa)), '404 7', 'an asset is not the app');
  t.is(served(get('/users/42')), '404 7', 'no fallback without spa');
  const bare = buildManifest(new Map([['x.txt', f('x', 'text/plain')]]), {});
  t.like(get('/users', {}, spa, bare), { kind: 'empty', status: 404, message: 'Not found.' }, 'no index.html: no fallback');
  const notFound = get('/nope', { acceptEncoding: 'gzip' });
  t.like(notFound, { kind: 'file', status: 404, encoding: 'gzip', headers: { 'Cache-Control': 'no-cache', 'Content-Length': '100' } });
  t.false('ETag' in (notFound as { headers: object }).headers);
  t.is(served(get('/nope', { ifNoneMatch: '*' })), '404 7', 'conditions apply to 200s only');
});

test('file headers: type and charset, length, nosniff, cache classes, _headers, preview', (t) => {
  t.deepEqual(get('/').headers, {
    'Content-Type': 'text/html; charset=utf-8',
    'Content-Length': '1000',
    ETag: `"${'a'.repeat(32)}"`,
    'Cache-Control': 'no-cache',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
  });
  t.like(get('/caf%C3%A9.txt').headers, { 'Content-Type': 'text/plain; charset=iso-8859-1', 'Cache-Control': 'public, max-age=0, must-revalidate' });
  t.like(get('/assets/logo.png').headers, { 'Content-Type': 'image/png', 'X-Robots-Tag': 'all' });
  t.deepEqual(get('/assets/app-3f9a1b2c.js').headers, {
    'Content-Type': 'application/javascript; charset=utf-8',
    'Content-Length': '1000',
    ETag: `"${'2'.repeat(32)}"`,
    Vary: 'Accept-Encoding, Origin',
    'Cache-Control': 'public, max-age=31536000, immutable',
    'X-Content-Type-Options': 'nosniff',
    'X-Frame-Options': 'DENY',
    'X-Robots-Tag': 'all',
  });
  t.like(get('/docs/guide').headers, { 'Content-Type': 'text/markdown', 'Cache-Control': 'max-age=5' }, '_headers override');
  // A preview is never indexed, whatever _headers says.
  t.like(get('/assets/logo.png', {}, { spa: false, preview: true }).headers, { 'X-Robots-Tag': 'noindex' });
  t.like(get('/forced', {}, { spa: false, preview: true }).headers, { 'X-Robots-Tag': 'noindex' });
  t.like(get('/nothing-here.txt', {}, { spa: false, preview: true }, buildManifest(new Map(), {})).headers, { 'X-Robots-Tag': 'noindex' });
});

test('hashed assets: Vite and webpack names yes, plain names, dates and words no', (t) => {
  for (const yes of ['app-3f9a1b2c.js', 'assets/main.8c2d4e1f.css', 'index-D-5qL0aA.js', 'x/chunk.3f9a1b2c4d5e6f7a8b9c.js', 'font-Ab_12cDe.woff2']) t.true(isHashedAsset(yes), yes);
  for (const no of ['app.js', 'logo.png', 'report-20240101.pdf', 'component-name1.js', 'my-long-component-name.js', '3f9a1b2c.js', '-3f9a1b2c.js', 'app-3f9a1b2.js', 'app-3f9a1b2c', 'app-3f9a1b2c.']) {
    t.false(isHashedAsset(no), no);
  }
});

test('encoding negotiation: q-values, *, variants that exist, br on a tie', (t) => {
  const enc = (acceptEncoding?: string, path = '/assets/app-3f9a1b2c.js') => {
    const p = get(path, { acceptEncoding });
    return p.kind === 'file' ? [p.encoding, p.headers['Content-Encoding'], p.headers['Content-Length'], p.headers.ETag] : p.kind;
  };
  const h = '2'.repeat(32);
  t.deepEqual(enc('gzip, deflate, br'), ['br', 'br', '300', `"${h}-br"`]);
  t.deepEqual(enc('gzip'), ['gzip', 'gzip', '400', `"${h}-gz"`]);
  t.deepEqual(enc('br;q=0.5, gzip;q=0.8'), ['gzip', 'gzip', '400', `"${h}-gz"`]);
  t.deepEqual(enc('br;q=0, gzip;q=0'), [null, undefined, '1000', `"${h}"`]);
  t.deepEqual(enc('*'), ['br', 'br', '300', `"${h}-br"`]);
  t.deepEqual(enc('*;q=0.1, br;q=0'), ['gzip', 'gzip', '400', `"${h}-gz"`]);
  t.deepEqual(enc('X-GZIP'), ['gzip', 'gzip', '400', `"${h}-gz"`]);
  t.deepEqual(enc('identity'), [null, undefined, '1000', `"${h}"`]);
  t.deepEqual(enc(undefined), [null, undefined, '1000', `"${h}"`]);
  t.deepEqual(enc('br;q=bogus, gzip'), ['gzip', 'gzip', '400', `"${h}-gz"`]);
  t.deepEqual(enc('br, gzip', '/assets/logo.png').slice(0, 2), [null, undefined], 'no variant stored');
  t.is(get('/assets/logo.png').headers.Vary, 'Origin', 'no variant: only the Vary of _headers');
  t.false('Vary' in get('/about').headers);
});

test('If-None-Match: the chosen variant, lists, weak comparison, * → 304 with ETag, Cache-Control, Vary', (t) => {
  const h = '2'.repeat(32);
  const path = '/assets/app-3f9a1b2c.js';
  const expected = { kind: 'not-modified', headers: { ETag: `"${h}-br"`, 'Cache-Control': 'public, max-age=31536000, immutable', Vary: 'Accept-Encoding, Origin', 'X-Robots-Tag': 'all' } };
  t.deepEqual(get(path, { acceptEncoding: 'br', ifNoneMatch: `"${h}-br"` }), expected);
  t.deepEqual(get(path, { acceptEncoding: 'br', ifNoneMatch: `"x", W/"${h}-br"` }), expected);
  t.deepEqual(get(path, { acceptEncoding: 'br', ifNoneMatch: '*' }), expected);
  t.like(get(path, { acceptEncoding: 'br', ifNoneMatch: `"${h}-gz"` }), { kind: 'file', encoding: 'br' }, 'another variant’s tag');
  t.like(get(path, { ifNoneMatch: `"${h}-br"` }), { kind: 'file', encoding: null });
  t.like(get(path, { ifNoneMatch: `"${h}"` }), { kind: 'not-modified' });
  t.like(get(path, { ifNoneMatch: `bogus, "${h}"` }), { kind: 'not-modified' });
  t.like(get(path, { ifNoneMatch: `"${h}` }), { kind: 'file' }, 'unterminated');
  t.like(plan(manifest, { method: 'HEAD', path, ifNoneMatch: `"${h}"` }, { spa: false, preview: true }), {
    kind: 'not-modified',
    headers: { 'X-Robots-Tag': 'noindex' },
  });
});

test('buildManifest: rule files parsed and left out; bad paths and bad rules refused', (t) => {
  t.false(Object.hasOwn(manifest.files, '_redirects'));
  t.is(manifest.redirects.length, 10);
  t.is(manifest.headers.length, 3);
  const nested = buildManifest(new Map([['sub/_headers', f('1', 'text/plain')], ['__proto__', f('2', 'text/plain')]]), {});
  t.deepEqual(Object.keys(nested.files), ['sub/_headers', '__proto__']);
  t.is(served(get('/__proto__', {}, SITE, JSON.parse(JSON.stringify(nested)) as Manifest)), '200 2');
  for (const bad of ['/abs', 'a//b', 'a/../b', './a', 'a\\b', '']) {
    const err = t.throws(() => buildManifest(new Map([[bad, f('1', 'text/plain')]]), {}), { instanceOf: DomainError }, bad);
    t.truthy(err?.errors?.files);
  }
  const err = t.throws(() => buildManifest(new Map(), { redirects: '/a https://x.example 200' }), { instanceOf: DomainError });
  t.regex(err!.errors!.file![0]!, /^_redirects line 1: /);
});

test('no active build: an uncached, unindexed 404 (405 for other methods)', (t) => {
  t.like(planWithoutBuild({ method: 'GET', path: '/anything' }), {
    kind: 'empty',
    status: 404,
    headers: { 'Cache-Control': 'no-store', 'X-Robots-Tag': 'noindex', 'Content-Type': 'text/plain; charset=utf-8' },
  });
  t.like(planWithoutBuild({ method: 'DELETE', path: '/' }), { kind: 'empty', status: 405, headers: { Allow: 'GET, HEAD' } });
});

test('precompress: text of 1 KiB or more gets br and gz that round-trip; images, small or incompressible data none', async (t) => {
  const text = Buffer.from('<p>Hello, frontend worker.</p>\n'.repeat(100));
  const { br, gz } = await precompress(text, 'text/html; charset=utf-8');
  t.deepEqual(brotliDecompressSync(br!), text);
  t.deepEqual(gunzipSync(gz!), text);
  t.true(br!.length < text.length * 0.95 && gz!.length < text.length * 0.95);
  t.deepEqual(await precompress(text, 'image/png'), {});
  t.deepEqual(await precompress(text.subarray(0, 1023), 'text/html'), {});
  t.deepEqual(await precompress(randomBytes(4096), 'application/javascript'), {}, 'random bytes do not shrink by 5 %');
  for (const yes of ['text/css', 'application/javascript', 'application/json', 'application/ld+json', 'image/svg+xml', 'application/wasm', 'application/manifest+json', 'font/ttf', 'font/otf', 'Application/XML']) {
    t.true(compressible(yes), yes);
  }
  for (const no of ['image/png', 'image/jpeg', 'image/webp', 'video/mp4', 'application/zip', 'font/woff2', 'font/woff', 'application/octet-stream']) t.false(compressible(no), no);
});
