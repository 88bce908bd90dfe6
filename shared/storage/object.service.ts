// Storage objects (spec Part 3 §2 "Object", §4 "Objects"): records in "<schema>".storage_objects,
// bytes in the object store under `blob_key`. Writes follow one protocol (docs/storage.md):
//   1. the new blob's key is journaled (storage_blob_journal, committed) before any byte is written;
//   2. the bytes stream through the inspection (size, type: ingest.ts) into the store;
//   3. one transaction points the object's row at the new blob and journals the old one;
//   4. after the commit the old blob is removed and the journal rows go.
// So readers see the old or the new bytes, never a mix; a failed upload leaves no record and its
// blob is removed at once; a crash leaves journal rows that the sweep (sweepBlobs) clears.
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import { activeApp } from '../apps/lookup.ts';
import type { Action } from '../auth/actor.ts';
import { actorUuid, readsOf, type ServiceContext } from '../context.ts';
import { firstRow, iso, rows } from '../db/sql.ts';
import { uniqueViolation } from '../common/slug.ts';
import { DomainError, notAuthenticated, notFound, permissionDenied, validationError, type FieldErrors } from '../errors.ts';
import { READ_ONLY_MESSAGE, sameValue } from '../common/read-only.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { objectsAllowed, requireNewObject, requireObject, ruleAllows, type ObjectAction, type ObjectRow } from './access.ts';
import { doclibUnavailable, findBucket, StorageFailure, type BucketTarget } from './bucket.service.ts';
import { ingest, isDocumentEditable } from './ingest.ts';
import { filenameOf, metadataValue, normalizeKey } from './keys.ts';
import { BlobNotFound, type ObjectStore, type SiteStore } from './objstore/types.ts';

export interface ObjectView {
  id: number;
  uuid: string;
  bucket: number;
  bucket_slug: string;
  bucket_name: string;
  filename: string;
  file_path: string;
  file_url: string;
  size: number;
  mimetype: string;
  metadata: Record<string, unknown>;
  visibility: 'private' | 'public' | null;
  is_document_editable: boolean;
  created_at: string;
  updated_at: string;
  created_by: string | null;
  modified_by: string | null;
}

/** The API path that downloads an object (host-relative; each key segment URL-encoded). */
export const objectUrl = (b: BucketTarget, key: string): string =>
  `/api/apps/${encodeURIComponent(b.app.slug)}/storage/buckets/${encodeURIComponent(b.bucket.slug)}/objects/${key.split('/').map(encodeURIComponent).join('/')}`;

export function objectView(b: BucketTarget, o: ObjectRow): ObjectView {
  return {
    id: Number(o.id),
    uuid: o.uuid,
    bucket: Number(b.bucket.id),
    bucket_slug: b.bucket.slug,
    bucket_name: b.bucket.name,
    filename: o.filename,
    file_path: o.path,
    file_url: objectUrl(b, o.path),
    size: Number(o.size),
    mimetype: o.mimetype,
    metadata: o.metadata,
    visibility: o.visibility,
    is_document_editable: isDocumentEditable(o.mimetype),
    created_at: iso(o.created_at),
    updated_at: iso(o.updated_at),
    created_by: o.created_by,
    modified_by: o.modified_by,
  };
}

/**
 * The bucket whose objects a call works on, if the actor may `action` objects of this site at
 * all (CASL on StorageObject); per-object rules and policies come after (access.ts).
 */
export async function objectsBucket(ctx: ServiceContext, appSlug: string, bucketSlug: string, action: Action): Promise<BucketTarget> {
  const schema = await siteSchemaFor(ctx, action, 'StorageObject');
  const app = await activeApp(readsOf(ctx), schema, appSlug);
  const bucket = await findBucket(readsOf(ctx), schema, app, bucketSlug);
  await authorizeSiteSubject(ctx, action, 'StorageObject', { schema, app: app.slug, bucket: bucket.slug });
  return { schema, app, bucket };
}

export async function findObject(em: EntityManager, b: BucketTarget, key: string, lock = false): Promise<ObjectRow | undefined> {
  return firstRow<ObjectRow>(em, `SELECT * FROM ${quotedSchema(b.schema)}.storage_objects WHERE bucket_id = ? AND path = ?${lock ? ' FOR UPDATE' : ''}`, [b.bucket.id, key]);
}

const objectNotFound = (key: string) => notFound(`Object "${key}"`);

/** An existing object the actor may `action`: 404 when absent or when the caller may not even read it (nothing learnt of its existence), 403 otherwise. */
export async function objectFor(ctx: ServiceContext, b: BucketTarget, key: string, action: ObjectAction): Promise<ObjectRow> {
  const o = await findObject(readsOf(ctx), b, key);
  if (!o) throw objectNotFound(key);
  if (!(await objectsAllowed(ctx, b, action, [o]))[0]) throw ruleAllows(ctx, b, o, 'read') ? permissionDenied() : objectNotFound(key);
  return o;
}

/**
 * An anonymous read (no token): public objects only, the object's visibility or else its
 * bucket's; a private one is a 401, a missing one a 404.
 */
export async function publicObject(em: EntityManager, schema: string, appSlug: string, bucketSlug: string, key: string): Promise<{ b: BucketTarget; o: ObjectRow }> {
  const app = await activeApp(em, schema, appSlug);
  const b = { schema, app, bucket: await findBucket(em, schema, app, bucketSlug) };
  const o = await findObject(em, b, key);
  if (!o) throw objectNotFound(key);
  if ((o.visibility ?? b.bucket.visibility) !== 'public') throw notAuthenticated();
  return { b, o };
}

// ---- the blob journal -------------------------------------------------------------------------

const journal = (em: EntityManager, schema: string, keys: string[], reason: 'upload' | 'orphan') =>
  keys.length ? em.execute(`INSERT INTO ${quotedSchema(schema)}.storage_blob_journal (blob_key, reason) SELECT jsonb_array_elements_text(?::jsonb), ? ON CONFLICT (blob_key) DO UPDATE SET reason = EXCLUDED.reason`, [JSON.stringify(keys), reason]) : Promise.resolve();
const unjournal = (em: EntityManager, schema: string, keys: string[]) =>
  keys.length ? em.execute(`DELETE FROM ${quotedSchema(schema)}.storage_blob_journal WHERE blob_key = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`, [JSON.stringify(keys)]) : Promise.resolve();

/** Removes blobs that no record holds any more, then their journal rows; a store failure leaves them journaled for the sweep. */
async function dropBlobs(em: EntityManager, store: SiteStore, schema: string, keys: string[]): Promise<void> {
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

// ---- writes -----------------------------------------------------------------------------------

export interface BlobInput {
  body: Readable;
  /** The Content-Type the client declared (the type is sniffed from the bytes: ingest.ts). */
  declaredType?: string;
  /** Content-Length when known: a body declared over the limit is refused before a byte is read. */
  declaredSize?: number;
  /** The file's name, for the type of text files without a declared type. */
  filename: string;
}

/** Bytes stored under a new, journaled key, not yet any object's (commitBlob or dropBlob follows). */
export interface StoredBlob {
  blobKey: string;
  size: number;
  etag: string;
  mimetype: string;
}

/**
 * Streams an upload through the inspection (bucket size limit, sniffed type against the allowed
 * types) into a new blob of the bucket. Whatever fails, nothing is left behind.
 */
export async function storeBlob(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, input: BlobInput): Promise<StoredBlob> {
  const inspected = await ingest(input.body, { limit: Number(b.bucket.file_size_limit), declaredType: input.declaredType, declaredSize: input.declaredSize, filename: input.filename, allowed: b.bucket.allowed_mime_types });
  const site = store.site(b.schema);
  const blobKey = `${b.bucket.uuid}/${randomUUID()}`;
  const em = readsOf(ctx);
  await journal(em, b.schema, [blobKey], 'upload');
  try {
    const stored = await site.put(blobKey, inspected.body, { contentType: inspected.mimetype });
    return { blobKey, size: stored.size, etag: stored.etag, mimetype: inspected.mimetype };
  } catch (err) {
    await dropBlobs(em, site, b.schema, [blobKey]);
    throw err;
  }
}

/** Removes a stored blob that will not become an object (a refused or failed upload). */
export const dropBlob = (ctx: ServiceContext, store: ObjectStore, b: BucketTarget, blob: StoredBlob): Promise<void> =>
  dropBlobs(readsOf(ctx), store.site(b.schema), b.schema, [blob.blobKey]);

/**
 * 403 unless the actor may upload at `key` (before any byte is read): replacing an object needs
 * being its owner or staff. The policies are asked once the bytes' type and size are known (commitBlob).
 */
export async function checkUploadTarget(ctx: ServiceContext, b: BucketTarget, key: string): Promise<void> {
  const existing = await findObject(readsOf(ctx), b, key);
  if (existing && !ruleAllows(ctx, b, existing, 'upload')) throw permissionDenied();
}

/**
 * The check of a write at `key`, run under the row's lock with the row found there (if any):
 * a new path needs `upload` on the object as it will be; replacing needs being the owner or
 * staff, and `upload` on the object as it will be.
 */
const uploadCheck = (ctx: ServiceContext, b: BucketTarget, key: string, will: { size: number; mimetype: string; metadata: Record<string, unknown>; visibility?: 'private' | 'public' | null }) =>
  async (current: ObjectRow | undefined): Promise<void> => {
    const resource = { path: key, filename: filenameOf(key), size: will.size, mimetype: will.mimetype, metadata: will.metadata, visibility: will.visibility ?? current?.visibility ?? null, created_by: current ? current.created_by : actorUuid(ctx) };
    if (!current) return requireNewObject(ctx, b, resource);
    if (!ruleAllows(ctx, b, current, 'upload')) throw permissionDenied();
    return requireObject(ctx, b, 'upload', { ...current, ...resource });
  };

/**
 * Makes `blob` the object at `key`: created (201) or replaced (200: content, type, size and
 * metadata replaced, no duplicate). Needs `upload` on the object as it will be; on refusal or
 * failure the blob is removed.
 */
export async function commitBlob(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, key: string, blob: StoredBlob, options: { metadata?: Record<string, unknown>; visibility?: 'private' | 'public' | null } = {}): Promise<{ created: boolean; object: ObjectView }> {
  const metadata = options.metadata ?? {};
  const row = await writeBlobRow(ctx, store, b, key, {
    blobKey: blob.blobKey, size: blob.size, etag: blob.etag, mimetype: blob.mimetype, metadata, visibility: options.visibility, who: actorUuid(ctx),
    check: uploadCheck(ctx, b, key, { size: blob.size, mimetype: blob.mimetype, metadata, visibility: options.visibility }),
  });
  return { created: row.created, object: objectView(b, row.row) };
}

interface RowWrite {
  blobKey: string;
  size: number;
  etag: string;
  mimetype: string;
  metadata: Record<string, unknown>;
  visibility?: 'private' | 'public' | null;
  who: string | null;
  /** Refuses the write (throws) given the row at the key, if any, under its lock. */
  check: (current: ObjectRow | undefined) => Promise<void>;
}

/**
 * Points the row at `key` at a stored blob (inserted, or replacing the one there: its old blob
 * journaled and removed after the commit). On refusal or failure the new blob is removed.
 */
async function writeBlobRow(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, key: string, w: RowWrite): Promise<{ created: boolean; row: ObjectRow }> {
  const em = readsOf(ctx);
  const site = store.site(b.schema);
  let result: { created: boolean; row: ObjectRow; old?: string };
  try {
    result = await ctx.em.transactional((tx) => writeRow(tx, b, key, w));
  } catch (err) {
    await dropBlobs(em, site, b.schema, [w.blobKey]);
    throw err;
  }
  if (result.old) await dropBlobs(em, site, b.schema, [result.old]);
  return result;
}

/** In `tx`: inserts the row at `key`, or replaces the one there (its old blob journaled as an orphan). */
async function writeRow(tx: EntityManager, b: BucketTarget, key: string, w: RowWrite): Promise<{ created: boolean; row: ObjectRow; old?: string }> {
  const q = quotedSchema(b.schema);
  for (;;) {
    const current = await findObject(tx, b, key, true);
    await w.check(current);
    if (current) {
      const [row] = await rows<ObjectRow>(
        tx,
        `UPDATE ${q}.storage_objects SET blob_key = ?, size = ?, etag = ?, mimetype = ?, metadata = ?::jsonb, visibility = coalesce(?, visibility),
                filename = ?, modified_by = ?, updated_at = now() WHERE id = ? RETURNING *`,
        [w.blobKey, w.size, w.etag, w.mimetype, JSON.stringify(w.metadata), w.visibility ?? null, filenameOf(key), w.who, current.id],
      );
      await journal(tx, b.schema, [current.blob_key], 'orphan');
      await unjournal(tx, b.schema, [w.blobKey]);
      return { created: false, row: row!, old: current.blob_key };
    }
    const [row] = await rows<ObjectRow>(
      tx,
      `INSERT INTO ${q}.storage_objects (uuid, bucket_id, path, filename, size, mimetype, metadata, visibility, blob_key, etag, created_by, modified_by)
       VALUES (?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?) ON CONFLICT (bucket_id, path) DO NOTHING RETURNING *`,
      [randomUUID(), b.bucket.id, key, filenameOf(key), w.size, w.mimetype, JSON.stringify(w.metadata), w.visibility ?? null, w.blobKey, w.etag, w.who, w.who],
    );
    if (row) {
      await unjournal(tx, b.schema, [w.blobKey]);
      return { created: true, row };
    }
    // Another upload made the row since: replace it (under its lock) instead.
  }
}

/** The bytes of an object, opened: a replace committed meanwhile is followed (the old blob may be gone). */
export async function openObject(em: EntityManager, store: ObjectStore, b: BucketTarget, o: ObjectRow, range?: { start: number; end: number }): Promise<{ row: ObjectRow; stream: Readable }> {
  let row = o;
  for (let attempt = 0; ; attempt++) {
    try {
      return { row, stream: await store.site(b.schema).get(row.blob_key, range) };
    } catch (err) {
      if (!(err instanceof BlobNotFound) || attempt >= 2) throw err instanceof BlobNotFound ? new StorageFailure(`The bytes of object "${o.path}" are missing from storage.`) : err;
      const again = await findObject(em, b, o.path);
      if (!again) throw objectNotFound(o.path);
      row = again;
    }
  }
}

/**
 * PATCH (spec §4): `metadata` (replaced whole) and `visibility` (null: the bucket's). The other
 * fields of the object may be sent back as GET gave them (ignored); another value is a 400.
 */
export async function patchObject(ctx: ServiceContext, b: BucketTarget, key: string, input: Record<string, unknown>): Promise<ObjectView> {
  const o = await objectFor(ctx, b, key, 'update');
  const current = objectView(b, o) as unknown as Record<string, unknown>;
  const errors: FieldErrors = {};
  for (const [field, value] of Object.entries(input)) {
    if (field === 'metadata' || field === 'visibility') continue;
    if (!(field in current)) errors[field] = ['Unknown field: metadata and visibility can change.'];
    else if (!sameValue(value, current[field])) errors[field] = [READ_ONLY_MESSAGE];
  }
  const metadata = input.metadata === undefined ? undefined : metadataValue(input.metadata);
  let visibility: 'private' | 'public' | null | undefined;
  if (input.visibility !== undefined) {
    if (input.visibility === null || input.visibility === 'private' || input.visibility === 'public') visibility = input.visibility;
    else errors.visibility = ['One of private, public, or null (the bucket\'s).'];
  }
  if (Object.keys(errors).length) throw validationError(errors);
  const set: string[] = [];
  const params: unknown[] = [];
  if (metadata !== undefined) {
    set.push('metadata = ?::jsonb');
    params.push(JSON.stringify(metadata));
  }
  if (visibility !== undefined) {
    set.push('visibility = ?');
    params.push(visibility);
  }
  if (!set.length) return objectView(b, o);
  const [row] = await rows<ObjectRow>(ctx.em, `UPDATE ${quotedSchema(b.schema)}.storage_objects SET ${set.join(', ')}, modified_by = ?, updated_at = now() WHERE id = ? RETURNING *`, [...params, actorUuid(ctx), o.id]);
  if (!row) throw objectNotFound(key);
  return objectView(b, row);
}

/** Deletes objects' records in one statement and then their blobs (journaled in the same transaction). */
async function deleteRows(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, ids: (string | number)[]): Promise<string[]> {
  const q = quotedSchema(b.schema);
  const deleted = await ctx.em.transactional(async (tx) => {
    const gone = await rows<{ path: string; blob_key: string }>(tx, `DELETE FROM ${q}.storage_objects WHERE bucket_id = ? AND id IN (SELECT jsonb_array_elements_text(?::jsonb)::bigint) RETURNING path, blob_key`, [b.bucket.id, JSON.stringify(ids.map(String))]);
    await journal(tx, b.schema, gone.map((g) => g.blob_key), 'orphan');
    return gone;
  });
  await dropBlobs(readsOf(ctx), store.site(b.schema), b.schema, deleted.map((d) => d.blob_key));
  return deleted.map((d) => d.path);
}

export async function deleteObject(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, key: string): Promise<void> {
  const o = await objectFor(ctx, b, key, 'delete');
  if (!(await deleteRows(ctx, store, b, [o.id])).length) throw objectNotFound(key);
}

export const MAX_BATCH_DELETE = 100;

/** Spec §4 batch-delete: paths deduplicated; the ones missing or denied are reported, not fatal. */
export async function batchDelete(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, paths: string[]): Promise<{ deleted_count: number; failed: { path: string; error: string }[] }> {
  if (!paths.length) throw validationError({ paths: ['Paths list cannot be empty'] });
  if (paths.length > MAX_BATCH_DELETE) throw validationError({ paths: [`Cannot delete more than ${MAX_BATCH_DELETE} objects at once`] });
  const unique = [...new Set(paths.map((p, i) => normalizeKey(p, `paths.${i}`)))];
  const found = await rows<ObjectRow>(readsOf(ctx), `SELECT * FROM ${quotedSchema(b.schema)}.storage_objects WHERE bucket_id = ? AND path = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`, [b.bucket.id, JSON.stringify(unique)]);
  const byPath = new Map(found.map((o) => [o.path, o]));
  const failed: { path: string; error: string }[] = [];
  const present = unique.filter((k) => byPath.has(k)).map((k) => byPath.get(k)!);
  const allowed = await objectsAllowed(ctx, b, 'delete', present);
  const readable = present.map((o) => ruleAllows(ctx, b, o, 'read'));
  const ids: (string | number)[] = [];
  present.forEach((o, i) => (allowed[i] ? ids.push(o.id) : failed.push({ path: o.path, error: readable[i] ? 'Permission denied.' : 'Object not found.' })));
  for (const k of unique) if (!byPath.has(k)) failed.push({ path: k, error: 'Object not found.' });
  const deleted = ids.length ? await deleteRows(ctx, store, b, ids) : [];
  const gone = new Set(deleted);
  for (const o of present) if (ids.includes(o.id) && !gone.has(o.path)) failed.push({ path: o.path, error: 'Object not found.' });
  return { deleted_count: deleted.length, failed };
}

/**
 * Copy (spec §4): a new object (new uuid, the metadata plus `copied_from`) at the destination,
 * in this bucket or another of the app; the source is unchanged. Needs `download` on the source
 * and `upload` at the destination (and, to replace an object there, being its owner or staff).
 */
export async function copyObject(ctx: ServiceContext, store: ObjectStore, src: BucketTarget, sourceKey: string, dst: BucketTarget, destKey: string): Promise<ObjectView> {
  const o = await objectFor(ctx, src, sourceKey, 'download');
  const blobKey = `${dst.bucket.uuid}/${randomUUID()}`;
  const em = readsOf(ctx);
  const site = store.site(src.schema);
  await journal(em, src.schema, [blobKey], 'upload');
  try {
    await site.copy(o.blob_key, blobKey);
  } catch (err) {
    await dropBlobs(em, site, src.schema, [blobKey]);
    if (err instanceof BlobNotFound) throw objectNotFound(sourceKey);
    throw new StorageFailure(`The object could not be copied in storage: ${(err as Error).message}`, err);
  }
  const metadata = { ...o.metadata, copied_from: { bucket: src.bucket.slug, path: o.path, uuid: o.uuid } };
  const size = Number(o.size);
  const { row } = await writeBlobRow(ctx, store, dst, destKey, {
    blobKey, size, etag: o.etag, mimetype: o.mimetype, metadata, visibility: o.visibility, who: actorUuid(ctx),
    check: uploadCheck(ctx, dst, destKey, { size, mimetype: o.mimetype, metadata, visibility: o.visibility }),
  });
  return objectView(dst, row);
}

/** Move (spec §4): same bucket, a new path for the same object (uuid and bytes kept); 409 when the destination exists. */
export async function moveObject(ctx: ServiceContext, b: BucketTarget, sourceKey: string, destKey: string): Promise<ObjectView> {
  const o = await objectFor(ctx, b, sourceKey, 'update');
  if (sourceKey === destKey) throw validationError({ destination_path: ['The destination is the source.'] });
  await requireNewObject(ctx, b, { ...o, path: destKey, filename: filenameOf(destKey) });
  const q = quotedSchema(b.schema);
  try {
    const [row] = await rows<ObjectRow>(ctx.em, `UPDATE ${q}.storage_objects SET path = ?, filename = ?, modified_by = ?, updated_at = now() WHERE id = ? RETURNING *`, [destKey, filenameOf(destKey), actorUuid(ctx), o.id]);
    if (!row) throw objectNotFound(sourceKey);
    return objectView(b, row);
  } catch (err) {
    if (uniqueViolation(err) === 'storage_objects_bucket_id_path_key') {
      throw new DomainError('CONFLICT', `An object already exists at "${destKey}".`);
    }
    throw err;
  }
}

/**
 * Document-library view/edit (spec §4): needs `read` (view) or `update` (edit) on the object; an
 * `objstore` object is a 422; a `doclib` bucket cannot exist in this build (doclibUnavailable).
 */
export async function documentAccess(ctx: ServiceContext, b: BucketTarget, key: string, mode: 'view' | 'edit', doclibEnabled: boolean): Promise<never> {
  await objectFor(ctx, b, key, mode === 'view' ? 'read' : 'update');
  if (b.bucket.storage_provider === 'objstore') {
    throw new DomainError('BUSINESS_LOGIC_ERROR', `Object "${key}" is in an objstore bucket: ${mode} access is for document-library buckets only.`, { extra: { code: 'VALIDATION_ERROR' } });
  }
  throw doclibUnavailable(doclibEnabled);
}
