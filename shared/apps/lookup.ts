// Resolving the `{app_slug}` of a path: the one lookup of an active app that the settings,
// data tables and records need (id, name, slug: no counts, no settings), with the 404 of the apps API.
import type { EntityManager } from '@mikro-orm/postgresql';
import { firstRow } from '../db/sql.ts';
import { notFound } from '../errors.ts';
import { quotedSchema } from '../tenancy/schema.ts';

/** An app as other modules address it. */
export interface ActiveApp {
  id: number;
  name: string;
  slug: string;
}

export const appNotFound = (slug: string) => notFound(`App "${slug}"`);

/** The active app with this slug; 404 for an unknown or soft-deleted one (as in the apps API). */
export async function activeApp(em: EntityManager, schema: string, slug: string): Promise<ActiveApp> {
  const app = await firstRow<ActiveApp>(em, `SELECT id, name, slug FROM ${quotedSchema(schema)}.apps WHERE slug = ? AND is_active`, [slug]);
  if (!app) throw appNotFound(slug);
  return app;
}
