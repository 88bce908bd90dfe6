// The policy store: one row per policy id in the site schema's `policies` table (migration 6),
// the document in Cerbos' JSON form (model.ts). A row belongs to one app (`app_id`), except the
// unscoped ancestors: Cerbos needs a policy of the same kind and version at every ancestor scope
// of a scoped one (CERBOS-NOTES §0), so for every scoped policy of an app the service keeps the
// unscoped one itself (app_id NULL; `rules: []`, or for the system entity types `DENY *` and for
// roles "allow all", spec Part 2 §2 "System policies"), and removes it when no scoped policy of
// the site needs it any more. Callers never write those.
//
// Every write runs in one transaction under the site's policy lock and is validated by compiling
// the app's whole resulting policy set (the engine, engine.ts) before anything is stored: a
// compile error is a 400 naming each problem, and nothing changes. An app's compiled set holds its
// own enabled policies and unscoped policies only: never another app's policies (the write-time
// set and loadAppPolicies: the ancestors its scoped policies need; the runtime one, hook.ts: the
// site's unscoped policies, which carry no app's rules).
import type { EntityManager } from '@mikro-orm/postgresql';
import { rows } from '../db/sql.ts';
import { addFieldError, DomainError, fieldError, validationError, type FieldErrors } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { compilePolicies, PolicyCompileError, type PolicySet } from './engine.ts';
import type { PolicyApp } from './hook.ts';
import { policyId, policyKind, policyName, policyScope, policyVersion, type PolicyDocument } from './model.ts';
import { RESERVED_METADATA } from './portable.ts';

export type { PolicySet } from './engine.ts';
export type { PolicyApp } from './hook.ts';

/** Resource types whose policies the service creates with the resource itself (spec Part 2 §2). */
export const SYSTEM_ENTITY_TYPES = ['datatable', 'function', 'storage', 'query'] as const;

/** The entity type of a resource kind `{entity_type}:{name}` (the whole kind when it has no `:`). */
export const entityTypeOf = (kind: string): string => kind.split(':')[0]!;
export const isSystemKind = (kind: string): boolean => (SYSTEM_ENTITY_TYPES as readonly string[]).includes(entityTypeOf(kind));

export interface PolicyRow {
  id: string;
  app_id: number | null;
  kind: string;
  name: string;
  scope: string;
  version: string;
  document: PolicyDocument;
  disabled: boolean;
  is_system: boolean;
  created_at: Date | string;
  modified_at: Date | string;
}

const COLUMNS = 'id, app_id, kind, name, scope, version, document, disabled, is_system, created_at, modified_at';

/** Columns a policy row is found and filtered by, from its document. */
export function columnsOf(doc: PolicyDocument) {
  return { id: policyId(doc), kind: policyKind(doc), name: policyName(doc), scope: policyScope(doc), version: policyVersion(doc) };
}

/** What a row is (kind, name, version) when it is not what `doc` is: two policies whose ids are one (a kind's `:` is written `_`: `a_b:c`, `a:b_c`). */
function otherPolicy(row: Pick<PolicyRow, 'kind' | 'name' | 'version'>, doc: PolicyDocument): string | undefined {
  const c = columnsOf(doc);
  if (row.kind === c.kind && row.name === c.name && row.version === c.version) return undefined;
  return `${row.kind} policy "${row.name}"${row.kind === 'derived_role' ? '' : ` (version "${row.version}")`}`;
}

const idClash = (id: string, other: string) =>
  `The policy id "${id}" is that of another policy, the ${other}: ids write a kind's ":" as "_"; choose another name.`;

/** Serialises the writes to one site's policies (the unscoped ancestors are shared by its apps). */
async function lockPolicies(em: EntityManager, schema: string): Promise<void> {
  await em.execute('SELECT pg_advisory_xact_lock(hashtext(?))', [`policies:${schema}`]);
}

/** `fn` in `em`'s transaction, or in a new one. */
const inTransaction = <T>(em: EntityManager, fn: (tx: EntityManager) => Promise<T>): Promise<T> =>
  em.isInTransaction() ? fn(em) : em.transactional((tx) => fn(tx as EntityManager));

/** An app's own rows (never the unscoped ancestors), enabled ones unless `includeDisabled`, by id. */
export async function appPolicyRows(em: EntityManager, schema: string, app: PolicyApp, options: { includeDisabled?: boolean; ids?: string[] } = {}): Promise<PolicyRow[]> {
  const where = ['app_id = ?'];
  const params: unknown[] = [app.id];
  if (!options.includeDisabled) where.push('NOT disabled');
  if (options.ids) {
    if (!options.ids.length) return [];
    where.push('id IN (?)');
    params.push(options.ids);
  }
  return rows<PolicyRow>(em, `SELECT ${COLUMNS} FROM ${quotedSchema(schema)}.policies WHERE ${where.join(' AND ')} ORDER BY id`, params);
}

/**
 * The enabled documents the app's compiled set is built from: the app's policies and the
 * unscoped ancestors its scoped policies need (no other app's policy, ever).
 */
export async function loadAppPolicies(em: EntityManager, schema: string, app: PolicyApp): Promise<PolicyDocument[]> {
  const q = quotedSchema(schema);
  const found = await rows<{ document: PolicyDocument }>(
    em,
    `SELECT document FROM ${q}.policies WHERE app_id = ? AND NOT disabled
     UNION ALL
     SELECT a.document FROM ${q}.policies a
      WHERE a.app_id IS NULL AND NOT a.disabled
        AND EXISTS (SELECT 1 FROM ${q}.policies c WHERE c.app_id = ? AND NOT c.disabled AND c.scope <> ''
                       AND c.kind = a.kind AND c.name = a.name AND c.version = a.version)`,
    [app.id, app.id],
  );
  return found.map((r) => r.document);
}

/**
 * A compile failure as the 400 of a policy write: each problem under the field it names — in the
 * caller's body (`resourcePolicy.rules.0.condition.match.expr`, `policies.1.…`) for a policy of the
 * request, else under `<policy id>: <path>` (a stored policy the change breaks).
 */
export function compileFailure(err: PolicyCompileError, fields: ReadonlyMap<string, string> = new Map()): DomainError {
  const errors: FieldErrors = {};
  for (const issue of err.issues) {
    const prefix = fields.get(issue.policy);
    const field = prefix !== undefined ? `${prefix}${issue.path || 'policy'}` : issue.path ? `${issue.policy}: ${issue.path}` : issue.policy;
    addFieldError(errors, field, issue.message);
  }
  return validationError(errors, 'Invalid policy: the policy set does not compile.');
}

/** Compiles documents; a compile failure is the 400 of compileFailure. */
function compileOrRefuse(docs: PolicyDocument[], fields: ReadonlyMap<string, string>): PolicySet {
  try {
    return compilePolicies(docs);
  } catch (err) {
    if (err instanceof PolicyCompileError) throw compileFailure(err, fields);
    throw err;
  }
}

/**
 * The unscoped ancestor the service keeps for a scoped policy (undefined for derived roles and
 * unscoped policies): resource policies of the system entity types deny everything, role
 * policies allow everything (spec §2's default level), any other kind has no rules.
 */
export function ancestorOf(doc: PolicyDocument): PolicyDocument | undefined {
  if (!policyScope(doc)) return undefined;
  const version = policyVersion(doc);
  if (doc.resourcePolicy) {
    const resource = doc.resourcePolicy.resource;
    const rules = isSystemKind(resource) ? [{ name: 'system-deny-all', actions: ['*'], effect: 'EFFECT_DENY' as const, roles: ['*'] }] : [];
    return { apiVersion: 'api.cerbos.dev/v1', resourcePolicy: { resource, version, rules } };
  }
  if (doc.rolePolicy) return { apiVersion: 'api.cerbos.dev/v1', rolePolicy: { role: doc.rolePolicy.role, version, rules: [{ resource: '*', allowActions: ['*'] }] } };
  if (doc.principalPolicy) return { apiVersion: 'api.cerbos.dev/v1', principalPolicy: { principal: doc.principalPolicy.principal, version, rules: [] } };
  return undefined;
}

/** Who writes, as the reserved metadata records it. */
export interface PolicyWriter {
  /** The user's id (the site user's UUID), or `system:<name>`. */
  label: string;
  /** The user's UUID for the row's created_by / modified_by columns; null for a system actor. */
  uuid: string | null;
}

/** One policy to store, with where the caller's body has it. */
export interface PolicyInput {
  doc: PolicyDocument;
  /** Where the policy is in the caller's body: '' or `policies.0.`. */
  fieldPrefix: string;
  /** The field of the caller's annotations under the prefix: `metadata.annotations` or (portable form) `metadata`. */
  annotationsField: string;
  isSystem?: boolean;
}

/** The document with the service's metadata: created_* kept from the stored one, modified_* now. */
function stamped(doc: PolicyDocument, stored: PolicyDocument | undefined, writer: PolicyWriter, now: string): PolicyDocument {
  const before = stored?.metadata?.annotations ?? {};
  const annotations = {
    ...doc.metadata?.annotations,
    created_by: before.created_by ?? writer.label,
    created_date: before.created_date ?? now,
    modified_by: writer.label,
    modified_date: now,
  };
  return { ...doc, metadata: { ...doc.metadata, annotations } };
}

/** Refuses reserved annotations, except the stored values sent back unchanged (GET, edit, PUT). */
function checkReserved(inputs: PolicyInput[], stored: Map<string, PolicyRow>, errors: FieldErrors): void {
  for (const input of inputs) {
    const given = input.doc.metadata?.annotations ?? {};
    const before = stored.get(policyId(input.doc))?.document.metadata?.annotations ?? {};
    for (const key of RESERVED_METADATA) {
      if (Object.hasOwn(given, key) && given[key] !== before[key]) {
        addFieldError(errors, `${input.fieldPrefix}${input.annotationsField}.${key}`, 'Reserved metadata, set by the service: it cannot be given.');
      }
    }
  }
}

async function upsert(tx: EntityManager, schema: string, appId: number | null, doc: PolicyDocument, isSystem: boolean, writer: PolicyWriter): Promise<void> {
  const c = columnsOf(doc);
  const changed = await rows<{ id: string }>(
    tx,
    `INSERT INTO ${quotedSchema(schema)}.policies AS p (id, app_id, kind, name, scope, version, document, disabled, is_system, created_by, modified_by)
     VALUES (?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?, ?)
     ON CONFLICT (id) DO UPDATE SET document = EXCLUDED.document, disabled = EXCLUDED.disabled, is_system = EXCLUDED.is_system,
            modified_by = EXCLUDED.modified_by, modified_at = now()
      WHERE p.app_id IS NOT DISTINCT FROM EXCLUDED.app_id
     RETURNING id`,
    [c.id, appId, c.kind, c.name, c.scope, c.version, JSON.stringify(doc), doc.disabled === true, isSystem, writer.uuid, writer.uuid],
  );
  // Ids carry the app's scope or prefix: another owner's row here would be a bug, never overwritten.
  if (!changed.length) throw new Error(`Policy ${c.id} belongs to another owner.`);
}

/** Removes the unscoped ancestors no enabled scoped policy of the site needs any more. */
async function pruneAncestors(tx: EntityManager, schema: string): Promise<void> {
  const q = quotedSchema(schema);
  await tx.execute(
    `DELETE FROM ${q}.policies a WHERE a.app_id IS NULL AND a.scope = ''
        AND NOT EXISTS (SELECT 1 FROM ${q}.policies c WHERE c.app_id IS NOT NULL AND NOT c.disabled AND c.scope <> ''
                           AND c.kind = a.kind AND c.name = a.name AND c.version = a.version)`,
  );
}

/**
 * The app's policy set after replacing its policies by `changes` (id → document, or null for
 * one disabled), compiled; then the rows written and the ancestors kept. All or nothing.
 */
async function applyChanges(
  tx: EntityManager,
  schema: string,
  app: PolicyApp,
  changes: { doc: PolicyDocument; isSystem: boolean }[],
  writer: PolicyWriter,
  fields: ReadonlyMap<string, string> = new Map(),
): Promise<void> {
  const q = quotedSchema(schema);
  const current = new Map((await appPolicyRows(tx, schema, app)).map((r) => [r.id, r.document]));
  for (const { doc } of changes) {
    if (doc.disabled) current.delete(policyId(doc));
    else current.set(policyId(doc), doc);
  }
  const needed = new Map<string, PolicyDocument>();
  for (const doc of current.values()) {
    const ancestor = ancestorOf(doc);
    if (ancestor) needed.set(policyId(ancestor), ancestor);
  }
  const existing = needed.size
    ? await rows<Pick<PolicyRow, 'id' | 'kind' | 'name' | 'version' | 'document' | 'disabled'>>(tx, `SELECT id, kind, name, version, document, disabled FROM ${q}.policies WHERE app_id IS NULL AND id IN (?)`, [[...needed.keys()]])
    : [];
  for (const r of existing) {
    const other = otherPolicy(r, needed.get(r.id)!);
    if (other) throw fieldError('policy', idClash(r.id, `unscoped ${other} of another app`));
  }
  const kept = new Map(existing.map((r) => [r.id, r]));
  const now = new Date().toISOString();
  const missing = [...needed.entries()].filter(([id]) => !kept.get(id) || kept.get(id)!.disabled).map(([, doc]) => stamped(doc, undefined, writer, now));
  compileOrRefuse([...current.values(), ...existing.filter((r) => !r.disabled).map((r) => r.document), ...missing], fields);
  for (const { doc, isSystem } of changes) await upsert(tx, schema, app.id, doc, isSystem, writer);
  for (const doc of missing) await upsert(tx, schema, null, doc, true, writer);
  await pruneAncestors(tx, schema);
}

/**
 * Stores policies of the app (each created or replaced: an idempotent upsert), with the service's
 * metadata, after compiling the app's resulting set. Returns each id and whether it is new.
 */
export async function writePolicies(em: EntityManager, schema: string, app: PolicyApp, inputs: PolicyInput[], writer: PolicyWriter): Promise<{ id: string; created: boolean }[]> {
  return inTransaction(em, async (tx) => {
    await lockPolicies(tx, schema);
    const ids = inputs.map((i) => policyId(i.doc));
    const stored = new Map((await appPolicyRows(tx, schema, app, { includeDisabled: true, ids })).map((r) => [r.id, r]));
    const errors: FieldErrors = {};
    for (const input of inputs) {
      const before = stored.get(policyId(input.doc));
      const other = before && otherPolicy(before, input.doc);
      if (other) addFieldError(errors, `${input.fieldPrefix}policy`, idClash(policyId(input.doc), other));
    }
    checkReserved(inputs, stored, errors);
    if (Object.keys(errors).length) throw validationError(errors);
    const now = new Date().toISOString();
    const changes = inputs.map((i) => ({ doc: stamped(i.doc, stored.get(policyId(i.doc))?.document, writer, now), isSystem: i.isSystem ?? false }));
    await applyChanges(tx, schema, app, changes, writer, new Map(inputs.map((i) => [policyId(i.doc), i.fieldPrefix])));
    return ids.map((id) => ({ id, created: !stored.has(id) }));
  });
}

/**
 * Soft-deletes policies of the app (kept with `disabled: true`, listed only with
 * include_disabled), if the app's set still compiles without them. Returns how many were enabled.
 */
export async function disablePolicies(em: EntityManager, schema: string, app: PolicyApp, ids: string[], writer: PolicyWriter): Promise<number> {
  return inTransaction(em, async (tx) => {
    await lockPolicies(tx, schema);
    const found = await appPolicyRows(tx, schema, app, { includeDisabled: true, ids });
    const enabled = found.filter((r) => !r.disabled);
    const now = new Date().toISOString();
    const changes = enabled.map((r) => ({ doc: { ...stamped(r.document, r.document, writer, now), disabled: true }, isSystem: r.is_system }));
    if (changes.length) await applyChanges(tx, schema, app, changes, writer);
    return changes.length;
  });
}
