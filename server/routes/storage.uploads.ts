// The upload handlers of the storage routes (storage.routes.ts): a single upload (raw body or
// multipart `file`) and the batch upload. The bytes stream into the store through the inspection
// (storeBlob), then the one way in makes them objects (commitBlob → ingestObject); whatever is
// refused or fails, the blobs stored for it are removed before the answer.
import type { ServiceContext } from '../../shared/context.ts';
import type { ObjectRow } from '../../shared/storage/access.ts';
import { DomainError, validationError } from '../../shared/errors.ts';
import type { BucketTarget } from '../../shared/storage/bucket.service.ts';
import { dropBlob, storeBlob, type StoredBlob } from '../../shared/storage/ingest.ts';
import { metadataFromHeaders, metadataValue, normalizeKey } from '../../shared/storage/keys.ts';
import * as objects from '../../shared/storage/object.service.ts';
import type { ObjectStore } from '../../shared/storage/objstore/types.ts';
import type { AppContext } from '../http/types.ts';
import { isMultipart, streamMultipart } from '../http/uploads.ts';

export const MAX_BATCH_FILES = 10;
export const MAX_BATCH_BYTES = 100 * 1024 * 1024;

/** A batch whose files pass MAX_BATCH_BYTES together: refused the moment they do (spec §8: 100 MB combined). */
const batchTooLarge = () =>
  new DomainError('PAYLOAD_TOO_LARGE', `The files of a batch upload may have ${MAX_BATCH_BYTES} bytes (100 MB) in all; more were sent. Nothing was stored.`);

type StoredFiles = { result?: StoredBlob }[];

/** Removes the blobs of a multipart request's files that will not become objects. */
async function dropStored(service: ServiceContext, store: ObjectStore, b: BucketTarget, files: StoredFiles = []): Promise<void> {
  for (const f of files) if (f.result) await dropBlob(service, store, b, f.result.blobKey);
}

function declaredSize(ctx: AppContext): number | undefined {
  const raw = ctx.get('Content-Length');
  return /^\d+$/.test(raw) ? Number(raw) : undefined;
}

export function visibilityValue(raw: unknown): 'private' | 'public' | null | undefined {
  if (raw === undefined || raw === '') return undefined;
  if (raw === 'private' || raw === 'public') return raw;
  if (raw === 'null') return null;
  throw validationError({ visibility: ['One of private, public, null.'] });
}

/**
 * A single upload at `key` (raw body or multipart with `file`; without a key, multipart only):
 * created or replaced. `at`: the key and the object there, if any (objectsBucketAt).
 */
export async function uploadAt(ctx: AppContext, store: ObjectStore, b: BucketTarget, at?: { key: string; existing: ObjectRow | undefined }): Promise<{ created: boolean; object: objects.ObjectView }> {
  const service = ctx.state.service();
  const key = at?.key;
  if (at) objects.checkUploadTarget(service, b, at.existing);
  if (isMultipart(ctx)) {
    const parsed = await streamMultipart(ctx, { fileFields: ['file'], maxFiles: 1 }, (part) =>
      storeBlob(service, store, b, { body: part.stream, declaredType: part.mimeType, filename: part.filename || key || 'file' }),
    ).catch(async (err) => {
      await dropStored(service, store, b, (err as { files?: StoredFiles }).files);
      throw err;
    });
    const [file] = parsed.files;
    if (!file) throw validationError({ file: ['No file was submitted.'] });
    if (file.error) throw file.error;
    const first = (name: string) => parsed.fields[name]?.[0];
    let target = key;
    let metadata;
    let visibility;
    try {
      target ??= normalizeKey(first('path') || file.filename, 'path');
      metadata = metadataValue(first('metadata'));
      visibility = visibilityValue(first('visibility'));
    } catch (err) {
      await dropBlob(service, store, b, file.result!.blobKey);
      throw err;
    }
    return objects.commitBlob(service, store, b, target, file.result!, { metadata: { ...metadata, ...metadataFromHeaders(ctx.req.headers) }, visibility });
  }
  if (!key) throw new DomainError('UNSUPPORTED_MEDIA_TYPE', 'Send the file as multipart/form-data (field "file").');
  const blob = await storeBlob(service, store, b, { body: ctx.req, declaredType: ctx.get('Content-Type') || undefined, declaredSize: declaredSize(ctx), filename: key.slice(key.lastIndexOf('/') + 1) });
  return objects.commitBlob(service, store, b, key, blob, { metadata: metadataFromHeaders(ctx.req.headers), visibility: visibilityValue(ctx.query.visibility) });
}

/**
 * Up to MAX_BATCH_FILES files, MAX_BATCH_BYTES in all (a 413 the moment the files pass it, with
 * nothing stored), each checked on its own: 201 all stored, 207 some, 400 none.
 */
export async function batchUpload(ctx: AppContext, store: ObjectStore, b: BucketTarget): Promise<{ status: number; uploaded: unknown[]; failed: { path: string; error: string }[] }> {
  const service = ctx.state.service();
  if (!isMultipart(ctx)) throw new DomainError('UNSUPPORTED_MEDIA_TYPE', 'Send multipart/form-data with "files" fields.');
  const parsed = await streamMultipart(ctx, { fileFields: ['files', 'files[]'], maxFiles: MAX_BATCH_FILES, maxTotal: { bytes: MAX_BATCH_BYTES, error: batchTooLarge } }, (part) =>
    storeBlob(service, store, b, { body: part.stream, declaredType: part.mimeType, filename: part.filename }),
  ).catch(async (err) => {
    await dropStored(service, store, b, (err as { files?: StoredFiles }).files);
    throw err;
  });
  if (!parsed.files.length) throw validationError({ files: ['No file was submitted.'] });
  let paths: unknown[] = [];
  try {
    const raw = parsed.fields.paths?.[0];
    if (raw !== undefined) {
      paths = JSON.parse(raw);
      if (!Array.isArray(paths)) throw new Error();
    }
  } catch {
    await dropStored(service, store, b, parsed.files);
    throw validationError({ paths: ['Must be a JSON array of path strings, parallel to files.'] });
  }
  const uploaded: unknown[] = [];
  const failed: { path: string; error: string }[] = [];
  for (const [i, f] of parsed.files.entries()) {
    const path = typeof paths[i] === 'string' && paths[i] !== '' ? (paths[i] as string) : f.filename;
    if (f.error) {
      failed.push({ path, error: (f.error as Error).message });
      continue;
    }
    try {
      const key = normalizeKey(path, `paths.${i}`);
      uploaded.push((await objects.commitBlob(service, store, b, key, f.result!, { metadata: metadataFromHeaders(ctx.req.headers) })).object);
    } catch (err) {
      await dropBlob(service, store, b, f.result!.blobKey);
      failed.push({ path, error: err instanceof DomainError ? (err.errors ? Object.values(err.errors).flat().join(' ') : err.message) : 'Upload failed.' });
    }
  }
  return { status: failed.length === 0 ? 201 : uploaded.length ? 207 : 400, uploaded, failed };
}
