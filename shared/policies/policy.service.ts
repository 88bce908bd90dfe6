// The policy API of an app (spec Part 2 §4 "Authorization policies"): create (strict) and put
// (relaxed, idempotent) in Cerbos form or the portable form, list with RE2 filters, get, soft
// delete, derived roles, inspect. Decided on the App subject: the site's administrators
// (superusers and staff of the site) manage an app's policies — `manage` on App, which no other
// site user holds. The store (store.ts) keeps, validates and compiles.
import { linearRegExp } from '../common/linear-regexp.ts';
import { validate } from '../common/validation.ts';
import { actorUuid, type ServiceContext } from '../context.ts';
import { activeAppFor, type ActiveApp } from '../apps/lookup.ts';
import { addFieldError, DomainError, fieldError, notFound, validationError, type FieldErrors } from '../errors.ts';
import { siteSchemaFor } from '../tenancy/site-access.ts';
import { actorLabel } from '../tenancy/tenant-auth.ts';
import { currentPolicyId, policyId, policyKind, policyName, type PolicyDocument } from './model.ts';
import { DerivedRolesQuery, InspectQuery, PolicyDeleteQuery, PolicyListQuery } from './policy.schemas.ts';
import { fromPortable, isPortable, prefixedSetName, unprefixedSetName, type PolicyPlace } from './portable.ts';
import { appScope } from './principal.ts';
import { loadPolicySet } from './hook.ts';
import { appPolicyRows, disablePolicies, entityTypeOf, isSystemKind, SYSTEM_ENTITY_TYPES, writePolicies, type PolicyInput, type PolicyRow, type PolicyWriter } from './store.ts';

export const POLICY_MESSAGES = {
  saved: (ids: { id: string; created: boolean }[]) =>
    ids.length === 1 ? `Policy "${ids[0]!.id}" ${ids[0]!.created ? 'created' : 'updated'}.` : `${ids.length} policies saved: ${ids.map((x) => `"${x.id}"`).join(', ')}.`,
  listed: 'Policies retrieved.',
  derivedRolesListed: 'Derived roles retrieved.',
  inspected: 'Policies inspected.',
  deleted: (ids: string[]) => (ids.length === 1 ? `Policy "${ids[0]}" deleted.` : `${ids.length} policies deleted.`),
  systemActions: 'System actions retrieved.',
} as const;

/** The most policies one request may write. */
export const MAX_POLICIES_PER_REQUEST = 100;

export interface PolicyScope {
  schema: string;
  app: ActiveApp;
  place: PolicyPlace;
}

/** The app whose policies the caller manages: 403 for anyone but the site's administrators (before any 404). */
export async function managedApp(ctx: ServiceContext, appSlug: string): Promise<PolicyScope> {
  const schema = await siteSchemaFor(ctx, 'manage', 'App');
  const app = await activeAppFor(ctx, schema, appSlug, 'manage');
  return { schema, app, place: { schema, appSlug: app.slug } };
}

const writerOf = (ctx: ServiceContext): PolicyWriter => ({ label: actorUuid(ctx) ?? actorLabel(ctx.actor), uuid: actorUuid(ctx) });

const KIND_KEYS = ['resourcePolicy', 'derivedRoles', 'rolePolicy', 'principalPolicy', 'exportVariables', 'exportConstants'] as const;
/** Metadata Cerbos' Admin API returns and maintains itself: accepted back and dropped. */
const MAINTAINED_METADATA = ['storeIdentifier', 'hash', 'sourceAttributes'];
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Field errors of `fn`, re-keyed under `prefix` (`policies.2.`). */
function under<T>(prefix: string, fn: () => T): T {
  try {
    return fn();
  } catch (err) {
    if (!prefix || !(err instanceof DomainError) || !err.errors) throw err;
    const errors: FieldErrors = {};
    for (const [field, messages] of Object.entries(err.errors)) for (const m of messages) addFieldError(errors, `${prefix}${field === 'non_field_errors' ? 'policy' : field}`, m);
    throw validationError(errors, err.message);
  }
}

/**
 * A Cerbos-form document made the app's: its scope the app's (another scope: 400 naming the
 * field), derived-role set names prefixed, Cerbos' maintained metadata dropped. The rest is left to
 * the compiler, which names unknown fields and bad expressions.
 */
function normalizeDocument(raw: Record<string, unknown>, place: PolicyPlace): PolicyDocument {
  const errors: FieldErrors = {};
  const present = KIND_KEYS.filter((k) => raw[k] !== undefined);
  if (present.length !== 1) {
    throw fieldError('policy', 'Give exactly one of resourcePolicy, derivedRoles, rolePolicy or principalPolicy (or a portable policy with policy_type).');
  }
  const key = present[0]!;
  if (key === 'exportVariables' || key === 'exportConstants') throw fieldError(key, 'Exported variables and constants are not supported: declare variables and constants in the policy itself.');
  if (!isObject(raw[key])) throw fieldError(key, 'Must be an object.');
  const doc = structuredClone(raw) as PolicyDocument & Record<string, unknown>;
  doc.apiVersion ??= 'api.cerbos.dev/v1';
  if (doc.metadata !== undefined) {
    if (!isObject(doc.metadata)) throw fieldError('metadata', 'Must be an object.');
    for (const k of MAINTAINED_METADATA) delete doc.metadata[k];
    const annotations = doc.metadata.annotations;
    if (annotations !== undefined && !isObject(annotations)) throw fieldError('metadata.annotations', 'Must be an object.');
  }
  const body = doc[key] as unknown as Record<string, unknown>;
  const text = (field: string, max: number, required = true) => {
    const v = body[field];
    if (v === undefined && !required) return;
    if (typeof v !== 'string' || !v) addFieldError(errors, `${key}.${field}`, 'A non-empty string is required.');
    else if (v.length > max) addFieldError(errors, `${key}.${field}`, `Ensure this field has no more than ${max} characters.`);
  };
  const scope = appScope(place.schema, place.appSlug);
  if (key === 'derivedRoles') {
    text('name', 200);
    if (typeof body.name === 'string') body.name = prefixedSetName(place, body.name);
  } else {
    text(key === 'resourcePolicy' ? 'resource' : key === 'rolePolicy' ? 'role' : 'principal', 255);
    text('version', 100, false);
    if (key !== 'rolePolicy') body.version ??= 'default';
    if (body.scope === undefined) body.scope = scope;
    else if (body.scope !== scope) addFieldError(errors, `${key}.scope`, `Policies of this app have the scope "${scope}".`);
  }
  if (key === 'resourcePolicy' && Array.isArray(body.importDerivedRoles)) {
    body.importDerivedRoles = body.importDerivedRoles.map((n) => (typeof n === 'string' ? prefixedSetName(place, n) : n));
  }
  if (Object.keys(errors).length) throw validationError(errors);
  return doc;
}

/** The limits of the store's columns (id 400, name 255 with the set prefix), in words the caller can act on. */
function checkStorable(doc: PolicyDocument): void {
  if (policyId(doc).length > 400 || policyName(doc).length > 255) {
    throw fieldError('policy', `The policy id "${policyId(doc).slice(0, 60)}…" would be too long (id at most 400 characters, name with its prefix at most 255): shorten the name.`);
  }
}

/** A role policy's id carries no version (`role.{name}/{scope}`, spec §2): its version is "default", so that one id is one policy. */
function checkRoleVersion(doc: PolicyDocument, portable: boolean): void {
  const version = doc.rolePolicy?.version;
  if (version !== undefined && version !== 'default') {
    throw fieldError(portable ? 'version' : 'rolePolicy.version', `A role policy has the version "default" (its id role.{name}/{scope} carries none); got "${version}".`);
  }
}

/** POST's stricter rules: resource and derived-role policies only, no system entity type (spec §7.5). */
function checkCreatable(doc: PolicyDocument, portable: boolean): void {
  const kind = policyKind(doc);
  if (kind !== 'resource' && kind !== 'derived_role') {
    const field = portable ? 'policy_type' : kind === 'role' ? 'rolePolicy' : 'principalPolicy';
    throw fieldError(field, `${kind === 'role' ? 'Role' : 'Principal'} policies cannot be created with POST: use PUT.`);
  }
  if (doc.resourcePolicy && isSystemKind(doc.resourcePolicy.resource)) {
    throw fieldError(
      portable ? 'entity_type' : 'resourcePolicy.resource',
      `Policies of the system entity types (${SYSTEM_ENTITY_TYPES.join(', ')}) are kept by the service: "${entityTypeOf(doc.resourcePolicy.resource)}" cannot be created with POST (use PUT to change one).`,
    );
  }
}

/**
 * Stores one policy, or several (`{policies: [...]}`), for the app: POST (`create`, strict) or
 * PUT (`put`, relaxed); both create or replace. Nothing is stored unless all are valid and the
 * app's resulting policy set compiles.
 */
export async function savePolicies(ctx: ServiceContext, appSlug: string, raw: unknown, mode: 'create' | 'put'): Promise<{ message: string; ids: { id: string; created: boolean }[] }> {
  const { schema, app, place } = await managedApp(ctx, appSlug);
  if (!isObject(raw)) throw validationError({ non_field_errors: ['Invalid data. Expected a JSON object.'] });
  const many = raw.policies !== undefined && !isPortable(raw) && !KIND_KEYS.some((k) => raw[k] !== undefined);
  const items: unknown[] = many ? (Array.isArray(raw.policies) ? raw.policies : []) : [raw];
  if (many && (!items.length || items.length > MAX_POLICIES_PER_REQUEST)) throw fieldError('policies', `Give 1 to ${MAX_POLICIES_PER_REQUEST} policies.`);
  const ids = await writePolicies(ctx.em, schema, app, policyInputs(items, place, mode, many), writerOf(ctx));
  return { message: POLICY_MESSAGES.saved(ids), ids };
}

/**
 * An app package's policies (portable form), any number, in one write: all valid and the app's
 * resulting set compiling, or nothing stored (the import's transaction). Created or replaced.
 */
export async function importPolicies(ctx: ServiceContext, appSlug: string, items: unknown[]): Promise<{ id: string; created: boolean }[]> {
  const { schema, app, place } = await managedApp(ctx, appSlug);
  return items.length ? writePolicies(ctx.em, schema, app, policyInputs(items, place, 'put', true), writerOf(ctx)) : [];
}

/** Each item checked into a document to store (a 400 naming `policies.{i}.…` when one is not). */
function policyInputs(items: unknown[], place: PolicyPlace, mode: 'create' | 'put', many: boolean): PolicyInput[] {
  const inputs: PolicyInput[] = [];
  const seen = new Set<string>();
  for (const [i, item] of items.entries()) {
    const prefix = many ? `policies.${i}.` : '';
    const input = under(prefix, (): PolicyInput => {
      if (!isObject(item)) throw fieldError('policy', 'Must be an object.');
      const portable = isPortable(item);
      const doc = portable ? fromPortable(item, place) : normalizeDocument(item, place);
      checkStorable(doc);
      checkRoleVersion(doc, portable);
      if (mode === 'create') checkCreatable(doc, portable);
      return { doc, fieldPrefix: prefix, annotationsField: portable ? 'metadata' : 'metadata.annotations' };
    });
    const id = policyId(input.doc);
    if (seen.has(id)) throw fieldError(`${prefix}policy`, `Policy "${id}" is given twice.`);
    seen.add(id);
    inputs.push(input);
  }
  return inputs;
}

const ids = (v: string | string[] | undefined): string[] | undefined => (v === undefined ? undefined : [...new Set(Array.isArray(v) ? v : [v])]);

/** A user's regular expression on RE2 (linear time whatever the pattern); a bad one is a 400 naming the parameter. */
function userRegexp(field: string, pattern: string | undefined): { test(s: string): boolean } | undefined {
  if (pattern === undefined) return undefined;
  try {
    return linearRegExp(pattern, '');
  } catch (err) {
    throw fieldError(field, `Invalid regular expression: ${(err as Error).message}`);
  }
}

/** A row's name as callers see it (a derived-role set without the app's prefix). */
const visibleName = (row: PolicyRow, place: PolicyPlace): string => (row.kind === 'derived_role' ? unprefixedSetName(place, row.name) : row.name);

interface Filters {
  name_regexp?: string;
  scope_regexp?: string;
  version_regexp?: string;
  include_disabled?: boolean;
}

/** The app's own policies matching the filters (the scope filter within the app: another app's are never among them). */
async function filteredRows(ctx: ServiceContext, scope: PolicyScope, query: Filters, extra: (row: PolicyRow) => boolean = () => true): Promise<PolicyRow[]> {
  const name = userRegexp('name_regexp', query.name_regexp);
  const scopeRe = userRegexp('scope_regexp', query.scope_regexp);
  const version = userRegexp('version_regexp', query.version_regexp);
  const found = await appPolicyRows(ctx.em, scope.schema, scope.app, { includeDisabled: query.include_disabled === true });
  return found.filter(
    (r) => extra(r) && (!name || name.test(visibleName(r, scope.place))) && (!scopeRe || scopeRe.test(r.scope)) && (!version || version.test(r.version)),
  );
}

/** A stored policy as the API shows it: the document, its id as `metadata.storeIdentifier`, `disabled` when it is. */
function shown(row: PolicyRow): Record<string, unknown> {
  const { disabled: _d, metadata, ...doc } = row.document;
  return { ...doc, ...(row.disabled ? { disabled: true } : {}), metadata: { ...metadata, storeIdentifier: row.id } };
}

/** `id`, or the id it has now if it is of the older form (model.ts currentPolicyId). */
const idsToFind = (wanted: string[]): string[] => [...new Set(wanted.flatMap((id) => [id, currentPolicyId(id) ?? id]))];

/** The row `id` names: a policy with that id, else the one its older form names. */
const named = (found: PolicyRow[], id: string): PolicyRow | undefined => found.find((r) => r.id === id) ?? found.find((r) => r.id === currentPolicyId(id));

/**
 * The app's policies by id (each id as it is, or in the older form: `resource.x.vdefault/…`),
 * each of which must exist (404 naming the missing ones); disabled ones included.
 */
async function rowsById(ctx: ServiceContext, scope: PolicyScope, wanted: string[]): Promise<PolicyRow[]> {
  const found = await appPolicyRows(ctx.em, scope.schema, scope.app, { includeDisabled: true, ids: idsToFind(wanted) });
  const missing = wanted.filter((id) => !named(found, id));
  if (missing.length) throw notFound({ message: `No policy ${missing.map((id) => `"${id}"`).join(', ')} in app "${scope.app.slug}".` });
  return [...new Set(wanted.map((id) => named(found, id)!))];
}

/** GET policies/: the app's policies, filtered; with `id`, exactly those. */
export async function listPolicies(ctx: ServiceContext, appSlug: string, rawQuery: unknown): Promise<{ data: Record<string, unknown>[]; total: number }> {
  const scope = await managedApp(ctx, appSlug);
  const query = validate(PolicyListQuery, rawQuery, 'query');
  const wanted = ids(query.id);
  const found = wanted ? await rowsById(ctx, scope, wanted) : await filteredRows(ctx, scope, query);
  return { data: found.map(shown), total: found.length };
}

/** DELETE policies/?id=: soft delete (disabled, kept), refused (400) when the rest would not compile. */
export async function deletePolicies(ctx: ServiceContext, appSlug: string, rawQuery: unknown): Promise<string> {
  const scope = await managedApp(ctx, appSlug);
  const found = (await rowsById(ctx, scope, ids(validate(PolicyDeleteQuery, rawQuery, 'query').id)!)).map((r) => r.id);
  await disablePolicies(ctx.em, scope.schema, scope.app, found, writerOf(ctx));
  return POLICY_MESSAGES.deleted(found);
}

/** GET policies/derived-roles/: the app's derived-role sets. */
export async function listDerivedRoles(ctx: ServiceContext, appSlug: string, rawQuery: unknown): Promise<{ data: Record<string, unknown>[]; total: number }> {
  const scope = await managedApp(ctx, appSlug);
  const query = validate(DerivedRolesQuery, rawQuery, 'query');
  const found = await filteredRows(ctx, scope, query, (r) => r.kind === 'derived_role');
  return { data: found.map(shown), total: found.length };
}

/**
 * GET policies/inspect/: what the compiled set says of each of the app's policies (actions,
 * derived roles, variables, constants, attributes). A disabled policy (include_disabled) is not in
 * the compiled set: it is reported as `{policyId, disabled: true}`.
 */
export async function inspectPolicies(ctx: ServiceContext, appSlug: string, rawQuery: unknown): Promise<Record<string, unknown>> {
  const scope = await managedApp(ctx, appSlug);
  const query = validate(InspectQuery, rawQuery, 'query');
  const wanted = ids(query.policy_id);
  const matching = await filteredRows(ctx, scope, query);
  const found = wanted ? matching.filter((r) => wanted.some((id) => named(matching, id) === r)) : matching;
  const inspected = (await loadPolicySet(ctx, scope.schema, scope.app)).inspect();
  const results: Record<string, unknown> = {};
  for (const row of found) results[row.id] = row.disabled ? { policyId: row.id, disabled: true } : (inspected[row.id] ?? { policyId: row.id });
  return results;
}
