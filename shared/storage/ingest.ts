// The one way into a bucket (issue 29 #5; docs/storage.md "The one way in"). Every path that puts
// bytes into a bucket — upload, batch upload, copy, move, and any later import (packages,
// frontend-worker builds) — ends in ingestObject (or, inside an import's transaction,
// ingestInTransaction: the same steps), the only writer of a storage_objects row that
// comes to point at bytes (inserted, replaced, or moved to a new path). Under the bucket's row
// locked FOR SHARE (its rules as they are now) it
//   1. admits the object (admit): its size within `file_size_limit`, its type within
//      `allowed_mime_types`. The type is the stored one: it was sniffed from the bytes when they
//      came in, and a blob is never rewritten (a replace writes a new blob), so it still is the
//      type of those bytes;
//   2. runs the caller's permission check on the object as it will be, under the row's lock;
//   3. inserts the row, replaces the one at the key, or repoints the (locked) source row of a move.
// A new object is one statement (placeNew: the rules and the check as the request found them,
// the statement inserting only while the locked bucket row still has those rules); anything else
// (a replace, a move, rules changed meanwhile) one transaction.
// ingest.test.ts fails when another module inserts object rows or changes what a row points at.
// The bytes come in through storeBlob (an upload's stream, inspected while it flows: inspect.ts)
// or copyBlob (a server-side copy, admitted before a byte is copied): staged where the store
// stages (the staged file is its own journal entry, published once the row holds it), else
// journaled before they are written (blobs.ts).
import { randomUUID } from 'node:crypto';
import { byUser, writeTransaction } from '../realtime/actor.ts';
import type { Readable } from 'node:stream';
import type { EntityManager } from '@mikro-orm/postgresql';
import { uniqueViolation } from '../common/slug.ts';
import { readsOf, type ServiceContext } from '../context.ts';
import { firstRow, preparedRows, rows } from '../db/sql.ts';
import { DomainError, notFound } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import type { ObjectRow } from './access.ts';
import { dropBlobs, journal, unjournal } from './blobs.ts';
import { StorageFailure, type BucketRow, type BucketTarget } from './bucket.service.ts';
import { fileTooLarge, inspect, mimeMatches, typeNotAllowed } from './inspect.ts';
import { filenameOf, objectNotFound } from './keys.ts';
import { BlobNotFound, type ObjectStore, type SiteStore } from './objstore/types.ts';

/** What a bucket asks of every object in it. */
export type BucketRules = Pick<BucketRow, 'file_size_limit' | 'allowed_mime_types'>;

/** The ingest check: 400 (the upload's texts) unless an object of this size and type may be in a bucket with these rules. */
export function admit(rules: BucketRules, object: { size: number; mimetype: string }): void {
  const limit = Number(rules.file_size_limit);
  if (object.size > limit) throw fileTooLarge(object.size, limit);
  if (!mimeMatches(object.mimetype, rules.allowed_mime_types)) throw typeNotAllowed(object.mimetype, rules.allowed_mime_types);
}

// ---- bytes in ----------------------------------------------------------------------------------

export interface BlobInput {
  body: Readable;
  /** The Content-Type the client declared (the type is sniffed from the bytes: inspect.ts). */
  declaredType?: string;
  /** Content-Length when known: a body declared over the limit is refused before a byte is read. */
  declaredSize?: number;
  /** The file's name, for the type of text files without a declared type. */
  filename: string;
}

/** Bytes stored under a new key, not yet any object's (ingestObject or dropBlob follows). */
export interface StoredBlob {
  blobKey: string;
  size: number;
  etag: string;
  mimetype: string;
  /** Staged (SiteStore.stage): published once a row holds it. Else in place, journaled (`upload`) until the row's statement unjournals it. */
  staged: boolean;
}

/** A new blob key of the bucket, journaled (committed) before a byte is written. */
async function newBlobKey(ctx: ServiceContext, b: BucketTarget): Promise<string> {
  const blobKey = `${b.bucket.uuid}/${randomUUID()}`;
  await journal(readsOf(ctx), b.schema, [blobKey], 'upload');
  return blobKey;
}

/**
 * Streams an upload through the inspection (the bucket's size limit, the sniffed type against its
 * allowed types) into a new blob of the bucket: staged where the store stages (no statement:
 * the staged file is the record of the bytes in flight), else journaled first and put in place.
 * Whatever fails, nothing is left behind.
 */
export async function storeBlob(ctx: ServiceContext, store: ObjectStore, b: BucketTarget, input: BlobInput): Promise<StoredBlob> {
  const inspected = await inspect(input.body, { limit: Number(b.bucket.file_size_limit), declaredType: input.declaredType, declaredSize: input.declaredSize, filename: input.filename, allowed: b.bucket.allowed_mime_types });
  const site = store.site(b.schema);
  const staged = site.stage !== undefined;
  const blobKey = staged ? `${b.bucket.uuid}/${randomUUID()}` : await newBlobKey(ctx, b);
  try {
    const options = { contentType: inspected.mimetype };
    const stored = staged ? await site.stage!(blobKey, inspected.body, options) : await site.put(blobKey, inspected.body, options);
    return { blobKey, size: stored.size, etag: stored.etag, mimetype: inspected.mimetype, staged };
  } catch (err) {
    await dropBlob(ctx, store, b, blobKey);
    throw err;
  }
}

/**
 * Moves staged blobs that rows now hold into place, after the rows' commit. A failure changes
 * nothing for readers (`get` finds a staged blob too): the sweep publishes it (sweepBlobs).
 */
export async function publishBlobs(store: SiteStore, blobs: StoredBlob[]): Promise<void> {
  for (const blob of blobs) if (blob.staged) await store.publish!(blob.blobKey).catch(() => undefined);
}

/** A server-side copy of an object's bytes into a new blob of `dst` (a bucket of the same site), admitted there before a byte is copied. */
export async function copyBlob(ctx: ServiceContext, store: ObjectStore, o: ObjectRow, dst: BucketTarget): Promise<StoredBlob> {
  const blob = { size: Number(o.size), etag: o.etag, mimetype: o.mimetype };
  admit(dst.bucket, blob);
  const blobKey = await newBlobKey(ctx, dst);
  try {
    await store.site(dst.schema).copy(o.blob_key, blobKey);
  } catch (err) {
    await dropBlob(ctx, store, dst, blobKey);
    if (err instanceof BlobNotFound) throw objectNotFound(o.path);
    throw new StorageFailure(`The object could not be copied in storage: ${(err as Error).message}`, err);
  }
  return { blobKey, ...blob, staged: false };
}

/** Removes a stored blob that will not become an object (a refused or failed upload). */
export const dropBlob = (ctx: ServiceContext, store: ObjectStore, b: BucketTarget, blobKey: string): Promise<void> =>
  dropBlobs(readsOf(ctx), store.site(b.schema), b.schema, [blobKey]);

// ---- the row -----------------------------------------------------------------------------------

/** What comes to be at the key: a stored blob (upload, copy) with its metadata, or an object of the same bucket at a new path (move). */
export type Arrival =
  | { blob: StoredBlob; metadata: Record<string, unknown>; visibility?: 'private' | 'public' | null; who: string | null }
  | { move: Pick<ObjectRow, 'id' | 'path'>; who: string | null };

/** Refuses the write (throws), given under its lock the row at the key if any (blob) or the source row (move). */
export type WriteCheck = (current: ObjectRow | undefined) => Promise<void>;

/**
 * Makes `arrival` the object at `key` of `dst`: 201-like `created` for a new row, false for a
 * replace (content, type, size and metadata replaced, no duplicate; the old blob removed after
 * the commit). A move whose source is no longer at its path (another move or a delete won) is a
 * 404; a move onto an existing object a 409. On refusal or failure an arriving blob is removed.
 */
export async function ingestObject(ctx: ServiceContext, store: ObjectStore, dst: BucketTarget, key: string, arrival: Arrival, check: WriteCheck): Promise<{ created: boolean; row: ObjectRow }> {
  ctx.wrote?.(); // a logged table (realtime/actor.ts)
  let result: { created: boolean; row: ObjectRow; old?: string };
  try {
    result = ('blob' in arrival ? await placeNew(ctx.em, dst, key, arrival, check) : undefined) ??
      (await writeTransaction(ctx, async (tx) =>
        'blob' in arrival ? ingestInTransaction(tx, dst, key, arrival, check) : repoint(tx, dst, await lockedRules(tx, dst), key, arrival, check)));
  } catch (err) {
    if ('blob' in arrival) await dropBlob(ctx, store, dst, arrival.blob.blobKey);
    if (uniqueViolation(err) === 'storage_objects_bucket_id_path_key') throw new DomainError('CONFLICT', `An object already exists at "${key}".`);
    throw err;
  }
  if ('blob' in arrival) await publishBlobs(store.site(dst.schema), [arrival.blob]);
  if (result.old) await dropBlob(ctx, store, dst, result.old);
  return result;
}

/**
 * A new object in one statement, outside any transaction (named: the upload's hot path): admitted
 * by the bucket's rules as the request read them and checked as a new object, then inserted under
 * the bucket's row locked FOR SHARE only while that row still has those rules (and its `upload`
 * journal entry removed, for a journaled blob). Undefined when that is not what happened — an
 * object at the key, rules changed, a refusal — for the transaction to decide under its locks.
 */
async function placeNew(em: EntityManager, b: BucketTarget, key: string, a: Extract<Arrival, { blob: unknown }>, check: WriteCheck): Promise<{ created: boolean; row: ObjectRow } | undefined> {
  try {
    admit(b.bucket, a.blob);
    await check(undefined);
  } catch {
    return undefined;
  }
  const q = quotedSchema(b.schema);
  const by = byUser(a.who); // the change log's actor (realtime/actor.ts)
  const [row] = await preparedRows<ObjectRow>(
    em,
    `WITH placed AS (
       INSERT INTO ${q}.storage_objects (uuid, bucket_id, path, filename, size, mimetype, metadata, visibility, blob_key, etag, created_by, modified_by)
       SELECT ?, b.id, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ? FROM ${q}.storage_buckets b${by ? `, ${by.sql}` : ''}
        WHERE b.id = ? AND b.file_size_limit = ? AND to_jsonb(b.allowed_mime_types) = ?::jsonb FOR SHARE OF b
       ON CONFLICT (bucket_id, path) DO NOTHING RETURNING *
     ), unjournaled AS (DELETE FROM ${q}.storage_blob_journal WHERE blob_key IN (SELECT blob_key FROM placed))
     SELECT * FROM placed`,
    [randomUUID(), key, filenameOf(key), a.blob.size, a.blob.mimetype, JSON.stringify(a.metadata), a.visibility ?? null, a.blob.blobKey, a.blob.etag, a.who, a.who,
      ...(by?.params ?? []), b.bucket.id, b.bucket.file_size_limit, JSON.stringify(b.bucket.allowed_mime_types)],
  );
  return row && { created: true, row };
}

/**
 * ingestObject inside the caller's transaction, for a write that must commit with others (an app
 * package's import): the same lock, admission, check and row. After its commit the caller
 * publishes the arriving blob (publishBlobs) and drops the blob key the object held before (a
 * replace, returned: dropBlobs); on a failure the arriving blob is the caller's to drop.
 */
export async function ingestInTransaction(tx: EntityManager, dst: BucketTarget, key: string, arrival: Extract<Arrival, { blob: unknown }>, check: WriteCheck): Promise<{ created: boolean; row: ObjectRow; old?: string }> {
  return place(tx, dst, await lockedRules(tx, dst), key, arrival, check);
}

/** The bucket's rules as they are now, its row locked against changes and deletion until the write commits. */
async function lockedRules(tx: EntityManager, b: BucketTarget): Promise<BucketRules> {
  const rules = await firstRow<BucketRules>(tx, `SELECT file_size_limit, allowed_mime_types FROM ${quotedSchema(b.schema)}.storage_buckets WHERE id = ? FOR SHARE`, [b.bucket.id]);
  if (!rules) throw notFound(`Bucket "${b.bucket.slug}"`);
  return rules;
}

/** Inserts the row at `key`, or replaces the one there (its old blob journaled as an orphan). */
async function place(tx: EntityManager, b: BucketTarget, rules: BucketRules, key: string, a: Extract<Arrival, { blob: unknown }>, check: WriteCheck): Promise<{ created: boolean; row: ObjectRow; old?: string }> {
  admit(rules, a.blob);
  const q = quotedSchema(b.schema);
  const metadata = JSON.stringify(a.metadata);
  for (;;) {
    const current = await firstRow<ObjectRow>(tx, `SELECT * FROM ${q}.storage_objects WHERE bucket_id = ? AND path = ? FOR UPDATE`, [b.bucket.id, key]);
    await check(current);
    if (current) {
      const [row] = await rows<ObjectRow>(
        tx,
        `UPDATE ${q}.storage_objects SET blob_key = ?, size = ?, etag = ?, mimetype = ?, metadata = ?::jsonb, visibility = coalesce(?, visibility),
                filename = ?, modified_by = ?, updated_at = now() WHERE id = ? RETURNING *`,
        [a.blob.blobKey, a.blob.size, a.blob.etag, a.blob.mimetype, metadata, a.visibility ?? null, filenameOf(key), a.who, current.id],
      );
      await journal(tx, b.schema, [current.blob_key], 'orphan');
      if (!a.blob.staged) await unjournal(tx, b.schema, [a.blob.blobKey]);
      return { created: false, row: row!, old: current.blob_key };
    }
    const [row] = await rows<ObjectRow>(
      tx,
      `INSERT INTO ${q}.storage_objects (uuid, bucket_id, path, filename, size, mimetype, metadata, visibility, blob_key, etag, created_by, modified_by)
       VALUES (?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?, ?) ON CONFLICT (bucket_id, path) DO NOTHING RETURNING *`,
      [randomUUID(), b.bucket.id, key, filenameOf(key), a.blob.size, a.blob.mimetype, metadata, a.visibility ?? null, a.blob.blobKey, a.blob.etag, a.who, a.who],
    );
    if (row) {
      if (!a.blob.staged) await unjournal(tx, b.schema, [a.blob.blobKey]);
      return { created: true, row };
    }
    // Another upload made the row since: replace it (under its lock) instead.
  }
}

/**
 * A move: the source row locked where the caller found it (same id, same path). Two moves of one
 * object: the second waits for the first's lock, then finds the path changed and answers 404.
 */
async function repoint(tx: EntityManager, b: BucketTarget, rules: BucketRules, key: string, a: Extract<Arrival, { move: unknown }>, check: WriteCheck): Promise<{ created: boolean; row: ObjectRow }> {
  const q = quotedSchema(b.schema);
  const source = await firstRow<ObjectRow>(tx, `SELECT * FROM ${q}.storage_objects WHERE id = ? AND bucket_id = ? AND path = ? FOR UPDATE`, [a.move.id, b.bucket.id, a.move.path]);
  if (!source) throw objectNotFound(a.move.path);
  admit(rules, { size: Number(source.size), mimetype: source.mimetype });
  await check(source);
  const [row] = await rows<ObjectRow>(tx, `UPDATE ${q}.storage_objects SET path = ?, filename = ?, modified_by = ?, updated_at = now() WHERE id = ? RETURNING *`, [key, filenameOf(key), a.who, source.id]);
  return { created: false, row: row! };
}
