// packDirectory: a folder packed to .tar.gz reads back (readArchive) with the same files and bytes;
// a missing or empty folder, a symbolic link inside, or an output inside the folder is refused.
import test from 'ava';
import { access, mkdir, mkdtemp, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { readArchive } from '../shared/workers/archive.ts';
import { packDirectory } from './pack.ts';

const SITE: Record<string, Buffer> = {
  'index.html': Buffer.from('<!doctype html><h1>Hello</h1>'),
  'assets/app.js': Buffer.from('console.log("hello");\n'.repeat(100)),
  'assets/img/logo.png': Buffer.from(Array.from({ length: 3000 }, (_, i) => (i * 31) % 256)),
  '.well-known/security.txt': Buffer.from('Contact: mailto:security@example.com\n'),
};

let root: string;
test.before(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'pack-test-'));
});
test.after.always(() => rm(root, { recursive: true, force: true }));

async function folder(name: string, files: Record<string, Buffer | string>): Promise<string> {
  const dir = path.join(root, name);
  await mkdir(dir, { recursive: true });
  for (const [file, data] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, file)), { recursive: true });
    await writeFile(path.join(dir, file), data);
  }
  return dir;
}

test('a packed folder reads back with the same files and bytes; progress counts up to the totals', async (t) => {
  const dir = await folder('site', SITE);
  await mkdir(path.join(dir, 'empty-folder'));
  const out = path.join(root, 'site.tar.gz');
  const progress: [number, number][] = [];
  const bytes = Object.values(SITE).reduce((n, data) => n + data.length, 0);
  t.deepEqual(await packDirectory(dir, out, (files, written) => progress.push([files, written])), { files: 4, bytes });
  t.deepEqual(progress.at(-1), [4, bytes]);
  t.deepEqual(progress.map(([files]) => files), [1, 2, 3, 4]);

  const read: Record<string, Buffer> = {};
  const result = await readArchive(out, 'tar.gz', async (file) => void (read[file.path] = file.data));
  t.deepEqual(result, { files: 4, bytes });
  t.deepEqual(read, SITE);
});

test('a symbolic link is refused, named; nothing is written', async (t) => {
  const dir = await folder('linked', { 'index.html': 'x', 'b/real.txt': 'y' });
  await symlink('/etc/passwd', path.join(dir, 'b', 'passwd'));
  const out = path.join(root, 'linked.tgz');
  const error = await t.throwsAsync(packDirectory(dir, out));
  t.regex(error?.message ?? '', /contains a symbolic link, b\/passwd: replace it/);
  await t.throwsAsync(access(out));
});

test('a missing folder, an empty one (folders only) and an output inside the folder are refused', async (t) => {
  t.regex((await t.throwsAsync(packDirectory(path.join(root, 'nope'), path.join(root, 'nope.tgz'))))?.message ?? '', /is not a folder/);
  const empty = await folder('empty', {});
  await mkdir(path.join(empty, 'sub'));
  t.regex((await t.throwsAsync(packDirectory(empty, path.join(root, 'empty.tgz'))))?.message ?? '', /is empty: build the site first/);
  const dir = await folder('self', { 'index.html': 'x' });
  t.regex((await t.throwsAsync(packDirectory(dir, path.join(dir, 'out.tgz'))))?.message ?? '', /would be inside the folder it packs/);
});
