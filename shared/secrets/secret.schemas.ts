// Secrets of a site: a key (tenant-wide, or per app), an encrypted JSON value, an optional
// type whose JSON Schema the value must satisfy. Lists mask values; GET of one decrypts.
import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { StringEnum } from '../common/validation.ts';

export const MASK = '********';
/** Values that stand for a secret value without being one (our mask, the spec's social-app mask): sent back, they mean "unchanged". */
export const MASKS: readonly unknown[] = [MASK, '***HIDDEN***'];
export const MAX_VALUE_BYTES = 65_536;

const Key = Type.String({
  minLength: 1,
  maxLength: 255,
  pattern: '^[A-Za-z_][A-Za-z0-9_.-]*$',
  description: 'Letters, digits and _ . -, starting with a letter or _ (e.g. `STRIPE_API_KEY`)',
});
const AppSlug = Type.String({ minLength: 1, maxLength: 100, pattern: '^[a-z0-9]+(?:-[a-z0-9]+)*$', description: 'The slug of the app the secret belongs to' });
const Time = Type.String({ format: 'date-time' });
const Value = Type.Unknown({ description: `Any JSON value but null (a string, or an object for typed secrets); at most ${MAX_VALUE_BYTES} bytes as JSON` });

const common = {
  uuid: Type.String({ format: 'uuid' }),
  key: Type.String(),
  app: Type.Union([Type.String(), Type.Null()], { description: 'The app slug; null for a tenant-wide secret' }),
  secret_type: Type.Union([Type.String(), Type.Null()], { description: 'The slug of the secret type' }),
  description: Type.String(),
  created: Time,
  modified: Time,
  created_by: Type.String(),
  modified_by: Type.String(),
};

export const SecretView = Type.Object(
  {
    ...common,
    value: Value,
    inherited_from: Type.Union([Type.Literal('tenant'), Type.Null()], {
      description: '`tenant` when `?app=` was asked for and the app has no such secret, so the tenant-wide one is returned; null otherwise',
    }),
  },
  { $id: 'Secret' },
);
export type SecretView = Static<typeof SecretView>;

export const SecretListItem = Type.Object({ ...common, value: Type.Literal(MASK, { description: 'Always masked in lists' }) }, { $id: 'SecretListItem' });
export type SecretListItem = Static<typeof SecretListItem>;

export const SecretCreate = Type.Object(
  {
    key: Key,
    value: Value,
    secret_type: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 100, description: 'Slug or UUID' }), Type.Null()])),
    app: Type.Optional(Type.Union([AppSlug, Type.Null()])),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
  },
  { additionalProperties: false },
);
export type SecretCreate = Static<typeof SecretCreate>;

export const SecretUpdate = Type.Object(
  {
    value: Type.Optional(Value),
    secret_type: Type.Optional(Type.Union([Type.String({ minLength: 1, maxLength: 100 }), Type.Null()], { description: 'Slug or UUID; null removes the type' })),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
    ...readOnlyProps(SecretView, ['uuid', 'key', 'app', 'created', 'created_by', 'inherited_from']),
    ...readOnlyProps(SecretView, ['modified', 'modified_by'], 'maintained'),
  },
  { additionalProperties: false, description: 'Fields left out keep their values; a masked value (`********`) sent back means unchanged. Identifying fields GET returns are ignored when unchanged (a 400 when changed); `modified`, `modified_by` are ignored.' },
);
export type SecretUpdate = Static<typeof SecretUpdate>;

export const SecretRef = Type.Object({ key: Key });

export const SecretAppQuery = Type.Object({
  app: Type.Optional(AppSlug),
});
export type SecretAppQuery = Static<typeof SecretAppQuery>;

const Pages = {
  ...PageParams,
};

export const SecretListQuery = Type.Object({
  app: Type.Optional(AppSlug),
  secret_type: Type.Optional(Type.String({ maxLength: 100, description: 'Slug of a secret type' })),
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches key or description' })),
  ordering: Type.Optional(StringEnum(['key', '-key', 'created', '-created', 'modified', '-modified'])),
  ...Pages,
});
export type SecretListQuery = Static<typeof SecretListQuery>;

export const SecretHistoryQuery = Type.Object({ app: Type.Optional(AppSlug), ...Pages });
export type SecretHistoryQuery = Static<typeof SecretHistoryQuery>;

export const SecretHistoryItem = Type.Object(
  {
    id: Type.Integer(),
    action: StringEnum(['create', 'update', 'delete']),
    key: Type.String(),
    app: Type.Union([Type.String(), Type.Null()]),
    actor: Type.String({ description: 'Username of the site user, or system:<name>' }),
    at: Time,
  },
  { $id: 'SecretHistoryItem' },
);
export type SecretHistoryItem = Static<typeof SecretHistoryItem>;
