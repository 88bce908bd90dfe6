// Data sources of an app (scope 'tenant'). Reads: any signed-in user of the site; writes: its
// administrators. `{ds}` is the slug or the id. (The tables of a source: datatables.routes.ts.)
import { APP_MESSAGES } from '../../shared/apps/app.messages.ts';
import { Type } from '@sinclair/typebox';
import { AppRef } from '../../shared/apps/app.schemas.ts';
import { DataSourceCreate, DataSourceRef, DataSourceStats, DataSourceUpdate, DataSourceView } from '../../shared/apps/datasource.schemas.ts';
import * as ds from '../../shared/apps/datasource.service.ts';
import { MessageBody, created, sendCreated, sendMessage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

const READ = 'Any signed-in user of the site.';
const WRITE = 'Site administrators (superusers and staff of the site).';

export function dataSourceRoutes(): RouteDef[] {
  const base = { auth: 'user' as const, scope: 'tenant' as const, tags: ['datasources'] };
  return [
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/datasources/',
      operationId: 'datasources_list',
      summary: 'List the active data sources of an app',
      description: READ,
      params: AppRef,
      responses: { 200: Type.Object({ status: Type.Literal('success'), message: Type.String(), data: Type.Array(DataSourceView), total: Type.Integer() }) },
      async handler(ctx, { params }) {
        const { data, total } = await ds.listDataSources(ctx.state.service(), params.app_slug);
        ctx.body = { status: 'success', message: APP_MESSAGES.dataSourcesListed, data, total };
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: '/api/apps/:app_slug/datasources/',
      operationId: 'datasources_create',
      summary: 'Create a data source',
      description: `Without \`slug\`, one is made from the name (-2 … on collision); a given slug must be free in the app (400 otherwise). ${WRITE}`,
      params: AppRef,
      body: DataSourceCreate,
      responses: { 201: created(DataSourceView) },
      async handler(ctx, { params, body }) {
        sendCreated(ctx, APP_MESSAGES.dataSourceCreated, await ds.createDataSource(ctx.state.service(), params.app_slug, body));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/datasources/:ds/',
      operationId: 'datasources_retrieve',
      summary: 'Get a data source (by slug or id)',
      description: READ,
      params: DataSourceRef,
      responses: { 200: DataSourceView },
      async handler(ctx, { params }) {
        ctx.body = await ds.getDataSource(ctx.state.service(), params.app_slug, params.ds);
      },
    }),
    ...(['put', 'patch'] as const).map((method) =>
      defineRoute({
        ...base,
        method,
        path: '/api/apps/:app_slug/datasources/:ds/',
        operationId: method === 'put' ? 'datasources_update' : 'datasources_partial_update',
        summary: 'Update a data source',
        description: `Fields left out keep their values; provider_type cannot change. ${WRITE}`,
        params: DataSourceRef,
        body: DataSourceUpdate,
        responses: { 200: DataSourceView },
        async handler(ctx, { params, body }) {
          ctx.body = await ds.updateDataSource(ctx.state.service(), params.app_slug, params.ds, body);
        },
      }),
    ),
    defineRoute({
      ...base,
      method: 'delete',
      path: '/api/apps/:app_slug/datasources/:ds/',
      operationId: 'datasources_destroy',
      summary: 'Delete a data source without tables',
      description: `Refused (400) while it has tables, active or not. Permanent. ${WRITE}`,
      params: DataSourceRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await ds.deleteDataSource(ctx.state.service(), params.app_slug, params.ds);
        sendMessage(ctx, APP_MESSAGES.dataSourceDeleted(params.ds));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: '/api/apps/:app_slug/datasources/:ds/stats/',
      operationId: 'datasources_stats',
      summary: 'Table counts of a data source',
      description: READ,
      params: DataSourceRef,
      responses: { 200: DataSourceStats },
      async handler(ctx, { params }) {
        ctx.body = await ds.dataSourceStats(ctx.state.service(), params.app_slug, params.ds);
      },
    }),
  ];
}
