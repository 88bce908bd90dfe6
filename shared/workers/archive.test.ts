// readArchive and archiveFormat on real archives: zips made with adm-zip (hostile names and
// attributes written through its entry setters or patched into the bytes), tars made with node-tar
// from a folder or header by header (`Header.encode`, blocks padded here). A refusal is a 400 on
// `file` naming the entry, and `onFile` is never called for it.
import test, { type ExecutionContext } from 'ava';
import { mkdir, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import AdmZip from 'adm-zip';
import { create, Header, type HeaderData } from 'tar';
import { DomainError } from '../errors.ts';
import { archiveFormat, readArchive, type ArchiveFormat, type ArchiveLimits } from './archive.ts';

const SITE: Record<string, string> = {
  'index.html': '<!doctype html><h1>Hello</h1><script src="assets/app.js"></script>',
  'assets/app.js': 'console.log("hello");\n'.repeat(50),
  'assets/img/icons/logo.svg': '<svg xmlns="http://www.w3.org/2000/svg"/>',
};

let root: string;
test.before(async () => {
  root = await mkdtemp(path.join(tmpdir(), 'archive-test-'));
});
test.after.always(() => rm(root, { recursive: true, force: true }));

let counter = 0;
const tempPath = (name: string) => path.join(root, `${++counter}-${name}`);

async function writeSite(files: Record<string, string>, under = ''): Promise<string> {
  const dir = tempPath('site');
  for (const [name, text] of Object.entries(files)) {
    await mkdir(path.dirname(path.join(dir, under, name)), { recursive: true });
    await writeFile(path.join(dir, under, name), text);
  }
  return dir;
}

interface ZipItem {
  name: string;
  data?: Buffer | string;
  /** The external attributes, as stored (unix mode in the high 16 bits). */
  attr?: number;
}

/** A zip of these entries, in this order, with exactly these names (adm-zip normalizes names when adding: the raw name is set afterwards). */
async function zipOf(items: ZipItem[]): Promise<string> {
  const zip = new AdmZip({ noSort: true });
  items.forEach(({ name, data = '', attr }, i) => {
    const entry = zip.addFile(name.endsWith('/') ? `d${i}/` : `f${i}`, Buffer.from(data));
    entry.entryName = name;
    if (attr !== undefined) entry.attr = attr;
  });
  const file = tempPath('test.zip');
  await writeFile(file, zip.toBuffer());
  return file;
}

interface TarItem extends HeaderData {
  data?: Buffer | string;
}

/** A tar written header by header, so any name and type can be in it. */
async function tarOf(items: TarItem[], gzip = false): Promise<string> {
  const blocks: Buffer[] = [];
  for (const { data = '', ...header } of items) {
    const body = Buffer.from(data);
    const h = new Header({ mode: 0o644, mtime: new Date(0), size: body.length, type: 'File', ...header });
    h.encode();
    blocks.push(h.block!, body, Buffer.alloc((512 - (body.length % 512)) % 512));
  }
  blocks.push(Buffer.alloc(1024));
  const file = tempPath(gzip ? 'test.tgz' : 'test.tar');
  await writeFile(file, gzip ? gzipSync(Buffer.concat(blocks)) : Buffer.concat(blocks));
  return file;
}

/** A pax extended header record (`<length> <key>=<value>\n`, the length counting itself). */
const paxRecord = (text: string) => {
  const rest = Buffer.byteLength(text) + 2;
  const length = rest + String(rest + String(rest).length).length;
  return `${length} ${text}\n`;
};

async function readAll(file: string, format: ArchiveFormat, limits?: Partial<ArchiveLimits>) {
  const files: Record<string, string> = {};
  const order: string[] = [];
  const result = await readArchive(file, format, async ({ path, data }) => {
    order.push(path);
    files[path] = data.toString();
  }, limits);
  return { files, order, result };
}

/** Refused with a 400 on `file` whose message has every one of `parts`, before any file was handed out. */
async function refused(t: ExecutionContext, file: string, format: ArchiveFormat, parts: string[], limits?: Partial<ArchiveLimits>) {
  let calls = 0;
  const error = await t.throwsAsync(readArchive(file, format, async () => void calls++, limits), { instanceOf: DomainError });
  t.is(error?.status, 400);
  const message = error?.errors?.file?.[0] ?? '';
  for (const part of parts) t.true(message.includes(part), `${JSON.stringify(message)} should include ${JSON.stringify(part)}`);
  t.is(calls, 0, 'onFile is never called');
}

const size = (files: Record<string, string>) => Object.values(files).reduce((n, text) => n + Buffer.byteLength(text), 0);

// ---- archiveFormat ----

test('archiveFormat: the name gives the format, the first bytes confirm it', async (t) => {
  const zip = Buffer.from('PK\x03\x04rest');
  const tar = Buffer.alloc(512);
  tar.write('ustar', 257, 'latin1');
  const gzip = Buffer.from([0x1f, 0x8b, 8, 0]);
  t.is(archiveFormat('site.ZIP', zip), 'zip');
  t.is(archiveFormat('empty.zip', Buffer.from('PK\x05\x06')), 'zip');
  t.is(archiveFormat('site.tar', tar), 'tar');
  t.is(archiveFormat('Site.Tar.Gz', gzip), 'tar.gz');
  t.is(archiveFormat('site.tgz', gzip), 'tar.gz');
  for (const [name, head] of [['site.zip', gzip], ['site.tgz', zip], ['site.tar', zip], ['site.tar.gz', tar], ['site.tar', Buffer.alloc(100)]] as const) {
    const error = t.throws(() => archiveFormat(name, head), { instanceOf: DomainError });
    t.is(error?.status, 400);
    t.regex(error?.errors?.file?.[0] ?? '', /first bytes do not match/);
  }
  for (const name of ['site.rar', 'site.gz', 'site', 'zip']) {
    t.regex(t.throws(() => archiveFormat(name, zip), { instanceOf: DomainError })?.errors?.file?.[0] ?? '', /is not a supported archive: upload a \.zip, \.tar, \.tar\.gz or \.tgz file/);
  }
});

// ---- Round trips ----

test('zip round trip: every file, its bytes, in archive order; folders skipped', async (t) => {
  const file = await zipOf([{ name: 'index.html', data: SITE['index.html'] }, { name: 'assets/' }, { name: 'assets/app.js', data: SITE['assets/app.js'] }, { name: 'assets/img/icons/logo.svg', data: SITE['assets/img/icons/logo.svg'] }]);
  const { files, order, result } = await readAll(file, 'zip');
  t.deepEqual(files, SITE);
  t.deepEqual(order, ['index.html', 'assets/app.js', 'assets/img/icons/logo.svg']);
  t.deepEqual(result, { files: 3, bytes: size(SITE) });
});

for (const gzip of [false, true]) {
  const format: ArchiveFormat = gzip ? 'tar.gz' : 'tar';
  test(`${format} round trip from node-tar (\`tar -C dist .\`: the root "./" skipped, "./" stripped)`, async (t) => {
    const dir = await writeSite(SITE);
    const file = tempPath(gzip ? 'site.tgz' : 'site.tar');
    await create({ file, cwd: dir, gzip, portable: true }, ['.']);
    const { files, result } = await readAll(file, format);
    t.deepEqual(files, SITE);
    t.deepEqual(result, { files: 3, bytes: size(SITE) });
  });
}

test('a long path (pax header) and an empty file come through', async (t) => {
  const long = `${'deep/'.repeat(60)}file.txt`;
  const file = await tarOf([{ path: 'PaxHeader', type: 'ExtendedHeader', data: paxRecord(`path=${long}`) }, { path: long, data: 'x' }, { path: 'empty.txt' }], true);
  t.deepEqual((await readAll(file, 'tar.gz')).files, { [long]: 'x', 'empty.txt': '' });
  t.deepEqual((await readAll(await zipOf([{ name: 'empty.txt' }, { name: 'a.txt', data: 'a' }]), 'zip')).files, { 'empty.txt': '', 'a.txt': 'a' });
});

// ---- Common top-level folder ----

test('a single top-level folder holding every file is stripped (zip -r dist.zip dist; tar of dist)', async (t) => {
  const zip = await zipOf([{ name: 'dist/' }, ...Object.entries(SITE).map(([name, data]) => ({ name: `dist/${name}`, data }))]);
  t.deepEqual((await readAll(zip, 'zip')).files, SITE);
  const dir = await writeSite(SITE, 'dist');
  const tgz = tempPath('dist.tgz');
  await create({ file: tgz, cwd: dir, gzip: true, portable: true }, ['dist']);
  t.deepEqual((await readAll(tgz, 'tar.gz')).files, SITE);
  t.deepEqual((await readAll(await zipOf([{ name: 'dist/a/b.txt', data: 'b' }]), 'zip')).files, { 'a/b.txt': 'b' });
});

test('no stripping when a file is at the root or files are under different folders', async (t) => {
  const rootFile = await zipOf([{ name: 'dist/index.html', data: 'i' }, { name: 'README', data: 'r' }]);
  t.deepEqual((await readAll(rootFile, 'zip')).files, { 'dist/index.html': 'i', README: 'r' });
  const two = await tarOf([{ path: 'dist/index.html', data: 'i' }, { path: 'public/a.js', data: 'a' }]);
  t.deepEqual((await readAll(two, 'tar')).files, { 'dist/index.html': 'i', 'public/a.js': 'a' });
});

// ---- Hostile names ----

const HOSTILE_NAMES: [name: string, rule: string][] = [
  ['../evil', 'leaves the archive: paths may not contain "..".'],
  ['assets/../../evil', 'leaves the archive'],
  ['/etc/passwd', 'is an absolute path'],
  ['C:\\Windows\\evil', 'is an absolute path'],
  ['C:/evil', 'is an absolute path'],
  ['\\\\server\\share', 'is an absolute path'],
  ['assets\\app.js', 'contains a backslash'],
  ['a//b', 'has an empty folder name'],
  ['a/./b', 'has a "." folder'],
  ['.', 'has an empty name'],
  ['bad\u0001name', 'has control characters'],
  ['bad\u007fname', 'has control characters'],
];

test('zip: unsafe names are refused, the entry named', async (t) => {
  for (const [name, rule] of HOSTILE_NAMES) {
    const file = await zipOf([{ name: 'index.html', data: 'ok' }, { name, data: 'evil' }]);
    await refused(t, file, 'zip', [`Archive entry ${JSON.stringify(name)} `, rule]);
  }
  await refused(t, await zipOf([{ name: '../up/' }, { name: 'index.html', data: 'x' }]), 'zip', ['"../up/" leaves the archive']);
  await refused(t, await zipOf([{ name: `${'a'.repeat(30)}/x`, data: 'x' }]), 'zip', ['has a path longer than 20 bytes'], { maxPathLength: 20 });
});

test('tar and tar.gz: unsafe names are refused, the entry named', async (t) => {
  for (const [name, rule] of HOSTILE_NAMES) {
    for (const gzip of [false, true]) {
      const file = await tarOf([{ path: 'index.html', data: 'ok' }, { path: name, data: 'evil' }], gzip);
      await refused(t, file, gzip ? 'tar.gz' : 'tar', [`Archive entry ${JSON.stringify(name)} `, rule]);
    }
  }
  await refused(t, await tarOf([{ path: 'index.html', data: 'x' }, { path: '../dir/', type: 'Directory' }]), 'tar', ['"../dir/" leaves the archive']);
});

// ---- Links and other non-files ----

test('zip: a symbolic link (unix mode in the external attributes) and other special files are refused', async (t) => {
  const link = await zipOf([{ name: 'index.html', data: 'ok' }, { name: 'passwd', data: '/etc/passwd', attr: ((0o120777 << 16) >>> 0) }]);
  await refused(t, link, 'zip', ['Archive entry "passwd" is a symbolic link']);
  const fifo = await zipOf([{ name: 'index.html', data: 'ok' }, { name: 'pipe', attr: ((0o010644 << 16) >>> 0) }]);
  await refused(t, fifo, 'zip', ['Archive entry "pipe" is not a regular file or folder']);
  // Control: the same archive with a regular file's mode is read.
  const plain = await zipOf([{ name: 'index.html', data: 'ok' }, { name: 'passwd', data: '/etc/passwd', attr: ((0o100644 << 16) >>> 0) }]);
  t.is((await readAll(plain, 'zip')).result.files, 2);
});

test('tar: symbolic links, hard links, devices, FIFOs and unsupported types are refused', async (t) => {
  const cases: [TarItem, string][] = [
    [{ path: 'link', type: 'SymbolicLink', linkpath: '/etc/passwd', size: 0 }, 'Archive entry "link" is a symbolic link'],
    [{ path: 'hard', type: 'Link', linkpath: 'index.html', size: 0 }, 'Archive entry "hard" is a hard link'],
    [{ path: 'dev', type: 'CharacterDevice', size: 0 }, 'Archive entry "dev" is a device'],
    [{ path: 'fifo', type: 'FIFO', size: 0 }, 'Archive entry "fifo" is a named pipe'],
    [{ path: 'sparse', type: 'SparseFile', data: 'x' }, 'Archive entry "sparse" is an entry of type SparseFile'],
  ];
  for (const [item, message] of cases) {
    for (const gzip of [false, true]) await refused(t, await tarOf([{ path: 'index.html', data: 'ok' }, item], gzip), gzip ? 'tar.gz' : 'tar', [message, 'only files and folders are allowed']);
  }
});

test('encrypted zip entries are refused', async (t) => {
  const zip = new AdmZip();
  zip.addFile('secret.txt', Buffer.from('secret'));
  const buffer = zip.toBuffer();
  // Set bit 0 (encrypted) of the general-purpose flags in the local (offset 6) and central (offset 8) headers.
  buffer.writeUInt16LE(buffer.readUInt16LE(6) | 1, 6);
  const central = buffer.indexOf(Buffer.from('PK\x01\x02', 'latin1'));
  buffer.writeUInt16LE(buffer.readUInt16LE(central + 8) | 1, central + 8);
  const file = tempPath('encrypted.zip');
  await writeFile(file, buffer);
  await refused(t, file, 'zip', ['Archive entry "secret.txt" is encrypted']);
});

// ---- Duplicates ----

test('duplicate paths after normalization, and a path that is both a file and a folder, are refused', async (t) => {
  await refused(t, await zipOf([{ name: 'a.txt', data: '1' }, { name: './a.txt', data: '2' }]), 'zip', ['Archive entry "./a.txt" is in the archive twice (as "a.txt")']);
  await refused(t, await tarOf([{ path: 'a.txt', data: '1' }, { path: 'a.txt', data: '2' }]), 'tar', ['Archive entry "a.txt" is in the archive twice']);
  await refused(t, await tarOf([{ path: 'a', data: '1' }, { path: 'a/b', data: '2' }], true), 'tar.gz', ['Archive entry "a" is both a file and a folder']);
  await refused(t, await zipOf([{ name: 'a/' }, { name: 'a', data: '1' }]), 'zip', ['Archive entry "a" is both a file and a folder']);
});

// ---- Counts, sizes, bombs ----

test('more files than maxFiles is refused, naming the first file too many', async (t) => {
  const items = ['a', 'b', 'c'].map((name) => ({ name, data: name }));
  await refused(t, await zipOf(items), 'zip', ['Archive entry "c" is one file too many: archives may hold at most 2 files.'], { maxFiles: 2 });
  await refused(t, await tarOf(items.map(({ name, data }) => ({ path: name, data }))), 'tar', ['Archive entry "c" is one file too many'], { maxFiles: 2 });
  t.is((await readAll(await zipOf(items), 'zip', { maxFiles: 3 })).result.files, 3);
});

test('a file over maxFileBytes and files over maxTotalBytes are refused', async (t) => {
  await refused(t, await zipOf([{ name: 'big', data: 'x'.repeat(101) }]), 'zip', ['Archive entry "big" is 101 bytes: a file may have at most 100 bytes.'], { maxFileBytes: 100 });
  await refused(t, await tarOf([{ path: 'a', data: 'x'.repeat(60) }, { path: 'b', data: 'x'.repeat(60) }], true), 'tar.gz', ['Archive entry "b" takes the archive\'s files past 100 bytes'], { maxTotalBytes: 100 });
});

test('a compression bomb is refused by its ratio (low limit), in zip and tar.gz', async (t) => {
  const zeros = Buffer.alloc(1024 * 1024);
  await refused(t, await zipOf([{ name: 'index.html', data: 'x' }, { name: 'zeros', data: zeros }]), 'zip', ['Archive entry "zeros" takes the archive past 50 times its size', 'compression bomb'], { maxRatio: 50 });
  await refused(t, await tarOf([{ path: 'zeros', data: zeros }], true), 'tar.gz', ['Archive entry "zeros" takes the archive past 50 times its size'], { maxRatio: 50 });
});

test('default limits: a 50 MB entry of zeros in a ~50 KB zip is refused by its ratio, nothing inflated', async (t) => {
  const file = await zipOf([{ name: 'bomb.bin', data: Buffer.alloc(50 * 1024 * 1024) }]);
  await refused(t, file, 'zip', ['Archive entry "bomb.bin" takes the archive past 200 times its size']);
});

test('tar.gz: a decompressed stream far larger than its files (metadata padding) is refused', async (t) => {
  // Pax headers are metadata (no file bytes): 3 MiB of them gzip to a few KB.
  const pax = paxRecord(`comment=${'x'.repeat(990)}`).repeat(1024);
  const items: TarItem[] = [];
  for (let i = 0; i < 3; i++) items.push({ path: 'PaxHeader', type: 'ExtendedHeader', data: pax });
  items.push({ path: 'index.html', data: 'x' });
  await refused(t, await tarOf(items, true), 'tar.gz', ['The archive expands to more than 200 times its size']);
});

test('a zip entry inflating to more than its header declares is refused in the second pass', async (t) => {
  const zip = new AdmZip();
  zip.addFile('index.html', Buffer.from('fine'));
  zip.addFile('liar.bin', Buffer.alloc(100_000, 7));
  const buffer = zip.toBuffer();
  // Declare 10 bytes as liar.bin's uncompressed size, in its local (offset 22) and central (offset 24) headers.
  buffer.writeUInt32LE(10, buffer.indexOf(Buffer.from('PK\x03\x04', 'latin1'), 4) + 22);
  buffer.writeUInt32LE(10, buffer.lastIndexOf(Buffer.from('PK\x01\x02', 'latin1')) + 24);
  const file = tempPath('liar.zip');
  await writeFile(file, buffer);
  const seen: string[] = [];
  const error = await t.throwsAsync(readArchive(file, 'zip', async ({ path }) => void seen.push(path)), { instanceOf: DomainError });
  t.is(error?.status, 400);
  t.regex(error?.errors?.file?.[0] ?? '', /^Archive entry "liar\.bin" holds more data than the 10 bytes its header declares/);
  t.deepEqual(seen, ['index.html'], 'the files before it were handed out: the caller discards them');
});

// ---- Corrupt archives ----

test('a corrupt archive is a 400 "could not be read"', async (t) => {
  const cases: [string, ArchiveFormat, Buffer][] = [
    ['cut.zip', 'zip', Buffer.from('PK\x03\x04 not really a zip')],
    ['cut.tgz', 'tar.gz', gzipSync(Buffer.from('not a tar at all'.repeat(100)))],
    ['junk.tgz', 'tar.gz', Buffer.from([0x1f, 0x8b, 1, 2, 3, 4, 5])],
    ['short.tar', 'tar', Buffer.alloc(100)],
  ];
  const whole = await readFile(await tarOf([{ path: 'index.html', data: 'x'.repeat(2000) }]));
  cases.push(['truncated.tar', 'tar', whole.subarray(0, 1024)]);
  const badSum = Buffer.from(whole);
  badSum[0] ^= 1; // the checksum no longer matches
  cases.push(['checksum.tar', 'tar', badSum]);
  for (const [name, format, bytes] of cases) {
    const file = tempPath(name);
    await writeFile(file, bytes);
    await refused(t, file, format, ['The archive could not be read: ']);
  }
});

test('an archive without files is refused', async (t) => {
  await refused(t, await zipOf([{ name: 'empty/' }]), 'zip', ['The archive contains no files']);
  await refused(t, await tarOf([{ path: 'dir/', type: 'Directory' }]), 'tar', ['The archive contains no files']);
});

test('errors of onFile propagate unchanged', async (t) => {
  const file = await tarOf([{ path: 'index.html', data: 'x' }], true);
  const failure = new Error('store is down');
  t.is(await t.throwsAsync(readArchive(file, 'tar.gz', async () => Promise.reject(failure))), failure);
});
