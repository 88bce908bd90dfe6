// Keys and prefixes as both stores accept them. The service makes keys (`{bucket_uuid}/{blob_uuid}`),
// but a store still refuses anything that could leave the site's root on a filesystem or read
// differently on S3: absolute names, empty, `.` or `..` segments, backslashes and NUL.

export class InvalidKey extends Error {
  override name = 'InvalidKey';
  constructor(key: string, why: string) {
    super(`Invalid storage key ${JSON.stringify(key)}: ${why}.`);
  }
}

const MAX_KEY_LENGTH = 1024;

/** The key itself, or throws InvalidKey. */
export function assertKey(key: string): string {
  if (typeof key !== 'string' || key === '') throw new InvalidKey(String(key), 'empty');
  if (key.length > MAX_KEY_LENGTH) throw new InvalidKey(key.slice(0, 40) + '…', `longer than ${MAX_KEY_LENGTH} characters`);
  if (key.includes('\0')) throw new InvalidKey(key, 'contains NUL');
  if (key.includes('\\')) throw new InvalidKey(key, 'contains a backslash');
  if (key.startsWith('/')) throw new InvalidKey(key, 'absolute');
  for (const segment of key.split('/')) {
    if (segment === '') throw new InvalidKey(key, 'empty segment');
    if (segment === '.' || segment === '..') throw new InvalidKey(key, `"${segment}" segment`);
  }
  return key;
}

/** A prefix: `''` (everything), a key, or a key followed by `/`. */
export function assertPrefix(prefix: string): string {
  if (prefix === '') return prefix;
  assertKey(prefix.endsWith('/') ? prefix.slice(0, -1) : prefix);
  return prefix;
}
