// Organizations: list (what the caller may view), create (the caller becomes the owner),
// get, update, hard delete with its cascade, and the caller's privileges on one.
import type { FilterQuery } from '@mikro-orm/core';
import type { EntityManager } from '@mikro-orm/postgresql';
import { accessibleWhere, authorize } from '../auth/actor.ts';
import { boolFilter, likeEscape, ordering } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { insertWithUniqueSlug, isUuid, slugify, uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import type { QuotaConfig } from '../config.ts';
import { actorUuid, type ServiceContext } from '../context.ts';
import { checkQuota, exemptFromQuotas } from '../common/quota.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { fieldError } from '../errors.ts';
import { abilityWithGrants, effectivePermissions } from '../permissions/grants.ts';
import { afterCommit, dropSite, type AfterCommit } from '../sites/site.lifecycle.ts';
import { assertPlatform, organizationFor } from './lookup.ts';
import { Member, Organization, type OrganizationEntity } from './organization.entity.ts';
import { OrganizationCreate, OrganizationListQuery, OrganizationUpdate, type OrganizationView, type Privileges } from './organization.schemas.ts';

const SLUG_CONSTRAINT = 'organizations_slug_key';
const slugTaken = () => fieldError('slug', 'An organization with that slug already exists.');

export function toOrganizationView(o: OrganizationEntity): OrganizationView {
  return {
    uuid: o.uuid,
    name: o.name,
    slug: o.slug,
    is_active: o.is_active,
    created: new Date(o.created).toISOString(),
    modified: new Date(o.modified).toISOString(),
  };
}

const ORDERING_FIELDS = { name: 'name', slug: 'slug', created: 'created', modified: 'modified' };

export async function listOrganizations(ctx: ServiceContext, rawQuery: unknown): Promise<Page<OrganizationView>> {
  assertPlatform(ctx);
  const query = validate(OrganizationListQuery, rawQuery, 'query');
  const pageReq = parsePageRequest(query);
  const orderBy = { ...ordering(query.ordering, ORDERING_FIELDS, 'name'), uuid: 'asc' as const };
  const visible = accessibleWhere(await abilityWithGrants(ctx), 'view_organization', 'Organization');
  // No rule at all: the caller belongs to no organization. An empty list, not a 403.
  if (visible === null) return { ...resolvePage(pageReq, 0), count: 0, results: [] };
  const and: FilterQuery<OrganizationEntity>[] = [visible as FilterQuery<OrganizationEntity>];
  const isActive = boolFilter(query.is_active, true);
  if (isActive !== undefined) and.push({ is_active: isActive });
  if (query.search) {
    const like = `%${likeEscape(query.search)}%`;
    and.push({ $or: [{ name: { $ilike: like } }, { slug: { $ilike: like } }] });
  }
  const where = { $and: and } as FilterQuery<OrganizationEntity>;
  const count = await ctx.em.count(Organization, where);
  const page = resolvePage(pageReq, count);
  const rows = await ctx.em.find(Organization, where, { orderBy, limit: page.pageSize, offset: pageOffset(page) });
  return { ...page, count, results: rows.map(toOrganizationView) };
}

/** A slug must not read as a UUID: `{org}` accepts both, and a UUID is looked up as one. */
function checkSlug(slug: string): void {
  if (isUuid(slug)) throw fieldError('slug', 'A slug cannot have the form of a UUID.');
}

export async function createOrganization(ctx: ServiceContext, rawInput: unknown, quotas: Pick<QuotaConfig, 'organizationsPerUser'>): Promise<OrganizationView> {
  assertPlatform(ctx);
  const input = validate(OrganizationCreate, rawInput);
  authorize(ctx.ability, 'create', 'Organization');
  const name = input.name.trim();
  if (!name) throw fieldError('name', 'This field may not be blank.');
  const ownerUuid = actorUuid(ctx);
  const limited = !exemptFromQuotas(ctx.actor);
  // Organization and owner membership commit together; a failed attempt leaves nothing.
  const insert = (slug: string) =>
    ctx.em.fork().transactional(async (tx) => {
      if (ownerUuid && limited) {
        // The owner's row lock serialises their concurrent creates; the count is a statement of its
        // own, so it sees what the create that held the lock before committed.
        await tx.execute('SELECT 1 FROM public.users WHERE uuid = ? FOR UPDATE', [ownerUuid]);
        const [{ n }] = (await tx.execute('SELECT count(*)::int AS n FROM public.organization_members WHERE user_uuid = ? AND is_owner', [ownerUuid])) as { n: number }[];
        checkQuota(n, quotas.organizationsPerUser, 'organizations owned per user');
      }
      const org = tx.create(Organization, { name, slug });
      await tx.flush();
      if (ownerUuid) {
        tx.create(Member, { organization_uuid: org.uuid, user_uuid: ownerUuid, is_owner: true, is_admin: true });
        await tx.flush();
      }
      return org;
    });
  try {
    if (input.slug) {
      checkSlug(input.slug);
      if (await ctx.em.count(Organization, { slug: input.slug })) throw slugTaken();
      return toOrganizationView(await insert(input.slug));
    }
    let base = slugify(name, 50) || 'organization';
    if (isUuid(base)) base = `org-${base}`;
    const taken = async (b: string) =>
      (await ctx.em.fork().find(Organization, { $or: [{ slug: b }, { slug: { $like: `${likeEscape(b)}-%` } }] }, { fields: ['slug'] })).map((o) => o.slug);
    return toOrganizationView(await insertWithUniqueSlug(base, SLUG_CONSTRAINT, taken, insert));
  } catch (err) {
    if (uniqueViolation(err) === SLUG_CONSTRAINT) throw slugTaken();
    throw err;
  }
}

export async function getOrganization(ctx: ServiceContext, ref: string): Promise<OrganizationView> {
  return toOrganizationView(await organizationFor(ctx, ref, 'view_organization'));
}

export async function updateOrganization(ctx: ServiceContext, ref: string, rawInput: unknown): Promise<OrganizationView> {
  const input = validate(OrganizationUpdate, rawInput);
  const org = await organizationFor(ctx, ref, 'change_organization');
  dropReadOnly(OrganizationUpdate, input, toOrganizationView(org));
  if (input.name !== undefined) {
    const name = input.name.trim();
    if (!name) throw fieldError('name', 'This field may not be blank.');
    org.name = name;
  }
  if (input.slug !== undefined && input.slug !== org.slug) {
    checkSlug(input.slug);
    if (await ctx.em.count(Organization, { slug: input.slug, uuid: { $ne: org.uuid } })) throw slugTaken();
    org.slug = input.slug;
  }
  if (input.is_active !== undefined) org.is_active = input.is_active;
  try {
    await ctx.em.flush();
  } catch (err) {
    if (uniqueViolation(err) === SLUG_CONSTRAINT) throw slugTaken();
    throw err;
  }
  return toOrganizationView(org);
}

/**
 * Hard delete, in one transaction: every site of the organization (schema, domains, grants),
 * the grants on the organization, its memberships and invitations (foreign-key cascade), and
 * a soft delete of each member who belongs to no other organization — except the acting user
 * and superusers, who keep their accounts.
 */
export async function deleteOrganization(ctx: ServiceContext, ref: string): Promise<void> {
  const org = await organizationFor(ctx, ref, 'delete_organization');
  const dropped: AfterCommit[] = [];
  await ctx.em.transactional(async (tx) => {
    const em = tx as EntityManager;
    // Lock the organization: a concurrent site create or member add waits, then finds it gone.
    const locked = await em.execute('SELECT uuid FROM public.organizations WHERE uuid = ? FOR UPDATE', [org.uuid]);
    if (!locked.length) return; // deleted meanwhile
    const sites = (await em.execute('SELECT uuid, schema_name FROM public.sites WHERE organization_uuid = ? ORDER BY created_at FOR UPDATE', [
      org.uuid,
    ])) as { uuid: string; schema_name: string }[];
    for (const site of sites) dropped.push(await dropSite(em, site));
    await em.execute(`DELETE FROM public.object_permissions WHERE object_type = 'organization' AND object_uuid = ?`, [org.uuid]);
    await em.execute(
      `UPDATE public.users u
          SET is_deleted = true, is_active = false, token_generation = u.token_generation + 1, modified = now()
        WHERE u.uuid IN (SELECT m.user_uuid FROM public.organization_members m WHERE m.organization_uuid = ?)
          AND NOT EXISTS (SELECT 1 FROM public.organization_members o WHERE o.user_uuid = u.uuid AND o.organization_uuid <> ?)
          AND NOT u.is_superuser AND NOT u.is_deleted AND u.uuid IS DISTINCT FROM ?`,
      [org.uuid, org.uuid, actorUuid(ctx)],
    );
    await em.execute('DELETE FROM public.organizations WHERE uuid = ?', [org.uuid]);
  });
  await afterCommit(dropped);
  ctx.em.clear();
}

/** The caller's effective permissions on the organization, group-inherited ones included. */
export async function organizationPrivileges(ctx: ServiceContext, ref: string): Promise<Privileges> {
  const org = await organizationFor(ctx, ref, 'view_organization');
  return { permissions: effectivePermissions(ctx, 'organization', org.uuid) };
}
