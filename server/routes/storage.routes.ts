// Storage (spec Part 3 §4; scope 'tenant'): buckets of an app and their objects, under
// /api/apps/{app_slug}/storage/buckets/. Object keys are paths (`*key`: one or more segments).
// Precedence, for keys named like a fixed route (docs/storage.md "Keys and routes"): the fixed
// routes end with a slash (`objects/search/`), uploads at a key have none (`objects/search`);
// `objects/{key}/view/` and `/edit/` win over a download of a key ending in `/view` with a
// trailing slash, so such a key is downloaded without it (`objects/a/view`) or with its slashes
// encoded (`objects/a%2Fview/`): an encoded slash never splits a segment.
import { Type } from '@sinclair/typebox';
import { BucketCreate, BucketListQuery, BucketPatch, BucketRef, BucketUsageBody, BucketView } from '../../shared/storage/bucket.schemas.ts';
import * as buckets from '../../shared/storage/bucket.service.ts';
import * as objects from '../../shared/storage/object.service.ts';
import { listObjects, searchObjects, OBJECT_LIST_PARAMETERS } from '../../shared/storage/object.list.ts';
import { normalizeKey } from '../../shared/storage/keys.ts';
import type { ObjectRow } from '../../shared/storage/access.ts';
import { wholeBytes, type ObjectStore } from '../../shared/storage/objstore/types.ts';
import { DomainError, notFound } from '../../shared/errors.ts';
import { paginated, sendFlagged, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';
import { isMultipart } from '../http/uploads.ts';
import { batchUpload, MAX_BATCH_BYTES, MAX_BATCH_FILES, uploadAt } from './storage.uploads.ts';
import { countMode } from './records.routes.ts';

export interface StorageRouteOptions {
  store: ObjectStore;
  publicUrl?: string;
  doclibEnabled: boolean;
}

const BASE = '/api/apps/:app_slug/storage/buckets/';
const OBJECTS = `${BASE}:bucket/objects/`;
const AppRef = Type.Object({ app_slug: Type.String({ description: 'The app slug.' }) });
const SourcePath = Type.String({ description: 'The key of the object.' });
const DestinationPath = Type.String({ description: 'Its new key.' });
const ObjectKeyRef = Type.Object({ app_slug: Type.String(), bucket: Type.String(), key: Type.String({ description: 'The object path (slashes included)' }) });
const StorageEnvelope = (data = Type.Unknown()) => Type.Object({ success: Type.Boolean(), message: Type.String(), status_code: Type.Integer(), data: Type.Optional(data) });
const ADMIN = 'Site administrators (superusers and staff of the site), and the app\'s policies on `storage:{slug}`.';


const keyOf = (params: Record<string, string>) => normalizeKey(params.key, 'path');

/** `Range: bytes=a-b | a- | -n` (one range; several are answered whole). Undefined: the whole file; null: unsatisfiable. */
function parseRange(header: string, size: number): { start: number; end: number } | undefined | null {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (!m || (m[1] === '' && m[2] === '')) return undefined;
  let start: number;
  let end: number;
  if (m[1] === '') {
    const suffix = Number(m[2]);
    if (suffix === 0) return null;
    start = Math.max(0, size - suffix);
    end = size - 1;
  } else {
    start = Number(m[1]);
    end = m[2] === '' ? size - 1 : Math.min(Number(m[2]), size - 1);
  }
  if (start >= size || start > end) return null;
  return { start, end };
}

/** Sends an object's bytes: type, length, ETag, ranges, conditional GET; user content never runs on our origin. */
async function sendObject(ctx: AppContext, store: ObjectStore, b: buckets.BucketTarget, o: ObjectRow, em: Parameters<typeof objects.openObject>[0]): Promise<void> {
  const size = Number(o.size);
  ctx.set('ETag', o.etag);
  ctx.set('Last-Modified', new Date(o.updated_at).toUTCString());
  ctx.set('Accept-Ranges', 'bytes');
  ctx.set('Content-Security-Policy', "sandbox; default-src 'none'");
  ctx.set('Content-Disposition', `inline; filename*=UTF-8''${encodeURIComponent(o.filename)}`);
  if (ctx.get('If-None-Match') && ctx.get('If-None-Match').split(',').map((s) => s.trim()).includes(o.etag)) {
    ctx.status = 304;
    return;
  }
  const rangeHeader = ctx.get('Range');
  const ifRange = ctx.get('If-Range');
  const range = rangeHeader && (!ifRange || ifRange === o.etag) ? parseRange(rangeHeader, size) : undefined;
  if (range === null) {
    ctx.status = 416;
    ctx.set('Content-Range', `bytes */${size}`);
    ctx.body = { status: 'error', code: 'BAD_REQUEST', message: `Range not satisfiable: the object has ${size} bytes.`, success: false, status_code: 416 };
    return;
  }
  if (ctx.method === 'HEAD') {
    // Headers only (no body assigned: Koa would turn a null body into a 204).
    ctx.status = 200;
    ctx.type = o.mimetype;
    ctx.length = size;
    return;
  }
  const { row, stream } = await objects.openObject(em, store, b, o, range);
  ctx.type = row.mimetype;
  if (range) {
    ctx.status = 206;
    ctx.set('Content-Range', `bytes ${range.start}-${range.end}/${Number(row.size)}`);
    ctx.body = stream;
    ctx.length = range.end - range.start + 1;
  } else {
    ctx.status = 200;
    ctx.body = wholeBytes(stream) ?? stream; // a small blob read whole goes out in one write, no stream to pipe
    ctx.length = Number(row.size);
  }
}

export function storageRoutes(options: StorageRouteOptions): RouteDef[] {
  const { store } = options;
  const base = { auth: 'user' as const, scope: 'tenant' as const, tags: ['storage'] };
  const bucketTarget = (ctx: AppContext, params: Record<string, string>, action: 'read' | 'create' | 'update' | 'delete') =>
    objects.objectsBucket(ctx.state.service(), params.app_slug!, params.bucket!, action);

  const routes: RouteDef[] = [
    // ---- buckets ----
    defineRoute({
      ...base,
      method: 'get',
      path: BASE,
      operationId: 'storage_buckets_list',
      summary: 'List the buckets of an app',
      description: '`search` (name or slug), `ordering` (`-` descends; default `-created_at`), `visibility`, `app_category`, `page`, `page_size`. Any signed-in user of the site.',
      params: AppRef,
      query: BucketListQuery,
      responses: { 200: paginated(BucketView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await buckets.listBuckets(ctx.state.service(), params.app_slug!, query), options.publicUrl);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: BASE,
      operationId: 'storage_buckets_create',
      summary: 'Create a bucket',
      description: `The slug is made from the name (-2 … on collision). \`app_category\` is required. A \`doclib\` bucket needs the document-library provider (503 while DOCLIB_ENABLED is off). ${ADMIN}`,
      params: AppRef,
      body: BucketCreate,
      responses: { 201: BucketView },
      async handler(ctx, { params, body }) {
        ctx.status = 201;
        ctx.body = await buckets.createBucket(ctx.state.service(), params.app_slug!, body, options.doclibEnabled);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: `${BASE}:bucket/`,
      operationId: 'storage_buckets_retrieve',
      summary: 'Get a bucket with its usage and quota',
      description: 'Any signed-in user of the site (and the app\'s policies on `storage:{slug}`, action `read`).',
      params: BucketRef,
      responses: { 200: BucketView },
      async handler(ctx, { params }) {
        ctx.body = await buckets.getBucket(ctx.state.service(), params.app_slug!, params.bucket!);
      },
    }),
    defineRoute({
      ...base,
      method: 'patch',
      path: `${BASE}:bucket/`,
      operationId: 'storage_buckets_partial_update',
      summary: 'Update a bucket (PATCH only)',
      description: `Writable: name, app_category, visibility, file_size_limit, allowed_mime_types, max_size_bytes, max_objects. The other fields of GET may be sent back unchanged; slug, app, uuid and storage_provider cannot change (400). ${ADMIN}`,
      params: BucketRef,
      body: BucketPatch,
      responses: { 200: BucketView },
      async handler(ctx, { params, body }) {
        ctx.body = await buckets.updateBucket(ctx.state.service(), params.app_slug!, params.bucket!, body);
      },
    }),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'delete',
      path: `${BASE}:bucket/`,
      operationId: 'storage_buckets_destroy',
      summary: 'Delete a bucket, its objects and their files',
      description: `200 {success, message, status_code} (the spec's "204 with a body": a 204 cannot carry one). When the store fails: 500 {success: false, message, status_code} and no record is deleted. ${ADMIN}`,
      params: BucketRef,
      responses: { 200: StorageEnvelope() },
      async handler(ctx, { params }) {
        await buckets.deleteBucket(ctx.state.service(), store, params.app_slug!, params.bucket!);
        sendFlagged(ctx, 200, `Bucket "${params.bucket}" deleted.`);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: `${BASE}:bucket/usage/`,
      operationId: 'storage_buckets_usage',
      summary: 'Usage and quota state of a bucket',
      description: 'The stored counters (refreshed periodically and by `platform storage check-quotas`; see `usage.last_updated`). Quotas only monitor: uploads are never blocked.',
      params: BucketRef,
      responses: { 200: BucketUsageBody },
      async handler(ctx, { params }) {
        ctx.body = await buckets.bucketUsage(ctx.state.service(), params.app_slug!, params.bucket!);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/storage/check-quotas/',
      aliases: ['/api/storage/check_storage_quotas/'],
      operationId: 'storage_check_quotas',
      summary: 'Refresh the usage counters and quota state of every bucket of the site',
      description: 'The spec\'s `check_storage_quotas`; the server also runs it every STORAGE_MAINTENANCE_INTERVAL_MS. Site administrators. → {success, message, status_code, data: {buckets, exceeded: [{app, app_id, slug}]}}',
      responses: { 200: StorageEnvelope() },
      async handler(ctx) {
        const data = await buckets.checkQuotas(ctx.state.service());
        sendFlagged(ctx, 200, `Usage refreshed for ${data.buckets} bucket${data.buckets === 1 ? '' : 's'}.`, data);
      },
    }),

    // ---- objects: fixed routes first (they win over a key of the same name with a trailing slash) ----
    defineRoute({
      ...base,
      method: 'get',
      path: OBJECTS,
      operationId: 'storage_objects_list',
      summary: 'List objects with filters',
      description: `Parameters: ${OBJECT_LIST_PARAMETERS.map((p) => `\`${p}\``).join(', ')}. Pages of \`page_size\` (default 10, at most 100); \`_count=exact|planned|none\` (or \`Prefer: count=…\`). Only the objects the caller may read are listed.`,
      params: BucketRef,
      responses: { 200: Type.Object({ count: Type.Union([Type.Integer(), Type.Null()]), next: Type.Union([Type.String(), Type.Null()]), previous: Type.Union([Type.String(), Type.Null()]), results: Type.Array(Type.Unknown()) }) },
      async handler(ctx, { params }) {
        const b = await bucketTarget(ctx, params, 'read');
        const query = { ...ctx.query } as Record<string, unknown>;
        const mode = countMode(ctx, query);
        const page = await listObjects(ctx.state.service(), b, query, mode);
        sendPage(ctx, { ...page, count: page.count ?? 0 }, options.publicUrl);
        // `_count=none`: null, as on records (the links come from `hasNext`).
        (ctx.body as { count: number | null }).count = page.count;
      },
    }),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'post',
      path: OBJECTS,
      bodyLimit: 'stream',
      idempotent: true,
      operationId: 'storage_objects_create',
      writes: 'data',
      summary: 'Upload (legacy multipart)',
      description: 'multipart/form-data: `file` (required), `path` (default: the file name), `metadata` (a JSON object as text), `visibility`. 201 created / 200 replaced, {success, message, status_code, data: object}. An empty file is 400 {error}.',
      params: BucketRef,
      responses: { 201: StorageEnvelope(), 200: StorageEnvelope() },
      async handler(ctx, { params }) {
        const b = await bucketTarget(ctx, params, 'create');
        if (!isMultipart(ctx)) throw new DomainError('UNSUPPORTED_MEDIA_TYPE', 'Send multipart/form-data with a "file" field.');
        const { created, object } = await uploadAt(ctx, store, b, undefined);
        sendFlagged(ctx, created ? 201 : 200, created ? 'File uploaded successfully.' : 'File updated successfully.', object);
      },
    }),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'post',
      path: `${OBJECTS}batch-upload/`,
      bodyLimit: 'stream',
      idempotent: true,
      operationId: 'storage_objects_batch_upload',
      writes: 'data',
      summary: 'Upload up to 10 files',
      description: `multipart: \`files\` (repeated, at most ${MAX_BATCH_FILES}, ${MAX_BATCH_BYTES / 1024 / 1024} MB in all), \`paths\` (a JSON array of paths, parallel to files; default: the file names). Each file is checked on its own: 201 when all were stored, 207 when some failed, 400 when none; data: {uploaded: [object], failed: [{path, error}]}.`,
      params: BucketRef,
      responses: { 201: StorageEnvelope(), 207: StorageEnvelope(), 400: StorageEnvelope() },
      async handler(ctx, { params }) {
        const { status, uploaded, failed } = await batchUpload(ctx, store, await bucketTarget(ctx, params, 'create'));
        sendFlagged(ctx, status, `${uploaded.length} uploaded, ${failed.length} failed.`, { uploaded, failed });
        if (status === 400) (ctx.body as Record<string, unknown>).success = false;
      },
    }),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'post',
      path: `${OBJECTS}batch-delete/`,
      operationId: 'storage_objects_batch_delete',
      writes: 'data',
      summary: 'Delete up to 100 objects',
      description: 'Body {paths: [...]} (duplicates removed). 200 when all were deleted, 207 when some failed (not found, permission denied), 400 for an empty list or more than 100: data {deleted_count, failed: [{path, error}]}.',
      params: BucketRef,
      body: Type.Object({ paths: Type.Array(Type.String()) }),
      responses: { 200: StorageEnvelope(), 207: StorageEnvelope() },
      async handler(ctx, { params, body }) {
        const b = await bucketTarget(ctx, params, 'delete');
        const data = await objects.batchDelete(ctx.state.service(), store, b, (body as { paths: string[] }).paths);
        const status = data.failed.length ? 207 : 200;
        sendFlagged(ctx, status, data.failed.length ? `${data.deleted_count} deleted, ${data.failed.length} failed.` : `${data.deleted_count} objects deleted.`, data);
      },
    }),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'post',
      path: `${OBJECTS}search/`,
      operationId: 'storage_objects_search',
      writes: 'data',
      summary: 'Search objects (legacy)',
      description: 'Body {prefix?, search?, sortBy?: {column: created_at|updated_at|size|filename, order: asc|desc}, limit? (default 100, at most 1000), offset?} → data {objects, count, bucket}.',
      params: BucketRef,
      body: Type.Object({
        prefix: Type.Optional(Type.String()),
        search: Type.Optional(Type.String()),
        sortBy: Type.Optional(Type.Object({ column: Type.Optional(Type.String()), order: Type.Optional(Type.String()) })),
        limit: Type.Optional(Type.Integer({ minimum: 1, maximum: 1000 })),
        offset: Type.Optional(Type.Integer({ minimum: 0 })),
      }, { additionalProperties: false }),
      responses: { 200: StorageEnvelope() },
      async handler(ctx, { params, body }) {
        const b = await bucketTarget(ctx, params, 'read');
        sendFlagged(ctx, 200, 'Objects found.', await searchObjects(ctx.state.service(), b, body as never));
      },
    }),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'post',
      path: `${OBJECTS}copy/`,
      operationId: 'storage_objects_copy',
      writes: 'data',
      summary: 'Copy an object',
      description: 'Body {source_path, destination_bucket? (a bucket of the same app; default this one), destination_path}: a new object (new uuid; metadata plus `copied_from`); the source is unchanged. 201; 404 when the source is missing; 500 with data.detail when the store fails.',
      params: BucketRef,
      body: Type.Object({ source_path: SourcePath, destination_bucket: Type.Optional(Type.String({ description: 'A bucket of the same app (default: this one).' })), destination_path: DestinationPath }, { additionalProperties: false }),
      responses: { 201: StorageEnvelope() },
      async handler(ctx, { params, body }) {
        const input = body as { source_path: string; destination_bucket?: string; destination_path: string };
        const source = normalizeKey(input.source_path, 'source_path');
        const dest = normalizeKey(input.destination_path, 'destination_path');
        const src = await bucketTarget(ctx, params, 'read');
        const dst = input.destination_bucket && input.destination_bucket !== params.bucket ? await bucketTarget(ctx, { ...params, bucket: input.destination_bucket }, 'create') : src;
        sendFlagged(ctx, 201, 'Object copied.', await objects.copyObject(ctx.state.service(), store, src, source, dst, dest));
      },
    }),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'post',
      path: `${OBJECTS}move/`,
      operationId: 'storage_objects_move',
      writes: 'data',
      summary: 'Move (rename) an object in its bucket',
      description: 'Body {source_path, destination_path}: the same object (uuid kept) at a new path; 409 when the destination exists.',
      params: BucketRef,
      body: Type.Object({ source_path: SourcePath, destination_path: DestinationPath }, { additionalProperties: false }),
      responses: { 200: StorageEnvelope() },
      async handler(ctx, { params, body }) {
        const input = body as { source_path: string; destination_path: string };
        const b = await bucketTarget(ctx, params, 'update');
        sendFlagged(ctx, 200, 'Object moved.', await objects.moveObject(ctx.state.service(), store, b, normalizeKey(input.source_path, 'source_path'), normalizeKey(input.destination_path, 'destination_path')));
      },
    }),
    ...(['view', 'edit'] as const).map((mode) =>
      defineRoute({
        ...base,
        method: 'get',
        path: `${OBJECTS}*key/${mode}/`,
        operationId: `storage_objects_${mode}`,
        summary: `Document-library ${mode} access`,
        description: `Document-library buckets only: 422 for an \`objstore\` object, 404 when the object or bucket is missing. Needs \`${mode === 'view' ? 'read' : 'update'}\`.`,
        params: ObjectKeyRef,
        responses: { 200: Type.Object({ status: Type.String(), message: Type.String(), data: Type.Object({ url: Type.String(), mode: Type.String() }) }) },
        async handler(ctx, { params }) {
          const b = await bucketTarget(ctx, params, 'read');
          await objects.documentAccess(ctx.state.service(), b, keyOf(params), mode, options.doclibEnabled);
        },
      }),
    ),

    // ---- objects at a key ----
    defineRoute({
      ...base,
      errorForm: 'flag',
      auth: 'public',
      method: 'get',
      path: `${OBJECTS}*key`,
      aliases: [`${OBJECTS}*key/`],
      operationId: 'storage_objects_download',
      summary: 'Download an object (or its record with ?metadata=true)',
      description: 'Public objects need no token; private ones their owner or staff. Content-Type, Content-Length, ETag, Last-Modified; `Range: bytes=…` (206, 416), `If-None-Match` (304).',
      params: ObjectKeyRef,
      query: Type.Object({ metadata: Type.Optional(Type.String({ description: '`true`: the object as JSON' })) }),
      responses: { 200: StorageEnvelope(), 206: null },
      produces: { 200: 'application/octet-stream' },
      async handler(ctx, { params, query }) {
        const key = keyOf(params);
        const asJson = query.metadata === 'true' || query.metadata === '1';
        if (!ctx.state.actor) {
          // Anonymous: public objects only (a private one is not found, whoever asks without a token).
          if (ctx.state.tenant === null) throw notFound();
          const { b, o } = await objects.publicObject(ctx.state.reads(), ctx.state.tenant, params.app_slug!, params.bucket!, key);
          if (asJson) return sendFlagged(ctx, 200, 'Object retrieved.', objects.objectView(b, o));
          return sendObject(ctx, store, b, o, ctx.state.reads());
        }
        const service = ctx.state.service();
        const { b, o: found } = await objects.objectsBucketAt(service, params.app_slug!, params.bucket!, 'read', key);
        const o = await objects.permittedObject(service, b, key, found, asJson ? 'read' : 'download');
        if (asJson) return sendFlagged(ctx, 200, 'Object retrieved.', objects.objectView(b, o));
        await sendObject(ctx, store, b, o, ctx.state.reads());
      },
    }),
    ...(['put', 'post'] as const).map((method) =>
      defineRoute({
        ...base,
        errorForm: 'flag',
        method,
        path: `${OBJECTS}*key`,
        bodyLimit: 'stream',
        idempotent: true,
        operationId: `storage_objects_upload_${method}`,
        writes: 'data',
        summary: 'Upload or replace the object at a key',
        description: 'Raw body (its Content-Type declared; the type is sniffed from the bytes) with `X-Metadata-<Name>` (or `X-<vendor>-Meta-<Name>`) headers, or multipart with `file`. 201 created / 200 replaced. Size over the bucket\'s file_size_limit or a type outside allowed_mime_types: 400 naming them, nothing stored.',
        params: ObjectKeyRef,
        responses: { 201: StorageEnvelope(), 200: StorageEnvelope() },
        async handler(ctx, { params }) {
          const key = keyOf(params);
          const { b, o } = await objects.objectsBucketAt(ctx.state.service(), params.app_slug!, params.bucket!, 'create', key);
          const { created, object } = await uploadAt(ctx, store, b, { key, existing: o });
          sendFlagged(ctx, created ? 201 : 200, created ? 'File uploaded successfully.' : 'File updated successfully.', object);
        },
      }),
    ),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'patch',
      path: `${OBJECTS}*key/`,
      aliases: [`${OBJECTS}*key`],
      operationId: 'storage_objects_partial_update',
      writes: 'data',
      summary: 'Update an object\'s metadata or visibility',
      description: 'Body {metadata?, visibility? (private, public or null: the bucket\'s)}; the other fields of the object may be sent back unchanged. Owner or staff.',
      params: ObjectKeyRef,
      body: Type.Object({}, { additionalProperties: true }),
      responses: { 200: StorageEnvelope() },
      async handler(ctx, { params, body }) {
        const b = await bucketTarget(ctx, params, 'update');
        sendFlagged(ctx, 200, 'Object updated.', await objects.patchObject(ctx.state.service(), b, keyOf(params), body as Record<string, unknown>));
      },
    }),
    defineRoute({
      ...base,
      errorForm: 'flag',
      method: 'delete',
      path: `${OBJECTS}*key`,
      aliases: [`${OBJECTS}*key/`],
      operationId: 'storage_objects_destroy',
      writes: 'data',
      summary: 'Delete an object',
      description: 'Owner or staff. 200 {success, message, status_code}.',
      params: ObjectKeyRef,
      responses: { 200: StorageEnvelope() },
      async handler(ctx, { params }) {
        const b = await bucketTarget(ctx, params, 'delete');
        await objects.deleteObject(ctx.state.service(), store, b, keyOf(params));
        sendFlagged(ctx, 200, 'Object deleted.');
      },
    }),
  ];
  return routes;
}
