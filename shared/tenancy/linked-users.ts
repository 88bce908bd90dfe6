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
import { quotedSchema } from './schema.ts';

/**
 * SQL: whether the linked site user `u` (joined to its platform account `p`) may act on the
 * site whose schema is the bound parameter — an active owner or admin of its organization.
 */
export const LINKED_STANDING_SQL = `(u.platform_user_uuid IS NULL OR coalesce(p.is_active AND NOT p.is_deleted AND EXISTS (
    SELECT 1 FROM public.sites s JOIN public.organization_members m ON m.organization_uuid = s.organization_uuid
     WHERE s.schema_name = ? AND m.user_uuid = p.uuid AND (m.is_owner OR m.is_admin)), false))`;

/** SQL: whether site user `u` (joined to `p`) may sign in on the site bound as parameter: active, not deleted, in standing. */
export const USABLE_SQL = `u.is_active AND NOT u.is_deleted AND ${LINKED_STANDING_SQL}`;

/** The schemas of the organization's sites (those whose schema exists). */
async function siteSchemas(em: EntityManager, orgUuid: string): Promise<string[]> {
  const rows = (await em.execute(
    'SELECT s.schema_name FROM public.sites s JOIN pg_namespace n ON n.nspname = s.schema_name WHERE s.organization_uuid = ? ORDER BY s.schema_name',
    [orgUuid],
  )) as { schema_name: string }[];
  return rows.map((r) => r.schema_name);
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
  for (const schema of await siteSchemas(em, orgUuid)) {
    const s = quotedSchema(schema);
    if (standing.admin) {
      // A site user of the same username (not linked) keeps it: then the admin has no linked user there.
      await em.execute(
        `INSERT INTO ${s}.users (uuid, username, email, email_verified, first_name, last_name, password, platform_user_uuid, is_active, is_staff, is_superuser)
         VALUES (gen_random_uuid(), ?, ?, true, ?, ?, NULL, ?, true, true, true) ON CONFLICT DO NOTHING`,
        [standing.username, standing.email, standing.first_name, standing.last_name, userUuid],
      );
      await em.execute(
        `UPDATE ${s}.users SET is_staff = true, is_superuser = true, is_active = true, is_deleted = false, modified = now() WHERE platform_user_uuid = ?`,
        [userUuid],
      );
      await em.execute(
        `INSERT INTO ${s}.user_groups (user_uuid, group_id)
         SELECT u.uuid, g.id FROM ${s}.users u, ${s}.groups g WHERE u.platform_user_uuid = ? AND g.name = 'Administrators' ON CONFLICT DO NOTHING`,
        [userUuid],
      );
    } else {
      await em.execute(`DELETE FROM ${s}.user_groups WHERE user_uuid IN (SELECT uuid FROM ${s}.users WHERE platform_user_uuid = ?)`, [userUuid]);
      await em.execute(
        `UPDATE ${s}.users SET is_staff = false, is_superuser = false, token_generation = token_generation + 1, modified = now() WHERE platform_user_uuid = ?`,
        [userUuid],
      );
    }
  }
}
