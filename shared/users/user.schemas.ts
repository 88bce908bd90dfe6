import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { BoolParam } from '../common/filters.ts';
import { StringEnum } from '../common/validation.ts';

// Letters, digits and . @ + - _, but not `.` or `..` alone (they are not addressable in a URL path).
export const USERNAME_PATTERN = '^(?!\\.{1,2}$)[A-Za-z0-9.@+_-]+$';

const Username = Type.String({ minLength: 1, maxLength: 150, pattern: USERNAME_PATTERN, description: 'Letters, digits and . @ + - _' });
// Empty: no e-mail (GET shows '' then, and a body sent back must pass).
const Email = Type.Union([Type.String({ format: 'email', maxLength: 254 }), Type.Literal('')], { description: 'E-mail address (empty: none)' });
const Name = Type.String({ maxLength: 150 });
const Active = Type.Boolean({ description: 'Whether the user can log in' });
const Staff = Type.Boolean({ description: 'Staff: administers ordinary users' });
const Superuser = Type.Boolean({ description: 'Superuser: every permission' });

/** The path parameter naming one user (`/api/cloud/users/:user/`): a username or a UUID. */
export const UserRef = Type.Object({ user: Type.String({ minLength: 1, maxLength: 150, description: 'Username or UUID' }) });
export type UserRef = Static<typeof UserRef>;

export const UserView = Type.Object(
  {
    uuid: Type.String({ format: 'uuid' }),
    username: Type.String(),
    email: Type.String(),
    first_name: Type.String(),
    last_name: Type.String(),
    is_active: Type.Boolean(),
    is_deleted: Type.Boolean(),
    is_staff: Type.Boolean(),
    is_superuser: Type.Boolean(),
    date_joined: Type.String({ format: 'date-time' }),
    modified: Type.String({ format: 'date-time' }),
    last_login: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    pending_email: Type.String({ description: 'A new e-mail address waiting for its confirmation link to be used (empty when none); it counts for nothing until then' }),
  },
  { $id: 'User' },
);
export type UserView = Static<typeof UserView>;

export const UserCreate = Type.Object(
  {
    username: Type.Optional(Username),
    email: Type.Optional(Email),
    password: Type.String({ minLength: 1, maxLength: 128 }),
    first_name: Type.Optional(Name),
    last_name: Type.Optional(Name),
    is_active: Type.Optional(Active),
    is_staff: Type.Optional(Staff),
    is_superuser: Type.Optional(Superuser),
  },
  { additionalProperties: false, description: 'Without `username`, one is generated from the e-mail or the name (`-2`, `-3` … on collision).' },
);
export type UserCreate = Static<typeof UserCreate>;

const Password = Type.String({ minLength: 1, maxLength: 128 });

export const UserUpdate = Type.Object(
  {
    username: Type.Optional(Username),
    email: Type.Optional(Email),
    password: Type.Optional(Password),
    old_password: Type.Optional({ ...Password, description: 'Required with `password` when you change your own password' }),
    first_name: Type.Optional(Name),
    last_name: Type.Optional(Name),
    is_active: Type.Optional(Active),
    is_staff: Type.Optional(Staff),
    is_superuser: Type.Optional(Superuser),
    is_deleted: Type.Optional(Type.Boolean({ description: '`false` restores a soft-deleted user (superusers only); deleting is DELETE' })),
    ...readOnlyProps(UserView, ['uuid', 'date_joined']),
    ...readOnlyProps(UserView, ['modified', 'last_login', 'pending_email'], 'maintained'),
  },
  { additionalProperties: false },
);
export type UserUpdate = Static<typeof UserUpdate>;


export const UserListQuery = Type.Object({
  search: Type.Optional(Type.String({ maxLength: 200, description: 'Matches username, e-mail, first or last name' })),
  ordering: Type.Optional(StringEnum(['username', '-username', 'email', '-email', 'date_joined', '-date_joined', 'last_login', '-last_login'])),
  organization_slug: Type.Optional(Type.String({ maxLength: 100, description: 'Only members of this organization (slug or UUID)' })),
  is_active: Type.Optional(BoolParam),
  is_deleted: Type.Optional(BoolParam),
  ...PageParams,
});
export type UserListQuery = Static<typeof UserListQuery>;

export const ProfileUpdate = Type.Object(
  {
    username: Type.Optional(Username),
    email: Type.Optional({ ...Email, description: 'A new address takes effect when the confirmation link mailed to it is used' }),
    first_name: Type.Optional(Name),
    last_name: Type.Optional(Name),
    ...readOnlyProps(UserView, ['uuid', 'is_active', 'is_deleted', 'is_staff', 'is_superuser', 'date_joined']),
    ...readOnlyProps(UserView, ['modified', 'last_login', 'pending_email'], 'maintained'),
  },
  { additionalProperties: false },
);
export type ProfileUpdate = Static<typeof ProfileUpdate>;

export const ChangePassword = Type.Object(
  {
    old_password: Password,
    new_password: Password,
  },
  { additionalProperties: false },
);
export type ChangePassword = Static<typeof ChangePassword>;
