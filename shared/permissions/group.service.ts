// Groups: named sets of permissions that members receive through `member_groups`. Every
// signed-in user may read them (organization admins assign them); superusers and staff
// create, change and delete them.
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { authorize } from '../auth/actor.ts';
import { likeEscape, ordering } from '../common/filters.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { fieldError, notFound } from '../errors.ts';
import { assertPlatform } from '../organizations/lookup.ts';
import { GroupCreate, GroupListQuery, GroupUpdate, type GroupView } from './group.schemas.ts';
import { Group, type GroupEntity } from './permission.entity.ts';
import { parseId, permissionIds } from './permission.service.ts';

const nameTaken = () => fieldError('name', 'A group with that name already exists.');

/** The group bodies, with their permission codenames in catalogue order (one query). */
async function groupViews(em: EntityManager, groups: GroupEntity[]): Promise<GroupView[]> {
  if (!groups.length) return [];
  const rows = (await em.execute(
    'SELECT gp.group_id, p.codename FROM public.group_permissions gp JOIN public.permissions p ON p.id = gp.permission_id WHERE gp.group_id IN (?) ORDER BY p.id',
    [groups.map((g) => g.id)],
  )) as { group_id: number; codename: string }[];
  return groups.map((g) => ({ id: g.id, name: g.name, permissions: rows.filter((r) => r.group_id === g.id).map((r) => r.codename) }));
}

async function groupFor(ctx: ServiceContext, ref: string): Promise<GroupEntity> {
  assertPlatform(ctx);
  authorize(ctx.ability, 'read', 'Group');
  const group = await ctx.em.findOne(Group, { id: parseId(ref, 'Group') });
  if (!group) throw notFound('Group');
  return group;
}

async function nameIsTaken(em: EntityManager, name: string, exceptId?: number): Promise<boolean> {
  const [row] = (await em.execute('SELECT id FROM public.groups WHERE lower(name) = lower(?)', [name])) as { id: number }[];
  return !!row && row.id !== exceptId;
}

async function setPermissions(em: EntityManager, groupId: number, ids: number[]): Promise<void> {
  await em.execute('DELETE FROM public.group_permissions WHERE group_id = ?', [groupId]);
  if (ids.length) {
    await em.execute(`INSERT INTO public.group_permissions (group_id, permission_id) VALUES ${ids.map(() => '(?, ?)').join(', ')}`, ids.flatMap((id) => [groupId, id]));
  }
}

export async function listGroups(ctx: ServiceContext, rawQuery: unknown): Promise<Page<GroupView>> {
  assertPlatform(ctx);
  const query = validate(GroupListQuery, rawQuery, 'query');
  authorize(ctx.ability, 'read', 'Group');
  const pageReq = parsePageRequest(query);
  const orderBy = { ...ordering(query.ordering, { name: 'name', id: 'id' }, 'name'), id: 'asc' as const };
  const where = (query.search ? { name: { $ilike: `%${likeEscape(query.search)}%` } } : {}) as FilterQuery<GroupEntity>;
  const count = await ctx.em.count(Group, where);
  const page = resolvePage(pageReq, count);
  const rows = await ctx.em.find(Group, where, { orderBy, limit: page.pageSize, offset: pageOffset(page) });
  return { ...page, count, results: await groupViews(ctx.em, rows) };
}

export async function getGroup(ctx: ServiceContext, ref: string): Promise<GroupView> {
  const [view] = await groupViews(ctx.em, [await groupFor(ctx, ref)]);
  return view;
}

export async function createGroup(ctx: ServiceContext, rawInput: unknown): Promise<GroupView> {
  assertPlatform(ctx);
  const input = validate(GroupCreate, rawInput);
  authorize(ctx.ability, 'create', 'Group');
  const name = input.name.trim();
  if (!name) throw fieldError('name', 'This field may not be blank.');
  if (await nameIsTaken(ctx.em, name)) throw nameTaken();
  const ids = await permissionIds(ctx.em, input.permissions ?? [], 'permissions');
  try {
    const group = await ctx.em.fork().transactional(async (tx) => {
      const g = tx.create(Group, { name });
      await tx.flush();
      await setPermissions(tx as EntityManager, g.id, ids);
      return g;
    });
    return (await groupViews(ctx.em, [group]))[0];
  } catch (err) {
    if (uniqueViolation(err) === 'groups_name_key') throw nameTaken();
    throw err;
  }
}

export async function updateGroup(ctx: ServiceContext, ref: string, rawInput: unknown): Promise<GroupView> {
  const input = validate(GroupUpdate, rawInput);
  const group = await groupFor(ctx, ref);
  dropReadOnly(GroupUpdate, input, { id: group.id });
  authorize(ctx.ability, 'update', 'Group');
  const name = input.name?.trim();
  if (name !== undefined && !name) throw fieldError('name', 'This field may not be blank.');
  if (name !== undefined && (await nameIsTaken(ctx.em, name, group.id))) throw nameTaken();
  const ids = input.permissions ? await permissionIds(ctx.em, input.permissions, 'permissions') : undefined;
  try {
    await ctx.em.transactional(async (tx) => {
      const em = tx as EntityManager;
      if (name !== undefined) await em.execute('UPDATE public.groups SET name = ?, modified = now() WHERE id = ?', [name, group.id]);
      if (ids) await setPermissions(em, group.id, ids);
    });
  } catch (err) {
    if (uniqueViolation(err) === 'groups_name_key') throw nameTaken();
    throw err;
  }
  if (name !== undefined) group.name = name;
  return (await groupViews(ctx.em, [group]))[0];
}

/** Deletes the group; its memberships and grants go with it (foreign-key cascade). */
export async function deleteGroup(ctx: ServiceContext, ref: string): Promise<void> {
  const group = await groupFor(ctx, ref);
  authorize(ctx.ability, 'delete', 'Group');
  await ctx.em.execute('DELETE FROM public.groups WHERE id = ?', [group.id]);
}
