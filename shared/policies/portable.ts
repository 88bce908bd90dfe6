// The spec's portable form of a policy (Part 2 §2 "Authorization policy": policy_type, name,
// entity_type, rules, import_derived_roles, definitions, parent_roles, variables, metadata), the
// form packages carry, converted to and from the Cerbos-form documents the store keeps (model.ts).
// A portable policy names nothing of its tenant or app: the scope `{schema}_{app_slug}` and the
// derived-role set prefix `{schema}_{app_slug}_` are added on the way in and taken off on the way
// out, so a policy exported from one app imports into another unchanged.
import { Type, type Static } from '@sinclair/typebox';
import { validate, StringEnum } from '../common/validation.ts';
import { addFieldError, validationError, type FieldErrors } from '../errors.ts';
import { IDENTIFIER_PATTERNS } from './document.schemas.ts';
import type { Condition, Constants, PolicyDocument, ResourceRule, RoleRule, ScopePermissions, Variables } from './model.ts';
import { appScope } from './principal.ts';

/** Where a policy goes: the site's schema and the app's slug. */
export interface PolicyPlace {
  schema: string;
  appSlug: string;
}

export const POLICY_TYPES = ['resource', 'role', 'derived_role'] as const;
export type PortablePolicyType = (typeof POLICY_TYPES)[number];

/** The prefix of an app's derived-role set names: `{schema}_{app_slug}_` (sets are global in Cerbos). */
export const derivedRolePrefix = (place: PolicyPlace): string => `${appScope(place.schema, place.appSlug)}_`;

/** A derived-role set name as stored: prefixed (a name given with the prefix already is kept). */
export const prefixedSetName = (place: PolicyPlace, name: string): string => {
  const prefix = derivedRolePrefix(place);
  return name.startsWith(prefix) ? name : `${prefix}${name}`;
};

/** A derived-role set name as callers write it: without the app's prefix. */
export const unprefixedSetName = (place: PolicyPlace, name: string): string => {
  const prefix = derivedRolePrefix(place);
  return name.startsWith(prefix) ? name.slice(prefix.length) : name;
};

const Rules = Type.Array(Type.Record(Type.String(), Type.Unknown()), { description: 'resource: {actions, effect, roles, derived_roles, condition}; role: {resource, allow_actions, condition?}' });

/** The portable policy as a body: its fields are checked here, its rules and expressions when the policy set compiles. */
export const PortablePolicy = Type.Object(
  {
    policy_type: StringEnum(POLICY_TYPES),
    name: Type.String({ minLength: 1, maxLength: 200, description: 'Without scope or prefix: the resource name (kind `{entity_type}:{name}`), the role, or the derived-role set' }),
    entity_type: Type.Optional(
      Type.String({ minLength: 1, maxLength: 50, pattern: IDENTIFIER_PATTERNS.entityType.source, description: 'resource (required): `datatable`, `function`, `storage`, `query` or a kind of the app' }),
    ),
    version: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: IDENTIFIER_PATTERNS.version.source, description: 'resource, role: the policy version (default `default`)' })),
    scope: Type.Optional(Type.String({ description: "Optional; when given it must be the app's scope `{schema}_{app_slug}`" })),
    rules: Type.Optional(Rules),
    import_derived_roles: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { description: 'resource: derived-role sets of the app, unprefixed' })),
    definitions: Type.Optional(Type.Array(Type.Record(Type.String(), Type.Unknown()), { description: 'derived_role: {name, parentRoles, condition?}' })),
    parent_roles: Type.Optional(Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { description: 'role: the roles it inherits' })),
    variables: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: '`{local: {name: expr}, import: [...]}`, or a plain map of name to expression' })),
    constants: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: '`{local: {name: value}}`, or a plain map of name to value (an addition to the spec\'s table)' })),
    scope_permissions: Type.Optional(StringEnum(['SCOPE_PERMISSIONS_OVERRIDE_PARENT', 'SCOPE_PERMISSIONS_REQUIRE_PARENTAL_CONSENT_FOR_ALLOWS'] as const)),
    metadata: Type.Optional(Type.Record(Type.String(), Type.Unknown(), { description: '`description`, `tags` (strings), and other string annotations' })),
    disabled: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false, $id: 'PortablePolicy' },
);
export type PortablePolicy = Static<typeof PortablePolicy>;

/** The fields each policy type has (besides policy_type, name, metadata, disabled). */
const FIELDS_OF: Record<PortablePolicyType, ReadonlySet<string>> = {
  resource: new Set(['entity_type', 'version', 'scope', 'rules', 'import_derived_roles', 'variables', 'constants', 'scope_permissions']),
  role: new Set(['version', 'scope', 'rules', 'parent_roles', 'variables', 'constants']),
  derived_role: new Set(['definitions', 'variables', 'constants']),
};
const COMMON = new Set(['policy_type', 'name', 'metadata', 'disabled']);

/** Whether a body is in the portable form (it names its policy_type). */
export const isPortable = (body: unknown): boolean => typeof body === 'object' && body !== null && !Array.isArray(body) && 'policy_type' in body;

/** Keys renamed from the portable form to Cerbos' (unknown keys pass through: the compiler names them). */
function renamed(object: Record<string, unknown>, names: Record<string, string>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(object).map(([k, v]) => [names[k] ?? k, v]));
}

/** `{local, import}` as given, or a plain map of name → expression (variables) or value (constants) as `{local}`. */
function localsOf<T extends Variables | Constants>(v: Record<string, unknown> | undefined): T | undefined {
  if (!v) return undefined;
  const keys = Object.keys(v);
  if (keys.length && keys.every((k) => k === 'local' || k === 'import')) return v as T;
  return { local: v } as T;
}
const variablesOf = (v: Record<string, unknown> | undefined) => localsOf<Variables>(v);
const constantsOf = (v: Record<string, unknown> | undefined) => localsOf<Constants>(v);

/** The pattern a portable policy's `name` follows (Cerbos' identifier rules, document.schemas.ts). */
const NAME_RULE: Record<PortablePolicyType, { pattern: RegExp; words: string }> = {
  resource: { pattern: IDENTIFIER_PATTERNS.kind, words: 'word characters, `@`, `.`, `-`; `/` and `:` only between such parts' },
  role: { pattern: IDENTIFIER_PATTERNS.name, words: 'word characters, `.` and `-`' },
  derived_role: { pattern: IDENTIFIER_PATTERNS.name, words: 'word characters, `.` and `-`' },
};

/**
 * Portable `metadata` → the document's `description` and `metadata.annotations` (Cerbos keeps
 * string annotations only): `description` is the document's description, `tags` (an array of
 * strings) is kept as JSON text in the `tags` annotation, every other entry must be a string.
 */
function metadataIn(metadata: Record<string, unknown> | undefined, errors: FieldErrors): Pick<PolicyDocument, 'description' | 'metadata'> {
  if (!metadata) return {};
  const out: Pick<PolicyDocument, 'description' | 'metadata'> = {};
  const annotations: Record<string, string> = {};
  for (const [key, value] of Object.entries(metadata)) {
    if (key === 'description' && typeof value === 'string') out.description = value;
    else if (key === 'tags' && Array.isArray(value) && value.every((x) => typeof x === 'string')) annotations.tags = JSON.stringify(value);
    else if (key === 'annotations' && value && typeof value === 'object' && !Array.isArray(value)) {
      for (const [k, v] of Object.entries(value)) {
        if (typeof v === 'string') annotations[k] = v;
        else addFieldError(errors, `metadata.annotations.${k}`, 'Annotations are strings.');
      }
    } else if (typeof value === 'string') annotations[key] = value;
    else addFieldError(errors, `metadata.${key}`, key === 'tags' ? 'Tags are an array of strings.' : 'Metadata values are strings (tags: an array of strings).');
  }
  if (Object.keys(annotations).length) out.metadata = { annotations };
  return out;
}

/** The document's description and annotations as portable `metadata` (tags back as an array). */
function metadataOut(doc: PolicyDocument, options: { reserved: boolean }): Record<string, unknown> | undefined {
  const out: Record<string, unknown> = {};
  if (doc.description) out.description = doc.description;
  for (const [key, value] of Object.entries(doc.metadata?.annotations ?? {})) {
    if (!options.reserved && (RESERVED_METADATA as readonly string[]).includes(key)) continue;
    if (key === 'tags') {
      try {
        const tags = JSON.parse(value);
        if (Array.isArray(tags) && tags.every((x) => typeof x === 'string')) {
          out.tags = tags;
          continue;
        }
      } catch {
        // a plain string annotation named tags
      }
    }
    out[key] = value;
  }
  return Object.keys(out).length ? out : undefined;
}

/** Annotations the service maintains (ISO 8601 times, the acting user's id): never set by callers. */
export const RESERVED_METADATA = ['created_by', 'created_date', 'modified_by', 'modified_date'] as const;

/**
 * A portable policy as the Cerbos-form document of the app at `place`: scope `{schema}_{app_slug}`,
 * derived-role sets prefixed. Field errors (400) name the portable fields.
 */
export function fromPortable(raw: unknown, place: PolicyPlace): PolicyDocument {
  const p = validate(PortablePolicy, raw);
  const errors: FieldErrors = {};
  for (const key of Object.keys(p)) {
    if (!COMMON.has(key) && !FIELDS_OF[p.policy_type].has(key)) addFieldError(errors, key, `Not a field of ${p.policy_type} policies.`);
  }
  const rule = NAME_RULE[p.policy_type];
  if (!rule.pattern.test(p.name)) addFieldError(errors, 'name', `Not a valid name: ${rule.words}, starting with a word character.`);
  if (p.policy_type === 'resource' && p.entity_type === undefined) addFieldError(errors, 'entity_type', 'This field is required: a resource policy is for the kind {entity_type}:{name}.');
  const scope = appScope(place.schema, place.appSlug);
  if (p.scope !== undefined && p.scope !== scope) addFieldError(errors, 'scope', `Policies of this app have the scope "${scope}".`);
  const meta = metadataIn(p.metadata, errors);
  const rules = p.rules ?? [];
  let doc: PolicyDocument;
  if (p.policy_type === 'resource') {
    doc = {
      resourcePolicy: {
        resource: `${p.entity_type}:${p.name}`,
        version: p.version ?? 'default',
        scope,
        ...(p.scope_permissions ? { scopePermissions: p.scope_permissions as ScopePermissions } : {}),
        ...(p.import_derived_roles ? { importDerivedRoles: p.import_derived_roles.map((n) => prefixedSetName(place, n)) } : {}),
        ...(p.variables ? { variables: variablesOf(p.variables) } : {}),
        ...(p.constants ? { constants: constantsOf(p.constants) } : {}),
        rules: rules.map((r) => renamed(r, { derived_roles: 'derivedRoles' }) as unknown as ResourceRule),
      },
    };
  } else if (p.policy_type === 'role') {
    doc = {
      rolePolicy: {
        role: p.name,
        version: p.version ?? 'default',
        scope,
        ...(p.parent_roles ? { parentRoles: p.parent_roles } : {}),
        ...(p.variables ? { variables: variablesOf(p.variables) } : {}),
        ...(p.constants ? { constants: constantsOf(p.constants) } : {}),
        rules: rules.map((r) => renamed(r, { allow_actions: 'allowActions' }) as unknown as RoleRule),
      },
    };
  } else {
    doc = {
      derivedRoles: {
        name: prefixedSetName(place, p.name),
        ...(p.variables ? { variables: variablesOf(p.variables) } : {}),
        ...(p.constants ? { constants: constantsOf(p.constants) } : {}),
        definitions: (p.definitions ?? []).map((d) => renamed(d, { parent_roles: 'parentRoles' }) as never),
      },
    };
  }
  if (Object.keys(errors).length) throw validationError(errors);
  return { apiVersion: 'api.cerbos.dev/v1', ...meta, ...(p.disabled ? { disabled: true } : {}), ...doc };
}

const dropUndefined = <T extends Record<string, unknown>>(o: T): T => Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as T;
const conditionOf = (c: Condition | undefined) => (c ? { condition: c } : {});

/**
 * A stored document of the app at `place` in the portable form (undefined for the kinds the
 * portable form has not: principal policies). `reserved: false` leaves out the service's
 * metadata (created_by, …), as packages do.
 */
export function toPortable(doc: PolicyDocument, place: PolicyPlace, options: { reserved?: boolean } = {}): PortablePolicy | undefined {
  const metadata = metadataOut(doc, { reserved: options.reserved ?? true });
  const common = { ...(metadata ? { metadata } : {}), ...(doc.disabled ? { disabled: true } : {}) };
  const variables = (v: Variables | undefined) => {
    const merged = doc.variables ? { ...v, local: { ...doc.variables, ...v?.local } } : v;
    return merged && Object.keys(merged).length ? { variables: merged as Record<string, unknown> } : {};
  };
  const constants = (c: Constants | undefined) => (c && Object.keys(c).length ? { constants: c as Record<string, unknown> } : {});
  if (doc.resourcePolicy) {
    const r = doc.resourcePolicy;
    const at = r.resource.indexOf(':');
    return dropUndefined({
      policy_type: 'resource' as const,
      name: at < 0 ? r.resource : r.resource.slice(at + 1),
      entity_type: at < 0 ? undefined : r.resource.slice(0, at),
      ...(r.version !== 'default' ? { version: r.version } : {}),
      rules: r.rules.map((rule) =>
        dropUndefined({ name: rule.name, actions: rule.actions, effect: rule.effect, roles: rule.roles, derived_roles: rule.derivedRoles, ...conditionOf(rule.condition), output: rule.output }),
      ),
      ...(r.importDerivedRoles?.length ? { import_derived_roles: r.importDerivedRoles.map((n) => unprefixedSetName(place, n)) } : {}),
      ...(r.scopePermissions ? { scope_permissions: r.scopePermissions } : {}),
      ...variables(r.variables),
      ...constants(r.constants),
      ...common,
    }) as PortablePolicy;
  }
  if (doc.rolePolicy) {
    const r = doc.rolePolicy;
    return {
      policy_type: 'role',
      name: r.role,
      ...(r.version && r.version !== 'default' ? { version: r.version } : {}),
      rules: r.rules.map((rule) => ({ resource: rule.resource, allow_actions: rule.allowActions, ...conditionOf(rule.condition) })),
      ...(r.parentRoles?.length ? { parent_roles: r.parentRoles } : {}),
      ...variables(r.variables),
      ...constants(r.constants),
      ...common,
    };
  }
  if (doc.derivedRoles) {
    const d = doc.derivedRoles;
    return {
      policy_type: 'derived_role',
      name: unprefixedSetName(place, d.name),
      definitions: d.definitions.map((x) => ({ name: x.name, parentRoles: x.parentRoles, ...conditionOf(x.condition) })),
      ...variables(d.variables),
      ...constants(d.constants),
      ...common,
    };
  }
  return undefined;
}
