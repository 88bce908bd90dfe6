// `platform bucket …`: the storage buckets of an app (/api/apps/{app}/storage/buckets/; docs/storage.md).
import type { Static } from '@sinclair/typebox';
import type { BucketUsageBody, BucketView } from '../../shared/storage/bucket.schemas.ts';
import { fieldError } from '../../shared/errors.ts';
import { api, type ApiSpec } from '../base.ts';
import { keyValues, pageOf, when } from '../output.ts';
import { bytes } from '../tables.ts';

const limit = (n: number | null, show: (n: number) => string = String) => (n === null ? 'none' : show(n));

/** A bucket as `key: value` lines: its settings, then its usage against its quota. */
const bucketLines = (b: BucketView) =>
  keyValues({
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

/** A quota flag: a whole number, or none (or null): no limit. */
function quota(value: string | undefined, flag: string): number | null | undefined {
  if (value === undefined) return undefined;
  if (/^(none|null)$/i.test(value)) return null;
  if (!/^\d{1,15}$/.test(value)) throw fieldError(flag, `Expected a whole number, or none for no limit, got ${JSON.stringify(value)}.`);
  return Number(value);
}

const one = { args: ['bucket'] };

/** The settings given otherwise than the API takes them: types also as a comma list ('' allows every type), quotas as `none`. */
const settings: ApiSpec<{}, {}, BucketView>['body'] = ({ flags: f }) => ({
  allowed_mime_types: (f['allowed-mime-types'] as string[] | undefined)?.flatMap((s) => s.split(',')).map((s) => s.trim()).filter(Boolean),
  max_size_bytes: quota(f['max-size-bytes'], 'max-size-bytes'),
  max_objects: quota(f['max-objects'], 'max-objects'),
});

export const BUCKET_COMMANDS = {
  'bucket:list': api('storage_buckets_list', {
    examples: ['bucket list --site shop_prod --app crm', 'bucket list --visibility public --ordering name --site shop_prod --app crm --json'],
    render: pageOf<BucketView>(['bucket', 'buckets'], 'slug name visibility app_category:category usage.total_objects:objects usage.total_size:size quota_exceeded:over_quota created_at:created', {
      'usage.total_size': (b) => bytes(b.usage.total_size),
    }),
  }),
  'bucket:create': api('storage_buckets_create', {
    body: settings,
    examples: ["bucket create --name Photos --app-category attachments --allowed-mime-types 'image/*,application/pdf' --max-objects 10000 --site shop_prod --app crm"],
    render: (b: BucketView) => [`Bucket "${b.slug}" created.`, bucketLines(b)],
  }),
  'bucket:get': api('storage_buckets_retrieve', { ...one, examples: ['bucket get photos --site shop_prod --app crm'], render: bucketLines }),
  'bucket:update': api('storage_buckets_partial_update', {
    ...one,
    body: settings,
    examples: ['bucket update photos --visibility public --max-objects 10000 --site shop_prod --app crm', 'bucket update photos --max-size-bytes none --site shop_prod --app crm --json'],
    render: (b: BucketView) => [`Bucket "${b.slug}" updated.`, bucketLines(b)],
  }),
  'bucket:delete': api('storage_buckets_destroy', { ...one, examples: ['bucket delete photos --site shop_prod --app crm'], render: (body: { message: string }) => body.message }),
  'bucket:usage': api('storage_buckets_usage', {
    ...one,
    examples: ['bucket usage photos --site shop_prod --app crm --json'],
    render: (u: Static<typeof BucketUsageBody>) => {
      const pct = (p: number | null) => (p === null ? '' : ` (${p}%)`);
      const over = [u.exceeded.size && `size (over by ${bytes(u.overage.size_bytes)})`, u.exceeded.objects && `objects (over by ${u.overage.objects})`];
      return keyValues({
        bucket: u.bucket.slug,
        objects: `${u.usage.total_objects} of ${limit(u.quota.max_objects)}${pct(u.percent_used.objects)}`,
        size: `${bytes(u.usage.total_size)} of ${limit(u.quota.max_size_bytes, bytes)}${pct(u.percent_used.size)}`,
        exceeded: !u.bucket.has_quota ? 'no quota' : u.exceeded.any ? over.filter(Boolean).join(', ') : 'no',
        updated: when(u.usage.last_updated) ?? 'never',
      });
    },
  }),
};
