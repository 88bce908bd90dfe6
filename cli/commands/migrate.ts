import { Flags } from '@oclif/core';
import { BaseCommand } from '../base.ts';
import { columns, table } from '../output.ts';

export default class MigrateCommand extends BaseCommand<typeof MigrateCommand> {
  static override summary = 'Apply pending platform and site-schema migrations, or show their status.';
  static override description =
    'Platform migrations first, then the tenant migrations of every site schema (progress on stderr; a schema that fails is reported and the others still run; running again resumes). Works on the database directly (DATABASE_DIRECT_URL, else DATABASE_URL, else the embedded PostgreSQL, which is stopped afterwards if this process started it); behind a transaction pooler it also sets the defaults of the role its connections need. Safe to run while servers run: migrators are serialised by advisory locks.';
  static override examples = ['<%= config.bin %> migrate', '<%= config.bin %> migrate --status --json'];
  static override flags = {
    status: Flags.boolean({ summary: 'List executed and pending migrations; apply nothing.' }),
  };

  protected override interruption(): string {
    return this.flags?.status ? 'nothing was changed' : 'each migration is applied whole or not at all: those that finished stay applied, the one running was rolled back; run `platform migrate` again to resume';
  }

  async run() {
    // Loaded here, not at the top: oclif imports every command module to list them, and the
    // ORM should only cost the commands that use it.
    const { migratePlatform, migrationStatus } = await import('../../shared/db/orm.ts');
    const { pooledSettings } = await import('../../shared/db/pooler.ts');
    const { migrateAllTenants, tenantStatus } = await import('../../shared/tenancy/migrations.ts');
    return this.withDatabase(async (db, config) => {
      const status = await migrationStatus(db.orm);
      if (this.flags.status) {
        const rows = [...status.executed.map((name) => ({ name, state: 'executed' })), ...status.pending.map((name) => ({ name, state: 'pending' }))];
        this.log(rows.length ? table(rows, columns('name:migration state:status')) : 'No migrations.');
        const tenants = status.pending.length ? [] : await tenantStatus(db.orm.em.fork());
        if (tenants.length) this.log(table(tenants, columns('schema site version pending last_error', { version: (r) => `${r.version}/${r.current}`, last_error: (r) => r.last_error ?? '' })));
        return { ...status, tenants };
      }
      if (status.pending.length) this.info(`Applying ${status.pending.length} platform migration(s): ${status.pending.join(', ')}`);
      // Behind a transaction pooler: its connections' session settings are the role's defaults (db/pooler.ts).
      const report = await migratePlatform(db.orm, db.url, config.databaseDirectUrl ? pooledSettings(config) : undefined);
      for (const name of report.applied) this.info(`  applied ${name}`);
      const tenants = await migrateAllTenants(db.orm.em.fork(), (done, total, r) =>
        this.info(`  [${done}/${total}] ${r.schema}: ${'error' in r ? `FAILED ${r.error}` : `${r.from} → ${r.to}`}`),
      );
      if (tenants.failed.length) {
        throw new Error(`${tenants.failed.length} site schema(s) failed to migrate (${tenants.failed.map((f) => f.schema).join(', ')}); run again to resume.`);
      }
      if (tenants.migrated.length) this.log(`Migrated ${tenants.migrated.length} site schema(s).`);
      this.log(
        report.applied.length
          ? `Applied ${report.applied.length} migration(s); the platform schema is at ${report.current}.`
          : `Nothing to apply; the platform schema is at ${report.current ?? '(empty)'}.`,
      );
      return { ...report, tenants: { migrated: tenants.migrated.length, failed: tenants.failed } };
    });
  }
}
