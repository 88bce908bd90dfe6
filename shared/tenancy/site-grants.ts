// The site permissions a site user holds in its site: the codenames of "<schema>".permissions
// granted to the user directly (user_permissions) or through one of the site's groups
// (user_groups → group_permissions), e.g. the seeded Editors' secret permissions. One query,
// run once per request on first need (permissions/grants.ts: abilityWithGrants), then turned
// into rules of the request's ability (auth/actor.ts: siteRules).
import type { EntityManager } from '@mikro-orm/postgresql';
import { quotedSchema } from './schema.ts';

const sitePermissionsSql = (q: string) => `
  SELECT p.codename FROM ${q}.permissions p
   WHERE EXISTS (SELECT 1 FROM ${q}.user_permissions up WHERE up.permission_id = p.id AND up.user_uuid = ?)
      OR EXISTS (SELECT 1 FROM ${q}.user_groups ug JOIN ${q}.group_permissions gp ON gp.group_id = ug.group_id
                  WHERE gp.permission_id = p.id AND ug.user_uuid = ?)`;

export async function loadSitePermissions(em: EntityManager, schema: string, userUuid: string): Promise<Set<string>> {
  const found = (await em.getConnection().execute(sitePermissionsSql(quotedSchema(schema)), [userUuid, userUuid])) as { codename: string }[];
  return new Set(found.map((r) => r.codename));
}
