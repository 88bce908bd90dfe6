// Key rotation of secret values (`platform secret rotate`): every value not written with the
// keyring's current key version is decrypted and encrypted again, site by site. Operators only:
// the system actor; values, `modified` and the history stay. Running it again is harmless.
import { siteEmOf } from '../db/clusters.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { systemActor } from '../auth/actor.ts';
import { makeContext, type ServiceContext } from '../context.ts';
import { siteNotFound } from '../errors.ts';
import { quotedSchema, tenantEm } from '../tenancy/schema.ts';
import { siteSchemaFor } from '../tenancy/site-access.ts';
import { secretAad, type SecretKeyring } from './crypto.ts';
import { rows } from '../db/sql.ts';

/** Re-encrypts the stale values of the context's site. */
export async function rotateSiteSecrets(ctx: ServiceContext, keyring: SecretKeyring): Promise<{ schema: string; rotated: number }> {
  const schema = await siteSchemaFor(ctx, 'rotate', 'Secret'); // no user's rules allow it: the system actor's
  const q = quotedSchema(schema);
  const stale = await rows<{ uuid: string; ciphertext: string; key_version: number }>(
    ctx.em,
    `SELECT uuid, ciphertext, key_version FROM ${q}.secrets WHERE key_version <> ?`,
    [keyring.currentVersion],
  );
  let rotated = 0;
  for (const row of stale) {
    const aad = secretAad(schema, row.uuid);
    const sealed = keyring.seal(keyring.open({ ciphertext: row.ciphertext, key_version: Number(row.key_version) }, aad), aad);
    const res = await ctx.em.execute(`UPDATE ${q}.secrets SET ciphertext = ?, key_version = ? WHERE uuid = ? AND key_version = ?`, [
      sealed.ciphertext, sealed.key_version, row.uuid, row.key_version,
    ], 'run');
    rotated += Number((res as { affectedRows?: number }).affectedRows ?? 0);
  }
  return { schema, rotated };
}

export interface SiteRotation {
  schema: string;
  rotated: number;
}

export interface RotationReport {
  key_version: number;
  /** The values re-encrypted, over every site that succeeded. */
  rotated: number;
  sites: SiteRotation[];
  failed: { schema: string; error: string }[];
}

export type RotationProgress = { schema: string; rotated: number } | { schema: string; error: string };

/**
 * Rotates every site (or only `site`: 404 when it is not a site), each in its own unit of work
 * as the system actor `cli`. A site that fails is reported and the others still run;
 * `onProgress` hears each site's outcome as it comes.
 */
export async function rotateAllSites(
  em: EntityManager,
  keyring: SecretKeyring,
  options: { site?: string; onProgress?: (step: RotationProgress) => void } = {},
): Promise<RotationReport> {
  const schemas = ((await em.fork().execute('SELECT schema_name FROM public.sites ORDER BY schema_name')) as { schema_name: string }[]).map((r) => r.schema_name);
  if (options.site !== undefined && !schemas.includes(options.site)) throw siteNotFound(options.site);
  const report: RotationReport = { key_version: keyring.currentVersion, rotated: 0, sites: [], failed: [] };
  for (const schema of options.site !== undefined ? [options.site] : schemas) {
    try {
      const result = await rotateSiteSecrets(makeContext(tenantEm(await siteEmOf(em.fork(), schema), schema), systemActor('cli'), schema), keyring);
      report.sites.push(result);
      report.rotated += result.rotated;
      options.onProgress?.(result);
    } catch (err) {
      const failure = { schema, error: (err as Error).message };
      report.failed.push(failure);
      options.onProgress?.(failure);
    }
  }
  return report;
}
