// Waking the change streams (issue 35, docs/realtime.md "How it works"): after a request that
// wrote a logged table (records, storage objects: ServiceContext.wrote, told by realtime/actor.ts)
// is answered, the server announces that the site's logged tables changed — to its own feed at once, and with one
// NOTIFY per cluster for every process, coalesced: the writes of a few milliseconds are one
// statement. Not from the log's trigger: PostgreSQL serialises the commits of notifying
// transactions. Writes made outside a server (SQL by hand, the CLI's direct mode, whose pool is
// closed right after its request) are found by the readers' look every second.
import type { EntityManager } from '@mikro-orm/postgresql';
import { CHANGES_CHANNEL } from '../db/changes.ts';
import type { Logger } from '../common/logger.ts';

/** How long announcements wait for others to share their NOTIFY. */
const COALESCE_MS = 5;

export class ChangeAnnouncer {
  /** Sites whose logged tables changed, by the root EntityManager of their cluster. */
  private readonly pending = new Map<EntityManager, Set<string>>();
  private timer: NodeJS.Timeout | undefined;
  private readonly local: ((schema: string) => void) | undefined;
  private readonly log: Logger | undefined;

  /** `local`: this process's own feed, woken at once. */
  constructor(local?: (schema: string) => void, log?: Logger) {
    this.local = local;
    this.log = log;
  }

  /** A data write on `schema` committed; `em`: the root EntityManager of the site's cluster. */
  changed(em: EntityManager, schema: string): void {
    this.local?.(schema);
    let sites = this.pending.get(em);
    if (!sites) this.pending.set(em, (sites = new Set()));
    sites.add(schema);
    this.timer ??= setTimeout(() => void this.flush(), COALESCE_MS).unref();
  }

  /** Sends what is pending: one NOTIFY per site, one statement per cluster. */
  async flush(): Promise<void> {
    this.timer = undefined;
    const batches = [...this.pending];
    this.pending.clear();
    await Promise.all(
      batches.map(([em, sites]) =>
        em
          .execute(`SELECT pg_notify(?, 'records:' || s) FROM jsonb_array_elements_text(?::jsonb) AS s`, [CHANGES_CHANNEL, JSON.stringify([...sites])])
          .catch((err: unknown) => this.log?.warn({ err }, 'change streams not woken (their readers look again within a second)')),
      ),
    );
  }
}
