// Apps and app settings of a site (scope 'tenant': a site host or /sites/{schema}/…).
// Reads: any signed-in user of the site; writes: its administrators (superusers, staff).
import { APP_MESSAGES } from '../../shared/apps/app.messages.ts';
import path from 'node:path';
import { Type } from '@sinclair/typebox';
import { MAX_ICON_BYTES, SettingsPut, SettingsResponse, type SettingsView } from '../../shared/apps/app-settings.schemas.ts';
import { appIcon, getAppSettings, updateAppSettings, type IconUpload } from '../../shared/apps/app-settings.service.ts';
import { AppCreate, AppDetail, AppDetailBody, AppListBody, AppListQuery, AppRef, AppStats, AppUpdate } from '../../shared/apps/app.schemas.ts';
import * as apps from '../../shared/apps/app.service.ts';
import type { Config } from '../../shared/config.ts';
import { DomainError } from '../../shared/errors.ts';
import { MessageBody, created, requestUrl, sendCreated, sendMessage } from '../http/envelopes.ts';
import { parseMultipart } from '../http/multipart.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

const READ = 'Any signed-in user of the site.';
const WRITE = 'Site administrators (superusers and staff of the site).';

/** The absolute prefix of the site API this request came through (`https://host` or `…/sites/<schema>`). */
export function siteApiBase(ctx: AppContext, publicUrl: string | undefined): string {
  const url = new URL(requestUrl(ctx, publicUrl));
  const at = url.pathname.indexOf('/api/');
  return url.origin + (at > 0 ? url.pathname.slice(0, at) : '');
}

const INTEGER_FIELDS = new Set(['max_functions', 'max_datatables', 'rate_limit_per_hour']);

/** Settings sent as form fields arrive as strings: integers become numbers, `null` (or empty) for the worker null. */
function settingsFields(raw: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, v] of Object.entries(raw)) {
    if (INTEGER_FIELDS.has(key) && typeof v === 'string' && /^-?\d+$/.test(v)) out[key] = Number(v);
    else if (key === 'default_frontend_worker' && (v === '' || v === 'null')) out[key] = null;
    else out[key] = v;
  }
  return out;
}

const iconTooLarge = () => new DomainError('PAYLOAD_TOO_LARGE', 'The icon is larger than 5 MB.', { errors: { icon: ['Ensure the file is at most 5 MB.'] } });

export function appRoutes(config: Config): RouteDef[] {
  const files = { dataDir: config.dataDir };
  const tmpDir = path.join(config.dataDir, 'tmp');
  const base = { auth: 'user' as const, scope: 'tenant' as const, tags: ['apps'] };
  const settingsOk = (ctx: AppContext, message: string, data: SettingsView) => {
    ctx.body = { success: true, message, data };
  };
  /** A multipart PATCH of the settings: the fields and the `icon` file (uploaded under <dataDir>/tmp, removed afterwards). */
  async function settingsUpload(ctx: AppContext): Promise<{ fields: Record<string, unknown>; icon?: IconUpload }> {
    const { fields, file } = await parseMultipart(ctx, { tmpDir, fileField: 'icon', maxFileSize: MAX_ICON_BYTES, tooLarge: iconTooLarge });
    return { fields: settingsFields(fields), icon: file };
  }

  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/',
      operationId: 'apps_list',
      summary: 'List the apps of the site',
      description: `\`is_active\` defaults to true (false: the soft-deleted ones; all or *: both). Settings are the lightweight form. ${READ}`,
      query: AppListQuery,
      responses: { 200: AppListBody },
      async handler(ctx, { query }) {
        const { data, total } = await apps.listApps(ctx.state.service(), query, siteApiBase(ctx, config.publicUrl));
        ctx.body = { status: 'success', message: APP_MESSAGES.listed, data, total };
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/apps/',
      operationId: 'apps_create',
      summary: 'Create an app with its settings',
      description: `The slug is made from the name (-2, -3 … on collision). The settings row is created in the same transaction; \`settings\` follows the settings rules. ${WRITE}`,
      body: AppCreate,
      responses: { 201: created(AppDetail) },
      async handler(ctx, { body }) {
        sendCreated(ctx, APP_MESSAGES.created, await apps.createApp(ctx.state.service(), body, siteApiBase(ctx, config.publicUrl)));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/',
      operationId: 'apps_retrieve',
      summary: 'Get an app with its tables, data sources and settings',
      description: `An inactive app answers 404 (restore it first). ${READ}`,
      params: AppRef,
      responses: { 200: AppDetailBody },
      async handler(ctx, { params }) {
        ctx.body = { status: 'success', message: APP_MESSAGES.retrieved, data: await apps.getApp(ctx.state.service(), params.app_slug, siteApiBase(ctx, config.publicUrl)) };
      },
    }),
    ...(['put', 'patch'] as const).map((method) =>
      defineRoute({
        ...base,
        method,
        path: '/api/apps/:app_slug/',
        operationId: `apps_${method === 'put' ? 'update' : 'partial_update'}`,
        summary: 'Update the name or description of an app',
        description: `Only \`name\` and \`description\` (settings: /settings/; the slug stays). ${WRITE}`,
        params: AppRef,
        body: AppUpdate,
        responses: { 200: AppDetailBody },
        async handler(ctx, { params, body }) {
          ctx.body = { status: 'success', message: APP_MESSAGES.updated, data: await apps.updateApp(ctx.state.service(), params.app_slug, body, siteApiBase(ctx, config.publicUrl)) };
        },
      }),
    ),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/api/apps/:app_slug/',
      operationId: 'apps_destroy',
      summary: 'Soft-delete an app',
      description: `The app, its data sources and its data tables become inactive (one transaction); POST restore/ undoes it. ${WRITE}`,
      params: AppRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await apps.deleteApp(ctx.state.service(), params.app_slug);
        sendMessage(ctx, APP_MESSAGES.deleted(params.app_slug));
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/apps/:app_slug/restore/',
      operationId: 'apps_restore',
      summary: 'Restore a soft-deleted app',
      description: `Reactivates the app, its data sources and its data tables. ${WRITE}`,
      params: AppRef,
      responses: { 200: Type.Object({ message: Type.String() }) },
      async handler(ctx, { params }) {
        await apps.restoreApp(ctx.state.service(), params.app_slug);
        ctx.body = { message: APP_MESSAGES.restored(params.app_slug) };
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/stats/',
      operationId: 'apps_stats',
      summary: 'Counts of the data sources and tables of an app',
      description: READ,
      params: AppRef,
      responses: { 200: AppStats },
      async handler(ctx, { params }) {
        ctx.body = await apps.appStats(ctx.state.service(), params.app_slug);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/settings/',
      operationId: 'apps_settings_retrieve',
      summary: 'Get the settings of an app',
      description: READ,
      params: AppRef,
      responses: { 200: SettingsResponse },
      async handler(ctx, { params }) {
        settingsOk(ctx, APP_MESSAGES.settingsRetrieved, await getAppSettings(ctx.state.service(), params.app_slug, siteApiBase(ctx, config.publicUrl)));
      },
    }),
    ...(['put', 'post'] as const).map((method) =>
      defineRoute({
        ...base,
        method,
        path: '/api/apps/:app_slug/settings/',
        operationId: method === 'put' ? 'apps_settings_update' : 'apps_settings_create',
        summary: method === 'put' ? 'Replace the settings of an app' : 'Same as PUT (settings are created with the app)',
        description: `\`display_name\` is required; fields left out keep their values. JSON only (the icon: PATCH multipart). ${WRITE}`,
        params: AppRef,
        body: SettingsPut,
        responses: { 200: SettingsResponse },
        async handler(ctx, { params, body }) {
          settingsOk(ctx, APP_MESSAGES.settingsUpdated, await updateAppSettings(ctx.state.service(), files, params.app_slug, body, { put: true, baseUrl: siteApiBase(ctx, config.publicUrl) }));
        },
      }),
    ),
    defineRoute({
      ...base,
      method: 'patch',
      path: '/api/apps/:app_slug/settings/',
      operationId: 'apps_settings_partial_update',
      summary: 'Change some settings of an app, or upload its icon',
      description:
        'JSON, or multipart/form-data with the fields and an `icon` file (at most 5 MB; png, jpg, jpeg, svg, ico, webp or gif, checked by content; SVG without scripts or event handlers). ' +
        `\`default_frontend_worker\` accepts only null until frontend workers exist. ${WRITE}`,
      params: AppRef,
      responses: { 200: SettingsResponse },
      async handler(ctx, { params }) {
        const service = ctx.state.service();
        let raw: unknown = (ctx.request as { body?: unknown }).body ?? {};
        let icon: IconUpload | undefined;
        if (ctx.is('multipart')) {
          ({ fields: raw, icon } = await settingsUpload(ctx));
        } else if (ctx.request.length && !ctx.is('application/json')) {
          throw new DomainError('UNSUPPORTED_MEDIA_TYPE', `Unsupported media type "${ctx.get('Content-Type')}": send application/json or multipart/form-data.`);
        }
        settingsOk(ctx, APP_MESSAGES.settingsUpdated, await updateAppSettings(service, files, params.app_slug, raw, { icon, baseUrl: siteApiBase(ctx, config.publicUrl) }));
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/api/apps/:app_slug/settings/',
      operationId: 'apps_settings_destroy',
      summary: 'Not allowed: settings live as long as their app',
      params: AppRef,
      responses: { 405: null },
      handler() {
        throw new DomainError('METHOD_NOT_ALLOWED', 'App settings cannot be deleted: they are created with the app and live as long as it does.', { detail: 'Method "DELETE" not allowed.' });
      },
    }),
    defineRoute({
      auth: 'public',
      scope: 'tenant',
      tags: ['apps'],
      method: 'get',
      path: '/api/apps/:app_slug/settings/icon/',
      operationId: 'apps_settings_icon',
      summary: 'The icon of an app (image bytes)',
      description: 'Public within the site (for <img>). Served with its content type, nosniff, and for SVG a CSP that forbids scripts.',
      params: AppRef,
      responses: { 200: null },
      async handler(ctx, { params }) {
        const icon = await appIcon(ctx.state.em, files, ctx.state.tenant!, params.app_slug);
        ctx.set('X-Content-Type-Options', 'nosniff');
        ctx.set('Cache-Control', 'private, max-age=300');
        if (icon.ext === 'svg') ctx.set('Content-Security-Policy', "default-src 'none'; style-src 'unsafe-inline'; sandbox");
        ctx.set('Content-Disposition', `inline; filename="icon.${icon.ext}"`);
        ctx.type = icon.contentType;
        ctx.body = icon.bytes;
      },
    }),
  ];
}
