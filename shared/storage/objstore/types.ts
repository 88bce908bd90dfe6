// The seam between storage's records (PostgreSQL: buckets, objects, paths, metadata) and the
// bytes (a filesystem directory or an S3-compatible service). Bytes never pass through
// PostgreSQL; the records never live in the store. A store is one site's: every key is relative
// to that site's root (a directory, a key prefix, or a bucket of its own).
//
// Keys are opaque names the service makes (`{bucket_uuid}/{blob_uuid}`): an object's path is a
// column, so a move is a row update and a replace writes a new blob and swaps the row's pointer
// (readers see the old or the new bytes, never a mix). docs/storage.md.
import { Readable } from 'node:stream';

const WHOLE = Symbol('whole bytes');

/**
 * A blob read whole into memory (a small one), as a stream that also carries its bytes: a caller
 * that answers HTTP sends them as they are (wholeBytes), with no stream between them and the socket.
 */
export function wholeStream(bytes: Buffer): Readable {
  return Object.assign(Readable.from([bytes]), { [WHOLE]: bytes });
}

/** The bytes of a stream made by wholeStream and not read yet; undefined for any other stream. */
export function wholeBytes(stream: Readable): Buffer | undefined {
  return stream.readableDidRead ? undefined : (stream as Readable & { [WHOLE]?: Buffer })[WHOLE];
}

export interface PutResult {
  /** Bytes written. */
  size: number;
  /** The store's entity tag (quoted as HTTP sends it: `"…"`). */
  etag: string;
}

export interface BlobStat {
  size: number;
  etag: string;
}

/** Inclusive byte range (HTTP `Range: bytes=start-end`). */
export interface ByteRange {
  start: number;
  end: number;
}

export interface SiteStore {
  /**
   * Writes `body` under `key`. Resolves once the bytes are durable; rejects with the stream's
   * error when `body` fails or is destroyed, and then nothing of this write is left (no partial
   * file, no dangling multipart upload; bytes an earlier put stored under `key` stay as they
   * were). With `size`, a body of another length is refused the same way.
   */
  put(key: string, body: Readable, options: { contentType: string; size?: number }): Promise<PutResult>;
  /**
   * Optional (the filesystem store; S3 cannot move an object): writes `body` under `key` staged —
   * durable when this resolves, read by `get(key)`, not listed — for `publish` to move into place
   * once a record holds the key. A staged blob is its own journal entry: `staged()` finds those a
   * crash or a failure left, and `delete` removes staged blobs too. On a rejection nothing of
   * this write is left, as with `put`.
   */
  stage?(key: string, body: Readable, options: { contentType: string; size?: number }): Promise<PutResult>;
  /** Moves a staged blob into place (idempotent: done already, or the key removed, is fine). */
  publish?(key: string): Promise<void>;
  /** The keys staged and not published, with how long ago each was last written. */
  staged?(): AsyncIterable<{ key: string; ageMs: number }>;
  /**
   * Writes many small blobs held in memory (a frontend worker's build files), each durable when
   * this resolves; cheaper than a put each (the filesystem makes each directory durable once).
   * On a rejection, any of them may or may not have been written, whole (never a part of one).
   */
  putMany(items: { key: string; data: Buffer; contentType: string }[]): Promise<void>;
  /**
   * The bytes under `key` (or a range of them); rejects with BlobNotFound when absent. A range's
   * end past the last byte is clamped to it (as HTTP does); a start past it rejects with
   * InvalidRange (the route answers 416 from the object's size before it gets here). `size`: the
   * blob's size as its record gives it, when known (the filesystem then reads a small blob without
   * asking for the file's; a file of another size is read as it is).
   */
  get(key: string, range?: ByteRange, size?: number): Promise<Readable>;
  stat(key: string): Promise<BlobStat | null>;
  /** A server-side copy (no bytes through this process where the store can avoid it). */
  copy(from: string, to: string): Promise<void>;
  /** Removes these keys (staged or in place), durably when this resolves; absent ones are fine. */
  delete(keys: string[]): Promise<void>;
  /** Removes every key under `prefix` (a bucket's blobs: `{bucket_uuid}/`). */
  deletePrefix(prefix: string): Promise<void>;
  /** Every key under `prefix`, for sweeps. */
  list(prefix: string): AsyncIterable<string>;
}

export interface ObjectStore {
  readonly kind: 'filesystem' | 's3';
  /** The store of one site (`schema`: a validated site schema name). */
  site(schema: string): SiteStore;
  /** Releases what the store holds (nothing for the filesystem). */
  close(): Promise<void>;
}

export class BlobNotFound extends Error {
  constructor(key: string) {
    super(`No stored bytes under "${key}".`);
    this.name = 'BlobNotFound';
  }
}

export class InvalidRange extends Error {
  constructor(key: string, range: ByteRange) {
    super(`Range ${range.start}-${range.end} is not satisfiable for "${key}".`);
    this.name = 'InvalidRange';
  }
}
