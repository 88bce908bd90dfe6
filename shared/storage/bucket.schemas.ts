// Bucket bodies and views (spec Part 3 §2 "Bucket", §4 "Buckets").
import { Type, type Static } from '@sinclair/typebox';
import { PageParams } from '../common/pagination.ts';
import { readOnlyProps } from '../common/read-only.ts';
import { StringEnum } from '../common/validation.ts';

export const VISIBILITIES = ['private', 'public'] as const;
export const APP_CATEGORIES = ['assets', 'attachments'] as const;
export const STORAGE_PROVIDERS = ['objstore', 'doclib'] as const;
export const DEFAULT_FILE_SIZE_LIMIT = 52_428_800;

const Quota = (what: string) => Type.Union([Type.Integer(), Type.Null()], { description: `${what} (monitoring only: uploads are never blocked): a positive integer, or null for no limit` });

export const BucketUsage = Type.Object({
  total_size: Type.Integer(),
  total_objects: Type.Integer(),
  size_mb: Type.Number(),
  size_gb: Type.Number(),
  last_updated: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
});

export const QuotaStatus = Type.Object({
  exceeded: Type.Object({ size: Type.Boolean(), objects: Type.Boolean(), any: Type.Boolean() }),
  percent_used: Type.Object({ size: Type.Union([Type.Number(), Type.Null()]), objects: Type.Union([Type.Number(), Type.Null()]) }),
  overage: Type.Object({ size_bytes: Type.Integer(), size_mb: Type.Number(), objects: Type.Integer() }),
});

export const BucketView = Type.Object(
  {
    id: Type.Integer(),
    uuid: Type.String({ format: 'uuid' }),
    name: Type.String(),
    slug: Type.String(),
    visibility: StringEnum(VISIBILITIES),
    file_size_limit: Type.Integer(),
    allowed_mime_types: Type.Array(Type.String()),
    app_category: StringEnum(APP_CATEGORIES),
    storage_provider: StringEnum(STORAGE_PROVIDERS),
    app: Type.Integer(),
    object_count: Type.Integer(),
    max_size_bytes: Type.Union([Type.Integer(), Type.Null()]),
    max_size_mb: Type.Union([Type.Number(), Type.Null()]),
    max_size_gb: Type.Union([Type.Number(), Type.Null()]),
    max_objects: Type.Union([Type.Integer(), Type.Null()]),
    quota_exceeded: Type.Boolean(),
    usage: BucketUsage,
    quota_status: Type.Union([QuotaStatus, Type.Null()]),
    created_at: Type.String({ format: 'date-time' }),
    updated_at: Type.String({ format: 'date-time' }),
    created_by: Type.Union([Type.String(), Type.Null()]),
    modified_by: Type.Union([Type.String(), Type.Null()]),
  },
  { $id: 'Bucket' },
);
export type BucketView = Static<typeof BucketView>;

const writable = {
  name: Type.String({ minLength: 1, maxLength: 255, description: 'Under 50 characters is recommended (the slug is made from it)' }),
  app_category: StringEnum(APP_CATEGORIES, { description: '`assets` (exported with the app) or `attachments` (stays with the site)' }),
  visibility: StringEnum(VISIBILITIES),
  file_size_limit: Type.Integer({ minimum: 1, description: `Bytes per object (default ${DEFAULT_FILE_SIZE_LIMIT})` }),
  allowed_mime_types: Type.Array(Type.String(), { maxItems: 100, description: '`type/subtype`, `type/*` or `*/*`; empty: every type' }),
  max_size_bytes: Quota('Quota on the total size in bytes'),
  max_objects: Quota('Quota on the number of objects'),
};

export const BucketCreate = Type.Object(
  {
    name: writable.name,
    app_category: writable.app_category,
    visibility: Type.Optional(writable.visibility),
    storage_provider: Type.Optional(StringEnum(STORAGE_PROVIDERS, { description: 'Immutable after creation' })),
    file_size_limit: Type.Optional(writable.file_size_limit),
    allowed_mime_types: Type.Optional(writable.allowed_mime_types),
    max_size_bytes: Type.Optional(writable.max_size_bytes),
    max_objects: Type.Optional(writable.max_objects),
  },
  { additionalProperties: false },
);
export type BucketCreate = Static<typeof BucketCreate>;

/** PATCH: the writable fields; what GET returns besides is read-only (ignored when unchanged, 400 otherwise). */
export const BucketPatch = Type.Object(
  {
    ...Object.fromEntries(Object.entries(writable).map(([k, v]) => [k, Type.Optional(v)])),
    ...readOnlyProps(BucketView, ['id', 'uuid', 'slug', 'app', 'storage_provider']),
    ...readOnlyProps(BucketView, ['object_count', 'max_size_mb', 'max_size_gb', 'quota_exceeded', 'usage', 'quota_status', 'created_at', 'updated_at', 'created_by', 'modified_by'], 'maintained'),
  },
  { additionalProperties: false },
) as unknown as ReturnType<typeof Type.Object<typeof writable>>;
export type BucketPatch = Partial<Static<typeof BucketCreate>>;

export const BucketRef = Type.Object({ app_slug: Type.String({ description: 'The app slug' }), bucket: Type.String({ description: 'The bucket slug' }) });

export const BucketListQuery = Type.Object({
  search: Type.Optional(Type.String({ description: 'Part of the name or slug (case-insensitive)' })),
  ordering: Type.Optional(Type.String({ description: '`name`, `slug`, `created_at`, `updated_at`, `file_size_limit`; `-` descends (default `-created_at`)' })),
  visibility: Type.Optional(StringEnum(VISIBILITIES)),
  app_category: Type.Optional(StringEnum(APP_CATEGORIES)),
  ...PageParams,
});

export const BucketUsageBody = Type.Object({
  bucket: Type.Object({ id: Type.Integer(), name: Type.String(), slug: Type.String(), has_quota: Type.Boolean() }),
  quota: Type.Object({
    max_size_bytes: Type.Union([Type.Integer(), Type.Null()]),
    max_size_mb: Type.Union([Type.Number(), Type.Null()]),
    max_size_gb: Type.Union([Type.Number(), Type.Null()]),
    max_objects: Type.Union([Type.Integer(), Type.Null()]),
  }),
  usage: BucketUsage,
  ...QuotaStatus.properties,
});
