// Cross-process cache invalidation through PostgreSQL (no Redis needed). A change notifies inside
// its transaction (PostgreSQL delivers the NOTIFY at commit, to every session listening on the
// channel): triggers do it for users, memberships, apps, data sources, tables and functions (migrations:
// `platform_notify_change`), the services call notifyChanged() for the rest. Each server process keeps one
// listening connection (ChangeListener) and tells the caches subscribed to that topic; when the
// connection drops or is made again, every subscriber drops everything, as notifications may
// have been missed meanwhile.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';

export const CHANGES_CHANNEL = 'platform_changes';

/**
 * `routing`: sites and domains (host resolution); `app-settings`: an app's settings, keyed by its
 * site schema; `auth`: a user's account or membership, keyed by the user's UUID (platform or site
 * user); `tables`: a site's apps, data sources or data tables, keyed by the site schema;
 * `functions`: a site's functions, keyed by the site schema; `function-jobs`: a function execution was queued for any process to claim (functions/runtime.ts).
 */
export type ChangeTopic = 'routing' | 'app-settings' | 'auth' | 'tables' | 'policies' | 'functions' | 'function-jobs';

export async function notifyChanged(em: EntityManager, topic: ChangeTopic, key = ''): Promise<void> {
  await em.execute('SELECT pg_notify(?, ?)', [CHANGES_CHANNEL, `${topic}:${key}`]);
}

/** `key` is null when everything may have changed (the listener (re)connected). */
type Handler = (key: string | null) => void;

export class ChangeListener {
  /** How long connecting may take (a database that accepts but never answers fails it; a retry follows). */
  private readonly connectTimeoutMs: number;
  private readonly handlers: { topic: ChangeTopic; handle: Handler }[] = [];
  private client: pg.Client | undefined;
  private stopped = false;
  private connected = false;
  /** settled(): the markers this process waits for (`settled:<id>.<n>`; other processes see them and ignore them). */
  private readonly id = randomUUID();
  private sequence = 0;
  private readonly waiting = new Map<string, () => void>();
  /** The marker query on the wire: the listening connection runs one query at a time. */
  private sending: Promise<unknown> = Promise.resolve();
  /** The marker the callers of settled() wait for, sent once the one on the wire has gone. */
  private next: Promise<void> | undefined;

  constructor(options: { connectTimeoutMs?: number } = {}) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5000;
  }

  /** Whether notifications arrive now (caches serve only then: a gap may have missed some). */
  get listening(): boolean {
    return this.connected;
  }

  on(topic: ChangeTopic, handle: Handler): this {
    this.handlers.push({ topic, handle });
    return this;
  }

  private emit(topic: string | null, key: string | null): void {
    for (const h of this.handlers) if (topic === null || h.topic === topic) h.handle(key);
  }

  /** Listens on a connection of its own; reconnects (every second, until it succeeds) when it drops. */
  async listen(url: string, onError: (err: Error) => void = () => undefined): Promise<void> {
    const retry = () => {
      if (!this.stopped) setTimeout(() => void connect().catch((err: Error) => (onError(err), retry())), 1000).unref();
    };
    const connect = async () => {
      // TCP keepalive: a database host gone without a word ends the connection (then a reconnection).
      const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: this.connectTimeoutMs, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
      client.on('notification', (n) => {
        const payload = n.payload ?? '';
        const at = payload.indexOf(':');
        if (payload.startsWith('settled:')) this.waiting.get(payload.slice(at + 1))?.();
        else this.emit(at < 0 ? payload : payload.slice(0, at), at < 0 ? null : payload.slice(at + 1));
      });
      client.on('error', (err) => {
        if (this.client === client) this.connected = false;
        onError(err);
        client.end().catch(() => undefined);
      });
      client.on('end', () => {
        if (this.client !== client || this.stopped) return;
        this.client = undefined;
        this.connected = false;
        this.emit(null, null);
        retry();
      });
      try {
        await client.connect();
        await client.query(`LISTEN ${CHANGES_CHANNEL}`);
      } catch (err) {
        client.end().catch(() => undefined);
        throw err;
      }
      this.client = client;
      this.connected = true;
      this.emit(null, null);
    };
    await connect();
  }

  /**
   * Resolves once every change committed before the call has reached this process's caches (at
   * most `timeoutMs`): a marker notified now comes back after all of them, as PostgreSQL delivers
   * notifications in commit order. A request that wrote waits for it before answering, so that its
   * caller's next request, served by this process, sees its change (server/http/middleware.ts).
   * The callers that come while a marker is being sent share the next one (a marker sent before
   * a call may precede the caller's commit): under load, one marker serves many writes.
   */
  async settled(timeoutMs = 1000): Promise<void> {
    if (!this.connected || !this.client) return;
    this.next ??= this.sending.then(() => {
      this.next = undefined; // callers from now on need a marker sent after this one
      return this.mark(timeoutMs);
    });
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([this.next, new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)))]);
    clearTimeout(timer);
  }

  /** Sends a marker and resolves when it comes back (at most `timeoutMs`), never rejecting. */
  private async mark(timeoutMs: number): Promise<void> {
    const client = this.client;
    if (!this.connected || !client) return;
    const key = `${this.id}.${++this.sequence}`;
    let timer: NodeJS.Timeout | undefined;
    const arrived = new Promise<void>((resolve) => {
      this.waiting.set(key, resolve);
      timer = setTimeout(resolve, timeoutMs);
    });
    const sent = client.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, `settled:${key}`]);
    this.sending = sent.catch(() => undefined);
    try {
      await sent;
      await arrived;
    } catch {
      /* the connection dropped: the caches bypass themselves until it is back */
    } finally {
      clearTimeout(timer);
      this.waiting.delete(key);
    }
  }

  async close(): Promise<void> {
    this.stopped = true;
    this.connected = false;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }
}
