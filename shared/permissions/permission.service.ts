// The permission catalogue (seeded by migration 0002): readable by every signed-in user,
// so that groups and member grants can be composed.
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { likeEscape } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { validate } from '../common/validation.ts';
import type { ServiceContext } from '../context.ts';
import { fieldError, notFound } from '../errors.ts';
import { assertPlatform } from '../organizations/lookup.ts';
import { Permission, type PermissionEntity } from './permission.entity.ts';
import { PermissionListQuery, type PermissionView } from './permission.schemas.ts';

/** An integer id from a path segment; anything else names no row (404). */
export function parseId(ref: string, what: string): number {
  const id = /^\d{1,9}$/.test(ref) ? Number(ref) : NaN;
  if (!Number.isSafeInteger(id) || id < 1) throw notFound(what);
  return id;
}

export const toPermissionView = (p: PermissionEntity): PermissionView => ({ id: p.id, codename: p.codename, name: p.name, model: p.model });

export async function listPermissions(ctx: ServiceContext, rawQuery: unknown): Promise<Page<PermissionView>> {
  assertPlatform(ctx);
  const query = validate(PermissionListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const and: FilterQuery<PermissionEntity>[] = [];
  if (query.model) and.push({ model: query.model.toLowerCase() });
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    and.push({ $or: [{ codename: { $ilike: like } }, { name: { $ilike: like } }] });
  }
  const where = (and.length ? { $and: and } : {}) as FilterQuery<PermissionEntity>;
  const count = await ctx.em.count(Permission, where);
  const page = resolvePage(pageReq, count);
  const rows = await ctx.em.find(Permission, where, { orderBy: { id: 'asc' }, limit: page.pageSize, offset: pageOffset(page) });
  return { ...page, count, results: rows.map(toPermissionView) };
}

export async function getPermission(ctx: ServiceContext, ref: string): Promise<PermissionView> {
  assertPlatform(ctx);
  const perm = await ctx.em.findOne(Permission, { id: parseId(ref, 'Permission') });
  if (!perm) throw notFound('Permission');
  return toPermissionView(perm);
}

/** Codenames → permission ids, in catalogue order; an unknown codename is a 400 on `field`. */
export async function permissionIds(em: EntityManager, codenames: string[], field: string): Promise<number[]> {
  const wanted = [...new Set(codenames)];
  if (!wanted.length) return [];
  const found = await em.find(Permission, { codename: { $in: wanted } }, { orderBy: { id: 'asc' } });
  const unknown = wanted.filter((c) => !found.some((p) => p.codename === c));
  if (unknown.length) throw fieldError(field, `Unknown permission${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}.`);
  return found.map((p) => p.id);
}
