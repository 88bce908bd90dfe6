import { Flags } from '@oclif/core';
import { BaseCommand, secretFromEnv } from '../base.ts';

export default class SecretRotateCommand extends BaseCommand<typeof SecretRotateCommand> {
  static override summary = 'Re-encrypt secret values with the current key version (SECRETS_KEY_VERSION).';
  static override description =
    'Works on the database directly, as `platform migrate` does. Every value of every site (or of --site) not written with the current key version is decrypted and encrypted again; values, `modified` and the history stay. After replacing PLATFORM_SECRET_KEY itself, raise SECRETS_KEY_VERSION and name the variable holding the old key with --previous-key-env: older versions are then read with keys derived from it. Running it again is harmless. See docs/api-conventions.md.';
  static override examples = [
    'SECRETS_KEY_VERSION=2 <%= config.bin %> secret rotate',
    'OLD_KEY=… PLATFORM_SECRET_KEY=… SECRETS_KEY_VERSION=3 <%= config.bin %> secret rotate --previous-key-env OLD_KEY',
  ];
  static override flags = {
    site: Flags.string({ summary: 'Only this site (its schema name).' }),
    'previous-key-env': Flags.string({ summary: 'The environment variable holding the previous PLATFORM_SECRET_KEY (for older key versions).' }),
  };

  protected override interruption(): string {
    return 'the secrets re-encrypted so far keep their new key version (each one whole or not at all); run `platform secret rotate` again to finish, the others are still read with the previous key';
  }

  async run() {
    const previous = secretFromEnv('previous-key-env', this.flags['previous-key-env']);
    // Loaded here, not at the top: every command start imports this module (cli/commands.ts).
    const { rotateAllSites } = await import('../../shared/secrets/secret-rotation.ts');
    const { resolveSecretKey } = await import('../../shared/common/secret-key.ts');
    const { SecretKeyring } = await import('../../shared/secrets/crypto.ts');
    return this.withDatabase(async (db, config) => {
      const keyring = new SecretKeyring(resolveSecretKey(config), config.secretsKeyVersion, previous); // as `platform serve` derives it
      const report = await rotateAllSites(db.orm.em, keyring, {
        site: this.flags.site,
        onProgress: (step) => this.info('error' in step ? `  ${step.schema}: FAILED ${step.error}` : `  ${step.schema}: ${step.rotated} value(s) re-encrypted`),
      });
      const { failed, sites, rotated } = report;
      if (failed.length) throw new Error(`${failed.length} site(s) failed (${failed.map((f) => f.schema).join(', ')}); fix and run again.`);
      this.log(`Re-encrypted ${rotated} secret value(s) in ${sites.length} site(s) with key version ${report.key_version}.`);
      return { status: 'success' as const, key_version: report.key_version, rotated, sites };
    });
  }
}
