// Frontend workers (spec Part 3 §4, tenant level; docs/frontend-workers.md): list, subdomain
// availability, create (multipart with the archive, or a plain form/JSON without one), PATCH;
// and the routes the spec leaves open: detail, PUT (GET's body back), delete, builds (list,
// upload, detail, activate, delete). Answers in {success, message, status_code, data}; lists add
// total, page, page_size, total_pages; errors in the flag form too.
import path from 'node:path';
import { Type, type TSchema } from '@sinclair/typebox';
import type { Config } from '../../shared/config.ts';
import { DomainError } from '../../shared/errors.ts';
import type { Page } from '../../shared/common/pagination.ts';
import type { ObjectStore } from '../../shared/storage/objstore/types.ts';
import * as workers from '../../shared/workers/worker.service.ts';
import { Availability, AvailabilityQuery, BuildView, Missing, MissingQuery, WorkerListItem, WorkerListQuery, WorkerUpdate, WorkerView } from '../../shared/workers/worker.schemas.ts';
import { FlaggedBody, sendFlagged } from '../http/envelopes.ts';
import { withMultipart, type MultipartForm } from '../http/multipart.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';
import type { AppContext } from '../http/types.ts';

const BASE = '/api/frontend_workers/';
const ONE = `${BASE}:slug/`;
const BUILDS = `${ONE}builds/`;
const BUILD = `${BUILDS}:build/`;
const ADMIN = 'Site administrators (superusers and staff) only.';
const SlugRef = Type.Object({ slug: Type.String() });
const BuildRef = Type.Object({ slug: Type.String(), build: Type.String({ description: 'The build uuid' }) });

const listAnswer = (item: TSchema) =>
  Type.Object({ success: Type.Literal(true), message: Type.String(), status_code: Type.Integer(), data: Type.Array(item), total: Type.Integer(), page: Type.Integer(), page_size: Type.Integer(), total_pages: Type.Integer() });

const ok = (ctx: AppContext, message: string, data: unknown, status = 200): void => sendFlagged(ctx, status, message, data);

function okPage<T>(ctx: AppContext, message: string, page: Page<T>): void {
  ctx.body = { success: true, message, status_code: 200, data: page.results, total: page.count, page: page.page, page_size: page.pageSize, total_pages: Math.max(1, Math.ceil(page.count / page.pageSize)) };
}

export function frontendWorkerRoutes(options: { config: Config; store: ObjectStore }): RouteDef[] {
  const { config } = options;
  const deps: workers.WorkerDeps = {
    store: options.store,
    settings: config,
    limits: { maxFiles: config.workers.maxFiles, maxTotalBytes: config.workers.maxTotalBytes },
    keepBuilds: config.workers.keepBuilds,
  };
  const tmpDir = path.join(config.dataDir, 'tmp');
  const tooLarge = () => new DomainError('PAYLOAD_TOO_LARGE', `The archive is larger than ${config.workers.uploadLimitBytes} bytes (WORKER_UPLOAD_LIMIT_BYTES).`, { errors: { file: [`Ensure the archive is at most ${config.workers.uploadLimitBytes} bytes.`] } });
  /** The form of a create or an upload: multipart (with `file`), else the parsed urlencoded or JSON body. */
  const form = <T>(ctx: AppContext, use: (f: MultipartForm) => Promise<T>): Promise<T> =>
    ctx.is('multipart/form-data')
      ? withMultipart(ctx, { tmpDir, fileField: 'file', maxFileSize: config.workers.uploadLimitBytes, tooLarge }, use)
      : use({ fields: ((ctx.request as { body?: Record<string, unknown> }).body ?? {}) as Record<string, unknown> });
  const base = { scope: 'tenant' as const, auth: 'user' as const, tags: ['frontend workers'], errorForm: 'flag' as const };

  return [
    defineRoute({
      ...base,
      method: 'get',
      path: BASE,
      operationId: 'frontend_workers_list',
      summary: 'List the frontend workers of the site',
      description: `\`search\` (part of the name), \`ordering\` (±created_at, ±updated_at; default -created_at), \`app\` (the app id), \`page\`, \`page_size\`. ${ADMIN}`,
      query: WorkerListQuery,
      responses: { 200: listAnswer(WorkerListItem) },
      async handler(ctx, { query }) {
        okPage(ctx, 'Frontend workers retrieved.', await workers.listWorkers(ctx.state.service(), deps, query));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: `${BASE}check-subdomain-availability/`,
      operationId: 'frontend_workers_check_subdomain',
      summary: 'Whether a subdomain is free, with suggestions when it is not',
      description: `\`subdomain\` (unprefixed; 400 with errors.subdomain when malformed), \`is_internal\` (default true), \`domain\` (external only), \`exclude_slug\` (a worker whose own address counts as free). Addresses are global: \`conflicts_with\` names the holder only when it is a worker of this site. Up to 5 suggestions, each verified free. ${ADMIN}`,
      query: AvailabilityQuery,
      responses: { 200: FlaggedBody(Availability) },
      async handler(ctx, { query }) {
        const data = await workers.checkAvailability(ctx.state.service(), deps, query);
        ok(ctx, data.message, data);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: BASE,
      operationId: 'frontend_workers_create',
      summary: 'Create a frontend worker, optionally with its first build',
      description:
        'multipart/form-data (with `file`: a .zip, .tar, .tar.gz or .tgz archive of the built site), application/x-www-form-urlencoded or JSON: `name` (required), `subdomain_input` (default: from the name), `is_internal` (default true), `domain` (required when is_internal is false: a verified domain of the site), `app` (id), `build_title` (default: from the file name), `set_active` (default false), `spa_fallback` (default true). A refused archive creates nothing. ' +
        ADMIN,
      responses: { 201: FlaggedBody(Type.Composite([WorkerView, Type.Object({ build: Type.Union([BuildView, Type.Null()]) })])) },
      async handler(ctx) {
        const data = await form(ctx, ({ fields, file }) => workers.createWorker(ctx.state.service(), deps, fields, file));
        ok(ctx, 'Frontend worker created.', data, 201);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: ONE,
      operationId: 'frontend_workers_retrieve',
      summary: 'Get a frontend worker',
      description: ADMIN,
      params: SlugRef,
      responses: { 200: FlaggedBody(WorkerView) },
      async handler(ctx, { params }) {
        ok(ctx, 'Frontend worker retrieved.', await workers.getWorker(ctx.state.service(), deps, params.slug!));
      },
    }),
    ...(['patch', 'put'] as const).map((method) =>
      defineRoute({
        ...base,
        method,
        path: ONE,
        operationId: method === 'patch' ? 'frontend_workers_partial_update' : 'frontend_workers_update',
        summary: method === 'patch' ? 'Update a frontend worker' : 'Update a frontend worker (GET\'s body may be sent back whole)',
        description: `Writable: name, subdomain_input (a new address; the slug stays, the builds serve at once on the new host and the old host stops), app, spa_fallback. ${ADMIN}`,
        params: SlugRef,
        body: WorkerUpdate,
        responses: { 200: FlaggedBody(WorkerView) },
        async handler(ctx, { params, body }) {
          ok(ctx, 'Frontend worker updated.', await workers.updateWorker(ctx.state.service(), deps, params.slug!, body));
        },
      }),
    ),
    defineRoute({
      ...base,
      method: 'delete',
      path: ONE,
      operationId: 'frontend_workers_destroy',
      summary: 'Delete a frontend worker with its builds',
      description: `Its address stops serving at once; an app whose default_frontend_worker it was has none. ${ADMIN}`,
      params: SlugRef,
      responses: { 200: FlaggedBody(Type.Null()) },
      async handler(ctx, { params }) {
        await workers.deleteWorker(ctx.state.service(), deps, params.slug!);
        ok(ctx, 'Frontend worker deleted.', null);
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: BUILDS,
      operationId: 'frontend_workers_builds_list',
      summary: 'List the builds of a frontend worker (newest first)',
      description: `Each with its status (uploading, ready, failed), whether it is active, and its preview address. ${ADMIN}`,
      params: SlugRef,
      query: Type.Object({ page: Type.Optional(Type.String()), page_size: Type.Optional(Type.String()) }),
      responses: { 200: listAnswer(BuildView) },
      async handler(ctx, { params, query }) {
        okPage(ctx, 'Builds retrieved.', await workers.listBuilds(ctx.state.service(), deps, params.slug!, query));
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: BUILDS,
      operationId: 'frontend_workers_builds_create',
      summary: 'Upload a new build',
      description: `multipart/form-data: \`file\` (.zip, .tar, .tar.gz or .tgz), \`build_title\`, \`set_active\` (default false), \`manifest\` (JSON {path: SHA-256} of every file: the archive then carries only the contents the site lacks — ask builds/missing/ — or is left out when it lacks none). Only contents the site does not hold yet are stored. ${ADMIN}`,
      params: SlugRef,
      responses: { 201: FlaggedBody(BuildView) },
      async handler(ctx, { params }) {
        const data = await form(ctx, ({ fields, file }) => workers.uploadBuild(ctx.state.service(), deps, params.slug!, fields, file));
        ok(ctx, 'Build uploaded.', data, 201);
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: `${BUILDS}missing/`,
      operationId: 'frontend_workers_builds_missing',
      bodyLimit: 'data', // 100,000 hashes are 6.7 MB
      summary: 'Which file contents a new build must send',
      description: `Body {hashes: [SHA-256 hex of each file's content]}; answers {missing: [those the site does not hold]}. A deploy then uploads only those files with the build's \`manifest\` (Netlify-style: a build that changes 3 files sends 3). ${ADMIN}`,
      params: SlugRef,
      body: MissingQuery,
      responses: { 200: FlaggedBody(Missing) },
      async handler(ctx, { params, body }) {
        ok(ctx, 'Missing contents listed.', await workers.missingContents(ctx.state.service(), params.slug!, body));
      },
    }),
    defineRoute({
      ...base,
      method: 'get',
      path: BUILD,
      operationId: 'frontend_workers_builds_retrieve',
      summary: 'Get a build',
      description: ADMIN,
      params: BuildRef,
      responses: { 200: FlaggedBody(BuildView) },
      async handler(ctx, { params }) {
        ok(ctx, 'Build retrieved.', await workers.getBuild(ctx.state.service(), deps, params.slug!, params.build!));
      },
    }),
    defineRoute({
      ...base,
      method: 'post',
      path: `${BUILD}activate/`,
      operationId: 'frontend_workers_builds_activate',
      summary: 'Make a build the active one (deploy or roll back)',
      description: `A ready build only (409 otherwise). Every request after the switch is served by it; none mixes two builds. ${ADMIN}`,
      params: BuildRef,
      responses: { 200: FlaggedBody(WorkerView) },
      async handler(ctx, { params }) {
        ok(ctx, 'Build activated.', await workers.activateBuild(ctx.state.service(), deps, params.slug!, params.build!));
      },
    }),
    defineRoute({
      ...base,
      method: 'delete',
      path: BUILD,
      operationId: 'frontend_workers_builds_destroy',
      summary: 'Delete a build',
      description: `Not the active build (409). Its files go unless another build holds them. ${ADMIN}`,
      params: BuildRef,
      responses: { 200: FlaggedBody(Type.Null()) },
      async handler(ctx, { params }) {
        await workers.deleteBuild(ctx.state.service(), deps, params.slug!, params.build!);
        ok(ctx, 'Build deleted.', null);
      },
    }),
  ];
}
