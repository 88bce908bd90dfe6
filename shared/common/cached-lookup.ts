// A per-process cache of database lookups for the hot path: a hit costs no query. The owner drops
// entries when it is told of a change (db/changes.ts: PostgreSQL NOTIFY, sent inside the changing
// transaction); entries also expire after `ttlMs`, a safety net should a notification be missed.
// Misses are cached too (unknown hosts, tables); at `maxEntries` the oldest tenth of the entries
// goes, so that they cannot grow it without bound and a process serving more sites than it keeps
// (10,000 sites on a cluster) loses only the oldest, not every entry at once.
//
// Two rules keep it from ever serving a decision staler than the change plus its delivery:
//   - with `listener`, it serves only while that listener listens (a dropped connection may have
//     missed notifications: every lookup then goes to the database until it listens again);
//   - a value loaded while an invalidation arrived is returned but not kept (it may have been
//     read before the change committed).
// Concurrent misses of one key share one load (no stampede on a cold or just-cleared key).

interface Entry<V> {
  value: V;
  at: number;
}

export class CachedLookup<V> {
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private readonly listener: { readonly listening: boolean } | undefined;
  private entries = new Map<string, Entry<V>>();
  private readonly loading = new Map<string, { epoch: number; value: Promise<V> }>();
  /** Bumped by every invalidation: a load that saw it change keeps nothing. */
  private epoch = 0;
  /** Lookups that reached the database (tests and benchmarks read it). */
  misses = 0;

  constructor(options: { ttlMs?: number; maxEntries?: number; listener?: { readonly listening: boolean } } = {}) {
    this.ttlMs = options.ttlMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 10_000;
    this.listener = options.listener;
  }

  /** The cached value when `get` would answer it without loading (the same rules), else undefined: for hot paths that avoid a promise. */
  peek(key: string): V | undefined {
    const hit = this.entries.get(key);
    if (!hit || (this.listener && !this.listener.listening) || Date.now() - hit.at >= this.ttlMs) return undefined;
    return hit.value;
  }

  /** The value: a hit as it is (no promise: the hot path awaits it for nothing), else its load's promise. */
  get(key: string, load: (key: string) => Promise<V>): V | Promise<V> {
    const hit = this.entries.get(key);
    const now = Date.now();
    const serving = !this.listener || this.listener.listening;
    if (serving && hit && now - hit.at < this.ttlMs) return hit.value;
    return this.miss(key, load, now, serving);
  }

  private async miss(key: string, load: (key: string) => Promise<V>, now: number, serving: boolean): Promise<V> {
    const pending = this.loading.get(key);
    if (serving && pending && pending.epoch === this.epoch) return pending.value;
    this.misses++;
    const epoch = this.epoch;
    const value = load(key);
    if (serving) this.loading.set(key, { epoch, value });
    try {
      const loaded = await value;
      if (serving && epoch === this.epoch) {
        if (this.entries.size >= this.maxEntries) this.dropOldest();
        this.entries.set(key, { value: loaded, at: now });
      }
      return loaded;
    } finally {
      if (this.loading.get(key)?.value === value) this.loading.delete(key);
    }
  }

  /** Makes room: the first-inserted tenth of the entries goes (a Map iterates in insertion order). */
  private dropOldest(): void {
    let n = Math.ceil(this.maxEntries / 10);
    for (const key of this.entries.keys()) {
      this.entries.delete(key);
      if (--n <= 0) break;
    }
  }

  /** Drops every entry, or those whose key starts with `prefix`. */
  clear(prefix?: string): void {
    this.epoch++;
    if (prefix === undefined) {
      this.entries = new Map();
      return;
    }
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }

  /** Drops the entries `match` picks. */
  drop(match: (key: string, value: V) => boolean): void {
    this.epoch++;
    for (const [key, entry] of this.entries) if (match(key, entry.value)) this.entries.delete(key);
  }
}
