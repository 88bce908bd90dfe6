// Opens the platform database: DATABASE_URL when set, else the embedded PostgreSQL
// under the data dir. The one place that knows which.
import type { Config } from '../config.ts';
import { EmbeddedPostgres, type EmbeddedLog } from './embedded.ts';
import type { BoundConnection } from './driver.ts';
import { createOrm, type Orm, type OrmOptions } from './orm.ts';

export interface Database {
  orm: Orm;
  url: string;
  embedded: EmbeddedPostgres | undefined;
  /** Ends what the pool's connections run now and refuses anything later (shutdown past its timeout: driver.ts cutOff). */
  cutOff(): Promise<number>;
  /** Closes the pool, then stops the embedded PostgreSQL if this process started it. */
  close(): Promise<void>;
}

/** What an operator's command opens (CLI): a small pool whose statements may run as long as long operations' do. */
export const openCommandDatabase = (config: Config, log: (line: string) => void): Promise<Database> =>
  openDatabase(config, { info: log, error: log }, { poolMax: 2, statementTimeoutMs: config.longStatementTimeoutMs });

export async function openDatabase(config: Config, log: EmbeddedLog, options: OrmOptions = {}): Promise<Database> {
  let embedded: EmbeddedPostgres | undefined;
  let url = config.databaseUrl;
  if (!url) {
    embedded = new EmbeddedPostgres(config.dataDir, { port: config.embeddedPgPort, log });
    await embedded.start();
    await embedded.ensureDatabase('platform');
    url = embedded.url('platform');
  }
  let orm: Orm;
  try {
    // The pool's size, statement timeout and limits are the configuration's unless `options` says otherwise.
    orm = await createOrm(url, { statementTimeoutMs: config.statementTimeoutMs, preparedStatements: config.preparedStatements, poolMax: config.db.poolSize, limits: config.db, ...options });
  } catch (err) {
    await embedded?.stop();
    throw err;
  }
  return {
    orm,
    url,
    embedded,
    cutOff: () => (orm.em.getConnection() as BoundConnection).cutOff(),
    async close() {
      await orm.close(true);
      await embedded?.stop();
    },
  };
}
