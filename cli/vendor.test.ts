// The CLI's vendored libraries (cli/vendor.ts): made by the install, one instance of each class
// whichever entry point imports it, and never used when made from other versions.
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { pathToFileURL } from 'node:url';
import test from 'ava';
import { buildVendorBundle, currentVendorMap } from './vendor.ts';

// Inside the project's node_modules like the real one: the imports the bundle leaves to Node (pg…) resolve from there.
const cacheDir = path.resolve(import.meta.dirname, '../node_modules/.cache');
fs.mkdirSync(cacheDir, { recursive: true });
const dir = fs.mkdtempSync(path.join(cacheDir, 'platform-vendor-test-'));
const bundle = path.join(dir, 'bundle');
test.after.always(() => fs.rmSync(dir, { recursive: true, force: true }));

test.serial('the install (npm ci: prepare) made a bundle of the installed versions', (t) => {
  const map = currentVendorMap();
  t.truthy(map, 'node_modules/.cache/platform-vendor is missing or stale: npm run vendor');
  t.truthy(map?.files['@mikro-orm/postgresql']);
});

test.serial('a bundle resolves every vendored specifier, and each class exists once', async (t) => {
  const map = await buildVendorBundle(bundle);
  for (const file of Object.values(map.files)) t.true(fs.existsSync(path.join(bundle, file)), file);
  t.deepEqual(currentVendorMap(bundle), map);
  // In a process that uses it, as bin/run.js does: the specifiers name the bundle's files, and
  // core's and sql's classes reached through the driver package are theirs (shared chunks).
  const probe = `import { useVendorBundle } from ${JSON.stringify(pathToFileURL(path.resolve(import.meta.dirname, 'vendor.ts')).href)};
     if (!useVendorBundle(${JSON.stringify(bundle)})) throw new Error('bundle not used');
     const pg = await import('@mikro-orm/postgresql');
     const core = await import('@mikro-orm/core');
     const sql = await import('@mikro-orm/sql');
     const { Type } = await import('@sinclair/typebox');
     console.log(JSON.stringify({ resolved: import.meta.resolve('kysely'), same: pg.Utils === core.Utils && pg.Reference === core.Reference && pg.SqlEntityManager === sql.SqlEntityManager, schema: Type.Object({ a: Type.String() }).type }));`;
  const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', probe], { cwd: path.resolve(import.meta.dirname, '..'), encoding: 'utf8' });
  const out = JSON.parse(stdout) as { resolved: string; same: boolean; schema: string };
  t.is(out.resolved, pathToFileURL(path.join(bundle, map.files.kysely!)).href);
  t.true(out.same);
  t.is(out.schema, 'object');
});

test.serial('made again from the same install (npx runs `prepare`), the bundle stays as it is; a build of other versions goes', async (t) => {
  const map = currentVendorMap(bundle)!;
  const chunksDir = path.join(bundle, path.dirname(map.files.kysely!), 'chunks');
  const chunks = fs.readdirSync(chunksDir).map((name) => path.join(chunksDir, name));
  const before = chunks.map((file) => fs.statSync(file).ino);
  fs.mkdirSync(path.join(bundle, 'an-older-build/chunks'), { recursive: true });
  t.deepEqual(await buildVendorBundle(bundle), map);
  // The same files, never removed and made again (a command loading its chunks meanwhile finds them).
  t.deepEqual(chunks.map((file) => fs.statSync(file).ino), before);
  t.false(fs.existsSync(path.join(bundle, 'an-older-build')));
  t.deepEqual(fs.readdirSync(bundle).sort(), [path.dirname(map.files.kysely!), 'map.json'].sort());
});

test.serial('a bundle made from other versions (or of other packages) is not used', (t) => {
  const file = path.join(bundle, 'map.json');
  const map = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.writeFileSync(file, JSON.stringify({ ...map, versions: { ...map.versions, kysely: '0.0.1' } }));
  t.is(currentVendorMap(bundle), undefined);
  const { kysely: _kysely, ...others } = map.versions;
  fs.writeFileSync(file, JSON.stringify({ ...map, versions: others }));
  t.is(currentVendorMap(bundle), undefined);
  fs.rmSync(file);
  t.is(currentVendorMap(bundle), undefined);
});
