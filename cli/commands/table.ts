// `platform table …`: the data tables of an app (/sites/<site>/api/apps/<app>/datatables/).
import { Args, Flags } from '@oclif/core';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { DataTableListItem, DataTableStats, DataTableView } from '../../shared/data/datatable.schemas.ts';
import type { Preview, RollbackResult, SchemaOperation } from '../../shared/data/migrations/migration.schemas.ts';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags } from '../flags.ts';
import { keyValues, pageTable, table, when, type Column } from '../output.ts';
import { appFlag, plural, readJson, siteFlag, tableNameOf } from '../tables.ts';

const tableArg = { name: Args.string({ name: 'name', description: 'The data table name', required: true }) };
const tableFlags = { site: siteFlag, app: appFlag };

const COLUMNS: Column<DataTableListItem>[] = [
  { header: 'Name', get: (t) => t.name },
  { header: 'Data source', get: (t) => t.datasource_slug },
  { header: 'Fields', get: (t) => t.field_count },
  { header: 'Materialized', get: (t) => t.is_materialized },
  { header: 'Physical table', get: (t) => t.physical_table_name },
  { header: 'Modified', get: (t) => when(t.updated_at) },
];

/** What `table create/get/update` show of a table (the schema itself: `table schema`). */
function summary(t: DataTableView): string {
  const { json_schema: _s, field_names, primary_key, ...rest } = t;
  return keyValues({ ...rest, field_names: field_names.join(', '), primary_key: primary_key.join(', ') });
}

export const TABLE_COMMANDS = {
  'table:list': operation({
    summary: 'List the data tables of an app.',
    description: 'Prints the API page {count, next, previous, results} with --json.',
    examples: ['table list --site shop_prod --app crm', 'table list --site shop_prod --app crm --datasource main --materialized --json'],
    flags: {
      ...tableFlags,
      datasource: Flags.string({ summary: 'Only the tables of this data source (slug).' }),
      materialized: Flags.boolean({ summary: 'Only materialized tables (--no-materialized: only the others).', allowNo: true }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      site: f.site,
      path: path`/api/apps/${f.app}/datatables/`,
      query: { datasource: f.datasource, is_materialized: f.materialized === undefined ? undefined : String(f.materialized), page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<DataTableListItem>) => pageTable(page, COLUMNS, ['table', 'tables']),
  }),

  'table:create': operation({
    summary: 'Create a data table from a Frictionless Table Schema file.',
    description:
      'Without --name, the name is the file name up to its first dot (contacts.json → contacts, events.jsonb.json → events). The table is not materialized: `platform table materialize` creates the physical table.',
    examples: [
      'table create --site shop_prod --app crm --datasource main --name contacts --schema fixtures/schemas/contacts.json',
      'table create --site shop_prod --app crm --datasource events --schema fixtures/schemas/events.jsonb.json --json',
    ],
    flags: {
      ...tableFlags,
      datasource: Flags.string({ summary: 'The data source (slug) the table goes into.', required: true }),
      name: Flags.string({ summary: 'The table name (lower-case identifier); default: from the schema file name.' }),
      schema: Flags.string({ summary: 'The Table Schema, a JSON file.', required: true }),
      description: Flags.string({ summary: 'What the table holds.' }),
    },
    request: ({ flags: f }) => ({
      method: 'POST',
      site: f.site,
      path: path`/api/apps/${f.app}/datasources/${f.datasource}/datatables/`,
      body: { name: f.name ?? tableNameOf(f.schema), json_schema: readJson(f.schema, 'schema'), description: f.description },
    }),
    render: (body: CreatedBody<DataTableView>) => [body.message, summary(body.data)],
  }),

  'table:get': operation({
    summary: 'Show a data table (the schema: `platform table schema`; all of it: --json).',
    examples: ['table get contacts --site shop_prod --app crm'],
    args: tableArg,
    flags: tableFlags,
    request: ({ flags, args }) => ({ method: 'GET', site: flags.site, path: path`/api/apps/${flags.app}/datatables/${args.name}/` }),
    render: summary,
  }),

  'table:update': operation({
    summary: 'Change the description or the schema of a data table (PATCH).',
    description: 'A changed schema replaces the schema of a table that is not materialized and migrates a materialized one (`platform table migrate` shows the plan and progress first).',
    examples: ['table update contacts --description "People" --site shop_prod --app crm', 'table update contacts --schema contacts-v2.json --site shop_prod --app crm'],
    args: tableArg,
    flags: {
      ...tableFlags,
      description: Flags.string({ summary: 'The new description.' }),
      schema: Flags.string({ summary: 'The new Table Schema, a JSON file.' }),
    },
    request: ({ flags: f, args }) => {
      const body = defined({ description: f.description, json_schema: f.schema === undefined ? undefined : readJson(f.schema, 'schema') });
      if (!Object.keys(body).length) throw new DomainError('BAD_REQUEST', 'Nothing to change: give --description or --schema.');
      return { method: 'PATCH', site: f.site, path: path`/api/apps/${f.app}/datatables/${args.name}/`, body };
    },
    render: summary,
  }),

  'table:delete': operation({
    summary: 'Delete a data table (and drop its physical table with its records).',
    description: 'Refused while a foreign key of another table, or a reference table, points at it.',
    examples: ['table delete contacts --site shop_prod --app crm'],
    args: tableArg,
    flags: tableFlags,
    request: ({ flags, args }) => ({ method: 'DELETE', site: flags.site, path: path`/api/apps/${flags.app}/datatables/${args.name}/` }),
  }),

  'table:materialize': operation({
    summary: 'Create the physical table of a data table.',
    description: 'Foreign-key targets must be materialized first.',
    examples: ['table materialize contacts --site shop_prod --app crm'],
    args: tableArg,
    flags: tableFlags,
    request: ({ flags, args }) => ({ method: 'POST', site: flags.site, path: path`/api/apps/${flags.app}/datatables/${args.name}/materialize/` }),
    render: (body: CreatedBody<DataTableView>) => `${body.message} (${body.data.name} → ${body.data.physical_table_name})`,
  }),

  'table:schema': operation({
    summary: 'Print the Table Schema of a data table (and its hash with --json).',
    description: 'Without --json, the schema document alone, as JSON: `platform table schema contacts … > contacts.json` gives a file `table create` and `table update` accept.',
    examples: ['table schema contacts --site shop_prod --app crm > contacts.json'],
    args: tableArg,
    flags: tableFlags,
    request: ({ flags, args }) => ({ method: 'GET', site: flags.site, path: path`/api/apps/${flags.app}/datatables/${args.name}/schema/` }),
    render: (body: { schema: unknown }) => JSON.stringify(body.schema, null, 2),
  }),

  'table:validate': operation({
    summary: 'Check records (a JSON file) against the schema of a data table; nothing is stored.',
    description: 'The file holds an array of records (or one record). Exit code 1 when a record is invalid.',
    examples: ['table validate contacts --file records.json --site shop_prod --app crm'],
    args: tableArg,
    flags: { ...tableFlags, file: Flags.string({ summary: 'The records: a JSON array of objects (or one object).', required: true }) },
    request: ({ flags: f, args }) => {
      const data = readJson(f.file, 'file');
      if (typeof data !== 'object' || data === null) throw fieldError('file', 'Expected a JSON array of records (or one record).');
      return { method: 'POST', site: f.site, path: path`/api/apps/${f.app}/datatables/${args.name}/validate_data/`, body: { data: Array.isArray(data) ? data : [data] } };
    },
    render: (result: { is_valid: boolean; errors: string[]; validated_rows: number }) => {
      if (result.is_valid) return `Valid: ${plural(result.validated_rows, 'record')}.`;
      process.exitCode = 1; // with --json too
      return [`Invalid: ${plural(result.errors.length, 'problem')} in ${plural(result.validated_rows, 'record')}.`, ...result.errors.map((e) => `  ${e}`)];
    },
  }),

  'table:stats': operation({
    summary: 'Count the data tables of an app, by data source.',
    examples: ['table stats --site shop_prod --app crm'],
    flags: tableFlags,
    request: ({ flags }) => ({ method: 'GET', site: flags.site, path: path`/api/apps/${flags.app}/datatables/stats/` }),
    render: ({ datasources, ...totals }: DataTableStats) => {
      const rows = Object.entries(datasources).map(([slug, d]) => ({ slug, ...d }));
      if (!rows.length) return keyValues(totals);
      return `${keyValues(totals)}\n\n${table(rows, [
        { header: 'Slug', get: (d) => d.slug },
        { header: 'Name', get: (d) => d.name },
        { header: 'Provider', get: (d) => d.provider_type },
        { header: 'Tables', get: (d) => d.table_count },
        { header: 'Materialized', get: (d) => d.materialized_count },
      ])}`;
    },
  }),

  'table:migrate': operation({
    summary: 'Migrate a data table to a new Table Schema (or, with --preview, only show what would run).',
    description:
      'Prints the plan first (each operation, unsafe ones marked, the estimated time), then runs it in one transaction. Unsafe operations run only when the data source allows data loss (`platform datasource update <ds> --allow-data-loss`). A field renamed keeps its values when it carries "x-rename-from": "<old name>". docs/migrations.md.',
    examples: [
      'table migrate contacts --schema contacts-v2.json --preview --site shop_prod --app crm',
      'table migrate contacts --schema contacts-v2.json --site shop_prod --app crm --json',
    ],
    args: tableArg,
    flags: {
      ...tableFlags,
      schema: Flags.string({ summary: 'The new Table Schema, a JSON file.', required: true }),
      preview: Flags.boolean({ summary: 'Show the operations, their SQL and warnings; change nothing.' }),
      description: Flags.string({ summary: 'A new description of the table, set with the migration.' }),
    },
    request: async ({ flags: f, args, info, call }) => {
      const doc = readJson(f.schema, 'schema');
      const base = path`/api/apps/${f.app}/datatables/${args.name}/`;
      if (f.preview) return { method: 'POST', site: f.site, path: `${base}preview-changes/`, body: { new_schema: doc } };
      const plan = await call<Preview>({ method: 'POST', site: f.site, path: `${base}preview-changes/`, body: { new_schema: doc } });
      info(`${plural(plan.operations.length, 'operation')}${plan.is_safe ? '' : ' (unsafe ones marked !)'}, estimated ${plan.estimated_duration_ms} ms:`);
      for (const op of plan.operations) info(`  ${op.is_safe ? ' ' : '!'} ${op.type}${op.column ? ` ${op.column}` : ''}`);
      info(`Migrating ${args.name}…`);
      return { method: 'PATCH', site: f.site, path: base, body: defined({ json_schema: doc, description: f.description }) };
    },
    render: (body: Preview | DataTableView, { flags, args }) => {
      if (!('operations' in body)) return [`Migrated ${args.name}: schema_hash ${body.schema_hash}. \`platform table history ${args.name} --site ${flags.site} --app ${flags.app}\` shows the revision.`];
      return [
        `${plural(body.operations.length, 'operation')}, ${body.is_safe ? 'all safe' : 'some unsafe'}, estimated ${body.estimated_duration_ms} ms:`,
        ...body.operations.map((op) => `${op.is_safe ? ' ' : '!'} ${op.type}${op.column ? ` ${op.column}` : ''}\n    ${op.sql.replaceAll('\n', '\n    ')}`),
        ...body.warnings.map((w) => `warning: ${w}`),
      ];
    },
  }),

  'table:history': operation({
    summary: 'List the schema operations of a data table, newest first (materialize, migrations, rollbacks).',
    description: 'Prints the API page {count, next, previous, results} with --json (each operation with its SQL and rollback SQL).',
    examples: ['table history contacts --site shop_prod --app crm', 'table history contacts --status failed --site shop_prod --app crm --json'],
    args: tableArg,
    flags: {
      ...tableFlags,
      status: Flags.string({ summary: 'Only operations in this state.', options: ['pending', 'in_progress', 'success', 'failed', 'rolled_back'] }),
      ...pageFlags,
    },
    request: ({ flags: f, args }) => ({
      method: 'GET',
      site: f.site,
      path: path`/api/apps/${f.app}/datatables/${args.name}/operation-history/`,
      query: { status: f.status, page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<SchemaOperation>) =>
      pageTable(page, [
        { header: 'Revision', get: (o) => o.revision_id },
        { header: 'Type', get: (o) => o.operation_type },
        { header: 'Status', get: (o) => o.status },
        { header: 'Operations', get: (o) => o.operations.map((x) => `${x.type}${x.column ? ` ${x.column}` : ''}`).join(', ') || null },
        { header: 'Started', get: (o) => when(o.started_at) },
        { header: 'ms', get: (o) => o.duration_ms },
        { header: 'Error', get: (o) => o.error },
      ], ['operation', 'operations']),
  }),

  'table:rollback': operation({
    summary: 'Roll back a migration of a data table (its latest one still standing).',
    description: 'Runs the revision\'s stored rollback SQL in one transaction. Dropped columns come back empty; what cannot be restored is printed.',
    examples: ['table rollback contacts --revision 3f9a0c1b2d4e --site shop_prod --app crm'],
    args: tableArg,
    flags: { ...tableFlags, revision: Flags.string({ summary: 'The revision_id of the migration (`platform table history`).', required: true }) },
    request: ({ flags: f, args, info }) => {
      info(`Rolling back ${f.revision} of ${args.name}…`);
      return { method: 'POST', site: f.site, path: path`/api/apps/${f.app}/datatables/${args.name}/rollback/`, body: { revision_id: f.revision } };
    },
    render: (r: RollbackResult) => [`${r.message} (${plural(r.operations_reversed, 'operation')} reversed; recorded as ${r.revision_id})`, ...r.warnings.map((w) => `warning: ${w}`)],
  }),
};
