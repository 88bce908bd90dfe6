// App package export (spec Part 2 §2 "App package and jobs", §4 "Packages"; docs/app-packages.md):
// every module of an app read in one snapshot (a repeatable-read, read-only transaction), written
// as a streamed ZIP into a spool file under the data dir (each file hashed as it is written; a
// bucket's files are streamed from the store into a ZIP of their own), `manifest.json` last, then
// kept in the site's store as the app's stored package (`packages/1`) and recorded on the export
// job. What the spec leaves out is never read: records, domains, role assignments, principal and
// system policies, created-by/modified-by references, secret values.
import fs from 'node:fs';
import { mkdir, readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { IsolationLevel, type EntityManager } from '@mikro-orm/postgresql';
import { Type } from '@sinclair/typebox';
import { appFor, type AppRow } from '../apps/lookup.ts';
import { isUuid } from '../common/slug.ts';
import { PageParams, pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { StringEnum, validate } from '../common/validation.ts';
import { actorUuid, type ServiceContext } from '../context.ts';
import { firstRow, iso, rows, type Timestamp } from '../db/sql.ts';
import { notFound } from '../errors.ts';
import { appPolicyRows } from '../policies/store.ts';
import { toPortable, type PortablePolicy } from '../policies/portable.ts';
import { isTextType } from '../storage/mime.ts';
import type { ObjectStore, SiteStore } from '../storage/objstore/types.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { siteSchemaFor } from '../tenancy/site-access.ts';
import {
  BUCKET_METADATA,
  ExportOptionsBody,
  MODULES,
  PACKAGE_FORMAT,
  PACKAGE_VERSION,
  REQUIRED_PLATFORM_VERSION,
  SECRET_PLACEHOLDER,
  exportFlags,
  manifestChecksum,
  packageChecksum,
  type ExportFlags,
  type Manifest,
  type ManifestModule,
  type ModuleName,
} from './layout.ts';
import { ZipWriter } from './zip-writer.ts';

export interface PackageDeps {
  store: ObjectStore;
  /** Where spool files are written (`<dataDir>/tmp`). */
  tmpDir: string;
}

/** Where an app's stored packages live in the site's store (outside every bucket). */
export const PACKAGE_PREFIX = '_packages/';

export type JobStatus = 'in_progress' | 'completed' | 'failed';

interface ExportJobRow {
  id: number;
  uuid: string;
  app_name: string;
  app_slug: string;
  status: JobStatus;
  options: ExportFlags;
  size: string | null;
  checksum: string | null;
  package_key: string | null;
  error: string | null;
  triggered_by: string | null;
  started_at: Timestamp;
  completed_at: Timestamp | null;
  created_at: Timestamp;
}

export interface ExportJobView {
  id: number;
  uuid: string;
  app_name: string;
  app_slug: string;
  status: JobStatus;
  started_at: string;
  completed_at: string | null;
  created_at: string;
  triggered_by: string | null;
  options: ExportFlags;
  size: number | null;
  checksum: string | null;
  error_message: string | null;
}

const jobView = (r: ExportJobRow): ExportJobView => ({
  id: r.id,
  uuid: r.uuid,
  app_name: r.app_name,
  app_slug: r.app_slug,
  status: r.status,
  started_at: iso(r.started_at),
  completed_at: r.completed_at === null ? null : iso(r.completed_at),
  created_at: iso(r.created_at),
  triggered_by: r.triggered_by,
  options: r.options,
  size: r.size === null ? null : Number(r.size),
  checksum: r.checksum,
  error_message: r.error,
});

const JOB_COLUMNS = 'id, uuid, app_name, app_slug, status, options, size, checksum, package_key, error, triggered_by, started_at, completed_at, created_at';

/** The app an operation on packages works on: exporting and reading its packages is an update right (they carry its whole configuration). */
export async function packageApp(ctx: ServiceContext, slug: string): Promise<{ schema: string; app: AppRow }> {
  const schema = await siteSchemaFor(ctx, 'update', 'App');
  return { schema, app: await appFor(ctx, schema, slug, 'update') };
}

// ---- reading the modules ------------------------------------------------------------------------

interface BucketRow {
  id: number;
  name: string;
  slug: string;
  visibility: string;
  file_size_limit: string;
  allowed_mime_types: string[];
  storage_provider: string;
  max_size_bytes: string | null;
  max_objects: string | null;
}

interface ObjectRow {
  path: string;
  filename: string;
  size: string;
  mimetype: string;
  metadata: Record<string, unknown>;
  visibility: string | null;
  blob_key: string;
}

/** What the export reads from the database, in one snapshot. */
export interface Snapshot {
  modules: Partial<Record<ModuleName, { file: unknown; count: number; extra?: Record<string, unknown> }>>;
  buckets: { bucket: BucketRow; objects: ObjectRow[] }[];
}

const num = (v: string | number | null): number | null => (v === null ? null : Number(v));

export async function readModules(em: EntityManager, schema: string, app: AppRow, flags: ExportFlags): Promise<Snapshot> {
  const q = quotedSchema(schema);
  const modules: Snapshot['modules'] = {};
  const settings = await firstRow<Record<string, unknown>>(
    em,
    `SELECT display_name, primary_color, secondary_color, category, max_functions, max_datatables, rate_limit_per_hour, documentation_url, support_email
       FROM ${q}.app_settings WHERE app_id = ?`,
    [app.id],
  );
  modules.app = { file: { name: app.name, slug: app.slug, description: app.description, settings: settings ?? {} }, count: 1 };

  if (flags.include_app_roles) {
    const roles = await rows(em, `SELECT r.name, r.description, p.name AS parent_name FROM ${q}.app_roles r LEFT JOIN ${q}.app_roles p ON p.id = r.parent_id WHERE r.app_id = ? ORDER BY r.name`, [app.id]);
    modules.app_roles = { file: { roles }, count: roles.length };
  }
  if (flags.include_datatables) {
    const dataSources = await rows(em, `SELECT name, slug, provider_type, provider_config, description FROM ${q}.data_sources WHERE app_id = ? AND is_active ORDER BY slug`, [app.id]);
    const tables = await rows<{ name: string; description: string; data_source: string; json_schema: unknown; schema_hash: string; is_materialized: boolean; is_reference: boolean }>(
      em,
      `SELECT t.name, t.description, d.slug AS data_source, t.json_schema, t.schema_hash, t.is_materialized, t.is_reference
         FROM ${q}.data_tables t JOIN ${q}.data_sources d ON d.id = t.data_source_id
        WHERE t.app_id = ? AND t.is_active ORDER BY t.name`,
      [app.id],
    );
    const own = tables.filter((t) => !t.is_reference).map(({ is_reference: _r, ...t }) => t);
    const skipped = tables.filter((t) => t.is_reference).map((t) => t.name);
    modules.datatables = { file: { data_sources: dataSources, tables: own, skipped_reference_tables: skipped }, count: own.length };
  }
  if (flags.include_functions) {
    const functions = await rows(em, `SELECT name, slug, description, runtime, code, timeout, environment, is_active FROM ${q}.functions WHERE app_id = ? ORDER BY slug`, [app.id]);
    modules.functions = { file: { functions }, count: functions.length };
  }
  if (flags.include_events) {
    const events = await rows(em, `SELECT e.event, f.slug AS function_slug FROM ${q}.event_subscriptions e JOIN ${q}.functions f ON f.id = e.function_id WHERE f.app_id = ? ORDER BY e.event, f.slug`, [app.id]);
    modules.events = { file: { subscriptions: events }, count: events.length };
  }
  // Analytics queries do not exist yet: no secret is referenced by one (the include-anyway rule has nothing to add).
  if (flags.include_secrets) {
    const secrets = await rows<{ key: string; description: string; secret_type: string | null }>(
      em,
      `SELECT s.key, s.description, t.slug AS secret_type FROM ${q}.secrets s LEFT JOIN ${q}.secret_types t ON t.uuid = s.secret_type_uuid WHERE s.app_slug = ? ORDER BY s.key`,
      [app.slug],
    );
    const typeSlugs = [...new Set(secrets.map((s) => s.secret_type).filter((t): t is string => t !== null))];
    const types = typeSlugs.length ? await rows(em, `SELECT slug, name, description, json_schema FROM ${q}.secret_types WHERE slug IN (?) ORDER BY slug`, [typeSlugs]) : [];
    modules.secrets = { file: { secret_types: types, secrets: secrets.map((s) => ({ ...s, value: SECRET_PLACEHOLDER })) }, count: secrets.length };
  }
  if (flags.include_policies) {
    const place = { schema, appSlug: app.slug };
    const policies = (await appPolicyRows(em, schema, app, { includeDisabled: false }))
      .filter((r) => !r.is_system)
      .map((r) => toPortable(r.document, place, { reserved: false }))
      .filter((p): p is PortablePolicy => p !== undefined);
    const byType = { resource: 0, role: 0, derived_role: 0 };
    for (const p of policies) byType[p.policy_type]++;
    modules.policies = { file: { policies }, count: policies.length, extra: { by_type: byType } };
  }
  if (flags.include_analytics) modules.analytics = { file: { queries: [] }, count: 0 };
  modules.tags = { file: { tags: [] }, count: 0 }; // only tags referenced by exported modules: none reference tags yet
  const buckets: Snapshot['buckets'] = [];
  if (flags.include_storage) {
    const bucketRows = await rows<BucketRow>(
      em,
      `SELECT id, name, slug, visibility, file_size_limit, allowed_mime_types, storage_provider, max_size_bytes, max_objects
         FROM ${q}.storage_buckets WHERE app_id = ? AND app_category = 'assets' ORDER BY slug`,
      [app.id],
    );
    for (const bucket of bucketRows) {
      const objects = await rows<ObjectRow>(em, `SELECT path, filename, size, mimetype, metadata, visibility, blob_key FROM ${q}.storage_objects WHERE bucket_id = ? ORDER BY path`, [bucket.id]);
      buckets.push({ bucket, objects });
    }
  }
  if (flags.include_frontend_workers) modules.frontend_workers = { file: { workers: [], skipped: 'Frontend workers are not exported (spec Part 2 §4).' }, count: 0, extra: { build_count: 0 } };
  if (flags.include_widgets) modules.widgets = { file: { widgets: [] }, count: 0 };
  return { modules, buckets };
}

// ---- writing the package ------------------------------------------------------------------------

/** A bucket's own metadata (bucket_metadata.json) without its objects. */
export const bucketMetadata = (b: BucketRow) => ({
  name: b.name,
  slug: b.slug,
  visibility: b.visibility,
  file_size_limit: Number(b.file_size_limit),
  allowed_mime_types: b.allowed_mime_types,
  storage_provider: b.storage_provider,
  max_size_bytes: num(b.max_size_bytes),
  max_objects: num(b.max_objects),
});

/**
 * A bucket's ZIP at `file`: each object under its path (a second entry of one name, or the
 * metadata file's own name, gets `~N` appended; the metadata names each object's entry), then
 * bucket_metadata.json with every object's digest.
 */
async function writeBucketZip(store: SiteStore, file: string, bucket: BucketRow, objects: ObjectRow[], mtime: Date): Promise<{ files: number; bytes: number }> {
  const zip = new ZipWriter(fs.createWriteStream(file), mtime);
  const used = new Set([BUCKET_METADATA]);
  const listed = [];
  let bytes = 0;
  try {
    for (const o of objects) {
      let entry = o.path;
      for (let n = 1; used.has(entry); n++) entry = `${o.path}~${n}`;
      used.add(entry);
      const written = await zip.addStream(entry, await store.get(o.blob_key), isTextType(o.mimetype) || o.mimetype === 'application/json');
      bytes += written.size;
      listed.push({ path: o.path, entry, filename: o.filename, size: written.size, mimetype: o.mimetype, metadata: o.metadata, visibility: o.visibility, sha256: written.digest });
    }
    zip.addJson(BUCKET_METADATA, { ...bucketMetadata(bucket), objects: listed });
    await zip.finish();
  } catch (err) {
    zip.abort(err as Error);
    throw err;
  }
  return { files: objects.length, bytes };
}

/** Writes the package of `snapshot` into `out`; the manifest. */
async function writePackage(out: fs.WriteStream, spool: string, store: SiteStore, snapshot: Snapshot, header: Omit<Manifest, 'modules' | 'integrity'>): Promise<{ manifest: Manifest; size: number; checksum: string }> {
  const mtime = new Date(header.created_at);
  const zip = new ZipWriter(out, mtime);
  const modules: Manifest['modules'] = {};
  try {
    for (const { name } of MODULES) {
      const m = snapshot.modules[name];
      if (!m && !(name === 'storage' && header.export_options.include_storage)) continue;
      const entry: ManifestModule = { count: m?.count ?? 0, files: {}, ...m?.extra };
      if (name === 'storage') {
        const listed = [];
        let totalFiles = 0;
        let totalBytes = 0;
        for (const { bucket, objects } of snapshot.buckets) {
          const inner = `${spool}.${bucket.slug}.zip`;
          try {
            const { files, bytes } = await writeBucketZip(store, inner, bucket, objects, mtime);
            const archive = `storage/buckets/${bucket.slug}.zip`;
            entry.files[archive] = (await zip.addStream(archive, fs.createReadStream(inner), false)).digest;
            listed.push({ ...bucketMetadata(bucket), file_count: files, total_size_bytes: bytes, archive });
            totalFiles += files;
            totalBytes += bytes;
          } finally {
            await rm(inner, { force: true });
          }
        }
        entry.files['storage/metadata.json'] = zip.addJson('storage/metadata.json', { buckets: listed });
        Object.assign(entry, { count: listed.length, bucket_count: listed.length, total_files: totalFiles, total_size_bytes: totalBytes });
      } else {
        entry.files[`${name}/metadata.json`] = zip.addJson(`${name}/metadata.json`, m!.file);
      }
      modules[name] = entry;
    }
    const withoutIntegrity = { ...header, modules };
    const manifest: Manifest = { ...withoutIntegrity, integrity: { package_checksum: packageChecksum(modules), manifest_checksum: manifestChecksum(withoutIntegrity) } };
    zip.addJson('manifest.json', manifest);
    const { size, checksum } = await zip.finish();
    return { manifest, size, checksum };
  } catch (err) {
    zip.abort(err as Error);
    throw err;
  }
}

export interface ExportResult extends PackageDownload {
  manifest: Manifest;
}

/** A package's file name: `{app_slug}_package_{YYYYMMDDTHHMMSSZ}.zip`. */
const packageFilename = (slug: string, at: Date): string => `${slug}_package_${at.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z')}.zip`;

/**
 * Exports the app: a job (in_progress, committed first, so a crash leaves a record), the package
 * written and kept as the app's stored package (the one before it is removed), the job completed
 * or failed with the error. 404/403 before any job when the app is missing or not the caller's.
 */
export async function exportApp(ctx: ServiceContext, deps: PackageDeps, slug: string, rawOptions: unknown): Promise<ExportResult> {
  const { schema, app } = await packageApp(ctx, slug);
  const flags = exportFlags(validate(ExportOptionsBody, rawOptions ?? {}) as Partial<ExportFlags>);
  const q = quotedSchema(schema);
  const who = actorUuid(ctx);
  const job = (await firstRow<ExportJobRow>(
    ctx.em,
    `INSERT INTO ${q}.app_export_jobs (app_id, app_name, app_slug, options, triggered_by) VALUES (?, ?, ?, ?, ?) RETURNING ${JOB_COLUMNS}`,
    [app.id, app.name, app.slug, JSON.stringify(flags), who],
  ))!;
  await mkdir(deps.tmpDir, { recursive: true });
  const spool = path.join(deps.tmpDir, `package-${job.uuid}`);
  const store = deps.store.site(schema);
  const key = `${PACKAGE_PREFIX}${app.id}/${job.uuid}.zip`;
  const createdAt = new Date();
  try {
    const snapshot = await ctx.em.fork().transactional((tx) => readModules(tx as EntityManager, schema, app, flags), { isolationLevel: IsolationLevel.REPEATABLE_READ, readOnly: true });
    const header = {
      format: PACKAGE_FORMAT,
      version: PACKAGE_VERSION,
      created_at: createdAt.toISOString(),
      created_by: ctx.actor.kind === 'user' ? ctx.actor.username : null,
      package: { app_slug: app.slug, app_name: app.name, description: app.description },
      requires: { platform_version: REQUIRED_PLATFORM_VERSION },
      export_options: flags,
    } as const;
    const { manifest, size, checksum } = await writePackage(fs.createWriteStream(`${spool}.zip`), spool, store, snapshot, header);
    await store.put(key, fs.createReadStream(`${spool}.zip`), { contentType: 'application/zip', size });
    // The app's earlier stored packages: their keys as they were (RETURNING shows the row after the update, hence the join).
    const previous = await rows<{ package_key: string }>(
      ctx.em,
      `UPDATE ${q}.app_export_jobs j SET package_key = NULL
         FROM (SELECT id, package_key FROM ${q}.app_export_jobs WHERE app_id = ? AND package_key IS NOT NULL AND uuid <> ? FOR UPDATE) old
        WHERE j.id = old.id RETURNING old.package_key`,
      [app.id, job.uuid],
    );
    const done = (await firstRow<ExportJobRow>(
      ctx.em,
      `UPDATE ${q}.app_export_jobs SET status = 'completed', size = ?, checksum = ?, package_key = ?, completed_at = now() WHERE id = ? RETURNING ${JOB_COLUMNS}`,
      [size, checksum, key, job.id],
    ))!;
    await store.delete(previous.map((p) => p.package_key)).catch(() => undefined); // a leftover is collected with the app's prefix
    return { job: jobView(done), manifest, open: () => store.get(key), size, filename: packageFilename(app.slug, createdAt) };
  } catch (err) {
    const message = err instanceof Error ? err.message : String(err);
    await ctx.em.execute(`UPDATE ${q}.app_export_jobs SET status = 'failed', error = ?, completed_at = now() WHERE id = ?`, [message.slice(0, 2000), job.id]).catch(() => undefined);
    await store.delete([key]).catch(() => undefined);
    throw err;
  } finally {
    await rm(`${spool}.zip`, { force: true });
  }
}

/** A package to download: its bytes (opened on demand), size, file name and export job. */
export interface PackageDownload {
  open: () => Promise<Readable>;
  size: number;
  filename: string;
  job: ExportJobView;
}

/**
 * The stored package of the app (`packages/{version}`): only version 1 exists, the last completed
 * export's ZIP, made now when there is none (spec Part 2 §9).
 */
export async function storedPackage(ctx: ServiceContext, deps: PackageDeps, slug: string, version: string): Promise<PackageDownload> {
  const { schema, app } = await packageApp(ctx, slug);
  if (version !== '1') throw notFound(`Package version "${version}" (only version 1, the latest, exists)`);
  const row = await latestPackage(ctx.em, schema, app.id);
  if (!row) return exportApp(ctx, deps, slug, {});
  const store = deps.store.site(schema);
  return { open: () => store.get(row.package_key!), size: Number(row.size), filename: packageFilename(app.slug, new Date(row.completed_at!)), job: jobView(row) };
}

const latestPackage = (em: EntityManager, schema: string, appId: number) =>
  firstRow<ExportJobRow>(em, `SELECT ${JOB_COLUMNS} FROM ${quotedSchema(schema)}.app_export_jobs WHERE app_id = ? AND package_key IS NOT NULL ORDER BY completed_at DESC LIMIT 1`, [appId]);

/** The app's stored package as the app detail shows it (`package_info`). */
export async function packageInfo(em: EntityManager, schema: string, app: { id: number; slug: string }, baseUrl: string): Promise<{ has_package: boolean; generated_at: string | null; download_url: string | null }> {
  const row = await latestPackage(em, schema, app.id);
  if (!row) return { has_package: false, generated_at: null, download_url: null };
  return { has_package: true, generated_at: iso(row.completed_at!), download_url: `${baseUrl}/api/apps/${encodeURIComponent(app.slug)}/packages/1` };
}

export const JobListQuery = Type.Object({
  status: Type.Optional(StringEnum(['in_progress', 'completed', 'failed'])),
  ordering: Type.Optional(StringEnum(['created_at', '-created_at', 'started_at', '-started_at', 'completed_at', '-completed_at'], { description: 'Default -created_at' })),
  ...PageParams,
});

/** The app's export jobs: `status`, `ordering` (default -created_at), pages of 10 (at most 100). */
export async function listExportJobs(ctx: ServiceContext, slug: string, rawQuery: unknown): Promise<Page<ExportJobView>> {
  const { schema, app } = await packageApp(ctx, slug);
  const query = validate(JobListQuery, rawQuery, 'query');
  const where = ['app_id = ?'];
  const params: unknown[] = [app.id];
  if (query.status) {
    where.push('status = ?');
    params.push(query.status);
  }
  const ordering = query.ordering ?? '-created_at';
  const column = ordering.replace('-', '');
  const direction = ordering.startsWith('-') ? 'DESC' : 'ASC';
  const q = quotedSchema(schema);
  const count = Number((await firstRow<{ n: string }>(ctx.em, `SELECT count(*) AS n FROM ${q}.app_export_jobs WHERE ${where.join(' AND ')}`, params))!.n);
  const request = resolvePage(parsePageRequest({ page: query.page, page_size: query.page_size ?? '10' }), count);
  const found = await rows<ExportJobRow>(
    ctx.em,
    `SELECT ${JOB_COLUMNS} FROM ${q}.app_export_jobs WHERE ${where.join(' AND ')} ORDER BY ${column} ${direction} NULLS LAST, id ${direction} LIMIT ? OFFSET ?`,
    [...params, request.pageSize, pageOffset(request)],
  );
  return { ...request, count, results: found.map(jobView) };
}

/** One export job of the app; 404 for another app's (or another site's) job. */
export async function getExportJob(ctx: ServiceContext, slug: string, uuid: string): Promise<ExportJobView> {
  const { schema, app } = await packageApp(ctx, slug);
  const row = isUuid(uuid)
    ? await firstRow<ExportJobRow>(ctx.em, `SELECT ${JOB_COLUMNS} FROM ${quotedSchema(schema)}.app_export_jobs WHERE app_id = ? AND uuid = ?`, [app.id, uuid])
    : undefined;
  if (!row) throw notFound(`Export job "${uuid}"`);
  return jobView(row);
}

/** How long an export may run before upkeep takes it for interrupted (a 2 GB export takes about a minute). */
export const EXPORT_GRACE_MS = 3600_000;

/**
 * Upkeep of one site's packages (the server's storage job): an export still `in_progress` after
 * the grace period was interrupted (its server stopped) and is marked failed; its spool files
 * under `tmpDir` and any bytes it stored go. A stored package no job names any more (a crash
 * between replacing the stored package and removing the one before) goes too. The running
 * exports' files are left alone. What was removed.
 */
export async function sweepPackages(em: EntityManager, store: SiteStore, schema: string, tmpDir: string, graceMs = EXPORT_GRACE_MS): Promise<{ interrupted: number; removed: number }> {
  const q = quotedSchema(schema);
  const interrupted = await rows<{ uuid: string }>(
    em,
    `UPDATE ${q}.app_export_jobs SET status = 'failed', error = 'The export was interrupted (its server stopped): export again.', completed_at = now()
      WHERE status = 'in_progress' AND started_at < now() - (? * interval '1 millisecond') RETURNING uuid`,
    [graceMs],
  );
  if (interrupted.length) {
    const spools = await readdir(tmpDir).catch(() => [] as string[]);
    for (const { uuid } of interrupted) {
      for (const name of spools) if (name.startsWith(`package-${uuid}.`)) await rm(path.join(tmpDir, name), { force: true });
    }
  }
  const jobs = await rows<{ uuid: string; package_key: string | null; status: JobStatus }>(em, `SELECT uuid, package_key, status FROM ${q}.app_export_jobs WHERE package_key IS NOT NULL OR status = 'in_progress'`);
  const named = new Set(jobs.map((j) => j.package_key));
  const running = new Set(jobs.filter((j) => j.status === 'in_progress').map((j) => j.uuid));
  const stray: string[] = [];
  for await (const key of store.list(PACKAGE_PREFIX)) {
    const job = /([0-9a-f-]{36})\.zip$/.exec(key)?.[1];
    if (!named.has(key) && !(job && running.has(job))) stray.push(key);
  }
  if (stray.length) await store.delete(stray);
  return { interrupted: interrupted.length, removed: stray.length };
}
