// Lean reads of the users table for hot paths (authentication on every request, lists):
// plain rows through the query builder, no entity hydration (measured: the entity path
// costs about half of an authenticated request: `npm run bench:auth`, docs/benchmarks.md).
import { raw } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { iso, type Timestamp } from '../db/sql.ts';
import { withLinkedAccount } from '../tenancy/linked-users.ts';
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
// The account is read on the primary cluster, the site user on its site's (db/clusters.ts).
const TENANT_COLUMNS = [...USER_COLUMNS, 'token_generation', 'platform_user_uuid'].map((c) => `"${c}"`).join(', ');
const selectTenantUser = (schema: string) => `SELECT ${TENANT_COLUMNS} FROM ${quotedSchema(schema)}.users WHERE uuid = ?`;

/**
 * One user row by UUID, with its token generation (authentication; a bound parameter,
 * constant SQL). With `schema`, a site's own user (the schema name comes from host routing).
 */
export async function selectUserRow(em: EntityManager, uuid: string, schema: string | null = null): Promise<Required<UserRow> | undefined> {
  const row = (await em.getConnection().execute(schema ? selectTenantUser(schema) : SELECT_BY_UUID, [uuid], 'get')) as Required<UserRow> | undefined;
  if (!schema || !row?.platform_user_uuid) return row;
  const linked = await withLinkedAccount(em, schema, row);
  return { ...row, is_active: row.is_active && linked.standing, token_generation: linked.token_generation };
}

// Case-insensitive equality through the lower() unique indexes (ILIKE cannot use them).
export const usernameIs = (username: string) => ({ [raw('lower(username)')]: username.toLowerCase() }) as Record<string, unknown>;
export const emailIs = (email: string) => ({ [raw('lower(email)')]: email.toLowerCase() }) as Record<string, unknown>;
