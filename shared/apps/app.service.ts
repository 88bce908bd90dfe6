// Apps of a site ("<schema>".apps) with their settings, data sources and tables. Decided on
// the App subject (auth/actor.ts): reads by any signed-in user of the site, writes by its
// administrators (superusers, staff, the CLI's system actor). Inactive (soft-deleted) apps
// answer 404 everywhere but the list (?is_active=false) and restore. Created_by/modified_by are site user UUIDs (null for the CLI).
import type { EntityManager } from '@mikro-orm/postgresql';
import { insertWithUniqueSlug, slugify } from '../common/slug.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { validate } from '../common/validation.ts';
import { actorUuid, type ServiceContext } from '../context.ts';
import { countOf, iso, rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { siteSchemaFor } from '../tenancy/site-access.ts';
import { packageInfo } from '../packages/export.service.ts';
import { checkSettings, insertSettings, settingsDetail, settingsLight, settingsOf } from './app-settings.service.ts';
import type { SettingsPatch } from './app-settings.schemas.ts';
import { appFor, appSelect, findApp, type AppRow } from './lookup.ts';
import { AppCreate, AppListQuery, AppUpdate, type AppDetail, type AppListItem, type AppStats } from './app.schemas.ts';

const base = (r: AppRow) => ({
  id: Number(r.id),
  name: r.name,
  slug: r.slug,
  description: r.description,
  is_active: r.is_active,
  table_count: Number(r.table_count),
  datasource_count: Number(r.datasource_count),
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
  created_by: r.created_by,
  modified_by: r.modified_by,
});

async function detail(em: EntityManager, schema: string, app: AppRow, baseUrl: string): Promise<AppDetail> {
  const q = quotedSchema(schema);
  const tables = await rows<{ id: number; name: string; provider_type: string; is_materialized: boolean; physical_table_name: string }>(
    em,
    `SELECT t.id, t.name, d.provider_type, t.is_materialized, t.physical_table_name FROM ${q}.data_tables t JOIN ${q}.data_sources d ON d.id = t.data_source_id
      WHERE t.app_id = ? AND t.is_active ORDER BY t.name`,
    [app.id],
  );
  const sources = await rows<{ id: number; name: string; slug: string; provider_type: string; table_count: string }>(
    em,
    `SELECT d.id, d.name, d.slug, d.provider_type, (SELECT count(*) FROM ${q}.data_tables t WHERE t.data_source_id = d.id AND t.is_active) AS table_count
       FROM ${q}.data_sources d WHERE d.app_id = ? AND d.is_active ORDER BY d.slug`,
    [app.id],
  );
  return {
    ...base(app),
    tables: tables.map((t) => ({ ...t, id: Number(t.id) })),
    datasources: sources.map((d) => ({ ...d, id: Number(d.id), table_count: Number(d.table_count) })),
    settings: settingsDetail(await settingsOf(em, schema, app.id), app.slug, baseUrl),
    package_info: await packageInfo(em, schema, app, baseUrl),
  };
}

export async function listApps(ctx: ServiceContext, rawQuery: unknown = {}, baseUrl = ''): Promise<{ data: AppListItem[]; total: number }> {
  const schema = await siteSchemaFor(ctx, 'read', 'App');
  const { is_active = 'true' } = validate(AppListQuery, rawQuery, 'query');
  const q = quotedSchema(schema);
  const where = is_active === 'all' || is_active === '*' ? '' : is_active === 'true' || is_active === '1' ? ' WHERE a.is_active' : ' WHERE NOT a.is_active';
  const found = await rows<AppRow & { display_name: string; category: 'analytics'; icon_path: string | null; primary_color: string }>(
    ctx.em,
    `SELECT x.*, s.display_name, s.category, s.icon_path, s.primary_color FROM (${appSelect(q)}${where}) x JOIN ${q}.app_settings s ON s.app_id = x.id ORDER BY x.name, x.id`,
  );
  return { data: found.map((r) => ({ ...base(r), settings: settingsLight(r, r.slug, baseUrl) })), total: found.length };
}

/** Slugs no app gets: they name routes beside `/api/apps/{app_slug}/` (`POST /api/apps/imports/`, Part 2 §8). An app named so gets `-2`. */
const RESERVED_APP_SLUGS = ['imports'];

export async function createApp(ctx: ServiceContext, rawInput: unknown, baseUrl = ''): Promise<AppDetail> {
  const schema = await siteSchemaFor(ctx, 'create', 'App');
  const input = validate(AppCreate, rawInput);
  const settings = checkSettings(input.settings ?? {});
  const q = quotedSchema(schema);
  const who = actorUuid(ctx);
  const slug = await insertWithUniqueSlug(
    slugify(input.name, 90) || 'app',
    'apps_slug_key',
    async (b) => [...RESERVED_APP_SLUGS.filter((r) => r === b), ...(await rows<{ slug: string }>(ctx.em, `SELECT slug FROM ${q}.apps WHERE slug = ? OR slug LIKE ?`, [b, `${b}-%`])).map((r) => r.slug)],
    (candidate) => ctx.em.transactional(async (tx) => insertApp(tx as EntityManager, schema, { ...input, slug: candidate }, settings, who)),
  );
  return detail(ctx.em, schema, (await findApp(ctx.em, schema, slug))!, baseUrl);
}

/** Inserts an app with its settings row (inside the caller's transaction; an import gives the package's slug); the slug. */
export async function insertApp(tx: EntityManager, schema: string, app: { name: string; slug: string; description?: string }, settings: SettingsPatch, who: string | null): Promise<string> {
  const [row] = await tx.execute(
    `INSERT INTO ${quotedSchema(schema)}.apps (name, slug, description, created_by, modified_by) VALUES (?, ?, ?, ?, ?) RETURNING id`,
    [app.name, app.slug, app.description ?? '', who, who],
  );
  await insertSettings(tx, schema, Number(row.id), app.name, settings);
  return app.slug;
}

export async function getApp(ctx: ServiceContext, slug: string, baseUrl = ''): Promise<AppDetail> {
  const schema = await siteSchemaFor(ctx, 'read', 'App');
  return detail(ctx.em, schema, await appFor(ctx, schema, slug, 'read'), baseUrl);
}

export async function updateApp(ctx: ServiceContext, slug: string, rawInput: unknown, baseUrl = ''): Promise<AppDetail> {
  const schema = await siteSchemaFor(ctx, 'update', 'App');
  const input = validate(AppUpdate, rawInput);
  const app = await appFor(ctx, schema, slug, 'update');
  dropReadOnly(AppUpdate, input, await detail(ctx.em, schema, app, baseUrl));
  await ctx.em.execute(
    `UPDATE ${quotedSchema(schema)}.apps SET name = coalesce(?, name), description = coalesce(?, description), modified_by = ?, updated_at = now() WHERE id = ?`,
    [input.name ?? null, input.description ?? null, actorUuid(ctx), app.id],
  );
  return detail(ctx.em, schema, (await findApp(ctx.em, schema, slug))!, baseUrl);
}

/** Soft delete: the app, its data sources and its tables become inactive (one transaction). */
export async function deleteApp(ctx: ServiceContext, slug: string): Promise<void> {
  const schema = await siteSchemaFor(ctx, 'delete', 'App');
  const app = await appFor(ctx, schema, slug, 'delete');
  await setActive(ctx, schema, app.id, false);
}

/** Reactivates an app (active or not) with the data sources and tables its delete deactivated. */
export async function restoreApp(ctx: ServiceContext, slug: string): Promise<void> {
  const schema = await siteSchemaFor(ctx, 'update', 'App');
  const app = await appFor(ctx, schema, slug, 'update', { any: true });
  await setActive(ctx, schema, app.id, true);
}

/**
 * Delete deactivates the app and its active data sources and tables, marking those it touched
 * (`deactivated_with_app`); restore reactivates the app and exactly the marked ones, so what was
 * inactive before the delete stays inactive.
 */
async function setActive(ctx: ServiceContext, schema: string, appId: number, active: boolean): Promise<void> {
  const q = quotedSchema(schema);
  const children = active ? 'SET is_active = true, deactivated_with_app = false, updated_at = now() WHERE app_id = ? AND deactivated_with_app'
    : 'SET is_active = false, deactivated_with_app = true, updated_at = now() WHERE app_id = ? AND is_active';
  await ctx.em.transactional(async (tx) => {
    await tx.execute(`UPDATE ${q}.apps SET is_active = ?, modified_by = ?, updated_at = now() WHERE id = ?`, [active, actorUuid(ctx), appId]);
    await tx.execute(`UPDATE ${q}.data_sources ${children}`, [appId]);
    await tx.execute(`UPDATE ${q}.data_tables ${children}`, [appId]);
  });
}

export async function appStats(ctx: ServiceContext, slug: string): Promise<AppStats> {
  const schema = await siteSchemaFor(ctx, 'read', 'App');
  const app = await appFor(ctx, schema, slug, 'read');
  const q = quotedSchema(schema);
  const sources = await rows<{ name: string; slug: string; provider_type: string; total_tables: string; materialized_tables: string }>(
    ctx.em,
    `SELECT d.name, d.slug, d.provider_type,
            count(t.id) AS total_tables, count(t.id) FILTER (WHERE t.is_materialized) AS materialized_tables
       FROM ${q}.data_sources d LEFT JOIN ${q}.data_tables t ON t.data_source_id = d.id AND t.is_active
      WHERE d.app_id = ? AND d.is_active GROUP BY d.id ORDER BY d.slug`,
    [app.id],
  );
  const total = await countOf(ctx.em, `SELECT count(*) AS n FROM ${q}.data_tables WHERE app_id = ? AND is_active`, [app.id]);
  const materialized = await countOf(ctx.em, `SELECT count(*) AS n FROM ${q}.data_tables WHERE app_id = ? AND is_active AND is_materialized`, [app.id]);
  return {
    app_name: app.name,
    app_slug: app.slug,
    total_datasources: sources.length,
    total_tables: total,
    materialized_tables: materialized,
    unmaterialized_tables: total - materialized,
    datasources: sources.map((d) => ({ name: d.name, slug: d.slug, provider_type: d.provider_type, total_tables: Number(d.total_tables), materialized_tables: Number(d.materialized_tables) })),
  };
}
