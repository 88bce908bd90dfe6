// The filesystem store: a directory per site, `{root}/{schema}/{key}`. Writes go to a temporary
// file in `{root}/.tmp/` (the same filesystem, so the final rename is atomic), are flushed to
// disk, and are renamed into place only when the whole body arrived: a reader sees the old bytes
// or the new ones, and a failed upload leaves nothing but a temp file that is removed at once
// (or by sweepTemp after a crash). A blob may also be staged (`stage`): written and made durable
// under `{root}/.staged/{schema}/{key}`, where `get` finds it too, and moved into place by
// `publish` once a record holds it — the staged file is then its own journal entry (a crash
// leaves it where the sweep looks: blobs.ts sweepBlobs). docs/storage.md "Providers".
import { constants, createReadStream, createWriteStream } from 'node:fs';
import { copyFile, mkdir, open, readdir, rename, rm, stat, unlink, writeFile, type FileHandle } from 'node:fs/promises';
import { createHash, randomUUID, type Hash } from 'node:crypto';
import path from 'node:path';
import { Readable, Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { isValidSchemaName } from '../../tenancy/schema.ts';
import { assertKey, assertPrefix } from './keys.ts';
import { BlobNotFound, InvalidRange, wholeStream, type BlobStat, type ByteRange, type ObjectStore, type PutResult, type SiteStore } from './types.ts';

/** The directory of in-flight writes under the root (never a site: schema names have no dot). */
export const TEMP_DIR = '.tmp';
/** The directory of staged blobs under the root, by site: `{root}/.staged/{schema}/{key}`. */
export const STAGED_DIR = '.staged';

export function filesystemStore(root: string): ObjectStore {
  const base = path.resolve(root);
  return {
    kind: 'filesystem',
    site(schema: string): SiteStore {
      if (!isValidSchemaName(schema)) throw new Error(`Invalid site schema name ${JSON.stringify(schema)}.`);
      return new FilesystemSiteStore(base, schema);
    },
    async close() {},
  };
}

/** Removes temp files older than `olderThanMs` (leftovers of a crash mid-write); returns how many. */
export async function sweepTemp(root: string, olderThanMs: number): Promise<number> {
  const dir = path.join(path.resolve(root), TEMP_DIR);
  let names: string[];
  try {
    names = await readdir(dir);
  } catch (e) {
    if (code(e) === 'ENOENT') return 0;
    throw e;
  }
  const cutoff = Date.now() - olderThanMs;
  let removed = 0;
  for (const name of names) {
    const file = path.join(dir, name);
    try {
      if ((await stat(file)).mtimeMs < cutoff) {
        await rm(file, { force: true, recursive: true });
        removed++;
      }
    } catch (e) {
      if (code(e) !== 'ENOENT') throw e;
    }
  }
  return removed;
}

/**
 * The ETag of a blob here: the first 128 bits of the SHA-256 of its bytes, hex, quoted — a
 * content hash (equal bytes, equal tag) but not MD5: SHA-256 runs on the CPU's SHA extensions at
 * twice MD5's speed, and the hash is the one per-byte cost an upload pays on the event loop
 * (docs/storage.md "ETags").
 */
export const contentHash = (): Hash => createHash('sha256');
export const etagOf = (hash: Hash): string => `"${hash.digest('hex').slice(0, 32)}"`;

const code = (e: unknown): string | undefined => (e as NodeJS.ErrnoException | null)?.code;
const MISSING = new Set(['ENOENT', 'ENOTDIR', 'EISDIR']);

class FilesystemSiteStore implements SiteStore {
  readonly #root: string;
  readonly #dir: string;
  readonly #staged: string;

  constructor(root: string, schema: string) {
    this.#root = root;
    this.#dir = path.join(root, schema);
    this.#staged = path.join(root, STAGED_DIR, schema);
  }

  #path(key: string): string {
    return path.join(this.#dir, ...assertKey(key).split('/'));
  }

  #stagedPath(key: string): string {
    return path.join(this.#staged, ...assertKey(key).split('/'));
  }

  async #tempFile(): Promise<string> {
    const dir = path.join(this.#root, TEMP_DIR);
    await mkdir(dir, { recursive: true });
    return path.join(dir, `${randomUUID()}.part`);
  }

  /** Renames a complete temp file into place and makes the rename durable. */
  async #commit(temp: string, target: string): Promise<void> {
    await makeDirectory(path.dirname(target));
    await rename(temp, target);
    await fsyncDirectory(path.dirname(target));
  }

  async put(key: string, body: Readable, options: { contentType: string; size?: number }): Promise<PutResult> {
    const target = this.#path(key);
    const temp = await this.#tempFile();
    const written = await writeDurably(temp, body, options.size);
    try {
      await this.#commit(temp, target);
    } catch (e) {
      await rm(temp, { force: true });
      throw e;
    }
    return written;
  }

  /**
   * The bytes durable at the key's staged path (the file and its directory entry fsynced), where
   * `get` finds them; no rename, no other fsync. A key's staged file is made once (`wx`).
   */
  async stage(key: string, body: Readable, options: { contentType: string; size?: number }): Promise<PutResult> {
    const file = this.#stagedPath(key);
    // Its directory entry is made durable while the bytes stream: both are, before this resolves.
    return writeDurably(file, body, options.size, () => fsyncDirectory(path.dirname(file)));
  }

  /**
   * Moves a staged blob into place (idempotent: already moved, or removed, is fine). Not made
   * durable: after a crash that loses the rename the blob is staged again, found there by `get`
   * and published again by the sweep.
   */
  async publish(key: string): Promise<void> {
    const [staged, target] = [this.#stagedPath(key), this.#path(key)];
    try {
      await rename(staged, target);
    } catch (e) {
      if (code(e) !== 'ENOENT') throw e;
      // The target's directory is missing (the bucket's first blob), or the blob has moved already.
      await makeDirectory(path.dirname(target));
      await rename(staged, target).catch((err: unknown) => {
        if (code(err) !== 'ENOENT') throw err;
      });
    }
  }

  async *staged(): AsyncIterable<{ key: string; ageMs: number }> {
    for await (const key of walk(this.#staged, '')) {
      const info = await stat(this.#stagedPath(key)).catch(() => null);
      if (info) yield { key, ageMs: Date.now() - info.mtimeMs };
    }
  }

  async putMany(items: { key: string; data: Buffer; contentType: string }[]): Promise<void> {
    if (!items.length) return;
    const temps = path.join(this.#root, TEMP_DIR);
    const targets = items.map((item) => this.#path(item.key));
    const dirs = new Set(targets.map((target) => path.dirname(target)));
    await Promise.all([temps, ...dirs].map((dir) => mkdir(dir, { recursive: true })));
    await Promise.all(
      items.map(async ({ data }, i) => {
        const temp = path.join(temps, `${randomUUID()}.part`);
        try {
          await writeFile(temp, data, { flag: 'wx', flush: true }); // the bytes durable before the rename publishes them
          await rename(temp, targets[i]!);
        } catch (e) {
          await rm(temp, { force: true });
          throw e;
        }
      }),
    );
    for (const dir of dirs) await fsyncDirectory(dir); // the renames durable: one fsync per directory, not per file
  }

  async get(key: string, range?: ByteRange, size?: number): Promise<Readable> {
    // In place, else staged; a publish between the two opens moved it into place (rename is atomic).
    const handle = (await openFile(this.#path(key))) ?? (await openFile(this.#stagedPath(key))) ?? (await openFile(this.#path(key)));
    if (!handle) throw new BlobNotFound(key);
    try {
      if (!range && size !== undefined && size <= WHOLE_READ_BYTES) {
        // The size the record gives: after the open one trip to the thread pool, not three (no fstat; the close not waited for).
        const bytes = await readExactly(handle, size);
        if (bytes) {
          handle.close().catch(() => undefined);
          return wholeStream(bytes);
        }
      }
      const info = await handle.stat();
      if (!info.isFile()) throw new BlobNotFound(key);
      if (!range && info.size <= WHOLE_READ_BYTES) {
        const bytes = await readWhole(handle, info.size);
        await handle.close();
        return wholeStream(bytes);
      }
      if (!range) return handle.createReadStream();
      if (!validRange(range) || range.start >= info.size) throw new InvalidRange(key, range);
      return handle.createReadStream({ start: range.start, end: Math.min(range.end, info.size - 1) });
    } catch (e) {
      await handle.close();
      throw e;
    }
  }

  /** The etag is the hash of the bytes, read again here (O(size)): keep put's etag where it is needed often. */
  async stat(key: string): Promise<BlobStat | null> {
    const file = this.#path(key);
    try {
      const info = await stat(file);
      if (!info.isFile()) return null;
      const hash = contentHash();
      await pipeline(createReadStream(file), hash);
      return { size: info.size, etag: etagOf(hash) };
    } catch (e) {
      if (MISSING.has(code(e) ?? '')) return null;
      throw e;
    }
  }

  async copy(from: string, to: string): Promise<void> {
    const source = this.#path(from);
    const target = this.#path(to);
    const temp = await this.#tempFile();
    try {
      // A reflink where the filesystem has them (btrfs, XFS), a plain copy elsewhere.
      await copyFile(source, temp, constants.COPYFILE_FICLONE | constants.COPYFILE_EXCL);
      const handle = await open(temp, 'r+');
      try {
        await handle.sync();
      } finally {
        await handle.close();
      }
      await this.#commit(temp, target);
    } catch (e) {
      await rm(temp, { force: true });
      if (MISSING.has(code(e) ?? '')) throw new BlobNotFound(from);
      throw e;
    }
  }

  /**
   * Each key's staged file, then the one in place (a publish racing this one finds nothing to
   * move, or moves it before it is removed); the removals made durable (each directory fsynced
   * once) before this resolves, so that a journal entry dropped after it never outlives them.
   */
  async delete(keys: string[]): Promise<void> {
    const dirs = new Set<string>();
    for (const file of keys.flatMap((k) => [this.#stagedPath(k), this.#path(k)])) {
      try {
        await unlink(file);
        dirs.add(path.dirname(file));
      } catch (e) {
        if (!MISSING.has(code(e) ?? '') && code(e) !== 'EPERM') throw e;
      }
    }
    for (const dir of dirs) await fsyncDirectory(dir);
  }

  async deletePrefix(prefix: string): Promise<void> {
    assertPrefix(prefix);
    if (prefix === '' || prefix.endsWith('/')) {
      for (const dir of [this.#dir, this.#staged]) await rm(path.join(dir, ...prefix.split('/').filter(Boolean)), { recursive: true, force: true });
      return;
    }
    const keys: string[] = [];
    for await (const key of this.list(prefix)) keys.push(key);
    await this.delete(keys);
    // A directory named exactly like the prefix (`{bucket_uuid}` without its slash) goes too.
    const dir = path.join(this.#dir, ...prefix.split('/'));
    if ((await stat(dir).catch(() => null))?.isDirectory()) await rm(dir, { recursive: true, force: true });
  }

  async *list(prefix: string): AsyncIterable<string> {
    assertPrefix(prefix);
    const slash = prefix.lastIndexOf('/');
    const base = slash < 0 ? '' : prefix.slice(0, slash + 1);
    // Below the prefix's last slash only the entries starting with the rest can match.
    yield* walk(path.join(this.#dir, ...base.split('/').filter(Boolean)), base, prefix.slice(base.length));
  }
}

function validRange(r: ByteRange): boolean {
  return Number.isSafeInteger(r.start) && Number.isSafeInteger(r.end) && r.start >= 0 && r.end >= r.start;
}

/**
 * Regular files under `dir` as keys (`base` + relative path), sorted per directory; links are
 * not followed. At the top level only entries whose name starts with `first` (no slash in it).
 */
async function* walk(dir: string, base: string, first = ''): AsyncGenerator<string> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (e) {
    if (MISSING.has(code(e) ?? '')) return;
    throw e;
  }
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (!entry.name.startsWith(first)) continue;
    if (entry.isDirectory()) yield* walk(path.join(dir, entry.name), `${base}${entry.name}/`);
    else if (entry.isFile()) yield `${base}${entry.name}`;
  }
}

/**
 * Streams `body` into a new file (`wx`), hashing and counting on the way, fsynced before it
 * closes (`flush`); with `expected`, a body of another length is refused. `alongside` runs while
 * the bytes stream (once the file exists) and must succeed too. On failure the file is removed
 * and the body destroyed.
 */
async function writeDurably(file: string, body: Readable, expected?: number, alongside?: () => Promise<void>): Promise<PutResult> {
  const hash = contentHash();
  let size = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _encoding, callback) {
      hash.update(chunk);
      size += chunk.length;
      callback(null, chunk);
    },
  });
  /** `alongside`'s failure, if any (never a rejection left unhandled while the bytes stream). */
  let besides: Promise<unknown> | undefined;
  try {
    const handle = await createFile(file);
    besides = alongside?.().then(() => undefined, (err: unknown) => err);
    // `flush`: the file is fsynced before it closes.
    await pipeline(body, meter, createWriteStream('', { fd: handle, flush: true }));
    if (expected !== undefined && expected !== size) throw new Error(`Expected ${expected} bytes, received ${size}.`);
    const failed = await besides;
    if (failed) throw failed;
  } catch (e) {
    await besides;
    await rm(file, { force: true });
    if (!body.destroyed) body.destroy();
    throw e;
  }
  return { size, etag: etagOf(hash) };
}

/** A new file (`wx`); its directory made when missing (the first file of a bucket). */
async function createFile(file: string): Promise<FileHandle> {
  try {
    return await open(file, 'wx');
  } catch (e) {
    if (code(e) !== 'ENOENT') throw e;
  }
  await makeDirectory(path.dirname(file));
  return open(file, 'wx');
}

/**
 * A blob up to this size is read whole, in one read, and its handle closed before it is sent:
 * one trip to the thread pool instead of a stream's three (a small object's download is mostly
 * such trips). Larger ones stream.
 */
const WHOLE_READ_BYTES = 256 * 1024;

/** The `size` bytes of an open file (fewer if it is shorter). */
async function readWhole(handle: FileHandle, size: number): Promise<Buffer> {
  const buffer = Buffer.allocUnsafe(size);
  let filled = 0;
  while (filled < size) {
    const { bytesRead } = await handle.read(buffer, filled, size - filled, filled);
    if (bytesRead === 0) break;
    filled += bytesRead;
  }
  return buffer.subarray(0, filled);
}

/**
 * The file's bytes if it has exactly `size` of them (one read of `size` + 1: a regular file reads
 * short only at its end), else undefined (a directory too: `get` then finds it is no file).
 */
async function readExactly(handle: FileHandle, size: number): Promise<Buffer | undefined> {
  const buffer = Buffer.allocUnsafe(size + 1);
  try {
    const { bytesRead } = await handle.read(buffer, 0, size + 1, 0);
    return bytesRead === size ? buffer.subarray(0, size) : undefined;
  } catch (e) {
    if (code(e) === 'EISDIR') return undefined;
    throw e;
  }
}

/** A file opened for reading, or undefined when there is none. */
async function openFile(file: string): Promise<FileHandle | undefined> {
  try {
    return await open(file, 'r');
  } catch (e) {
    if (MISSING.has(code(e) ?? '')) return undefined;
    throw e;
  }
}

/** mkdir -p; a directory it made is made durable in its parent (the first one made: its own new subdirectories are in it). */
async function makeDirectory(dir: string): Promise<void> {
  const made = await mkdir(dir, { recursive: true });
  if (made) await fsyncDirectory(path.dirname(made));
}

/** Makes a rename in `dir` durable (a no-op where directories cannot be fsynced). */
async function fsyncDirectory(dir: string): Promise<void> {
  let handle;
  try {
    handle = await open(dir, 'r');
    await handle.sync();
  } catch (e) {
    if (!['EISDIR', 'EINVAL', 'EPERM', 'EBADF'].includes(code(e) ?? '')) throw e;
  } finally {
    await handle?.close();
  }
}
