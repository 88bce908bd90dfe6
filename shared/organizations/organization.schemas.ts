import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { BoolParam } from '../common/filters.ts';

/** A slug given by the client: lowercase letters and digits in words joined by single hyphens. */
export const SLUG_PATTERN = '^[a-z0-9]+(?:-[a-z0-9]+)*$';

const Name = Type.String({ minLength: 1, maxLength: 255 });
const Slug = Type.String({ minLength: 1, maxLength: 100, pattern: SLUG_PATTERN, description: 'Lowercase letters and digits, words joined by hyphens' });

/** The path parameter naming one organization: a slug or a UUID. */
export const OrganizationRef = Type.Object({ org: Type.String({ minLength: 1, maxLength: 100, description: 'Organization slug or UUID' }) });
export type OrganizationRef = Static<typeof OrganizationRef>;

export const OrganizationView = Type.Object(
  {
    uuid: Type.String({ format: 'uuid' }),
    name: Type.String(),
    slug: Type.String(),
    is_active: Type.Boolean(),
    created: Type.String({ format: 'date-time' }),
    modified: Type.String({ format: 'date-time' }),
  },
  { $id: 'Organization' },
);
export type OrganizationView = Static<typeof OrganizationView>;

export const OrganizationCreate = Type.Object(
  { name: Name, slug: Type.Optional(Slug) },
  { additionalProperties: false, description: 'Without `slug`, one is generated from the name (`-2`, `-3` … on collision). The caller becomes the owner.' },
);
export type OrganizationCreate = Static<typeof OrganizationCreate>;

export const OrganizationUpdate = Type.Object(
  { name: Type.Optional(Name), slug: Type.Optional(Slug), is_active: Type.Optional(Type.Boolean({ description: 'Whether the organization is active (inactive: hidden from the default list)' })), ...readOnlyProps(OrganizationView, ['uuid', 'created']), ...readOnlyProps(OrganizationView, ['modified'], 'maintained') },
  {
    additionalProperties: false,
    description: 'Fields left out keep their values; a body sent back from GET works (read-only fields unchanged are ignored). `is_active: false` hides the organization from the default list.',
  },
);
export type OrganizationUpdate = Static<typeof OrganizationUpdate>;

export const OrganizationListQuery = Type.Object({
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches name or slug' })),
  is_active: Type.Optional(BoolParam),
  ordering: Type.Optional(Type.String({ maxLength: 200, description: 'name, slug, created, modified; a leading - reverses; comma-separated (default name)' })),
  ...PageParams,
});
export type OrganizationListQuery = Static<typeof OrganizationListQuery>;

export const Privileges = Type.Object({ permissions: Type.Array(Type.String()) }, { $id: 'Privileges' });
export type Privileges = Static<typeof Privileges>;

// The exact success texts: one copy for the HTTP routes and the CLI's direct backend.
export const ORGANIZATION_MESSAGES = {
  created: 'Organization created successfully.',
  deleted: 'Organization deleted.',
  memberAdded: 'Member added successfully.',
  memberRemoved: 'Member removed.',
  madeAdmin: 'The member is now an admin.',
  removedAdmin: 'The member is no longer an admin.',
} as const;
