import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { BoolParam } from '../common/filters.ts';

/** `/organizations/{org}/members/{member}/`: the member's username, user UUID or membership UUID. */
export const MemberRef = Type.Object({
  org: Type.String({ minLength: 1, maxLength: 100, description: 'Organization slug or UUID' }),
  member: Type.String({ minLength: 1, maxLength: 150, description: 'Username, user UUID or membership UUID' }),
});
export type MemberRef = Static<typeof MemberRef>;

export const MemberGroup = Type.Object({ id: Type.Integer(), name: Type.String() });
export const MemberSite = Type.Object({
  uuid: Type.String({ format: 'uuid' }),
  name: Type.String(),
  schema_name: Type.String(),
  permissions: Type.Array(Type.String(), { description: 'The member\'s direct grants on the site' }),
});

export const MemberView = Type.Object(
  {
    uuid: Type.String({ format: 'uuid', description: 'The membership' }),
    username: Type.String(),
    email: Type.String(),
    first_name: Type.String(),
    last_name: Type.String(),
    is_active: Type.Boolean(),
    is_admin: Type.Boolean(),
    is_owner: Type.Boolean(),
    groups: Type.Array(MemberGroup),
    sites: Type.Array(MemberSite),
  },
  { $id: 'Member' },
);
export type MemberView = Static<typeof MemberView>;

export const MemberListQuery = Type.Object({
  user__is_active: Type.Optional(BoolParam),
  user__is_deleted: Type.Optional(BoolParam),
  is_admin: Type.Optional(BoolParam),
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches username, e-mail, first or last name' })),
  ordering: Type.Optional(Type.String({ maxLength: 200, description: 'user__username, user__email, created; a leading - reverses (default created)' })),
  ...PageParams,
});
export type MemberListQuery = Static<typeof MemberListQuery>;

export const MemberAdd = Type.Object(
  { user_slug: Type.String({ minLength: 1, maxLength: 150, description: 'Username or UUID of an existing, active user' }) },
  { additionalProperties: false },
);
export type MemberAdd = Static<typeof MemberAdd>;

const Label = Type.Optional(Type.String({ maxLength: 255, description: 'As GET shows it; ignored (the id or UUID decides)' }));

export const MemberSiteGrant = Type.Object(
  {
    uuid: Type.String({ format: 'uuid', description: 'A site of this organization' }),
    permissions: Type.Array(Type.String({ minLength: 1, maxLength: 100 }), { maxItems: 50, description: 'Site permission codenames' }),
    name: Label,
    schema_name: Label,
  },
  { additionalProperties: false },
);

const SiteGrants = (description: string) => Type.Optional(Type.Array(MemberSiteGrant, { maxItems: 500, description }));

export const MemberUpdate = Type.Object(
  {
    is_admin: Type.Optional(Type.Boolean({ description: 'Whether the member is an admin of the organization' })),
    groups: Type.Optional(
      Type.Array(Type.Union([Type.Integer({ minimum: 1 }), Type.Object({ id: Type.Integer({ minimum: 1 }), name: Label }, { additionalProperties: false })]), {
        maxItems: 200,
        description: 'Group ids (or the `{id, name}` objects GET returns): replaces the member\'s groups',
      }),
    ),
    site: SiteGrants('Replaces the member\'s direct grants on this organization\'s sites'),
    sites: SiteGrants('The same as `site`, under the name GET uses (send one of the two)'),
    ...readOnlyProps(MemberView, ['uuid', 'username', 'email', 'first_name', 'last_name', 'is_active', 'is_owner']),
  },
  {
    additionalProperties: false,
    description: 'Each field given replaces that part wholesale; a field left out is unchanged. A body sent back from GET works (read-only fields unchanged are ignored).',
  },
);
export type MemberUpdate = Static<typeof MemberUpdate>;
