// A per-process cache of database lookups for the hot path: a hit costs no query. Entries
// expire after `ttlMs` (bounding staleness should an invalidation be missed); the owner drops
// entries when it is told of a change (db/changes.ts). Misses are cached too (unknown hosts,
// unknown apps), and the cache is emptied when it reaches `maxEntries` so that they cannot
// grow it without bound.

interface Entry<V> {
  value: V;
  at: number;
}

export class CachedLookup<V> {
  private readonly ttlMs: number;
  private readonly maxEntries: number;
  private entries = new Map<string, Entry<V>>();
  /** Lookups that reached the database (tests and benchmarks read it). */
  misses = 0;

  constructor(options: { ttlMs?: number; maxEntries?: number } = {}) {
    this.ttlMs = options.ttlMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 10_000;
  }

  async get(key: string, load: (key: string) => Promise<V>): Promise<V> {
    const hit = this.entries.get(key);
    const now = Date.now();
    if (hit && now - hit.at < this.ttlMs) return hit.value;
    this.misses++;
    const value = await load(key);
    if (this.entries.size >= this.maxEntries) this.entries.clear();
    this.entries.set(key, { value, at: now });
    return value;
  }

  /** Drops every entry, or those whose key starts with `prefix`. */
  clear(prefix?: string): void {
    if (prefix === undefined) {
      this.entries = new Map();
      return;
    }
    for (const key of this.entries.keys()) if (key.startsWith(prefix)) this.entries.delete(key);
  }
}
