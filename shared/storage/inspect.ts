// The upload inspection, done while the bytes stream (docs/storage.md "Upload inspection"):
// the head (4,100 bytes, file-type's detection window) is read first and gives the type, which
// must match the bucket's allowed types; the rest flows on, counted, and the body is destroyed
// with a 400 the moment it passes the bucket's size limit, so the store's put rejects and nothing
// is kept. Nothing is buffered beyond the head and the stream's own high-water mark.
import { Readable } from 'node:stream';
import { DomainError } from '../errors.ts';
import { isTextType, mimeEssence, mimeMatches, mimeParameter, textTypeOfFilename, validMimeType } from './mime.ts';

export { isDocumentEditable, mimeMatches, validMimePattern } from './mime.ts';

/** How much of the head the type is sniffed from (file-type's `reasonableDetectionSizeInBytes`). */
export const HEAD_BYTES = 4100;

export interface InspectOptions {
  /** The bucket's `file_size_limit` in bytes. */
  limit: number;
  /** The Content-Type the client declared (trusted only where the bytes cannot tell). */
  declaredType?: string;
  /** The Content-Length the client declared: over the limit, refused before a byte is read. */
  declaredSize?: number;
  /** The file's name (its extension types text files declared without a text type). */
  filename: string;
  /** The bucket's `allowed_mime_types` patterns; `[]` allows every type. */
  allowed: string[];
}

export interface Inspected {
  /** The type the object is stored with: a bare `type/subtype`, lowercase, without parameters. */
  mimetype: string;
  /** The head again, then the rest of the source; destroyed with fileTooLarge past the limit. */
  body: Readable;
  /** Bytes seen so far (final once body ended). */
  size(): number;
}

export type UploadRejection = 'empty' | 'too_large' | 'type_not_allowed';

/**
 * An upload refused by the inspection: 400 `BAD_REQUEST`, its message the spec's text. `reason`
 * tells the routes which (an empty file answers `{error}`, the others `{success: false, …}`).
 */
export class UploadRejected extends DomainError {
  readonly reason: UploadRejection;
  readonly details: { size?: number | null; limit?: number; mimetype?: string; allowed?: string[] };

  constructor(reason: UploadRejection, message: string, details: UploadRejected['details'] = {}) {
    // Spec Part 3 §4: an empty file answers {error} as well.
    super('BAD_REQUEST', message, reason === 'empty' ? { extra: { error: message } } : {});
    this.reason = reason;
    this.details = details;
  }
}

export const emptyFile = (): UploadRejected => new UploadRejected('empty', 'The submitted file is empty.');

/**
 * Over the limit: `size` is the declared or exact size, or (with `atLeast`) the bytes seen when
 * the stream was cut; null when unknown.
 */
export function fileTooLarge(size: number | null, limit: number, atLeast = false): UploadRejected {
  const message =
    size === null
      ? `File size exceeds the limit of ${limit} bytes.`
      : atLeast
        ? `File size exceeds the limit of ${limit} bytes (more than ${size - 1} bytes received).`
        : `File size ${size} bytes exceeds the limit of ${limit} bytes.`;
  return new UploadRejected('too_large', message, { size, limit });
}

export function typeNotAllowed(type: string, allowed: string[]): UploadRejected {
  return new UploadRejected('type_not_allowed', `File type "${type}" is not allowed. Allowed types: ${allowed.join(', ')}.`, { mimetype: type, allowed: [...allowed] });
}

/**
 * A declared Content-Length checked before any byte is read: its value (undefined when absent
 * or not a whole number), or fileTooLarge when it exceeds `limit`.
 */
export function checkDeclaredSize(declared: number | string | null | undefined, limit: number): number | undefined {
  const n = typeof declared === 'string' ? (/^\d{1,16}$/.test(declared.trim()) ? Number(declared.trim()) : NaN) : declared ?? NaN;
  if (!Number.isSafeInteger(n) || n < 0) return undefined;
  if (n > limit) throw fileTooLarge(n, limit);
  return n;
}

export async function inspect(source: Readable, options: InspectOptions): Promise<Inspected> {
  checkDeclaredSize(options.declaredSize, options.limit);
  // A late error of a source nobody reads any more (refused, cut, or while the type is sniffed)
  // must not become an uncaught exception; the listeners below still see every error.
  source.on('error', ignore);
  const { chunks, length, ended } = await readHead(source, HEAD_BYTES);
  if (length === 0) throw emptyFile();
  if (length > options.limit) throw fileTooLarge(length, options.limit, !ended);
  const head = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, length);
  const mimetype = await sniffType(head, { complete: ended, declaredType: options.declaredType, filename: options.filename });
  if (!mimeMatches(mimetype, options.allowed)) throw typeNotAllowed(mimetype, options.allowed);
  return { mimetype, ...meter(source, chunks, length, ended, options.limit) };
}

// ---- the type ---------------------------------------------------------------------------------

/** Declared types more specific than a generic container file-type recognizes. */
function refines(sniffed: string, declared: string): boolean {
  switch (sniffed) {
    case 'application/zip':
      return (
        declared.endsWith('+zip') ||
        declared.startsWith('application/vnd.openxmlformats-officedocument.') ||
        declared.startsWith('application/vnd.oasis.opendocument.') ||
        (declared.startsWith('application/vnd.ms-') && declared.endsWith('.macroenabled.12')) ||
        ['application/java-archive', 'application/vnd.android.package-archive', 'application/x-xpinstall', 'application/vnd.ms-xpsdocument', 'application/oxps', 'application/vnd.google-earth.kmz'].includes(declared)
      );
    case 'application/x-cfb':
      return ['application/msword', 'application/vnd.ms-excel', 'application/vnd.ms-powerpoint', 'application/vnd.ms-outlook', 'application/vnd.visio', 'application/x-msi', 'application/vnd.ms-project'].includes(declared);
    case 'application/xml':
      return declared.endsWith('+xml') || declared === 'text/xml';
    default:
      return false;
  }
}

/** Whether the head reads as text: no NUL and valid UTF-8 (a cut sequence at the end of an incomplete head is fine). */
function looksLikeText(head: Buffer, complete: boolean, declaredCharset: string | undefined): boolean {
  if (head.length >= 2 && ((head[0] === 0xff && head[1] === 0xfe) || (head[0] === 0xfe && head[1] === 0xff))) return true; // UTF-16 BOM
  if (head.includes(0)) return false;
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(head, { stream: !complete });
    return true;
  } catch {
    // Not UTF-8, but the client named a legacy charset (`text/csv; charset=iso-8859-1`).
    return declaredCharset !== undefined && !['utf-8', 'utf8', 'us-ascii'].includes(declaredCharset);
  }
}

/**
 * The type of an upload from its head (`complete`: the head is the whole file):
 * 1. file-type recognizes the bytes: that type; the declared one only where it refines a generic
 *    container of the same family (ZIP → OOXML/ODF/EPUB/JAR…, CFB → legacy Office, XML → `+xml`);
 * 2. text (no NUL, valid UTF-8): the declared type if it is a text type, else the file name's
 *    extension among text types, else `text/plain`;
 * 3. other bytes: the declared type unless it is a text type or one file-type would have
 *    recognized (a lie), else `application/octet-stream`.
 */
export async function sniffType(head: Buffer, options: { complete: boolean; declaredType?: string; filename: string }): Promise<string> {
  const essence = options.declaredType ? mimeEssence(options.declaredType) : '';
  const declared = validMimeType(essence) ? essence : undefined;
  const { fileTypeFromBuffer, supportedMimeTypes } = await import('file-type'); // loaded by the first upload, not with the app
  const detected = await fileTypeFromBuffer(head);
  if (detected) {
    const sniffed = detected.mime.toLowerCase();
    return declared && refines(sniffed, declared) ? declared : sniffed;
  }
  const charset = options.declaredType ? mimeParameter(options.declaredType, 'charset') : undefined;
  if (looksLikeText(head, options.complete, charset)) {
    if (declared && isTextType(declared)) return declared;
    return textTypeOfFilename(options.filename) ?? 'text/plain';
  }
  if (declared && !isTextType(declared) && !(supportedMimeTypes as ReadonlySet<string>).has(declared)) return declared;
  return 'application/octet-stream';
}

// ---- the stream -------------------------------------------------------------------------------

/** Reads until `want` bytes (or the end) arrived, then pauses `source`; the chunks as they came. */
function readHead(source: Readable, want: number): Promise<{ chunks: Buffer[]; length: number; ended: boolean }> {
  return new Promise((resolve, reject) => {
    if (source.destroyed || source.readableEnded) {
      if (source.readableEnded) resolve({ chunks: [], length: 0, ended: true });
      else reject(source.errored ?? prematureClose());
      return;
    }
    const chunks: Buffer[] = [];
    let length = 0;
    const cleanup = () => {
      source.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
    };
    const onData = (chunk: Buffer | string) => {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
      chunks.push(buf);
      length += buf.length;
      if (length >= want) {
        source.pause();
        cleanup();
        resolve({ chunks, length, ended: false });
      }
    };
    const onEnd = () => {
      cleanup();
      resolve({ chunks, length, ended: true });
    };
    const onError = (err: Error) => {
      cleanup();
      reject(err);
    };
    const onClose = () => {
      cleanup();
      reject(prematureClose());
    };
    source.on('data', onData).once('end', onEnd).once('error', onError).once('close', onClose);
    source.resume();
  });
}

const prematureClose = (): Error => Object.assign(new Error('The upload ended before it was complete.'), { code: 'ERR_STREAM_PREMATURE_CLOSE' });
const ignore = (): void => {};

/**
 * The body: the head chunks, then `source` as it comes, counted. It pulls from `source` only as
 * fast as it is read (pause/resume), and past `limit` it is destroyed with fileTooLarge. It never
 * destroys `source`: after a failure `source` is left paused and detached (an `error` listener
 * kept so a late error cannot crash the process); the caller drains it or closes the connection.
 */
function meter(source: Readable, head: Buffer[], headLength: number, ended: boolean, limit: number): Pick<Inspected, 'body' | 'size'> {
  let count = headLength;
  let detached = ended || source.readableEnded;
  const detach = () => {
    if (detached) return;
    detached = true;
    source.off('data', onData).off('end', onEnd).off('error', onError).off('close', onClose);
    if (!source.destroyed) source.pause();
  };
  const body = new Readable({
    highWaterMark: Math.max(source.readableHighWaterMark, 16 * 1024),
    read() {
      if (!detached) source.resume();
    },
    destroy(err, callback) {
      detach();
      callback(err);
    },
  });
  const onData = (chunk: Buffer | string) => {
    const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk);
    count += buf.length;
    if (count > limit) {
      detach();
      body.destroy(fileTooLarge(count, limit, true));
      return;
    }
    if (!body.push(buf)) source.pause();
  };
  const onEnd = () => {
    detach();
    body.push(null);
  };
  const onError = (err: Error) => {
    detach();
    body.destroy(err);
  };
  const onClose = () => {
    // 'close' without 'end': the source was destroyed mid-way.
    detach();
    body.destroy(prematureClose());
  };
  for (const chunk of head) body.push(chunk);
  // Ended while the type was sniffed ('end' comes once the head drained the last bytes).
  if (ended || source.readableEnded) body.push(null);
  else if (source.destroyed) {
    // Gone while the type was sniffed.
    detached = true;
    body.destroy(source.errored ?? prematureClose());
  } else source.on('data', onData).once('end', onEnd).once('error', onError).once('close', onClose);
  return { body, size: () => count };
}
