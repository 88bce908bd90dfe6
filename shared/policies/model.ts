// Policy documents in Cerbos' own JSON form (the body of its Admin API, camelCase), the form the
// engine compiles and the store keeps; the spec's portable form (policy_type, name, …) converts to
// it (portable.ts). Semantics: /work/shared/CERBOS-NOTES.md; our engine: engine.ts.

export type Effect = 'EFFECT_ALLOW' | 'EFFECT_DENY';

/** `{match: {expr}}` or `{match: {all|any|none: {of: [...]}}}`, nestable. */
export interface Match {
  expr?: string;
  all?: { of: Match[] };
  any?: { of: Match[] };
  none?: { of: Match[] };
}
export interface Condition {
  match: Match;
}

export interface Variables {
  import?: string[];
  local?: Record<string, string>;
}
export interface Constants {
  import?: string[];
  local?: Record<string, unknown>;
}
export interface Output {
  expr?: string;
  when?: { ruleActivated?: string; conditionNotMet?: string };
}

export interface ResourceRule {
  name?: string;
  actions: string[];
  effect: Effect;
  roles?: string[];
  derivedRoles?: string[];
  condition?: Condition;
  output?: Output;
}
export type ScopePermissions = 'SCOPE_PERMISSIONS_OVERRIDE_PARENT' | 'SCOPE_PERMISSIONS_REQUIRE_PARENTAL_CONSENT_FOR_ALLOWS';

export interface ResourcePolicy {
  resource: string;
  version: string;
  scope?: string;
  scopePermissions?: ScopePermissions;
  importDerivedRoles?: string[];
  variables?: Variables;
  constants?: Constants;
  rules: ResourceRule[];
  schemas?: unknown;
}

export interface DerivedRoleDefinition {
  name: string;
  parentRoles: string[];
  condition?: Condition;
}
export interface DerivedRoles {
  name: string;
  variables?: Variables;
  constants?: Constants;
  definitions: DerivedRoleDefinition[];
}

export interface RoleRule {
  resource: string;
  allowActions: string[];
  condition?: Condition;
}
export interface RolePolicy {
  role: string;
  version?: string;
  scope?: string;
  parentRoles?: string[];
  variables?: Variables;
  constants?: Constants;
  rules: RoleRule[];
}

export interface PrincipalAction {
  action: string;
  effect: Effect;
  name?: string;
  condition?: Condition;
  output?: Output;
}
export interface PrincipalRule {
  resource: string;
  actions: PrincipalAction[];
}
export interface PrincipalPolicy {
  principal: string;
  version: string;
  scope?: string;
  scopePermissions?: ScopePermissions;
  variables?: Variables;
  constants?: Constants;
  rules: PrincipalRule[];
}

export interface ExportVariables {
  name: string;
  definitions: Record<string, string>;
}
export interface ExportConstants {
  name: string;
  definitions: Record<string, unknown>;
}

export interface PolicyMetadata {
  annotations?: Record<string, string>;
  [key: string]: unknown;
}

/** One policy document: exactly one of the kind keys is set. */
export interface PolicyDocument {
  apiVersion?: string;
  description?: string;
  disabled?: boolean;
  metadata?: PolicyMetadata;
  /** Deprecated top-level variables: merged into the policy's `variables.local`. */
  variables?: Record<string, string>;
  resourcePolicy?: ResourcePolicy;
  derivedRoles?: DerivedRoles;
  rolePolicy?: RolePolicy;
  principalPolicy?: PrincipalPolicy;
  exportVariables?: ExportVariables;
  exportConstants?: ExportConstants;
}

export type PolicyKind = 'resource' | 'derived_role' | 'role' | 'principal' | 'export_variables' | 'export_constants';

export function policyKind(doc: PolicyDocument): PolicyKind {
  if (doc.resourcePolicy) return 'resource';
  if (doc.derivedRoles) return 'derived_role';
  if (doc.rolePolicy) return 'role';
  if (doc.principalPolicy) return 'principal';
  if (doc.exportVariables) return 'export_variables';
  return 'export_constants';
}

/** A kind's `:` is written `_` inside an id (as Cerbos writes it). */
const idPart = (s: string): string => s.replace(/:/g, '_');

/**
 * The policy's id, spec Part 2 §2: `resource.{entity_type}_{name}.{version}/{scope}`,
 * `role.{name}/{scope}` (no version: a role policy has the version "default", policy.service.ts),
 * `principal.{name}.{version}/{scope}`, `derived_roles.{tenant_id}_{app_slug}_{name}`. An unscoped
 * policy (the service's default level) has no `/{scope}`: `resource.datatable_orders.default`.
 * Cerbos writes the version `v{version}` and a role's version too (`resource.datatable_orders.vdefault/t1_crm`,
 * `role.editor.vdefault/t1_crm`): that older form still finds a policy (currentPolicyId).
 */
export function policyId(doc: PolicyDocument): string {
  const scoped = (id: string, scope: string | undefined): string => (scope ? `${id}/${scope}` : id);
  if (doc.resourcePolicy) {
    const p = doc.resourcePolicy;
    return scoped(`resource.${idPart(p.resource)}.${p.version}`, p.scope);
  }
  if (doc.rolePolicy) {
    const p = doc.rolePolicy;
    return scoped(`role.${idPart(p.role)}`, p.scope);
  }
  if (doc.principalPolicy) {
    const p = doc.principalPolicy;
    return scoped(`principal.${idPart(p.principal)}.${p.version}`, p.scope);
  }
  if (doc.derivedRoles) return `derived_roles.${doc.derivedRoles.name}`;
  if (doc.exportVariables) return `export_variables.${doc.exportVariables.name}`;
  return `export_constants.${doc.exportConstants!.name}`;
}

/**
 * The id that a policy id of the older form (Cerbos', and this service's before: `v` before the
 * version, `.vdefault` in a role's) has now; undefined for an id not of that form. The version is
 * the last dot-separated part before the scope (versions are word characters, scopes hold no `/`).
 * Tenant migration 12 rewrote the stored ids with the same rule.
 */
export function currentPolicyId(id: string): string | undefined {
  const versioned = /^(resource|principal)\.(.+)\.v(\w+)(\/[^/]*)?$/.exec(id);
  if (versioned) return `${versioned[1]}.${versioned[2]}.${versioned[3]}${versioned[4] ?? ''}`;
  const role = /^role\.(.+)\.vdefault(\/[^/]*)?$/.exec(id);
  return role ? `role.${role[1]}${role[2] ?? ''}` : undefined;
}

/** The raw name Cerbos' `nameRegexp` filters on: the resource kind, role, principal or set name. */
export function policyName(doc: PolicyDocument): string {
  return (
    doc.resourcePolicy?.resource ??
    doc.rolePolicy?.role ??
    doc.principalPolicy?.principal ??
    doc.derivedRoles?.name ??
    doc.exportVariables?.name ??
    doc.exportConstants!.name
  );
}

export function policyScope(doc: PolicyDocument): string {
  return doc.resourcePolicy?.scope ?? doc.rolePolicy?.scope ?? doc.principalPolicy?.scope ?? '';
}

export function policyVersion(doc: PolicyDocument): string {
  return doc.resourcePolicy?.version ?? doc.rolePolicy?.version ?? doc.principalPolicy?.version ?? 'default';
}

// ---- Requests and responses of checks and plans (Cerbos' API bodies) ----

export interface Principal {
  id: string;
  roles: string[];
  attr?: Record<string, unknown>;
  scope?: string;
  policyVersion?: string;
}
export interface Resource {
  kind: string;
  id: string;
  attr?: Record<string, unknown>;
  scope?: string;
  policyVersion?: string;
}

export interface CheckRequest {
  requestId?: string;
  includeMeta?: boolean;
  principal: Principal;
  resources: { resource: Resource; actions: string[] }[];
}
export interface ActionMeta {
  matchedPolicy: string;
  matchedScope?: string;
}
export interface CheckResult {
  resource: { id: string; kind: string; policyVersion?: string; scope?: string };
  actions: Record<string, Effect>;
  meta?: { actions: Record<string, ActionMeta>; effectiveDerivedRoles?: string[] };
  /** What the rules evaluated for each action report (rule outputs); `val` is absent when its expression failed. */
  outputs?: RuleOutput[];
}
export interface RuleOutput {
  src: string;
  val?: unknown;
  action: string;
}
export interface CheckResponse {
  requestId: string;
  results: CheckResult[];
}

/** A plan operand: a variable (`request.resource.attr.x`, or a lambda's), a value, or an expression. */
export type PlanOperand = { variable: string } | { value: unknown } | { expression: PlanExpression };
export interface PlanExpression {
  operator: string;
  operands: PlanOperand[];
}
export type PlanKind = 'KIND_ALWAYS_ALLOWED' | 'KIND_ALWAYS_DENIED' | 'KIND_CONDITIONAL';

export interface PlanRequest {
  requestId?: string;
  action?: string;
  actions?: string[];
  includeMeta?: boolean;
  principal: Principal;
  resource: { kind: string; scope?: string; policyVersion?: string; attr?: Record<string, unknown> };
}
export interface PlanResponse {
  requestId: string;
  action?: string;
  actions?: string[];
  resourceKind: string;
  policyVersion: string;
  filter: { kind: PlanKind; condition?: PlanOperand };
  meta?: { filterDebug: string; matchedScope?: string; matchedScopes?: Record<string, string> };
}
