// A build's files into the site's store (docs/frontend-workers.md "Deploys"). The archive is read
// safely (archive.ts: every entry is checked before the first file comes out); each file is
// hashed and stored content-addressed per site under `_workers/{sha256}` (with `.br`/`.gz`
// variants compressed once, here), outside every bucket: a file whose content an earlier build
// of the site stored is not stored again, so a build that changes 3 files of 5,000 writes 3.
//
// Order (crash safety): the blob's row first (not yet `stored`: a journal entry), then the bytes,
// then `stored`; only stored blobs are reused. A crash in between leaves an unstored row
// (sweepWorkerBlobs removes it and whatever bytes came); a blob no
// build names any more is collected (collectWorkerBlobs) unless a deploy touched it within the
// grace period (`used_at`: the deploy in flight that reuses it has not written its manifest yet).
import { createHash } from 'node:crypto';
import { open } from 'node:fs/promises';
import type { EntityManager } from '@mikro-orm/postgresql';
import type MimeTypes from 'mime-types';
import { lazyRequire } from '../common/lazy-require.ts';
import { rows } from '../db/sql.ts';
import { DomainError, fieldError } from '../errors.ts';
import type { SiteStore } from '../storage/objstore/types.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { archiveFormat, normalizeEntryPath, readArchive, type ArchiveLimits } from './archive.ts';
import { precompress } from './precompress.ts';
import { buildManifest, type BuildFile, type Manifest } from './serving.ts';

export const BLOB_PREFIX = '_workers/';
export const blobKey = (sha256: string, encoding: 'br' | 'gzip' | null = null): string => `${BLOB_PREFIX}${sha256}${encoding === 'br' ? '.br' : encoding === 'gzip' ? '.gz' : ''}`;
/** Every key a blob may have in the store: the bytes and their compressed variants. */
const everyKeyOf = (sha256: string): string[] => [blobKey(sha256), blobKey(sha256, 'br'), blobKey(sha256, 'gzip')];
/** A blob a deploy touched within this long is never collected (longer than any deploy). */
export const BLOB_GRACE_MS = 3600_000;
/** Files hashed, compressed and stored at once (a batch's directories are made durable once), and their bytes at most. */
const BATCH = 512;
const BATCH_BYTES = 32 * 1024 * 1024;

export interface Deployed {
  manifest: Manifest;
  size: number;
  fileCount: number;
  storedFiles: number;
}

interface Pending {
  path: string;
  data: Buffer;
  sha256: string;
  type: string;
}

const mimeTypes = lazyRequire<typeof MimeTypes>('mime-types');

function contentType(path: string): string {
  const mime = mimeTypes();
  const type = mime.lookup(path) || 'application/octet-stream';
  return mime.charset(type) ? `${type}; charset=utf-8` : type;
}

/** The archive's format from its name and first bytes (400 naming `file` when neither says zip, tar or gzipped tar). */
export async function formatOf(file: { path: string; filename: string }): Promise<ReturnType<typeof archiveFormat>> {
  const handle = await open(file.path, 'r');
  try {
    const head = Buffer.alloc(512);
    const { bytesRead } = await handle.read(head, 0, 512, 0);
    return archiveFormat(file.filename, head.subarray(0, bytesRead));
  } finally {
    await handle.close();
  }
}

/** What a stored blob is: its size and its compressed variants' sizes (null: none). */
interface BlobSizes {
  sha256: string;
  size: number;
  br: number | null;
  gz: number | null;
}

/** The stored blobs among `hashes`, touched (the collector leaves them alone from now on). */
async function touchStored(em: EntityManager, q: string, hashes: Iterable<string>): Promise<Map<string, BlobSizes>> {
  const found = await rows<{ sha256: string; size: string; br: string | null; gz: string | null }>(
    em,
    `UPDATE ${q}.frontend_worker_blobs SET used_at = now() WHERE stored AND sha256 IN (SELECT jsonb_array_elements_text(?::jsonb)) RETURNING sha256, size, br, gz`,
    [JSON.stringify([...new Set(hashes)])],
  );
  return new Map(found.map((r) => [r.sha256, { sha256: r.sha256, size: Number(r.size), br: r.br === null ? null : Number(r.br), gz: r.gz === null ? null : Number(r.gz) }]));
}

/** A manifest entry: the blob's sizes and the path's content type. */
const buildFile = (b: BlobSizes, type: string): BuildFile => ({ sha256: b.sha256, size: b.size, type, ...(b.br !== null && { br: b.br }), ...(b.gz !== null && { gz: b.gz }) });

/**
 * Reads the archive at `file.path` and stores its files' new contents. `started` runs once every
 * entry has been checked, before the first byte is stored (a refused archive writes nothing).
 */
export async function deployArchive(
  em: EntityManager,
  store: SiteStore,
  schema: string,
  file: { path: string; filename: string } | undefined,
  started: () => Promise<void>,
  limits?: Partial<ArchiveLimits>,
  manifest?: Map<string, string>,
): Promise<Deployed> {
  const q = quotedSchema(schema);
  const files = new Map<string, BuildFile>();
  const texts: { redirects?: string; headers?: string } = {};
  let batch: Pending[] = [];
  let batchBytes = 0;
  let size = 0;
  let storedFiles = 0;
  let begun = false;

  const flush = async () => {
    const pending = batch;
    batch = [];
    batchBytes = 0;
    if (!pending.length) return;
    const known = await touchStored(em, q, pending.map((p) => p.sha256));
    const fresh = new Map<string, Pending>();
    for (const p of pending) if (!known.has(p.sha256)) fresh.set(p.sha256, p);
    // The journal first: rows not yet `stored` (another deploy storing the same content stores it too: same bytes).
    if (fresh.size) {
      await em.execute(
        `INSERT INTO ${q}.frontend_worker_blobs (sha256, size) SELECT b->>'sha256', (b->>'size')::bigint FROM jsonb_array_elements(?::jsonb) b
         ON CONFLICT (sha256) DO UPDATE SET used_at = now()`,
        [JSON.stringify([...fresh.values()].map((p) => ({ sha256: p.sha256, size: p.data.length })))],
      );
    }
    const added = await Promise.all(
      [...fresh.values()].map(async (p) => {
        const variants = await precompress(p.data, p.type);
        const sizes: BlobSizes = { sha256: p.sha256, size: p.data.length, br: variants.br?.length ?? null, gz: variants.gz?.length ?? null };
        return { p, variants, sizes };
      }),
    );
    await store.putMany(
      added.flatMap(({ p, variants }) => [
        { key: blobKey(p.sha256), data: p.data, contentType: p.type },
        ...(variants.br ? [{ key: blobKey(p.sha256, 'br'), data: variants.br, contentType: p.type }] : []),
        ...(variants.gz ? [{ key: blobKey(p.sha256, 'gzip'), data: variants.gz, contentType: p.type }] : []),
      ]),
    );
    if (added.length) {
      await em.execute(
        `UPDATE ${q}.frontend_worker_blobs x SET stored = true, br = (b->>'br')::bigint, gz = (b->>'gz')::bigint, used_at = now()
           FROM jsonb_array_elements(?::jsonb) b WHERE x.sha256 = b->>'sha256'`,
        [JSON.stringify(added.map((a) => a.sizes))],
      );
      storedFiles += added.length;
    }
    for (const a of added) known.set(a.sizes.sha256, a.sizes);
    for (const p of pending) files.set(p.path, buildFile(known.get(p.sha256)!, p.type));
  };

  if (file) {
    await readArchive(
      file.path,
      await formatOf(file),
      async ({ path, data }) => {
        if (!begun) {
          begun = true;
          await started();
        }
        size += data.length;
        if (path === '_redirects' || path === '_headers') {
          texts[path === '_redirects' ? 'redirects' : 'headers'] = data.toString('utf8');
          return;
        }
        const sha256 = createHash('sha256').update(data).digest('hex');
        const listed = manifest?.get(path);
        if (manifest && listed !== sha256) throw fieldError('file', `"${path}" is ${listed ? 'not the content its manifest entry names' : 'not in the manifest'}: the manifest lists every file of the build with its SHA-256.`);
        batch.push({ path, data, sha256, type: contentType(path) });
        batchBytes += data.length;
        if (batch.length >= BATCH || batchBytes >= BATCH_BYTES) await flush();
      },
      limits,
    );
    await flush();
  } else await started();
  if (manifest) {
    // The files of the manifest the archive did not carry: contents this site stored before (touched: the collector keeps them).
    const rest = [...manifest].filter(([path]) => !files.has(path));
    const held = await touchStored(em, q, rest.map(([, sha]) => sha));
    const missing = rest.filter(([, sha]) => !held.has(sha)).map(([path]) => path);
    if (missing.length) throw fieldError('manifest', `${missing.length} file${missing.length === 1 ? ' is' : 's are'} neither in the archive nor stored by this site: ${missing.slice(0, 5).join(', ')}${missing.length > 5 ? ', …' : ''}. Ask POST …/builds/missing/ which contents to send.`);
    for (const [path, sha256] of rest) {
      const blob = held.get(sha256)!;
      files.set(path, buildFile(blob, contentType(path)));
      size += blob.size;
    }
  }
  const fileCount = files.size + Object.keys(texts).length;
  if (!fileCount) throw fieldError('file', 'The archive holds no files.');
  return { manifest: buildManifest(files, texts), size, fileCount, storedFiles };
}

/** Of these contents (SHA-256, hex), those the site does not hold: what a deploy with a manifest must send. */
export async function missingBlobs(em: EntityManager, schema: string, hashes: string[]): Promise<string[]> {
  const held = new Set(
    (await rows<{ sha256: string }>(em, `SELECT sha256 FROM ${quotedSchema(schema)}.frontend_worker_blobs WHERE stored AND sha256 IN (SELECT jsonb_array_elements_text(?::jsonb))`, [JSON.stringify(hashes)])).map((r) => r.sha256),
  );
  return [...new Set(hashes)].filter((h) => !held.has(h));
}

/** A build's manifest as a client sends it (JSON: path → SHA-256 of the content): checked like archive entries. 400 naming `manifest`. */
export function parseBuildManifest(raw: unknown, maxFiles: number): Map<string, string> {
  let value: unknown = raw;
  if (typeof raw === 'string') {
    try {
      value = JSON.parse(raw);
    } catch {
      throw fieldError('manifest', 'Send a JSON object: {"path/of/file": "sha256 hex", …}.');
    }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw fieldError('manifest', 'Send a JSON object: {"path/of/file": "sha256 hex", …}.');
  const entries = Object.entries(value);
  if (entries.length > maxFiles) throw fieldError('manifest', `At most ${maxFiles} files in a build.`);
  const out = new Map<string, string>();
  for (const [path, sha] of entries) {
    if (typeof sha !== 'string' || !/^[0-9a-f]{64}$/.test(sha)) throw fieldError('manifest', `"${path.slice(0, 200)}": the SHA-256 of its content, 64 lower-case hex digits.`);
    let normalized: string | null;
    try {
      normalized = normalizeEntryPath(path, false, 1024);
    } catch (err) {
      throw fieldError('manifest', err instanceof DomainError ? (err.errors?.file?.[0] ?? err.message) : String(err));
    }
    out.set(normalized!, sha);
  }
  return out;
}

/**
 * Removes the site's blobs that no build names any more and that no deploy touched within the
 * grace period: their rows, then their bytes (a failure to delete bytes leaves them to the sweep).
 */
export async function collectWorkerBlobs(em: EntityManager, store: SiteStore, schema: string, graceMs = BLOB_GRACE_MS): Promise<number> {
  const q = quotedSchema(schema);
  const gone = await rows<{ sha256: string }>(
    em,
    `DELETE FROM ${q}.frontend_worker_blobs b
      WHERE b.stored AND b.used_at < now() - (? * interval '1 millisecond')
        AND NOT EXISTS (SELECT 1 FROM ${q}.frontend_worker_builds x, jsonb_each(x.manifest->'files') f WHERE f.value->>'sha256' = b.sha256)
      RETURNING b.sha256`,
    [graceMs],
  );
  if (gone.length) await store.delete(gone.flatMap((r) => everyKeyOf(r.sha256))).catch(() => undefined);
  return gone.length;
}

/** Builds left `uploading` past the grace period (their server stopped mid-deploy): `failed`, saying so. */
export async function failInterruptedBuilds(em: EntityManager, schema: string, graceMs = BLOB_GRACE_MS): Promise<number> {
  const failed = await em.execute(
    `UPDATE ${quotedSchema(schema)}.frontend_worker_builds SET status = 'failed', error = 'The deploy was interrupted (its server stopped): upload the build again.'
      WHERE status = 'uploading' AND created_at < now() - (? * interval '1 millisecond') RETURNING uuid`,
    [graceMs],
  );
  return failed.length;
}

/** Blobs whose bytes a deploy began to store and never confirmed (a crash, a failed put), older than the grace period: their bytes, then their rows. */
export async function sweepWorkerBlobs(em: EntityManager, store: SiteStore, schema: string, graceMs = BLOB_GRACE_MS): Promise<number> {
  const q = quotedSchema(schema);
  const stale = await rows<{ sha256: string }>(em, `SELECT sha256 FROM ${q}.frontend_worker_blobs WHERE NOT stored AND used_at < now() - (? * interval '1 millisecond')`, [graceMs]);
  if (!stale.length) return 0;
  await store.delete(stale.flatMap((r) => everyKeyOf(r.sha256)));
  await em.execute(`DELETE FROM ${q}.frontend_worker_blobs WHERE NOT stored AND sha256 IN (SELECT jsonb_array_elements_text(?::jsonb))`, [JSON.stringify(stale.map((r) => r.sha256))]);
  return stale.length;
}
