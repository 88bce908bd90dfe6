// App package import (spec Part 2 §2, §4 "Packages"; issue 32 items 2 and 4b; docs/app-packages.md
// "Import"): the package read and checked (reader.ts), the plan made (plan.ts: what would be
// created, updated, left unchanged or skipped), recorded as an import job. A dry run rehearses
// step 2 below in a transaction it rolls back (every service's checks run; no file is stored), so
// what it accepts the import accepts. An import then does exactly what the plan lists:
//   1. the files to create or replace are stored first, each through the bucket's inspection
//      (storeBlob: staged or journaled blobs, no object yet), a new bucket's under the uuid it will have;
//   2. every module is written in ONE database transaction, in dependency order (the app, roles,
//      data sources and tables with their migrations, secrets, functions, event subscriptions,
//      policies, buckets and their objects through ingestInTransaction), by the services of each
//      module with a context bound to that transaction (their checks and rules apply);
//   3. after the commit the staged blobs are published and the blobs the replaced objects held
//      removed; on a failure the stored blobs are removed and nothing else has changed.
// Caches: the services run without the process's caches (the transaction's uncommitted rows must
// never be cached); the commit's notifications drop what other requests cached.
import { randomUUID } from 'node:crypto';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import type { EntityManager } from '@mikro-orm/postgresql';
import { insertApp, restoreApp, updateApp } from '../apps/app.service.ts';
import { checkSettings, updateAppSettings } from '../apps/app-settings.service.ts';
import { createRole, updateRole } from '../apps/app-roles.service.ts';
import { createDataSource, getDataSource, updateDataSource } from '../apps/datasource.service.ts';
import { activeApp, findApp, type ActiveApp } from '../apps/lookup.ts';
import { isUuid, uniqueViolation } from '../common/slug.ts';
import { actorUuid, makeContext, type ServiceContext } from '../context.ts';
import { firstRow, iso, rows, type Timestamp } from '../db/sql.ts';
import { longOperation } from '../db/long-operations.ts';
import { createDataTable, materializeDataTable, updateDataTable } from '../data/datatable.service.ts';
import { foreignKeysOf } from '../data/table-schema.ts';
import { DomainError, fieldError, notFound, validationError } from '../errors.ts';
import { subscribe } from '../functions/events.service.ts';
import { createFunction, getFunction, updateFunction } from '../functions/function.service.ts';
import { importPolicies } from '../policies/policy.service.ts';
import type { SecretKeyring } from '../secrets/crypto.ts';
import { createSecret, updateSecret } from '../secrets/secret.service.ts';
import { createSecretType } from '../secrets/secret-type.service.ts';
import { dropBlobs } from '../storage/blobs.ts';
import type { BucketCreate } from '../storage/bucket.schemas.ts';
import { checkedBucket, findBucket, insertBucket, updateBucket, type BucketRow, type BucketTarget } from '../storage/bucket.service.ts';
import { admit, ingestInTransaction, publishBlobs, storeBlob, type StoredBlob } from '../storage/ingest.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import type { PackageDeps } from './export.service.ts';
import { SECRET_PLACEHOLDER, type Manifest, type ModuleName } from './layout.ts';
import { planImport, policyKey, withoutDataLoss, type ImportPlan } from './plan.ts';
import { readPackage, type BucketObject, type PackageContents } from './reader.ts';

export interface ImportDeps extends PackageDeps {
  keyring: SecretKeyring;
  /** The data directory (app settings' icons live there; an import never changes an icon). */
  dataDir: string;
}

export interface ImportOptions {
  /** Validate and plan only: nothing changes (the job is recorded). */
  dryRun: boolean;
  /** Check every digest (default true); the safety checks run either way. */
  validateChecksum: boolean;
}

/** A form field that is a boolean (`true`/`false`, `1`/`0`); absent or empty: the default. */
function formBoolean(fields: Record<string, unknown>, name: string, def: boolean): boolean {
  const v = fields[name];
  if (v === undefined || v === '') return def;
  if (v === true || v === 'true' || v === '1') return true;
  if (v === false || v === 'false' || v === '0') return false;
  throw fieldError(name, 'Must be a boolean (true or false).');
}

/** The import's form fields (spec Part 2 §4): `dry_run` (default false), `validate_checksum` (default true); another field is a 400 naming it. */
export function importOptions(fields: Record<string, unknown>): ImportOptions {
  const unknown = Object.keys(fields).filter((k) => k !== 'dry_run' && k !== 'validate_checksum');
  if (unknown.length) throw validationError(Object.fromEntries(unknown.map((k) => [k, ['Unknown field.']])));
  return { dryRun: formBoolean(fields, 'dry_run', false), validateChecksum: formBoolean(fields, 'validate_checksum', true) };
}

type JobStatus = 'in_progress' | 'completed' | 'failed';

interface ImportJobRow {
  id: number;
  uuid: string;
  app_slug: string;
  status: JobStatus;
  dry_run: boolean;
  manifest: Manifest | null;
  report: ImportReport | Record<string, never>;
  error: string | null;
  triggered_by: string | null;
  started_at: Timestamp;
  completed_at: Timestamp | null;
  created_at: Timestamp;
}

/** Per module: what was (or, in a dry run, would be) created and updated. */
export interface ModuleCounts {
  created: number;
  updated: number;
  unchanged: number;
  skipped: number;
}

/** What an import did (the dry run: would do): the plan, the counts, the warnings, the errors. */
export interface ImportReport {
  dry_run: boolean;
  app_slug: string;
  modules: Partial<Record<ModuleName, ModuleCounts>>;
  plan: ImportPlan;
  summary: string;
  warnings: string[];
  errors: string[];
}

export interface ImportJobView {
  id: number;
  uuid: string;
  app_slug: string;
  status: JobStatus;
  dry_run: boolean;
  triggered_by: string | null;
  started_at: string;
  completed_at: string | null;
  created_at: string;
  report: ImportReport | Record<string, never>;
  error_message: string | null;
}

const JOB_COLUMNS = 'id, uuid, app_slug, status, dry_run, manifest, report, error, triggered_by, started_at, completed_at, created_at';

const jobView = (r: ImportJobRow): ImportJobView => ({
  id: r.id,
  uuid: r.uuid,
  app_slug: r.app_slug,
  status: r.status,
  dry_run: r.dry_run,
  triggered_by: r.triggered_by,
  started_at: iso(r.started_at),
  completed_at: r.completed_at === null ? null : iso(r.completed_at),
  created_at: iso(r.created_at),
  report: r.report,
  error_message: r.error,
});

/** An importer may create apps or update them (site administrators); anyone else is refused before the upload is read. */
async function importerSchema(ctx: ServiceContext): Promise<string> {
  try {
    return await siteSchemaFor(ctx, 'update', 'App');
  } catch {
    return siteSchemaFor(ctx, 'create', 'App');
  }
}

/**
 * Imports the package at `file` into the caller's site (module comment). A refused package is a
 * 400 before anything is recorded; a failure while applying leaves the site as it was and the job
 * `failed` with the error (the error is thrown on).
 */
export async function importPackage(ctx: ServiceContext, deps: ImportDeps, file: string, options: ImportOptions): Promise<{ job: ImportJobView; report: ImportReport }> {
  const schema = await importerSchema(ctx);
  await mkdir(deps.tmpDir, { recursive: true });
  const contents = await readPackage(file, { validateChecksum: options.validateChecksum, tmpBase: path.join(deps.tmpDir, `import-${randomUUID()}`) });
  try {
    const plan = await planImport(ctx, deps.store.site(schema), contents);
    const q = quotedSchema(schema);
    const job = (await firstRow<ImportJobRow>(
      ctx.em,
      `INSERT INTO ${q}.app_import_jobs (app_slug, dry_run, manifest, triggered_by) VALUES (?, ?, ?, ?) RETURNING ${JOB_COLUMNS}`,
      [plan.app_slug, options.dryRun, JSON.stringify(contents.manifest), actorUuid(ctx)],
    ))!;
    const finish = async (status: JobStatus, report: ImportReport, error: string | null) =>
      jobView((await firstRow<ImportJobRow>(
        ctx.em,
        `UPDATE ${q}.app_import_jobs SET status = ?, report = ?, error = ?, completed_at = now() WHERE id = ? RETURNING ${JOB_COLUMNS}`,
        [status, JSON.stringify(report), error, job.id],
      ))!);
    const report = reportOf(plan, options.dryRun);
    try {
      await apply(ctx, deps, schema, contents, plan, options.dryRun);
    } catch (err) {
      // What the caller is told too; an unexpected failure's own text (SQL, paths) stays in the server's log.
      const message = err instanceof DomainError ? [err.message, ...(err.errors ? [JSON.stringify(err.errors)] : [])].join(' ') : 'An internal error occurred; nothing was imported.';
      await finish('failed', { ...report, errors: [message] }, message.slice(0, 2000)).catch(() => undefined);
      throw err;
    }
    return { job: await finish('completed', report, null), report };
  } finally {
    await contents.close();
  }
}

function reportOf(plan: ImportPlan, dryRun: boolean): ImportReport {
  const modules: ImportReport['modules'] = {};
  for (const [name, m] of Object.entries(plan.modules) as [ModuleName, NonNullable<ImportPlan['modules'][ModuleName]>][]) {
    modules[name] = { created: m.create.length, updated: m.update.length, unchanged: m.unchanged.length, skipped: m.skip.length };
  }
  return { dry_run: dryRun, app_slug: plan.app_slug, modules, plan, summary: plan.summary, warnings: plan.warnings, errors: [] };
}

/** Files stored at once while staging. */
const STAGING_PARALLEL = 4;

type Item = Record<string, unknown>;
const list = (file: unknown, key: string): Item[] => ((file as Item | undefined)?.[key] as Item[] | undefined) ?? [];
/** The plan's lists as sets (10,000 files: no list search per file). */
const planSets = new WeakMap<ImportPlan, Map<string, Set<string>>>();
function has(plan: ImportPlan, module: ModuleName, key: string, what: 'create' | 'update'): boolean {
  let sets = planSets.get(plan);
  if (!sets) planSets.set(plan, (sets = new Map()));
  let set = sets.get(`${module}:${what}`);
  if (!set) sets.set(`${module}:${what}`, (set = new Set(plan.modules[module]?.[what])));
  return set.has(key);
}
const changes = (plan: ImportPlan, module: ModuleName, key: string) => has(plan, module, key, 'create') || has(plan, module, key, 'update');

/** A staged file: the object it becomes, in which bucket, with which blob. */
interface Staged {
  bucket: string;
  object: BucketObject;
  blob: StoredBlob;
}

/** Thrown at the end of a dry run's transaction to roll it back. */
class Rehearsed extends Error {}

/**
 * The import's writes (module comment), or with `dryRun` their rehearsal: every module written in
 * the transaction exactly as the import would (so the services' checks run: a policy set that
 * does not compile, a refused migration, a function the limits refuse), each file admitted
 * against its bucket's rules as they will be (size, declared type; no byte stored), then rolled
 * back. What the rehearsal refuses, the import would refuse.
 */
async function apply(ctx: ServiceContext, deps: ImportDeps, schema: string, contents: PackageContents, plan: ImportPlan, dryRun: boolean): Promise<void> {
  const release = await longOperation(ctx);
  const staged: Staged[] = [];
  const stagingTargets = new Map<string, BucketTarget>();
  try {
    // 1. The files, stored first (outside the transaction), each inspected against its bucket's rules as the package sets them.
    const existingApp = plan.app_exists ? await findApp(ctx.em, schema, plan.app_slug, true) : undefined;
    // Each bucket checked before a byte is stored, by the bucket API's own rules; a document-library bucket is not made by an import.
    const buckets = new Map(list(contents.modules.storage, 'buckets').map((b) => [String(b.slug), checkedBucket(bucketInput(b))]));
    for (const [slug, input] of buckets) {
      if (input.storage_provider === 'doclib' && has(plan, 'storage', `bucket:${slug}`, 'create')) throw new DomainError('BAD_REQUEST', `Bucket "${slug}": an import does not create document-library buckets (create it, then import again).`);
    }
    const wanted = [...contents.buckets].flatMap(([slug, archive]) => archive.metadata.objects.filter((o) => changes(plan, 'storage', `${slug}/${o.path}`)).map((object) => ({ slug, object })));
    for (const slug of new Set(wanted.map((w) => w.slug))) stagingTargets.set(slug, await stagingTarget(ctx, schema, existingApp, plan.app_slug, slug, buckets.get(slug)!));
    if (!dryRun) await stageFiles(ctx, deps, contents, wanted, stagingTargets, staged);

    // 2. Every module in one transaction.
    const replaced: string[] = [];
    await ctx.em.fork().transactional(async (tx) => {
      // Imports of one app in one site, one at a time: the second finds what the first made (a conflict below).
      await tx.execute('SELECT pg_advisory_xact_lock(hashtext(?))', [`app-import:${schema}:${plan.app_slug}`]);
      const t = makeContext(tx as EntityManager, ctx.actor, ctx.tenant, { ability: ctx.ability, events: ctx.events });
      Object.assign(t, { grants: ctx.grants, sitePermissions: ctx.sitePermissions, statementTimeoutMs: ctx.statementTimeoutMs });
      const app = await applyModules(t, deps, schema, contents, plan);
      await createBuckets(t, schema, app, plan, buckets, stagingTargets);
      if (dryRun) {
        for (const { slug, object } of wanted) admit(await findBucket(t.em, schema, app, slug), object);
        throw new Rehearsed();
      }
      replaced.push(...(await placeObjects(t, schema, app, staged)));
    });
    // 3. The staged bytes into place; the bytes the replaced objects held removed.
    await publishBlobs(deps.store.site(schema), staged.map((s) => s.blob));
    if (replaced.length) await dropBlobs(ctx.em, deps.store.site(schema), schema, replaced);
  } catch (err) {
    if (err instanceof Rehearsed) return;
    await dropBlobs(ctx.em, deps.store.site(schema), schema, staged.map((s) => s.blob.blobKey));
    // Something the plan would create exists now: made meanwhile (another import, another client).
    const constraint = uniqueViolation(err);
    if (constraint !== undefined) throw new DomainError('CONFLICT', `The app "${plan.app_slug}" changed while the import was planned (${constraint || 'a unique key'}); nothing was imported: import again.`);
    throw err;
  } finally {
    release();
  }
}

/** Stores the files STAGING_PARALLEL at a time (the store's latency overlaps) into `staged`; the first failure stops the others. */
async function stageFiles(ctx: ServiceContext, deps: ImportDeps, contents: PackageContents, wanted: { slug: string; object: BucketObject }[], targets: Map<string, BucketTarget>, staged: Staged[]): Promise<void> {
  let next = 0;
  let failed = false;
  const stage = async () => {
    while (!failed && next < wanted.length) {
      const { slug, object } = wanted[next++]!;
      try {
        const blob = await storeBlob(ctx, deps.store, targets.get(slug)!, { body: await contents.buckets.get(slug)!.open(object), declaredType: object.mimetype, declaredSize: object.size, filename: object.filename });
        staged.push({ bucket: slug, object, blob });
      } catch (err) {
        failed = true;
        throw err;
      }
    }
  };
  const results = await Promise.allSettled(Array.from({ length: STAGING_PARALLEL }, stage));
  const failure = results.find((r): r is PromiseRejectedResult => r.status === 'rejected');
  if (failure) throw failure.reason;
}

/** Where a bucket's files are staged: the bucket as it is, or the one the import will create (its uuid chosen now), with the package's rules. */
async function stagingTarget(ctx: ServiceContext, schema: string, app: { id: number } | undefined, appSlug: string, slug: string, rules: BucketCreate): Promise<BucketTarget> {
  const existing = app ? await findBucket(ctx.em, schema, app, slug).catch(() => undefined) : undefined;
  const bucket = {
    ...(existing ?? { id: 0, uuid: randomUUID(), slug }),
    file_size_limit: rules.file_size_limit ?? existing?.file_size_limit ?? Number.MAX_SAFE_INTEGER,
    allowed_mime_types: rules.allowed_mime_types ?? existing?.allowed_mime_types ?? [],
  } as BucketRow;
  return { schema, app: { id: app?.id ?? 0, name: '', slug: appSlug }, bucket };
}

/** A bucket of the package as the bucket API's creation body. */
const bucketInput = (b: Item) => ({
  name: b.name,
  app_category: 'assets',
  visibility: b.visibility,
  storage_provider: b.storage_provider,
  file_size_limit: b.file_size_limit,
  allowed_mime_types: b.allowed_mime_types,
  max_size_bytes: b.max_size_bytes,
  max_objects: b.max_objects,
});

/** Tables in an order where each one's foreign-key targets (in the package) come first. */
function tableOrder(tables: Item[]): Item[] {
  const byName = new Map(tables.map((t) => [String(t.name), t]));
  const done = new Set<string>();
  const out: Item[] = [];
  const visit = (t: Item, path: Set<string>) => {
    const name = String(t.name);
    if (done.has(name) || path.has(name)) return;
    path.add(name);
    for (const fk of foreignKeysOf(t.json_schema as never)) {
      const target = byName.get(fk.reference.resource);
      if (target) visit(target, path);
    }
    done.add(name);
    out.push(t);
  };
  for (const t of tables) visit(t, new Set());
  return out;
}

/** Every module but the objects, in dependency order; the app. */
async function applyModules(t: ServiceContext, deps: ImportDeps, schema: string, contents: PackageContents, plan: ImportPlan): Promise<ActiveApp> {
  const m = contents.modules;
  const slug = plan.app_slug;
  const who = actorUuid(t);

  // The app: created with the package's slug, or updated (and restored when it was deleted).
  const appFile = m.app as Item;
  const settings = checkSettings(appFile.settings ?? {});
  if (!plan.app_exists) {
    await insertApp(t.em, schema, { name: String(appFile.name), slug, description: String(appFile.description ?? '') }, settings, who);
  } else {
    const found = (await findApp(t.em, schema, slug, true))!;
    if (!found.is_active) await restoreApp(t, slug);
    if (has(plan, 'app', slug, 'update')) {
      await updateApp(t, slug, { name: appFile.name, description: appFile.description });
      await updateAppSettings(t, { dataDir: deps.dataDir }, slug, settings);
    }
  }
  const app = await activeApp(t.em, schema, slug);

  // Roles by name: created without a parent first, then every changed one gets its parent (a parent may come later in the list).
  const roles = list(m.app_roles, 'roles');
  for (const r of roles) if (has(plan, 'app_roles', String(r.name), 'create')) await createRole(t, slug, { name: r.name, description: r.description ?? '' });
  for (const r of roles) if (changes(plan, 'app_roles', String(r.name))) await updateRole(t, slug, String(r.name), { description: r.description ?? '', parent_name: r.parent_name ?? null });

  // Data sources by slug, then tables by name (foreign-key targets first), materialized as in the package.
  for (const d of list(m.datatables, 'data_sources')) {
    const body = { name: d.name, provider_config: d.provider_config ?? {}, description: d.description ?? '' };
    if (has(plan, 'datatables', `data_source:${d.slug}`, 'create')) await createDataSource(t, slug, { ...body, slug: d.slug, provider_type: d.provider_type });
    else if (has(plan, 'datatables', `data_source:${d.slug}`, 'update')) {
      // The site's own allow_data_loss stays as it is: a package never lets a production table lose data.
      const own = (await getDataSource(t, slug, String(d.slug))).provider_config.allow_data_loss;
      const config = withoutDataLoss(d).provider_config as Item;
      await updateDataSource(t, slug, String(d.slug), { ...body, provider_config: own === undefined || own === null ? config : { ...config, allow_data_loss: own } });
    }
  }
  for (const table of tableOrder(list(m.datatables, 'tables'))) {
    const name = String(table.name);
    const scope = { app_slug: slug, ds: String(table.data_source) };
    const body = { description: table.description ?? '', json_schema: table.json_schema };
    let now: { is_materialized: boolean };
    if (has(plan, 'datatables', name, 'create')) now = await createDataTable(t, scope, { name, ...body });
    else if (has(plan, 'datatables', name, 'update')) now = await updateDataTable(t, { app_slug: slug }, name, body);
    else continue;
    if (table.is_materialized === true && !now.is_materialized) await materializeDataTable(t, { app_slug: slug }, name);
  }

  // Secrets: the site's missing types, then the app's secrets; a value is never overwritten, a new secret holds the placeholder.
  for (const type of list(m.secrets, 'secret_types')) {
    if (has(plan, 'secrets', `secret_type:${type.slug}`, 'create')) await createSecretType(t, { slug: type.slug, name: type.name, description: type.description ?? '', json_schema: type.json_schema ?? {} });
  }
  for (const s of list(m.secrets, 'secrets')) {
    const key = String(s.key);
    if (has(plan, 'secrets', key, 'create')) {
      await createSecret(t, deps.keyring, { key, value: SECRET_PLACEHOLDER, app: slug, description: s.description ?? '' });
      // The type is set beside the value's check: the placeholder stands in until the value is set.
      if (s.secret_type) await t.em.execute(`UPDATE ${quotedSchema(schema)}.secrets SET secret_type_uuid = (SELECT uuid FROM ${quotedSchema(schema)}.secret_types WHERE slug = ?) WHERE key = ? AND app_slug = ?`, [s.secret_type, key, slug]);
    } else if (has(plan, 'secrets', key, 'update')) {
      await updateSecret(t, deps.keyring, key, { app: slug }, { description: s.description ?? '', secret_type: s.secret_type ?? null });
    }
  }

  // Functions by slug (their environment names the secrets above), then event subscriptions by function slug.
  for (const f of list(m.functions, 'functions')) {
    const body = { name: f.name, description: f.description ?? '', runtime: f.runtime, code: f.code, timeout: f.timeout, environment: f.environment ?? {}, is_active: f.is_active };
    if (has(plan, 'functions', String(f.slug), 'create')) await createFunction(t, slug, { ...body, slug: f.slug });
    else if (has(plan, 'functions', String(f.slug), 'update')) await updateFunction(t, slug, String(f.slug), body);
  }
  for (const e of list(m.events, 'subscriptions')) {
    if (!has(plan, 'events', `${e.event}:${e.function_slug}`, 'create')) continue;
    await subscribe(t, String(e.event), { function_id: (await getFunction(t, slug, String(e.function_slug))).id });
  }

  // Policies: every created or changed one in one write (the app's set must compile as a whole).
  const policies = list(m.policies, 'policies');
  const changed = new Set(plan.policies_changed);
  await importPolicies(t, slug, policies.filter((p) => changed.has(policyKey(p))));

  // Buckets changed by the package (new ones and the objects follow: createBuckets, placeObjects).
  for (const b of list(m.storage, 'buckets')) if (has(plan, 'storage', `bucket:${b.slug}`, 'update')) await updateBucket(t, slug, String(b.slug), bucketInput(b));
  return app;
}

/** Creates the buckets the package adds (a staged one with the uuid its files were stored under). */
async function createBuckets(t: ServiceContext, schema: string, app: ActiveApp, plan: ImportPlan, buckets: Map<string, BucketCreate>, targets: Map<string, BucketTarget>): Promise<void> {
  for (const [slug, input] of buckets) {
    if (!has(plan, 'storage', `bucket:${slug}`, 'create')) continue;
    await authorizeSiteSubject(t, 'create', 'Bucket', { schema, app: app.slug });
    await insertBucket(t.em, schema, app.id, input, { slug, who: actorUuid(t), uuid: targets.get(slug)?.bucket.uuid });
  }
}

/** The staged files placed as objects (created or replaced); the blobs the replaced objects held. */
async function placeObjects(t: ServiceContext, schema: string, app: ActiveApp, staged: Staged[]): Promise<string[]> {
  const who = actorUuid(t);
  const replaced: string[] = [];
  const buckets = new Map<string, BucketTarget>();
  for (const s of staged) {
    let dst = buckets.get(s.bucket);
    if (!dst) {
      dst = { schema, app, bucket: await findBucket(t.em, schema, app, s.bucket) };
      buckets.set(s.bucket, dst);
    }
    const visibility = s.object.visibility === 'public' || s.object.visibility === 'private' ? s.object.visibility : null;
    // The importer may update the app (checked by the plan): the app's own bytes come back as they were exported.
    const placed = await ingestInTransaction(t.em, dst, s.object.path, { blob: s.blob, metadata: s.object.metadata ?? {}, visibility, who }, async () => undefined);
    if (placed.old) replaced.push(placed.old);
  }
  return replaced;
}

/** The import jobs of the caller's site, newest first (at most 100). */
export async function listImportJobs(ctx: ServiceContext): Promise<ImportJobView[]> {
  const schema = await importerSchema(ctx);
  return (await rows<ImportJobRow>(ctx.em, `SELECT ${JOB_COLUMNS} FROM ${quotedSchema(schema)}.app_import_jobs ORDER BY created_at DESC, id DESC LIMIT 100`)).map(jobView);
}

/** One import job of the caller's site (404 for another site's). */
export async function getImportJob(ctx: ServiceContext, uuid: string): Promise<ImportJobView & { manifest: Manifest | null }> {
  const schema = await importerSchema(ctx);
  const row = isUuid(uuid) ? await firstRow<ImportJobRow>(ctx.em, `SELECT ${JOB_COLUMNS} FROM ${quotedSchema(schema)}.app_import_jobs WHERE uuid = ?`, [uuid]) : undefined;
  if (!row) throw notFound(`Import job "${uuid}"`);
  return { ...jobView(row), manifest: row.manifest };
}
