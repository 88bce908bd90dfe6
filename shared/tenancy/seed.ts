// Default data of a new site schema (spec Part 1 §2, Site rule 5): tenant permissions,
// the groups Administrators / Editors / Viewers, default tags, and the organization's owners
// and admins as the site's administrators. Runs inside the site-creation transaction, on a
// schema at the current tenant version; a handful of set-based statements, no per-row work.
//
// Seeded administrators are linked to their platform account by `platform_user_uuid` and have
// no password of their own (NULL): they sign in with their platform password.
import type { EntityManager } from '@mikro-orm/postgresql';
import { platformEm } from '../db/clusters.ts';
import { quotedSchema } from './schema.ts';

const MODELS = { user: 'user', group: 'group', secret: 'secret', tag: 'tag' } as const;
const ACTIONS = [
  ['view', 'Can view'],
  ['add', 'Can add'],
  ['change', 'Can change'],
  ['delete', 'Can delete'],
] as const;

/** Every tenant permission: `{action}_{model}` for users, groups, secrets and tags. */
export const TENANT_PERMISSIONS: { codename: string; name: string; model: string }[] = Object.values(MODELS).flatMap((model) =>
  ACTIONS.map(([action, label]) => ({ codename: `${action}_${model}`, name: `${label} ${model}`, model })),
);

/** Default groups and the permissions each holds. */
export const DEFAULT_GROUPS: Record<string, string[]> = {
  Administrators: TENANT_PERMISSIONS.map((p) => p.codename),
  Editors: TENANT_PERMISSIONS.filter((p) => p.model !== 'group' && (p.model !== 'user' || p.codename === 'view_user')).map((p) => p.codename),
  Viewers: TENANT_PERMISSIONS.filter((p) => p.codename.startsWith('view_') && p.model !== 'secret').map((p) => p.codename),
};

export const DEFAULT_TAGS = [
  { name: 'General', slug: 'general' },
  { name: 'Important', slug: 'important' },
  { name: 'Archived', slug: 'archived' },
];

export interface SeedReport {
  permissions: number;
  groups: number;
  tags: number;
  users: number;
}

const placeholders = (rows: number, columns: number) => Array.from({ length: rows }, () => `(${Array(columns).fill('?').join(', ')})`).join(', ');

export async function seedTenantSchema(em: EntityManager, schema: string, organizationUuid: string): Promise<SeedReport> {
  const s = quotedSchema(schema);
  await em.execute(
    `INSERT INTO ${s}.permissions (codename, name, model) VALUES ${placeholders(TENANT_PERMISSIONS.length, 3)}`,
    TENANT_PERMISSIONS.flatMap((p) => [p.codename, p.name, p.model]),
  );
  const groups = Object.keys(DEFAULT_GROUPS);
  await em.execute(`INSERT INTO ${s}.groups (name) VALUES ${placeholders(groups.length, 1)}`, groups);
  const pairs = Object.entries(DEFAULT_GROUPS).flatMap(([group, codes]) => codes.map((code) => [group, code]));
  await em.execute(
    `INSERT INTO ${s}.group_permissions (group_id, permission_id)
     SELECT g.id, p.id FROM (VALUES ${placeholders(pairs.length, 2)}) AS v(grp, code)
       JOIN ${s}.groups g ON g.name = v.grp JOIN ${s}.permissions p ON p.codename = v.code`,
    pairs.flat(),
  );
  await em.execute(`INSERT INTO ${s}.tags (name, slug) VALUES ${placeholders(DEFAULT_TAGS.length, 2)}`, DEFAULT_TAGS.flatMap((t) => [t.name, t.slug]));
  // The organization's owners and admins, as the site's superusers (password NULL: platform
  // sign-in): read from the platform's tables (the primary cluster), written into the site's.
  const admins = (await platformEm(em).execute(
    `SELECT u.username, u.email, u.first_name, u.last_name, u.uuid, u.is_active
       FROM public.organization_members m JOIN public.users u ON u.uuid = m.user_uuid
      WHERE m.organization_uuid = ? AND (m.is_owner OR m.is_admin) AND NOT u.is_deleted ORDER BY u.username`,
    [organizationUuid],
  )) as { username: string; email: string; first_name: string; last_name: string; uuid: string; is_active: boolean }[];
  const users = admins.length
    ? ((await em.execute(
        `INSERT INTO ${s}.users (uuid, username, email, email_verified, first_name, last_name, password, platform_user_uuid, is_active, is_staff, is_superuser)
         SELECT gen_random_uuid(), v.username, v.email, true, v.first_name, v.last_name, NULL, v.uuid::uuid, v.is_active::boolean, true, true
           FROM (VALUES ${placeholders(admins.length, 6)}) AS v(username, email, first_name, last_name, uuid, is_active)
         RETURNING uuid`,
        admins.flatMap((u) => [u.username, u.email, u.first_name, u.last_name, u.uuid, u.is_active]),
      )) as { uuid: string }[])
    : [];
  if (users.length) {
    await em.execute(
      `INSERT INTO ${s}.user_groups (user_uuid, group_id) SELECT u.uuid, g.id FROM ${s}.users u, ${s}.groups g WHERE g.name = 'Administrators'`,
    );
  }
  return { permissions: TENANT_PERMISSIONS.length, groups: groups.length, tags: DEFAULT_TAGS.length, users: users.length };
}
