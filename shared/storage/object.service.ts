// Storage objects (spec Part 3 §2 "Object", §4 "Objects"): records in "<schema>".storage_objects,
// bytes in the object store under `blob_key`. Every write that makes a row point at bytes
// (upload, copy, move) goes through the one way in, ingest.ts; the journal of blobs that no row
// holds yet or any more is blobs.ts. So readers see the old or the new bytes, never a mix; a
// failed upload leaves no record and its blob is removed at once; a crash leaves journal rows
// that the sweep (sweepBlobs) clears. docs/storage.md.
import { actorItem } from '../realtime/actor.ts';
import type { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import { activeApp, appNotFound, type ActiveApp } from '../apps/lookup.ts';
import type { Action } from '../auth/actor.ts';
import { actorUuid, readsOf, type ServiceContext } from '../context.ts';
import { iso, preparedRows, rows } from '../db/sql.ts';
import { DomainError, addFieldError, permissionDenied, validationError, type FieldErrors } from '../errors.ts';
import { READ_ONLY_MESSAGE, sameValue } from '../common/read-only.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { objectsAllowed, requireNewObject, requireObject, ruleAllows, type ObjectAction, type ObjectRow } from './access.ts';
import { dropBlobs, journalSql } from './blobs.ts';
import { bucketNotFound, doclibUnavailable, findBucket, StorageFailure, type BucketRow, type BucketTarget } from './bucket.service.ts';
import { copyBlob, ingestObject, type StoredBlob } from './ingest.ts';
import { isDocumentEditable } from './inspect.ts';
import { filenameOf, metadataValue, normalizeKey, objectNotFound } from './keys.ts';
import { BlobNotFound, type ObjectStore } from './objstore/types.ts';

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

/**
 * objectsBucket and the object at `key` in the bucket (undefined: none), the app, the bucket and
 * the object looked up by one named statement (lookupAt): the object routes' hot path.
 */
export async function objectsBucketAt(ctx: ServiceContext, appSlug: string, bucketSlug: string, action: Action, key: string): Promise<{ b: BucketTarget; o: ObjectRow | undefined }> {
  const schema = await siteSchemaFor(ctx, action, 'StorageObject');
  const found = await lookupAt(readsOf(ctx), schema, appSlug, bucketSlug, key);
  await authorizeSiteSubject(ctx, action, 'StorageObject', { schema, app: found.b.app.slug, bucket: found.b.bucket.slug });
  return found;
}

/** The active app, its bucket and the object at `key`: one statement; 404 for a missing app or bucket, as activeApp and findBucket answer. */
async function lookupAt(em: EntityManager, schema: string, appSlug: string, bucketSlug: string, key: string): Promise<{ b: BucketTarget; o: ObjectRow | undefined }> {
  const q = quotedSchema(schema);
  const [found] = await preparedRows<{ app: ActiveApp; bucket: BucketRow | null; object: ObjectRow | null }>(
    em,
    `SELECT jsonb_build_object('id', a.id, 'name', a.name, 'slug', a.slug) AS app, to_jsonb(b) AS bucket, to_jsonb(o) AS object
       FROM ${q}.apps a
       LEFT JOIN ${q}.storage_buckets b ON b.app_id = a.id AND b.slug = ?
       LEFT JOIN ${q}.storage_objects o ON o.bucket_id = b.id AND o.path = ?
      WHERE a.slug = ? AND a.is_active`,
    [bucketSlug, key, appSlug],
  );
  if (!found) throw appNotFound(appSlug);
  if (!found.bucket) throw bucketNotFound(bucketSlug);
  return { b: { schema, app: found.app, bucket: found.bucket }, o: found.object ?? undefined };
}

export async function findObject(em: EntityManager, b: BucketTarget, key: string): Promise<ObjectRow | undefined> {
  return (await preparedRows<ObjectRow>(em, `SELECT * FROM ${quotedSchema(b.schema)}.storage_objects WHERE bucket_id = ? AND path = ?`, [b.bucket.id, key]))[0];
}

/**
 * An existing object the actor may `action`. One the caller may not even read (the visibility
 * rule or the app's policies hide it) answers exactly as a missing one (404, same body): nothing
 * is learnt of its existence; one they may read but not `action` is a 403.
 */
export async function objectFor(ctx: ServiceContext, b: BucketTarget, key: string, action: ObjectAction): Promise<ObjectRow> {
  return permittedObject(ctx, b, key, await findObject(readsOf(ctx), b, key), action);
}

/** objectFor with the row at `key` already looked up (objectsBucketAt). */
export async function permittedObject(ctx: ServiceContext, b: BucketTarget, key: string, o: ObjectRow | undefined, action: ObjectAction): Promise<ObjectRow> {
  if (!o) throw objectNotFound(key);
  if ((await objectsAllowed(ctx, b, action, [o]))[0]) return o;
  const readable = action !== 'read' && (await objectsAllowed(ctx, b, 'read', [o]))[0];
  throw readable ? permissionDenied() : objectNotFound(key);
}

/**
 * An anonymous read (no token): public objects only (the object's visibility, else its bucket's).
 * Anything else (a private object, a missing one, a missing bucket or app) answers the same 404,
 * the object's: a caller without a token learns nothing of what exists.
 */
export async function publicObject(em: EntityManager, schema: string, appSlug: string, bucketSlug: string, key: string): Promise<{ b: BucketTarget; o: ObjectRow }> {
  try {
    const { b, o } = await lookupAt(em, schema, appSlug, bucketSlug, key);
    if (o && (o.visibility ?? b.bucket.visibility) === 'public') return { b, o };
  } catch (err) {
    if (!(err instanceof DomainError && err.code === 'NOT_FOUND')) throw err;
  }
  throw objectNotFound(key);
}

// ---- writes (through the one way in: ingest.ts) ------------------------------------------------

/**
 * 403 unless the actor may upload over `existing`, the object at the key (objectsBucketAt), before
 * any byte is read: replacing an object needs being its owner or staff. The policies are asked
 * once the bytes' type and size are known (commitBlob).
 */
export function checkUploadTarget(ctx: ServiceContext, b: BucketTarget, existing: ObjectRow | undefined): void {
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
  const { created, row } = await ingestObject(ctx, store, b, key, { blob, metadata, visibility: options.visibility, who: actorUuid(ctx) },
    uploadCheck(ctx, b, key, { size: blob.size, mimetype: blob.mimetype, metadata, visibility: options.visibility }));
  return { created, object: objectView(b, row) };
}

/** The bytes of an object, opened: a replace committed meanwhile is followed (the old blob may be gone). */
export async function openObject(em: EntityManager, store: ObjectStore, b: BucketTarget, o: ObjectRow, range?: { start: number; end: number }): Promise<{ row: ObjectRow; stream: Readable }> {
  let row = o;
  for (let attempt = 0; ; attempt++) {
    try {
      return { row, stream: await store.site(b.schema).get(row.blob_key, range, Number(row.size)) };
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
    if (!Object.hasOwn(current, field)) addFieldError(errors, field, 'Unknown field: metadata and visibility can change.');
    else if (!sameValue(value, current[field])) addFieldError(errors, field, READ_ONLY_MESSAGE);
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
  const by = actorItem(ctx);
  const [row] = await rows<ObjectRow>(ctx.em, `UPDATE ${quotedSchema(b.schema)}.storage_objects SET ${set.join(', ')}, modified_by = ?, updated_at = now()${by ? ` FROM ${by.sql}` : ''} WHERE id = ? RETURNING storage_objects.*`, [...params, actorUuid(ctx), ...(by?.params ?? []), o.id]);
  if (!row) throw objectNotFound(key);
  return objectView(b, row);
}

/**
 * Deletes objects' records and journals their blobs in one statement (atomic by itself: no
 * transaction), then removes the blobs. Each where it was found: one moved meanwhile (another
 * path now) is not deleted.
 */
async function deleteRows(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, found: Pick<ObjectRow, 'id' | 'path'>[]): Promise<string[]> {
  const q = quotedSchema(b.schema);
  const by = actorItem(ctx);
  const deleted = await preparedRows<{ path: string; blob_key: string }>(
    ctx.em,
    `WITH gone AS (
       DELETE FROM ${q}.storage_objects${by ? ` USING ${by.sql}` : ''} WHERE bucket_id = ? AND (id, path) IN (SELECT (e->>0)::bigint, e->>1 FROM jsonb_array_elements(?::jsonb) e) RETURNING path, blob_key
     ), journaled AS (${journalSql(q, "SELECT blob_key, 'orphan' FROM gone")})
     SELECT path, blob_key FROM gone`,
    [...(by?.params ?? []), b.bucket.id, JSON.stringify(found.map((o) => [String(o.id), o.path]))],
  );
  await dropBlobs(readsOf(ctx), store.site(b.schema), b.schema, deleted.map((d) => d.blob_key));
  return deleted.map((d) => d.path);
}

export async function deleteObject(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, key: string): Promise<void> {
  const o = await objectFor(ctx, b, key, 'delete');
  if (!(await deleteRows(ctx, store, b, [o])).length) throw objectNotFound(key);
}

export const MAX_BATCH_DELETE = 100;

/** Spec §4 batch-delete: paths deduplicated; the ones missing or denied are reported, not fatal (one the caller may not read as missing). */
export async function batchDelete(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, paths: string[]): Promise<{ deleted_count: number; failed: { path: string; error: string }[] }> {
  if (!paths.length) throw validationError({ paths: ['Paths list cannot be empty'] });
  if (paths.length > MAX_BATCH_DELETE) throw validationError({ paths: [`Cannot delete more than ${MAX_BATCH_DELETE} objects at once`] });
  const unique = [...new Set(paths.map((p, i) => normalizeKey(p, `paths.${i}`)))];
  const found = await rows<ObjectRow>(readsOf(ctx), `SELECT * FROM ${quotedSchema(b.schema)}.storage_objects WHERE bucket_id = ? AND path = ANY(ARRAY(SELECT jsonb_array_elements_text(?::jsonb)))`, [b.bucket.id, JSON.stringify(unique)]);
  const byPath = new Map(found.map((o) => [o.path, o]));
  const failed: { path: string; error: string }[] = [];
  const present = unique.filter((k) => byPath.has(k)).map((k) => byPath.get(k)!);
  const allowed = await objectsAllowed(ctx, b, 'delete', present);
  const readable = await objectsAllowed(ctx, b, 'read', present);
  const chosen: ObjectRow[] = [];
  present.forEach((o, i) => (allowed[i] ? chosen.push(o) : failed.push({ path: o.path, error: readable[i] ? 'Permission denied.' : 'Object not found.' })));
  for (const k of unique) if (!byPath.has(k)) failed.push({ path: k, error: 'Object not found.' });
  const deleted = chosen.length ? await deleteRows(ctx, store, b, chosen) : [];
  const gone = new Set(deleted);
  for (const o of chosen) if (!gone.has(o.path)) failed.push({ path: o.path, error: 'Object not found.' });
  return { deleted_count: deleted.length, failed };
}

/**
 * Copy (spec §4): a new object (new uuid, the metadata plus `copied_from`) at the destination,
 * in this bucket or another of the app; the source is unchanged. Needs `download` on the source
 * and `upload` at the destination (and, to replace an object there, being its owner or staff);
 * the destination bucket's size limit and allowed types apply as to an upload (ingest.ts).
 */
export async function copyObject(ctx: ServiceContext, store: ObjectStore, src: BucketTarget, sourceKey: string, dst: BucketTarget, destKey: string): Promise<ObjectView> {
  const o = await objectFor(ctx, src, sourceKey, 'download');
  const blob = await copyBlob(ctx, store, o, dst);
  const metadata = { ...o.metadata, copied_from: { bucket: src.bucket.slug, path: o.path, uuid: o.uuid } };
  const { row } = await ingestObject(ctx, store, dst, destKey, { blob, metadata, visibility: o.visibility, who: actorUuid(ctx) },
    uploadCheck(ctx, dst, destKey, { size: blob.size, mimetype: blob.mimetype, metadata, visibility: o.visibility }));
  return objectView(dst, row);
}

/**
 * Move (spec §4): same bucket, a new path for the same object (uuid and bytes kept); 409 when the
 * destination exists; the bucket's current size limit and allowed types apply (ingest.ts). Of two
 * concurrent moves of one object exactly one wins; the other finds the source gone (404).
 */
export async function moveObject(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, sourceKey: string, destKey: string): Promise<ObjectView> {
  const o = await objectFor(ctx, b, sourceKey, 'update');
  if (sourceKey === destKey) throw validationError({ destination_path: ['The destination is the source.'] });
  const { row } = await ingestObject(ctx, store, b, destKey, { move: o, who: actorUuid(ctx) }, async (source) => {
    await requireObject(ctx, b, 'update', source!);
    await requireNewObject(ctx, b, { ...source!, path: destKey, filename: filenameOf(destKey) });
  });
  return objectView(b, row);
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
