// Reading a package before any import (issue 32 item 4): a valid package reads whole; each hostile
// one is refused with a message naming what is wrong (paths escaping the archive, links, expansion
// bombs, changed bytes, unknown folders, a newer format, unlisted or missing files), bucket ZIPs
// included; without validate_checksum only the digests are not compared.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { DomainError } from '../errors.ts';
import { BUCKET_METADATA, EXPORT_OPTIONS, PACKAGE_FORMAT, exportFlags, manifestChecksum, packageChecksum, sha256, type Manifest } from './layout.ts';
import { readPackage } from './reader.ts';
import { ZipWriter } from './zip-writer.ts';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'platform-package-'));
test.after.always(() => fs.rmSync(dir, { recursive: true, force: true }));
let n = 0;

interface Entry {
  name: string;
  data: Buffer;
  /** Deflated (default) or stored as is. */
  compress?: boolean;
  /** Unix mode (a link: 0o120777). */
  mode?: number;
}

/** A ZIP of `entries` in memory. */
async function zipOf(entries: Entry[]): Promise<Buffer> {
  const chunks: Buffer[] = [];
  const { Writable } = await import('node:stream');
  const out = new Writable({ write: (c: Buffer, _e, done) => (chunks.push(c), done()) });
  const zip = new ZipWriter(out, new Date('2026-01-01T00:00:00Z'));
  const yz = (zip as unknown as { zip: { addBuffer(d: Buffer, n: string, o: object): void } }).zip;
  for (const e of entries) yz.addBuffer(e.data, e.name, { compress: e.compress ?? true, mtime: new Date('2026-01-01T00:00:00Z'), ...(e.mode ? { mode: e.mode } : {}) });
  await zip.finish();
  return Buffer.concat(chunks);
}

const json = (v: unknown) => Buffer.from(JSON.stringify(v));

/** The files of a small valid package (app, roles, storage with one bucket), before its manifest. */
async function files(): Promise<Record<string, Buffer>> {
  const logo = Buffer.from('the logo');
  const bucket = await zipOf([
    { name: 'img/logo.txt', data: logo },
    { name: BUCKET_METADATA, data: json({ slug: 'media', objects: [{ path: 'img/logo.txt', entry: 'img/logo.txt', filename: 'logo.txt', size: logo.length, mimetype: 'text/plain', metadata: {}, visibility: null, sha256: sha256(logo) }] }) },
  ]);
  return {
    'app/metadata.json': json({ name: 'CRM', slug: 'crm', description: '', settings: {} }),
    'app_roles/metadata.json': json({ roles: [{ name: 'staff', description: '', parent_name: null }] }),
    'storage/metadata.json': json({ buckets: [{ slug: 'media', archive: 'storage/buckets/media.zip' }] }),
    'storage/buckets/media.zip': bucket,
  };
}

/** A manifest for `contents` (each file under its module), changed by `patch`. */
function manifestOf(contents: Record<string, Buffer>, patch: (m: Manifest) => void = () => {}): Manifest {
  const modules: Manifest['modules'] = {};
  for (const [name, data] of Object.entries(contents)) {
    const module = name.split('/')[0] as keyof Manifest['modules'];
    (modules[module] ??= { count: 1, files: {} }).files[name] = sha256(data);
  }
  const base = {
    format: PACKAGE_FORMAT,
    version: '1.0.0',
    created_at: '2026-01-01T00:00:00.000Z',
    created_by: 'boss',
    package: { app_slug: 'crm', app_name: 'CRM', description: '' },
    requires: { platform_version: '0.1.0' },
    modules,
    export_options: exportFlags({}),
  } as const;
  const m: Manifest = { ...base, integrity: { package_checksum: packageChecksum(modules), manifest_checksum: manifestChecksum(base) } };
  patch(m);
  return m;
}

/** Writes a package: `contents` listed in the manifest, then `unlisted` entries; `tamper` edits the bytes. */
async function packageFile(o: { contents?: Record<string, Buffer>; unlisted?: Entry[]; patch?: (m: Manifest) => void; tamper?: (zip: Buffer) => Buffer; stored?: boolean } = {}): Promise<string> {
  const contents = o.contents ?? (await files());
  const entries: Entry[] = Object.entries(contents).map(([name, data]) => ({ name, data, compress: !o.stored }));
  entries.push(...(o.unlisted ?? []), { name: 'manifest.json', data: json(manifestOf(contents, o.patch)) });
  let bytes = await zipOf(entries);
  if (o.tamper) bytes = o.tamper(bytes);
  const file = path.join(dir, `p${n++}.zip`);
  fs.writeFileSync(file, bytes);
  return file;
}

const read = (file: string, validateChecksum = true, tmpBase = path.join(dir, `t${n++}`)) => readPackage(file, { validateChecksum, tmpBase });
/** The files extracted for reading under `tmpBase` that are still there. */
const leftovers = (tmpBase: string) => fs.readdirSync(dir).filter((f) => f.startsWith(`${path.basename(tmpBase)}.`));
/** Replaces every occurrence of `from` with `to` (same length) in the bytes. */
const replaceAll = (b: Buffer, from: string, to: string): Buffer => {
  const out = Buffer.from(b);
  for (let i = out.indexOf(from); i >= 0; i = out.indexOf(from, i + 1)) out.write(to, i);
  return out;
};

async function refusal(t: import('ava').ExecutionContext, file: string, pattern: RegExp, validateChecksum = true): Promise<void> {
  const tmpBase = path.join(dir, `t${n++}`);
  const err = await t.throwsAsync(read(file, validateChecksum, tmpBase));
  t.true(err instanceof DomainError, String(err));
  t.is((err as DomainError).status, 400);
  t.regex(err!.message, pattern);
  t.deepEqual(leftovers(tmpBase), [], 'nothing extracted is left behind');
}

test('a valid package reads whole: manifest, modules, a bucket whose objects give their bytes', async (t) => {
  const tmpBase = path.join(dir, `t${n++}`);
  const p = await read(await packageFile(), true, tmpBase);
  t.is(leftovers(tmpBase).length, 1, 'the bucket\'s ZIP, extracted for reading');
  t.is(p.manifest.package.app_slug, 'crm');
  t.deepEqual(Object.keys(p.modules).sort(), ['app', 'app_roles', 'storage']);
  t.like(p.modules.app_roles, { roles: [{ name: 'staff' }] });
  const media = p.buckets.get('media')!;
  const [logo] = media.metadata.objects;
  const chunks: Buffer[] = [];
  for await (const c of await media.open(logo!)) chunks.push(c as Buffer);
  t.is(Buffer.concat(chunks).toString(), 'the logo');
  t.deepEqual(p.warnings, []);
  await p.close();
  t.deepEqual(leftovers(tmpBase), [], 'the extracted bucket ZIP is removed');
});

test('every export option is a flag of the manifest', async (t) => {
  const p = await read(await packageFile());
  t.deepEqual(Object.keys(p.manifest.export_options), EXPORT_OPTIONS.map((o) => o.key));
  await p.close();
});

test('frontend_workers/ and widgets/ are read as skipped, with a warning', async (t) => {
  const contents = { ...(await files()), 'frontend_workers/metadata.json': json({ workers: [] }), 'widgets/metadata.json': json({ widgets: [] }) };
  const p = await read(await packageFile({ contents }));
  t.deepEqual(p.warnings.map((w) => w.split(':')[0]), ['frontend_workers', 'widgets']);
  t.false('frontend_workers' in p.modules);
  await p.close();
});

test('hostile: a path leaving the archive', async (t) => {
  const file = await packageFile({ unlisted: [{ name: 'app/zz/evil.json', data: json({}) }], tamper: (b) => replaceAll(b, 'app/zz/evil', 'app/../evil') });
  await refusal(t, file, /\.\./);
});

test('hostile: an absolute path and a backslash', async (t) => {
  await refusal(t, await packageFile({ unlisted: [{ name: 'zzpp/x.json', data: json({}) }], tamper: (b) => replaceAll(b, 'zzpp/x.json', '/etc/x.json') }), /absolute|invalid/i);
  await refusal(t, await packageFile({ unlisted: [{ name: 'app/a_b.json', data: json({}) }], tamper: (b) => replaceAll(b, 'app/a_b.json', 'app\\a_b.json') }), /backslash|invalid/i);
});

test('hostile: a symbolic link', async (t) => {
  await refusal(t, await packageFile({ unlisted: [{ name: 'app/link', data: Buffer.from('/etc/passwd'), mode: 0o120777 }] }), /symbolic link/);
});

test('hostile: an expansion bomb (ratio above 200)', async (t) => {
  const contents = { ...(await files()), 'app/bomb.json': Buffer.alloc(20 * 1024 * 1024, 0x20) };
  await refusal(t, await packageFile({ contents }), /expands more than 200 times/);
});

test('hostile: a changed byte is caught by the digests; without validate_checksum only the digests are skipped', async (t) => {
  const file = await packageFile({ stored: true, tamper: (b) => replaceAll(b, '"parent_name":null', '"parent_name":"x1"') });
  await refusal(t, file, /"app_roles\/metadata\.json" does not match its digest/);
  const p = await read(file, false);
  t.like(p.modules.app_roles, { roles: [{ parent_name: 'x1' }] });
  await p.close();
});

test('hostile: a changed manifest is caught by its checksum; a bucket object\'s changed bytes by its digest', async (t) => {
  await refusal(t, await packageFile({ patch: (m) => (m.created_by = 'mallory') }), /manifest_checksum/);
  const contents = await files();
  // The bucket's ZIP made again with other bytes under the same metadata: the package's own digests are right, the object's is not.
  contents['storage/buckets/media.zip'] = await zipOf([
    { name: 'img/logo.txt', data: Buffer.from('the LOGO') },
    { name: BUCKET_METADATA, data: await bucketMetadataOf(contents) },
  ]);
  await refusal(t, await packageFile({ contents }), /media\.zip: "img\/logo\.txt" does not match its digest/);
});

/** The bucket metadata of the valid package (its object's digest is that of "the logo"). */
async function bucketMetadataOf(contents: Record<string, Buffer>): Promise<Buffer> {
  const file = path.join(dir, `b${n++}.zip`);
  fs.writeFileSync(file, contents['storage/buckets/media.zip']!);
  const AdmZip = (await import('adm-zip')).default;
  const data = new AdmZip(file).readFile(BUCKET_METADATA)!;
  fs.rmSync(file);
  return data;
}

test('hostile: unknown top-level folders and files, unlisted and missing files', async (t) => {
  await refusal(t, await packageFile({ unlisted: [{ name: 'extra/x.json', data: json({}) }] }), /unknown top-level folder "extra\/"/);
  await refusal(t, await packageFile({ unlisted: [{ name: 'readme.txt', data: Buffer.from('hi') }] }), /unknown file "readme\.txt"/);
  await refusal(t, await packageFile({ unlisted: [{ name: 'app/extra.json', data: json({}) }] }), /"app\/extra\.json" is in the archive but not listed/);
  await refusal(t, await packageFile({ patch: (m) => (m.modules.app!.files['app/gone.json'] = `sha256:${'0'.repeat(64)}`) }), /"app\/gone\.json" is listed in the manifest but not in the archive/);
});

test('hostile: a newer format version, a newer platform requirement, another format', async (t) => {
  await refusal(t, await packageFile({ patch: (m) => (m.version = '2.0.0') }), /format version 2\.0\.0 is newer than 1\.0\.0/);
  await refusal(t, await packageFile({ patch: (m) => (m.requires.platform_version = '9.0.0') }), /requires\.platform_version 9\.0\.0/);
  await refusal(t, await packageFile({ patch: (m) => ((m as { format: string }).format = 'zip') }), /format is "zip"/);
});

test('hostile: not a ZIP at all, and a ZIP without a manifest', async (t) => {
  const junk = path.join(dir, `j${n++}.zip`);
  fs.writeFileSync(junk, 'not a zip');
  await refusal(t, junk, /not a ZIP archive/);
  const bare = path.join(dir, `j${n++}.zip`);
  fs.writeFileSync(bare, await zipOf([{ name: 'app/metadata.json', data: json({}) }]));
  await refusal(t, bare, /manifest\.json is missing/);
});
