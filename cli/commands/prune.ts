import { BaseCommand } from '../base.ts';

export default class PruneCommand extends BaseCommand<typeof PruneCommand> {
  static override summary = 'Delete expired rows of the token blacklists (platform and every site), expired browser sessions, expired idempotency keys and record changes past their retention.';
  static override description =
    'A blacklisted refresh token only matters until it expires, a browser session ends when it expires, an idempotency key keeps its answer for 24 hours; afterwards their rows are dead weight. Servers do this on their own every BLACKLIST_PRUNE_INTERVAL_MS; run it from a scheduler when they do not (BLACKLIST_PRUNE_INTERVAL_MS=0). Works on the database directly (DATABASE_URL, else the embedded PostgreSQL).';
  static override examples = ['<%= config.bin %> prune', '<%= config.bin %> prune --json'];

  protected override interruption(): string {
    return 'expired rows deleted so far stay deleted (each statement whole or not at all); nothing else was changed';
  }

  async run() {
    const { pruneExpired } = await import('../../shared/auth/sessions.ts');
    const { loadConfig } = await import('../../shared/config.ts');
    const pruned = await this.withDatabase((db) => pruneExpired(db.orm.em.fork(), loadConfig().realtime));
    this.log(`Deleted ${pruned.deleted} expired token-blacklist row(s), ${pruned.sessions} expired session(s), ${pruned.idempotencyKeys} expired idempotency key(s) and ${pruned.changes} record change(s) past their retention (REALTIME_RETENTION_HOURS, REALTIME_RETENTION_ROWS).`);
    return pruned;
  }
}
