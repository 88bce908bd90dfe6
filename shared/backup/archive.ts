// The site backup archive (docs/backup.md): a plain tar whose entries are written here one after
// another, each streamed (1 GB of objects never sits in memory), and whose last entry is
// manifest.json naming every other entry with its size and SHA-256. Reading refuses anything
// else: an entry that is not a regular file, an entry the manifest does not name or names twice,
// a size or a checksum that differs, a manifest that is not the last entry.
import { createHash } from 'node:crypto';
import { createReadStream, type WriteStream } from 'node:fs';
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import type { ReadEntry } from 'tar';
import { DomainError } from '../errors.ts';

export const ARCHIVE_FORMAT = 'platform-site-backup';
export const ARCHIVE_FORMAT_VERSION = 1;
export const MANIFEST = 'manifest.json';
export const DUMP_ENTRY = 'schema.dump';
export const PLATFORM_ENTRY = 'platform.json';

export interface ManifestEntry {
  name: string;
  size: number;
  sha256: string;
  /** A blob's key in the site's object store (entries under `blobs/`). */
  key?: string;
  content_type?: string;
}

export interface Manifest {
  format: typeof ARCHIVE_FORMAT;
  format_version: number;
  /** The last platform migration the source had applied (shared/db/migrations/platform.ts). */
  platform_schema_version: string;
  site: { uuid: string; name: string; slug: string; schema_name: string };
  /** The site schema's tenant migration version (shared/tenancy/migrations.ts). */
  schema_version: number;
  /** The major version of the PostgreSQL that made the dump (its pg_restore must be at least that). */
  postgres_major: number;
  created_at: string;
  entries: ManifestEntry[];
}

/** A refused archive: nothing was changed. */
export const badArchive = (why: string): DomainError => new DomainError('VALIDATION_ERROR', `The archive is refused, nothing was changed: ${why}`);

/** Writes a tar archive entry by entry (ustar headers by node-tar's Header); each entry's SHA-256 is computed on the way. */
export class ArchiveWriter {
  readonly entries: ManifestEntry[] = [];
  #out: WriteStream;
  #Header: typeof import('tar').Header;

  private constructor(out: WriteStream, header: typeof import('tar').Header) {
    this.#out = out;
    this.#Header = header;
  }

  static async open(out: WriteStream): Promise<ArchiveWriter> {
    const { Header } = await import('tar');
    return new ArchiveWriter(out, Header);
  }

  async #write(chunk: Buffer): Promise<void> {
    if (!this.#out.write(chunk)) await once(this.#out, 'drain');
  }

  /** One entry of exactly `size` bytes from `body` (another length fails the backup); `onBytes` hears each chunk's length. */
  async add(name: string, size: number, body: Readable | Buffer, extra: Omit<ManifestEntry, 'name' | 'size' | 'sha256'> = {}, onBytes?: (n: number) => void): Promise<ManifestEntry> {
    const header = new this.#Header({ path: name, mode: 0o644, size, mtime: new Date(), type: 'File', uid: 0, gid: 0 });
    const block = Buffer.alloc(512);
    header.encode(block, 0);
    await this.#write(block);
    const hash = createHash('sha256');
    let written = 0;
    for await (const chunk of Buffer.isBuffer(body) ? [body] : (body as AsyncIterable<Buffer>)) {
      written += chunk.length;
      if (written > size) break;
      hash.update(chunk);
      await this.#write(chunk);
      onBytes?.(chunk.length);
    }
    if (written !== size) throw new Error(`${name}: ${written > size ? 'more' : 'fewer'} bytes than the ${size} expected (it changed while it was read).`);
    const pad = (512 - (size % 512)) % 512;
    if (pad) await this.#write(Buffer.alloc(pad));
    const entry = { name, size, sha256: hash.digest('hex'), ...extra };
    this.entries.push(entry);
    return entry;
  }

  /** The manifest as the last entry, then the end-of-archive blocks; resolves once the file is flushed. */
  async finish(manifest: Omit<Manifest, 'entries'>): Promise<Manifest> {
    const full: Manifest = { ...manifest, entries: this.entries };
    const json = Buffer.from(`${JSON.stringify(full, null, 2)}\n`);
    await this.add(MANIFEST, json.length, json);
    await this.#write(Buffer.alloc(1024));
    this.#out.end();
    await once(this.#out, 'finish');
    return full;
  }
}

/**
 * Reads the archive at `file` entry by entry: `onEntry` gets each regular file's name, size and
 * body (it must consume the body, or resume it), in order. Whatever `onEntry` throws ends the
 * reading and is thrown; so is a malformed tar.
 */
export async function readArchive(file: string, onEntry: (name: string, size: number, body: Readable) => Promise<void>): Promise<void> {
  const { Parser } = await import('tar');
  const parser = new Parser({ strict: true, zstd: false, brotli: false });
  let failure: unknown;
  let chain = Promise.resolve();
  parser.on('entry', (entry: ReadEntry) => {
    if (failure !== undefined) return void entry.resume();
    if (entry.type !== 'File') {
      failure = badArchive(`its entry ${JSON.stringify(entry.path)} is not a regular file.`);
      return void entry.resume();
    }
    // Entries come in order; each handler runs once the previous one has finished.
    const handle = async () => {
      if (failure === undefined) await onEntry(entry.path, entry.size ?? 0, entry as unknown as Readable);
      else entry.resume();
    };
    chain = chain.then(handle).catch((err: unknown) => {
      failure ??= err;
      entry.resume();
    });
  });
  parser.on('ignoredEntry', (entry: ReadEntry) => (failure ??= badArchive(`its entry ${JSON.stringify(entry.path)} is of an unexpected type.`)));
  parser.on('error', (err: Error) => (failure ??= badArchive(`it is not a readable tar archive (${err.message}).`)));
  const source = createReadStream(file, { highWaterMark: 1 << 20 });
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      if (!parser.write(chunk)) await once(parser, 'drain');
      if (failure !== undefined) break;
    }
    parser.end(); // also after a failure: it ends an entry a handler is still reading (truncated), so no handler waits for bytes that will not come
    await chain;
  } finally {
    source.destroy();
  }
  if (failure !== undefined) throw failure;
}

/** Hashes a body as it passes (the bytes are handed on unchanged). */
export async function* hashed(body: Readable, hash: ReturnType<typeof createHash>, count: { bytes: number }, onBytes?: (n: number) => void): AsyncGenerator<Buffer> {
  for await (const chunk of body as AsyncIterable<Buffer>) {
    hash.update(chunk);
    count.bytes += chunk.length;
    onBytes?.(chunk.length);
    yield chunk;
  }
}

/** Checks an entry against the manifest's record of it. */
export function checkEntry(expected: ManifestEntry | undefined, name: string, size: number, sha256: string): void {
  if (!expected) throw badArchive(`its entry ${JSON.stringify(name)} is not in the manifest.`);
  if (expected.size !== size || expected.sha256 !== sha256) throw badArchive(`the checksum of ${JSON.stringify(name)} does not match the manifest (the archive is damaged or was altered).`);
}

/** Parses and checks the manifest's own fields (not the entries' bytes). */
export function parseManifest(bytes: Buffer): Manifest {
  let m: Manifest;
  try {
    m = JSON.parse(bytes.toString('utf8')) as Manifest;
  } catch {
    throw badArchive('its manifest is not JSON.');
  }
  if (m?.format !== ARCHIVE_FORMAT) throw badArchive('it is not a site backup (no platform-site-backup manifest).');
  if (m.format_version !== ARCHIVE_FORMAT_VERSION) throw badArchive(`its format version ${m.format_version} is not the one this platform reads (${ARCHIVE_FORMAT_VERSION}).`);
  const ok =
    Array.isArray(m.entries) &&
    m.entries.every((e) => typeof e?.name === 'string' && Number.isSafeInteger(e.size) && e.size >= 0 && /^[0-9a-f]{64}$/.test(e.sha256) && (e.key === undefined || typeof e.key === 'string')) &&
    typeof m.site?.schema_name === 'string' && typeof m.site.slug === 'string' && typeof m.site.name === 'string' && typeof m.site.uuid === 'string' &&
    Number.isSafeInteger(m.schema_version) && typeof m.platform_schema_version === 'string';
  if (!ok) throw badArchive('its manifest is malformed.');
  const names = new Set(m.entries.map((e) => e.name));
  if (names.size !== m.entries.length) throw badArchive('its manifest names an entry twice.');
  if (!names.has(DUMP_ENTRY) || !names.has(PLATFORM_ENTRY)) throw badArchive('it lacks the schema dump or the platform rows.');
  if (m.entries.find((e) => e.name === PLATFORM_ENTRY)!.size > 64 << 20) throw badArchive('its platform rows are over 64 MiB.'); // read into memory
  return m;
}

/**
 * Pass one of a restore: every entry read and hashed, the manifest (last) parsed, every entry it
 * names present with its size and checksum, and none other. Nothing is written anywhere.
 */
export async function verifyArchive(file: string, onBytes?: (n: number) => void): Promise<Manifest> {
  const seen = new Map<string, { size: number; sha256: string }>();
  let manifest: Buffer | undefined;
  await readArchive(file, async (name, size, body) => {
    if (manifest) throw badArchive(`the manifest is not its last entry.`);
    if (seen.has(name)) throw badArchive(`its entry ${JSON.stringify(name)} appears twice.`);
    if (name === MANIFEST) {
      if (size > 64 << 20) throw badArchive('its manifest is over 64 MiB.');
      const chunks: Buffer[] = [];
      for await (const chunk of body as AsyncIterable<Buffer>) chunks.push(chunk);
      manifest = Buffer.concat(chunks);
      return;
    }
    const hash = createHash('sha256');
    const count = { bytes: 0 };
    for await (const _ of hashed(body, hash, count, onBytes));
    seen.set(name, { size: count.bytes, sha256: hash.digest('hex') });
  });
  if (!manifest) throw badArchive('it has no manifest.json (an incomplete or foreign archive).');
  const m = parseManifest(manifest);
  const expected = new Map(m.entries.map((e) => [e.name, e]));
  for (const [name, got] of seen) checkEntry(expected.get(name), name, got.size, got.sha256);
  for (const e of m.entries) if (!seen.has(e.name)) throw badArchive(`its entry ${JSON.stringify(e.name)} is missing.`);
  return m;
}
