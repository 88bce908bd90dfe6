// Who may do what to an object (spec Part 3 §4 "Permissions", issue 13 item 6): the rule of
// visibility and ownership AND the app's policies on the bucket's kind `storage:{slug}`, both.
//
// Visibility: an object's own (`public`/`private`) or, when null, its bucket's.
// - read, download: public objects by anyone (no token needed); private ones by their owner
//   (created_by) or the site's staff and superusers;
// - upload of a new path: any signed-in user of the site (who becomes its owner);
// - replace, update (metadata, move) and delete of an existing object: its owner or staff, in
//   public buckets too (a public bucket is readable by all, not writable over other users' files).
// The system actor (operators, the CLI's direct mode) is above both rules. docs/storage.md.
import type { ServiceContext } from '../context.ts';
import { DomainError, permissionDenied } from '../errors.ts';
import { decide, planFor } from '../policies/hook.ts';
import { PlanNotSupported, planSql } from '../data/records/policy-sql.ts';
import type { ColumnInfo, SqlFragment } from '../data/query/filter.ts';
import { storageKind, type BucketTarget } from './bucket.service.ts';

export interface ObjectRow {
  id: string | number;
  uuid: string;
  bucket_id: number;
  path: string;
  filename: string;
  size: string | number;
  mimetype: string;
  metadata: Record<string, unknown>;
  visibility: 'private' | 'public' | null;
  blob_key: string;
  etag: string;
  created_at: Date | string;
  updated_at: Date | string;
  created_by: string | null;
  modified_by: string | null;
}

export type ObjectAction = 'read' | 'download' | 'upload' | 'update' | 'delete';

/** The actor is the system, or staff/superuser of this site. */
export function isStaff(ctx: ServiceContext): boolean {
  return ctx.actor.kind === 'system' || ctx.actor.is_staff || ctx.actor.is_superuser;
}

const effectiveVisibility = (b: BucketTarget, o: Pick<ObjectRow, 'visibility'>) => o.visibility ?? b.bucket.visibility;

/** The visibility-and-owner rule for an existing object. */
export function ruleAllows(ctx: ServiceContext, b: BucketTarget, o: Pick<ObjectRow, 'visibility' | 'created_by'>, action: ObjectAction): boolean {
  if (isStaff(ctx)) return true;
  const owner = ctx.actor.kind === 'user' && o.created_by !== null && o.created_by === ctx.actor.uuid;
  if (action === 'read' || action === 'download') return owner || effectiveVisibility(b, o) === 'public';
  return owner;
}

/** An object as a policy resource (id: its path). */
export function objectResource(o: Pick<ObjectRow, 'path' | 'filename' | 'size' | 'mimetype' | 'visibility' | 'created_by' | 'metadata'>) {
  return {
    id: o.path,
    attr: { path: o.path, filename: o.filename, size: Number(o.size), mimetype: o.mimetype, visibility: o.visibility, created_by: o.created_by, metadata: o.metadata },
  };
}

/** Whether the actor may `action` each object (the rule and the policies); in order. */
export async function objectsAllowed(ctx: ServiceContext, b: BucketTarget, action: ObjectAction, objects: ObjectRow[]): Promise<boolean[]> {
  const rule = objects.map((o) => ruleAllows(ctx, b, o, action));
  const policy = await decide(ctx, b.schema, b.app, storageKind(b.bucket.slug), action, objects.map(objectResource));
  return rule.map((ok, i) => ok && policy[i]!);
}

/** 403 unless the actor may `action` this object. */
export async function requireObject(ctx: ServiceContext, b: BucketTarget, action: ObjectAction, o: ObjectRow): Promise<void> {
  if (!(await objectsAllowed(ctx, b, action, [o]))[0]) throw permissionDenied();
}

/** 403 unless the actor may upload a new object at `path` (any user of the site, then the policies on the would-be object). */
export async function requireNewObject(ctx: ServiceContext, b: BucketTarget, resource: Parameters<typeof objectResource>[0]): Promise<void> {
  const [ok] = await decide(ctx, b.schema, b.app, storageKind(b.bucket.slug), 'upload', [objectResource(resource)]);
  if (!ok) throw permissionDenied();
}

/** The columns of storage_objects (alias `o`) a policy condition may name, as `request.resource.attr.*`. */
const POLICY_COLUMNS: ReadonlyMap<string, ColumnInfo> = new Map([
  ['path', { column: 'path', pgType: 'text', sql: 'o.path' }],
  ['filename', { column: 'filename', pgType: 'text', sql: 'o.filename' }],
  ['size', { column: 'size', pgType: 'bigint', sql: 'o.size' }],
  ['mimetype', { column: 'mimetype', pgType: 'text', sql: 'o.mimetype' }],
  ['visibility', { column: 'visibility', pgType: 'text', sql: 'o.visibility' }],
  ['created_by', { column: 'created_by', pgType: 'uuid', sql: 'o.created_by' }],
]);

/**
 * The objects of the bucket the actor may read, as a condition over `o` (the rule and the read
 * plan of the policies), for lists and searches: one statement, no per-row check.
 */
export async function readableObjects(ctx: ServiceContext, b: BucketTarget): Promise<SqlFragment> {
  const parts: SqlFragment[] = [];
  if (!isStaff(ctx)) {
    const uuid = ctx.actor.kind === 'user' ? ctx.actor.uuid : null;
    parts.push(b.bucket.visibility === 'public'
      ? { sql: "(o.visibility IS DISTINCT FROM 'private' OR o.created_by = ?::uuid)", params: [uuid] }
      : { sql: "(o.visibility = 'public' OR o.created_by = ?::uuid)", params: [uuid] });
  }
  const formula = await planFor(ctx, b.schema, b.app, storageKind(b.bucket.slug), 'read');
  if (formula === false) return { sql: 'FALSE', params: [] };
  if (formula !== true) {
    try {
      parts.push(planSql(formula, { columns: POLICY_COLUMNS, pk: ['path'] }));
    } catch (err) {
      if (err instanceof PlanNotSupported) throw new DomainError('BUSINESS_LOGIC_ERROR', `The policies of bucket "${b.bucket.slug}" cannot be applied to a list of its objects: ${err.message}`);
      throw err;
    }
  }
  if (!parts.length) return { sql: 'TRUE', params: [] };
  return { sql: parts.map((p) => `(${p.sql})`).join(' AND '), params: parts.flatMap((p) => p.params) };
}
