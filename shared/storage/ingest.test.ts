// The one way into a bucket stays the only one (issue 29 #5): no module but ingest.ts inserts
// storage_objects rows or changes what a row points at (its bucket, path, bytes, size or type).
// A guard on the sources, tested on planted statements first.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import test from 'ava';
import { admit } from './ingest.ts';
import { UploadRejected } from './inspect.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const THE_WAY_IN = 'shared/storage/ingest.ts';

/** The statements in `source` that insert object rows or set what a row points at. */
function objectRowWrites(source: string): string[] {
  const found: string[] = [];
  for (const m of source.matchAll(/\b(?:INSERT\s+INTO|MERGE\s+INTO|COPY)\s+[^`;\s]{0,80}storage_objects\b/gi)) found.push(m[0]);
  for (const m of source.matchAll(/\bUPDATE\s+[^`;\s]{0,80}storage_objects\s+(?:AS\s+\w+\s+|\w+\s+)?SET\s([^`;]{0,600}?)(?:\bWHERE\b|\bFROM\b|`|;)/gi)) {
    if (/\b(?:blob_key|path|bucket_id|size|mimetype|etag)\s*=/i.test(m[1]!)) found.push(m[0]);
  }
  return found;
}

async function sources(dir: string): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(path.join(ROOT, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) {
      if (entry.name !== 'testing' && entry.name !== 'node_modules') out.push(...(await sources(rel)));
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.test.ts')) out.push(rel);
  }
  return out;
}

test('issue 29 #5: the guard finds object-row writes that would bypass the ingest check (planted statements)', (t) => {
  const planted = [
    'await em.execute(`INSERT INTO ${q}.storage_objects (uuid, bucket_id, path) VALUES (?, ?, ?)`, p);',
    "tx.execute('insert into \"site_a\".storage_objects select * from x')",
    'rows(tx, `UPDATE ${q}.storage_objects SET blob_key = ?, size = ? WHERE id = ?`, p)',
    'rows(tx, `UPDATE ${q}.storage_objects o SET bucket_id = ? WHERE o.id = ?`, p)',
    'rows(tx, `UPDATE ${q}.storage_objects\n   SET modified_by = ?, path = ? WHERE id = ?`, p)',
  ];
  for (const code of planted) t.is(objectRowWrites(code).length, 1, code);
  const harmless = [
    'rows(tx, `UPDATE ${q}.storage_objects SET metadata = ?::jsonb, modified_by = ?, updated_at = now() WHERE id = ?`, p)',
    'rows(tx, `DELETE FROM ${q}.storage_objects WHERE bucket_id = ?`, p)',
    'rows(tx, `SELECT * FROM ${q}.storage_objects WHERE path = ?`, p)',
    'rows(tx, `UPDATE ${q}.storage_buckets SET file_size_limit = ? WHERE id = ?`, p)',
  ];
  for (const code of harmless) t.deepEqual(objectRowWrites(code), [], code);
});

test('issue 29 #5: no module but shared/storage/ingest.ts inserts object rows or changes what they point at', async (t) => {
  const offenders: string[] = [];
  let theWayIn = 0;
  for (const file of [...(await sources('shared')), ...(await sources('server')), ...(await sources('cli'))]) {
    const writes = objectRowWrites(await readFile(path.join(ROOT, file), 'utf8'));
    if (file === THE_WAY_IN) theWayIn = writes.length;
    else offenders.push(...writes.map((w) => `${file}: ${w.slice(0, 80)}`));
  }
  t.deepEqual(offenders, [], 'object rows are written by ingestObject only (shared/storage/ingest.ts)');
  t.true(theWayIn >= 3, 'the guard sees the writes of ingest.ts itself (insert, replace, move)');
});

test('admit: the bucket\'s size limit and allowed types, with the upload\'s texts', (t) => {
  const rules = { file_size_limit: 100, allowed_mime_types: ['image/png', 'text/*'] };
  t.notThrows(() => admit(rules, { size: 100, mimetype: 'image/png' }));
  t.notThrows(() => admit(rules, { size: 1, mimetype: 'text/csv' }));
  t.notThrows(() => admit({ file_size_limit: '100', allowed_mime_types: [] }, { size: 99, mimetype: 'text/html' }));
  const big = t.throws(() => admit(rules, { size: 101, mimetype: 'image/png' }), { instanceOf: UploadRejected });
  t.is(big.message, 'File size 101 bytes exceeds the limit of 100 bytes.');
  t.is(big.reason, 'too_large');
  t.notThrows(() => admit(rules, { size: 10, mimetype: 'text/html' }), 'text/* admits it');
  const type = t.throws(() => admit({ ...rules, allowed_mime_types: ['image/png'] }, { size: 10, mimetype: 'text/html' }), { instanceOf: UploadRejected });
  t.is(type.message, 'File type "text/html" is not allowed. Allowed types: image/png.');
  t.is(type.reason, 'type_not_allowed');
});
