// `platform app …`: a site's apps (/sites/<site>/api/apps/).
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import nodePath from 'node:path';
import { Args, Flags } from '@oclif/core';
import { EXPORT_OPTIONS } from '../../shared/packages/layout.ts';
import type { ExportJobView } from '../../shared/packages/export.service.ts';
import type { ImportJobView, ImportReport } from '../../shared/packages/import.service.ts';
import { DomainError } from '../../shared/errors.ts';
import type { AppDetail, AppListItem, AppStats } from '../../shared/apps/app.schemas.ts';
import type { SettingsView } from '../../shared/apps/app-settings.schemas.ts';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import { path } from '../api.ts';
import { api, ApiCommand, operation } from '../base.ts';
import { bytes, progress, save, sentLine, watch } from '../tables.ts';
import { multipartUpload } from '../multipart.ts';
import { parseJson, siteFlag } from '../flags.ts';
import { columns, keyValues, listOf, table } from '../output.ts';

/** The message and the app without its lists and settings (`app get` shows them). */
function shown(body: CreatedBody<AppDetail>): string[] {
  const { tables: _t, datasources: _d, settings: _s, package_info: _p, ...rest } = body.data;
  return [body.message, keyValues(rest)];
}

/** The flag of an export option: `include_app_roles` → `app-roles` (`--app-roles` / `--no-app-roles`). */
const flagOf = (key: string): string => key.slice('include_'.length).replaceAll('_', '-');

/** `--no-storage`, `--widgets`, …: one flag per export option, unset unless given (the server's default). */
const exportOptionFlags = Object.fromEntries(
  EXPORT_OPTIONS.map((o) => [flagOf(o.key), Flags.boolean({ summary: `${o.label}: ${o.help_text}`, allowNo: true, default: undefined })]),
);

class AppExportCommand extends ApiCommand<typeof AppExportCommand> {
  static override summary = 'Export an app as a package (a ZIP: its configuration, schemas, policies, functions, files).';
  static override description =
    'Streams the package to --output (written whole or not at all) and checks its SHA-256 against the export job\'s. Every module is included but frontend workers and widgets; turn one off with --no-<module> (--no-storage, --no-secrets, …). The package also becomes the app\'s stored package (GET …/packages/1). With --json: {app, output, job, size, checksum}.';
  static override examples = ['<%= config.bin %> app export crm -o crm.zip --site shop_prod', '<%= config.bin %> app export crm -o crm-config.zip --no-storage --site shop_prod --json'];
  static override args = { app: Args.string({ description: 'The app slug', required: true }) };
  static override flags = { site: siteFlag, output: Flags.string({ char: 'o', summary: 'The ZIP file to write.', required: true }), ...exportOptionFlags };

  async run(): Promise<{ app: string; output: string; job: string; size: number; checksum: string }> {
    const { flags: f, args } = this;
    const options: Record<string, boolean> = {};
    for (const o of EXPORT_OPTIONS) {
      const value = (f as Record<string, unknown>)[flagOf(o.key)];
      if (typeof value === 'boolean') options[o.key] = value;
    }
    const client = await this.api();
    this.info(`Exporting ${args.app} to ${f.output}…`);
    const res = await client.receive({ method: 'POST', site: f.site, path: path`/api/apps/${args.app}/packages/`, body: options }, 'application/zip');
    const job = res.header('x-export-job-uuid') ?? '';
    // The job is complete before the package is sent: its checksum is known before a byte is written.
    const expected = (await client.call<{ data: ExportJobView }>({ method: 'GET', site: f.site, path: path`/api/apps/${args.app}/packages/${job}/` })).data.checksum;
    const hash = createHash('sha256');
    let size = 0;
    const tick = progress((line) => this.info(line));
    const tap = watch((chunk) => {
      hash.update(chunk);
      size += chunk.length;
      tick(() => `  ${bytes(size)}…`);
    });
    let checksum = '';
    // Checked before the file takes its name: a package that does not match is not kept.
    await save(res.stream(), tap, f.output, () => {
      checksum = `sha256:${hash.digest('hex')}`;
      if (checksum !== expected) throw new DomainError('SERVICE_UNAVAILABLE', `The package received has checksum ${checksum}, the export job ${job} recorded ${expected}: nothing was written; export again.`);
    });
    this.log(`Exported ${args.app} to ${f.output} (${bytes(size)}, ${checksum}; job ${job}).`);
    return { app: args.app, output: f.output, job, size, checksum };
  }
}

/** An import's report as a table of modules, then its migrations, policies and warnings. */
function reportLines(report: ImportReport): string[] {
  const rows = Object.entries(report.modules).map(([module, c]) => ({ module, ...c! }));
  const lines = [table(rows, columns('module created updated unchanged skipped'))];
  for (const [name, m] of Object.entries(report.plan.modules)) {
    for (const what of ['create', 'update'] as const) if (m![what].length) lines.push(`${name} ${what}: ${m![what].join(', ')}`);
  }
  for (const [name, p] of Object.entries(report.plan.migrations)) lines.push(`migration of ${name} (${p.is_safe ? 'safe' : 'UNSAFE'}): ${p.operations.map((o) => `${o.type} ${o.column ?? ''}`.trim()).join(', ')}`);
  if (report.plan.policies_changed.length) lines.push(`policies changed: ${report.plan.policies_changed.join(', ')}`);
  for (const w of report.warnings) lines.push(`warning: ${w}`);
  return lines;
}

class AppImportCommand extends ApiCommand<typeof AppImportCommand> {
  static override summary = 'Import an app package (a ZIP made by `app export`), or plan it first (--dry-run).';
  static override description =
    'The app slug comes from the package: an existing app is updated, otherwise created, all modules in one transaction (a failure changes nothing). --dry-run plans only: module by module what would be created, updated, left unchanged or skipped, the table migrations and the policies that change. Every digest is checked unless --no-checksum. Upload progress on stderr. Exit code 0 when done, 1 on an error; with --detailed-exitcode, 2 when the plan has changes (for CI: `app import pkg.zip --dry-run --detailed-exitcode`). With --json: {job, report}.';
  static override examples = ['<%= config.bin %> app import crm.zip --dry-run --site shop_staging', '<%= config.bin %> app import crm.zip --site shop_prod --json'];
  static override args = { file: Args.string({ description: 'The package ZIP', required: true }) };
  static override flags = {
    site: siteFlag,
    'dry-run': Flags.boolean({ summary: 'Validate and plan only; nothing changes.' }),
    checksum: Flags.boolean({ summary: 'Check every digest of the package (--no-checksum: only its safety checks).', allowNo: true, default: true }),
    'detailed-exitcode': Flags.boolean({ summary: 'Exit with 2 when the import made (or the dry run plans) changes, 0 when none.' }),
  };

  async run(): Promise<{ job: ImportJobView; report: ImportReport }> {
    const { flags: f, args } = this;
    let size: number;
    try {
      size = fs.statSync(args.file).size;
    } catch {
      throw new DomainError('VALIDATION_ERROR', `No package at ${args.file}.`, { errors: { file: [`No such file: ${args.file}`] } });
    }
    const client = await this.api();
    this.info(`${f['dry-run'] ? 'Planning the import of' : 'Importing'} ${args.file} (${bytes(size)})…`);
    const tick = progress((line) => this.info(line));
    const upload = multipartUpload(
      { dry_run: f['dry-run'] ? 'true' : 'false', validate_checksum: f.checksum ? 'true' : 'false' },
      { path: args.file, name: nodePath.basename(args.file), size },
      (n) => tick(() => sentLine(n, size)),
    );
    const answer = await client.call<{ message: string; data: { job: ImportJobView; report: ImportReport } }>({ method: 'POST', site: f.site, path: '/api/apps/imports/', upload });
    const { job, report } = answer.data;
    this.log([...reportLines(report), `${report.dry_run ? 'Dry run' : 'Imported'} ${report.app_slug}: ${report.summary} (job ${job.uuid}).`].join('\n'));
    if (f['detailed-exitcode'] && report.plan.changes > 0) process.exitCode = 2;
    return answer.data;
  }
}

export const APP_COMMANDS = {
  'app:export': AppExportCommand,
  'app:import': AppImportCommand,
  'app:list': api('apps_list', {
    examples: ['app list --site shop_prod', 'app list --site shop_prod --inactive --json'],
    rename: { is_active: false },
    flags: { inactive: Flags.boolean({ summary: 'Only the deleted (inactive) apps.', exclusive: ['all'] }), all: Flags.boolean({ summary: 'Active and inactive apps.' }) },
    query: ({ flags: f }) => ({ is_active: f.all ? 'all' : f.inactive ? 'false' : undefined }),
    render: listOf<AppListItem>(['app', 'apps'], 'slug name settings.category:category is_active:active datasource_count:sources table_count:tables updated_at:modified'),
  }),
  'app:create': api('apps_create', { args: ['name'], examples: ['app create CRM --description "Customers" --settings \'{"category":"integration"}\' --site shop_prod'], render: shown }),
  'app:get': api('apps_retrieve', { args: ['app_slug'], examples: ['app get sales-tracker --site shop_prod --json'], render: (body: CreatedBody<AppDetail>) => keyValues(body.data) }),
  'app:update': api('apps_partial_update', { args: ['app_slug'], examples: ['app update sales-tracker --name "Sales" --site shop_prod'], render: shown }),
  'app:delete': api('apps_destroy', { args: ['app_slug'], examples: ['app delete sales-tracker --site shop_prod'] }),
  'app:restore': api('apps_restore', { args: ['app_slug'], examples: ['app restore sales-tracker --site shop_prod'] }),
  // One command for two routes: GET, or PATCH with --set.
  'app:settings': operation({
    summary: "Show an app's settings, or change some of them (--set).",
    description: 'With --set, a PATCH of the fields it holds (display_name, category, primary_color, rate_limit_per_hour, max_datatables, …); prints the settings after the change.',
    examples: ['app settings crm --site shop_prod', `app settings crm --set '{"rate_limit_per_hour":500}' --site shop_prod --json`],
    args: { app: Args.string({ description: 'The app slug', required: true }) },
    flags: { site: siteFlag, set: Flags.string({ summary: 'The settings to change, as a JSON object.' }) },
    request: ({ flags: f, args }) => ({ method: f.set === undefined ? 'GET' : 'PATCH', site: f.site, path: path`/api/apps/${args.app}/settings/`, body: f.set === undefined ? undefined : parseJson(f.set, 'set') }),
    render: (body: { message: string; data: SettingsView }) => [body.message, keyValues(body.data)],
  }),
  'app:stats': api('apps_stats', {
    args: ['app_slug'],
    examples: ['app stats sales-tracker --site shop_prod'],
    render: ({ datasources, ...totals }: AppStats) =>
      datasources.length ? `${keyValues(totals)}\n\n${table(datasources, columns('slug name provider_type:provider total_tables:tables materialized_tables:materialized'))}` : keyValues(totals),
  }),
};
