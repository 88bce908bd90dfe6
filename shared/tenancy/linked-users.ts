// Organization owners and admins administer every site of their organization as "linked"
// site users (seeded at site creation: `platform_user_uuid` set, no password of their own).
// Their standing follows the platform membership, everywhere at once:
//   - derived on every sign-in and every request (tenant-auth.ts, user.queries.ts): a linked
//     user is usable only while the platform account is active and an owner or admin of the
//     site's organization — a removal or demotion refuses their site tokens at the next request;
//   - kept in the rows by syncLinkedSiteUsers on every membership change (promotion creates the
//     linked user on each site, demotion or removal takes the admin flags and bumps the token
//     generation, so tokens issued before never come back with a later promotion).

import type { EntityManager } from '@mikro-orm/postgresql';
import { clustersOf, platformEm, PRIMARY_CLUSTER } from '../db/clusters.ts';
import { quotedSchema } from './schema.ts';

/**
 * The platform side of a linked site user (platform_user_uuid set): its platform account's
 * password and token generation, and its standing on the site whose schema is `schema` — an
 * active owner or admin of that site's organization. Read from the platform's tables (the
 * primary cluster), apart from the site user's row, which is on the site's cluster
 * (db/clusters.ts). Undefined when the account is gone: then the linked user has no standing.
 */
export interface LinkedAccount {
  password: string | null;
  token_generation: number;
  standing: boolean;
}

const LINKED_ACCOUNT = `SELECT p.password, p.token_generation, p.is_active AND NOT p.is_deleted AND EXISTS (
    SELECT 1 FROM public.sites s JOIN public.organization_members m ON m.organization_uuid = s.organization_uuid
     WHERE s.schema_name = ? AND m.user_uuid = p.uuid AND (m.is_owner OR m.is_admin)) AS standing
  FROM public.users p WHERE p.uuid = ?`;

export async function linkedAccount(siteEm: EntityManager, schema: string, platformUserUuid: string): Promise<LinkedAccount | undefined> {
  const row = (await platformEm(siteEm).getConnection().execute(LINKED_ACCOUNT, [schema, platformUserUuid], 'get')) as LinkedAccount | undefined;
  return row && { password: row.password, token_generation: Number(row.token_generation), standing: Boolean(row.standing) };
}

/**
 * A site user row as the site's own table has it, completed by its platform account when linked:
 * usable only in standing, the account's password, both token generations counted (a platform
 * password change, deactivation, deletion, demotion or removal revokes its site tokens too).
 */
export async function withLinkedAccount<T extends { platform_user_uuid: string | null; token_generation: number | string }>(
  siteEm: EntityManager,
  schema: string,
  row: T,
): Promise<T & { standing: boolean; platform_password: string | null }> {
  if (!row.platform_user_uuid) return { ...row, token_generation: Number(row.token_generation), standing: true, platform_password: null };
  const account = await linkedAccount(siteEm, schema, row.platform_user_uuid);
  return {
    ...row,
    token_generation: Number(row.token_generation) + (account?.token_generation ?? 0),
    standing: account?.standing ?? false,
    platform_password: account?.password ?? null,
  };
}

/**
 * The organization's sites (those whose schema exists), each with where its tables are written:
 * `em` for a site on the primary (the membership change's transaction), else its cluster's pool
 * (db/clusters.ts; committed on its own — the standing read at each request refuses a demoted
 * admin at once either way).
 */
async function siteSchemas(em: EntityManager, orgUuid: string): Promise<{ schema: string; em: EntityManager }[]> {
  const rows = (await em.execute(
    `SELECT s.schema_name, s.cluster FROM public.sites s
      WHERE s.organization_uuid = ? AND (s.cluster <> ? OR EXISTS (SELECT 1 FROM pg_namespace n WHERE n.nspname = s.schema_name)) ORDER BY s.schema_name`,
    [orgUuid, PRIMARY_CLUSTER],
  )) as { schema_name: string; cluster: string }[];
  const clusters = clustersOf(em);
  return Promise.all(
    rows.map(async (r) => ({ schema: r.schema_name, em: r.cluster === PRIMARY_CLUSTER || !clusters ? em : (await clusters.orm(r.cluster)).em.fork() })),
  );
}

/**
 * Brings the user's linked site users on every site of the organization in line with the
 * membership: an owner or admin has one, administrator of the site; anyone else keeps no
 * rights there (and loses every token issued before). Run in the membership change's transaction.
 */
export async function syncLinkedSiteUsers(em: EntityManager, orgUuid: string, userUuid: string): Promise<void> {
  const [standing] = (await em.execute(
    `SELECT u.username, u.email, u.first_name, u.last_name,
            coalesce((SELECT m.is_owner OR m.is_admin FROM public.organization_members m WHERE m.organization_uuid = ? AND m.user_uuid = u.uuid), false) AS admin
       FROM public.users u WHERE u.uuid = ?`,
    [orgUuid, userUuid],
  )) as { username: string; email: string; first_name: string; last_name: string; admin: boolean }[];
  if (!standing) return;
  for (const site of await siteSchemas(em, orgUuid)) {
    const s = quotedSchema(site.schema);
    const target = site.em;
    if (standing.admin) {
      // A site user of the same username (not linked) keeps it: then the admin has no linked user there.
      await target.execute(
        `INSERT INTO ${s}.users (uuid, username, email, email_verified, first_name, last_name, password, platform_user_uuid, is_active, is_staff, is_superuser)
         VALUES (gen_random_uuid(), ?, ?, true, ?, ?, NULL, ?, true, true, true) ON CONFLICT DO NOTHING`,
        [standing.username, standing.email, standing.first_name, standing.last_name, userUuid],
      );
      await target.execute(
        `UPDATE ${s}.users SET is_staff = true, is_superuser = true, is_active = true, is_deleted = false, modified = now() WHERE platform_user_uuid = ?`,
        [userUuid],
      );
      await target.execute(
        `INSERT INTO ${s}.user_groups (user_uuid, group_id)
         SELECT u.uuid, g.id FROM ${s}.users u, ${s}.groups g WHERE u.platform_user_uuid = ? AND g.name = 'Administrators' ON CONFLICT DO NOTHING`,
        [userUuid],
      );
    } else {
      await target.execute(`DELETE FROM ${s}.user_groups WHERE user_uuid IN (SELECT uuid FROM ${s}.users WHERE platform_user_uuid = ?)`, [userUuid]);
      await target.execute(
        `UPDATE ${s}.users SET is_staff = false, is_superuser = false, token_generation = token_generation + 1, modified = now() WHERE platform_user_uuid = ?`,
        [userUuid],
      );
    }
  }
}
