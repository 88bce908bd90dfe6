// App packages (spec Part 2 §4 "Packages"; docs/app-packages.md): export (a ZIP download), the
// export configuration, the export jobs, and the stored package `packages/1` (no trailing slash,
// beside the `{uuid}/` job route); the import (multipart `file`, `dry_run`, `validate_checksum`)
// and its jobs. Who may: whoever may update the app (site administrators); an import, whoever may
// create the app or update it.
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import type { Config } from '../../shared/config.ts';
import { EXPORT_CONFIG, ExportOptionsBody } from '../../shared/packages/layout.ts';
import * as packages from '../../shared/packages/export.service.ts';
import * as imports from '../../shared/packages/import.service.ts';
import type { SecretKeyring } from '../../shared/secrets/crypto.ts';
import type { ObjectStore } from '../../shared/storage/objstore/types.ts';
import { DomainError } from '../../shared/errors.ts';
import { FlaggedBody, sendFlagged } from '../http/envelopes.ts';
import { withMultipart } from '../http/multipart.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

const BASE = '/api/apps/:app_slug/packages/';
const WHO = 'Whoever may update the app (site administrators).';
const AppRef = Type.Object({ app_slug: Type.String() });
const JobRef = Type.Object({ app_slug: Type.String(), uuid: Type.String({ description: 'The export job uuid' }) });
const VersionRef = Type.Object({ app_slug: Type.String(), version: Type.String({ description: 'Only 1 (the latest)' }) });

/** A package ZIP as a download: its name, its size, and its export job's uuid. */
async function sendZip(ctx: AppContext, zip: packages.PackageDownload): Promise<void> {
  ctx.set('Content-Disposition', `attachment; filename=${zip.filename}`);
  ctx.set('X-Export-Job-UUID', zip.job.uuid);
  ctx.type = 'application/zip';
  ctx.length = zip.size;
  ctx.body = await zip.open();
}

export function packageRoutes(options: { config: Config; store: ObjectStore }): RouteDef[] {
  const deps: packages.PackageDeps = { store: options.store, tmpDir: path.join(options.config.dataDir, 'tmp') };
  const base = { scope: 'tenant' as const, auth: 'user' as const, tags: ['packages'] };
  return [
    defineRoute({
      ...base,
      method: 'post',
      path: BASE,
      operationId: 'apps_packages_export',
      summary: 'Export the app as a package (a ZIP download)',
      description: `Optional JSON body of boolean flags (${EXPORT_CONFIG.order.join(', ')}); without one, every module but frontend workers and widgets. The package becomes the app's stored package (packages/1). Headers: Content-Disposition (\`{app_slug}_package_{timestamp}.zip\`), X-Export-Job-UUID. ${WHO}`,
      params: AppRef,
      body: ExportOptionsBody,
      statementTimeout: 'long',
      responses: { 200: null },
      async handler(ctx, { params, body }) {
        await sendZip(ctx, await packages.exportApp(ctx.state.service(), deps, params.app_slug!, body));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: `${BASE}export-config/`,
      operationId: 'apps_packages_export_config',
      summary: 'The export flags with their defaults, labels and help',
      description: `{order, options[{key, default, label, help_text}], always_included, notes}. ${WHO}`,
      params: AppRef,
      responses: { 200: null },
      async handler(ctx, { params }) {
        await packages.packageApp(ctx.state.service(), params.app_slug!);
        ctx.body = EXPORT_CONFIG;
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: BASE,
      operationId: 'apps_packages_jobs',
      summary: 'The export jobs of the app',
      description: `\`status\` (in_progress, completed, failed), \`ordering\` (±created_at, ±started_at, ±completed_at; default -created_at), \`page\` (1), \`page_size\` (10, at most 100). ${WHO}`,
      params: AppRef,
      query: packages.JobListQuery,
      responses: { 200: null },
      async handler(ctx, { params, query }) {
        const page = await packages.listExportJobs(ctx.state.service(), params.app_slug!, query);
        ctx.body = { success: true, message: 'Export jobs retrieved.', status_code: 200, data: page.results, total: page.count, page: page.page, page_size: page.pageSize };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: `${BASE}:uuid/`,
      operationId: 'apps_packages_job',
      summary: 'One export job',
      description: WHO,
      params: JobRef,
      responses: { 200: FlaggedBody(Type.Record(Type.String(), Type.Unknown())) },
      async handler(ctx, { params }) {
        sendFlagged(ctx, 200, 'Export job retrieved.', await packages.getExportJob(ctx.state.service(), params.app_slug!, params.uuid!));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: `${BASE}:version`,
      operationId: 'apps_packages_stored',
      summary: 'The stored package (version 1: the latest export, made now when there is none)',
      description: `No trailing slash. Only version 1 exists; another is 404. ${WHO}`,
      params: VersionRef,
      statementTimeout: 'long',
      responses: { 200: null },
      async handler(ctx, { params }) {
        await sendZip(ctx, await packages.storedPackage(ctx.state.service(), deps, params.app_slug!, params.version!));
      },
    }),
  ];
}

/** The import and its jobs: registered before the apps' routes (`/api/apps/imports/` is not the app `imports`; that slug is reserved). */
export function importRoutes(options: { config: Config; store: ObjectStore; keyring: SecretKeyring }): RouteDef[] {
  const deps: imports.ImportDeps = { store: options.store, tmpDir: path.join(options.config.dataDir, 'tmp'), keyring: options.keyring, dataDir: options.config.dataDir };
  const limit = options.config.packageUploadLimitBytes;
  const tooLarge = () => new DomainError('PAYLOAD_TOO_LARGE', `The package is larger than ${limit} bytes (PACKAGE_UPLOAD_LIMIT_BYTES).`, { errors: { file: [`Ensure the package is at most ${limit} bytes.`] } });
  const base = { scope: 'tenant' as const, auth: 'user' as const, tags: ['packages'] };
  return [
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/apps/imports/',
      operationId: 'apps_imports',
      summary: 'Import an app package (or plan it: dry_run)',
      description:
        'multipart/form-data: `file` (the package ZIP, required), `dry_run` (default false: validate and plan only, nothing changes), `validate_checksum` (default true: every digest checked). ' +
        "The app slug comes from the manifest: an existing app is updated, otherwise created. 200 {success, message, status_code, data: {job, report}}: the report's `plan` lists per module what is (or would be) created, updated, left unchanged or skipped, the table migrations and the policies that change; `modules` counts them. " +
        `A refused package is a 400 naming the problem (\`errors.file\`); a failure while importing leaves the site as it was (the job records it). Whoever may create the app, or update it when it exists (site administrators). At most PACKAGE_UPLOAD_LIMIT_BYTES (${limit}).`,
      statementTimeout: 'long',
      responses: { 200: FlaggedBody(Type.Object({ job: Type.Record(Type.String(), Type.Unknown()), report: Type.Record(Type.String(), Type.Unknown()) })) },
      async handler(ctx) {
        if (!ctx.is('multipart/form-data')) throw new DomainError('UNSUPPORTED_MEDIA_TYPE', 'Send multipart/form-data with the package as `file`.');
        const result = await withMultipart(ctx, { tmpDir: deps.tmpDir, fileField: 'file', maxFileSize: limit, tooLarge }, async ({ fields, file }) => {
          const options = imports.importOptions(fields);
          if (!file) throw new DomainError('VALIDATION_ERROR', 'Invalid input.', { errors: { file: ['No file was submitted.'] } });
          return imports.importPackage(ctx.state.service(), deps, file.path, options);
        });
        sendFlagged(ctx, 200, `${result.report.dry_run ? 'Dry run' : 'Imported'}: ${result.report.summary}.`, result);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/imports/',
      operationId: 'apps_imports_list',
      summary: "The site's import jobs (newest first, at most 100)",
      description: 'Each: uuid, app_slug, status (in_progress, completed, failed), dry_run, triggered_by, started_at, completed_at, created_at, report, error_message. Whoever may create or update apps.',
      responses: { 200: null },
      async handler(ctx) {
        const jobs = await imports.listImportJobs(ctx.state.service());
        ctx.body = { success: true, message: 'Import jobs retrieved.', status_code: 200, data: jobs, total: jobs.length };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/imports/:uuid/',
      operationId: 'apps_imports_job',
      summary: 'One import job, with the manifest it imported',
      description: 'Whoever may create or update apps.',
      params: Type.Object({ uuid: Type.String({ description: 'The import job uuid' }) }),
      responses: { 200: FlaggedBody(Type.Record(Type.String(), Type.Unknown())) },
      async handler(ctx, { params }) {
        sendFlagged(ctx, 200, 'Import job retrieved.', await imports.getImportJob(ctx.state.service(), params.uuid!));
      },
    }),
  ];
}
