// Frontend workers (spec Part 3 §4; docs/frontend-workers.md): static sites of a site, served
// at `{prefix}{subdomain}.{base}` (internal) or `{prefix}{subdomain}.{customer domain}`
// (external: a domain the site has verified), with their builds. The worker and its builds live
// in the site's schema; its host in `public.worker_hosts`, one namespace with the sites'
// domains (platform migration 0010: a trigger refuses a host the other table holds). Every
// change of what a host serves (a worker, its address, its active build) notifies `routing`, so
// every process's host cache drops at commit: an activation is one row update, atomic for every
// request (a request resolves its build once; blobs are immutable).
// Site administrators manage workers (CASL subject FrontendWorker); what a worker serves is public.
import { platformEm } from '../db/clusters.ts';
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { PageParams, pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { likeEscape } from '../common/filters.ts';
import { insertWithUniqueSlug, uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import type { Config } from '../config.ts';
import { actorUuid, readsOf, type ServiceContext } from '../context.ts';
import { longOperation } from '../db/long-operations.ts';
import { firstRow, iso, rows, type Timestamp } from '../db/sql.ts';
import { DomainError, fieldError, notFound } from '../errors.ts';
import type { ObjectStore } from '../storage/objstore/types.ts';
import { notifyRoutingChanged } from '../tenancy/host-resolver.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteSchemaFor } from '../tenancy/site-access.ts';
import { DEFAULT_ARCHIVE_LIMITS, type ArchiveLimits } from './archive.ts';
import { collectWorkerBlobs, deployArchive, missingBlobs, parseBuildManifest, type Deployed } from './deploy.ts';
import { checkExternalDomain, checkSubdomain, previewHost, suggestSubdomains, workerHost, workerSlugOf, workerUrl, type WorkerAddress } from './hostnames.ts';
import { subdomainFromName } from './names.ts';
import { Availability, AvailabilityQuery, BuildUpload, MissingQuery, WorkerCreate, WorkerListQuery, WorkerUpdate, type BuildView, type WorkerListItem, type WorkerView } from './worker.schemas.ts';
import { Type, type Static } from '@sinclair/typebox';

const PageQuery = Type.Object(PageParams);

export type WorkerSettings = Pick<Config, 'environment' | 'baseDomain' | 'platformHosts' | 'publicUrl' | 'port'>;

export interface WorkerDeps {
  store: ObjectStore;
  settings: WorkerSettings;
  /** Archive limits (archive.ts defaults otherwise). */
  limits?: Partial<ArchiveLimits>;
  /** Builds kept per worker after an upload, the newest (0: all); never the active one. */
  keepBuilds?: number;
}

/** An uploaded archive, on disk for the request's time. */
export interface ArchiveUpload {
  path: string;
  filename: string;
}

interface WorkerRow {
  id: number;
  uuid: string;
  slug: string;
  name: string;
  subdomain: string;
  is_internal: boolean;
  domain: string | null;
  host: string;
  app_id: number | null;
  app_name: string | null;
  spa_fallback: boolean;
  active_build_uuid: string | null;
  created_by: string | null;
  modified_by: string | null;
  created_at: Timestamp;
  updated_at: Timestamp;
}

interface BuildRow {
  uuid: string;
  worker_id: number;
  title: string;
  status: 'uploading' | 'ready' | 'failed';
  size: string;
  file_count: number;
  stored_files: number;
  error: string | null;
  created_by: string | null;
  created_at: Timestamp;
  ready_at: Timestamp | null;
}

const select = (q: string) => `SELECT w.*, a.name AS app_name FROM ${q}.frontend_workers w LEFT JOIN ${q}.apps a ON a.id = w.app_id`;
const BUILD_COLUMNS = 'uuid, worker_id, title, status, size, file_count, stored_files, error, created_by, created_at, ready_at';

/** A worker host's address: the API's public URL (PLATFORM_PUBLIC_URL, else http on PORT) gives an internal worker's scheme and port. */
const webUrl = (host: string, isInternal: boolean, s: WorkerSettings): string => workerUrl(host, isInternal, s.publicUrl ?? `http://localhost:${s.port}`);

const address = (w: Pick<WorkerRow, 'subdomain' | 'is_internal' | 'domain'>): WorkerAddress => ({ subdomain: w.subdomain, isInternal: w.is_internal, domain: w.domain });

const listItem = (w: WorkerRow, s: WorkerSettings): WorkerListItem => ({
  slug: w.slug,
  name: w.name,
  subdomain: w.subdomain,
  web_url: webUrl(w.host, w.is_internal, s),
  active_build_uuid: w.active_build_uuid,
  app_name: w.app_name,
});

export function workerView(w: WorkerRow, s: WorkerSettings): WorkerView {
  return {
    id: Number(w.id),
    uuid: w.uuid,
    ...listItem(w, s),
    is_internal: w.is_internal,
    domain: w.domain,
    full_domain: w.host,
    app: w.app_id === null ? null : Number(w.app_id),
    spa_fallback: w.spa_fallback,
    created_at: iso(w.created_at),
    updated_at: iso(w.updated_at),
    created_by: w.created_by,
    modified_by: w.modified_by,
  };
}

function buildView(b: BuildRow, w: WorkerRow, s: WorkerSettings): BuildView {
  return {
    uuid: b.uuid,
    title: b.title,
    status: b.status,
    is_active: w.active_build_uuid === b.uuid,
    size: Number(b.size),
    file_count: Number(b.file_count),
    stored_files: Number(b.stored_files),
    preview_url: b.status === 'ready' ? webUrl(previewHost(b.uuid, address(w), s.environment, s.baseDomain), w.is_internal, s) : null,
    error: b.error,
    created_by: b.created_by,
    created_at: iso(b.created_at),
    ready_at: b.ready_at === null ? null : iso(b.ready_at),
  };
}

/** Rule 6: a build's title from the archive's name (`shop-v2.tar.gz` → `shop-v2`), else the time. */
export function titleFromFilename(filename: string): string {
  const base = filename.replace(/^.*[\\/]/, '').replace(/\.(zip|tar|tar\.gz|tgz)$/i, '').trim();
  return (base || `Build ${new Date().toISOString()}`).slice(0, 255);
}

async function findWorker(em: EntityManager, schema: string, slug: string): Promise<WorkerRow | undefined> {
  return firstRow<WorkerRow>(em, `${select(quotedSchema(schema))} WHERE w.slug = ?`, [slug]);
}

/** The worker `slug` of the caller's site, if the caller may `action` it (a non-administrator gets 403 before any lookup). */
async function workerFor(ctx: ServiceContext, slug: string, action: 'read' | 'update' | 'delete'): Promise<{ schema: string; worker: WorkerRow }> {
  const schema = await siteSchemaFor(ctx, action, 'FrontendWorker');
  const worker = await findWorker(readsOf(ctx), schema, slug);
  if (!worker) throw notFound(`Frontend worker "${slug}"`);
  await authorizeSiteSubject(ctx, action, 'FrontendWorker', { schema, slug });
  return { schema, worker };
}

// ---------------------------------------------------------------- addresses

/** Of these hosts, those held: by a worker (with its site), a domain (its site), or the platform API itself (PLATFORM_HOSTS: no site). */
async function holders(em: EntityManager, hosts: string[], s: WorkerSettings): Promise<Map<string, { site_uuid: string | null; worker_uuid: string | null }>> {
  const found = await rows<{ host: string; site_uuid: string; worker_uuid: string | null }>(
    platformEm(em),
    `SELECT host, site_uuid, worker_uuid FROM public.worker_hosts WHERE host IN (SELECT jsonb_array_elements_text(?::jsonb))
     UNION ALL SELECT domain, site_uuid, NULL FROM public.domains WHERE domain IN (SELECT jsonb_array_elements_text(?::jsonb))`,
    [JSON.stringify(hosts), JSON.stringify(hosts)],
  );
  const held = new Map<string, { site_uuid: string | null; worker_uuid: string | null }>(found.map((r) => [r.host, r]));
  for (const host of hosts) if (s.platformHosts.includes(host)) held.set(host, { site_uuid: null, worker_uuid: null });
  return held;
}

/** A host's unique violation (the worker_hosts trigger refuses a domain's host too): the 400 saying it is taken. */
const takenHostError = (err: unknown, field: string, host: string): unknown => {
  const constraint = uniqueViolation(err);
  return constraint === 'worker_hosts_pkey' || constraint === 'frontend_workers_host_key' ? hostTaken(field, host) : err;
};

async function siteOf(em: EntityManager, schema: string): Promise<{ uuid: string; name: string; slug: string }> {
  return (await firstRow<{ uuid: string; name: string; slug: string }>(platformEm(em), 'SELECT uuid, name, slug FROM public.sites WHERE schema_name = ?', [schema]))!;
}

/** The worker's address from a form: rules 2–5 (the domain of an external worker must be one the site has verified). */
async function addressOf(em: EntityManager, siteUuid: string, input: { subdomain: string; field: string; is_internal?: boolean; domain?: string }, s: WorkerSettings, verified = true): Promise<WorkerAddress> {
  const subdomain = checkSubdomain(input.subdomain, s.environment, input.field);
  const isInternal = input.is_internal ?? true;
  if (isInternal) {
    if (input.domain) throw fieldError('domain', `An internal worker is served under ${s.baseDomain}: leave domain out, or set is_internal to false.`);
    return { subdomain, isInternal, domain: null };
  }
  if (!input.domain) throw fieldError('domain', 'This field is required when is_internal is false.');
  const domain = checkExternalDomain(input.domain, s.baseDomain, s.platformHosts);
  if (verified) {
    const proven = await firstRow(platformEm(em), 'SELECT 1 FROM public.domains WHERE site_uuid = ? AND domain = ? AND verified_at IS NOT NULL', [siteUuid, domain]);
    if (!proven) throw fieldError('domain', `"${domain}" is not a verified domain of this site: add it (POST /api/cloud/sites/{site}/domains/) and verify it by its DNS TXT record first.`);
  }
  return { subdomain, isInternal: false, domain };
}

/** GET check-subdomain-availability/: whether the address is free; when it is not, who holds it (a worker of this site) and up to 5 free suggestions. */
export async function checkAvailability(ctx: ServiceContext, deps: WorkerDeps, raw: unknown): Promise<Static<typeof Availability>> {
  const query = validate(AvailabilityQuery, raw, 'query');
  const schema = await siteSchemaFor(ctx, 'read', 'FrontendWorker');
  const em = readsOf(ctx);
  const s = deps.settings;
  const site = await siteOf(em, schema);
  const a = await addressOf(em, site.uuid, { subdomain: query.subdomain, field: 'subdomain', is_internal: query.is_internal, domain: query.domain }, s, false);
  const host = workerHost(a, s.environment, s.baseDomain);
  const excluded = query.exclude_slug ? await findWorker(em, schema, query.exclude_slug) : undefined;
  const holder = excluded?.host === host ? undefined : (await holders(em, [host], s)).get(host);
  const base = { subdomain: a.subdomain, full_domain: host, domain: a.domain ?? s.baseDomain, is_internal: a.isInternal };
  if (!holder) return { ...base, available: true, message: `${host} is available.` };
  const mine = holder.worker_uuid && holder.site_uuid === site.uuid ? await firstRow<{ slug: string; name: string }>(em, `SELECT slug, name FROM ${quotedSchema(schema)}.frontend_workers WHERE uuid = ?`, [holder.worker_uuid]) : undefined;
  const free = async (hosts: string[]) => {
    const held = await holders(em, hosts, s);
    return new Set(hosts.filter((h) => !held.has(h)));
  };
  const suggestions = await suggestSubdomains({ subdomain: a.subdomain, tenantName: site.name, year: new Date().getFullYear(), address: { isInternal: a.isInternal, domain: a.domain } }, s.environment, s.baseDomain, free);
  return {
    ...base,
    available: false,
    message: `${host} is taken.`,
    ...(mine && { conflicts_with: { worker_slug: mine.slug, worker_name: mine.name } }),
    suggestions,
  };
}

// ---------------------------------------------------------------- workers

export async function listWorkers(ctx: ServiceContext, deps: WorkerDeps, raw: unknown): Promise<Page<WorkerListItem>> {
  const query = validate(WorkerListQuery, raw, 'query');
  const schema = await siteSchemaFor(ctx, 'read', 'FrontendWorker');
  const where: string[] = [];
  const params: unknown[] = [];
  if (query.search) {
    where.push("w.name ILIKE ? ESCAPE '\\'");
    params.push(`%${likeEscape(query.search)}%`);
  }
  if (query.app !== undefined) {
    where.push('w.app_id = ?');
    params.push(query.app);
  }
  const order = query.ordering ?? '-created_at';
  const column = order.replace('-', '') === 'updated_at' ? 'w.updated_at' : 'w.created_at';
  const dir = order.startsWith('-') ? 'DESC' : 'ASC';
  const cond = where.length ? ` WHERE ${where.join(' AND ')}` : '';
  const em = readsOf(ctx);
  const [{ n }] = await rows<{ n: number }>(em, `SELECT count(*)::int AS n FROM ${quotedSchema(schema)}.frontend_workers w${cond}`, params);
  const page = resolvePage(parsePageRequest(query), n);
  const found = await rows<WorkerRow>(em, `${select(quotedSchema(schema))}${cond} ORDER BY ${column} ${dir}, w.id ${dir} LIMIT ? OFFSET ?`, [...params, page.pageSize, pageOffset(page)]);
  return { ...page, count: n, results: found.map((w) => listItem(w, deps.settings)) };
}

export async function getWorker(ctx: ServiceContext, deps: WorkerDeps, slug: string): Promise<WorkerView> {
  return workerView((await workerFor(ctx, slug, 'read')).worker, deps.settings);
}

async function appOf(em: EntityManager, schema: string, id: number | null | undefined): Promise<number | null> {
  if (id === undefined || id === null) return null;
  const app = await firstRow<{ id: number }>(em, `SELECT id FROM ${quotedSchema(schema)}.apps WHERE id = ?`, [id]);
  if (!app) throw fieldError('app', `No app with id ${id} in this site.`);
  return Number(app.id);
}

const hostTaken = (field: string, host: string) => fieldError(field, `${host} is taken: choose another subdomain (GET check-subdomain-availability/ suggests free ones).`);

/** Runs a deploy in a long-operation slot of the site (deploys compete with imports and migrations, never with requests). */
async function deploy(ctx: ServiceContext, deps: WorkerDeps, schema: string, file: ArchiveUpload | undefined, started: () => Promise<void>, manifest?: Map<string, string>): Promise<Deployed> {
  const release = await longOperation(ctx);
  try {
    return await deployArchive(ctx.em, deps.store.site(schema), schema, file, started, deps.limits, manifest);
  } finally {
    release();
  }
}

async function insertBuild(tx: EntityManager, q: string, b: { uuid: string; workerId: number; title: string; who: string | null; deployed?: Deployed }): Promise<void> {
  const d = b.deployed;
  await tx.execute(
    `INSERT INTO ${q}.frontend_worker_builds (uuid, worker_id, title, status, size, file_count, stored_files, manifest, created_by, ready_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ${d ? 'now()' : 'NULL'})`,
    [b.uuid, b.workerId, b.title, d ? 'ready' : 'uploading', d?.size ?? 0, d?.fileCount ?? 0, d?.storedFiles ?? 0, d ? JSON.stringify(d.manifest) : null, b.who],
  );
}

/**
 * POST /api/frontend_workers/: the worker, and its first build when a file comes (rule 7:
 * active with set_active). The archive is deployed before any row is written: a refused archive
 * leaves nothing; the worker, its host and its build then come in one transaction.
 */
export async function createWorker(ctx: ServiceContext, deps: WorkerDeps, fields: Record<string, unknown>, file?: ArchiveUpload): Promise<WorkerView & { build: BuildView | null }> {
  const input = validate(WorkerCreate, fields, 'query');
  const schema = await siteSchemaFor(ctx, 'create', 'FrontendWorker');
  const name = input.name.trim();
  if (!name) throw fieldError('name', 'This field may not be blank.');
  if (input.set_active && !file) throw fieldError('set_active', 'set_active needs a file: upload an archive with it.');
  const s = deps.settings;
  const em = readsOf(ctx);
  const site = await siteOf(em, schema);
  const a = await addressOf(em, site.uuid, { subdomain: input.subdomain_input ?? subdomainFromName(name), field: 'subdomain_input', is_internal: input.is_internal, domain: input.domain }, s);
  const host = workerHost(a, s.environment, s.baseDomain);
  const appId = await appOf(em, schema, input.app);
  // Taken before any deploy work (the trigger would refuse it at the insert anyway).
  if ((await holders(em, [host], s)).size) throw hostTaken('subdomain_input', host);
  await authorizeSiteSubject(ctx, 'create', 'FrontendWorker', { schema, slug: workerSlugOf(a.subdomain) });
  const deployed = file ? await deploy(ctx, deps, schema, file, async () => undefined) : undefined;
  const q = quotedSchema(schema);
  const who = actorUuid(ctx);
  const uuid = randomUUID();
  const buildUuid = randomUUID();
  // A slug stays with its worker when the subdomain changes: a new worker on a freed subdomain takes `{subdomain}-2`;
  // `check-subdomain-availability` is a path of its own (GET /api/frontend_workers/check-subdomain-availability/).
  const taken = async (base: string) => [
    'check-subdomain-availability',
    ...(await rows<{ slug: string }>(ctx.em, `SELECT slug FROM ${q}.frontend_workers WHERE slug = ? OR slug LIKE ?`, [base, `${likeEscape(base)}-%`])).map((r) => r.slug),
  ];
  const insert = (slug: string) =>
    ctx.em.transactional(async (tx) => {
      const t = tx as EntityManager;
      const [row] = await t.execute(
        `INSERT INTO ${q}.frontend_workers (uuid, slug, name, subdomain, is_internal, domain, host, app_id, spa_fallback, created_by, modified_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
        [uuid, slug, name, a.subdomain, a.isInternal, a.domain, host, appId, input.spa_fallback ?? true, who, who],
      );
      await platformEm(t).execute('INSERT INTO public.worker_hosts (host, site_uuid, worker_uuid) VALUES (?, ?, ?)', [host, site.uuid, uuid]);
      if (deployed) {
        await insertBuild(t, q, { uuid: buildUuid, workerId: Number(row.id), title: input.build_title?.trim() || titleFromFilename(file!.filename), who, deployed });
        if (input.set_active) await t.execute(`UPDATE ${q}.frontend_workers SET active_build_uuid = ? WHERE id = ?`, [buildUuid, row.id]);
      }
      await notifyRoutingChanged(t);
    });
  await insertWithUniqueSlug(workerSlugOf(a.subdomain), 'frontend_workers_slug_key', taken, insert, 20).catch((err: unknown) => {
    throw takenHostError(err, 'subdomain_input', host);
  });
  const worker = (await firstRow<WorkerRow>(ctx.em, `${select(q)} WHERE w.uuid = ?`, [uuid]))!;
  const build = deployed ? (await firstRow<BuildRow>(ctx.em, `SELECT ${BUILD_COLUMNS} FROM ${q}.frontend_worker_builds WHERE uuid = ?`, [buildUuid]))! : undefined;
  return { ...workerView(worker, s), build: build ? buildView(build, worker, s) : null };
}

/** PATCH (and PUT with GET's body): name, app, spa_fallback, and `subdomain_input` — a new address in one transaction (the slug stays; builds are keyed by uuid, so nothing moves). */
export async function updateWorker(ctx: ServiceContext, deps: WorkerDeps, slug: string, raw: unknown): Promise<WorkerView> {
  const input = validate(WorkerUpdate, raw) as Static<typeof WorkerUpdate>;
  const { schema, worker } = await workerFor(ctx, slug, 'update');
  const s = deps.settings;
  dropReadOnly(WorkerUpdate, input, workerView(worker, s));
  const q = quotedSchema(schema);
  const em = readsOf(ctx);
  const wanted = input.subdomain_input ?? (input.subdomain !== undefined && input.subdomain !== worker.subdomain ? input.subdomain : undefined);
  const field = input.subdomain_input !== undefined ? 'subdomain_input' : 'subdomain';
  const subdomain = wanted === undefined ? worker.subdomain : checkSubdomain(wanted, s.environment, field);
  const host = workerHost({ ...address(worker), subdomain }, s.environment, s.baseDomain);
  if (input.name !== undefined && !input.name.trim()) throw fieldError('name', 'This field may not be blank.');
  const appId = input.app === undefined ? worker.app_id : await appOf(em, schema, input.app);
  if (host !== worker.host && s.platformHosts.includes(host)) throw hostTaken(field, host);
  try {
    await ctx.em.transactional(async (tx) => {
      const t = tx as EntityManager;
      if (host !== worker.host) await platformEm(t).execute('UPDATE public.worker_hosts SET host = ? WHERE worker_uuid = ?', [host, worker.uuid]);
      await t.execute(
        `UPDATE ${q}.frontend_workers SET name = ?, subdomain = ?, host = ?, app_id = ?, spa_fallback = ?, modified_by = ?, updated_at = now() WHERE id = ?`,
        [input.name?.trim() ?? worker.name, subdomain, host, appId, input.spa_fallback ?? worker.spa_fallback, actorUuid(ctx), worker.id],
      );
      // A worker moved to another app (or none) is no longer the default of the one it left.
      await t.execute(`UPDATE ${q}.app_settings SET default_frontend_worker = NULL WHERE default_frontend_worker = ? AND app_id IS DISTINCT FROM ?`, [worker.id, appId]);
      await notifyRoutingChanged(t);
    });
  } catch (err) {
    throw takenHostError(err, field, host);
  }
  return workerView((await findWorker(ctx.em, schema, slug))!, s);
}

/** DELETE: the worker, its builds and its host at once (an app's default_frontend_worker clears: the foreign key); then its blobs no other build holds. */
export async function deleteWorker(ctx: ServiceContext, deps: WorkerDeps, slug: string): Promise<void> {
  const { schema, worker } = await workerFor(ctx, slug, 'delete');
  await ctx.em.transactional(async (tx) => {
    const t = tx as EntityManager;
    await t.execute(`DELETE FROM ${quotedSchema(schema)}.frontend_workers WHERE id = ?`, [worker.id]);
    await platformEm(t).execute('DELETE FROM public.worker_hosts WHERE worker_uuid = ?', [worker.uuid]);
    await notifyRoutingChanged(t);
  });
  await collectWorkerBlobs(ctx.em, deps.store.site(schema), schema);
}

// ---------------------------------------------------------------- builds

export async function listBuilds(ctx: ServiceContext, deps: WorkerDeps, slug: string, raw: unknown): Promise<Page<BuildView>> {
  const request = parsePageRequest(validate(PageQuery, raw, 'query'));
  const { schema, worker } = await workerFor(ctx, slug, 'read');
  const q = quotedSchema(schema);
  const em = readsOf(ctx);
  const [{ n }] = await rows<{ n: number }>(em, `SELECT count(*)::int AS n FROM ${q}.frontend_worker_builds WHERE worker_id = ?`, [worker.id]);
  const p = resolvePage(request, n);
  const found = await rows<BuildRow>(em, `SELECT ${BUILD_COLUMNS} FROM ${q}.frontend_worker_builds WHERE worker_id = ? ORDER BY created_at DESC, uuid LIMIT ? OFFSET ?`, [worker.id, p.pageSize, pageOffset(p)]);
  return { ...p, count: n, results: found.map((b) => buildView(b, worker, deps.settings)) };
}

/** The worker's build `ref` (its uuid), or 404; `forShare`: locked for the caller's transaction. */
async function buildOf(em: EntityManager, schema: string, worker: WorkerRow, ref: string, forShare = false): Promise<BuildRow> {
  const build = /^[0-9a-f-]{36}$/i.test(ref)
    ? await firstRow<BuildRow>(em, `SELECT ${BUILD_COLUMNS} FROM ${quotedSchema(schema)}.frontend_worker_builds WHERE worker_id = ? AND uuid = ?${forShare ? ' FOR SHARE' : ''}`, [worker.id, ref.toLowerCase()])
    : undefined;
  if (!build) throw notFound(`Build "${ref}"`);
  return build;
}

export async function getBuild(ctx: ServiceContext, deps: WorkerDeps, slug: string, ref: string): Promise<BuildView> {
  const { schema, worker } = await workerFor(ctx, slug, 'read');
  return buildView(await buildOf(readsOf(ctx), schema, worker, ref), worker, deps.settings);
}

/**
 * POST {slug}/builds/: a new build from an archive. Its row comes once every entry of the archive
 * has been checked (`uploading`), then `ready`, or `failed` with the reason; with set_active it
 * becomes the active build when ready.
 */
export async function uploadBuild(ctx: ServiceContext, deps: WorkerDeps, slug: string, fields: Record<string, unknown>, file?: ArchiveUpload): Promise<BuildView> {
  const input = validate(BuildUpload, fields, 'query');
  const { schema, worker } = await workerFor(ctx, slug, 'update');
  const manifest = input.manifest === undefined ? undefined : parseBuildManifest(input.manifest, deps.limits?.maxFiles ?? DEFAULT_ARCHIVE_LIMITS.maxFiles);
  if (!file && !manifest) throw fieldError('file', 'Upload an archive (.zip, .tar, .tar.gz or .tgz) of the built site.');
  const q = quotedSchema(schema);
  const uuid = randomUUID();
  let begun = false;
  let deployed: Deployed;
  try {
    deployed = await deploy(ctx, deps, schema, file, async () => {
      await insertBuild(ctx.em, q, { uuid, workerId: worker.id, title: input.build_title?.trim() || (file ? titleFromFilename(file.filename) : `Build ${new Date().toISOString()}`), who: actorUuid(ctx) });
      begun = true;
    }, manifest);
  } catch (err) {
    // Refused input (a lying entry, a bad `_redirects` line) changes nothing: its row goes. A failure of ours stays in the history as `failed`.
    if (begun && err instanceof DomainError && err.status < 500) await ctx.em.execute(`DELETE FROM ${q}.frontend_worker_builds WHERE uuid = ?`, [uuid]).catch(() => undefined);
    else if (begun) await ctx.em.execute(`UPDATE ${q}.frontend_worker_builds SET status = 'failed', error = ? WHERE uuid = ?`, [err instanceof DomainError ? err.message : 'The build could not be stored.', uuid]).catch(() => undefined);
    throw err;
  }
  await ctx.em.transactional(async (tx) => {
    const t = tx as EntityManager;
    await t.execute(
      `UPDATE ${q}.frontend_worker_builds SET status = 'ready', size = ?, file_count = ?, stored_files = ?, manifest = ?::jsonb, ready_at = now() WHERE uuid = ?`,
      [deployed.size, deployed.fileCount, deployed.storedFiles, JSON.stringify(deployed.manifest), uuid],
    );
    if (input.set_active) {
      await t.execute(`UPDATE ${q}.frontend_workers SET active_build_uuid = ?, updated_at = now(), modified_by = ? WHERE id = ?`, [uuid, actorUuid(ctx), worker.id]);
      await notifyRoutingChanged(t);
    }
  });
  if (deps.keepBuilds) await pruneBuilds(ctx, deps, schema, worker.id, deps.keepBuilds);
  const current = (await findWorker(ctx.em, schema, slug))!;
  return buildView(await buildOf(ctx.em, schema, current, uuid), current, deps.settings);
}

/** Retention (WORKER_KEEP_BUILDS): the worker's builds beyond the newest `keep` go, never the active one; then their blobs no other build holds. */
async function pruneBuilds(ctx: ServiceContext, deps: WorkerDeps, schema: string, workerId: number, keep: number): Promise<void> {
  const q = quotedSchema(schema);
  const pruned = await ctx.em.execute(
    `DELETE FROM ${q}.frontend_worker_builds b WHERE b.worker_id = ? AND b.status <> 'uploading'
       AND b.uuid IS DISTINCT FROM (SELECT active_build_uuid FROM ${q}.frontend_workers WHERE id = ?)
       AND b.uuid NOT IN (SELECT uuid FROM ${q}.frontend_worker_builds WHERE worker_id = ? ORDER BY created_at DESC, uuid LIMIT ?)
     RETURNING b.uuid`,
    [workerId, workerId, workerId, keep],
  );
  if (pruned.length) await collectWorkerBlobs(ctx.em, deps.store.site(schema), schema);
}

/** POST {slug}/builds/missing/: of the contents a build will have (their SHA-256), those the site lacks (a deploy with a manifest sends only these). */
export async function missingContents(ctx: ServiceContext, slug: string, raw: unknown): Promise<{ missing: string[] }> {
  const input = validate(MissingQuery, raw);
  const { schema } = await workerFor(ctx, slug, 'update');
  return { missing: await missingBlobs(readsOf(ctx), schema, input.hashes) };
}

/** POST {slug}/builds/{uuid}/activate/: the build serves from now on (a ready build only; rollback is activating an older one). */
export async function activateBuild(ctx: ServiceContext, deps: WorkerDeps, slug: string, ref: string): Promise<WorkerView> {
  const { schema, worker } = await workerFor(ctx, slug, 'update');
  const q = quotedSchema(schema);
  await ctx.em.transactional(async (tx) => {
    const t = tx as EntityManager;
    const build = await buildOf(t, schema, worker, ref, true);
    if (build.status !== 'ready') throw new DomainError('CONFLICT', `Build "${ref}" is ${build.status}: only a ready build can be activated.`);
    await t.execute(`UPDATE ${q}.frontend_workers SET active_build_uuid = ?, updated_at = now(), modified_by = ? WHERE id = ?`, [build.uuid, actorUuid(ctx), worker.id]);
    await notifyRoutingChanged(t);
  });
  return workerView((await findWorker(ctx.em, schema, slug))!, deps.settings);
}

/** DELETE {slug}/builds/{uuid}/: 409 for the active build; its blobs no other build holds go with it. */
export async function deleteBuild(ctx: ServiceContext, deps: WorkerDeps, slug: string, ref: string): Promise<void> {
  const { schema, worker } = await workerFor(ctx, slug, 'update');
  const q = quotedSchema(schema);
  await ctx.em.transactional(async (tx) => {
    const t = tx as EntityManager;
    const [w] = await t.execute(`SELECT active_build_uuid FROM ${q}.frontend_workers WHERE id = ? FOR UPDATE`, [worker.id]);
    const build = await buildOf(t, schema, worker, ref);
    if (w.active_build_uuid === build.uuid) throw new DomainError('CONFLICT', 'This is the active build: activate another build first, or delete the worker.');
    await t.execute(`DELETE FROM ${q}.frontend_worker_builds WHERE uuid = ?`, [build.uuid]);
  });
  await collectWorkerBlobs(ctx.em, deps.store.site(schema), schema);
}

/** The app setting `default_frontend_worker` (Part 2): a worker of that app, by id; 400 otherwise. */
export async function checkDefaultWorker(em: EntityManager, schema: string, appId: number, workerId: unknown): Promise<number | null> {
  if (workerId === null) return null;
  const id = typeof workerId === 'string' && /^\d+$/.test(workerId) ? Number(workerId) : workerId;
  if (typeof id !== 'number' || !Number.isInteger(id) || id < 1) throw fieldError('default_frontend_worker', 'A frontend worker id (an integer), or null.');
  const w = await firstRow<{ app_id: number | null }>(em, `SELECT app_id FROM ${quotedSchema(schema)}.frontend_workers WHERE id = ?`, [id]);
  if (!w) throw fieldError('default_frontend_worker', `No frontend worker with id ${id} in this site.`);
  if (w.app_id === null || Number(w.app_id) !== appId) throw fieldError('default_frontend_worker', `Frontend worker ${id} belongs to another app (or none): set its app first.`);
  return id;
}
