// `platform bucket …`, `platform object …` and `platform storage check-quotas` in both modes
// (remote: <api-url>/sites/<schema>/api/… with the site's login; direct: the site schema as the
// system actor), on the filesystem store in a directory of this file's own (STORAGE_DIR, given
// to the server and to the CLI processes, whose direct mode builds the app from the
// configuration): the same output, and the buckets and objects really changed (read back
// through the API).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import type { TestSite } from '../../shared/testing/sites.ts';
import { startTestServer, type TestServer } from '../../server/test/helpers.ts';
import { globMatcher } from '../../shared/storage/glob.ts';
import { cliEnv, json, MODES, runCli, siteWithLogin, volatile, withoutProgress, type Mode } from './helpers.ts';

let s: TestServer;
let site: TestSite;
let configDir: string;
let tmp: string;
let storageDir: string;
let admin: string;
const ROOT = path.resolve(import.meta.dirname, '../..');
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c4890000000d4944415478da63f8cfc0f01f0005000201a5d1c3d20000000049454e44ae426082', 'hex');

const api = (method: string, p: string, body?: unknown) => s.api(method, `/sites/${site.schema}${p}`, { token: admin, body });
const env = () => cliEnv(s, configDir, { STORAGE_DIR: storageDir });
const direct = (mode: Mode) => (mode === 'direct' ? ['--direct'] : []);
/** `platform …args --site <schema> --app media-<mode> [--direct]`: each mode works on its own app. */
const run = (mode: Mode, args: string[]) => runCli([...args, '--site', site.schema, '--app', `media-${mode}`, ...direct(mode)], env());
const objects = (mode: Mode, bucket: string) => `/api/apps/media-${mode}/storage/buckets/${bucket}/objects/`;
const keysOf = async (mode: Mode, bucket: string) =>
  ((await api('GET', `${objects(mode, bucket)}?page_size=100&ordering=path`)).body.results as { file_path: string }[]).map((o) => o.file_path);
const local = (...p: string[]) => path.join(tmp, ...p);

/** `platform …args` with stdout as bytes (a binary download). */
function runBinary(args: string[]): Promise<{ code: number; stdout: Buffer; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['bin/run.js', ...args], { cwd: ROOT, env: env(), stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => out.push(d));
    child.stderr.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout: Buffer.concat(out), stderr }));
  });
}

test.before(async () => {
  storageDir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-cli-storage-'));
  s = await startTestServer({ STORAGE_DIR: storageDir });
  ({ site, admin, configDir } = await siteWithLogin(s));
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-storage-test-'));
  for (const mode of MODES) {
    const r = await api('POST', '/api/apps/', { name: `Media ${mode}` });
    if (r.status >= 300) throw new Error(`app: ${r.status} ${r.text}`);
  }
  // Local files: a directory (with a subdirectory), images for a quoted glob, a large text file.
  fs.mkdirSync(local('docs', 'sub'), { recursive: true });
  fs.writeFileSync(local('docs', 'a.txt'), 'alpha\n');
  fs.writeFileSync(local('docs', 'b.txt'), 'bravo\n');
  fs.writeFileSync(local('docs', 'sub', 'c.txt'), 'charlie\n');
  fs.mkdirSync(local('pics'));
  fs.writeFileSync(local('pics', 'x.png'), PNG);
  fs.writeFileSync(local('pics', 'y.png'), PNG);
  fs.writeFileSync(local('pics', 'notes.txt'), 'not an image\n');
  fs.writeFileSync(local('big.txt'), Array.from({ length: 200_000 }, (_, i) => `line ${i}\n`).join(''));
  fs.writeFileSync(local('blob.bin'), Buffer.from([0, 1, 2, 3, 255, 254, 0, 7]));
});
test.after.always(async () => {
  await s?.close();
  for (const dir of [configDir, tmp, storageDir]) if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

test('globMatcher: * and ? within a segment, ** across segments, classes, escapes; no regular expression from the pattern', (t) => {
  const m = (pattern: string, key: string) => globMatcher(pattern)(key);
  t.true(m('logs/*.txt', 'logs/a.txt'));
  t.false(m('logs/*.txt', 'logs/sub/a.txt'));
  t.false(m('logs/*.txt', 'logs/a.txt.gz'));
  t.true(m('logs/**', 'logs/sub/deep/a.txt'));
  t.true(m('logs/**/*.txt', 'logs/a.txt'));
  t.true(m('logs/**/*.txt', 'logs/x/y/a.txt'));
  t.false(m('logs/**/*.txt', 'other/a.txt'));
  t.true(m('a?c', 'abc'));
  t.false(m('a?c', 'ac'));
  t.true(m('img-[0-9].png', 'img-7.png'));
  t.false(m('img-[!0-9].png', 'img-7.png'));
  t.true(m('a\\*b', 'a*b'));
  t.false(m('a\\*b', 'axb'));
  t.true(m('*', 'x'));
  t.false(m('*', 'x/y'));
  t.true(m('**', 'x/y'));
  // A pattern that makes backtracking regular expressions explode stays fast.
  const started = Date.now();
  t.false(m(`${'*a'.repeat(30)}b`, 'a'.repeat(5000)));
  t.false(m(Array.from({ length: 20 }, () => '**').join('/') + '/b', Array.from({ length: 200 }, () => 'a').join('/')));
  t.true(Date.now() - started < 2000);
});

test.serial('bucket create, list, get, update, usage, delete: the same output in both modes', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const made = await run(mode, ['bucket', 'create', '--name', 'Photos', '--app-category', 'attachments', '--allowed-mime-types', 'image/*, text/plain', '--max-objects', '5']);
    t.is(made.code, 0, made.stderr);
    t.regex(made.stdout, /^Bucket "photos" created\.\nslug: +photos\nname: +Photos\nvisibility: +private\n/);
    t.regex(made.stdout, /^allowed_mime_types: +image\/\*, text\/plain$/m);
    t.regex(made.stdout, /^objects: +0 of 5$/m);
    out[mode].push(made.stdout);
    const second = await run(mode, ['bucket', 'create', '--name', 'Scratch', '--app-category', 'assets', '--visibility', 'public', '--file-size-limit', '1000', '--max-size-bytes', '2000', '--json']);
    t.is(second.code, 0, second.stderr);
    t.like(json(second), { name: 'Scratch', slug: 'scratch', visibility: 'public', app_category: 'assets', file_size_limit: 1000, max_size_bytes: 2000, max_objects: null, object_count: 0, storage_provider: 'objstore' });

    const badTypes = await run(mode, ['bucket', 'create', '--name', 'Bad', '--app-category', 'assets', '--allowed-mime-types', 'image/,text/plain']);
    t.is(badTypes.code, 1);
    t.regex(badTypes.stderr, /^Error: [^\n]*\n {2}allowed_mime_types: .*"image\/".*\n$/);
    const badQuota = await run(mode, ['bucket', 'create', '--name', 'Bad', '--app-category', 'assets', '--max-objects', '0', '--json']);
    t.is(badQuota.code, 1);
    t.like(json(badQuota), { code: 'VALIDATION_ERROR' });
    t.truthy(json(badQuota).errors.max_objects);
    const notNumber = await run(mode, ['bucket', 'create', '--name', 'Bad', '--app-category', 'assets', '--max-size-bytes', 'lots']);
    t.is(notNumber.code, 1);
    t.is(notNumber.stderr, 'Error: Invalid input.\n  max-size-bytes: Expected a whole number, or none for no limit, got "lots".\n');
    const noCategory = await run(mode, ['bucket', 'create', '--name', 'Bad']);
    t.is(noCategory.code, 2);
    t.false((await api('GET', `/api/apps/media-${mode}/storage/buckets/?search=bad`)).body.results.length > 0);

    const list = await run(mode, ['bucket', 'list', '--ordering', 'name']);
    t.is(list.code, 0, list.stderr);
    t.regex(list.stdout, /^SLUG +NAME +VISIBILITY +CATEGORY +OBJECTS +SIZE +OVER QUOTA +CREATED\nphotos +Photos +private +attachments +0 +0 B +no +\S+ \S+\nscratch +Scratch +public +assets +0 +0 B +no +\S+ \S+\n\n2 buckets\n$/);
    out[mode].push(list.stdout);
    const filtered = await run(mode, ['bucket', 'list', '--visibility', 'public', '--json']);
    t.is(json(filtered).count, 1);
    t.deepEqual(Object.keys(json(filtered)).sort(), ['count', 'next', 'previous', 'results']);
    t.is(json(filtered).results[0].slug, 'scratch');

    const got = await run(mode, ['bucket', 'get', 'photos']);
    t.is(got.code, 0, got.stderr);
    t.regex(got.stdout, /^slug: +photos\n/);
    t.regex(got.stdout, /^file_size_limit: +52428800 \(52\.4 MB\)$/m);
    out[mode].push(got.stdout);

    const upd = await run(mode, ['bucket', 'update', 'scratch', '--max-size-bytes', 'none', '--max-objects', '3', '--allowed-mime-types', 'text/*', '--json']);
    t.is(upd.code, 0, upd.stderr);
    t.like(json(upd), { slug: 'scratch', max_size_bytes: null, max_objects: 3 });
    t.deepEqual(json(upd).allowed_mime_types, ['text/*']);
    const read = (await api('GET', `/api/apps/media-${mode}/storage/buckets/scratch/`)).body;
    t.like(read, { max_size_bytes: null, max_objects: 3, visibility: 'public' });
    const nothing = await run(mode, ['bucket', 'update', 'scratch']);
    t.is(nothing.code, 1);
    t.regex(nothing.stderr, /^Error: Nothing to change: /);
    const renamed = await run(mode, ['bucket', 'update', 'scratch', '--name', 'Scratch pad']);
    t.regex(renamed.stdout, /^Bucket "scratch" updated\.\nslug: +scratch\nname: +Scratch pad\n/);

    const usage = await run(mode, ['bucket', 'usage', 'scratch']);
    t.is(usage.code, 0, usage.stderr);
    t.regex(usage.stdout, /^bucket: +scratch\nobjects: +0 of 3 \(0%\)\nsize: +0 B of none\nexceeded: +no\nupdated: +/);
    const usageJson = await run(mode, ['bucket', 'usage', 'photos', '--json']);
    t.deepEqual(Object.keys(json(usageJson)).sort(), ['bucket', 'exceeded', 'overage', 'percent_used', 'quota', 'usage']);
    t.like(json(usageJson), { bucket: { slug: 'photos', has_quota: true }, quota: { max_objects: 5 } });

    const del = await run(mode, ['bucket', 'delete', 'scratch']);
    t.is(del.code, 0, del.stderr);
    t.is(del.stdout, 'Bucket "scratch" deleted.\n');
    out[mode].push(del.stdout);
    t.is((await api('GET', `/api/apps/media-${mode}/storage/buckets/scratch/`)).status, 404);
    const gone = await run(mode, ['bucket', 'get', 'scratch', '--json']);
    t.is(gone.code, 1);
    t.like(json(gone), { code: 'NOT_FOUND' });
    const goneText = await run(mode, ['bucket', 'delete', 'scratch']);
    t.is(goneText.code, 1);
    t.regex(goneText.stderr, /^Error: .*scratch.*\n$|^Error: .*not found.*\n$/i);
    out[mode].push(goneText.stderr);
  }
  t.deepEqual(out.direct.map(volatile), out.remote.map(volatile));
});

test.serial('object upload (a directory, a quoted glob, metadata), ls, download, cp, mv, rm with a glob: the same output in both modes', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const b = ['--bucket', 'photos'];
    const up = await run(mode, ['object', 'upload', local('docs'), local('pics', '*.png'), '--prefix', 'inbox', ...b]);
    t.is(up.code, 0, up.stderr);
    t.is(
      up.stdout,
      [
        'created   inbox/a.txt      6 B',
        'created   inbox/b.txt      6 B',
        'created   inbox/sub/c.txt  8 B',
        `created   inbox/x.png      ${PNG.length} B`,
        `created   inbox/y.png      ${PNG.length} B`,
        'Uploaded 5 files (5 created); 0 failed.',
        '',
      ].join('\n'),
    );
    t.regex(withoutProgress(up.stderr), /^Uploading 5 files \(\d+ B\) to photos…\n$/);
    out[mode].push(up.stdout, up.stderr);
    t.deepEqual(await keysOf(mode, 'photos'), ['inbox/a.txt', 'inbox/b.txt', 'inbox/sub/c.txt', 'inbox/x.png', 'inbox/y.png']);

    // Again, with one file the bucket refuses (its type): the others are replaced, exit code 1.
    const again = await run(mode, ['object', 'upload', local('pics', 'x.png'), local('blob.bin'), '--prefix', 'inbox/', ...b, '--json']);
    t.is(again.code, 1);
    const report = json(again);
    t.like(report, { created: 0, replaced: 1, failed: 1 });
    t.like(report.results[0], { path: 'inbox/x.png', file: local('pics', 'x.png'), status: 'replaced', size: PNG.length });
    t.like(report.results[1], { path: 'inbox/blob.bin', status: 'failed', size: 8 });
    t.regex(report.results[1].error, /application\/octet-stream/);
    const refusedText = await run(mode, ['object', 'upload', local('blob.bin'), ...b]);
    t.is(refusedText.code, 1);
    t.regex(refusedText.stdout, /^failed {4}blob\.bin: .*application\/octet-stream.*\nUploaded 0 files; 1 failed\.\n$/);
    out[mode].push(refusedText.stdout);
    t.false((await keysOf(mode, 'photos')).some((k) => k.endsWith('.bin')));

    // --path and --metadata; the large file streams.
    const meta = await run(mode, ['object', 'upload', local('big.txt'), '--path', 'big/lines.txt', '--metadata', '{"author":"Ada","pages":3}', '--visibility', 'public', ...b]);
    t.is(meta.code, 0, meta.stderr);
    const record = (await api('GET', `${objects(mode, 'photos')}big/lines.txt?metadata=true`)).body.data;
    t.like(record, { file_path: 'big/lines.txt', size: fs.statSync(local('big.txt')).size, mimetype: 'text/plain', visibility: 'public', metadata: { author: 'Ada', pages: '3' } });
    const twoWithPath = await run(mode, ['object', 'upload', local('docs'), '--path', 'x.txt', ...b]);
    t.is(twoWithPath.code, 1);
    t.is(twoWithPath.stderr, 'Error: Invalid input.\n  path: --path names the key of one file: with several files, or a directory or a pattern, use --prefix.\n');
    const noMatch = await run(mode, ['object', 'upload', local('pics', '*.gif'), ...b]);
    t.is(noMatch.code, 1);
    t.regex(noMatch.stderr, /^Error: Invalid input\.\n {2}files: No file matches ".*\*\.gif"\.\n$/);
    const escape = await run(mode, ['object', 'upload', local('docs', 'a.txt'), '--path', '../a.txt', ...b]);
    t.is(escape.code, 1);
    t.regex(escape.stderr, /^Error: Invalid input\.\n {2}path: Invalid object path "\.\.\/a\.txt": /);
    // Over the bucket's file_size_limit: refused from the declared length while the body streams.
    const small = await api('POST', `/api/apps/media-${mode}/storage/buckets/`, { name: 'Small', app_category: 'attachments', file_size_limit: 1000 });
    t.is(small.status, 201, small.text);
    const tooBig = await run(mode, ['object', 'upload', local('big.txt'), local('docs', 'a.txt'), '--bucket', 'small']);
    t.is(tooBig.code, 1);
    const size = fs.statSync(local('big.txt')).size;
    t.is(tooBig.stdout, `failed    big.txt: File size ${size} bytes exceeds the limit of 1000 bytes.
created   a.txt    6 B
Uploaded 1 file (1 created); 1 failed.
`);
    out[mode].push(tooBig.stdout);
    t.deepEqual(await keysOf(mode, 'small'), ['a.txt']);
    const noBucket = await run(mode, ['object', 'upload', local('docs'), '--bucket', 'nope']);
    t.is(noBucket.code, 1);
    t.regex(noBucket.stderr, /not found/i);
    t.notRegex(noBucket.stdout, /failed/);

    // ls: table, filters, --json.
    const ls = await run(mode, ['object', 'ls', '--prefix', 'inbox/', '--ordering', 'path', ...b]);
    t.is(ls.code, 0, ls.stderr);
    t.regex(ls.stdout, /^PATH +SIZE +TYPE +UPDATED +VISIBILITY\ninbox\/a\.txt +6 B +text\/plain +\S+ \S+ +\(bucket\)\n/);
    t.true(ls.stdout.endsWith('\n\n5 objects\n'), ls.stdout);
    out[mode].push(ls.stdout);
    const images = await run(mode, ['object', 'ls', '--filter', 'mimetype_category=image', '--ordering', 'path', '--page-size', '1', ...b, '--json']);
    t.is(images.code, 0, images.stderr);
    t.like(json(images), { count: 2, previous: null });
    t.deepEqual(Object.keys(json(images)).sort(), ['count', 'next', 'previous', 'results']);
    t.is(json(images).results[0].file_path, 'inbox/x.png');
    const unknown = await run(mode, ['object', 'ls', '--filter', 'colour=red', ...b]);
    t.is(unknown.code, 1);
    t.is(unknown.stderr, 'Error: Invalid input.\n  colour: Unknown filter.\n');

    // download: to a file (the bytes), into a directory, to stdout (text and binary).
    const file = local(`x-${mode}.png`);
    const dl = await run(mode, ['object', 'download', 'inbox/x.png', '--output', file, ...b]);
    t.is(dl.code, 0, dl.stderr);
    t.deepEqual(fs.readFileSync(file), PNG);
    t.is(dl.stdout, `Downloaded inbox/x.png (${PNG.length} B) to ${file}.\n`);
    t.is(withoutProgress(dl.stderr), `Downloading inbox/x.png (${PNG.length} B) to ${file}…\n`);
    t.false(fs.readdirSync(tmp).some((f) => f.includes('.part-')));
    const dir = local(`out-${mode}`);
    fs.mkdirSync(dir);
    const big = await run(mode, ['object', 'download', 'big/lines.txt', '--output', dir, ...b, '--json']);
    t.is(big.code, 0, big.stderr);
    t.deepEqual(json(big), { path: 'big/lines.txt', output: path.join(dir, 'lines.txt'), bytes: fs.statSync(local('big.txt')).size });
    t.true(fs.readFileSync(path.join(dir, 'lines.txt')).equals(fs.readFileSync(local('big.txt'))));
    const text = await run(mode, ['object', 'download', 'inbox/sub/c.txt', ...b]);
    t.is(text.code, 0, text.stderr);
    t.is(text.stdout, 'charlie\n');
    t.is(withoutProgress(text.stderr), 'Downloading inbox/sub/c.txt (8 B) to stdout…\nDownloaded inbox/sub/c.txt (8 B) to stdout.\n');
    const binary = await runBinary(['object', 'download', 'inbox/y.png', '--output', '-', ...b, '--site', site.schema, '--app', `media-${mode}`, ...direct(mode)]);
    t.is(binary.code, 0, binary.stderr);
    t.true(binary.stdout.equals(PNG));
    const missing = await run(mode, ['object', 'download', 'inbox/none.txt', ...b]);
    t.is(missing.code, 1);
    t.is(missing.stdout, '');
    t.regex(missing.stderr, /^Error: .*not found.*\n$/i);
    out[mode].push(missing.stderr);
    const jsonNoOutput = await run(mode, ['object', 'download', 'inbox/a.txt', ...b, '--json']);
    t.is(jsonNoOutput.code, 1);
    t.like(json(jsonNoOutput), { code: 'BAD_REQUEST' });

    // cp (a folder destination keeps the name; to another bucket), mv, and a move onto an existing key.
    const cp = await run(mode, ['object', 'cp', 'inbox/a.txt', 'copies/', ...b]);
    t.is(cp.code, 0, cp.stderr);
    t.regex(cp.stdout, /^Object copied\.\npath: +copies\/a\.txt\nbucket: +photos\n/);
    out[mode].push(cp.stdout);
    const made = await api('POST', `/api/apps/media-${mode}/storage/buckets/`, { name: 'Other', app_category: 'attachments' });
    t.is(made.status, 201, made.text);
    const cpOther = await run(mode, ['object', 'cp', 'inbox/b.txt', 'b-copy.txt', '--to-bucket', 'other', ...b, '--json']);
    t.is(cpOther.code, 0, cpOther.stderr);
    t.like(json(cpOther), { success: true, status_code: 201, data: { file_path: 'b-copy.txt', bucket_slug: 'other', metadata: { copied_from: { bucket: 'photos', path: 'inbox/b.txt' } } } });
    const cpMissing = await run(mode, ['object', 'cp', 'inbox/none.txt', 'x.txt', ...b]);
    t.is(cpMissing.code, 1);
    t.regex(cpMissing.stderr, /^Error: .*not found.*\n$/i);
    const uuid = (await api('GET', `${objects(mode, 'photos')}inbox/b.txt?metadata=true`)).body.data.uuid;
    const mv = await run(mode, ['object', 'mv', 'inbox/b.txt', 'moved/b.txt', ...b, '--json']);
    t.is(mv.code, 0, mv.stderr);
    t.like(json(mv), { success: true, data: { file_path: 'moved/b.txt', uuid } });
    const clash = await run(mode, ['object', 'mv', 'inbox/a.txt', 'copies/a.txt', ...b]);
    t.is(clash.code, 1);
    out[mode].push(clash.stderr);
    t.deepEqual(await keysOf(mode, 'photos'), ['big/lines.txt', 'copies/a.txt', 'inbox/a.txt', 'inbox/sub/c.txt', 'inbox/x.png', 'inbox/y.png', 'moved/b.txt']);

    // rm: a glob within one segment, then ** ; several keys (a batch) with one missing; one key.
    const rmGlob = await run(mode, ['object', 'rm', 'inbox/*.png', ...b]);
    t.is(rmGlob.code, 0, rmGlob.stderr);
    t.is(rmGlob.stdout, 'deleted  inbox/x.png\ndeleted  inbox/y.png\n2 objects deleted.\n');
    out[mode].push(rmGlob.stdout);
    t.deepEqual(await keysOf(mode, 'photos'), ['big/lines.txt', 'copies/a.txt', 'inbox/a.txt', 'inbox/sub/c.txt', 'moved/b.txt']);
    const rmDeep = await run(mode, ['object', 'rm', 'inbox/**', 'nothing/*', ...b, '--json']);
    t.is(rmDeep.code, 1);
    t.deepEqual(json(rmDeep), { deleted_count: 2, deleted: ['inbox/a.txt', 'inbox/sub/c.txt'], failed: [{ path: 'nothing/*', error: 'No object matches this pattern.' }] });
    const rmMany = await run(mode, ['object', 'rm', 'copies/a.txt', 'moved/b.txt', 'gone.txt', ...b]);
    t.is(rmMany.code, 1);
    t.regex(rmMany.stdout, /^deleted {2}copies\/a\.txt\ndeleted {2}moved\/b\.txt\nfailed {3}gone\.txt: .+\n2 objects deleted, 1 failed\.\n$/);
    out[mode].push(rmMany.stdout);
    const rmOne = await run(mode, ['object', 'rm', 'big/lines.txt', ...b]);
    t.is(rmOne.code, 0, rmOne.stderr);
    t.is(rmOne.stdout, 'deleted  big/lines.txt\n1 object deleted.\n');
    const rmMissing = await run(mode, ['object', 'rm', 'big/lines.txt', ...b]);
    t.is(rmMissing.code, 1);
    t.regex(rmMissing.stderr, /^Error: .*not found.*\n$/i);
    out[mode].push(rmMissing.stderr);
    const dots = await run(mode, ['object', 'rm', '..', ...b]);
    t.is(dots.code, 1);
    t.regex(dots.stderr, /^Error: Invalid input\.\n {2}keys: Invalid object path "\.\.": /);
    t.is((await api('GET', `/api/apps/media-${mode}/storage/buckets/photos/`)).status, 200);
    t.deepEqual(await keysOf(mode, 'photos'), []);
  }
  t.deepEqual(out.direct.map(volatile), out.remote.map(volatile));
});

test.serial('storage check-quotas (and its alias check_storage_quotas): refreshed counts and the buckets over quota', async (t) => {
  const out: Record<Mode, string[]> = { remote: [], direct: [] };
  for (const mode of MODES) {
    const b = ['--bucket', 'tight'];
    const made = await run(mode, ['bucket', 'create', '--name', 'Tight', '--app-category', 'attachments', '--max-objects', '1']);
    t.is(made.code, 0, made.stderr);
    const up = await run(mode, ['object', 'upload', local('docs', 'a.txt'), local('docs', 'b.txt'), ...b]);
    t.is(up.code, 0, up.stderr);
  }
  for (const mode of MODES) {
    const check = await runCli(['storage', 'check-quotas', '--site', site.schema, ...direct(mode)], env());
    t.is(check.code, 0, check.stderr);
    t.regex(check.stdout, /^Usage refreshed for \d+ buckets\.\n2 over quota:\nAPP +BUCKET\n[a-z0-9-]+ +tight\n[a-z0-9-]+ +tight\n$/);
    out[mode].push(check.stdout);
    const alias = await runCli(['check_storage_quotas', '--site', site.schema, '--json', ...direct(mode)], env());
    t.is(alias.code, 0, alias.stderr);
    t.like(json(alias), { success: true, status_code: 200 });
    t.is(json(alias).data.exceeded.length, 2);
    t.true(json(alias).data.exceeded.every((x: { slug: string; app: string }) => x.slug === 'tight' && typeof x.app === 'string' && x.app !== ''));
  }
  for (const mode of MODES) {
    const usage = await run(mode, ['bucket', 'usage', 'tight']);
    t.regex(usage.stdout, /^objects: +2 of 1 \(200%\)$/m);
    t.regex(usage.stdout, /^exceeded: +objects \(over by 1\)$/m);
    out[mode].push(usage.stdout);
  }
  const noSite = await runCli(['storage', 'check-quotas', '--site', 'nope_nope'], env());
  t.is(noSite.code, 1);
  t.deepEqual(out.direct.map(volatile), out.remote.map(volatile));
});

test.serial('issue 30 #10: storage check-quotas without --site checks every site with --direct, a progress line each; remote mode asks for --site', async (t) => {
  const all = await runCli(['storage', 'check-quotas', '--direct', '--json'], env());
  t.is(all.code, 0, all.stderr);
  const body = json(all);
  t.like(body, { success: true, status_code: 200 });
  t.true(body.data.sites >= 1);
  t.is(body.data.exceeded.filter((x: { site: string; slug: string }) => x.site === site.schema && x.slug === 'tight').length, 2);
  t.regex(all.stderr, new RegExp(`^\\[\\d+/${body.data.sites}\\] ${site.schema}: \\d+ bucket\\(s\\), 2 over quota$`, 'm'));
  const text = await runCli(['storage', 'check-quotas', '--direct'], env());
  t.is(text.code, 0, text.stderr);
  t.regex(text.stdout, /^Usage refreshed for \d+ buckets in \d+ sites\.\n\d+ over quota:\nSITE +APP +BUCKET\n/);
  const remote = await runCli(['storage', 'check-quotas'], env());
  t.is(remote.code, 1);
  t.is(remote.stderr, 'Error: Name a site with --site, or check every site with --direct (on the database).\n');
});
