// Seeding helpers of the organization, member and group suites: users with tokens,
// organizations through the API, and direct reads of the database (to check state).
import type { EntityManager } from '@mikro-orm/postgresql';
import type { TestServer } from './helpers.ts';

export const PASSWORD = 'Org-suite-pass-1';

export interface TestUser {
  uuid: string;
  username: string;
  access: string;
}

let n = 0;

/** A user created by the superuser, with an access token. */
export async function makeUser(s: TestServer, root: string, prefix = 'u', extra: Record<string, unknown> = {}): Promise<TestUser> {
  n++;
  const username = `${prefix}${n}-${process.pid}`;
  const res = await s.api('POST', '/api/cloud/users/', { token: root, body: { username, email: `${username}@example.com`, password: PASSWORD, ...extra } });
  if (res.status !== 201) throw new Error(`user create failed: ${res.text}`);
  const { access } = await s.login(username, PASSWORD);
  return { uuid: res.body.data.uuid, username, access };
}

/** An organization created by `owner` (who becomes its owner). */
export async function makeOrg(s: TestServer, owner: string, name: string): Promise<{ uuid: string; slug: string; name: string }> {
  const res = await s.api('POST', '/api/cloud/organizations/', { token: owner, body: { name } });
  if (res.status !== 201) throw new Error(`org create failed: ${res.text}`);
  return res.body.data;
}

/** Adds an existing user directly: a platform operator (the superuser) does it; everyone else invites. */
export async function addMember(s: TestServer, token: string, org: string, user: string): Promise<void> {
  const res = await s.api('POST', `/api/cloud/organizations/${org}/members/`, { token, body: { user_slug: user } });
  if (res.status !== 201) throw new Error(`member add failed: ${res.text}`);
}

export const db = (s: TestServer): EntityManager => s.handle.db.orm.em.fork() as EntityManager;

export async function rows<T = Record<string, unknown>>(s: TestServer, sql: string, params: unknown[] = []): Promise<T[]> {
  return (await db(s).execute(sql, params)) as T[];
}
