// Each app's `rate_limit_per_hour`, read on every request to the app's routes (the server's app
// rate limit), so cached in process: a hit costs no query. A settings change (or an app
// created) notifies `app-settings` with the site schema; every server process drops that
// site's entries at commit (db/changes.ts), and the TTL bounds staleness otherwise.
import { siteOrmOf } from '../db/clusters.ts';
import type { EntityManager } from '@mikro-orm/postgresql';
import { CachedLookup } from '../common/cached-lookup.ts';
import { notifyChanged } from '../db/changes.ts';
import type { Orm } from '../db/orm.ts';
import { quotedSchema } from '../tenancy/schema.ts';

/** Call where an app's settings are written (in its transaction when there is one). */
export const notifyAppSettingsChanged = (em: EntityManager, schema: string): Promise<void> => notifyChanged(em, 'app-settings', schema);

export class AppRateLimits {
  private readonly orm: Orm;
  private readonly cache: CachedLookup<number | null>;

  constructor(orm: Orm, options: ConstructorParameters<typeof CachedLookup>[0] = {}) {
    this.orm = orm;
    this.cache = new CachedLookup(options);
  }

  /** The app's requests per hour per caller (0: none allowed); null when the site has no such app. */
  limitOf(schema: string, slug: string): number | null | Promise<number | null> {
    return this.cache.get(`${schema}/${slug}`, async () => {
      const rows = await (await siteOrmOf(this.orm, schema)).em
        .getConnection()
        .execute(`SELECT s.rate_limit_per_hour FROM ${quotedSchema(schema)}.apps a JOIN ${quotedSchema(schema)}.app_settings s ON s.app_id = a.id WHERE a.slug = ?`, [slug]);
      return rows[0] ? Number(rows[0].rate_limit_per_hour) : null;
    });
  }

  /** Drops the entries of one site schema, or all of them (null). */
  invalidate(schema: string | null): void {
    this.cache.clear(schema ? `${schema}/` : undefined);
  }
}
