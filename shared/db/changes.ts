// Cross-process cache invalidation through PostgreSQL (no Redis needed). A change notifies inside
// its transaction (PostgreSQL delivers the NOTIFY at commit, to every session listening on the
// channel): triggers do it for users, memberships, apps, data sources, tables and functions (migrations:
// `platform_notify_change`), the services call notifyChanged() for the rest. Each server process keeps one
// listening connection (ChangeListener) and tells the caches subscribed to that topic; when the
// connection drops or is made again, every subscriber drops everything, as notifications may
// have been missed meanwhile.
//
// Read-your-writes across processes: a request that changed metadata answers once every server
// process listening on the channel has its change (settled(): a marker each process acknowledges),
// so the caller's next request sees it whichever process serves it.
import { randomUUID } from 'node:crypto';
import pg from 'pg';
import type { EntityManager } from '@mikro-orm/postgresql';

export const CHANGES_CHANNEL = 'platform_changes';

/**
 * `routing`: sites and domains (host resolution); `app-settings`: an app's settings, keyed by its
 * site schema; `auth`: a user's account or membership, keyed by the user's UUID (platform or site
 * user); `tables`: a site's apps, data sources or data tables, keyed by the site schema;
 * `functions`: a site's functions, keyed by the site schema; `function-jobs`: a function execution was queued for any process to claim (functions/runtime.ts);
 * `move`: a site move's write freeze, its processes' answers and its thaw (sites/move-gate.ts);
 * `records`: records of a site's tables changed, keyed by the site schema (the change log's trigger: realtime/changelog.ts).
 */
export type ChangeTopic = 'routing' | 'app-settings' | 'auth' | 'tables' | 'policies' | 'functions' | 'function-jobs' | 'move' | 'records';

export async function notifyChanged(em: EntityManager, topic: ChangeTopic, key = ''): Promise<void> {
  await em.execute('SELECT pg_notify(?, ?)', [CHANGES_CHANNEL, `${topic}:${key}`]);
}

/** What the listening processes tell each other (settled()), beside the change topics. */
const PEER_MESSAGES = new Set(['settled', 'acked', 'hello', 'here', 'bye'] as const);
type PeerMessage = typeof PEER_MESSAGES extends Set<infer M> ? M : never;

/** `key` is null when everything may have changed (the listener (re)connected). */
type Handler = (key: string | null) => void;

export class ChangeListener {
  /** How long connecting may take (a database that accepts but never answers fails it; a retry follows). */
  private readonly connectTimeoutMs: number;
  private readonly handlers: { topic: ChangeTopic; handle: Handler }[] = [];
  private client: pg.Client | undefined;
  private stopped = false;
  private connected = false;
  /**
   * settled(): the markers this process waits for (`settled:<id>.<n>`), each until it came back
   * and every peer in `pending` acknowledged it (`acked:<id>.<n> <peer>`).
   */
  readonly id = randomUUID();
  private sequence = 0;
  private readonly waiting = new Map<string, { back: boolean; pending: Set<string>; resolve: () => void }>();
  /**
   * The other processes listening on the channel: learnt from what they notify (`hello:` when they
   * start listening, `here:` in answer, their markers and acknowledgements); forgotten when they
   * say `bye:` or leave a marker unacknowledged until its timeout (a process that speaks again is
   * known again).
   */
  private readonly peers = new Set<string>();
  /** Called when a process not known before speaks (peers). */
  private peerHandlers: ((peer: string) => void)[] = [];
  /** The last notification sent on the listening connection (markers, answers): it runs one query at a time. */
  private sending: Promise<unknown> = Promise.resolve();
  /** The marker the callers of settled() wait for, sent once the one on the wire has gone. */
  private next: Promise<void> | undefined;

  /**
   * The listeners of the other clusters this process serves sites of (db/clusters.ts): their
   * sites' triggers notify there. They share this one's handlers; settled() waits for each.
   */
  private readonly others: ChangeListener[] = [];
  private readonly otherUrls = new Set<string>();

  constructor(options: { connectTimeoutMs?: number; handlers?: { topic: ChangeTopic; handle: Handler }[] } = {}) {
    this.connectTimeoutMs = options.connectTimeoutMs ?? 5000;
    if (options.handlers) this.handlers = options.handlers;
  }

  /** Listens on another cluster too (its direct URL), with the same handlers; retries every second until connected. */
  listenAlso(url: string, onError: (err: Error) => void = () => undefined): void {
    if (this.otherUrls.has(url)) return; // a cluster's pool opened again after it idled: still listening
    this.otherUrls.add(url);
    const other = new ChangeListener({ connectTimeoutMs: this.connectTimeoutMs, handlers: this.handlers });
    this.others.push(other);
    const attempt = () =>
      void other.listen(url, onError).catch((err: Error) => {
        onError(err);
        if (!other.stopped) setTimeout(attempt, 1000).unref();
      });
    attempt();
  }

  /** Calls `handle` with each process that starts sharing the channel (or speaks again after it was dropped). */
  onPeer(handle: (peer: string) => void): this {
    this.peerHandlers.push(handle);
    return this;
  }

  /** The other processes known to listen on the channel now. */
  peerIds(): string[] {
    return [...this.peers];
  }

  /** Whether notifications arrive now (caches serve only then: a gap may have missed some). */
  get listening(): boolean {
    return this.connected && this.others.every((o) => o.connected);
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
        const topic = at < 0 ? payload : payload.slice(0, at);
        const rest = at < 0 ? null : payload.slice(at + 1);
        if (PEER_MESSAGES.has(topic as PeerMessage) && rest !== null) this.fromPeer(client, topic as PeerMessage, rest);
        else this.emit(topic, rest);
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
        await client.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, `hello:${this.id}`]);
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
   * A message of another process (or this one's own marker, back). The handlers of a notification
   * run when it arrives, so a process that acknowledges a marker has handled every change
   * committed before it.
   */
  private fromPeer(client: pg.Client, kind: PeerMessage, rest: string): void {
    const [key, peer] = kind === 'acked' ? rest.split(' ') : [rest, rest.split('.')[0]];
    if (!key || !peer || peer === this.id) {
      if (kind === 'settled') this.arrived(key, undefined);
      return;
    }
    if (kind === 'bye') {
      this.peers.delete(peer);
      for (const k of this.waiting.keys()) this.arrived(k, peer);
      return;
    }
    if (!this.peers.has(peer)) {
      this.peers.add(peer);
      for (const handle of this.peerHandlers) handle(peer);
    }
    const answer = kind === 'hello' ? `here:${this.id}` : kind === 'settled' ? `acked:${key} ${this.id}` : undefined;
    if (answer) this.send(client, answer).catch(() => undefined);
    if (kind === 'acked') this.arrived(key, peer);
  }

  /** The marker `key` came back (`peer` undefined) or was acknowledged by `peer`. */
  private arrived(key: string, peer: string | undefined): void {
    const w = this.waiting.get(key);
    if (!w) return;
    if (peer === undefined) w.back = true;
    else w.pending.delete(peer);
    if (w.back && w.pending.size === 0) w.resolve();
  }

  /**
   * Resolves once every change committed before the call has reached the caches of this process
   * and of every other listening process (at most `timeoutMs`): a marker notified now comes back,
   * and reaches each of them, after all of them, as PostgreSQL delivers notifications in commit
   * order; each process acknowledges it. A request that changed metadata waits for it before
   * answering, so that its caller's next request sees its change whichever process serves it
   * (server/http/middleware.ts).
   * The callers that come while a marker is being sent share the next one (a marker sent before
   * a call may precede the caller's commit): under load, one marker serves many writes.
   */
  async settled(timeoutMs = 1000): Promise<void> {
    if (this.others.length) await Promise.all([this.settledHere(timeoutMs), ...this.others.map((o) => o.settledHere(timeoutMs))]);
    else await this.settledHere(timeoutMs);
  }

  private async settledHere(timeoutMs: number): Promise<void> {
    if (!this.connected || !this.client) return;
    this.next ??= this.sending.then(() => {
      this.next = undefined; // callers from now on need a marker sent after this one
      return this.mark(timeoutMs);
    });
    await atMost(this.next, timeoutMs);
  }

  /** Notifies `payload` on the listening connection, after what is on the wire (one query at a time). */
  private send(client: pg.Client, payload: string): Promise<unknown> {
    const sent = this.sending.then(() => client.query('SELECT pg_notify($1, $2)', [CHANGES_CHANNEL, payload]));
    this.sending = sent.catch(() => undefined);
    return sent;
  }

  /** Sends a marker and resolves when it comes back (at most `timeoutMs`), never rejecting. */
  private async mark(timeoutMs: number): Promise<void> {
    const client = this.client;
    if (!this.connected || !client) return;
    const key = `${this.id}.${++this.sequence}`;
    const pending = new Set(this.peers);
    let timer: NodeJS.Timeout | undefined;
    const arrived = new Promise<void>((resolve) => {
      this.waiting.set(key, { back: false, pending, resolve });
      timer = setTimeout(() => {
        for (const peer of pending) this.peers.delete(peer); // silent: not waited for until it speaks again
        resolve();
      }, timeoutMs);
    });
    const sent = this.send(client, `settled:${key}`);
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
    await Promise.all(this.others.map((o) => o.close()));
    this.stopped = true;
    this.connected = false;
    const client = this.client;
    this.client = undefined;
    // Bye: the others stop waiting for this process (at most a second: the database may not answer).
    if (client) await atMost(this.send(client, `bye:${this.id}`).catch(() => undefined), 1000);
    await client?.end().catch(() => undefined);
  }
}

/** Waits for `p`, at most `ms`. */
async function atMost(p: Promise<unknown>, ms: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([p, new Promise((resolve) => (timer = setTimeout(resolve, ms)))]);
  clearTimeout(timer);
}
