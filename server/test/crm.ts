// The records suites' common setup: the fixture schemas and CSV rows, a `crm` app with data
// sources seeded straight into site schemas, and tables created and materialized through the API.
import { readFileSync } from 'node:fs';
import { csvRecords } from '../../shared/testing/fixtures-csv.ts';
import type { ProviderType } from '../../shared/data/ddl.ts';
import type { TableSchema } from '../../shared/data/table-schema.ts';
import type { TestSite } from '../../shared/testing/sites.ts';
import type { TestServer } from './helpers.ts';

export type Row = Record<string, any>;
type Api = (method: string, path: string, body?: unknown) => Promise<{ status: number; text: string }>;

export const fixture = (name: string): TableSchema => JSON.parse(readFileSync(new URL(`../../fixtures/schemas/${name}`, import.meta.url), 'utf8'));
export const fixtureRows = (table: string): Row[] => csvRecords(new URL(`../../fixtures/csv/${table}.csv`, import.meta.url), fixture(`${table}.json`));

/** App `crm` in each site with one data source per provider (slug = provider type, or `main` for a lone flat_table); the app ids. */
export async function seedCrm(s: TestServer, sites: TestSite[], providers: ProviderType[] = ['flat_table']): Promise<number[]> {
  const sql = (text: string, params: unknown[] = []) => s.handle.db.orm.em.fork().getConnection().execute(text, params);
  const ids: number[] = [];
  for (const site of sites) {
    const [app] = await sql(`INSERT INTO "${site.schema}".apps (name, slug) VALUES ('CRM', 'crm') RETURNING id`);
    await sql(`INSERT INTO "${site.schema}".app_settings (app_id, display_name) VALUES (?, 'CRM')`, [app.id]);
    for (const p of providers) {
      const slug = providers.length === 1 && p === 'flat_table' ? 'main' : p;
      await sql(`INSERT INTO "${site.schema}".data_sources (app_id, name, slug, provider_type) VALUES (?, ?, ?, ?)`, [app.id, slug, slug, p]);
    }
    ids.push(app.id);
  }
  return ids;
}

/** Creates and materializes tables `[data source, name, schema]` in order, through the API. */
export async function createTables(api: Api, tables: [string, string, TableSchema][]): Promise<void> {
  for (const [ds, name, schema] of tables) {
    const res = await api('POST', `/api/apps/crm/datasources/${ds}/datatables/`, { name, json_schema: schema });
    if (res.status !== 201) throw new Error(res.text);
    const m = await api('POST', `/api/apps/crm/datatables/${name}/materialize/`);
    if (m.status !== 200) throw new Error(m.text);
  }
}

/** A policy on `table` of app `crm` (through the API, as an administrator): every site user reads its records, only administrators write them. */
export async function adminsWrite(api: Api, table: string): Promise<void> {
  const res = await api('PUT', '/api/apps/crm/policies/', {
    resourcePolicy: {
      resource: `datatable:${table}`,
      version: 'default',
      rules: [
        { actions: ['read'], effect: 'EFFECT_ALLOW', roles: ['*'] },
        { actions: ['*'], effect: 'EFFECT_ALLOW', roles: ['admin'] },
      ],
    },
  });
  if (res.status !== 200 && res.status !== 201) throw new Error(res.text);
}
