// Lean reads of the users table for hot paths (authentication on every request, lists):
// plain rows through the query builder, no entity hydration (measured: the entity path
// costs about half of an authenticated request; see docs/benchmarks.md).
import { raw } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import type { UserEntity } from './user.entity.ts';
import type { UserView } from './user.schemas.ts';

export const USER_COLUMNS = [
  'uuid', 'username', 'email', 'first_name', 'last_name', 'is_active', 'is_deleted',
  'is_staff', 'is_superuser', 'date_joined', 'modified', 'last_login',
] as const;

type Timestamp = Date | string;
export type UserRow = Omit<UserView, 'date_joined' | 'modified' | 'last_login'> & {
  date_joined: Timestamp;
  modified: Timestamp;
  last_login: Timestamp | null;
  token_generation?: number;
};

/** PostgreSQL's text form (`2026-11-21 20:40:59.772+00`) or a Date, as ISO 8601. */
function iso(value: Timestamp): string {
  if (value instanceof Date) return value.toISOString();
  return new Date(value.replace(' ', 'T').replace(/([+-]\d\d)$/, '$1:00')).toISOString();
}

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
  };
}

const SELECT_BY_UUID = `SELECT ${[...USER_COLUMNS, 'token_generation'].map((c) => `"${c}"`).join(', ')} FROM users WHERE uuid = ?`;

/** One user row by UUID, with its token generation (authentication; a bound parameter, constant SQL). */
export async function selectUserRow(em: EntityManager, uuid: string): Promise<Required<UserRow> | undefined> {
  return (await em.getConnection().execute(SELECT_BY_UUID, [uuid], 'get')) as Required<UserRow> | undefined;
}

// Case-insensitive equality through the lower() unique indexes (ILIKE cannot use them).
export const usernameIs = (username: string) => ({ [raw('lower(username)')]: username.toLowerCase() }) as Record<string, unknown>;
export const emailIs = (email: string) => ({ [raw('lower(email)')]: email.toLowerCase() }) as Record<string, unknown>;
