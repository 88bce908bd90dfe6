// `platform bucket …`: the storage buckets of an app (/api/apps/{app}/storage/buckets/; docs/storage.md).
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { BucketView } from '../../shared/storage/bucket.schemas.ts';
import { DomainError, fieldError } from '../../shared/errors.ts';
import { defined, path as apiPath } from '../api.ts';
import { operation } from '../base.ts';
import { keyValues, pageTable, when, type Column } from '../output.ts';
import { pageFlags, siteFlag } from '../flags.ts';
import { bytes } from '../tables.ts';

export const appFlag = Flags.string({ summary: 'The app (slug) the bucket belongs to.', required: true });
const bucketArg = { bucket: Args.string({ description: 'The bucket (slug)', required: true }) };
export const bucketsPath = (app: string, rest = '') => apiPath`/api/apps/${app}/storage/buckets/` + rest;
const bucketPath = (f: { app: string }, bucket: string, rest = '') => bucketsPath(f.app, apiPath`${bucket}/`) + rest;

interface StorageMessage {
  success: boolean;
  message: string;
  status_code: number;
}

interface UsageBody {
  bucket: { id: number; name: string; slug: string; has_quota: boolean };
  quota: { max_size_bytes: number | null; max_size_mb: number | null; max_size_gb: number | null; max_objects: number | null };
  usage: BucketView['usage'];
  exceeded: { size: boolean; objects: boolean; any: boolean };
  percent_used: { size: number | null; objects: number | null };
  overage: { size_bytes: number; size_mb: number; objects: number };
}

const COLUMNS: Column<BucketView>[] = [
  { header: 'Slug', get: (b) => b.slug },
  { header: 'Name', get: (b) => b.name },
  { header: 'Visibility', get: (b) => b.visibility },
  { header: 'Category', get: (b) => b.app_category },
  { header: 'Objects', get: (b) => b.usage.total_objects },
  { header: 'Size', get: (b) => bytes(b.usage.total_size) },
  { header: 'Over quota', get: (b) => b.quota_exceeded },
  { header: 'Created', get: (b) => when(b.created_at) },
];

const limit = (n: number | null, show: (n: number) => string = String) => (n === null ? 'none' : show(n));

/** A bucket as `key: value` lines: its settings, then its usage against its quota. */
function bucketLines(b: BucketView): string {
  return keyValues({
    slug: b.slug,
    name: b.name,
    visibility: b.visibility,
    app_category: b.app_category,
    storage_provider: b.storage_provider,
    file_size_limit: `${b.file_size_limit} (${bytes(b.file_size_limit)})`,
    allowed_mime_types: b.allowed_mime_types.length ? b.allowed_mime_types.join(', ') : 'any',
    objects: `${b.usage.total_objects} of ${limit(b.max_objects)}`,
    size: `${b.usage.total_size} (${bytes(b.usage.total_size)}) of ${limit(b.max_size_bytes, (n) => `${n} (${bytes(n)})`)}`,
    quota_exceeded: b.quota_exceeded,
    usage_updated: when(b.usage.last_updated),
    created_at: when(b.created_at),
    updated_at: when(b.updated_at),
  });
}

/** A whole number of bytes or objects; `none` (where allowed) is null: no limit. */
function count(value: string | undefined, flag: string, none: boolean): number | null | undefined {
  if (value === undefined) return undefined;
  if (none && value.toLowerCase() === 'none') return null;
  if (!/^\d{1,15}$/.test(value)) throw fieldError(flag, `Expected a whole number${none ? ', or none for no limit' : ''}, got ${JSON.stringify(value)}.`);
  return Number(value);
}

/** `--allowed-mime-types image/*,application/pdf` → a list ('' → [], every type). */
const mimeList = (value: string | undefined) => (value === undefined ? undefined : value.split(',').map((s) => s.trim()).filter((s) => s !== ''));

const settingFlags = {
  visibility: Flags.string({ summary: 'Who may read its objects: private (the owner and staff) or public (anyone).', options: ['private', 'public'] }),
  'file-size-limit': Flags.string({ summary: 'The largest object, in bytes (default 52428800: 50 MB).' }),
  'allowed-mime-types': Flags.string({ summary: 'The types its objects may have: a comma list of type/subtype, type/* or */* ("" allows every type).' }),
  'max-size-bytes': Flags.string({ summary: 'Quota on the total size in bytes (monitoring only: uploads are never blocked); none removes it.' }),
  'max-objects': Flags.string({ summary: 'Quota on the number of objects (monitoring only); none removes it.' }),
};

type SettingFlags = { visibility?: string; 'file-size-limit'?: string; 'allowed-mime-types'?: string; 'max-size-bytes'?: string; 'max-objects'?: string };
const settings = (f: SettingFlags) => ({
  visibility: f.visibility,
  file_size_limit: count(f['file-size-limit'], 'file-size-limit', false),
  allowed_mime_types: mimeList(f['allowed-mime-types']),
  max_size_bytes: count(f['max-size-bytes'], 'max-size-bytes', true),
  max_objects: count(f['max-objects'], 'max-objects', true),
});

export const BUCKET_COMMANDS = {
  'bucket:list': operation({
    summary: 'List the storage buckets of an app.',
    description: 'Newest first unless --ordering says otherwise (name, slug, created_at, updated_at, file_size_limit; - descends). Prints the API page {count, next, previous, results} with --json.',
    examples: ['bucket list --site shop_prod --app crm', 'bucket list --visibility public --ordering name --site shop_prod --app crm --json'],
    flags: {
      site: siteFlag,
      app: appFlag,
      search: Flags.string({ summary: 'Part of the name or slug (case-insensitive).' }),
      visibility: Flags.string({ summary: 'Only private or public buckets.', options: ['private', 'public'] }),
      'app-category': Flags.string({ summary: 'Only buckets of this category.', options: ['assets', 'attachments'] }),
      ordering: Flags.string({ summary: 'Sort field, - for descending (default -created_at).' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      site: f.site,
      path: bucketsPath(f.app),
      query: { search: f.search, visibility: f.visibility, app_category: f['app-category'], ordering: f.ordering, page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<BucketView>) => pageTable(page, COLUMNS, ['bucket', 'buckets']),
  }),

  'bucket:create': operation({
    summary: 'Create a storage bucket in an app.',
    description: 'The slug is made from the name (-2, -3 … when taken). --app-category is required: assets (exported with the app) or attachments (stays with the site).',
    examples: [
      'bucket create --name Photos --app-category attachments --site shop_prod --app crm',
      "bucket create --name 'Public assets' --app-category assets --visibility public --allowed-mime-types 'image/*,application/pdf' --max-size-bytes 1000000000 --site shop_prod --app crm --json",
    ],
    flags: {
      site: siteFlag,
      app: appFlag,
      name: Flags.string({ summary: 'The bucket name.', required: true }),
      'app-category': Flags.string({ summary: 'assets (exported with the app) or attachments (stays with the site).', options: ['assets', 'attachments'], required: true }),
      'storage-provider': Flags.string({ summary: 'Where the files live: objstore (default) or doclib (the document library); cannot change later.', options: ['objstore', 'doclib'] }),
      ...settingFlags,
    },
    request: ({ flags: f }) => ({
      method: 'POST',
      site: f.site,
      path: bucketsPath(f.app),
      body: defined({ name: f.name, app_category: f['app-category'], storage_provider: f['storage-provider'], ...settings(f) }),
    }),
    render: (b: BucketView) => [`Bucket "${b.slug}" created.`, bucketLines(b)],
  }),

  'bucket:get': operation({
    summary: 'Show a bucket with its usage and quota.',
    examples: ['bucket get photos --site shop_prod --app crm', 'bucket get photos --site shop_prod --app crm --json'],
    args: bucketArg,
    flags: { site: siteFlag, app: appFlag },
    request: ({ flags: f, args }) => ({ method: 'GET', site: f.site, path: bucketPath(f, args.bucket) }),
    render: bucketLines,
  }),

  'bucket:update': operation({
    summary: 'Change the settings of a bucket (PATCH: only the flags given).',
    description: '--max-size-bytes none and --max-objects none remove a quota. The slug and the storage provider cannot change.',
    examples: ["bucket update photos --visibility public --max-objects 10000 --site shop_prod --app crm", 'bucket update photos --max-size-bytes none --site shop_prod --app crm --json'],
    args: bucketArg,
    flags: {
      site: siteFlag,
      app: appFlag,
      name: Flags.string({ summary: 'The new name (the slug stays).' }),
      'app-category': Flags.string({ summary: 'assets or attachments.', options: ['assets', 'attachments'] }),
      ...settingFlags,
    },
    request: ({ flags: f, args }) => {
      const body = defined({ name: f.name, app_category: f['app-category'], ...settings(f) });
      if (!Object.keys(body).length) {
        throw new DomainError('BAD_REQUEST', 'Nothing to change: give --name, --app-category, --visibility, --file-size-limit, --allowed-mime-types, --max-size-bytes or --max-objects.');
      }
      return { method: 'PATCH', site: f.site, path: bucketPath(f, args.bucket), body };
    },
    render: (b: BucketView) => [`Bucket "${b.slug}" updated.`, bucketLines(b)],
  }),

  'bucket:delete': operation({
    summary: 'Delete a bucket with all its objects and their files.',
    description: 'When the object store fails, nothing is deleted (the API answers 500). --json prints {success, message, status_code}.',
    examples: ['bucket delete photos --site shop_prod --app crm'],
    args: bucketArg,
    flags: { site: siteFlag, app: appFlag },
    request: ({ flags: f, args }) => ({ method: 'DELETE', site: f.site, path: bucketPath(f, args.bucket) }),
    render: (body: StorageMessage) => body.message,
  }),

  'bucket:usage': operation({
    summary: 'Show the usage of a bucket against its quota.',
    description: 'The stored counters, refreshed periodically and by `platform storage check-quotas` (see "updated"). Quotas only monitor: uploads are never blocked.',
    examples: ['bucket usage photos --site shop_prod --app crm', 'bucket usage photos --site shop_prod --app crm --json'],
    args: bucketArg,
    flags: { site: siteFlag, app: appFlag },
    request: ({ flags: f, args }) => ({ method: 'GET', site: f.site, path: bucketPath(f, args.bucket, 'usage/') }),
    render: (u: UsageBody) => {
      const pct = (p: number | null) => (p === null ? '' : ` (${p}%)`);
      return keyValues({
        bucket: u.bucket.slug,
        objects: `${u.usage.total_objects} of ${limit(u.quota.max_objects)}${pct(u.percent_used.objects)}`,
        size: `${bytes(u.usage.total_size)} of ${limit(u.quota.max_size_bytes, bytes)}${pct(u.percent_used.size)}`,
        exceeded: !u.bucket.has_quota ? 'no quota' : u.exceeded.any ? [u.exceeded.size && `size (over by ${bytes(u.overage.size_bytes)})`, u.exceeded.objects && `objects (over by ${u.overage.objects})`].filter(Boolean).join(', ') : 'no',
        updated: when(u.usage.last_updated) ?? 'never',
      });
    },
  }),
};
