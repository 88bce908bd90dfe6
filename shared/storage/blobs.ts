// The blob journal (docs/storage.md "The blob journal"): `storage_blob_journal` names every blob
// that may be in the store without a record — an upload or copy in flight (`upload`), a blob a
// replace or delete left behind (`orphan`) — so nothing half-made outlives a failure or a crash.
import type { EntityManager } from '@mikro-orm/postgresql';
import { rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import type { ObjectStore, SiteStore } from './objstore/types.ts';

export const journal = (em: EntityManager, schema: string, keys: string[], reason: 'upload' | 'orphan') =>
  keys.length ? em.execute(`INSERT INTO ${quotedSchema(schema)}.storage_blob_journal (blob_key, reason) SELECT jsonb_array_elements_text(?::jsonb), ? ON CONFLICT (blob_key) DO UPDATE SET reason = EXCLUDED.reason`, [JSON.stringify(keys), reason]) : Promise.resolve();

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
 * Removes what crashed or failed writes left: journaled blobs no object holds — uploads in flight
 * for longer than `uploadGraceMs` (a live upload is never touched before that), orphans at once.
 */
export async function sweepBlobs(em: EntityManager, store: ObjectStore, schema: string, uploadGraceMs = 24 * 3600_000): Promise<number> {
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
