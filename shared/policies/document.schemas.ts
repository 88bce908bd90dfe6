// The shape of a policy document (Cerbos' JSON form, model.ts), strict: an unknown field is an
// error with its path, as Cerbos' own schema validation reports it.
import { Type, type TSchema } from '@sinclair/typebox';
import { StringEnum } from '../common/validation.ts';

const strict = <T extends Record<string, TSchema>>(properties: T, options: Record<string, unknown> = {}) =>
  Type.Object(properties, { additionalProperties: false, ...options });

/**
 * Cerbos' identifier rules (api/public/cerbos/policy/v1/policy.proto, its `buf.validate` patterns),
 * where Cerbos' releases differ the stricter one, and never a path: a kind's `/`-separated parts
 * and every `:` segment start with a word character, so `.`, `..` and `/x` are no part of a name.
 */
export const IDENTIFIER_PATTERNS = {
  /** A resource kind (`{entity_type}:{name}`; Cerbos' older rule `^[[:alpha:]][[:word:]@.\-/]*(:…)*$`, 0.51 only refuses glob characters). */
  kind: /^\w[\w@.-]*(\/\w[\w@.-]*)*(:\w[\w@.-]*(\/\w[\w@.-]*)*)*$/,
  /** One segment of a kind: a portable policy's `entity_type`. */
  entityType: /^\w[\w@.-]*(\/\w[\w@.-]*)*$/,
  /** A principal policy's principal (a user's id). */
  principal: /^\w[\w@.-]*(:\w[\w@.-]*)*$/,
  /** A role policy's role, derived-role sets and definitions, imported and exported sets. */
  name: /^[\w.-]+$/,
  /** A rule's name. */
  ruleName: /^([A-Za-z][\w@.-]*)*$/,
  version: /^\w+$/,
  /** Dot-separated segments, each starting with a word character (Cerbos' scope rule without its lone `.`). */
  scope: /^([0-9A-Za-z][\w-]*(\.\w[\w-]*)*)?$/,
} as const;

const Kind = Type.String({ minLength: 1, maxLength: 255, pattern: IDENTIFIER_PATTERNS.kind.source });
const Name = Type.String({ minLength: 1, maxLength: 255, pattern: IDENTIFIER_PATTERNS.name.source });
const RoleName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[\\w\\-.:*]+$' });
const Version = Type.String({ minLength: 1, maxLength: 100, pattern: IDENTIFIER_PATTERNS.version.source });
const Scope = Type.String({ maxLength: 255, pattern: IDENTIFIER_PATTERNS.scope.source });
const Effect = StringEnum(['EFFECT_ALLOW', 'EFFECT_DENY'] as const);
const ScopePermissions = StringEnum(['SCOPE_PERMISSIONS_OVERRIDE_PARENT', 'SCOPE_PERMISSIONS_REQUIRE_PARENTAL_CONSENT_FOR_ALLOWS'] as const);

// One level of `match` here; nested `all`/`any`/`none` are checked as they compile (compile.ts).
const Nested = Type.Array(Type.Record(Type.String(), Type.Unknown()), { minItems: 1 });
const Match = strict(
  {
    expr: Type.Optional(Type.String()),
    all: Type.Optional(strict({ of: Nested })),
    any: Type.Optional(strict({ of: Nested })),
    none: Type.Optional(strict({ of: Nested })),
  },
  { minProperties: 1, maxProperties: 1 },
);
const Condition = strict({ match: Match });
const Variables = strict({ import: Type.Optional(Type.Array(Name)), local: Type.Optional(Type.Record(Type.String(), Type.String())) });
const Constants = strict({ import: Type.Optional(Type.Array(Name)), local: Type.Optional(Type.Record(Type.String(), Type.Unknown())) });
const Output = strict({
  expr: Type.Optional(Type.String()),
  when: Type.Optional(strict({ ruleActivated: Type.Optional(Type.String()), conditionNotMet: Type.Optional(Type.String()) })),
});
const Actions = Type.Array(Type.String({ minLength: 1, maxLength: 255 }), { minItems: 1 });
const Roles = Type.Array(RoleName);

const ResourcePolicy = strict({
  resource: Kind,
  version: Version,
  scope: Type.Optional(Scope),
  scopePermissions: Type.Optional(ScopePermissions),
  importDerivedRoles: Type.Optional(Type.Array(Name)),
  variables: Type.Optional(Variables),
  constants: Type.Optional(Constants),
  schemas: Type.Optional(Type.Unknown()),
  rules: Type.Array(
    strict({
      name: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: IDENTIFIER_PATTERNS.ruleName.source })),
      actions: Actions,
      effect: Effect,
      roles: Type.Optional(Roles),
      derivedRoles: Type.Optional(Roles),
      condition: Type.Optional(Condition),
      output: Type.Optional(Output),
    }),
  ),
});

const DerivedRoles = strict({
  name: Name,
  variables: Type.Optional(Variables),
  constants: Type.Optional(Constants),
  definitions: Type.Array(strict({ name: Type.String({ minLength: 1, maxLength: 100, pattern: IDENTIFIER_PATTERNS.name.source }), parentRoles: Type.Array(RoleName, { minItems: 1 }), condition: Type.Optional(Condition) }), { minItems: 1 }),
});

const RolePolicy = strict({
  role: Type.String({ minLength: 1, maxLength: 100, pattern: IDENTIFIER_PATTERNS.name.source }),
  version: Type.Optional(Version),
  scope: Type.Optional(Scope),
  parentRoles: Type.Optional(Roles),
  variables: Type.Optional(Variables),
  constants: Type.Optional(Constants),
  rules: Type.Array(strict({ resource: Type.String({ minLength: 1, maxLength: 255 }), allowActions: Actions, condition: Type.Optional(Condition) })),
});

const PrincipalPolicy = strict({
  principal: Type.String({ minLength: 1, maxLength: 255, pattern: IDENTIFIER_PATTERNS.principal.source }),
  version: Version,
  scope: Type.Optional(Scope),
  scopePermissions: Type.Optional(ScopePermissions),
  variables: Type.Optional(Variables),
  constants: Type.Optional(Constants),
  rules: Type.Array(
    strict({
      resource: Type.String({ minLength: 1, maxLength: 255 }),
      actions: Type.Array(
        strict({ action: Type.String({ minLength: 1 }), effect: Effect, name: Type.Optional(Type.String({ maxLength: 255, pattern: IDENTIFIER_PATTERNS.ruleName.source })), condition: Type.Optional(Condition), output: Type.Optional(Output) }),
        { minItems: 1 },
      ),
    }),
  ),
});

export const PolicyDocumentSchema = strict(
  {
    apiVersion: Type.Optional(Type.Literal('api.cerbos.dev/v1')),
    description: Type.Optional(Type.String()),
    disabled: Type.Optional(Type.Boolean()),
    metadata: Type.Optional(Type.Object({ annotations: Type.Optional(Type.Record(Type.String(), Type.String())) })),
    variables: Type.Optional(Type.Record(Type.String(), Type.String())),
    resourcePolicy: Type.Optional(ResourcePolicy),
    derivedRoles: Type.Optional(DerivedRoles),
    rolePolicy: Type.Optional(RolePolicy),
    principalPolicy: Type.Optional(PrincipalPolicy),
    exportVariables: Type.Optional(strict({ name: Name, definitions: Type.Record(Type.String(), Type.String()) })),
    exportConstants: Type.Optional(strict({ name: Name, definitions: Type.Record(Type.String(), Type.Unknown()) })),
  },
  { $id: 'PolicyDocument' },
);
