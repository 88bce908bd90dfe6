// Who a policy decision is about (spec Part 2 §2 "Principal population"): the site user's id, the
// roles assigned to it in the app (with their ancestors: a role's parent is held with it), `admin`
// for the site's administrators, and `user` when nothing else applies (Cerbos needs one role);
// attributes are the user's stored attributes plus `tenant_id` and `app_slug`.
import type { EntityManager } from '@mikro-orm/postgresql';
import { preparedRows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import type { Principal } from './model.ts';

/** The role every principal holds when it holds no other. */
export const DEFAULT_ROLE = 'user';
/** The role site administrators (superuser or staff of the site) hold in every app. */
export const ADMIN_ROLE = 'admin';

/** The scope of an app's policies: `{tenant_id}_{app_slug}` (the tenant id is the site's schema: no dots). */
export const appScope = (schema: string, appSlug: string): string => `${schema}_${appSlug}`;

export interface PrincipalUser {
  uuid: string;
  is_superuser: boolean;
  is_staff: boolean;
}

/** The principal of `user` in one app, in one statement. */
export async function principalFor(em: EntityManager, schema: string, app: { id: number; slug: string }, user: PrincipalUser): Promise<Principal> {
  const s = quotedSchema(schema);
  const [row] = await preparedRows<{ attributes: Record<string, unknown> | null; roles: string[] }>(
    em,
    `WITH RECURSIVE held AS (
       SELECT r.id, r.name, r.parent_id FROM ${s}.app_role_assignments a JOIN ${s}.app_roles r ON r.id = a.role_id
        WHERE a.user_uuid = ? AND r.app_id = ?
       UNION
       SELECT p.id, p.name, p.parent_id FROM ${s}.app_roles p JOIN held ON p.id = held.parent_id)
     SELECT (SELECT attributes FROM ${s}.users WHERE uuid = ?) AS attributes, ARRAY(SELECT DISTINCT name FROM held ORDER BY name) AS roles`,
    [user.uuid, app.id, user.uuid],
  );
  const roles = [...(row?.roles ?? [])];
  if (user.is_superuser || user.is_staff) roles.push(ADMIN_ROLE);
  if (roles.length === 0) roles.push(DEFAULT_ROLE);
  return {
    id: user.uuid,
    roles: [...new Set(roles)],
    attr: { ...(row?.attributes ?? {}), tenant_id: schema, app_slug: app.slug },
    scope: appScope(schema, app.slug),
  };
}
