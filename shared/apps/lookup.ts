// Resolving the `{app_slug}` of a path in one place, with the 404 of the apps API: the whole app
// with the check on it (the apps API), and the light lookup of an active app (id, name, slug: no
// counts) that settings, data sources, data tables and records need.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Action } from '../auth/actor.ts';
import type { ServiceContext } from '../context.ts';
import { firstRow, preparedRows } from '../db/sql.ts';
import { notFound } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject } from '../tenancy/site-access.ts';

export interface AppRow {
  id: number;
  name: string;
  slug: string;
  description: string;
  is_active: boolean;
  created_at: Date | string;
  updated_at: Date | string;
  created_by: string | null;
  modified_by: string | null;
  table_count: string | number;
  datasource_count: string | number;
}

export const appNotFound = (slug: string) => notFound(`App "${slug}"`);

export const appSelect = (q: string) => `
  SELECT a.id, a.name, a.slug, a.description, a.is_active, a.created_at, a.updated_at, a.created_by, a.modified_by,
         (SELECT count(*) FROM ${q}.data_tables t WHERE t.app_id = a.id AND t.is_active) AS table_count,
         (SELECT count(*) FROM ${q}.data_sources d WHERE d.app_id = a.id AND d.is_active) AS datasource_count
    FROM ${q}.apps a`;

/** An app by slug; only an active one unless `any`. */
export async function findApp(em: EntityManager, schema: string, slug: string, any = false): Promise<AppRow | undefined> {
  return firstRow<AppRow>(em, `${appSelect(quotedSchema(schema))} WHERE a.slug = ?${any ? '' : ' AND a.is_active'}`, [slug]);
}

/**
 * The app of the site named by `slug` (an active one unless `any`), if the actor may `action`
 * it: 404 when there is none, 403 when denied. After siteSchemaFor, the check before the lookup.
 */
export async function appFor(ctx: ServiceContext, schema: string, slug: string, action: Action, options: { any?: boolean } = {}): Promise<AppRow> {
  const app = await findApp(ctx.em, schema, slug, options.any);
  if (!app) throw appNotFound(slug);
  await authorizeSiteSubject(ctx, action, 'App', { schema, slug: app.slug });
  return app;
}

/** An app as other modules address it. */
export interface ActiveApp {
  id: number;
  name: string;
  slug: string;
}

/** The active app with this slug; 404 for an unknown or soft-deleted one (as in the apps API). */
export async function activeApp(em: EntityManager, schema: string, slug: string): Promise<ActiveApp> {
  const [app] = await preparedRows<ActiveApp>(em, `SELECT id, name, slug FROM ${quotedSchema(schema)}.apps WHERE slug = ? AND is_active`, [slug]);
  if (!app) throw appNotFound(slug);
  return app;
}

/** The active app (id, name, slug), if the actor may `action` it: 404 when there is none, 403 when denied. */
export async function activeAppFor(ctx: ServiceContext, schema: string, slug: string, action: Action): Promise<ActiveApp> {
  const app = await activeApp(ctx.em, schema, slug);
  await authorizeSiteSubject(ctx, action, 'App', { schema, slug: app.slug });
  return app;
}
