// Frontend workers over HTTP (issue 31): the routes of spec Part 3 §4 and ours (detail, builds,
// activate, delete), each archive format, builds that store only what changed, previews,
// serving (types, ETag, compression, SPA fallback, 404.html), atomic switching under load,
// hostile archives refused with nothing written, one namespace of hosts with the sites'
// domains, the app setting default_frontend_worker, and tenant isolation.
import { createHash } from 'node:crypto';
import http from 'node:http';
import { brotliDecompressSync } from 'node:zlib';
import test from 'ava';
import AdmZip from 'adm-zip';
import type { TestSite } from '../../shared/testing/sites.ts';
import { request, startTestServer, type TestServer } from './helpers.ts';
import { seedCrm } from './crm.ts';
import { twoSitesWithUsers } from './site-users.ts';
import { makeOrg } from './site-fixtures.ts';
import { multipart, spaSite, tarOf, zipOf } from './worker-fixtures.ts';

let s: TestServer;
let a: TestSite;
let b: TestSite;
const tok: Record<string, string> = {};
const W = '/api/frontend_workers/';

const on = (site: TestSite, method: string, path: string, body?: unknown, token = tok.adminA) => s.api(method, path, { host: site.domain, token, body });
const onA = (method: string, path: string, body?: unknown, token?: string) => on(a, method, path, body, token);
const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);

/** A multipart upload to site A (create or new build). */
function upload(path: string, fields: Record<string, string>, file?: { filename: string; bytes: Buffer }, site = a, token = tok.adminA) {
  const { raw, headers } = multipart(fields, file);
  return request(s.url, 'POST', path, { host: site.domain, token, raw, headers });
}

/** A request to a worker's host: status, headers and the raw bytes. */
function visit(host: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: Buffer }> {
  const url = new URL(path, s.url);
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { ...headers, Host: host }, agent: false }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    });
    req.on('error', reject);
    req.end();
  });
}

const blobCount = async (site: TestSite) => Number((await sql(`SELECT count(*)::int AS n FROM "${site.schema}".frontend_worker_blobs WHERE stored`))[0].n);

test.before(async () => {
  s = await startTestServer();
  ({ a, b } = await twoSitesWithUsers(s, tok));
  await seedCrm(s, [a, b]);
});
test.after.always(async () => {
  await s?.close();
});

test.serial('create from a zip with set_active: the envelope, the list, the detail; the site serves at its host', async (t) => {
  const made = await upload(W, { name: 'Shop Front', subdomain_input: 'shop', set_active: 'true' }, { filename: 'shop-v1.zip', bytes: zipOf(spaSite('v1')) });
  t.is(made.status, 201, made.text);
  t.like(made.body, { success: true, status_code: 201, data: { slug: 'shop', name: 'Shop Front', subdomain: 'shop', full_domain: 'shop.localhost', is_internal: true, domain: null, app: null } });
  t.is(made.body.data.build.title, 'shop-v1', 'rule 6: the title from the file name');
  t.is(made.body.data.build.status, 'ready');
  t.is(made.body.data.build.file_count, 4);
  t.is(made.body.data.active_build_uuid, made.body.data.build.uuid, 'rule 7');
  t.regex(made.body.data.web_url, /^http:\/\/shop\.localhost:\d+\/$/);

  const list = await onA('GET', `${W}?search=front`);
  t.is(list.status, 200);
  t.like(list.body, { success: true, status_code: 200, total: 1, page: 1, page_size: 20, total_pages: 1 });
  t.deepEqual(Object.keys(list.body.data[0]).sort(), ['active_build_uuid', 'app_name', 'name', 'slug', 'subdomain', 'web_url']);
  t.is((await onA('GET', `${W}?search=nothing-like-it`)).body.total, 0);

  const home = await visit('shop.localhost', '/');
  t.is(home.status, 200);
  t.regex(String(home.headers['content-type']), /^text\/html/);
  t.is(home.headers['cache-control'], 'no-cache');
  t.regex(home.body.toString(), /Shop v1/);
  const asset = await visit('shop.localhost', '/assets/app-3f9a1b2c.js');
  t.regex(String(asset.headers['content-type']), /javascript/);
  t.regex(String(asset.headers['cache-control']), /immutable/);
  const again = await visit('shop.localhost', '/assets/app-3f9a1b2c.js', { 'If-None-Match': String(asset.headers.etag) });
  t.is(again.status, 304);
  const br = await visit('shop.localhost', '/assets/app-3f9a1b2c.js', { 'Accept-Encoding': 'gzip, br' });
  t.is(br.headers['content-encoding'], 'br');
  t.deepEqual(brotliDecompressSync(br.body), asset.body);
  t.not(br.headers.etag, asset.headers.etag);

  const route = await visit('shop.localhost', '/orders/42');
  t.is(route.status, 200, 'SPA fallback: a path without an extension serves index.html');
  t.regex(route.body.toString(), /Shop v1/);
  const missing = await visit('shop.localhost', '/nothing.png');
  t.is(missing.status, 404);
  t.regex(missing.body.toString(), /Missing v1/, 'the build\'s 404.html');
  const api = await visit('shop.localhost', '/api/frontend_workers/', { Authorization: `Bearer ${tok.adminA}` });
  t.false(api.body.toString().includes('"success"'), 'a worker host never serves the API');
  t.is((await visit('shop.localhost', '/', {}, 'POST')).status, 405);
});

test.serial('each archive format: tar and tar.gz (and .tgz) as further builds; a build stores only the files that changed', async (t) => {
  const before = await blobCount(a);
  const same = await upload(`${W}shop/builds/`, {}, { filename: 'shop-v1.tar', bytes: await tarOf(spaSite('v1'), false) });
  t.is(same.status, 201, same.text);
  t.like(same.body.data, { title: 'shop-v1', status: 'ready', file_count: 4, stored_files: 0, is_active: false });
  t.is(await blobCount(a), before, 'the same files again: nothing stored');

  const changed = { ...spaSite('v1'), 'index.html': '<!doctype html><title>Shop v2</title><div id="app">v2</div>' };
  const v2 = await upload(`${W}shop/builds/`, { build_title: 'Second' }, { filename: 'shop-v2.tar.gz', bytes: await tarOf(changed, true) });
  t.is(v2.status, 201, v2.text);
  t.like(v2.body.data, { title: 'Second', stored_files: 1 });
  t.is(await blobCount(a), before + 1, 'one blob more: the changed file');
  const tgz = await upload(`${W}shop/builds/`, {}, { filename: 'shop.TGZ', bytes: await tarOf(changed, true) });
  t.is(tgz.status, 201, tgz.text);
  t.is(tgz.body.data.stored_files, 0);

  const builds = await onA('GET', `${W}shop/builds/`);
  t.is(builds.body.total, 4);
  t.is(builds.body.data.filter((x: { is_active: boolean }) => x.is_active).length, 1);
});

test.serial('a build by manifest: the site says which contents it lacks, the archive carries only those (or nothing); a manifest naming unknown contents is refused', async (t) => {
  const sha = (text: string | Buffer) => createHash('sha256').update(text).digest('hex');
  const site = spaSite('v1');
  const changed = '<!doctype html><title>Shop v3</title>';
  const manifest = Object.fromEntries(Object.entries({ ...site, 'index.html': changed }).map(([path, content]) => [path, sha(content)]));
  const asked = await onA('POST', `${W}shop/builds/missing/`, { hashes: Object.values(manifest) });
  t.is(asked.status, 200, asked.text);
  t.deepEqual(asked.body.data.missing, [sha(changed)], 'only the changed content');
  const before = await blobCount(a);
  const v3 = await upload(`${W}shop/builds/`, { manifest: JSON.stringify(manifest), build_title: 'By manifest' }, { filename: 'changes.zip', bytes: zipOf({ 'index.html': changed }) });
  t.is(v3.status, 201, v3.text);
  t.like(v3.body.data, { title: 'By manifest', file_count: 4, stored_files: 1, status: 'ready' });
  t.is(await blobCount(a), before + 1);
  t.regex((await visit(new URL(v3.body.data.preview_url).hostname, '/')).body.toString(), /Shop v3/);
  t.regex((await visit(new URL(v3.body.data.preview_url).hostname, '/assets/app-3f9a1b2c.js')).body.toString(), /window.VERSION = "v1"/, 'the held files are part of it');

  const nothing = await upload(`${W}shop/builds/`, { manifest: JSON.stringify(manifest), build_title: 'Nothing sent' });
  t.is(nothing.status, 201, nothing.text);
  t.like(nothing.body.data, { file_count: 4, stored_files: 0 });

  const builds = Number((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".frontend_worker_builds`))[0].n);
  const unknown = await upload(`${W}shop/builds/`, { manifest: JSON.stringify({ ...manifest, 'new.html': sha('never sent') }) });
  t.is(unknown.status, 400);
  t.regex(unknown.body.errors.manifest[0], /new\.html/);
  const lying = await upload(`${W}shop/builds/`, { manifest: JSON.stringify(manifest) }, { filename: 'x.zip', bytes: zipOf({ 'index.html': 'not what the manifest says' }) });
  t.is(lying.status, 400);
  t.regex(lying.body.errors.file[0], /index\.html/);
  for (const bad of ['{"../x": "' + sha('x') + '"}', '{"a.html": "nothex"}', '[1]', 'not json']) {
    const r = await upload(`${W}shop/builds/`, { manifest: bad });
    t.is(r.status, 400, bad);
    t.truthy(r.body.errors.manifest, bad);
  }
  t.is(Number((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".frontend_worker_builds`))[0].n), builds, 'refused builds left no row');
});

test.serial('a preview serves a build before activation; activating switches; the active build cannot be deleted', async (t) => {
  const builds = (await onA('GET', `${W}shop/builds/`)).body.data as { uuid: string; title: string; preview_url: string; is_active: boolean }[];
  const v2 = builds.find((x) => x.title === 'Second')!;
  const previewHost = new URL(v2.preview_url).hostname;
  t.regex(previewHost, /^[0-9a-f]{8}--shop\.localhost$/);
  const preview = await visit(previewHost, '/');
  t.regex(preview.body.toString(), /Shop v2/);
  t.is(preview.headers['x-robots-tag'], 'noindex');
  t.regex((await visit('shop.localhost', '/')).body.toString(), /Shop v1/, 'the active build keeps serving');

  const activated = await onA('POST', `${W}shop/builds/${v2.uuid}/activate/`);
  t.is(activated.status, 200, activated.text);
  t.is(activated.body.data.active_build_uuid, v2.uuid);
  t.regex((await visit('shop.localhost', '/')).body.toString(), /Shop v2/);

  const refused = await onA('DELETE', `${W}shop/builds/${v2.uuid}/`);
  t.is(refused.status, 409);
  t.like(refused.body, { success: false, status_code: 409 });
  const old = builds.find((x) => x.title === 'shop.TGZ'.replace('.TGZ', '') || x.title === 'shop')!;
  t.is((await onA('DELETE', `${W}shop/builds/${old.uuid}/`)).status, 200);
  t.is((await onA('GET', `${W}shop/builds/${old.uuid}/`)).status, 404);
});

test.serial('atomic switching: under concurrent requests each answer is one build\'s, whole', async (t) => {
  const builds = (await onA('GET', `${W}shop/builds/`)).body.data as { uuid: string; title: string }[];
  const v1 = builds.find((x) => x.title === 'shop-v1')!;
  const v2 = builds.find((x) => x.title === 'Second')!;
  const etags = new Map<string, string>();
  let stop = false;
  const seen = { v1: 0, v2: 0 };
  const readers = Array.from({ length: 6 }, async () => {
    while (!stop) {
      const r = await visit('shop.localhost', '/');
      const version = /Shop (v\d)/.exec(r.body.toString())?.[1] as 'v1' | 'v2' | undefined;
      t.truthy(version, r.body.toString());
      seen[version!]++;
      const tag = String(r.headers.etag);
      if (!etags.has(version!)) etags.set(version!, tag);
      t.is(etags.get(version!), tag, 'headers and body come from the same build');
    }
  });
  for (let i = 0; i < 10; i++) t.is((await onA('POST', `${W}shop/builds/${(i % 2 ? v2 : v1).uuid}/activate/`)).status, 200);
  stop = true;
  await Promise.all(readers);
  t.true(seen.v1 > 0 && seen.v2 > 0, JSON.stringify(seen));
});

test.serial('hostile archives are refused with nothing written', async (t) => {
  const blobs = await blobCount(a);
  const workers = Number((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".frontend_workers`))[0].n);
  const escape = new AdmZip();
  escape.addFile('index.html', Buffer.from('ok'));
  escape.addFile('x.txt', Buffer.from('evil'));
  const raw = escape.toBuffer();
  const at = raw.indexOf('x.txt');
  raw.write('../xx', at); // same length: the central directory and the local header name `../xx`
  raw.write('../xx', raw.indexOf('x.txt', at + 1));
  const bomb = new AdmZip();
  bomb.addFile('index.html', Buffer.alloc(60 * 1024 * 1024));
  for (const [filename, bytes, why] of [
    ['escape.zip', raw, /\.\./],
    ['bomb.zip', bomb.toBuffer(), /ratio|compress|large/i],
    ['fake.zip', Buffer.from('not a zip at all'), /./],
    ['site.rar', zipOf(spaSite('x')), /zip|tar/],
  ] as const) {
    const r = await upload(W, { name: `Hostile ${filename}`, subdomain_input: `hostile-${filename.replace(/\W/g, '')}` }, { filename, bytes });
    t.is(r.status, 400, `${filename}: ${r.text}`);
    t.like(r.body, { success: false, status_code: 400 });
    t.regex(r.body.errors.file[0], why);
  }
  const build = await upload(`${W}shop/builds/`, {}, { filename: 'escape.zip', bytes: raw });
  t.is(build.status, 400);
  t.is(await blobCount(a), blobs, 'no blob stored');
  t.is(Number((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".frontend_workers`))[0].n), workers, 'no worker made');
  t.is(Number((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".frontend_worker_builds WHERE status <> 'ready'`))[0].n), 0, 'no build row');
});

test.serial('forms: urlencoded create without a file; rules 2-4 as field errors; a worker with no build', async (t) => {
  const form = await request(s.url, 'POST', W, { host: a.domain, token: tok.adminA, raw: 'name=Blog&subdomain_input=Blog-Site', headers: { 'Content-Type': 'application/x-www-form-urlencoded' } });
  t.is(form.status, 201, form.text);
  t.like(form.body.data, { slug: 'blog-site', subdomain: 'blog-site', active_build_uuid: null, build: null });
  const empty = await visit('blog-site.localhost', '/');
  t.is(empty.status, 404);
  t.regex(empty.body.toString(), /No build is active/);

  for (const [body, field] of [
    [{ name: 'x', subdomain_input: 'ab' }, 'subdomain_input'],
    [{ name: 'x', subdomain_input: '-abc' }, 'subdomain_input'],
    [{ name: 'x', subdomain_input: 'a--b' }, 'subdomain_input'],
    [{ name: 'x', subdomain_input: 'fine-one', domain: 'example-shop.com' }, 'domain'],
    [{ name: 'x', subdomain_input: 'fine-one', is_internal: false }, 'domain'],
    [{ name: 'x', subdomain_input: 'fine-one', is_internal: false, domain: 'customer-shop.com' }, 'domain'],
    [{ name: '', subdomain_input: 'fine-one' }, 'name'],
    [{ name: 'x', subdomain_input: 'shop' }, 'subdomain_input'],
    [{ name: 'x', subdomain_input: a.slug }, 'subdomain_input'],
  ] as const) {
    const r = await onA('POST', W, body);
    t.is(r.status, 400, `${JSON.stringify(body)}: ${r.text}`);
    t.truthy(r.body.errors?.[field], `${JSON.stringify(body)} names ${field}: ${r.text}`);
  }
});

test.serial('availability: free, taken by this site (conflicts_with) or another (no names), suggestions verified free; bad format 400', async (t) => {
  const free = await onA('GET', `${W}check-subdomain-availability/?subdomain=new-shop`);
  t.is(free.status, 200, free.text);
  t.like(free.body.data, { subdomain: 'new-shop', available: true, full_domain: 'new-shop.localhost', domain: 'localhost', is_internal: true });
  const taken = await onA('GET', `${W}check-subdomain-availability/?subdomain=shop`);
  t.like(taken.body.data, { available: false, conflicts_with: { worker_slug: 'shop', worker_name: 'Shop Front' } });
  const suggestions = taken.body.data.suggestions as { subdomain: string; full_domain: string; reason: string }[];
  t.true(suggestions.length > 0 && suggestions.length <= 5);
  t.is(new Set(suggestions.map((x) => x.subdomain)).size, suggestions.length);
  for (const x of suggestions) {
    const check = await onA('GET', `${W}check-subdomain-availability/?subdomain=${x.subdomain}`);
    t.true(check.body.data.available, x.subdomain);
  }
  t.true((await onA('GET', `${W}check-subdomain-availability/?subdomain=shop&exclude_slug=shop`)).body.data.available, 'its own address, excluded');
  const fromB = await on(b, 'GET', `${W}check-subdomain-availability/?subdomain=shop`, undefined, tok.adminB);
  t.false(fromB.body.data.available, 'subdomains are global');
  t.is(fromB.body.data.conflicts_with, undefined, 'another site\'s worker is not named');
  const bad = await onA('GET', `${W}check-subdomain-availability/?subdomain=Bad_Name!`);
  t.is(bad.status, 400);
  t.truthy(bad.body.errors.subdomain);
});

test.serial('one namespace of hosts: a domain cannot take a worker\'s host, nor a worker a site\'s; a new site named like a worker gets another host', async (t) => {
  // Every write path into domains meets the trigger: straight SQL too.
  const error = await t.throwsAsync(sql("INSERT INTO public.domains (uuid, slug, domain, site_uuid, verified_at) VALUES (gen_random_uuid(), 'x-shop', 'shop.localhost', ?, now())", [b.uuid]));
  t.regex(String(error?.message), /taken/);
  t.is((await sql("SELECT count(*)::int AS n FROM public.domains WHERE domain = 'shop.localhost'"))[0].n, 0);
  t.is((await onA('POST', W, { name: 'y', subdomain_input: b.slug })).status, 400, "site B's own host");
  const root = await s.login();
  const org = await makeOrg(s);
  const site = await s.api('POST', `/api/cloud/organizations/${org.slug}/sites/`, { token: root.access, body: { name: 'Shop' } });
  t.is(site.status, 201, site.text);
  const domains = await sql('SELECT domain FROM public.domains d JOIN public.sites s ON s.uuid = d.site_uuid WHERE s.name = ?', ['Shop']);
  t.is(domains.length, 1);
  t.not(domains[0].domain, 'shop.localhost', 'the worker keeps its host');
  t.regex((await visit('shop.localhost', '/')).body.toString(), /Shop v/);
});

test.serial('PATCH subdomain_input moves the address, keeps the slug; GET → edit → PUT back works', async (t) => {
  const moved = await onA('PATCH', `${W}blog-site/`, { subdomain_input: 'journal' });
  t.is(moved.status, 200, moved.text);
  t.like(moved.body.data, { slug: 'blog-site', subdomain: 'journal', full_domain: 'journal.localhost' });
  t.is((await visit('journal.localhost', '/')).status, 404, 'the new host routes (no build yet)');
  t.regex((await visit('journal.localhost', '/')).body.toString(), /No build is active/);
  t.regex((await visit('blog-site.localhost', '/')).body.toString(), /Unknown host/, 'the old host is gone');

  const got = (await onA('GET', `${W}blog-site/`)).body.data;
  const put = await onA('PUT', `${W}blog-site/`, { ...got, name: 'Journal' });
  t.is(put.status, 200, put.text);
  t.like(put.body.data, { name: 'Journal', subdomain: 'journal', slug: 'blog-site' });
  const changedSlug = await onA('PUT', `${W}blog-site/`, { ...got, slug: 'other' });
  t.is(changedSlug.status, 400);
  t.truthy(changedSlug.body.errors.slug);
});

test.serial('app setting default_frontend_worker: a worker of the app, its URL; another app\'s refused; deleting the worker clears it', async (t) => {
  const app = (await onA('GET', '/api/apps/crm/')).body.data;
  const journal = (await onA('GET', `${W}blog-site/`)).body.data;
  const other = await onA('PATCH', '/api/apps/crm/settings/', { default_frontend_worker: journal.id });
  t.is(other.status, 400, 'a worker of no app');
  t.truthy(other.body.errors.default_frontend_worker);
  t.is((await onA('PATCH', `${W}blog-site/`, { app: app.id })).status, 200);
  t.is((await onA('GET', `${W}?app=${app.id}`)).body.total, 1);
  const set = await onA('PATCH', '/api/apps/crm/settings/', { default_frontend_worker: journal.id });
  t.is(set.status, 200, set.text);
  t.regex(set.body.data.default_frontend_worker_url, /^http:\/\/journal\.localhost(:\d+)?\/$/);
  t.is((await onA('DELETE', `${W}blog-site/`)).status, 200);
  t.is((await onA('GET', '/api/apps/crm/settings/')).body.data.default_frontend_worker_url, null);
  t.regex((await visit('journal.localhost', '/')).body.toString(), /Unknown host/);
});

test.serial('isolation: another site\'s administrator reaches nothing of site A\'s workers, by any route; a non-administrator is refused', async (t) => {
  const build = (await onA('GET', `${W}shop/builds/`)).body.data[0].uuid as string;
  const routes: [string, string, unknown?][] = [
    ['GET', W],
    ['POST', W, { name: 'Intruder', subdomain_input: 'intruder' }],
    ['GET', `${W}check-subdomain-availability/?subdomain=shop`],
    ['GET', `${W}shop/`],
    ['PATCH', `${W}shop/`, { name: 'x' }],
    ['PUT', `${W}shop/`, { name: 'x' }],
    ['DELETE', `${W}shop/`],
    ['GET', `${W}shop/builds/`],
    ['POST', `${W}shop/builds/`, {}],
    ['POST', `${W}shop/builds/missing/`, { hashes: [] }],
    ['GET', `${W}shop/builds/${build}/`],
    ['POST', `${W}shop/builds/${build}/activate/`],
    ['DELETE', `${W}shop/builds/${build}/`],
  ];
  for (const [method, path, body] of routes) {
    const onAsB = await on(a, method, path, body, tok.adminB); // B's token on A's host
    t.true(onAsB.status === 401 || onAsB.status === 403 || onAsB.status === 404, `${method} ${path} with site B's token on A: ${onAsB.status}`);
    if (path.includes('shop/')) {
      const fromB = await on(b, method, path, body, tok.adminB); // B's admin on B's own host, naming A's worker
      t.is(fromB.status, 404, `${method} ${path} on B: ${fromB.text}`);
    }
    const pleb = await onA(method, path, body, tok.pleb);
    t.is(pleb.status, 403, `${method} ${path} as a non-administrator of A: ${pleb.text}`);
  }
  t.is((await on(b, 'GET', W, undefined, tok.adminB)).body.total, 0, 'site B lists none of A\'s');
  t.is((await sql("SELECT count(*)::int AS n FROM public.worker_hosts WHERE host = 'intruder.localhost'"))[0].n, 0);
  const shop = (await sql(`SELECT name, active_build_uuid FROM "${a.schema}".frontend_workers WHERE slug = 'shop'`))[0];
  t.is(shop.name, 'Shop Front', 'unchanged');
  t.is((await sql(`SELECT count(*)::int AS n FROM "${a.schema}".frontend_worker_builds WHERE uuid = ?`, [build]))[0].n, 1);
});
