// Function bodies and views (functions inside apps: Part 2 names them; routes are ours,
// docs/functions.md), invocation records, and the event subscription bodies of Part 1 §6.
import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { StringEnum } from '../common/validation.ts';

export const RUNTIMES = ['javascript'] as const;
export const DEFAULT_TIMEOUT_SECONDS = 300;
/** The longest timeout: the SDK's access token (15 minutes) must outlive the invocation. */
export const MAX_TIMEOUT_SECONDS = 900;
export const MAX_CODE_BYTES = 256 * 1024;
export const INVOCATION_STATUSES = ['queued', 'running', 'succeeded', 'failed', 'timed_out'] as const;
export const ENV_NAME = '^[A-Z_][A-Z0-9_]{0,63}$';

const Environment = Type.Record(Type.String({ pattern: ENV_NAME }), Type.String({ minLength: 1, maxLength: 255 }), {
  maxProperties: 50,
  additionalProperties: false,
  description: 'Variable name → the key of a secret of the site (the app\'s own secret of that key, else the tenant-wide one); the handler reads `context.env.NAME`.',
});

export const FunctionView = Type.Object(
  {
    id: Type.Integer(),
    uuid: Type.String({ format: 'uuid' }),
    name: Type.String(),
    slug: Type.String(),
    description: Type.String(),
    runtime: StringEnum(RUNTIMES),
    code: Type.String(),
    timeout: Type.Integer({ description: 'Seconds' }),
    environment: Environment,
    is_active: Type.Boolean(),
    app: Type.Integer(),
    app_slug: Type.String(),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    created_by: Type.Union([Type.String(), Type.Null()]),
    modified_by: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'Function' },
);
export type FunctionView = Static<typeof FunctionView>;

const writable = {
  name: Type.String({ minLength: 1, maxLength: 255, description: 'The function name (on creation, the slug is made from it)' }),
  description: Type.String({ maxLength: 10_000, description: 'What it does' }),
  runtime: StringEnum(RUNTIMES),
  code: Type.String({ minLength: 1, description: `An ES module exporting the handler: \`export default async function (event, context) { … }\` (at most ${MAX_CODE_BYTES / 1024} KiB)` }),
  timeout: Type.Integer({ minimum: 1, maximum: MAX_TIMEOUT_SECONDS, description: `Seconds (default ${DEFAULT_TIMEOUT_SECONDS})` }),
  environment: Environment,
  is_active: Type.Boolean({ description: 'An inactive function is neither invoked nor run by events' }),
};

export const FunctionCreate = Type.Object(
  {
    name: writable.name,
    slug: Type.Optional(Type.String({ minLength: 1, maxLength: 100, pattern: '^[a-z0-9]+(?:-[a-z0-9]+)*$', description: 'Made from the name when absent; immutable' })),
    code: writable.code,
    description: Type.Optional(writable.description),
    runtime: Type.Optional(writable.runtime),
    timeout: Type.Optional(writable.timeout),
    environment: Type.Optional(writable.environment),
    is_active: Type.Optional(writable.is_active),
  },
  { additionalProperties: false },
);
export type FunctionCreate = Static<typeof FunctionCreate>;

/** PUT and PATCH: the writable fields; the rest of GET may be sent back unchanged. */
export const FunctionUpdate = Type.Object(
  {
    ...Object.fromEntries(Object.entries(writable).map(([k, v]) => [k, Type.Optional(v)])),
    ...readOnlyProps(FunctionView, ['id', 'uuid', 'slug', 'app', 'app_slug']),
    ...readOnlyProps(FunctionView, ['created_at', 'updated_at', 'created_by', 'modified_by'], 'maintained'),
  },
  { additionalProperties: false },
) as unknown as ReturnType<typeof Type.Object<typeof writable>>;
export type FunctionUpdate = Partial<Static<typeof FunctionCreate>>;

export const FunctionRef = Type.Object({ app_slug: Type.String({ description: 'The app slug' }), function_slug: Type.String({ description: 'The function slug' }) });

export const FunctionListQuery = Type.Object({
  search: Type.Optional(Type.String({ description: 'Part of the name or slug (case-insensitive)' })),
  is_active: Type.Optional(StringEnum(['true', 'false'] as const)),
  ...PageParams,
});

export const InvokeBody = Type.Object(
  {
    payload: Type.Optional(Type.Unknown({ description: "The handler's `event` (any JSON; default null)" })),
    async: Type.Optional(Type.Boolean({ description: 'true: answer 202 at once with the queued invocation; false (default): wait for the result (up to the timeout)' })),
  },
  { additionalProperties: false },
);

const LogLine = Type.Object({ level: Type.String(), message: Type.String(), at: Type.String({ format: 'date-time' }) });

export const InvocationView = Type.Object(
  {
    id: Type.Integer(),
    uuid: Type.String({ format: 'uuid' }),
    function: Type.Integer(),
    function_slug: Type.String(),
    trigger: StringEnum(['api', 'event'] as const),
    event: Type.Union([Type.String(), Type.Null()]),
    status: StringEnum(INVOCATION_STATUSES),
    payload: Type.Unknown(),
    result: Type.Unknown({ description: "The handler's return value (JSON); null unless succeeded" }),
    error: Type.Union([Type.Object({ type: Type.String(), message: Type.String(), stack: Type.Optional(Type.String()) }), Type.Null()]),
    logs: Type.Array(LogLine),
    invoked_by: Type.Union([Type.String({ format: 'uuid' }), Type.Null()]),
    attempts: Type.Integer(),
    duration_ms: Type.Union([Type.Integer(), Type.Null()]),
    cpu_ms: Type.Union([Type.Integer(), Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    started_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
    finished_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  },
  { $id: 'FunctionInvocation' },
);
export type InvocationView = Static<typeof InvocationView>;

export const InvocationListQuery = Type.Object({
  status: Type.Optional(StringEnum(INVOCATION_STATUSES)),
  trigger: Type.Optional(StringEnum(['api', 'event'] as const)),
  ...PageParams,
});

// ---- events (spec Part 1 §6) ----
export const EVENT_TYPES = ['PRE_USER_CREATE', 'POST_USER_CREATE'] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export const SubscribeBody = Type.Object({ function_id: Type.Integer({ minimum: 1, description: 'The function (its integer id, of any app of the site)' }) }, { additionalProperties: false });

export const SubscriptionView = Type.Object({
  id: Type.Integer(),
  event: Type.String(),
  function: Type.Integer(),
  function_name: Type.String(),
  function_slug: Type.String(),
  app_name: Type.String(),
  app_slug: Type.String(),
  created_at: Type.String({ format: 'date-time' }),
  updated_at: Type.String({ format: 'date-time' }),
});
export type SubscriptionView = Static<typeof SubscriptionView>;

export const AppEventView = Type.Object({
  event: Type.String(),
  app: Type.Object({ id: Type.Integer(), name: Type.String(), slug: Type.String() }),
  total_subscribers: Type.Integer(),
  subscribers: Type.Array(
    Type.Object({
      subscriber_id: Type.Integer(),
      event: Type.String(),
      function_id: Type.Integer(),
      function_name: Type.String(),
      function_slug: Type.String(),
      app_id: Type.Integer(),
      app_name: Type.String(),
      app_slug: Type.String(),
      created_at: Type.String({ format: 'date-time' }),
    }),
  ),
});
export type AppEventView = Static<typeof AppEventView>;
