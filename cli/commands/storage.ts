// `platform storage …`: storage work on a whole site (/api/storage/…).
import { siteFlag } from '../flags.ts';
import { operation } from '../base.ts';
import { table } from '../output.ts';

interface CheckQuotasBody {
  success: boolean;
  message: string;
  status_code: number;
  data: { buckets: number; exceeded: { app: string; app_id: number; slug: string }[] };
}

/** The spec's management command `check_storage_quotas`, under both names. */
class StorageCheckQuotasCommand extends operation({
  summary: 'Refresh the usage counters and quota state of every bucket of a site.',
  description:
    'POST /api/storage/check-quotas/ (the spec\'s check_storage_quotas; servers also run it every STORAGE_MAINTENANCE_INTERVAL_MS). Prints how many buckets were refreshed and those over a quota (quotas only monitor: uploads are never blocked). Site administrators. --json prints {success, message, status_code, data: {buckets, exceeded: [{app, app_id, slug}]}}.',
  examples: ['storage check-quotas --site shop_prod', 'check_storage_quotas --site shop_prod --json'],
  flags: { site: siteFlag },
  request: ({ flags }) => ({ method: 'POST', site: flags.site, path: '/api/storage/check-quotas/' }),
  render: (body: CheckQuotasBody) => {
    const { exceeded } = body.data;
    if (!exceeded.length) return [body.message, 'No bucket is over its quota.'];
    return [body.message, `${exceeded.length} over quota:`, table(exceeded, [{ header: 'App', get: (b) => b.app }, { header: 'Bucket', get: (b) => b.slug }])];
  },
}) {
  static override aliases = ['check_storage_quotas'];
}

export const STORAGE_COMMANDS = {
  'storage:check-quotas': StorageCheckQuotasCommand,
};
