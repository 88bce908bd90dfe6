// Secret types: a named JSON Schema that the values of the secrets of that type must satisfy.
import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';

const SLUG_PATTERN = '^[a-z0-9]+(?:-[a-z0-9]+)*$';
const JsonSchema = Type.Unsafe<Record<string, unknown>>({
  type: 'object',
  description: 'A JSON Schema (draft-07, as Ajv compiles it; the formats of ajv-formats) that secret values of this type must satisfy. `{}` accepts any value.',
});

export const SecretTypeView = Type.Object(
  {
    uuid: Type.String({ format: 'uuid' }),
    slug: Type.String(),
    name: Type.String(),
    description: Type.String(),
    json_schema: JsonSchema,
    created: Type.String({ format: 'date-time' }),
    modified: Type.String({ format: 'date-time' }),
  },
  { $id: 'SecretType' },
);
export type SecretTypeView = Static<typeof SecretTypeView>;

export const SecretTypeCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255, description: 'The name (the slug is made from it)' }),
    slug: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: SLUG_PATTERN, description: 'Generated from the name when omitted' })),
    description: Type.Optional(Type.String({ maxLength: 10_000, description: 'What the type is for' })),
    json_schema: Type.Optional(JsonSchema),
  },
  { additionalProperties: false },
);
export type SecretTypeCreate = Static<typeof SecretTypeCreate>;

export const SecretTypeUpdate = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    description: Type.Optional(Type.String({ maxLength: 10_000 })),
    json_schema: Type.Optional(JsonSchema),
    ...readOnlyProps(SecretTypeView, ['uuid', 'slug', 'created']),
    ...readOnlyProps(SecretTypeView, ['modified'], 'maintained'),
  },
  { additionalProperties: false, description: 'Fields left out keep their values; the slug never changes. Identifying fields GET returns are ignored when unchanged (a 400 when changed); `modified` is ignored.' },
);
export type SecretTypeUpdate = Static<typeof SecretTypeUpdate>;

export const SecretTypeRef = Type.Object({ slug: Type.String({ minLength: 1, maxLength: 100, description: 'Slug or UUID' }) });

export const SecretTypeListQuery = Type.Object({
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches name, slug or description' })),
  ...PageParams,
});
export type SecretTypeListQuery = Static<typeof SecretTypeListQuery>;
