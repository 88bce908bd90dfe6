// Slugs (spec Part 1 §1.3–1.4): lowercase, words joined by hyphens, `-2`, `-3` … on
// collision, unique even under concurrent creates (a unique index decides; we retry).

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string): boolean => UUID_RE.test(value);

export function slugify(text: string, maxLength = 50): string {
  const slug = text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '')
    .slice(0, maxLength)
    .replace(/-+$/g, '');
  return slug;
}

/**
 * Part 3's slugs (buckets): lowercase, spaces to hyphens, special characters removed rather than
 * turned into a hyphen (`Team's Files` → `teams-files`, `v1.2 assets` → `v12-assets`); `_` is a
 * space, as in slugify.
 */
export const slugifyRemovingSpecials = (text: string, maxLength = 50): string =>
  slugify(text.normalize('NFKD').replace(/[^A-Za-z0-9\s_-]+/g, ''), maxLength);

/** The first free candidate: `base`, else `base-N` with N one above the highest taken. */
export function nextSlug(base: string, taken: Iterable<string>): string {
  const set = new Set([...taken].map((s) => s.toLowerCase()));
  if (!set.has(base)) return base;
  let max = 1;
  for (const s of set) {
    const n = s.startsWith(`${base}-`) ? s.slice(base.length + 1) : '';
    if (/^\d+$/.test(n)) max = Math.max(max, Number(n));
  }
  return `${base}-${max + 1}`;
}

/** The PostgreSQL error (SQLSTATE code, constraint) inside whatever wrapped it. */
export function pgError(err: unknown): { code?: string; constraint?: string } {
  let e = err as { code?: string; constraint?: string; cause?: unknown } | undefined;
  for (let depth = 0; e && depth < 5; depth++) {
    if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return { code: e.code, constraint: e.constraint };
    e = e.cause as typeof e;
  }
  return {};
}

/** The name of the unique constraint or index a PostgreSQL error (or a wrapper of one) violated. */
export function uniqueViolation(err: unknown): string | undefined {
  const { code, constraint } = pgError(err);
  return code === '23505' ? (constraint ?? '') : undefined;
}

/**
 * Inserts with a generated slug, retrying with the next candidate when a concurrent
 * insert took it. `insert` must run in its own transaction so a failed attempt leaves nothing.
 */
export async function insertWithUniqueSlug<T>(
  base: string,
  constraint: string,
  taken: (base: string) => Promise<string[]>,
  insert: (slug: string) => Promise<T>,
  attempts = 8,
): Promise<T> {
  for (let i = 0; ; i++) {
    const slug = nextSlug(base, await taken(base));
    try {
      return await insert(slug);
    } catch (err) {
      if (uniqueViolation(err) !== constraint || i >= attempts) throw err;
    }
  }
}
