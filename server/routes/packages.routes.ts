// App packages (spec Part 2 §4 "Packages"; docs/app-packages.md): export (a ZIP download), the
// export configuration, the export jobs, and the stored package `packages/1` (no trailing slash,
// beside the `{uuid}/` job route). Who may: whoever may update the app (site administrators).
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import type { Config } from '../../shared/config.ts';
import { EXPORT_CONFIG, ExportOptionsBody } from '../../shared/packages/layout.ts';
import * as packages from '../../shared/packages/export.service.ts';
import type { ObjectStore } from '../../shared/storage/objstore/types.ts';
import { FlaggedBody, sendFlagged } from '../http/envelopes.ts';
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
