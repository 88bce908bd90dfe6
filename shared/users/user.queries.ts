// Lean reads of the users table for hot paths (authentication on every request, lists):
// plain rows through the query builder, no entity hydration (measured: the entity path
// costs about half of an authenticated request: `npm run bench:auth`, docs/benchmarks.md).
import { raw } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { iso, type Timestamp } from '../db/sql.ts';
import { LINKED_STANDING_SQL } from '../tenancy/linked-users.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import type { UserEntity } from './user.entity.ts';
import type { UserView } from './user.schemas.ts';

export const USER_COLUMNS = [
  'uuid', 'username', 'email', 'first_name', 'last_name', 'is_active', 'is_deleted',
  'is_staff', 'is_superuser', 'date_joined', 'modified', 'last_login',
] as const;

export type UserRow = Omit<UserView, 'date_joined' | 'modified' | 'last_login'> & {
  date_joined: Timestamp;
  modified: Timestamp;
  last_login: Timestamp | null;
  token_generation?: number;
  pending_email?: string;
  /** A site user's platform account, when it is a linked one (authentication reads it). */
  platform_user_uuid?: string | null;
};

export function toUserView(u: UserRow | UserEntity): UserView {
  return {
    uuid: u.uuid,
    username: u.username,
    email: u.email,
    first_name: u.first_name,
    last_name: u.last_name,
    is_active: u.is_active,
    is_deleted: u.is_deleted,
    is_staff: u.is_staff,
    is_superuser: u.is_superuser,
    date_joined: iso(u.date_joined),
    modified: iso(u.modified),
    last_login: u.last_login ? iso(u.last_login) : null,
    pending_email: u.pending_email ?? '',
  };
}

const SELECT_COLUMNS = [...USER_COLUMNS, 'pending_email', 'token_generation'].map((c) => `"${c}"`).join(', ');
const SELECT_BY_UUID = `SELECT ${SELECT_COLUMNS} FROM public.users WHERE uuid = ?`;

// A site's own user. One linked to a platform account (organization owners/admins) is active
// only while that account is active and an owner or admin of the site's organization
// (tenancy/linked-users.ts), and counts the account's token generation too: a platform
// password change, deactivation, deletion, demotion or removal revokes its site tokens as well.
const TENANT_COLUMNS = [
  ...USER_COLUMNS.filter((c) => c !== 'is_active').map((c) => `u."${c}"`),
  `u.is_active AND ${LINKED_STANDING_SQL} AS is_active`,
  'u.token_generation + coalesce(p.token_generation, 0) AS token_generation',
  'u.platform_user_uuid',
].join(', ');
const selectTenantUser = (schema: string) =>
  `SELECT ${TENANT_COLUMNS} FROM ${quotedSchema(schema)}.users u LEFT JOIN public.users p ON p.uuid = u.platform_user_uuid WHERE u.uuid = ?`;

/**
 * One user row by UUID, with its token generation (authentication; a bound parameter,
 * constant SQL). With `schema`, a site's own user (the schema name comes from host routing).
 */
export async function selectUserRow(em: EntityManager, uuid: string, schema: string | null = null): Promise<Required<UserRow> | undefined> {
  const [sql, params] = schema ? [selectTenantUser(schema), [schema, uuid]] : [SELECT_BY_UUID, [uuid]];
  return (await em.getConnection().execute(sql, params, 'get')) as Required<UserRow> | undefined;
}

// Case-insensitive equality through the lower() unique indexes (ILIKE cannot use them).
export const usernameIs = (username: string) => ({ [raw('lower(username)')]: username.toLowerCase() }) as Record<string, unknown>;
export const emailIs = (email: string) => ({ [raw('lower(email)')]: email.toLowerCase() }) as Record<string, unknown>;
