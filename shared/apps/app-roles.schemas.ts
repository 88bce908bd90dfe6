// App roles (spec Part 2 §2 "Principal population", §4 Packages `app_roles/metadata.json`): the
// roles a site user can hold in one app, portable by name, one parent each (`parent_name`: a
// role holds its ancestors' roles too); and their assignments (user → app → role).
// docs/app-roles.md.
import { Type, type Static } from '@sinclair/typebox';
import { readOnlyProps } from '../common/read-only.ts';
import { StringEnum } from '../common/validation.ts';

/** Role names become Cerbos role names: an identifier, at most 100 characters. */
export const ROLE_NAME_PATTERN = '^[A-Za-z][A-Za-z0-9_-]{0,99}$';

/**
 * Names no stored role may take (compared case-insensitively, so that `Admin` is no trap either):
 * `admin` and `user` are roles the platform gives by itself (policies/principal.ts) — a stored
 * `admin` assignable to anyone would hand out what only the site's administrators hold, and
 * `user` is every principal's role when it holds no other; `mine` names the caller's own roles
 * in the API (`GET /api/apps/{app_slug}/roles/mine/`), so a role of that name could not be read.
 */
export const RESERVED_ROLE_NAMES: Readonly<Record<string, string>> = {
  admin: 'the platform gives it to the site\'s administrators (superusers and staff) in every app',
  user: 'the platform gives it to every user who holds no other role',
  mine: 'GET /api/apps/{app_slug}/roles/mine/ lists the caller\'s own roles',
};

export const APP_ROLE_MESSAGES = {
  created: 'Role created.',
  deleted: (name: string) => `Role "${name}" deleted.`,
  assigned: 'Role assigned.',
  alreadyAssigned: 'The user already holds this role.',
  unassigned: 'Role unassigned.',
} as const;

const Name = Type.String({
  minLength: 1,
  maxLength: 100,
  pattern: ROLE_NAME_PATTERN,
  description: 'A letter, then letters, digits, _ or -; at most 100 characters. `admin`, `user` and `mine` are reserved.',
});
const ParentName = Type.Union([Type.String({ minLength: 1, maxLength: 100 }), Type.Null()], {
  description: 'The name of the parent role, in the same app (its holders hold the parent too); null for none. Not the role itself nor one of its descendants.',
});
const Description = Type.String({ maxLength: 10_000, description: 'What the role is for' });
const Time = Type.String({ format: 'date-time' });

export const AppRoleView = Type.Object({
  name: Type.String(),
  description: Type.String(),
  parent_name: Type.Union([Type.String(), Type.Null()]),
  created_at: Time,
  updated_at: Time,
});
export type AppRoleView = Static<typeof AppRoleView>;

export const AppRoleCreate = Type.Object(
  { name: Name, description: Type.Optional(Description), parent_name: Type.Optional(ParentName) },
  { additionalProperties: false },
);
export type AppRoleCreate = Static<typeof AppRoleCreate>;

export const AppRoleUpdate = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Description),
    parent_name: Type.Optional(ParentName),
    ...readOnlyProps(AppRoleView, ['created_at']),
    ...readOnlyProps(AppRoleView, ['updated_at'], 'maintained'),
  },
  {
    additionalProperties: false,
    description: 'Fields left out keep their values (PUT and PATCH alike). A body sent back from GET works: `created_at` is ignored when unchanged (a 400 when changed), `updated_at` is ignored.',
  },
);
export type AppRoleUpdate = Static<typeof AppRoleUpdate>;

const AppSlug = Type.String({ minLength: 1, maxLength: 100, description: 'The app slug' });
const RoleName = Type.String({ minLength: 1, maxLength: 100, description: 'The role name' });
export const AppRoleAppRef = Type.Object({ app_slug: AppSlug });
export const AppRoleRef = Type.Object({ app_slug: AppSlug, name: RoleName });
export const AppRoleAssignmentRef = Type.Object({
  app_slug: AppSlug,
  name: RoleName,
  user_uuid: Type.String({ minLength: 1, maxLength: 150, description: 'The user\'s UUID (a username is accepted too)' }),
});

const Pages = {
  page: Type.Optional(Type.String({ description: 'Page number (default 1), or `last`' })),
  page_size: Type.Optional(Type.String({ description: 'Items per page (default 20, at most 100)' })),
};

export const AppRoleListQuery = Type.Object({
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches name or description' })),
  ordering: Type.Optional(StringEnum(['name', '-name', 'created_at', '-created_at', 'updated_at', '-updated_at'])),
  ...Pages,
});
export type AppRoleListQuery = Static<typeof AppRoleListQuery>;

export const AppRoleAssignmentListQuery = Type.Object({
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches username or e-mail' })),
  ...Pages,
});
export type AppRoleAssignmentListQuery = Static<typeof AppRoleAssignmentListQuery>;

export const AppRoleAssign = Type.Object(
  { user: Type.String({ minLength: 1, maxLength: 150, description: 'A site user\'s UUID or username' }) },
  { additionalProperties: false },
);
export type AppRoleAssign = Static<typeof AppRoleAssign>;

export const AppRoleAssignmentView = Type.Object({
  uuid: Type.String({ format: 'uuid' }),
  username: Type.String(),
  email: Type.String(),
  assigned_at: Time,
});
export type AppRoleAssignmentView = Static<typeof AppRoleAssignmentView>;

export const MyAppRoles = Type.Object({
  data: Type.Array(Type.String(), {
    description: 'The role names the policies see for the caller in this app: assigned roles with their ancestors, `admin` for site administrators, `user` when there is no other; sorted.',
  }),
});
export type MyAppRoles = Static<typeof MyAppRoles>;
