// `platform table …`: the data tables of an app (/sites/<site>/api/apps/<app>/datatables/).
import { Args, Flags } from '@oclif/core';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { DataTableListItem, DataTableStats, DataTableView } from '../../shared/data/datatable.schemas.ts';
import type { Preview, RollbackResult, SchemaOperation } from '../../shared/data/migrations/migration.schemas.ts';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { defined, path, type ApiRequest } from '../api.ts';
import { api, operation } from '../base.ts';
import { columns, keyValues, pageOf, table } from '../output.ts';
import { ask, canPrompt } from '../prompt.ts';
import { appFlag, plural, readJson, siteFlag, tableNameOf } from '../tables.ts';

const schemaOf = (f: { schema?: string }) => (f.schema === undefined ? undefined : readJson(f.schema, 'schema'));
const opLine = (op: { type: string; column: string | null }) => `${op.type}${op.column ? ` ${op.column}` : ''}`;
const warnings = (list: string[]) => list.map((w) => `warning: ${w}`);
const losses = (list: string[]) => list.map((l) => `data loss: ${l}`);

/**
 * Before a rollback: its dry run, and when the rollback itself would destroy data (values of the
 * columns the migration added, edges), the person's yes on a terminal, or --yes; otherwise a
 * refusal with the losses (in the --json body too), nothing changed.
 */
async function confirmRollback({ flags: f, args, call, info }: { flags: Record<string, any>; args: Record<string, any>; call: <T>(req: ApiRequest) => Promise<T>; info: (line: string) => void }): Promise<void> {
  const dry = await call<RollbackResult>({ method: 'POST', site: f.site, path: path`/api/apps/${f.app}/datatables/${args.name}/rollback/`, body: { revision_id: f.revision, dry_run: true } });
  if (!dry.data_loss.length || f.yes) return;
  if (canPrompt() && !f.json) {
    for (const line of losses(dry.data_loss)) info(line);
    if (/^y(es)?$/i.test(await ask(`Roll back ${f.revision} of ${args.name} and lose this data? [y/N] `))) return;
    throw new DomainError('BAD_REQUEST', 'Cancelled: nothing was changed.');
  }
  throw new DomainError('BAD_REQUEST', `Rolling back ${f.revision} of ${args.name} loses data: ${dry.data_loss.join(' ')} Nothing was changed; pass --yes to roll back anyway.`, {
    extra: { data_loss: dry.data_loss, warnings: dry.warnings },
  });
}

/** What `table create/get/update` show of a table (the schema itself: `table schema`). */
const summary = ({ json_schema: _s, field_names, primary_key, ...rest }: DataTableView) => keyValues({ ...rest, field_names: field_names.join(', '), primary_key: primary_key.join(', ') });

export const TABLE_COMMANDS = {
  'table:list': api('datatables_list', {
    examples: ['table list --site shop_prod --app crm --datasource main --materialized'],
    rename: { is_materialized: 'materialized' },
    flags: { materialized: Flags.boolean({ summary: 'Only materialized tables (--no-materialized: only the others).', allowNo: true }) },
    render: pageOf<DataTableListItem>(['table', 'tables'], 'name datasource_slug:data_source field_count:fields is_materialized:materialized physical_table_name:physical_table updated_at:modified'),
  }),
  'table:create': api('datasource_datatables_create', {
    description: 'Without --name, the name is the schema file name up to its first dot (events.jsonb.json → events). `platform table materialize` creates the physical table.',
    examples: ['table create --site shop_prod --app crm --datasource main --schema fixtures/schemas/contacts.json'],
    rename: { ds: 'datasource', json_schema: 'schema' },
    flags: { name: Flags.string({ summary: 'The data table name (default: the schema file name up to its first dot).' }), schema: Flags.string({ summary: 'The Table Schema, a JSON file.', required: true }) },
    body: ({ flags: f }) => ({ name: f.name ?? tableNameOf(f.schema), json_schema: schemaOf(f) }),
    render: (body: CreatedBody<DataTableView>) => [body.message, summary(body.data)],
  }),
  'table:get': api('datatables_retrieve_by_app', { args: ['name'], examples: ['table get contacts --site shop_prod --app crm'], render: summary }),
  'table:update': api('datatables_partial_update_by_app', {
    args: ['name'],
    rename: { json_schema: 'schema' },
    flags: { schema: Flags.string({ summary: 'The new Table Schema, a JSON file.' }) },
    body: ({ flags: f }) => ({ json_schema: schemaOf(f) }),
    examples: ['table update contacts --schema contacts-v2.json --site shop_prod --app crm'],
    render: summary,
  }),
  'table:delete': api('datatables_destroy_by_app', { args: ['name'], examples: ['table delete contacts --site shop_prod --app crm'] }),
  'table:materialize': api('datatables_materialize_by_app', {
    args: ['name'],
    examples: ['table materialize contacts --site shop_prod --app crm'],
    render: ({ message, data }: CreatedBody<DataTableView>) => `${message} (${data.name} → ${data.physical_table_name})`,
  }),
  'table:schema': api('datatables_schema_by_app', {
    args: ['name'],
    examples: ['table schema contacts --site shop_prod --app crm > contacts.json'],
    render: (body: { schema: unknown }) => JSON.stringify(body.schema, null, 2), // a file `table create` and `table update` accept
  }),
  'table:validate': api('datatables_validate_data_by_app', {
    description: 'Nothing is stored. Exit code 1 when a record is invalid.',
    args: ['name'],
    rename: { data: 'file' },
    flags: { file: Flags.string({ summary: 'The records: a JSON file holding an array of objects (or one object).', required: true }) },
    body: ({ flags: f }) => {
      const data = readJson(f.file, 'file');
      if (typeof data !== 'object' || data === null) throw fieldError('file', 'Expected a JSON array of records (or one record).');
      return { data: Array.isArray(data) ? data : [data] };
    },
    examples: ['table validate contacts --file records.json --site shop_prod --app crm'],
    render: ({ is_valid, errors, validated_rows }: { is_valid: boolean; errors: string[]; validated_rows: number }) => {
      if (is_valid) return `Valid: ${plural(validated_rows, 'record')}.`;
      process.exitCode = 1; // with --json too
      return [`Invalid: ${plural(errors.length, 'problem')} in ${plural(validated_rows, 'record')}.`, ...errors.map((e) => `  ${e}`)];
    },
  }),
  'table:stats': api('datatables_stats', {
    examples: ['table stats --site shop_prod --app crm'],
    render: ({ datasources, ...totals }: DataTableStats) => {
      const rows = Object.entries(datasources).map(([slug, d]) => ({ slug, ...d }));
      return rows.length ? `${keyValues(totals)}\n\n${table(rows, columns('slug name provider_type:provider table_count:tables materialized_count:materialized'))}` : keyValues(totals);
    },
  }),
  'table:migrate': operation({
    summary: 'Migrate a data table to a new Table Schema (or, with --preview, only show what would run).',
    description:
      'Prints the plan on stderr (unsafe operations marked !), then runs it in one transaction. Unsafe operations run only when the data source allows data loss (`platform datasource update <ds> --allow-data-loss`). A field renamed keeps its values when it carries "x-rename-from": "<old name>". docs/migrations.md.',
    examples: ['table migrate contacts --schema contacts-v2.json --preview --site shop_prod --app crm'],
    args: { name: Args.string({ description: 'The data table name', required: true }) },
    flags: {
      site: siteFlag,
      app: appFlag,
      schema: Flags.string({ summary: 'The new Table Schema, a JSON file.', required: true }),
      preview: Flags.boolean({ summary: 'Show the operations, their SQL and warnings; change nothing.' }),
      description: Flags.string({ summary: 'A new description of the table, set with the migration.' }),
    },
    request: async ({ flags: f, args, info, call }) => {
      const base = path`/api/apps/${f.app}/datatables/${args.name}/`;
      const preview = { method: 'POST' as const, site: f.site, path: `${base}preview-changes/`, body: { new_schema: schemaOf(f) } };
      if (f.preview) return preview;
      const plan = await call<Preview>(preview);
      info(`${plural(plan.operations.length, 'operation')}${plan.is_safe ? '' : ' (unsafe ones marked !)'}, estimated ${plan.estimated_duration_ms} ms:`);
      for (const op of plan.operations) info(`  ${op.is_safe ? ' ' : '!'} ${opLine(op)}`);
      info(`Migrating ${args.name}…`);
      return { method: 'PATCH', site: f.site, path: base, body: defined({ json_schema: preview.body.new_schema, description: f.description }) };
    },
    render: (body: Preview | DataTableView, { flags: f, args }) => {
      if (!('operations' in body)) return `Migrated ${args.name}: schema_hash ${body.schema_hash}. \`platform table history ${args.name} --site ${f.site} --app ${f.app}\` shows the revision.`;
      const head = `${plural(body.operations.length, 'operation')}, ${body.is_safe ? 'all safe' : 'some unsafe'}, estimated ${body.estimated_duration_ms} ms:`;
      return [head, ...body.operations.map((op) => `${op.is_safe ? ' ' : '!'} ${opLine(op)}\n    ${op.sql.replaceAll('\n', '\n    ')}`), ...warnings(body.warnings)];
    },
  }),
  'table:history': api('datatables_operation_history_by_app', {
    args: ['name'],
    rename: { limit: false, offset: false },
    examples: ['table history contacts --status failed --site shop_prod --app crm --json'],
    render: pageOf<SchemaOperation>(['operation', 'operations'], 'revision_id:revision operation_type:type status migration_operations:operations started_at:started duration_ms:ms error_message:error', {
      migration_operations: (o) => o.migration_operations.map(opLine).join(', ') || null,
    }),
  }),
  'table:rollback': api('datatables_rollback_by_app', {
    args: ['name'],
    description:
      'Runs the migration\'s stored rollback SQL in one transaction. A rollback that drops data (the values of columns the migration added, the edges of a hierarchy it switched on) says what it loses and asks first on a terminal; without one, or with --json, it needs --yes and otherwise changes nothing (exit 1). --dry-run only says what the rollback would do and lose. docs/migrations.md.',
    rename: { revision_id: 'revision' },
    flags: { yes: Flags.boolean({ summary: 'Roll back without asking, even when it loses data.' }) },
    body: async (input) => {
      if (!input.flags['dry-run']) await confirmRollback(input);
      return {};
    },
    progress: ({ flags: f, args }) => (f['dry-run'] ? '' : `Rolling back ${f.revision} of ${args.name}…`),
    examples: ['table rollback contacts --revision 3f9a0c1b2d4e --site shop_prod --app crm', 'table rollback contacts --revision 3f9a0c1b2d4e --dry-run --site shop_prod --app crm'],
    render: (r: RollbackResult) => [
      r.revision_id ? `${r.message} (${plural(r.operations_reversed, 'operation')} reversed; recorded as ${r.revision_id})` : r.message,
      ...losses(r.data_loss),
      ...warnings(r.warnings),
    ],
  }),
};
