// `platform storage …`: storage work on a whole site (/api/storage/…), or on every site (--direct).
import { Flags } from '@oclif/core';
import { DomainError } from '../../shared/errors.ts';
import { api } from '../base.ts';
import { columns, table } from '../output.ts';

interface CheckQuotasBody {
  message: string;
  data: { buckets: number; exceeded: { app: string; slug: string; site?: string }[]; sites?: number };
}

/** The spec's management command `check_storage_quotas`, under both names: one site (the API), or every site (--direct, on the database). */
class StorageCheckQuotasCommand extends api('storage_check_quotas', {
  description:
    'With --site, the site\'s buckets (its administrators), in remote or direct mode. Without it, with --direct, every site in turn, a progress line each, as the servers\' periodic storage maintenance does (STORAGE_MAINTENANCE_INTERVAL_MS): for a scheduler when that is off.',
  examples: ['storage check-quotas --site shop_prod', 'check_storage_quotas --site shop_prod --json', 'storage check-quotas --direct'],
  flags: { site: Flags.string({ summary: 'The site (its schema name). Without it (with --direct): every site.' }) },
  render: ({ message, data: { exceeded } }: CheckQuotasBody) =>
    exceeded.length ? [message, `${exceeded.length} over quota:`, table(exceeded, columns('app slug:bucket'))] : [message, 'No bucket is over its quota.'],
}) {
  static override aliases = ['check_storage_quotas'];

  override async run(): Promise<CheckQuotasBody> {
    const flags = this.flags as { site?: string; direct?: boolean };
    if (flags.site !== undefined) return super.run();
    if (!flags.direct) throw new DomainError('BAD_REQUEST', 'Name a site with --site, or check every site with --direct (on the database).');
    const { checkQuotasEverySite } = await import('../../shared/storage/bucket.service.ts');
    return this.withDatabase(async (db) => {
      const { sites, buckets, exceeded: all } = await checkQuotasEverySite(db.orm.em.fork(), (site, i, total, r) =>
        this.info(`[${i + 1}/${total}] ${site}: ${r.buckets} bucket(s), ${r.exceeded.length} over quota`),
      );
      const exceeded = all.map(({ site, app, slug }) => ({ site, app, slug }));
      const message = `Usage refreshed for ${buckets} buckets in ${sites} sites.`;
      this.log(message);
      this.log(exceeded.length ? [`${exceeded.length} over quota:`, table(exceeded, columns('site app slug:bucket'))].join('\n') : 'No bucket is over its quota.');
      // The API's body, for every site: each bucket over quota names its site.
      return { success: true, message, status_code: 200, data: { sites, buckets, exceeded } };
    });
  }
}

export const STORAGE_COMMANDS = {
  'storage:check-quotas': StorageCheckQuotasCommand,
};
