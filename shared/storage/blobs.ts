// The blob journal (docs/storage.md "The blob journal"): `storage_blob_journal` names every blob
// that may be in the store without a record — an upload or copy in flight (`upload`) in a store
// that cannot stage, a blob a replace or delete left behind (`orphan`) — so nothing half-made
// outlives a failure or a crash. A staged blob (the filesystem's uploads: SiteStore.stage) is
// its own entry: the sweep publishes those a row holds and removes the others.
import type { EntityManager } from '@mikro-orm/postgresql';
import { rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import type { ObjectStore, SiteStore } from './objstore/types.ts';

/** The statement journaling what `select` gives (blob key, reason) in the schema `q` (quoted): also a part of a larger statement. */
export const journalSql = (q: string, select: string): string =>
  `INSERT INTO ${q}.storage_blob_journal (blob_key, reason) ${select} ON CONFLICT (blob_key) DO UPDATE SET reason = EXCLUDED.reason`;

export const journal = (em: EntityManager, schema: string, keys: string[], reason: 'upload' | 'orphan') =>
  keys.length ? em.execute(journalSql(quotedSchema(schema), 'SELECT jsonb_array_elements_text(?::jsonb), ?'), [JSON.stringify(keys), reason]) : Promise.resolve();

export const unjournal = (em: EntityManager, schema: string, keys: string[]) =>
  keys.length ? em.execute(`DELETE FROM ${quotedSchema(schema)}.storage_blob_journal WHERE blob_key = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`, [JSON.stringify(keys)]) : Promise.resolve();

/** Removes blobs that no record holds any more, then their journal rows; a store failure leaves them journaled for the sweep. */
export async function dropBlobs(em: EntityManager, store: SiteStore, schema: string, keys: string[]): Promise<void> {
  if (!keys.length) return;
  try {
    await store.delete(keys);
    await unjournal(em, schema, keys);
  } catch {
    // The sweep retries.
  }
}

/**
 * Finishes or removes what crashed or failed writes left: staged blobs a row holds are published
 * (a crash came between the row's commit and the move), the others removed once staged for
 * longer than `uploadGraceMs` (a live upload is never touched before that); journaled blobs no
 * object holds — uploads in flight for longer than `uploadGraceMs`, orphans at once — removed.
 */
export async function sweepBlobs(em: EntityManager, store: ObjectStore, schema: string, uploadGraceMs = 24 * 3600_000): Promise<number> {
  return (await sweepStaged(em, store.site(schema), schema, uploadGraceMs)) + (await sweepJournal(em, store, schema, uploadGraceMs));
}

async function sweepStaged(em: EntityManager, site: SiteStore, schema: string, uploadGraceMs: number): Promise<number> {
  if (!site.staged) return 0;
  const found: { key: string; ageMs: number }[] = [];
  for await (const entry of site.staged()) found.push(entry);
  let swept = 0;
  for (let i = 0; i < found.length; i += 1000) {
    const batch = found.slice(i, i + 1000);
    const held = new Set((await rows<{ blob_key: string }>(em, `SELECT blob_key FROM ${quotedSchema(schema)}.storage_objects WHERE blob_key = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`, [JSON.stringify(batch.map((e) => e.key))])).map((r) => r.blob_key));
    for (const e of batch) if (held.has(e.key)) await site.publish!(e.key);
    const stale = batch.filter((e) => !held.has(e.key) && e.ageMs > uploadGraceMs).map((e) => e.key);
    await site.delete(stale);
    swept += held.size + stale.length;
  }
  return swept;
}

async function sweepJournal(em: EntityManager, store: ObjectStore, schema: string, uploadGraceMs: number): Promise<number> {
  const q = quotedSchema(schema);
  const stale = await rows<{ blob_key: string }>(
    em,
    `SELECT j.blob_key FROM ${q}.storage_blob_journal j
      WHERE (j.reason = 'orphan' OR j.created_at < now() - (? * interval '1 millisecond'))
        AND NOT EXISTS (SELECT 1 FROM ${q}.storage_objects o WHERE o.blob_key = j.blob_key)
      LIMIT 1000`,
    [uploadGraceMs],
  );
  const keys = stale.map((r) => r.blob_key);
  if (!keys.length) return 0;
  await store.site(schema).delete(keys);
  await unjournal(em, schema, keys);
  return keys.length;
}
