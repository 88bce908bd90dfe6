// Deploys into a site's store (issue 31 #4b): content-addressed blobs stored once, a refused
// archive writing nothing, and the upkeep that leaves no half-made or unreferenced blob behind.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import test from 'ava';
import AdmZip from 'adm-zip';
import { platformDatabase } from '../testing/platform-db.ts';
import { createTestSite, type TestSite } from '../testing/sites.ts';
import { filesystemStore } from '../storage/objstore/filesystem.ts';
import type { ObjectStore } from '../storage/objstore/types.ts';
import { blobKey, collectWorkerBlobs, deployArchive, failInterruptedBuilds, sweepWorkerBlobs } from './deploy.ts';

const orm = platformDatabase(test);
let site: TestSite;
let store: ObjectStore;
const root = fs.mkdtempSync(path.join(os.tmpdir(), 'deploy-test-'));

test.after.always(() => fs.rmSync(root, { recursive: true, force: true }));

function archive(files: Record<string, string>, name = 'site.zip'): { path: string; filename: string } {
  const zip = new AdmZip();
  for (const [k, v] of Object.entries(files)) zip.addFile(k, Buffer.from(v));
  const file = path.join(root, `${Math.random().toString(16).slice(2)}-${name}`);
  fs.writeFileSync(file, zip.toBuffer());
  return { path: file, filename: name };
}

const keys = async () => {
  const out: string[] = [];
  for await (const k of store.site(site.schema).list('_workers/')) out.push(k);
  return out.sort();
};
const rows = async () => (await orm().em.fork().execute(`SELECT sha256, stored FROM "${site.schema}".frontend_worker_blobs ORDER BY sha256`)) as { sha256: string; stored: boolean }[];

test.serial('a deploy stores each new content once (with its compressed variants); the same content again stores nothing', async (t) => {
  site = await createTestSite(orm().em.fork());
  store = filesystemStore(root);
  const big = 'body { color: red; }\n'.repeat(200);
  let started = 0;
  const first = await deployArchive(orm().em.fork(), store.site(site.schema), site.schema, archive({ 'index.html': '<h1>hi</h1>', 'a.css': big, 'copy.css': big }), async () => void started++);
  t.is(started, 1);
  t.is(first.fileCount, 3);
  t.is(first.storedFiles, 2, 'two contents: a.css and copy.css are one blob');
  t.is(first.manifest.files['a.css']!.sha256, first.manifest.files['copy.css']!.sha256);
  t.truthy(first.manifest.files['a.css']!.br, 'a compressible file has a brotli variant');
  t.true((await keys()).includes(blobKey(first.manifest.files['a.css']!.sha256, 'br')));
  t.deepEqual((await rows()).map((r) => r.stored), [true, true]);
  const again = await deployArchive(orm().em.fork(), store.site(site.schema), site.schema, archive({ 'index.html': '<h1>hi</h1>', 'b.css': big }), async () => undefined);
  t.is(again.storedFiles, 0);
});

test.serial('a refused archive: the callback never runs, nothing is stored', async (t) => {
  const before = { keys: await keys(), rows: await rows() };
  const zip = new AdmZip();
  zip.addFile('ok.html', Buffer.from('fresh content'));
  zip.addFile('x.txt', Buffer.from('evil'));
  const raw = zip.toBuffer();
  raw.write('/xx..', raw.indexOf('x.txt'));
  raw.write('/xx..', raw.indexOf('x.txt'));
  const file = path.join(root, 'hostile.zip');
  fs.writeFileSync(file, raw);
  let started = false;
  const err = await t.throwsAsync(deployArchive(orm().em.fork(), store.site(site.schema), site.schema, { path: file, filename: 'hostile.zip' }, async () => void (started = true)));
  t.regex(String(err?.message), /Invalid input|archive|path/i);
  t.false(started);
  t.deepEqual({ keys: await keys(), rows: await rows() }, before);
});

test.serial('upkeep: a half-stored blob (a crash) is swept with its bytes after the grace period; unreferenced blobs are collected, recently used ones kept', async (t) => {
  const em = orm().em.fork();
  const half = 'f'.repeat(64);
  await em.execute(`INSERT INTO "${site.schema}".frontend_worker_blobs (sha256, size, used_at) VALUES (?, 4, now() - interval '2 hours')`, [half]);
  await store.site(site.schema).put(blobKey(half), Readable.from([Buffer.from('part')]), { contentType: 'text/plain' });
  const fresh = 'e'.repeat(64);
  await em.execute(`INSERT INTO "${site.schema}".frontend_worker_blobs (sha256, size) VALUES (?, 4)`, [fresh]); // a deploy storing it now
  t.is(await sweepWorkerBlobs(em, store.site(site.schema), site.schema), 1);
  t.false((await keys()).includes(blobKey(half)));
  t.true((await rows()).some((r) => r.sha256 === fresh), 'a deploy in flight keeps its row');

  // No build names the stored blobs of the first test: recently used, they stay; past the grace period, they go with their bytes.
  t.is(await collectWorkerBlobs(em, store.site(site.schema), site.schema), 0);
  t.is(await collectWorkerBlobs(em, store.site(site.schema), site.schema, 0), 2);
  t.deepEqual(await keys(), []);
});

test.serial('a build left uploading by a stopped server is marked failed after the grace period, not before', async (t) => {
  const em = orm().em.fork();
  const q = `"${site.schema}"`;
  const [w] = await em.execute(`INSERT INTO ${q}.frontend_workers (uuid, slug, name, subdomain, host) VALUES (gen_random_uuid(), 'w', 'W', 'w', 'w.localhost') RETURNING id`);
  await em.execute(`INSERT INTO ${q}.frontend_worker_builds (uuid, worker_id, title, status, created_at) VALUES (gen_random_uuid(), ?, 'old', 'uploading', now() - interval '2 hours'), (gen_random_uuid(), ?, 'live', 'uploading', now())`, [w.id, w.id]);
  t.is(await failInterruptedBuilds(em, site.schema), 1);
  const rows = await em.execute(`SELECT title, status, error FROM ${q}.frontend_worker_builds ORDER BY title`);
  t.like(rows, [{ title: 'live', status: 'uploading', error: null }, { title: 'old', status: 'failed' }]);
  t.regex(rows[1].error, /interrupted/);
});
