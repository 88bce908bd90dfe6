import fs from 'node:fs';
import path from 'node:path';
import { Flags } from '@oclif/core';
import type { AppDetail, AppListItem } from '../../shared/apps/app.schemas.ts';
import type { DataSourceView } from '../../shared/apps/datasource.schemas.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { DataTableListItem, DataTableView } from '../../shared/data/datatable.schemas.ts';
import type { CsvImportReport } from '../../shared/data/records.schemas.ts';
import { DomainError } from '../../shared/errors.ts';
import { path as apiPath, type ApiRequest } from '../api.ts';
import { ApiCommand } from '../base.ts';
import { bytes, plural, progress, readJson, siteFlag, tableNameOf } from '../tables.ts';
import { importCsv, reportLines } from './data.ts';

const FIXTURES = path.resolve(import.meta.dirname, '../../fixtures');

/** The demo's data sources: one per provider; a schema file `x.<provider>.json` goes to that provider's source. */
const SOURCES = [
  { slug: 'main', name: 'Main', provider_type: 'flat_table', description: 'Companies, contacts and their orders (demo).' },
  { slug: 'events', name: 'Events', provider_type: 'jsonb', description: 'Events as jsonb documents (demo).' },
  { slug: 'docs', name: 'Docs', provider_type: 'docstore', description: 'Notes in a document store (demo).' },
] as const;

export interface DemoStep {
  kind: 'app' | 'datasource' | 'table' | 'materialize' | 'import';
  name: string;
  status: 'created' | 'exists' | 'materialized' | 'imported' | 'skipped' | 'failed';
  detail?: string;
}

export interface DemoResult {
  site: string;
  app: string;
  steps: DemoStep[];
  imports: Record<string, CsvImportReport>;
}

interface SchemaFile {
  file: string;
  name: string;
  ds: string;
  schema: { description?: unknown; foreignKeys?: { reference?: { resource?: unknown } }[] };
}

/** Tables before the tables whose foreign keys name them (names outside the set ignored). */
function dependencyOrder<T extends { name: string; deps: string[] }>(items: T[]): T[] {
  const byName = new Map(items.map((i) => [i.name, i]));
  const out: T[] = [];
  const state = new Map<string, 'visiting' | 'done'>();
  const visit = (i: T) => {
    const s = state.get(i.name);
    if (s === 'done') return;
    if (s === 'visiting') throw new DomainError('BAD_REQUEST', `Foreign keys form a cycle through table "${i.name}".`);
    state.set(i.name, 'visiting');
    for (const d of i.deps) {
      const dep = byName.get(d);
      if (dep && dep !== i) visit(dep);
    }
    state.set(i.name, 'done');
    out.push(i);
  };
  for (const i of [...items].sort((a, b) => a.name.localeCompare(b.name))) visit(i);
  return out;
}

export default class DemoCommand extends ApiCommand<typeof DemoCommand> {
  static override summary = 'Load the demo data into a site: an app, its data sources and tables, CSV records.';
  static override description = `Creates what is missing, from fixtures/: the app (--app, default crm); the data sources main (flat_table), events (jsonb) and docs (docstore); a table per fixtures/schemas/*.json (x.json on main, x.jsonb.json on events, x.docstore.json on docs: companies, contacts, orders, …; events; notes), created and materialized foreign-key targets first; imports fixtures/csv/<table>.csv into each empty table that has one (companies, then contacts). What already exists is reported and left as it is, so a second run changes nothing. Progress goes to stderr; --json prints {site, app, steps, imports}.`;
  static override examples = ['<%= config.bin %> demo --site shop_prod', '<%= config.bin %> demo --site shop_prod --direct --json'];
  static override flags = {
    site: siteFlag,
    app: Flags.string({ summary: 'The app (slug) to load the demo into.', default: 'crm' }),
    fixtures: Flags.string({ summary: 'The fixtures directory (schemas/, csv/; default: the project\'s fixtures/).', hidden: true }),
  };

  private steps: DemoStep[] = [];

  private step(s: DemoStep): void {
    this.steps.push(s);
    this.log(`${s.kind} ${s.name}: ${s.status}${s.detail ? ` (${s.detail})` : ''}`);
  }

  /** A request to the site's app API (`/api/apps/<app>/<rest>`). */
  private app<B>(method: ApiRequest['method'], rest: string, more: Partial<ApiRequest> = {}): Promise<B> {
    return this.call<B>({ method, site: this.flags.site, path: apiPath`/api/apps/${this.flags.app}/` + rest, ...more });
  }

  async run(): Promise<DemoResult> {
    const { site, app } = this.flags;
    const fixtures = this.flags.fixtures ?? FIXTURES; // not a flag default: the manifest would hold this machine's path
    const schemas = this.schemaFiles(fixtures);
    const result: DemoResult = { site, app, steps: this.steps, imports: {} };

    this.info(`[1/4] App ${app} and its data sources…`);
    await this.ensureApp(site, app);
    const sources = new Map((await this.app<{ data: DataSourceView[] }>('GET', 'datasources/')).data.map((d) => [d.slug, d]));
    for (const src of SOURCES) {
      const found = sources.get(src.slug);
      if (found) {
        if (found.provider_type !== src.provider_type) {
          throw new DomainError('CONFLICT', `Data source "${src.slug}" of app "${app}" is ${found.provider_type}, the demo needs ${src.provider_type}.`);
        }
        this.step({ kind: 'datasource', name: src.slug, status: 'exists' });
        continue;
      }
      await this.app('POST', 'datasources/', { body: src });
      this.step({ kind: 'datasource', name: src.slug, status: 'created', detail: src.provider_type });
    }

    // Foreign-key targets first: a foreign key may only name a table that exists (and is materialized).
    const ordered = dependencyOrder(schemas.map((s) => ({ ...s, deps: (s.schema.foreignKeys ?? []).map((fk) => String(fk.reference?.resource ?? '')) })));
    this.info(`[2/4] Tables (${ordered.map((s) => s.name).join(', ')})…`);
    const existing = new Map((await this.app<PageEnvelope<DataTableListItem>>('GET', 'datatables/', { query: { page_size: '100' } })).results.map((t) => [t.name, t]));
    for (const s of ordered) {
      const found = existing.get(s.name);
      if (found) {
        this.step({ kind: 'table', name: s.name, status: 'exists', detail: found.datasource_slug });
        continue;
      }
      const description = typeof s.schema.description === 'string' ? s.schema.description : '';
      await this.app('POST', apiPath`datasources/${s.ds}/datatables/`, { body: { name: s.name, description, json_schema: s.schema } });
      this.step({ kind: 'table', name: s.name, status: 'created', detail: s.ds });
    }

    this.info('[3/4] Materializing…');
    for (const s of ordered) {
      if (existing.get(s.name)?.is_materialized) {
        this.step({ kind: 'materialize', name: s.name, status: 'exists' });
        continue;
      }
      const body = await this.app<{ data: DataTableView }>('POST', apiPath`datatables/${s.name}/materialize/`);
      this.step({ kind: 'materialize', name: s.name, status: 'materialized', detail: body.data.physical_table_name });
    }

    const csvs = ordered.map((s) => ({ name: s.name, file: path.join(fixtures, 'csv', `${s.name}.csv`) })).filter((c) => fs.existsSync(c.file));
    this.info(`[4/4] Records (${csvs.map((c) => path.basename(c.file)).join(', ') || 'none'})…`);
    for (const c of csvs) {
      const page = await this.app<{ total: number }>('GET', apiPath`datatables/${c.name}/data/`, { query: { page_size: '1' } });
      if (page.total > 0) {
        this.step({ kind: 'import', name: c.name, status: 'skipped', detail: `already holds ${plural(page.total, 'record')}` });
        continue;
      }
      const size = fs.statSync(c.file).size;
      this.info(`  importing ${path.basename(c.file)} (${bytes(size)}) into ${c.name}…`);
      const tick = progress((line) => this.info(line));
      const onSent = (n: number) => tick(() => `  ${bytes(n)} of ${bytes(size)} sent…`);
      const report = await importCsv(await this.api(), { site, app, table: c.name }, c.file, onSent, { dry_run: 'false' });
      result.imports[c.name] = report;
      if (report.failed > 0) {
        process.exitCode = 1;
        this.step({ kind: 'import', name: c.name, status: 'failed', detail: reportLines(report)[0] });
        for (const line of reportLines(report).slice(1)) this.info(line);
      } else {
        this.step({ kind: 'import', name: c.name, status: 'imported', detail: `${plural(report.created, 'record')}` });
      }
    }
    this.info('Done.');
    return result;
  }

  private async ensureApp(site: string, app: string): Promise<void> {
    const apps = await this.call<{ data: AppListItem[] }>({ method: 'GET', site, path: '/api/apps/', query: { is_active: 'all' } });
    const found = apps.data.find((a) => a.slug === app);
    if (found && !found.is_active) throw new DomainError('CONFLICT', `App "${app}" is deleted: run \`platform app restore ${app} --site ${site}\` first.`);
    if (found) {
      this.step({ kind: 'app', name: app, status: 'exists' });
      return;
    }
    const body = { name: app === 'crm' ? 'CRM' : app, description: 'Demo: companies, contacts, orders, events and notes.' };
    const created = await this.call<{ data: AppDetail }>({ method: 'POST', site, path: '/api/apps/', body });
    if (created.data.slug !== app) {
      throw new DomainError('BAD_REQUEST', `The app was created as "${created.data.slug}", not "${app}": give --app a slug made of lower-case letters, digits and hyphens.`);
    }
    this.step({ kind: 'app', name: app, status: 'created' });
  }

  /** fixtures/schemas/*.json: the table name and the data source of each. */
  private schemaFiles(fixtures: string): SchemaFile[] {
    const dir = path.join(fixtures, 'schemas');
    let files: string[];
    try {
      files = fs.readdirSync(dir).filter((f) => f.endsWith('.json')).sort();
    } catch {
      throw new DomainError('BAD_REQUEST', `No fixtures at ${dir}.`);
    }
    return files.map((f) => {
      const provider = f.split('.').length > 2 ? f.split('.').at(-2)! : 'flat_table';
      const src = SOURCES.find((s) => s.provider_type === provider);
      if (!src) throw new DomainError('BAD_REQUEST', `${f}: unknown provider "${provider}" (flat_table, jsonb, docstore).`);
      const file = path.join(dir, f);
      return { file, name: tableNameOf(file), ds: src.slug, schema: readJson(file, 'schema') as SchemaFile['schema'] };
    });
  }
}
