// Frontend worker bodies and views (spec Part 3 §2, §4; docs/frontend-workers.md). Forms arrive
// as strings (multipart or urlencoded): booleans and ids are coerced by validate()'s query mode.
import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { StringEnum } from '../common/validation.ts';

export const BUILD_STATUSES = ['uploading', 'ready', 'failed'] as const;
const Time = Type.String({ format: 'date-time' });
const Nullable = <T extends ReturnType<typeof Type.String>>(t: T) => Type.Union([t, Type.Null()]);

export const WorkerListItem = Type.Object({
  slug: Type.String(),
  name: Type.String(),
  subdomain: Type.String({ description: 'The unprefixed base subdomain' }),
  web_url: Type.String({ description: 'The deployed address, environment prefix included' }),
  active_build_uuid: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
  app_name: Type.Union([Type.String(), Type.Null()]),
});

export const WorkerView = Type.Object(
  {
    id: Type.Integer({ description: 'What the app setting `default_frontend_worker` stores' }),
    uuid: Type.String({ format: 'uuid' }),
    ...WorkerListItem.properties,
    is_internal: Type.Boolean(),
    domain: Nullable(Type.String({ description: 'The customer base domain (external workers); null for internal ones' })),
    full_domain: Type.String({ description: 'The host the worker answers on' }),
    app: Type.Union([Type.Integer(), Type.Null()], { description: 'The app id' }),
    spa_fallback: Type.Boolean({ description: 'Unknown paths without a file extension serve /index.html (single-page apps)' }),
    created_at: Time,
    updated_at: Time,
    created_by: Nullable(Type.String()),
    modified_by: Nullable(Type.String()),
  },
  { $id: 'FrontendWorker' },
);
export type WorkerView = Static<typeof WorkerView>;
export type WorkerListItem = Static<typeof WorkerListItem>;

export const BuildView = Type.Object(
  {
    uuid: Type.String({ format: 'uuid' }),
    title: Type.String(),
    status: StringEnum(BUILD_STATUSES),
    is_active: Type.Boolean(),
    size: Type.Integer({ description: 'Bytes of the extracted files' }),
    file_count: Type.Integer(),
    stored_files: Type.Integer({ description: 'Files whose content was new to the site (the others were stored by earlier builds)' }),
    preview_url: Nullable(Type.String({ description: 'The build\'s own address (ready builds): check it before activating' })),
    error: Nullable(Type.String()),
    created_by: Nullable(Type.String()),
    created_at: Time,
    ready_at: Nullable(Time),
  },
  { $id: 'FrontendWorkerBuild' },
);
export type BuildView = Static<typeof BuildView>;

const Bool = Type.Boolean();
const AppId = Type.Union([Type.Integer({ minimum: 1 }), Type.Null()], { description: 'The app id (null: none)' });

export const WorkerCreate = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 255 }),
    subdomain_input: Type.Optional(Type.String({ maxLength: 100, description: 'Unprefixed; default: made from the name' })),
    is_internal: Type.Optional(Bool),
    domain: Type.Optional(Type.String({ maxLength: 253, description: 'Required when is_internal is false: a verified customer domain of the site' })),
    app: Type.Optional(AppId),
    build_title: Type.Optional(Type.String({ maxLength: 255 })),
    set_active: Type.Optional(Bool),
    spa_fallback: Type.Optional(Bool),
  },
  { additionalProperties: false },
);
export type WorkerCreate = Static<typeof WorkerCreate>;

export const WorkerUpdate = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
    subdomain_input: Type.Optional(Type.String({ maxLength: 100, description: 'A new (unprefixed) subdomain: the address changes, the slug stays' })),
    subdomain: Type.Optional(Type.String({ maxLength: 100, description: 'As GET shows it: a changed value is taken as subdomain_input' })),
    app: Type.Optional(AppId),
    spa_fallback: Type.Optional(Bool),
    ...readOnlyProps(WorkerView, ['id', 'uuid', 'slug', 'is_internal', 'domain', 'app_name']),
    ...readOnlyProps(WorkerView, ['web_url', 'full_domain', 'active_build_uuid', 'created_at', 'updated_at', 'created_by', 'modified_by'], 'maintained'),
  },
  { additionalProperties: false, description: 'The body of GET may be sent back whole: read-only fields are ignored when unchanged.' },
);
export type WorkerUpdate = Static<typeof WorkerUpdate>;

export const BuildUpload = Type.Object(
  {
    build_title: Type.Optional(Type.String({ maxLength: 255 })),
    set_active: Type.Optional(Bool),
    manifest: Type.Optional(Type.String({ description: 'JSON {path: SHA-256 hex} of every file of the build: the archive then carries only the contents the site lacks (POST …/builds/missing/), or no archive at all' })),
  },
  { additionalProperties: false },
);

export const MissingQuery = Type.Object({ hashes: Type.Array(Type.String({ pattern: '^[0-9a-f]{64}$' }), { maxItems: 100_000, description: 'SHA-256 (hex) of file contents' }) }, { additionalProperties: false });
export const Missing = Type.Object({ missing: Type.Array(Type.String(), { description: 'The contents the site does not hold: send these files' }) });

export const WorkerListQuery = Type.Object({
  ...PageParams,
  search: Type.Optional(Type.String({ maxLength: 255, description: 'Part of the name' })),
  ordering: Type.Optional(StringEnum(['created_at', '-created_at', 'updated_at', '-updated_at'] as const)),
  app: Type.Optional(Type.Integer({ minimum: 1, description: 'The app id' })),
});

export const AvailabilityQuery = Type.Object({
  subdomain: Type.String({ description: 'Unprefixed' }),
  exclude_slug: Type.Optional(Type.String()),
  is_internal: Type.Optional(Bool),
  domain: Type.Optional(Type.String()),
});

export const Suggestion = Type.Object({ subdomain: Type.String(), full_domain: Type.String(), reason: StringEnum(['context-aware', 'semantic', 'smart-numeric', 'fallback'] as const) });

export const Availability = Type.Object({
  subdomain: Type.String(),
  available: Type.Boolean(),
  full_domain: Type.String(),
  domain: Type.String(),
  is_internal: Type.Boolean(),
  message: Type.String(),
  conflicts_with: Type.Optional(Type.Object({ worker_slug: Type.String(), worker_name: Type.String() })),
  suggestions: Type.Optional(Type.Array(Suggestion)),
});
