// The change feed of one server process (issue 35, docs/realtime.md): subscribers of a table's
// changes, served from its change log (changelog.ts). One reader per table and process (a Tail)
// reads each batch of changes once, woken by the announcement of a data write (announce.ts: at
// once in the writing process, by NOTIFY `records:<schema>` in the others) or by its own look
// every second, and keeps the latest ones in memory; each subscriber takes them from there
// in order, through its own filter and read policy, or first reads what it missed from the log
// (a resume from an older position). A subscriber that does not read is dropped, never buffered
// without bound; the credentials of every subscriber are checked again every second.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { ChangeListener } from '../db/changes.ts';
import type { Logger } from '../common/logger.ts';
import { quoteIdent, rows } from '../db/sql.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import type { RecordRow } from '../data/records/target.ts';
import { logBounds, readChanges, type ChangeOp, type ChangeSource, type LoggedChange, type ReadState } from './changelog.ts';
import type { RecordTest } from './match.ts';

export interface FeedLimits {
  /** Subscribers one process serves at most… */
  maxSubscribers: number;
  /** …and of one site. */
  maxPerSite: number;
  /** Bytes a subscriber may leave unread before it is dropped. */
  maxBufferedBytes: number;
  /** A comment line after this much silence (proxies close idle connections). */
  heartbeatMs: number;
}

/** Why a stream ended, sent to the client as an `end` event before the connection closes. */
export type EndReason = 'credentials' | 'access' | 'slow' | 'table' | 'moved' | 'shutdown' | 'error';

const END_TEXT: Record<EndReason, string> = {
  credentials: 'The credentials of this stream expired or were revoked: authenticate again.',
  access: 'You may no longer read the records of this table.',
  slow: 'The client did not read its events fast enough: reconnect with Last-Event-ID to resume.',
  table: 'The table changed (its schema, or it was removed): reconnect with Last-Event-ID to resume.',
  moved: 'The site moved to another database: reconnect with Last-Event-ID to resume.',
  shutdown: 'The server is shutting down: reconnect with Last-Event-ID to resume.',
  error: 'The stream failed here: reconnect with Last-Event-ID to resume.',
};

/** One event of a stream: its position, its kind, its body. */
export interface StreamEvent {
  id: number;
  event: string;
  data: Record<string, unknown>;
}

/**
 * Where a subscriber's events go: a Server-Sent Events response, or one subscription of a
 * WebSocket (server/routes/realtime.routes.ts). Each writer returns the bytes its client has
 * not read yet (the feed drops a client past FeedLimits.maxBufferedBytes).
 */
export interface EventSink {
  /** The stream is open, from position `id`. */
  opened(id: number): number;
  /** Events in order (a batch). */
  events(batch: StreamEvent[]): number;
  /** Nothing to send for a while: keeps the connection alive and, when it moved, tells the client its position. */
  idle(id: number | undefined): number;
  /** The resume position is no longer kept: the client reloads; it follows from `id`. */
  reset(id: number, message: string): number;
  /** The stream ends (the sink is closed right after). */
  ended(reason: EndReason, message: string): void;
  close(): void;
}

/** What a subscriber asked for and where its events go. */
export interface SubscriberSpec {
  site: string;
  /** The physical table (the table's own, or its source's for a reference). */
  table: string;
  /** How its logged rows are read (changelog.ts). */
  source: ChangeSource;
  /** A data table's schema hash when subscribed (a change ends the stream: the client reconnects with the new schema). */
  hash?: string;
  /** The record as the subscriber is shown it (default: as read), and its key. */
  present?(r: RecordRow): RecordRow;
  keyOf(r: RecordRow): unknown;
  /** The cluster's root EntityManager of the site. */
  em: EntityManager;
  /** Where to start: after this position (a resume), or from now. */
  since: number | 'now';
  /** The event kinds asked for (`enter` and `leave` come with `update`). */
  events: ReadonlySet<ChangeOp>;
  /** Fields of the records sent (all when absent; the key always). */
  select?: readonly string[];
  test: RecordTest;
  /** Which of these records the subscriber may read (its read policy, in process). */
  readable(records: RecordRow[]): Promise<boolean[]>;
  /** Subscribers of one reader with the same key share their policy decisions (the key names who decides: the user, and the bucket of an object stream). */
  principal: string;
  /** Why the stream must end now (credentials, access), if it must. */
  recheck(): Promise<EndReason | undefined>;
  /** The user whose changes (topic `auth`) make recheck run at once. */
  user?: string;
  /** When the stream's credentials expire (milliseconds since the epoch): recheck runs then. */
  expires?: number;
  sink: EventSink;
}

export class FeedFullError extends Error {
  constructor(scope: 'process' | 'site') {
    super(scope === 'site' ? 'This site has as many change streams open on this server as it may.' : 'This server holds as many change streams as it may.');
  }
}

class Subscriber {
  pos = 0;
  /** Behind the tail's memory: reads the log on its own until it has caught up. */
  catching = false;
  closed = false;
  /** Counted in its tail (until then, subscribe() answers for its place). */
  joined = false;
  lastWrite = Date.now();
  /** The position last told to the client (an event's id, or a bare `id:` line on a heartbeat). */
  told = 0;
  private queue: Promise<void> = Promise.resolve();
  private rechecking = false;
  /** Something that may end the stream changed (the user, the site's policies): recheck on the next tick. */
  dirty = false;
  private nextCheck = Date.now() + RECHECK_MS;
  readonly spec: SubscriberSpec;
  private readonly feed: RecordFeed;

  constructor(spec: SubscriberSpec, feed: RecordFeed) {
    this.spec = spec;
    this.feed = feed;
  }

  /** Its work so far done (never rejects). */
  get settled(): Promise<void> {
    return this.queue;
  }

  /** Runs `work` after the subscriber's earlier work: its events stay in order. */
  serial(work: () => Promise<void>): void {
    this.queue = this.queue
      .then(() => (this.closed ? undefined : work()))
      .catch((err: unknown) => {
        this.feed.log?.warn({ err, site: this.spec.site, table: this.spec.table }, 'change stream failed: ended');
        this.end('error');
      });
  }

  /** After a write: drops a client that leaves too much unread. */
  private buffered(bytes: number): void {
    this.lastWrite = Date.now();
    if (bytes > this.feed.limits.maxBufferedBytes) this.end('slow');
  }

  opened(): void {
    this.buffered(this.spec.sink.opened(this.pos));
  }

  reset(message: string): void {
    this.buffered(this.spec.sink.reset(this.pos, message));
  }

  /**
   * The changes after this subscriber's position, as its events. `shared`: the policy decisions
   * of this batch by principal, so subscribers of one user decide each record once.
   */
  async deliver(changes: LoggedChange[], shared?: Map<string, Promise<boolean[]>>): Promise<void> {
    const first = changes.findIndex((c) => c.pos > this.pos);
    if (first < 0) return;
    await laterTurn(); // never at once: the deliveries of a batch all start together
    let decided = shared?.get(this.spec.principal);
    if (!decided) {
      decided = decideAll(this.spec.readable, shared ? changes : changes.slice(first));
      shared?.set(this.spec.principal, decided);
    }
    const allowed = await decided;
    await laterTurn();
    if (this.closed) return;
    const { test, events, keyOf } = this.spec;
    const present = this.spec.present ?? ((r: RecordRow) => r);
    const offset = shared ? 0 : first;
    const batch: StreamEvent[] = [];
    for (let n = first; n < changes.length; n++) {
      const c = changes[n]!;
      const now = c.record !== null && allowed[2 * (n - offset)]! && test(c.record);
      const before = c.old !== null && allowed[2 * (n - offset) + 1]! && test(c.old);
      this.pos = c.pos;
      let kind: string | undefined;
      if (c.op === 'create') kind = now ? 'create' : undefined;
      else if (c.op === 'delete') kind = before ? 'delete' : undefined;
      else kind = now && before ? 'update' : now ? 'enter' : before ? 'leave' : undefined;
      if (!kind || !events.has(kind === 'enter' || kind === 'leave' ? 'update' : (kind as ChangeOp))) continue;
      const data: Record<string, unknown> = { op: kind, key: keyOf((c.record ?? c.old)!), at: c.at, actor: c.actor };
      if (kind === 'create' || kind === 'update' || kind === 'enter') {
        const shown = present(c.record!);
        data.record = this.project(shown);
        if (kind === 'update') data.changed = changedFields(present(c.old!), shown);
      }
      batch.push({ id: c.pos, event: kind, data });
    }
    if (!batch.length) return;
    this.told = batch.at(-1)!.id;
    this.buffered(this.spec.sink.events(batch));
  }

  /** The fields asked for (`select`; the key's always). */
  private project(r: RecordRow): RecordRow {
    const fields = this.spec.select;
    if (!fields) return r;
    const out: RecordRow = {};
    for (const f of fields) if (Object.hasOwn(r, f)) out[f] = r[f];
    return out;
  }

  /**
   * Every second: the credentials and access when something changed that may end the stream
   * (its user, the site's policies: `dirty`), when they expire, and every RECHECK_MS anyway; then
   * a heartbeat when the stream was quiet.
   */
  tick(now: number): void {
    if (this.closed) return;
    const due = this.dirty || now >= this.nextCheck || (this.spec.expires !== undefined && now >= this.spec.expires);
    if (due && !this.rechecking) {
      this.dirty = false;
      this.nextCheck = now + RECHECK_MS;
      this.rechecking = true;
      void this.spec
        .recheck()
        .then((reason) => reason && this.end(reason))
        .catch(() => this.end('credentials'))
        .finally(() => (this.rechecking = false));
    }
    if (now - this.lastWrite >= this.feed.limits.heartbeatMs) {
      // The position moves past changes the client was not sent: a reconnection does not read them again.
      const moved = this.pos > this.told ? this.pos : undefined;
      this.told = this.pos;
      this.buffered(this.spec.sink.idle(moved));
    }
  }

  end(reason: EndReason): void {
    if (this.closed) return;
    this.spec.sink.ended(reason, END_TEXT[reason]);
    this.close();
  }

  /** The connection is gone (or ended here). */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.feed.remove(this);
    this.spec.sink.close();
  }
}

/** Records decided by one call of a subscriber's read policy (then the delivery waits for its turn again). */
const DECIDE_SLICE = 100;
/** Credentials and access are checked again at least this often (at once when they may have changed). */
const RECHECK_MS = 15_000;

/** The read policy's answer for each change's record and old record (two slots per change; false where there is none), in slices, each in a turn. */
async function decideAll(readable: SubscriberSpec['readable'], changes: LoggedChange[]): Promise<boolean[]> {
  const rows: RecordRow[] = [];
  const slots: number[] = [];
  for (const c of changes) {
    for (const r of [c.record, c.old]) {
      slots.push(r ? rows.length : -1);
      if (r) rows.push(r);
    }
  }
  const answers: boolean[] = [];
  for (let k = 0; k < rows.length; k += DECIDE_SLICE) {
    if (k) await turn();
    answers.push(...(await readable(rows.slice(k, k + DECIDE_SLICE))));
  }
  return slots.map((i) => i >= 0 && answers[i]!);
}
/** How long deliveries may run before the event loop serves something else (other requests, other sites). */
const TURN_MS = 5;
let turnStarted = performance.now();
/** Deliveries waiting for a turn, in order (letGo). */
const waiting: (() => void)[] = [];
let scheduled = false;

function nextTurn(): void {
  if (scheduled) return;
  scheduled = true;
  // An immediate queued from an immediate runs on the loop's next iteration: I/O is served in between.
  setImmediate(() => {
    scheduled = false;
    turnStarted = performance.now();
    letGo();
  });
}

/**
 * Lets the first waiting delivery go; once it has run up to where it waits again (its
 * continuation is the microtask queued first), the next one while the turn has run less than
 * TURN_MS, else the rest in later turns.
 */
function letGo(): void {
  waiting.shift()?.();
  queueMicrotask(() => {
    if (!waiting.length) return;
    if (performance.now() - turnStarted < TURN_MS) letGo();
    else nextTurn();
  });
}

/**
 * Resolves at once while the work of this turn has run less than TURN_MS since the event loop
 * last served I/O and none is waiting; else in a later turn (laterTurn). For a chain of work that
 * goes on (decideAll's slices).
 */
function turn(): Promise<void> | undefined {
  if (!waiting.length && performance.now() - turnStarted < TURN_MS) return undefined;
  return laterTurn();
}

/**
 * A later turn of the loop, in order: waiting deliveries are let go one after the other, each once
 * the one before has run, while the turn lasts (letGo). Every subscriber's delivery starts in one,
 * and goes on in another once its records are decided: a batch fans out to thousands of
 * subscribers at once (chains of promises that all start, or all resume from one shared decision,
 * before any has done its work: the time of the turn could not tell when each asked), and the loop
 * is held for about TURN_MS and one delivery at a time, whichever site it belongs to.
 */
function laterTurn(): Promise<void> {
  return new Promise((resolve) => {
    waiting.push(resolve);
    nextTurn();
  });
}

/** The names of the fields an update changed. */
function changedFields(old: RecordRow, now: RecordRow): string[] {
  const out: string[] = [];
  for (const k of new Set([...Object.keys(old), ...Object.keys(now)])) if (JSON.stringify(old[k]) !== JSON.stringify(now[k])) out.push(k);
  return out;
}

/** The changes of one table held in memory, beyond which a subscriber reads the log itself. */
const MEMORY = 2000;
/** How soon a reader waiting on a gap looks again (the writer's commit wakes it sooner). */
const GAP_RETRY_MS = 50;

class Tail {
  readonly subscribers = new Set<Subscriber>();
  /** The position before the first change held in memory. */
  base = 0;
  readonly recent: LoggedChange[] = [];
  private readonly state: ReadState = { pos: 0 };
  private reading = false;
  private again = false;
  private retry: NodeJS.Timeout | undefined;
  /** The table's definition may have changed: compared with the subscribers' on the next read. */
  checkDefinition = false;
  /** The last read failed (logged once until one succeeds). */
  private failing = false;

  readonly site: string;
  readonly table: string;
  readonly relid: number;
  private readonly em: EntityManager;
  private readonly source: ChangeSource;
  private readonly hash: string | undefined;
  private readonly log: Logger | undefined;

  constructor(site: string, table: string, relid: number, em: EntityManager, source: ChangeSource, hash: string | undefined, start: number, log?: Logger) {
    this.log = log;
    this.site = site;
    this.table = table;
    this.relid = relid;
    this.em = em;
    this.source = source;
    this.hash = hash;
    this.base = this.state.pos = start;
  }

  get pos(): number {
    return this.state.pos;
  }

  wake(): void {
    if (this.reading) {
      this.again = true;
      return;
    }
    this.reading = true;
    void this.read().finally(() => {
      this.reading = false;
      if (this.again) {
        this.again = false;
        this.wake();
      }
    });
  }

  private async read(): Promise<void> {
    clearTimeout(this.retry);
    try {
      if (this.checkDefinition && !(await this.definitionHolds())) return;
      for (;;) {
        const { changes, waiting } = await readChanges(this.em, this.site, this.table, this.relid, this.source, this.state);
        if (changes.length) {
          this.recent.push(...changes);
          if (this.recent.length > MEMORY) this.base = this.recent.splice(0, this.recent.length - MEMORY).at(-1)!.pos;
          const following = [...this.subscribers].filter((s) => !s.catching);
          const decisions = new Map<string, Promise<boolean[]>>();
          for (const s of following) s.serial(() => s.deliver(changes, decisions));
          // The next batch once this one is delivered (to those that follow; one catching up reads on its own).
          await Promise.all(following.map((s) => s.settled));
        }
        if (waiting) this.retry = setTimeout(() => this.wake(), GAP_RETRY_MS).unref();
        if (waiting || changes.length === 0) break;
      }
      this.failing = false;
    } catch (err) {
      // The database is unavailable: try again soon (the subscribers keep their positions).
      if (!this.failing) this.log?.warn({ err, site: this.site, table: this.table }, 'change log read failed: retrying every second');
      this.failing = true;
      this.retry = setTimeout(() => this.wake(), 1000).unref();
    }
  }

  /** False (and every subscriber ended) when the table's schema changed or the table is gone. */
  private async definitionHolds(): Promise<boolean> {
    this.checkDefinition = false;
    if (this.hash === undefined) return true; // not a data table (storage objects)
    const [row] = await rows<{ h: string }>(this.em, `SELECT schema_hash AS h FROM ${quotedSchema(this.site)}.data_tables WHERE physical_table_name = ? AND is_materialized`, [this.table]);
    if (row && row.h.trim() === this.hash) return true;
    for (const s of [...this.subscribers]) s.end('table');
    return false;
  }

  /** A subscriber from `pos` on: from memory when it holds what follows `pos`, else from the log first. */
  join(s: Subscriber): void {
    this.subscribers.add(s);
    if (s.pos >= this.base) {
      s.serial(() => s.deliver(this.recent));
      return;
    }
    s.catching = true;
    s.serial(async () => {
      const state: ReadState = { pos: s.pos };
      for (;;) {
        if (s.closed) return;
        if (state.pos >= this.base) {
          s.catching = false;
          await s.deliver(this.recent);
          return;
        }
        const { changes, waiting } = await readChanges(this.em, this.site, this.table, this.relid, this.source, state);
        await s.deliver(changes);
        if (waiting) await new Promise((r) => setTimeout(r, GAP_RETRY_MS));
        else if (!changes.length) state.pos = Math.max(state.pos, this.base); // nothing more in the log up to memory
      }
    });
  }

  close(): void {
    clearTimeout(this.retry);
  }
}

export class RecordFeed {
  private readonly tails = new Map<string, Tail>();
  private readonly opening = new Map<string, Promise<Tail>>();
  private readonly perSite = new Map<string, number>();
  private count = 0;
  private readonly timer: NodeJS.Timeout;

  readonly limits: FeedLimits;
  readonly log: Logger | undefined;

  constructor(limits: FeedLimits, listener?: ChangeListener, log?: Logger) {
    this.limits = limits;
    this.log = log;
    const dirty = (which: (s: Subscriber) => boolean) => {
      for (const t of this.tails.values()) for (const s of t.subscribers) if (which(s)) s.dirty = true;
    };
    listener
      ?.on('records', (schema) => this.wake(schema))
      // What may end a stream: its user changed (a revocation, a deactivation, its attributes), the site's policies or roles, the site itself.
      .on('auth', (uuid) => dirty((s) => uuid === null || s.spec.user === uuid))
      .on('policies', (schema) => dirty((s) => schema === null || s.spec.site === schema))
      .on('routing', () => dirty(() => true))
      // A site move's thaw (sites/move-gate.ts): its streams read the old database; they reconnect.
      .on('move', (key) => {
        const moved = /^thaw (\S+)$/.exec(key ?? '')?.[1];
        if (moved) for (const t of [...this.tails.values()]) if (t.site === moved) for (const s of [...t.subscribers]) s.end('moved');
      })
      .on('tables', (schema) => {
        for (const t of this.tails.values()) {
          if (schema !== null && t.site !== schema) continue;
          t.checkDefinition = true;
          t.wake();
        }
      });
    // Every second: each reader looks at its log (changes made outside the API announce nothing),
    // each subscriber is checked again.
    this.timer = setInterval(() => {
      const now = Date.now();
      for (const t of this.tails.values()) {
        t.wake();
        for (const s of t.subscribers) s.tick(now);
      }
    }, 1000).unref();
  }

  /** The logged tables of `schema` (null: of every site) may have changed: their readers look. */
  wake(schema: string | null): void {
    for (const t of this.tails.values()) if (schema === null || t.site === schema) t.wake();
  }

  get size(): number {
    return this.count;
  }

  /**
   * Opens a subscription. A resume from a position the log no longer holds (pruned, or not yet
   * taken) starts with a `reset` event: the client reloads, then follows from now.
   */
  async subscribe(spec: SubscriberSpec): Promise<Subscriber> {
    if (this.count >= this.limits.maxSubscribers) throw new FeedFullError('process');
    if ((this.perSite.get(spec.site) ?? 0) >= this.limits.maxPerSite) throw new FeedFullError('site');
    const key = `${spec.site}|${spec.table}`;
    this.count++;
    this.perSite.set(spec.site, (this.perSite.get(spec.site) ?? 0) + 1);
    const s = new Subscriber(spec, this);
    try {
      const tail = this.tails.get(key) ?? (await this.open(key, spec));
      let lost = false;
      if (spec.since === 'now') s.pos = tail.pos;
      else {
        const { pruned, last } = await logBounds(spec.em, spec.site, spec.table);
        lost = spec.since < pruned || spec.since > Math.max(last, tail.pos);
        s.pos = lost ? tail.pos : spec.since;
      }
      s.told = s.pos;
      s.opened();
      if (lost) s.reset('Changes after the position you resumed from are no longer kept: reload, then follow from here.');
      if (s.closed) {
        // The client went away while the stream was opened.
        this.release(spec.site);
        return s;
      }
      s.joined = true;
      tail.join(s);
      tail.wake();
      return s;
    } catch (err) {
      s.closed = true;
      this.release(spec.site);
      throw err;
    }
  }

  private open(key: string, spec: SubscriberSpec): Promise<Tail> {
    let opening = this.opening.get(key);
    if (!opening) {
      opening = (async () => {
        const [row] = await rows<{ oid: number | null }>(spec.em, 'SELECT to_regclass(?)::oid AS oid', [`${quotedSchema(spec.site)}.${quoteIdent(spec.table)}`]);
        if (!row?.oid) throw new Error(`table ${spec.table} not found`);
        const { last } = await logBounds(spec.em, spec.site, spec.table);
        const tail = new Tail(spec.site, spec.table, Number(row.oid), spec.em, spec.source, spec.hash, last, this.log);
        this.tails.set(key, tail);
        return tail;
      })().finally(() => this.opening.delete(key));
      this.opening.set(key, opening);
    }
    return opening;
  }

  /** A subscriber is gone. */
  remove(s: Subscriber): void {
    if (!s.joined) return; // subscribe() releases it
    const key = `${s.spec.site}|${s.spec.table}`;
    const tail = this.tails.get(key);
    if (!tail?.subscribers.delete(s)) return;
    this.release(s.spec.site);
    if (!tail.subscribers.size) {
      tail.close();
      this.tails.delete(key);
    }
  }

  private release(site: string): void {
    this.count--;
    const n = (this.perSite.get(site) ?? 1) - 1;
    if (n) this.perSite.set(site, n);
    else this.perSite.delete(site);
  }

  private readonly closing = new Set<() => void>();

  /** `stop` runs when the feed closes (a connection holding streams closes then); the returned function unregisters it. */
  onClose(stop: () => void): () => void {
    this.closing.add(stop);
    return () => this.closing.delete(stop);
  }

  /** Ends every stream (shutdown), then the connections that held them. */
  close(): void {
    clearInterval(this.timer);
    for (const t of [...this.tails.values()]) for (const s of [...t.subscribers]) s.end('shutdown');
    for (const stop of [...this.closing]) stop();
  }
}
