// The write freeze of a site move (docs/scale-out.md "Moving a site"), on each server process.
// `platform site move` notifies `move:freeze <schema> <move> <deadline>` on the primary's channel;
// every process then holds the site's new write requests (they wait: they are not refused) and,
// once the site's writes already running here have ended, answers `move:frozen <move> <process>`.
// The move copies what is left, switches the site's cluster (a routing change, delivered before
// what follows on the same channel) and notifies `move:thaw <schema>`: the held writes go on, to
// the site's new cluster. Should the move stop answering (killed), each process lets the writes
// go at the deadline, to the site's cluster as the registry says then (its source, unless the
// switch committed).
import type { EntityManager } from '@mikro-orm/postgresql';
import { CHANGES_CHANNEL, type ChangeListener } from '../db/changes.ts';

/** Longest a freeze may hold writes, whatever the move asks (its own bound is shorter). */
export const MAX_FREEZE_MS = 30_000;

interface Freeze {
  move: string;
  /** Resolves when the site's writes may go on (thaw or deadline). */
  released: Promise<void>;
  release: () => void;
  timer: NodeJS.Timeout;
  acked: boolean;
}

export class WriteGate {
  private readonly running = new Map<string, number>();
  private readonly frozen = new Map<string, Freeze>();
  private readonly drained = new Map<string, (() => void)[]>();
  private readonly self: string;
  private readonly notify: (payload: string) => Promise<unknown>;

  /**
   * `self`: this process's name on the channel (its listener's); `notify`: sends on the primary's
   * channel (the pool: one statement).
   */
  constructor(self: string, notify: (payload: string) => Promise<unknown>) {
    this.self = self;
    this.notify = notify;
  }

  /** Follows the moves' notifications on `listener` (topic `move`). */
  follow(listener: ChangeListener): this {
    listener.on('move', (key) => key && this.message(key));
    return this;
  }

  /** Whether a write to `schema` must wait now (no promise on the hot path when not). */
  holds(schema: string): boolean {
    return this.frozen.has(schema);
  }

  /** Waits while `schema` is frozen (until the thaw or the deadline). */
  async wait(schema: string): Promise<void> {
    while (this.frozen.has(schema)) await this.frozen.get(schema)!.released;
  }

  /** Counts a write to `schema` as running here until the returned function is called. */
  enter(schema: string): () => void {
    this.running.set(schema, (this.running.get(schema) ?? 0) + 1);
    let left = false;
    return () => {
      if (left) return;
      left = true;
      const n = this.running.get(schema)! - 1;
      if (n) {
        this.running.set(schema, n);
        return;
      }
      this.running.delete(schema);
      for (const done of this.drained.get(schema) ?? []) done();
      this.drained.delete(schema);
    };
  }

  private message(key: string): void {
    const [kind, schema, move, deadline] = key.split(' ');
    if (!schema) return;
    if (kind === 'freeze' && move) this.freeze(schema, move, Math.min(Number(deadline) - Date.now(), MAX_FREEZE_MS));
    else if (kind === 'thaw') this.thaw(schema);
  }

  private freeze(schema: string, move: string, forMs: number): void {
    if (!(forMs > 0)) return;
    this.thaw(schema);
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const freeze: Freeze = { move, released, release, timer: setTimeout(() => this.thaw(schema), forMs), acked: false };
    freeze.timer.unref();
    this.frozen.set(schema, freeze);
    const ack = () => {
      if (this.frozen.get(schema) !== freeze || freeze.acked) return;
      freeze.acked = true;
      void this.notify(`move:frozen ${move} ${this.self}`).catch(() => undefined);
    };
    if (!this.running.has(schema)) ack();
    else this.drained.set(schema, [...(this.drained.get(schema) ?? []), ack]);
  }

  private thaw(schema: string): void {
    const freeze = this.frozen.get(schema);
    if (!freeze) return;
    this.frozen.delete(schema);
    clearTimeout(freeze.timer);
    freeze.release();
  }
}

/** Sends `payload` on the changes channel through `em` (one statement). */
export const notifyOn = (em: EntityManager) => (payload: string) => em.execute('SELECT pg_notify(?, ?)', [CHANGES_CHANNEL, payload]);
