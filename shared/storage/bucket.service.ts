// Storage buckets of an app ("<schema>".storage_buckets; spec Part 3 §2, §4 "Buckets").
// Decided on the Bucket subject (every user of the site reads, administrators write) AND the
// app's policies on the bucket's kind `storage:{slug}` (policies/hook.ts). Usage counters are
// stored and refreshed by refreshUsage (the server's periodic job, `platform storage
// check-quotas`); quotas only monitor, they never block an upload. docs/storage.md.
import { writeTransaction } from '../realtime/actor.ts';
import { forEachCluster } from '../db/clusters.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { activeApp, type ActiveApp } from '../apps/lookup.ts';
import type { Action } from '../auth/actor.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { insertWithUniqueSlug, slugifyRemovingSpecials } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { actorUuid, readsOf, type ServiceContext } from '../context.ts';
import { assignments, countOf, iso, preparedRows, rows } from '../db/sql.ts';
import { DomainError, notFound, permissionDenied, validationError, type FieldErrors } from '../errors.ts';
import { likeEscape } from '../common/filters.ts';
import { decide } from '../policies/hook.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { BucketCreate, BucketPatch, DEFAULT_FILE_SIZE_LIMIT, type BucketView } from './bucket.schemas.ts';
import { validMimePattern } from './inspect.ts';
import type { ObjectStore } from './objstore/types.ts';

export interface BucketRow {
  id: number;
  uuid: string;
  app_id: number;
  name: string;
  slug: string;
  visibility: 'private' | 'public';
  file_size_limit: string | number;
  allowed_mime_types: string[];
  app_category: 'assets' | 'attachments';
  storage_provider: 'objstore' | 'doclib';
  max_size_bytes: string | number | null;
  max_objects: string | number | null;
  usage_total_size: string | number;
  usage_total_objects: string | number;
  usage_updated_at: Date | string | null;
  object_count?: string | number;
  created_at: Date | string;
  updated_at: Date | string;
  created_by: string | null;
  modified_by: string | null;
}

/** The bucket a storage call works on, with its app (the policy scope). */
export interface BucketTarget {
  schema: string;
  app: ActiveApp;
  bucket: BucketRow;
}

const SLUG_KEY = 'storage_buckets_app_id_slug_key';
export const storageKind = (slug: string): string => `storage:${slug}`;

const select = (q: string) => `
  SELECT b.*, (SELECT count(*) FROM ${q}.storage_objects o WHERE o.bucket_id = b.id) AS object_count
    FROM ${q}.storage_buckets b`;

const mb = (bytes: number) => Math.round((bytes / 1024 ** 2) * 100) / 100;
const gb = (bytes: number) => Math.round((bytes / 1024 ** 3) * 10000) / 10000;
const num = (v: string | number | null | undefined): number | null => (v === null || v === undefined ? null : Number(v));

/** Usage, and the quota's state against it (spec §2 `quota_status`, §4 `usage/`). */
export function quotaFigures(b: BucketRow) {
  const totalSize = Number(b.usage_total_size);
  const totalObjects = Number(b.usage_total_objects);
  const maxSize = num(b.max_size_bytes);
  const maxObjects = num(b.max_objects);
  const exceeded = { size: maxSize !== null && totalSize > maxSize, objects: maxObjects !== null && totalObjects > maxObjects, any: false };
  exceeded.any = exceeded.size || exceeded.objects;
  const percent = (used: number, max: number | null) => (max === null ? null : Math.round((used / max) * 10000) / 100);
  const overSize = maxSize === null ? 0 : Math.max(0, totalSize - maxSize);
  return {
    quota: { max_size_bytes: maxSize, max_size_mb: maxSize === null ? null : mb(maxSize), max_size_gb: maxSize === null ? null : gb(maxSize), max_objects: maxObjects },
    usage: {
      total_size: totalSize,
      total_objects: totalObjects,
      size_mb: mb(totalSize),
      size_gb: gb(totalSize),
      last_updated: b.usage_updated_at === null ? null : iso(b.usage_updated_at),
    },
    exceeded,
    percent_used: { size: percent(totalSize, maxSize), objects: percent(totalObjects, maxObjects) },
    overage: { size_bytes: overSize, size_mb: mb(overSize), objects: maxObjects === null ? 0 : Math.max(0, totalObjects - maxObjects) },
    hasQuota: maxSize !== null || maxObjects !== null,
  };
}

export function bucketView(b: BucketRow): BucketView {
  const f = quotaFigures(b);
  return {
    id: Number(b.id),
    uuid: b.uuid,
    name: b.name,
    slug: b.slug,
    visibility: b.visibility,
    file_size_limit: Number(b.file_size_limit),
    allowed_mime_types: b.allowed_mime_types,
    app_category: b.app_category,
    storage_provider: b.storage_provider,
    app: Number(b.app_id),
    object_count: Number(b.object_count ?? 0),
    max_size_bytes: f.quota.max_size_bytes,
    max_size_mb: f.quota.max_size_mb,
    max_size_gb: f.quota.max_size_gb,
    max_objects: f.quota.max_objects,
    quota_exceeded: f.exceeded.any,
    usage: f.usage,
    quota_status: f.hasQuota ? { exceeded: f.exceeded, percent_used: f.percent_used, overage: f.overage } : null,
    created_at: iso(b.created_at),
    updated_at: iso(b.updated_at),
    created_by: b.created_by,
    modified_by: b.modified_by,
  };
}

export const bucketNotFound = (slug: string) => notFound(`Bucket "${slug}"`);

/** A bucket by slug, or 404; `withCount`: with its exact object_count (a count of its objects: only where the view is shown, never on the object routes). */
export async function findBucket(em: EntityManager, schema: string, app: Pick<ActiveApp, 'id'>, slug: string, withCount = false): Promise<BucketRow> {
  const q = quotedSchema(schema);
  const [row] = await preparedRows<BucketRow>(em, `${withCount ? select(q) : `SELECT b.* FROM ${q}.storage_buckets b`} WHERE b.app_id = ? AND b.slug = ?`, [app.id, slug]);
  if (!row) throw bucketNotFound(slug);
  return row;
}

/** The policy resource of a bucket (id: its slug). */
const bucketResource = (b: BucketRow) => ({
  id: b.slug,
  attr: { name: b.name, slug: b.slug, visibility: b.visibility, app_category: b.app_category, storage_provider: b.storage_provider, created_by: b.created_by },
});

/**
 * The bucket `slug` of the app `appSlug`, if the actor may `action` it (CASL on Bucket, then the
 * app's policies on `storage:{slug}`): 404 when either is absent, or when the policies let the
 * actor not even read the bucket (the same body as a missing one); 403 when only `action` is denied.
 */
export async function bucketFor(ctx: ServiceContext, appSlug: string, slug: string, action: Action, policyAction: string = action): Promise<BucketTarget> {
  const schema = await siteSchemaFor(ctx, action, 'Bucket');
  const app = await activeApp(readsOf(ctx), schema, appSlug);
  const bucket = await findBucket(readsOf(ctx), schema, app, slug, action === 'read');
  await authorizeSiteSubject(ctx, action, 'Bucket', { schema, app: app.slug, slug: bucket.slug });
  const decideOn = async (what: string) => (await decide(ctx, schema, app, storageKind(bucket.slug), what, [bucketResource(bucket)]))[0];
  if (!(await decideOn(policyAction))) throw policyAction !== 'read' && (await decideOn('read')) ? permissionDenied() : notFound(`Bucket "${slug}"`);
  return { schema, app, bucket };
}

/** Spec §2's MIME pattern rule and §4's positive quotas, as 400s naming the field (what the schema cannot say). */
function checkFields(input: Partial<BucketCreate>): void {
  const errors: FieldErrors = {};
  const bad = (input.allowed_mime_types ?? []).filter((p) => !validMimePattern(p));
  if (bad.length) {
    errors.allowed_mime_types = bad.map((p) => `Invalid MIME type pattern ${JSON.stringify(p)}: use type/subtype, type/* or */* (letters, digits, hyphens, plus signs and dots; a wildcard only as the whole subtype).`);
  }
  for (const field of ['max_size_bytes', 'max_objects'] as const) {
    const v = input[field];
    if (v !== undefined && v !== null && v <= 0) errors[field] = ['Must be a positive integer, or null for no limit.'];
  }
  if (Object.keys(errors).length) throw validationError(errors);
}

const normalizedTypes = (types: string[] | undefined) => (types === undefined ? undefined : [...new Set(types.map((t) => t.toLowerCase()))]);

export async function listBuckets(ctx: ServiceContext, appSlug: string, query: Record<string, unknown>): Promise<Page<BucketView>> {
  const schema = await siteSchemaFor(ctx, 'read', 'Bucket');
  const app = await activeApp(readsOf(ctx), schema, appSlug);
  await authorizeSiteSubject(ctx, 'read', 'Bucket', { schema, app: app.slug });
  const q = quotedSchema(schema);
  const where = ['b.app_id = ?'];
  const params: unknown[] = [app.id];
  if (typeof query.search === 'string' && query.search !== '') {
    where.push("(b.name ILIKE ? ESCAPE '\\' OR b.slug ILIKE ? ESCAPE '\\')");
    const like = `%${likeEscape(query.search)}%`;
    params.push(like, like);
  }
  for (const field of ['visibility', 'app_category'] as const) {
    if (typeof query[field] === 'string') {
      where.push(`b.${field} = ?`);
      params.push(query[field]);
    }
  }
  if (ctx.actor.kind !== 'system') {
    // Only the buckets the app's policies let the actor read (each bucket is a kind of its own): the others look missing.
    const candidates = await rows<BucketRow>(readsOf(ctx), `SELECT b.* FROM ${q}.storage_buckets b WHERE ${where.join(' AND ')}`, params);
    const readable: string[] = [];
    for (const b of candidates) if ((await decide(ctx, schema, app, storageKind(b.slug), 'read', [bucketResource(b)]))[0]) readable.push(String(b.id));
    where.push('b.id IN (SELECT jsonb_array_elements_text(?::jsonb)::bigint)');
    params.push(JSON.stringify(readable));
  }
  const orderable = new Set(['name', 'slug', 'created_at', 'updated_at', 'file_size_limit', 'visibility', 'app_category']);
  const ordering = typeof query.ordering === 'string' && query.ordering !== '' ? query.ordering : '-created_at';
  const field = ordering.replace(/^-/, '');
  if (!orderable.has(field)) throw validationError({ ordering: [`Unknown ordering "${ordering}": one of ${[...orderable].join(', ')} (prefix - to descend).`] });
  const dir = ordering.startsWith('-') ? 'DESC' : 'ASC';
  const whereSql = where.join(' AND ');
  const request = parsePageRequest(query);
  const count = await countOf(readsOf(ctx), `SELECT count(*) AS n FROM ${q}.storage_buckets b WHERE ${whereSql}`, params);
  const page = resolvePage(request, count);
  const found = await rows<BucketRow>(readsOf(ctx), `${select(q)} WHERE ${whereSql} ORDER BY b.${field} ${dir}, b.id ${dir} LIMIT ? OFFSET ?`, [...params, page.pageSize, pageOffset(page)]);
  return { ...page, count, results: found.map(bucketView) };
}

export async function createBucket(ctx: ServiceContext, appSlug: string, raw: unknown, doclibEnabled: boolean): Promise<BucketView> {
  const schema = await siteSchemaFor(ctx, 'create', 'Bucket');
  const input = checkedBucket(raw);
  const app = await activeApp(readsOf(ctx), schema, appSlug);
  await authorizeSiteSubject(ctx, 'create', 'Bucket', { schema, app: app.slug });
  if (input.storage_provider === 'doclib') throw doclibUnavailable(doclibEnabled);
  const q = quotedSchema(schema);
  const insert = (slug: string) => ctx.em.transactional(async (tx) => insertBucket(tx as EntityManager, schema, app.id, input, { slug, who: actorUuid(ctx) }));
  const taken = async (base: string) => (await rows<{ slug: string }>(readsOf(ctx), `SELECT slug FROM ${q}.storage_buckets WHERE app_id = ? AND (slug = ? OR slug LIKE ?)`, [app.id, base, `${base}-%`])).map((r) => r.slug);
  const slug = await insertWithUniqueSlug(slugifyRemovingSpecials(input.name, 100) || 'bucket', SLUG_KEY, taken, insert);
  return bucketView(await findBucket(ctx.em, schema, app, slug, true));
}

/** A bucket's creation fields, validated (400 naming the bad ones). */
export function checkedBucket(raw: unknown): BucketCreate {
  const input = validate(BucketCreate, raw);
  checkFields(input);
  return input;
}

/** Inserts a bucket row (`uuid`: one chosen before, as an import that stored its files first does); its slug. */
export async function insertBucket(tx: EntityManager, schema: string, appId: number, input: BucketCreate, at: { slug: string; who: string | null; uuid?: string }): Promise<string> {
  const [row] = await tx.execute(
    `INSERT INTO ${quotedSchema(schema)}.storage_buckets (uuid, app_id, name, slug, visibility, file_size_limit, allowed_mime_types, app_category, storage_provider, max_size_bytes, max_objects, created_by, modified_by)
     VALUES (coalesce(?::uuid, gen_random_uuid()), ?, ?, ?, ?, ?, ARRAY(SELECT jsonb_array_elements_text(?::jsonb)), ?, ?, ?, ?, ?, ?) RETURNING slug`,
    [at.uuid ?? null, appId, input.name, at.slug, input.visibility ?? 'private', input.file_size_limit ?? DEFAULT_FILE_SIZE_LIMIT, JSON.stringify(normalizedTypes(input.allowed_mime_types) ?? []),
      input.app_category, input.storage_provider ?? 'objstore', input.max_size_bytes ?? null, input.max_objects ?? null, at.who, at.who],
  );
  return String(row.slug);
}

/**
 * Document-library buckets (spec §4): the provider is a seam with no implementation in this
 * build; with DOCLIB_ENABLED false (the default) creation is 503, with it on the tenant's
 * library is never provisioned here, so 409 `doclib_site_not_ready`. docs/storage.md.
 */
export function doclibUnavailable(enabled: boolean): DomainError {
  if (!enabled) return new DomainError('SERVICE_UNAVAILABLE', 'The document-library storage provider is disabled (DOCLIB_ENABLED).', { extra: { code: 'INTERNAL_ERROR' } });
  return new DomainError('CONFLICT', "The site's document library is not provisioned yet.", { data: { provider_error_code: 'doclib_site_not_ready' } });
}

export async function getBucket(ctx: ServiceContext, appSlug: string, slug: string): Promise<BucketView> {
  return bucketView((await bucketFor(ctx, appSlug, slug, 'read')).bucket);
}

export async function updateBucket(ctx: ServiceContext, appSlug: string, slug: string, raw: unknown): Promise<BucketView> {
  const input = validate(BucketPatch, raw) as Partial<BucketCreate> & Record<string, unknown>;
  const { schema, app, bucket } = await bucketFor(ctx, appSlug, slug, 'update');
  dropReadOnly(BucketPatch, input, bucketView(bucket));
  checkFields(input);
  const { set, params } = assignments(input, ['name', 'app_category', 'visibility', 'file_size_limit', 'max_size_bytes', 'max_objects']);
  if (input.allowed_mime_types !== undefined) {
    set.push('allowed_mime_types = ARRAY(SELECT jsonb_array_elements_text(?::jsonb))');
    params.push(JSON.stringify(normalizedTypes(input.allowed_mime_types)));
  }
  if (set.length) {
    await ctx.em.execute(
      `UPDATE ${quotedSchema(schema)}.storage_buckets SET ${set.join(', ')}, modified_by = ?, updated_at = now() WHERE id = ?`,
      [...params, actorUuid(ctx), bucket.id],
    );
  }
  return bucketView(await findBucket(ctx.em, schema, app, slug, true));
}

/**
 * Deletes the bucket: its records in one transaction that commits only once the store has
 * removed every blob of the bucket; a store failure is a 500 and rolls the records back (all
 * objects stay listed; blobs already removed are gone, which the 500's message says).
 */
export async function deleteBucket(ctx: ServiceContext, store: ObjectStore, appSlug: string, slug: string): Promise<void> {
  const { schema, bucket } = await bucketFor(ctx, appSlug, slug, 'delete');
  const q = quotedSchema(schema);
  await writeTransaction(ctx, async (tx) => {
    const [locked] = await tx.execute(`SELECT id FROM ${q}.storage_buckets WHERE id = ? FOR UPDATE`, [bucket.id]);
    if (!locked) throw notFound(`Bucket "${slug}"`);
    await tx.execute(`DELETE FROM ${q}.storage_objects WHERE bucket_id = ?`, [bucket.id]);
    await tx.execute(`DELETE FROM ${q}.storage_buckets WHERE id = ?`, [bucket.id]);
    try {
      await store.site(schema).deletePrefix(`${bucket.uuid}/`);
    } catch (err) {
      throw new StorageFailure(`The bucket's files could not be removed from storage: ${(err as Error).message}. Nothing was deleted from the records; try again.`, err);
    }
  });
}

/** A failure of the object store: a 500 with the spec's storage envelope ({success: false, message, status_code}). */
export class StorageFailure extends DomainError {
  constructor(message: string, cause?: unknown) {
    super('INTERNAL_ERROR', message);
    this.cause = cause;
  }
}

export async function bucketUsage(ctx: ServiceContext, appSlug: string, slug: string) {
  const { bucket } = await bucketFor(ctx, appSlug, slug, 'read');
  const f = quotaFigures(bucket);
  return {
    bucket: { id: Number(bucket.id), name: bucket.name, slug: bucket.slug, has_quota: f.hasQuota },
    quota: f.quota,
    usage: f.usage,
    exceeded: f.exceeded,
    percent_used: f.percent_used,
    overage: f.overage,
  };
}

/**
 * Refreshes the stored usage counters of every bucket of a site (or of one app) in one
 * statement; returns the buckets over quota. The spec's `check_storage_quotas`.
 */
/** A bucket over a quota: its app (slug and id) and its slug. */
export interface QuotaExceeded {
  app: string;
  app_id: number;
  slug: string;
}

export async function refreshUsage(em: EntityManager, schema: string, appId?: number): Promise<{ buckets: number; exceeded: QuotaExceeded[] }> {
  const q = quotedSchema(schema);
  const updated = await rows<BucketRow & { app_slug: string }>(
    em,
    `UPDATE ${q}.storage_buckets b
        SET usage_total_size = s.total_size, usage_total_objects = s.total_objects, usage_updated_at = now()
       FROM (SELECT b2.id, coalesce(sum(o.size), 0) AS total_size, count(o.id) AS total_objects
               FROM ${q}.storage_buckets b2 LEFT JOIN ${q}.storage_objects o ON o.bucket_id = b2.id
              WHERE (?::integer IS NULL OR b2.app_id = ?::integer)
              GROUP BY b2.id) s
      WHERE s.id = b.id
      RETURNING b.*, (SELECT a.slug FROM ${q}.apps a WHERE a.id = b.app_id) AS app_slug`,
    [appId ?? null, appId ?? null],
  );
  return {
    buckets: updated.length,
    exceeded: updated.filter((r) => quotaFigures(r).exceeded.any).map((r) => ({ app: r.app_slug, app_id: Number(r.app_id), slug: r.slug })),
  };
}

/** The site schemas that hold storage (schema version 8 brought it), in name order. */
export async function storageSites(em: EntityManager): Promise<string[]> {
  return (await rows<{ schema_name: string }>(em, 'SELECT schema_name FROM public.tenant_schemas WHERE version >= 8 ORDER BY schema_name')).map((r) => r.schema_name);
}

/** `check_storage_quotas` for every site (operators, on the database): `onSite` after each, for progress. */
export async function checkQuotasEverySite(
  em: EntityManager,
  onSite: (site: string, index: number, total: number, result: { buckets: number; exceeded: QuotaExceeded[] }) => void,
): Promise<{ sites: number; buckets: number; exceeded: (QuotaExceeded & { site: string })[] }> {
  // Each cluster's sites, on it (db/clusters.ts).
  const sites = (await forEachCluster(em, async (c) => (await storageSites(c)).map((site) => ({ em: c, site })))).flat();
  let buckets = 0;
  const exceeded: (QuotaExceeded & { site: string })[] = [];
  for (const [i, { em: c, site }] of sites.entries()) {
    const r = await refreshUsage(c, site);
    buckets += r.buckets;
    exceeded.push(...r.exceeded.map((x) => ({ ...x, site })));
    onSite(site, i, sites.length, r);
  }
  return { sites: sites.length, buckets, exceeded };
}

/** `check_storage_quotas` for the caller's site: its administrators (and operators). */
export async function checkQuotas(ctx: ServiceContext): Promise<{ buckets: number; exceeded: QuotaExceeded[] }> {
  const schema = await siteSchemaFor(ctx, 'update', 'Bucket');
  return refreshUsage(ctx.em, schema);
}
