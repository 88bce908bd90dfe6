// One canonical form of a JSON value for hashing: object keys sorted at every depth, arrays in
// their order. A table schema's hash and an app package's checksums are taken over it.

/** The same value with object keys sorted at every depth (arrays keep their order). */
export function canonical<T>(value: T): T {
  if (Array.isArray(value)) return value.map(canonical) as T;
  if (typeof value !== 'object' || value === null) return value;
  return Object.fromEntries(Object.keys(value).sort().map((k) => [k, canonical((value as Record<string, unknown>)[k])])) as T;
}

/** The canonical value as JSON text. */
export const canonicalJson = (value: unknown): string => JSON.stringify(canonical(value));
