// App roles ("<schema>".app_roles) and their assignments (app_role_assignments): what a site
// user's policy principal holds in an app (policies/principal.ts). Roles are addressed by name
// (portable, as packages carry them), with one optional parent in the same app and no cycles.
// Decided on the AppRole subject (read by every user of the site, written by its
// administrators) and on AppRoleAssignment (the administrators' only: it says who holds what).
// Writes to the hierarchy of one app are serialised by an advisory lock, so that two concurrent
// parent changes cannot make a cycle between them. docs/app-roles.md.
import type { EntityManager } from '@mikro-orm/postgresql';
import { likeEscape } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { isUuid, pgError, uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { actorUuid, ownUuid, readsOf, type ServiceContext } from '../context.ts';
import { countOf, firstRow, iso, rows } from '../db/sql.ts';
import { fieldError, notFound } from '../errors.ts';
import { principalFor } from '../policies/principal.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor, tenantSchema } from '../tenancy/site-access.ts';
import type { Action } from '../auth/actor.ts';
import { activeAppFor, type ActiveApp } from './lookup.ts';
import {
  AppRoleAssign, AppRoleAssignmentListQuery, AppRoleCreate, AppRoleListQuery, AppRoleUpdate, RESERVED_ROLE_NAMES,
  type AppRoleAssignmentView, type AppRoleView,
} from './app-roles.schemas.ts';

interface RoleRow {
  id: number;
  name: string;
  description: string;
  parent_id: number | null;
  parent_name: string | null;
  created_at: Date | string;
  updated_at: Date | string;
}

const NAME_KEY = 'app_roles_app_id_name_key';

const select = (q: string) => `
  SELECT r.id, r.name, r.description, r.parent_id, p.name AS parent_name, r.created_at, r.updated_at
    FROM ${q}.app_roles r LEFT JOIN ${q}.app_roles p ON p.id = r.parent_id`;

const view = (r: RoleRow): AppRoleView => ({
  name: r.name,
  description: r.description,
  parent_name: r.parent_name,
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
});

const roleNotFound = (name: string, app: ActiveApp) => notFound({ message: `Role "${name}" not found in app "${app.slug}".` });
const nameTaken = () => fieldError('name', 'A role with this name already exists in this app.');

async function findRole(em: EntityManager, schema: string, app: ActiveApp, name: string): Promise<RoleRow> {
  const row = await firstRow<RoleRow>(em, `${select(quotedSchema(schema))} WHERE r.app_id = ? AND r.name = ?`, [app.id, name]);
  if (!row) throw roleNotFound(name, app);
  return row;
}

/** The check before any lookup (403 first), then the app (404); a site subject's check comes with the role. */
async function appOf(ctx: ServiceContext, action: Action, type: 'AppRole' | 'AppRoleAssignment', appSlug: string): Promise<{ schema: string; app: ActiveApp }> {
  const schema = await siteSchemaFor(ctx, action, type);
  return { schema, app: await activeAppFor(ctx, schema, appSlug, 'read') };
}

/** The role `name` of the app, if the actor may `action` it: 403, then 404 for the app or the role. */
async function roleFor(ctx: ServiceContext, action: Action, appSlug: string, name: string) {
  const { schema, app } = await appOf(ctx, action, 'AppRole', appSlug);
  const role = await findRole(ctx.em, schema, app, name);
  await authorizeSiteSubject(ctx, action, 'AppRole', { schema, app: app.slug, name: role.name });
  return { schema, app, role };
}

function checkName(name: string): void {
  const why = RESERVED_ROLE_NAMES[name.toLowerCase()];
  if (why) throw fieldError('name', `"${name.toLowerCase()}" is a reserved role name: ${why}.`);
}

/** One writer at a time on the roles of an app (inside the caller's transaction). */
const lockRoles = (tx: EntityManager, schema: string, app: ActiveApp) => tx.execute('SELECT pg_advisory_xact_lock(hashtext(?))', [`app_roles:${schema}:${app.id}`]);

/**
 * The id of the parent named `parentName` (null for none), checked inside the locked
 * transaction: it exists in the app, and (for an existing role) is neither the role nor one of its descendants.
 */
async function parentId(tx: EntityManager, schema: string, app: ActiveApp, parentName: string | null, role?: RoleRow): Promise<number | null> {
  if (parentName === null) return null;
  const q = quotedSchema(schema);
  const parent = await firstRow<{ id: number }>(tx, `SELECT id FROM ${q}.app_roles WHERE app_id = ? AND name = ?`, [app.id, parentName]);
  if (!parent) throw fieldError('parent_name', `No role "${parentName}" in this app.`);
  if (!role) return parent.id;
  if (Number(parent.id) === Number(role.id)) throw fieldError('parent_name', 'A role cannot be its own parent.');
  // The parent's ancestors, up from it (UNION: ends even on a cycle someone made by hand).
  const cycle = await firstRow(
    tx,
    `WITH RECURSIVE up AS (SELECT id, parent_id FROM ${q}.app_roles WHERE id = ?
       UNION SELECT r.id, r.parent_id FROM ${q}.app_roles r JOIN up ON r.id = up.parent_id)
     SELECT 1 FROM up WHERE id = ?`,
    [parent.id, role.id],
  );
  if (cycle) throw fieldError('parent_name', `"${parentName}" inherits from "${role.name}": a role cannot have its own descendant as parent.`);
  return parent.id;
}

const ORDERING: Record<string, string> = {
  name: 'r.name ASC',
  '-name': 'r.name DESC',
  created_at: 'r.created_at ASC',
  '-created_at': 'r.created_at DESC',
  updated_at: 'r.updated_at ASC',
  '-updated_at': 'r.updated_at DESC',
};

export async function listRoles(ctx: ServiceContext, appSlug: string, rawQuery: unknown = {}): Promise<Page<AppRoleView>> {
  const { schema, app } = await appOf(ctx, 'read', 'AppRole', appSlug);
  await authorizeSiteSubject(ctx, 'read', 'AppRole', { schema, app: app.slug });
  const query = validate(AppRoleListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const where = ['r.app_id = ?'];
  const params: unknown[] = [app.id];
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    where.push('(r.name ILIKE ? OR r.description ILIKE ?)');
    params.push(like, like);
  }
  const q = quotedSchema(schema);
  const count = await countOf(ctx.em, `SELECT count(*) AS n FROM ${q}.app_roles r WHERE ${where.join(' AND ')}`, params);
  const page = resolvePage(pageReq, count);
  const found = await rows<RoleRow>(ctx.em, `${select(q)} WHERE ${where.join(' AND ')} ORDER BY ${ORDERING[query.ordering ?? 'name']}, r.id LIMIT ? OFFSET ?`, [
    ...params, page.pageSize, pageOffset(page),
  ]);
  return { ...page, count, results: found.map(view) };
}

export async function createRole(ctx: ServiceContext, appSlug: string, rawInput: unknown): Promise<AppRoleView> {
  const { schema, app } = await appOf(ctx, 'create', 'AppRole', appSlug);
  const input = validate(AppRoleCreate, rawInput);
  await authorizeSiteSubject(ctx, 'create', 'AppRole', { schema, app: app.slug, name: input.name });
  checkName(input.name);
  const q = quotedSchema(schema);
  try {
    await ctx.em.transactional(async (tx) => {
      await lockRoles(tx as EntityManager, schema, app);
      const parent = await parentId(tx as EntityManager, schema, app, input.parent_name ?? null);
      await tx.execute(`INSERT INTO ${q}.app_roles (app_id, name, description, parent_id) VALUES (?, ?, ?, ?)`, [app.id, input.name, input.description ?? '', parent]);
    });
  } catch (err) {
    if (uniqueViolation(err) === NAME_KEY) throw nameTaken();
    throw err;
  }
  return view(await findRole(ctx.em, schema, app, input.name));
}

export async function getRole(ctx: ServiceContext, appSlug: string, name: string): Promise<AppRoleView> {
  return view((await roleFor(ctx, 'read', appSlug, name)).role);
}

/** PUT and PATCH: the fields given change; `parent_name: null` removes the parent. */
export async function updateRole(ctx: ServiceContext, appSlug: string, name: string, rawInput: unknown): Promise<AppRoleView> {
  const input = validate(AppRoleUpdate, rawInput);
  const { schema, app, role } = await roleFor(ctx, 'update', appSlug, name);
  dropReadOnly(AppRoleUpdate, input, view(role));
  const renamed = input.name !== undefined && input.name !== role.name;
  if (renamed) checkName(input.name!);
  const q = quotedSchema(schema);
  try {
    await ctx.em.transactional(async (tx) => {
      await lockRoles(tx as EntityManager, schema, app);
      // Read again under the lock: the role may have been renamed or deleted meanwhile.
      const current = await findRole(tx as EntityManager, schema, app, role.name);
      const parent = input.parent_name === undefined || input.parent_name === current.parent_name
        ? current.parent_id
        : await parentId(tx as EntityManager, schema, app, input.parent_name, current);
      await tx.execute(`UPDATE ${q}.app_roles SET name = ?, description = coalesce(?, description), parent_id = ?, updated_at = now() WHERE id = ?`, [
        input.name ?? current.name, input.description ?? null, parent, current.id,
      ]);
    });
  } catch (err) {
    if (uniqueViolation(err) === NAME_KEY) throw nameTaken();
    throw err;
  }
  return view(await findRole(ctx.em, schema, app, input.name ?? role.name));
}

/** Its assignments go with it; its children stay, without a parent. */
export async function deleteRole(ctx: ServiceContext, appSlug: string, name: string): Promise<void> {
  const { schema, app, role } = await roleFor(ctx, 'delete', appSlug, name);
  const q = quotedSchema(schema);
  await ctx.em.transactional(async (tx) => {
    await lockRoles(tx as EntityManager, schema, app);
    await tx.execute(`UPDATE ${q}.app_roles SET updated_at = now() WHERE parent_id = ?`, [role.id]); // they lose their parent (ON DELETE SET NULL)
    await tx.execute(`DELETE FROM ${q}.app_roles WHERE id = ?`, [role.id]);
  });
}

/** The caller's roles in the app exactly as the policies see them (principalFor): ancestors, `admin`, `user` included. */
export async function myRoles(ctx: ServiceContext, appSlug: string): Promise<string[]> {
  const schema = tenantSchema(ctx);
  const uuid = ownUuid(ctx);
  const app = await activeAppFor(ctx, schema, appSlug, 'read');
  const actor = ctx.actor as { is_superuser: boolean; is_staff: boolean };
  const principal = await principalFor(readsOf(ctx), schema, app, { uuid, is_superuser: actor.is_superuser, is_staff: actor.is_staff });
  return [...principal.roles].sort();
}

interface AssignmentRow {
  uuid: string;
  username: string;
  email: string;
  assigned_at: Date | string;
}

const assignmentView = (r: AssignmentRow): AppRoleAssignmentView => ({ uuid: r.uuid, username: r.username, email: r.email, assigned_at: iso(r.assigned_at) });

const assignmentSelect = (q: string) => `SELECT u.uuid, u.username, u.email, a.created_at AS assigned_at FROM ${q}.app_role_assignments a JOIN ${q}.users u ON u.uuid = a.user_uuid`;

/** The role, for an administrator's work on its assignments: 403, then 404 for the app or the role. */
async function roleForAssignments(ctx: ServiceContext, action: Action, appSlug: string, name: string) {
  const { schema, app } = await appOf(ctx, action, 'AppRoleAssignment', appSlug);
  const role = await findRole(ctx.em, schema, app, name);
  return { schema, app, role };
}

/** A (not deleted) site user by UUID or username (case-insensitive), or 404. */
async function findUser(em: EntityManager, schema: string, ref: string): Promise<{ uuid: string; username: string }> {
  const byUuid = isUuid(ref);
  const user = await firstRow<{ uuid: string; username: string }>(
    em,
    `SELECT uuid, username FROM ${quotedSchema(schema)}.users WHERE ${byUuid ? 'uuid = ?' : 'lower(username) = ?'} AND NOT is_deleted`,
    [byUuid ? ref : ref.toLowerCase()],
  );
  if (!user) throw notFound({ message: `User "${ref}" not found.` });
  return user;
}

export async function listAssignments(ctx: ServiceContext, appSlug: string, name: string, rawQuery: unknown = {}): Promise<Page<AppRoleAssignmentView>> {
  const { schema, app, role } = await roleForAssignments(ctx, 'read', appSlug, name);
  await authorizeSiteSubject(ctx, 'read', 'AppRoleAssignment', { schema, app: app.slug, role: role.name });
  const query = validate(AppRoleAssignmentListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const where = ['a.role_id = ?'];
  const params: unknown[] = [role.id];
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    where.push('(u.username ILIKE ? OR u.email ILIKE ?)');
    params.push(like, like);
  }
  const q = quotedSchema(schema);
  const from = `FROM ${q}.app_role_assignments a JOIN ${q}.users u ON u.uuid = a.user_uuid WHERE ${where.join(' AND ')}`;
  const count = await countOf(ctx.em, `SELECT count(*) AS n ${from}`, params);
  const page = resolvePage(pageReq, count);
  const found = await rows<AssignmentRow>(ctx.em, `SELECT u.uuid, u.username, u.email, a.created_at AS assigned_at ${from} ORDER BY u.username, u.uuid LIMIT ? OFFSET ?`, [
    ...params, page.pageSize, pageOffset(page),
  ]);
  return { ...page, count, results: found.map(assignmentView) };
}

/** Idempotent: `created` is false when the user held the role already. */
export async function assignRole(ctx: ServiceContext, appSlug: string, name: string, rawInput: unknown): Promise<{ created: boolean; assignment: AppRoleAssignmentView }> {
  const input = validate(AppRoleAssign, rawInput);
  const { schema, app, role } = await roleForAssignments(ctx, 'create', appSlug, name);
  const user = await findUser(ctx.em, schema, input.user);
  await authorizeSiteSubject(ctx, 'create', 'AppRoleAssignment', { schema, app: app.slug, role: role.name, user: user.uuid });
  const q = quotedSchema(schema);
  let inserted: unknown[];
  try {
    inserted = await rows(ctx.em, `INSERT INTO ${q}.app_role_assignments (role_id, user_uuid, created_by) VALUES (?, ?, ?) ON CONFLICT DO NOTHING RETURNING role_id`, [
      role.id, user.uuid, actorUuid(ctx),
    ]);
  } catch (err) {
    // The role (or the user) deleted meanwhile.
    if (pgError(err).code === '23503') throw roleNotFound(name, app);
    throw err;
  }
  const row = await firstRow<AssignmentRow>(ctx.em, `${assignmentSelect(q)} WHERE a.role_id = ? AND a.user_uuid = ?`, [role.id, user.uuid]);
  if (!row) throw roleNotFound(name, app);
  return { created: inserted.length > 0, assignment: assignmentView(row) };
}

export async function unassignRole(ctx: ServiceContext, appSlug: string, name: string, userRef: string): Promise<void> {
  const { schema, app, role } = await roleForAssignments(ctx, 'delete', appSlug, name);
  const q = quotedSchema(schema);
  const byUuid = isUuid(userRef);
  const held = await firstRow<{ uuid: string; username: string }>(
    ctx.em,
    `SELECT u.uuid, u.username FROM ${q}.app_role_assignments a JOIN ${q}.users u ON u.uuid = a.user_uuid
      WHERE a.role_id = ? AND ${byUuid ? 'u.uuid = ?' : 'lower(u.username) = ?'}`,
    [role.id, byUuid ? userRef : userRef.toLowerCase()],
  );
  if (!held) throw notFound({ message: `User "${userRef}" does not hold role "${role.name}" in app "${app.slug}".` });
  await authorizeSiteSubject(ctx, 'delete', 'AppRoleAssignment', { schema, app: app.slug, role: role.name, user: held.uuid });
  await ctx.em.execute(`DELETE FROM ${q}.app_role_assignments WHERE role_id = ? AND user_uuid = ?`, [role.id, held.uuid]);
}
