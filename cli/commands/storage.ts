// `platform storage …`: storage work on a whole site (/api/storage/…).
import { api } from '../base.ts';
import { columns, table } from '../output.ts';

interface CheckQuotasBody {
  message: string;
  data: { buckets: number; exceeded: { app: string; slug: string }[] };
}

/** The spec's management command `check_storage_quotas`, under both names. */
class StorageCheckQuotasCommand extends api('storage_check_quotas', {
  examples: ['storage check-quotas --site shop_prod', 'check_storage_quotas --site shop_prod --json'],
  render: ({ message, data: { exceeded } }: CheckQuotasBody) =>
    exceeded.length ? [message, `${exceeded.length} over quota:`, table(exceeded, columns('app slug:bucket'))] : [message, 'No bucket is over its quota.'],
}) {
  static override aliases = ['check_storage_quotas'];
}

export const STORAGE_COMMANDS = {
  'storage:check-quotas': StorageCheckQuotasCommand,
};
