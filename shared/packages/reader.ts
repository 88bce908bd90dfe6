// Reading an app package before anything is imported (issue 32 item 4; docs/app-packages.md
// "Reading a package"): the ZIP on disk is read through its central directory (yauzl), never
// whole into memory. Every check runs before the import changes anything, and each refusal names
// what it refuses:
// - always: entry names (absolute, `..`, backslashes, control characters, duplicates: the rule of
//   workers/archive.ts, one for every archive the platform reads), no
//   symbolic links, encrypted entries or more than MAX_ENTRIES, sizes (an entry and the whole
//   archive), the compression ratio, an entry that inflates to another size than its header says,
//   the top-level folders (the modules of the format; `frontend_workers/` and `widgets/` are read
//   as skipped, with a warning), the manifest's format, version and `requires`, every file listed
//   in the manifest present and every file present listed; the same for each bucket's ZIP;
// - with `validate_checksum` (default true): every file's SHA-256 against the manifest, the
//   package and manifest checksums, and each bucket object's digest.
import fs from 'node:fs';
import { rm } from 'node:fs/promises';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import yauzl from 'yauzl';
import { DomainError } from '../errors.ts';
import { normalizeEntryPath } from '../workers/archive.ts';
import {
  BUCKET_METADATA,
  MODULES,
  PACKAGE_FORMAT,
  PACKAGE_VERSION,
  REQUIRED_PLATFORM_VERSION,
  SKIPPED_MODULES,
  manifestChecksum,
  packageChecksum,
  streamDigest,
  type Manifest,
  type ModuleName,
} from './layout.ts';

export interface ReadLimits {
  /** Entries of one ZIP. */
  maxEntries: number;
  /** Uncompressed bytes of one entry. */
  maxEntryBytes: number;
  /** Uncompressed bytes of a whole ZIP. */
  maxTotalBytes: number;
  /** Uncompressed ÷ compressed size of an entry of more than 1 MiB. */
  maxRatio: number;
  /** Bytes of a JSON file (the manifest, a module's metadata). */
  maxJsonBytes: number;
}

export const DEFAULT_READ_LIMITS: ReadLimits = { maxEntries: 100_000, maxEntryBytes: 4 * 1024 ** 3, maxTotalBytes: 16 * 1024 ** 3, maxRatio: 200, maxJsonBytes: 64 * 1024 ** 2 };

const RATIO_FLOOR = 1024 * 1024;
/** The longest entry name (a storage object's path is at most 1,024 characters, with `~N` and the folder in front). */
const MAX_PATH_BYTES = 8192;

/** A refusal of the package: 400, `file` names the problem. */
export const refused = (reason: string): DomainError => new DomainError('VALIDATION_ERROR', `The package is refused: ${reason}`, { errors: { file: [reason] } });

interface Listed {
  entry: yauzl.Entry;
  size: number;
}

const ZIP_OPTIONS: yauzl.Options = { lazyEntries: true, autoClose: false, strictFileNames: true, validateEntrySizes: true };

/**
 * A stored (uncompressed) entry of the package read in place as a ZIP of its own (a bucket's ZIP):
 * ranges of the package's file at the entry's offset, so the bucket's gigabytes are never copied.
 */
class EntrySlice extends yauzl.RandomAccessReader {
  private readonly file: string;
  private readonly offset: number;

  constructor(file: string, offset: number) {
    super();
    this.file = file;
    this.offset = offset;
  }

  override _readStreamForRange(start: number, end: number): Readable {
    if (end <= start) return Readable.from([]);
    return fs.createReadStream(this.file, { start: this.offset + start, end: this.offset + end - 1 });
  }
}

/** Opens the ZIP (a file, or a stored entry of another) and checks its directory: every entry's name, type, size and ratio; the entries by name. */
async function directory(source: string | { reader: EntrySlice; size: number }, limits: ReadLimits, what: string): Promise<{ zip: yauzl.ZipFile; entries: Map<string, Listed> }> {
  let zip: yauzl.ZipFile;
  try {
    zip = typeof source === 'string'
      ? await yauzl.openPromise(source, ZIP_OPTIONS)
      : await new Promise<yauzl.ZipFile>((resolve, reject) => yauzl.fromRandomAccessReader(source.reader, source.size, ZIP_OPTIONS, (err, z) => (err ? reject(err) : resolve(z))));
  } catch (err) {
    throw refused(`${what} is not a ZIP archive (${(err as Error).message}).`);
  }
  const entries = new Map<string, Listed>();
  let total = 0;
  try {
    for await (const entry of zip.eachEntry()) {
      // The one rule for entry names of every archive the platform reads (frontend worker builds too).
      const folder = entry.fileName.endsWith('/');
      const name = normalizeEntryPath(entry.fileName, folder, MAX_PATH_BYTES);
      if (name === null) continue;
      if (entries.has(name)) throw refused(`${what}: the entry "${name}" appears twice.`);
      if (entries.size >= limits.maxEntries) throw refused(`${what} has more than ${limits.maxEntries} entries.`);
      const type = (entry.externalFileAttributes >>> 16) & 0o170000;
      if (type === 0o120000) throw refused(`${what}: "${name}" is a symbolic link.`);
      if (type !== 0 && type !== 0o100000 && type !== 0o040000) throw refused(`${what}: "${name}" is not a regular file.`);
      if (entry.isEncrypted()) throw refused(`${what}: "${name}" is encrypted.`);
      if (entry.uncompressedSize > limits.maxEntryBytes) throw refused(`${what}: "${name}" is larger than ${limits.maxEntryBytes} bytes.`);
      total += entry.uncompressedSize;
      if (total > limits.maxTotalBytes) throw refused(`${what} expands to more than ${limits.maxTotalBytes} bytes.`);
      if (entry.uncompressedSize > RATIO_FLOOR && entry.uncompressedSize > limits.maxRatio * Math.max(1, entry.compressedSize)) {
        throw refused(`${what}: "${name}" expands more than ${limits.maxRatio} times (${entry.compressedSize} to ${entry.uncompressedSize} bytes).`);
      }
      if (!folder) entries.set(name, { entry, size: entry.uncompressedSize });
    }
  } catch (err) {
    zip.close();
    if (err instanceof DomainError) throw err;
    // yauzl's own refusals: an absolute path, `..`, a backslash, a header that contradicts itself.
    throw refused(`${what}: ${(err as Error).message}.`);
  }
  return { zip, entries };
}

/** An entry's bytes as a stream; a size other than its header's fails it (yauzl validateEntrySizes). */
async function open(zip: yauzl.ZipFile, listed: Listed): Promise<Readable> {
  return zip.openReadStreamPromise(listed.entry);
}

/** An entry's digest (`sha256:…`), reading it whole as a stream. */
async function digestOf(zip: yauzl.ZipFile, listed: Listed, what: string): Promise<string> {
  try {
    return await streamDigest(await open(zip, listed));
  } catch (err) {
    throw refused(`${what}: "${listed.entry.fileName}" cannot be read (${(err as Error).message}).`);
  }
}

/** A JSON entry, at most maxJsonBytes. */
async function jsonOf(zip: yauzl.ZipFile, listed: Listed, limits: ReadLimits, what: string): Promise<unknown> {
  if (listed.size > limits.maxJsonBytes) throw refused(`${what}: "${listed.entry.fileName}" is larger than ${limits.maxJsonBytes} bytes.`);
  const chunks: Buffer[] = [];
  try {
    for await (const chunk of await open(zip, listed)) chunks.push(chunk as Buffer);
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch (err) {
    throw refused(`${what}: "${listed.entry.fileName}" is not valid JSON (${(err as Error).message}).`);
  }
}

const versionParts = (v: unknown): number[] | undefined => {
  const m = typeof v === 'string' ? /^(\d+)\.(\d+)\.(\d+)$/.exec(v) : null;
  return m ? [Number(m[1]), Number(m[2]), Number(m[3])] : undefined;
};
const newer = (a: number[], b: number[]): boolean => {
  for (let i = 0; i < 3; i++) if (a[i] !== b[i]) return a[i]! > b[i]!;
  return false;
};

/** The manifest's own fields: format, version, requires, package, modules. */
function checkManifest(raw: unknown): Manifest {
  const m = raw as Partial<Manifest> | null;
  if (!m || typeof m !== 'object' || Array.isArray(m)) throw refused('manifest.json is not a JSON object.');
  if (m.format !== PACKAGE_FORMAT) throw refused(`manifest.json: format is ${JSON.stringify(m.format)}, not "${PACKAGE_FORMAT}".`);
  const version = versionParts(m.version);
  if (!version) throw refused(`manifest.json: version ${JSON.stringify(m.version)} is not a version (major.minor.patch).`);
  if (newer(version, versionParts(PACKAGE_VERSION)!)) throw refused(`manifest.json: format version ${m.version} is newer than ${PACKAGE_VERSION}, the one this platform reads.`);
  const requires = versionParts(m.requires?.platform_version);
  if (!requires) throw refused('manifest.json: requires.platform_version is missing or not a version.');
  if (newer(requires, versionParts(REQUIRED_PLATFORM_VERSION)!)) {
    throw refused(`manifest.json: requires.platform_version ${m.requires!.platform_version} is newer than this platform (${REQUIRED_PLATFORM_VERSION}).`);
  }
  if (!m.package || typeof m.package.app_slug !== 'string' || !m.package.app_slug || typeof m.package.app_name !== 'string') throw refused('manifest.json: package.app_slug and package.app_name are required.');
  if (!m.modules || typeof m.modules !== 'object' || Array.isArray(m.modules)) throw refused('manifest.json: modules is not an object.');
  if (!m.integrity || typeof m.integrity.package_checksum !== 'string' || typeof m.integrity.manifest_checksum !== 'string') throw refused('manifest.json: integrity.package_checksum and integrity.manifest_checksum are required.');
  const known = new Set<string>(MODULES.map((x) => x.name));
  for (const [name, mod] of Object.entries(m.modules)) {
    if (!known.has(name)) throw refused(`manifest.json: unknown module "${name}".`);
    if (!mod || typeof mod !== 'object' || typeof mod.files !== 'object' || mod.files === null) throw refused(`manifest.json: modules.${name}.files is not an object.`);
    for (const [path, digest] of Object.entries(mod.files)) {
      if (!path.startsWith(`${name}/`)) throw refused(`manifest.json: modules.${name} lists "${path}", outside its folder.`);
      if (typeof digest !== 'string' || !/^sha256:[0-9a-f]{64}$/.test(digest)) throw refused(`manifest.json: the digest of "${path}" is not sha256:<64 hex digits>.`);
    }
  }
  return m as Manifest;
}

export interface BucketObject {
  path: string;
  entry: string;
  filename: string;
  size: number;
  mimetype: string;
  metadata: Record<string, unknown>;
  visibility: string | null;
  sha256: string;
}

/** A bucket's ZIP, checked: its metadata, and its objects' bytes on demand. */
export interface BucketArchive {
  slug: string;
  metadata: Record<string, unknown> & { objects: BucketObject[] };
  /** The bytes of one of its objects. */
  open(object: BucketObject): Promise<Readable>;
}

export interface PackageContents {
  manifest: Manifest;
  /** Each present module's parsed `metadata.json` (storage: storage/metadata.json). */
  modules: Partial<Record<ModuleName, unknown>>;
  /** The buckets' archives by slug (storage only). */
  buckets: Map<string, BucketArchive>;
  warnings: string[];
  /** Closes the archives and removes the bucket ZIPs extracted for reading. */
  close(): Promise<void>;
}

/**
 * Reads and checks the package at `file` (module comment); `tmpBase` names the files a bucket's
 * ZIP is extracted to for reading (removed by close(), or on a refusal).
 */
export async function readPackage(file: string, options: { validateChecksum: boolean; tmpBase: string; limits?: Partial<ReadLimits> }): Promise<PackageContents> {
  const limits = { ...DEFAULT_READ_LIMITS, ...options.limits };
  const { zip, entries } = await directory(file, limits, 'The archive');
  const opened: yauzl.ZipFile[] = [zip];
  const extracted: string[] = [];
  const close = async () => {
    for (const z of opened) z.close();
    for (const f of extracted) await rm(f, { force: true });
  };
  try {
    const warnings: string[] = [];
    const moduleNames = new Set<string>(MODULES.map((m) => m.name));
    for (const name of entries.keys()) {
      if (name === 'manifest.json') continue;
      const top = name.split('/')[0]!;
      if (!name.includes('/') || !moduleNames.has(top)) throw refused(`unknown ${name.includes('/') ? `top-level folder "${top}/"` : `file "${name}"`} (a package holds manifest.json and the folders ${[...moduleNames].join(', ')}).`);
    }
    const manifestEntry = entries.get('manifest.json');
    if (!manifestEntry) throw refused('manifest.json is missing.');
    const manifest = checkManifest(await jsonOf(zip, manifestEntry, limits, 'The archive'));
    const listed = new Map(Object.values(manifest.modules).flatMap((m) => Object.entries(m!.files)));
    for (const path of listed.keys()) if (!entries.has(path)) throw refused(`"${path}" is listed in the manifest but not in the archive.`);
    for (const name of entries.keys()) if (name !== 'manifest.json' && !listed.has(name)) throw refused(`"${name}" is in the archive but not listed in the manifest.`);
    if (options.validateChecksum) {
      if (manifestChecksum(manifest) !== manifest.integrity.manifest_checksum) throw refused('the manifest does not match its manifest_checksum.');
      if (packageChecksum(manifest.modules) !== manifest.integrity.package_checksum) throw refused('the file digests do not match the package_checksum.');
      for (const [path, digest] of listed) {
        if ((await digestOf(zip, entries.get(path)!, 'The archive')) !== digest) throw refused(`"${path}" does not match its digest in the manifest (the file was changed).`);
      }
    }
    const modules: PackageContents['modules'] = {};
    for (const name of Object.keys(manifest.modules) as ModuleName[]) {
      if (SKIPPED_MODULES.includes(name)) {
        warnings.push(`${name}: skipped (the platform does not import ${name.replace('_', ' ')}).`);
        continue;
      }
      const metadata = entries.get(`${name}/metadata.json`);
      if (!metadata) throw refused(`${name}/metadata.json is missing.`);
      modules[name] = await jsonOf(zip, metadata, limits, 'The archive');
    }
    const buckets = new Map<string, BucketArchive>();
    for (const [path, listedEntry] of entries) {
      const m = /^storage\/buckets\/([^/]+)\.zip$/.exec(path);
      if (!m) {
        if (path.startsWith('storage/') && path !== 'storage/metadata.json') throw refused(`"${path}" is not a file of the storage module.`);
        continue;
      }
      const slug = m[1]!;
      let source: Parameters<typeof directory>[0];
      if (listedEntry.entry.compressionMethod === 0) {
        // Stored, as the export writes it: read in place.
        const { fileDataStart } = await zip.readLocalFileHeaderPromise(listedEntry.entry, { minimal: true });
        source = { reader: new EntrySlice(file, fileDataStart), size: listedEntry.entry.compressedSize };
      } else {
        // Deflated by another writer: inflated to a file of its own first.
        source = `${options.tmpBase}.bucket-${buckets.size}.zip`;
        extracted.push(source);
        await pipeline(await open(zip, listedEntry), fs.createWriteStream(source));
      }
      buckets.set(slug, await bucketArchive(source, slug, limits, options.validateChecksum, opened));
    }
    return { manifest, modules, buckets, warnings, close };
  } catch (err) {
    await close();
    throw err;
  }
}

/** A bucket's ZIP checked like the package: names, types, sizes; its metadata; each object's entry present (and its digest, with validateChecksum). */
async function bucketArchive(file: Parameters<typeof directory>[0], slug: string, limits: ReadLimits, validateChecksum: boolean, opened: yauzl.ZipFile[]): Promise<BucketArchive> {
  const what = `storage/buckets/${slug}.zip`;
  const { zip, entries } = await directory(file, limits, what);
  opened.push(zip);
  const metaEntry = entries.get(BUCKET_METADATA);
  if (!metaEntry) throw refused(`${what}: ${BUCKET_METADATA} is missing.`);
  const metadata = (await jsonOf(zip, metaEntry, limits, what)) as BucketArchive['metadata'];
  if (!metadata || typeof metadata !== 'object' || !Array.isArray(metadata.objects)) throw refused(`${what}: ${BUCKET_METADATA} has no objects list.`);
  const named = new Set<string>([BUCKET_METADATA]);
  for (const o of metadata.objects) {
    if (!o || typeof o.path !== 'string' || typeof o.entry !== 'string' || !entries.has(o.entry) || o.entry === BUCKET_METADATA) throw refused(`${what}: an object's entry ${JSON.stringify(o?.entry)} is not in the archive.`);
    if (named.has(o.entry)) throw refused(`${what}: the entry "${o.entry}" is named by two objects.`);
    named.add(o.entry);
    if (validateChecksum && (await digestOf(zip, entries.get(o.entry)!, what)) !== o.sha256) throw refused(`${what}: "${o.entry}" does not match its digest (the file was changed).`);
  }
  for (const name of entries.keys()) if (!named.has(name)) throw refused(`${what}: "${name}" is not an object of the bucket's metadata.`);
  return { slug, metadata, open: (o) => open(zip, entries.get(o.entry)!) };
}
