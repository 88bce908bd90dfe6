// Inputs and outputs of the policy API (spec Part 2 §4 "Authorization policies"): the store's
// queries, check and plan bodies (Cerbos' CheckResources / PlanResources), AuthZEN evaluations.
import { Type, type Static } from '@sinclair/typebox';
import { StringEnum } from '../common/validation.ts';

const Regexp = (what: string, dflt: string) =>
  Type.Optional(Type.String({ maxLength: 1000, description: `RE2 regular expression (linear time) searched in ${what}; default ${dflt}` }));
const Repeatable = (description: string) => Type.Union([Type.String({ minLength: 1, maxLength: 400 }), Type.Array(Type.String({ minLength: 1, maxLength: 400 }), { maxItems: 100 })], { description });
const IncludeDisabled = Type.Optional(Type.Boolean({ description: 'Also soft-deleted policies (default false)' }));

/** `{app_slug}` (in the `/sites/{schema_name}/…` form on a site host, `schema_name` too: it must be that site). */
export const PolicyParams = Type.Object({ app_slug: Type.String({ minLength: 1, maxLength: 100, description: 'The app (slug)' }) });

export const PolicyListQuery = Type.Object(
  {
    id: Type.Optional(Repeatable('Policy ids (repeatable): these policies only, each must exist (404); disabled ones are returned too, with `disabled: true`')),
    name_regexp: Regexp('the name (resource kind, role, derived-role set without its prefix)', '`.*`'),
    scope_regexp: Regexp('the scope (`""` for derived-role sets)', 'every policy of the app'),
    version_regexp: Regexp('the version', '`.*`'),
    include_disabled: IncludeDisabled,
  },
  { additionalProperties: false },
);
export type PolicyListQuery = Static<typeof PolicyListQuery>;

export const PolicyDeleteQuery = Type.Object({ id: Repeatable('Policy ids (repeatable)') }, { additionalProperties: false });
export type PolicyDeleteQuery = Static<typeof PolicyDeleteQuery>;

export const DerivedRolesQuery = Type.Object({ name_regexp: Regexp('the set name without its prefix', '`.*`'), include_disabled: IncludeDisabled }, { additionalProperties: false });
export type DerivedRolesQuery = Static<typeof DerivedRolesQuery>;

export const InspectQuery = Type.Object(
  {
    policy_id: Type.Optional(Repeatable('Policy ids (repeatable)')),
    name_regexp: Regexp('the name', '`.*`'),
    scope_regexp: Regexp('the scope', 'every policy of the app'),
    version_regexp: Regexp('the version', '`.*`'),
    include_disabled: IncludeDisabled,
  },
  { additionalProperties: false },
);
export type InspectQuery = Static<typeof InspectQuery>;

/** A policy, or several: a Cerbos-form document, the portable form, or `{policies: [...]}` of either. */
export const PolicyBody = Type.Record(Type.String(), Type.Unknown(), {
  description:
    'A policy document in Cerbos form (`resourcePolicy`, `derivedRoles`, `rolePolicy` or `principalPolicy`), a policy in the portable form (`policy_type`, `name`, …), or `{policies: [...]}` of either, stored together (all or nothing).',
});

export const PrincipalQuery = Type.Object(
  {
    username: Type.Optional(Type.String({ minLength: 1, maxLength: 150, description: 'Check as this site user (administrators)' })),
    email: Type.Optional(Type.String({ minLength: 1, maxLength: 254, description: 'Check as the site user with this e-mail (administrators)' })),
  },
  { additionalProperties: false },
);
export type PrincipalQuery = Static<typeof PrincipalQuery>;

const Attr = Type.Record(Type.String(), Type.Unknown());
const Name = (max = 255, description?: string) => Type.String({ minLength: 1, maxLength: max, ...(description ? { description } : {}) });
const Version = Type.String({ minLength: 1, maxLength: 100, pattern: '^\\w+$', description: 'The policy version (default "default")' });

export const PrincipalBody = Type.Object(
  {
    id: Name(),
    roles: Type.Array(Name(100), { minItems: 1, maxItems: 100, uniqueItems: true }),
    attr: Type.Optional(Attr),
    scope: Type.Optional(Type.String({ description: "Optional; the app's scope" })),
    policyVersion: Type.Optional(Version),
  },
  { additionalProperties: false, description: 'Decide for this principal instead of the caller (administrators): {id, roles, attr?}' },
);
export type PrincipalBody = Static<typeof PrincipalBody>;

const Actions = Type.Array(Name(), { minItems: 1, maxItems: 50, uniqueItems: true });

export const CheckBody = Type.Object(
  {
    requestId: Type.Optional(Type.String({ maxLength: 255 })),
    includeMeta: Type.Optional(Type.Boolean({ description: 'Add each action\'s matched policy and scope to `meta`' })),
    principal: Type.Optional(PrincipalBody),
    resources: Type.Array(
      Type.Object(
        {
          resource: Type.Object(
            {
              kind: Name(),
              id: Name(),
              attr: Type.Optional(Attr),
              scope: Type.Optional(Type.String({ description: "Optional; the app's scope (another is refused)" })),
              policyVersion: Type.Optional(Version),
              policy_version: Type.Optional(Version),
            },
            { additionalProperties: false },
          ),
          actions: Actions,
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 50 },
    ),
  },
  { additionalProperties: false },
);
export type CheckBody = Static<typeof CheckBody>;

export const PlanBody = Type.Object(
  {
    requestId: Type.Optional(Type.String({ maxLength: 255 })),
    principal: Type.Optional(PrincipalBody),
    action: Type.Optional(Name(255, 'The action (or actions: several)')),
    actions: Type.Optional(Actions),
    resource: Type.Object(
      {
        kind: Name(),
        attr: Type.Optional(Attr),
        scope: Type.Optional(Type.String()),
        policy_version: Type.Optional(Version),
        policyVersion: Type.Optional(Version),
      },
      { additionalProperties: false },
    ),
    policy_version: Type.Optional(Version),
  },
  { additionalProperties: false },
);
export type PlanBody = Static<typeof PlanBody>;

const Entity = Type.Object(
  { type: Name(), id: Name(), properties: Type.Optional(Attr) },
  { additionalProperties: false },
);
const Action = Type.Object({ name: Name(), properties: Type.Optional(Attr) }, { additionalProperties: false });

export const EvaluationBody = Type.Object(
  { subject: Entity, resource: Entity, action: Action, context: Type.Optional(Attr) },
  { additionalProperties: false },
);
export type EvaluationBody = Static<typeof EvaluationBody>;
export type AuthzenEntity = Static<typeof Entity>;

export const EVALUATION_SEMANTICS = ['execute_all', 'deny_on_first_deny', 'permit_on_first_permit'] as const;

export const EvaluationsBody = Type.Object(
  {
    subject: Type.Optional(Entity),
    resource: Type.Optional(Entity),
    action: Type.Optional(Action),
    context: Type.Optional(Attr),
    evaluations: Type.Optional(
      Type.Array(
        Type.Object(
          { subject: Type.Optional(Entity), resource: Type.Optional(Entity), action: Type.Optional(Action), context: Type.Optional(Attr) },
          { additionalProperties: false },
        ),
        { maxItems: 50, description: 'Each overrides the defaults; absent or empty: one evaluation of the defaults' },
      ),
    ),
    options: Type.Optional(Type.Object({ evaluations_semantic: Type.Optional(StringEnum(EVALUATION_SEMANTICS)) }, { additionalProperties: true })),
  },
  { additionalProperties: false },
);
export type EvaluationsBody = Static<typeof EvaluationsBody>;

// ---- Responses (for OpenAPI) ----

const Doc = Type.Record(Type.String(), Type.Unknown(), { description: 'A policy document in Cerbos form; `metadata.storeIdentifier` is its id' });
export const PolicyList = Type.Object({ status: Type.Literal('success'), message: Type.String(), data: Type.Array(Doc), total: Type.Integer() });
export const InspectResponse = Type.Object({
  success: Type.Literal(true),
  message: Type.String(),
  status_code: Type.Literal(200),
  data: Type.Object({ results: Type.Record(Type.String(), Type.Record(Type.String(), Type.Unknown())) }),
});
export const CheckResponseBody = Type.Object({
  requestId: Type.String(),
  results: Type.Array(
    Type.Object({
      resource: Type.Object({ id: Type.String(), kind: Type.String(), policyVersion: Type.String(), scope: Type.String() }),
      actions: Type.Record(Type.String(), StringEnum(['EFFECT_ALLOW', 'EFFECT_DENY'] as const)),
      meta: Type.Object({ effectiveDerivedRoles: Type.Array(Type.String()), actions: Type.Optional(Type.Record(Type.String(), Type.Unknown())) }),
      outputs: Type.Optional(
        Type.Array(Type.Object({ src: Type.String({ description: '{policy id}#{rule name}' }), action: Type.String(), val: Type.Optional(Type.Unknown({ description: 'absent when the expression failed' })) }), {
          description: "The rules' outputs (output.when.ruleActivated / conditionNotMet), once per rule and action; only when some rule has one.",
        }),
      ),
    }),
  ),
});
export const PlanResponseBody = Type.Object({
  requestId: Type.String(),
  action: Type.Optional(Type.String()),
  actions: Type.Optional(Type.Array(Type.String())),
  resource_kind: Type.String(),
  policy_version: Type.String(),
  filter_kind: StringEnum(['ALWAYS_ALLOWED', 'ALWAYS_DENIED', 'CONDITIONAL'] as const),
  condition: Type.Optional(Type.Unknown({ description: '{expression: {operator, operands}} (operands: {variable}, {value} or {expression}), or a bare {variable}' })),
});
const Decision = Type.Object({ decision: Type.Boolean(), context: Type.Object({ id: Type.String(), reason_admin: Type.Object({ effectiveDerivedRoles: Type.Array(Type.String()) }) }) });
export const EvaluationResponse = Decision;
export const EvaluationsResponse = Type.Object({ evaluations: Type.Array(Decision) });
export const SystemActionsResponse = Type.Object({ success: Type.Literal(true), data: Type.Record(Type.String(), Type.Array(Type.String())) });
