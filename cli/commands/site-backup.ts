// `platform site backup` and `platform site restore` (docs/backup.md): operator commands on the
// database and the object store directly, as `platform migrate` is (pg_dump and pg_restore need
// the database itself; there is no API route for them).
import { Args, Flags } from '@oclif/core';
import { BaseCommand, secretFromEnv } from '../base.ts';
import { bytes, progress } from '../tables.ts';


export class SiteBackupCommand extends BaseCommand<typeof SiteBackupCommand> {
  static override summary = "Back up a site: its schema, platform rows, storage objects and frontend builds, in one tar archive.";
  static override description =
    'Works on the database and the object store directly (DATABASE_URL, else the embedded PostgreSQL; pg_dump of the server\'s major version, see PG_BIN_DIR). Everything read from PostgreSQL is one snapshot; the archive ends with a manifest of every entry\'s size and SHA-256. Progress on stderr. See docs/backup.md.';
  static override examples = ['<%= config.bin %> site backup shop -o shop.tar', '<%= config.bin %> site backup shop_prod -o /backups/shop.tar --json'];
  static override args = { site: Args.string({ required: true, description: 'The site: its slug, schema name or UUID.' }) };
  static override flags = {
    output: Flags.string({ char: 'o', required: true, summary: 'The archive to write (written as FILE.partial, renamed when complete).' }),
  };

  protected override interruption(): string {
    return 'nothing was changed; the partial archive (FILE.partial) may be left behind: delete it';
  }

  async run() {
    const { backupSite } = await import('../../shared/backup/backup.ts');
    const { storeFromConfig } = await import('../../shared/storage/objstore/index.ts');
    return this.withDatabase(async (db, config) => {
      const store = await storeFromConfig(config.storage, config.dataDir);
      const tick = progress((line) => this.info(line));
      try {
        const result = await backupSite(this.args.site, this.flags.output, {
          databaseUrl: db.url,
          pgBinDir: config.pgBinDir,
          store,
          onProgress: (p) => {
            if (p.phase === 'dump' && p.done === 0) this.info('Dumping the schema (one snapshot)…');
            else if (p.phase === 'blobs') tick(() => `  blobs ${p.done}/${p.total}, ${bytes(p.bytes)}`);
          },
        });
        this.log(`Backed up ${result.site.slug} (schema ${result.site.schema_name}, version ${result.schema_version}) to ${result.file}: ${result.blobs} blob(s), ${bytes(result.bytes)} in ${(result.duration_ms / 1000).toFixed(1)} s.`);
        return { status: 'success' as const, ...result };
      } finally {
        await store.close();
      }
    });
  }
}

export class SiteRestoreCommand extends BaseCommand<typeof SiteRestoreCommand> {
  static override summary = 'Restore a site from a backup archive, under its own name or a new one (--as).';
  static override description =
    'Checks every entry of the archive against its manifest before changing anything, then restores the schema, the platform rows and the blobs in one transaction: all or nothing. Customer domains come back unverified; memberships are re-attached by e-mail. Works on the database directly, as `platform migrate` does. See docs/backup.md.';
  static override examples = [
    '<%= config.bin %> site restore shop.tar',
    '<%= config.bin %> site restore shop.tar --as shop_copy --json',
    'OLD_KEY=… <%= config.bin %> site restore shop.tar --org acme --secret-key-env OLD_KEY',
  ];
  static override args = { file: Args.string({ required: true, description: 'The archive (from `platform site backup`).' }) };
  static override flags = {
    as: Flags.string({ summary: 'Restore under this schema name (its slug and name follow); default: the archived site\'s.' }),
    org: Flags.string({ summary: 'The organization to restore into (slug or UUID); default: the archived site\'s, when it exists here.' }),
    'secret-key-env': Flags.string({ summary: "The environment variable holding the source platform's PLATFORM_SECRET_KEY, when it is not this platform's." }),
    cluster: Flags.string({ summary: 'The PostgreSQL cluster to restore onto (`platform cluster list`); default: placed as a new site is (docs/scale-out.md).' }),
  };

  protected override interruption(): string {
    return 'the restore transaction was not committed: no site was created (blobs already copied into the store under the new schema name may be left; a new restore overwrites them)';
  }

  async run() {
    const sourceSecretKey = secretFromEnv('secret-key-env', this.flags['secret-key-env']);
    const { restoreSite } = await import('../../shared/backup/restore.ts');
    const { storeFromConfig } = await import('../../shared/storage/objstore/index.ts');
    const { resolveSecretKey } = await import('../../shared/common/secret-key.ts');
    const { SecretKeyring } = await import('../../shared/secrets/crypto.ts');
    return this.withDatabase(async (db, config) => {
      const store = await storeFromConfig(config.storage, config.dataDir);
      const tick = progress((line) => this.info(line));
      let phase = '';
      try {
        const result = await restoreSite(this.args.file, {
          databaseUrl: db.url,
          pgBinDir: config.pgBinDir,
          store,
          keyring: new SecretKeyring(resolveSecretKey(config), config.secretsKeyVersion),
          sourceSecretKey,
          em: db.orm.em,
          settings: config,
          as: this.flags.as,
          org: this.flags.org,
          cluster: this.flags.cluster,
          onProgress: (p) => {
            if (p.phase !== phase) {
              phase = p.phase;
              this.info({ verify: 'Checking the archive…', blobs: 'Copying blobs into the object store…', schema: 'Restoring the schema and platform rows (one transaction)…', done: 'Committed.' }[p.phase]);
            } else tick(() => `  ${bytes(p.bytes)}${p.total ? ` of ${bytes(p.total)}` : ''}`);
          },
        });
        for (const d of result.domains) this.info(`  domain ${d.domain}: ${d.restored ? 'restored' : 'not restored'} (${d.note})`);
        for (const w of result.workers) if (w.note) this.info(`  frontend worker ${w.slug}: ${w.note}`);
        for (const m of result.grants.missing) this.info(`  permission not re-attached (no such user or group here): ${m}`);
        if (result.linked_users.unmatched.length) this.info(`  linked users without a platform user of the same e-mail here: ${result.linked_users.unmatched.join(', ')}`);
        this.log(
          `Restored ${result.site.slug} (schema ${result.site.schema_name}, version ${result.schema_version.now}) in organization ${result.organization}, primary domain ${result.primary_domain}: ${result.blobs} blob(s) in ${(result.duration_ms / 1000).toFixed(1)} s.`,
        );
        return { status: 'success' as const, ...result };
      } finally {
        await store.close();
      }
    });
  }
}
