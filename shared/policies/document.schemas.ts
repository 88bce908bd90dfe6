// The shape of a policy document (Cerbos' JSON form, model.ts), strict: an unknown field is an
// error with its path, as Cerbos' own schema validation reports it.
import { Type, type TSchema } from '@sinclair/typebox';
import { StringEnum } from '../common/validation.ts';

const strict = <T extends Record<string, TSchema>>(properties: T, options: Record<string, unknown> = {}) =>
  Type.Object(properties, { additionalProperties: false, ...options });

const Name = Type.String({ minLength: 1, maxLength: 255, pattern: '^[\\w@.\\-/:]+$' });
const RoleName = Type.String({ minLength: 1, maxLength: 100, pattern: '^[\\w\\-.:*]+$' });
const Version = Type.String({ minLength: 1, maxLength: 100, pattern: '^[\\w]+$' });
const Scope = Type.String({ maxLength: 255, pattern: '^([0-9a-zA-Z][\\w\\-]*(\\.[\\w\\-]*)*)*$' });
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
  resource: Name,
  version: Version,
  scope: Type.Optional(Scope),
  scopePermissions: Type.Optional(ScopePermissions),
  importDerivedRoles: Type.Optional(Type.Array(Name)),
  variables: Type.Optional(Variables),
  constants: Type.Optional(Constants),
  schemas: Type.Optional(Type.Unknown()),
  rules: Type.Array(
    strict({
      name: Type.Optional(Type.String({ minLength: 1, maxLength: 255, pattern: '^[\\w\\-.]+$' })),
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
  definitions: Type.Array(strict({ name: RoleName, parentRoles: Type.Array(RoleName, { minItems: 1 }), condition: Type.Optional(Condition) }), { minItems: 1 }),
});

const RolePolicy = strict({
  role: RoleName,
  version: Type.Optional(Version),
  scope: Type.Optional(Scope),
  parentRoles: Type.Optional(Roles),
  variables: Type.Optional(Variables),
  constants: Type.Optional(Constants),
  rules: Type.Array(strict({ resource: Type.String({ minLength: 1, maxLength: 255 }), allowActions: Actions, condition: Type.Optional(Condition) })),
});

const PrincipalPolicy = strict({
  principal: Name,
  version: Version,
  scope: Type.Optional(Scope),
  scopePermissions: Type.Optional(ScopePermissions),
  variables: Type.Optional(Variables),
  constants: Type.Optional(Constants),
  rules: Type.Array(
    strict({
      resource: Type.String({ minLength: 1, maxLength: 255 }),
      actions: Type.Array(
        strict({ action: Type.String({ minLength: 1 }), effect: Effect, name: Type.Optional(Type.String()), condition: Type.Optional(Condition), output: Type.Optional(Output) }),
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
