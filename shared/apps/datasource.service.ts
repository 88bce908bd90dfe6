// Data sources of an app ("<schema>".data_sources): how its tables are stored. Decided on the
// DataSource subject (with its app): reads by any signed-in user of the site, writes by its
// administrators. `{ds}` is a slug or an id. A data
// source with tables (active or not) cannot be deleted (400); deletion is permanent.
import type { EntityManager } from '@mikro-orm/postgresql';
import { insertWithUniqueSlug, slugify, uniqueViolation } from '../common/slug.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { validate } from '../common/validation.ts';
import { actorUuid, type ServiceContext } from '../context.ts';
import { DomainError, fieldError, notFound } from '../errors.ts';
import { countOf, firstRow, iso, rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import type { Action } from '../auth/actor.ts';
import { activeApp, type ActiveApp } from './lookup.ts';
import { DataSourceCreate, DataSourceUpdate, type DataSourceStats, type DataSourceView } from './datasource.schemas.ts';

interface DsRow {
  id: number;
  app_id: number;
  app_name: string;
  app_slug: string;
  name: string;
  slug: string;
  provider_type: DataSourceView['provider_type'];
  provider_config: Record<string, unknown> | string;
  description: string;
  is_active: boolean;
  table_count: string;
  materialized_count: string;
  created_at: Date | string;
  updated_at: Date | string;
  created_by: string | null;
  modified_by: string | null;
}

const SLUG_KEY = 'data_sources_app_slug_key';

const select = (q: string) => `
  SELECT d.*, a.name AS app_name, a.slug AS app_slug,
         (SELECT count(*) FROM ${q}.data_tables t WHERE t.data_source_id = d.id AND t.is_active) AS table_count,
         (SELECT count(*) FROM ${q}.data_tables t WHERE t.data_source_id = d.id AND t.is_active AND t.is_materialized) AS materialized_count
    FROM ${q}.data_sources d JOIN ${q}.apps a ON a.id = d.app_id`;

const view = (r: DsRow): DataSourceView => ({
  id: Number(r.id),
  app: Number(r.app_id),
  app_name: r.app_name,
  app_slug: r.app_slug,
  name: r.name,
  slug: r.slug,
  provider_type: r.provider_type,
  provider_config: typeof r.provider_config === 'string' ? JSON.parse(r.provider_config) : r.provider_config,
  description: r.description,
  is_active: r.is_active,
  table_count: Number(r.table_count),
  materialized_count: Number(r.materialized_count),
  created_at: iso(r.created_at),
  updated_at: iso(r.updated_at),
  created_by: r.created_by,
  modified_by: r.modified_by,
});

/** A data source of an app by slug or id (an id only when `ref` is all digits), or 404. */
export async function findDataSource(em: EntityManager, schema: string, app: Pick<ActiveApp, 'id'>, ref: string): Promise<DsRow> {
  const byId = /^\d{1,9}$/.test(ref);
  const row = await firstRow<DsRow>(em, `${select(quotedSchema(schema))} WHERE d.app_id = ? AND ${byId ? 'd.id = ?' : 'd.slug = ?'}`, [app.id, byId ? Number(ref) : ref]);
  if (!row) throw notFound(`Data source "${ref}"`);
  return row;
}

/** The data source `ref` of the app `appSlug`, if the actor may `action` it: 404 when either is absent, 403 when denied. */
async function dataSourceFor(ctx: ServiceContext, schema: string, appSlug: string, ref: string, action: Action): Promise<{ app: ActiveApp; ds: DsRow }> {
  const app = await activeApp(ctx.em, schema, appSlug);
  const ds = await findDataSource(ctx.em, schema, app, ref);
  await authorizeSiteSubject(ctx, action, 'DataSource', { schema, app: app.slug, slug: ds.slug });
  return { app, ds };
}

const slugTaken = () => fieldError('slug', 'A data source with this slug already exists in this app.');

export async function listDataSources(ctx: ServiceContext, appSlug: string): Promise<{ data: DataSourceView[]; total: number }> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataSource');
  const app = await activeApp(ctx.em, schema, appSlug);
  await authorizeSiteSubject(ctx, 'read', 'DataSource', { schema, app: app.slug });
  const found = await rows<DsRow>(ctx.em, `${select(quotedSchema(schema))} WHERE d.app_id = ? AND d.is_active ORDER BY d.slug`, [app.id]);
  return { data: found.map(view), total: found.length };
}

export async function createDataSource(ctx: ServiceContext, appSlug: string, rawInput: unknown): Promise<DataSourceView> {
  const schema = await siteSchemaFor(ctx, 'create', 'DataSource');
  const input = validate(DataSourceCreate, rawInput);
  const app = await activeApp(ctx.em, schema, appSlug);
  await authorizeSiteSubject(ctx, 'create', 'DataSource', { schema, app: app.slug, ...(input.slug ? { slug: input.slug } : {}) });
  const q = quotedSchema(schema);
  const who = actorUuid(ctx);
  const insert = async (slug: string) =>
    ctx.em.transactional(async (tx) => {
      const [row] = await tx.execute(
        `INSERT INTO ${q}.data_sources (app_id, name, slug, provider_type, provider_config, description, created_by, modified_by) VALUES (?, ?, ?, ?, ?::jsonb, ?, ?, ?) RETURNING id`,
        [app.id, input.name, slug, input.provider_type, JSON.stringify(input.provider_config ?? {}), input.description ?? '', who, who],
      );
      return String(row.id);
    });
  let id: string;
  if (input.slug) {
    try {
      id = await insert(input.slug);
    } catch (err) {
      if (uniqueViolation(err) === SLUG_KEY) throw slugTaken();
      throw err;
    }
  } else {
    const taken = async (b: string) => (await rows<{ slug: string }>(ctx.em, `SELECT slug FROM ${q}.data_sources WHERE app_id = ? AND (slug = ? OR slug LIKE ?)`, [app.id, b, `${b}-%`])).map((r) => r.slug);
    id = await insertWithUniqueSlug(slugify(input.name, 90) || 'datasource', SLUG_KEY, taken, insert);
  }
  return view(await findDataSource(ctx.em, schema, app, id));
}

export async function getDataSource(ctx: ServiceContext, appSlug: string, ref: string): Promise<DataSourceView> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataSource');
  return view((await dataSourceFor(ctx, schema, appSlug, ref, 'read')).ds);
}

export async function updateDataSource(ctx: ServiceContext, appSlug: string, ref: string, rawInput: unknown): Promise<DataSourceView> {
  const schema = await siteSchemaFor(ctx, 'update', 'DataSource');
  const input = validate(DataSourceUpdate, rawInput);
  const { app, ds } = await dataSourceFor(ctx, schema, appSlug, ref, 'update');
  dropReadOnly(DataSourceUpdate, input, view(ds));
  try {
    await ctx.em.execute(
      `UPDATE ${quotedSchema(schema)}.data_sources
          SET name = coalesce(?, name), slug = coalesce(?, slug), provider_config = coalesce(?::jsonb, provider_config),
              description = coalesce(?, description), is_active = coalesce(?, is_active), modified_by = ?, updated_at = now()
        WHERE id = ?`,
      [input.name ?? null, input.slug ?? null, input.provider_config ? JSON.stringify(input.provider_config) : null, input.description ?? null,
        input.is_active ?? null, actorUuid(ctx), ds.id],
    );
  } catch (err) {
    if (uniqueViolation(err) === SLUG_KEY) throw slugTaken();
    throw err;
  }
  return view(await findDataSource(ctx.em, schema, app, String(ds.id)));
}

export async function deleteDataSource(ctx: ServiceContext, appSlug: string, ref: string): Promise<void> {
  const schema = await siteSchemaFor(ctx, 'delete', 'DataSource');
  const { ds } = await dataSourceFor(ctx, schema, appSlug, ref, 'delete');
  const q = quotedSchema(schema);
  const tables = await countOf(ctx.em, `SELECT count(*) AS n FROM ${q}.data_tables WHERE data_source_id = ?`, [ds.id]);
  if (tables) throw new DomainError('BAD_REQUEST', `Data source "${ds.slug}" still has ${tables} table(s): delete them first.`, { detail: 'Data source has tables.' });
  try {
    await ctx.em.execute(`DELETE FROM ${q}.data_sources WHERE id = ?`, [ds.id]);
  } catch (err) {
    // A table created meanwhile (ON DELETE RESTRICT).
    if ((err as { code?: string }).code === '23503' || /foreign key/i.test(String(err))) throw new DomainError('BAD_REQUEST', `Data source "${ds.slug}" still has tables: delete them first.`);
    throw err;
  }
}

export async function dataSourceStats(ctx: ServiceContext, appSlug: string, ref: string): Promise<DataSourceStats> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataSource');
  const { ds } = await dataSourceFor(ctx, schema, appSlug, ref, 'read');
  const total = Number(ds.table_count);
  const materialized = Number(ds.materialized_count);
  return { total_tables: total, materialized_tables: materialized, unmaterialized_tables: total - materialized, provider_type: ds.provider_type, is_active: ds.is_active };
}
