// Opens the platform database: DATABASE_URL when set, else the embedded PostgreSQL
// under the data dir. The one place that knows which.
//
// Behind a proxy that pools transactions (PgBouncer, pool_mode=transaction: DATABASE_URL is the
// proxy and DATABASE_DIRECT_URL the database itself) the server's pool goes through the proxy and
// sends no startup parameters (the proxy refuses them; db/pooler.ts sets them as the role's
// defaults instead), while what needs a session of its own uses the direct URL: migrations and
// their advisory lock (`direct()`), the change listener's LISTEN (server/main.ts) and the CLI's
// commands (openCommandDatabase).
import type { Config } from '../config.ts';
import { EmbeddedPostgres, type EmbeddedLog } from './embedded.ts';
import type { BoundConnection } from './driver.ts';
import { createOrm, type Orm, type OrmOptions } from './orm.ts';
import { Clusters } from './clusters.ts';

export interface Database {
  orm: Orm;
  /** The pools of the sites' clusters (db/clusters.ts): the primary is `orm`. */
  clusters: Clusters;
  /** What the pool connects to: DATABASE_URL (a proxy, or the database), else the embedded PostgreSQL. */
  url: string;
  /** The database without a proxy between (DATABASE_DIRECT_URL, else `url`): sessions (LISTEN, advisory locks, migrations). */
  directUrl: string;
  /** The pool goes through a proxy that pools transactions (no startup parameters, no session state). */
  proxied: boolean;
  /** Runs `work` on the direct connection: this pool without a proxy; behind one, a small pool of its own on `directUrl`, closed afterwards. */
  direct<T>(work: (orm: Orm, url: string) => Promise<T>): Promise<T>;
  embedded: EmbeddedPostgres | undefined;
  /** Ends what the pool's connections run now and refuses anything later (shutdown past its timeout: driver.ts cutOff). */
  cutOff(): Promise<number>;
  /** Closes the pool, then stops the embedded PostgreSQL if this process started it. */
  close(): Promise<void>;
}

/**
 * What an operator's command opens (CLI): a small pool whose statements may run as long as long
 * operations' do, on the direct URL (a few connections, sessions for `migrate`).
 */
export const openCommandDatabase = (config: Config, log: (line: string) => void): Promise<Database> =>
  openDatabase({ ...config, databaseUrl: config.databaseDirectUrl ?? config.databaseUrl, databaseDirectUrl: undefined }, { info: log, error: log }, {
    poolMax: 2,
    statementTimeoutMs: config.longStatementTimeoutMs,
    preparedStatements: true,
  });

export async function openDatabase(config: Config, log: EmbeddedLog, options: OrmOptions = {}): Promise<Database> {
  let embedded: EmbeddedPostgres | undefined;
  let url = config.databaseUrl;
  if (!url) {
    embedded = new EmbeddedPostgres(config.dataDir, { port: config.embeddedPgPort, log });
    await embedded.start();
    await embedded.ensureDatabase('platform');
    url = embedded.url('platform');
  }
  const directUrl = config.databaseDirectUrl ?? url;
  const proxied = directUrl !== url;
  // The pool's size, statement timeout and limits are the configuration's unless `options` says otherwise.
  const ormOptions: OrmOptions = { statementTimeoutMs: config.statementTimeoutMs, preparedStatements: config.preparedStatements, poolMax: config.db.poolSize, limits: config.db, ...options };
  let orm: Orm;
  try {
    orm = await createOrm(url, { ...ormOptions, proxied });
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  // Each other cluster: a pool of the same size and timeouts, opened when a site of it is first used.
  const clusters = new Clusters(orm, { orm: { ...ormOptions, proxied: false } });
  return {
    orm,
    clusters,
    url,
    directUrl,
    proxied,
    async direct(work) {
      if (!proxied) return work(orm, url);
      const own = await createOrm(directUrl, { ...ormOptions, poolMax: 2, preparedStatements: true });
      clusters.adopt(own);
      try {
        return await work(own, directUrl);
      } finally {
        await own.close(true);
      }
    },
    embedded,
    cutOff: () => (orm.em.getConnection() as BoundConnection).cutOff(),
    async close() {
      await clusters.close();
      await orm.close(true);
      await embedded?.stop();
    },
  };
}
