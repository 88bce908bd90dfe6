// Object keys are bucket-relative paths (spec Part 3 §4): one canonical form before any
// decision, and nothing that could name a place outside the bucket. Also the metadata headers
// of raw uploads.
import { notFound, validationError } from '../errors.ts';

export const MAX_KEY_BYTES = 1024;

/**
 * The canonical form of a key: repeated slashes collapsed, no leading or trailing slash.
 * Refused (400 naming `field`): empty, absolute (leading `/`), `.` or `..` segments, backslashes,
 * NUL and other control characters, over 1,024 bytes.
 */
export function normalizeKey(raw: unknown, field = 'path'): string {
  if (typeof raw !== 'string' || raw.trim() === '') throw validationError({ [field]: ['An object path is required.'] });
  const refuse = (why: string) => validationError({ [field]: [`Invalid object path ${JSON.stringify(raw.slice(0, 200))}: ${why}`] });
  if (raw.startsWith('/')) throw refuse('it must be relative to the bucket (no leading slash).');
  if (raw.includes('\\')) throw refuse('backslashes are not allowed.');
  // eslint-disable-next-line no-control-regex
  if (/[\u0000-\u001f\u007f]/.test(raw)) throw refuse('control characters are not allowed.');
  const segments = raw.split('/').filter((s) => s !== '');
  if (segments.some((s) => s === '.' || s === '..')) throw refuse('"." and ".." segments are not allowed.');
  const key = segments.join('/');
  if (key === '') throw refuse('it names no file.');
  if (Buffer.byteLength(key) > MAX_KEY_BYTES) throw refuse(`at most ${MAX_KEY_BYTES} bytes.`);
  return key;
}

/** The 404 of an object: the same body whether it is missing or hidden from the caller. */
export const objectNotFound = (key: string) => notFound(`Object "${key}"`);

/** The file name of a key: its last segment. */
export const filenameOf = (key: string): string => key.slice(key.lastIndexOf('/') + 1);

const METADATA_HEADER = /^x-metadata-(.+)$/;
/** The S3-style vendor prefix (`x-amz-meta-`, `x-goog-meta-`, …). */
const VENDOR_HEADER = /^x-[a-z0-9]+-meta-(.+)$/;

/**
 * Metadata from request headers: `X-Metadata-User-Id: 7` gives `{"user-id": "7"}`; the vendor
 * form `X-Amz-Meta-User-Id` the same. Header names arrive lower-cased from Node.
 */
export function metadataFromHeaders(headers: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined) continue;
    const m = METADATA_HEADER.exec(name) ?? VENDOR_HEADER.exec(name);
    if (m) out[m[1]!] = Array.isArray(value) ? value.join(', ') : value;
  }
  return out;
}

/** A `metadata` form field or body value: a JSON object (a string holding one, for forms). */
export function metadataValue(raw: unknown, field = 'metadata'): Record<string, unknown> | undefined {
  if (raw === undefined || raw === null || raw === '') return undefined;
  let value = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      throw validationError({ [field]: ['Must be a JSON object.'] });
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw validationError({ [field]: ['Must be a JSON object.'] });
  return value as Record<string, unknown>;
}
