// Safe reading of a frontend worker's uploaded archive (.zip, .tar, .tar.gz/.tgz): nothing is ever
// written to disk here; each regular file is handed to the caller with its normalized path.
//
// Decisions:
// - Two passes. The first reads only headers (zip: adm-zip's central directory, nothing inflated;
//   tar: node-tar's Parser, bodies skipped) and refuses the whole archive before `onFile` is called
//   once: unsafe names, links and other non-file entries, encryption, duplicates, a file that is
//   also a folder, counts, sizes and the expansion ratio. The second pass hands out the files;
//   a tar whose files hold at most 64 MiB is kept in memory by the first pass instead (one
//   gunzip, not two), and handed out once every entry has passed.
// - Zip data is inflated here, not by `getData()`: adm-zip 0.6.1 does cap its inflation at the
//   declared size, but we want our own bound (`maxOutputLength` = the declared size) whatever the
//   library version, and a message that says the header lied. zlib's crc32 checks the result.
// - Tar: our own gunzip (so the decompressed stream is counted and bounded: a gzip bomb of padding
//   or metadata declares no file bytes) feeding node-tar's Parser in strict mode; its warnings are
//   errors. The stream must start with a ustar header (so the parser never unpacks a second
//   compression layer), reading stops at the end-of-archive blocks, and the next chunk is read only
//   once the caller has taken the files completed so far (memory: one file and one chunk).
// - Paths: a leading `./` is stripped and nothing else is collapsed (`a//b`, `a/./b` refused);
//   lengths are counted in UTF-8 bytes; a root entry `./` (from `tar -C dist .`) is skipped.
// - A single top-level folder holding every file (`zip -r dist.zip dist`) is stripped from the
//   paths given to `onFile` — when every file is under it there is no `index.html` at the root.
// - An archive without files is refused; folders are limited in number like files (maxFiles).
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { pipeline } from 'node:stream';
import { createGunzip, crc32, inflateRawSync } from 'node:zlib';
import type AdmZip from 'adm-zip';
import type { ReadEntry } from 'tar';
import { DomainError, fieldError } from '../errors.ts';

export type ArchiveFormat = 'zip' | 'tar' | 'tar.gz';

export interface ArchiveLimits {
  /** Regular files (and, separately, folder entries) at most. */
  maxFiles: number;
  maxFileBytes: number;
  /** The files' bytes together. */
  maxTotalBytes: number;
  /** The files' declared bytes together over the archive's size (a compression bomb's tell). */
  maxRatio: number;
  /** A normalized path's length in UTF-8 bytes. */
  maxPathLength: number;
}

export const DEFAULT_ARCHIVE_LIMITS: ArchiveLimits = Object.freeze({
  maxFiles: 100_000,
  maxFileBytes: 100 * 1024 * 1024,
  maxTotalBytes: 1024 * 1024 * 1024,
  maxRatio: 200,
  maxPathLength: 1024,
});

/** The decompressed tar stream may exceed maxRatio × the archive by this much (headers and padding of tiny archives). */
const TAR_STREAM_SLACK = 1024 * 1024;

const FORMATS: [suffix: string, format: ArchiveFormat][] = [['.tar.gz', 'tar.gz'], ['.tgz', 'tar.gz'], ['.tar', 'tar'], ['.zip', 'zip']];

const isZip = (head: Buffer) => head.length >= 4 && head[0] === 0x50 && head[1] === 0x4b && ((head[2] === 3 && head[3] === 4) || (head[2] === 5 && head[3] === 6));
const isGzip = (head: Buffer) => head.length >= 2 && head[0] === 0x1f && head[1] === 0x8b;
const isTar = (head: Buffer) => head.length >= 262 && head.toString('latin1', 257, 262) === 'ustar';
const MAGIC: Record<ArchiveFormat, (head: Buffer) => boolean> = { zip: isZip, tar: isTar, 'tar.gz': isGzip };

/** From the file name (.zip, .tar, .tar.gz, .tgz; any case), confirmed by the first bytes (pass at least 262). */
export function archiveFormat(filename: string, head: Buffer): ArchiveFormat {
  const lower = filename.toLowerCase();
  const format = FORMATS.find(([suffix]) => lower.endsWith(suffix))?.[1];
  if (!format) throw fieldError('file', `${quote(filename)} is not a supported archive: upload a .zip, .tar, .tar.gz or .tgz file.`);
  if (!MAGIC[format](head)) throw fieldError('file', `${quote(filename)} is not a ${format} archive (its first bytes do not match): upload the archive itself, named for its format.`);
  return format;
}

export interface ArchiveFile {
  path: string;
  data: Buffer;
}

/**
 * Reads the archive at `path` in two passes. The first validates every entry and throws (a 400 on
 * `file`) before `onFile` is ever called when anything is wrong. The second calls `onFile` for each
 * regular file, in archive order, one at a time, with its normalized path — without the single
 * top-level folder that holds every file, if there is one — and its bytes; folders are skipped.
 *
 * The second pass can still throw, only when an entry's data contradicts its header (a zip entry
 * inflating to more, or other, than it declared; a bad checksum): the caller must then delete
 * whatever it stored from the files already given. Errors of `onFile` itself propagate unchanged.
 */
export async function readArchive(
  path: string,
  format: ArchiveFormat,
  onFile: (file: ArchiveFile) => Promise<void>,
  limits: Partial<ArchiveLimits> = {},
): Promise<{ files: number; bytes: number }> {
  const check = new Checker({ ...DEFAULT_ARCHIVE_LIMITS, ...limits }, (await stat(path)).size);
  if (format === 'zip') return readZip(path, check, onFile);
  return readTar(path, format === 'tar.gz', check, onFile);
}

// ---- Validation common to both formats ----

const quote = (name: string) => JSON.stringify(name.length > 200 ? `${name.slice(0, 200)}…` : name);
const entryError = (name: string, text: string) => fieldError('file', `Archive entry ${quote(name)} ${text}`);
const unreadable = (error: unknown, format: string) =>
  error instanceof DomainError ? error : fieldError('file', `The archive could not be read: ${error instanceof Error ? error.message : String(error)}. Upload a complete, valid ${format} file.`);

const hasControlCharacter = (name: string) => {
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    if (c < 0x20 || c === 0x7f) return true;
  }
  return false;
};

/**
 * The entry's path without a leading `./` (and a folder's trailing `/`), or null for the root folder
 * itself (`./`); throws for any name that could leave the archive or is not plainly a relative path.
 */
export function normalizeEntryPath(name: string, folder: boolean, maxPathLength: number): string | null {
  if (hasControlCharacter(name)) throw entryError(name, 'has control characters in its name: names may hold printable characters only.');
  if (name.startsWith('/') || name.startsWith('\\') || /^[A-Za-z]:/.test(name)) throw entryError(name, 'is an absolute path: paths must be relative to the archive\'s root.');
  if (name.includes('\\')) throw entryError(name, 'contains a backslash: folders must be separated with "/".');
  let path = folder && name.endsWith('/') ? name.slice(0, -1) : name;
  while (path.startsWith('./')) path = path.slice(2);
  if (folder && (path === '.' || path === '')) return null;
  const segments = path.split('/');
  if (segments.includes('..')) throw entryError(name, 'leaves the archive: paths may not contain "..".');
  if (path === '' || path === '.') throw entryError(name, 'has an empty name: every file needs a name.');
  if (segments.includes('')) throw entryError(name, 'has an empty folder name ("//" or a trailing "/"): remove the extra "/".');
  if (segments.includes('.')) throw entryError(name, 'has a "." folder inside its path: only a leading "./" is allowed.');
  if (Buffer.byteLength(path) > maxPathLength) throw entryError(name, `has a path longer than ${maxPathLength} bytes: shorten it.`);
  return path;
}

interface PlannedFile {
  path: string;
  size: number;
}

/** The first pass's bookkeeping: every entry goes through `file` or `folder`, then `finish` gives the files to hand out. */
class Checker {
  readonly files: PlannedFile[] = [];
  private readonly paths = new Set<string>();
  private readonly folders = new Set<string>();
  private folderEntries = 0;
  private total = 0;
  readonly limits: ArchiveLimits;
  readonly archiveBytes: number;

  constructor(limits: ArchiveLimits, archiveBytes: number) {
    this.limits = limits;
    this.archiveBytes = archiveBytes;
  }

  file(name: string, size: number): void {
    const { maxFiles, maxFileBytes, maxTotalBytes, maxRatio, maxPathLength } = this.limits;
    const path = normalizeEntryPath(name, false, maxPathLength);
    if (path === null) throw entryError(name, 'has an empty name: every file needs a name.');
    if (this.paths.has(path)) throw entryError(name, `is in the archive twice (as ${quote(path)}): keep one copy.`);
    if (this.files.length >= maxFiles) throw entryError(name, `is one file too many: archives may hold at most ${maxFiles} files.`);
    if (size > maxFileBytes) throw entryError(name, `is ${size} bytes: a file may have at most ${maxFileBytes} bytes.`);
    this.total += size;
    if (this.total > maxTotalBytes) throw entryError(name, `takes the archive's files past ${maxTotalBytes} bytes together: make the site smaller.`);
    if (this.total > maxRatio * this.archiveBytes) {
      throw entryError(name, `takes the archive past ${maxRatio} times its size (${this.total} bytes from a ${this.archiveBytes}-byte archive): it looks like a compression bomb and is refused.`);
    }
    this.paths.add(path);
    this.files.push({ path, size });
  }

  folder(name: string, size: number): void {
    const path = normalizeEntryPath(name, true, this.limits.maxPathLength);
    if (size > 0) throw entryError(name, 'is a folder with content: re-create the archive with a standard tool.');
    if (path === null) return;
    if (++this.folderEntries > this.limits.maxFiles) throw entryError(name, `is one folder too many: archives may hold at most ${this.limits.maxFiles} folders.`);
    this.folders.add(path);
  }

  /** Whole-archive rules; the prefix to strip from every path ('' for none). */
  finish(): string {
    if (!this.files.length) throw fieldError('file', 'The archive contains no files: upload an archive of the built site.');
    for (const { path } of this.files) {
      for (let i = path.indexOf('/'); i !== -1; i = path.indexOf('/', i + 1)) this.folders.add(path.slice(0, i));
    }
    const clash = this.files.find(({ path }) => this.folders.has(path));
    if (clash) throw entryError(clash.path, 'is both a file and a folder: rename one of them.');
    // Every file under one folder: then no index.html (no file at all) is at the root.
    const prefix = `${this.files[0].path.split('/', 1)[0]}/`;
    return this.files.every(({ path }) => path.startsWith(prefix)) ? prefix : '';
  }
}

// ---- Zip ----

const ZIP_STORED = 0;
const ZIP_DEFLATED = 8;
const S_IFMT = 0o170000;
const S_IFREG = 0o100000;
const S_IFDIR = 0o040000;
const S_IFLNK = 0o120000;
const DOS_DIRECTORY = 0x10;

async function readZip(path: string, check: Checker, onFile: (file: ArchiveFile) => Promise<void>) {
  let entries: AdmZip.IZipEntry[];
  try {
    const { default: Zip } = await import('adm-zip'); // loaded by the first deploy, not with the app (CLI start-up)
    entries = new Zip(path, { readEntries: true }).getEntries();
  } catch (error) {
    throw unreadable(error, 'zip');
  }
  const files: AdmZip.IZipEntry[] = [];
  for (const entry of entries) {
    const name = entry.entryName;
    const { attr, encrypted, method, size } = entry.header;
    const type = (attr >>> 16) & S_IFMT;
    if (type === S_IFLNK) throw entryError(name, 'is a symbolic link: only files and folders are allowed.');
    if (type !== 0 && type !== S_IFREG && type !== S_IFDIR) throw entryError(name, 'is not a regular file or folder: only files and folders are allowed.');
    if (name.endsWith('/') || type === S_IFDIR || (attr & DOS_DIRECTORY) !== 0) {
      check.folder(name, size);
      continue;
    }
    if (encrypted) throw entryError(name, 'is encrypted: upload an archive made without a password.');
    if (method !== ZIP_STORED && method !== ZIP_DEFLATED) throw entryError(name, `uses compression method ${method}: re-create the archive with deflate (the usual zip compression).`);
    check.file(name, size);
    files.push(entry);
  }
  const prefix = check.finish();

  let bytes = 0;
  for (const [i, entry] of files.entries()) {
    const data = zipData(entry);
    bytes += data.length;
    await onFile({ path: check.files[i].path.slice(prefix.length), data });
  }
  return { files: files.length, bytes };
}

/** The entry's bytes, inflated to at most its declared size, and checked against that size and its CRC-32. */
function zipData(entry: AdmZip.IZipEntry): Buffer {
  const name = entry.entryName;
  const { method, size, crc } = entry.header;
  let data: Buffer;
  try {
    const raw = entry.getCompressedData();
    // zlib needs a cap of at least 1: an empty entry that inflates to 1 byte is caught below.
    data = method === ZIP_STORED ? raw : inflateRawSync(raw, { maxOutputLength: Math.max(size, 1) });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw lyingSize(name, size);
    throw unreadable(error, 'zip');
  }
  if (data.length > size) throw lyingSize(name, size);
  if (data.length < size) throw entryError(name, `has ${data.length} bytes where its header declares ${size}: the archive is damaged.`);
  if (crc32(data) !== crc) throw entryError(name, 'fails its CRC-32 check: the archive is damaged.');
  return data;
}

const lyingSize = (name: string, size: number) => entryError(name, `holds more data than the ${size} bytes its header declares: the archive is refused (the files already read must be discarded).`);

// ---- Tar ----

const TAR_FILES = new Set(['File', 'OldFile', 'ContiguousFile']);
const TAR_KINDS: Record<string, string> = {
  SymbolicLink: 'a symbolic link',
  Link: 'a hard link',
  CharacterDevice: 'a device',
  BlockDevice: 'a device',
  FIFO: 'a named pipe',
};
const tarKind = (type: string) => TAR_KINDS[type] ?? `an entry of type ${type}`;

const CHUNK = 1024 * 1024;

/** A tar whose files hold at most this much is kept in memory by the first pass: no second reading (and no second gunzip). */
const KEEP_BYTES = 64 * 1024 * 1024;

async function readTar(path: string, gzip: boolean, check: Checker, onFile: (file: ArchiveFile) => Promise<void>) {
  const format = gzip ? 'tar.gz' : 'tar';
  let kept: Buffer[][] | null = [];
  let keptBytes = 0;
  await walkTar(path, gzip, check, (entry) => {
    if (entry.type === 'Directory') check.folder(entry.path, entry.size);
    else if (TAR_FILES.has(entry.type)) {
      check.file(entry.path, entry.size);
      if (kept) {
        const chunks: Buffer[] = [];
        kept.push(chunks);
        entry.on('data', (chunk: Buffer) => {
          keptBytes += chunk.length;
          if (keptBytes > KEEP_BYTES) kept = null;
          else chunks.push(chunk);
        });
        return;
      }
    } else throw entryError(entry.path, `is ${tarKind(entry.type)}: only files and folders are allowed.`);
    entry.resume();
  });
  const prefix = check.finish();

  const changed = () => unreadable(new Error('it changed between its two readings'), format);
  if (kept) {
    // Every entry checked, every file's bytes at hand: handed out from memory.
    let bytes = 0;
    for (const [i, planned] of check.files.entries()) {
      const data = Buffer.concat(kept[i] ?? []);
      if (planned.size !== data.length) throw changed();
      kept[i] = [];
      bytes += data.length;
      await onFile({ path: planned.path.slice(prefix.length), data });
    }
    return { files: check.files.length, bytes };
  }

  const ready: ArchiveFile[] = [];
  let index = 0;
  let bytes = 0;
  await walkTar(path, gzip, check, (entry, fail) => {
    if (!TAR_FILES.has(entry.type)) return void entry.resume();
    const planned = check.files[index++];
    const chunks: Buffer[] = [];
    entry.on('data', (chunk: Buffer) => chunks.push(chunk));
    entry.on('end', () => {
      const data = Buffer.concat(chunks);
      if (planned?.size === data.length) ready.push({ path: planned.path.slice(prefix.length), data });
      else fail(changed());
    });
  }, async () => {
    for (let file = ready.shift(); file; file = ready.shift()) {
      bytes += file.data.length;
      await onFile(file);
    }
  });
  return { files: index, bytes };
}

/**
 * Streams the tar through node-tar's Parser, calling `onEntry` for each entry (it must consume or
 * resume it; it may throw, or report a later failure with `fail`), and `afterChunk` after each chunk
 * has been parsed, before the next is read (its errors, the caller's, propagate unchanged).
 */
async function walkTar(
  path: string,
  gzip: boolean,
  check: Checker,
  onEntry: (entry: ReadEntry, fail: (error: unknown) => void) => void,
  afterChunk: () => Promise<void> = async () => {},
): Promise<void> {
  const format = gzip ? 'tar.gz' : 'tar';
  let failure: unknown;
  let ended = false;
  const fail = (error: unknown) => {
    failure ??= error;
  };
  const { Parser } = await import('tar'); // loaded by the first deploy, not with the app (CLI start-up)
  const parser = new Parser({ strict: true, zstd: false, brotli: false });
  parser.on('entry', (entry: ReadEntry) => {
    if (failure) return void entry.resume();
    try {
      onEntry(entry, fail);
    } catch (error) {
      fail(error);
      entry.resume();
    }
  });
  // Entries of unknown types, and metadata over node-tar's 1 MiB cap, which it would skip.
  parser.on('ignoredEntry', (entry: ReadEntry) =>
    fail(entryError(entry.path, entry.meta ? `is ${tarKind(entry.type)} over 1 MiB: re-create the archive with a standard tool.` : `is ${tarKind(entry.type)}: only files and folders are allowed.`)),
  );
  parser.on('error', (error: unknown) => fail(unreadable(error, format)));
  parser.on('eof', () => (ended = true));

  // Large chunks: each one a trip to the thread pool's gunzip (16 KiB chunks made a 24 MB archive wait on hundreds).
  const file = createReadStream(path, { highWaterMark: CHUNK });
  const source = gzip ? pipeline(file, createGunzip({ chunkSize: CHUNK }), () => {}) : file;
  const maxStream = check.limits.maxRatio * check.archiveBytes + TAR_STREAM_SLACK;
  let head: Buffer | undefined = Buffer.alloc(0);
  let streamed = 0;
  let callerError: unknown;
  const handOut = async () => {
    try {
      await afterChunk();
    } catch (error) {
      callerError = error;
      throw error;
    }
  };
  try {
    for await (const chunk of source as AsyncIterable<Buffer>) {
      streamed += chunk.length;
      if (gzip && streamed > maxStream) {
        throw fieldError('file', `The archive expands to more than ${check.limits.maxRatio} times its size: it looks like a compression bomb and is refused.`);
      }
      if (head) {
        // The first block must be a ustar header, before the parser sees it.
        head = Buffer.concat([head, chunk]);
        if (head.length < 512) continue;
        if (!isTar(head)) throw unreadable(new Error('it does not start with a tar (ustar) header'), format);
        parser.write(head);
        head = undefined;
      } else {
        parser.write(chunk);
      }
      if (failure) throw failure;
      await handOut();
      if (ended) break;
    }
    if (head) throw unreadable(new Error('it is shorter than one tar block'), format);
  } catch (error) {
    throw error === callerError ? error : unreadable(error, format);
  } finally {
    source.destroy();
  }
  parser.end();
  if (failure) throw failure;
  await afterChunk();
}
