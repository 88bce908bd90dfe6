// Functions of an app ("<schema>".functions) and their invocations. Decided on the Function
// subject (administrators manage functions and read their code; every user of the site may
// execute) AND the app's policies on the kind `function:{slug}` (system policies from a trigger,
// actions create, read, update, delete, execute: spec Part 2 §2). `max_functions` of the app's
// settings bounds how many an app has, as max_datatables bounds its tables. docs/functions.md.
import type { EntityManager } from '@mikro-orm/postgresql';
import { checkAppCount } from '../apps/app-settings.service.ts';
import { activeApp, appNotFound, type ActiveApp } from '../apps/lookup.ts';
import { allows } from '../auth/actor.ts';
import { likeEscape } from '../common/filters.ts';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../common/pagination.ts';
import { dropReadOnly } from '../common/read-only.ts';
import { insertWithUniqueSlug, isUuid, slugify, uniqueViolation } from '../common/slug.ts';
import { validate } from '../common/validation.ts';
import { actorUuid, readsOf, type ServiceContext } from '../context.ts';
import { assignments, countOf, firstRow, iso, rows } from '../db/sql.ts';
import { DomainError, fieldError, notFound, permissionDenied, validationError } from '../errors.ts';
import { decide, type PolicyApp } from '../policies/hook.ts';
import { appSecretKeys } from '../secrets/secret.service.ts';
import { quotedSchema } from '../tenancy/schema.ts';
import { authorizeSiteSubject, siteAbility, siteSchemaFor, tenantSchema } from '../tenancy/site-access.ts';
import {
  DEFAULT_TIMEOUT_SECONDS, FunctionCreate, FunctionListQuery, FunctionUpdate, InvocationListQuery, InvokeBody, MAX_CODE_BYTES,
  type FunctionView, type InvocationView,
} from './function.schemas.ts';
import { INVOCATION_COLUMNS, type FunctionRuntime, type InvocationRow } from './runtime.ts';

export interface FunctionRow {
  id: number;
  uuid: string;
  app_id: number;
  app_slug: string;
  name: string;
  slug: string;
  description: string;
  runtime: 'javascript';
  code: string;
  timeout: number;
  environment: Record<string, string>;
  is_active: boolean;
  created_at: Date | string;
  updated_at: Date | string;
  created_by: string | null;
  modified_by: string | null;
}

/** A function without its code: what decisions on it need. */
export type FunctionMeta = Omit<FunctionRow, 'code'>;

/**
 * A function and its app as the process keeps them (common/request-caches.ts) until a change to
 * the site's apps or functions: never its code, which an invocation reads with its record.
 */
export interface CachedFunction {
  app: ActiveApp;
  fn: FunctionMeta;
}

export interface FunctionTarget extends CachedFunction {
  schema: string;
}

const SLUG_KEY = 'functions_app_id_slug_key';
export const functionKind = (slug: string): string => `function:${slug}`;
const META_COLUMNS = `f.id, f.uuid, f.app_id, f.name, f.slug, f.description, f.runtime, f.timeout, f.environment, f.is_active,
  f.created_at, f.updated_at, f.created_by, f.modified_by, a.slug AS app_slug`;
const select = (q: string) => `SELECT ${META_COLUMNS}, f.code FROM ${q}.functions f JOIN ${q}.apps a ON a.id = f.app_id`;

/** The view of a function but its code. */
function metaView(f: FunctionMeta): Omit<FunctionView, 'code'> {
  return {
    id: Number(f.id),
    uuid: f.uuid,
    name: f.name,
    slug: f.slug,
    description: f.description,
    runtime: f.runtime,
    timeout: Number(f.timeout),
    environment: f.environment,
    is_active: f.is_active,
    app: Number(f.app_id),
    app_slug: f.app_slug,
    created_at: iso(f.created_at),
    updated_at: iso(f.updated_at),
    created_by: f.created_by,
    modified_by: f.modified_by,
  };
}

export function functionView(f: FunctionRow): FunctionView {
  return { ...metaView(f), code: f.code };
}

export function invocationView(r: InvocationRow): InvocationView {
  return {
    id: Number(r.id),
    uuid: r.uuid,
    function: Number(r.function_id),
    function_slug: r.function_slug,
    trigger: r.trigger,
    event: r.event,
    status: r.status,
    payload: r.payload,
    result: r.result,
    error: r.error,
    logs: r.logs,
    invoked_by: r.invoked_by,
    attempts: Number(r.attempts),
    duration_ms: r.duration_ms === null ? null : Number(r.duration_ms),
    cpu_ms: r.cpu_ms === null ? null : Number(r.cpu_ms),
    created_at: iso(r.created_at),
    started_at: r.started_at === null ? null : iso(r.started_at),
    finished_at: r.finished_at === null ? null : iso(r.finished_at),
  };
}

async function findFunction(em: EntityManager, schema: string, app: Pick<ActiveApp, 'id'>, slug: string): Promise<FunctionRow> {
  const row = await firstRow<FunctionRow>(em, `${select(quotedSchema(schema))} WHERE f.app_id = ? AND f.slug = ?`, [app.id, slug]);
  if (!row) throw notFound(`Function "${slug}"`);
  return row;
}

/**
 * The function `slug` of the active app `appSlug` and the app, in one query; 404 when either is
 * missing. Through the request's caches when it has them (a miss is kept too).
 */
async function cachedFunction(ctx: ServiceContext, schema: string, appSlug: string, slug: string): Promise<CachedFunction> {
  const load = async (): Promise<CachedFunction | DomainError> => {
    const q = quotedSchema(schema);
    const row = await firstRow<FunctionMeta & { app_name: string; app_key: number; found: boolean }>(
      readsOf(ctx),
      `SELECT a.id AS app_key, a.name AS app_name, f.id IS NOT NULL AS found, ${META_COLUMNS}
         FROM ${q}.apps a LEFT JOIN ${q}.functions f ON f.app_id = a.id AND f.slug = ? WHERE a.slug = ? AND a.is_active`,
      [slug, appSlug],
    );
    if (!row) return appNotFound(appSlug);
    if (!row.found) return notFound(`Function "${slug}"`);
    const { app_key: id, app_name: name, found: _, ...fn } = row;
    return { app: { id, name, slug: fn.app_slug }, fn };
  };
  const found = ctx.caches ? await ctx.caches.functions.get(`${schema}|${appSlug}|${slug}`, load) : await load();
  if (found instanceof DomainError) throw found;
  return found;
}

const functionResource = (f: FunctionMeta) => ({ id: f.slug, attr: { name: f.name, slug: f.slug, runtime: f.runtime, is_active: f.is_active, created_by: f.created_by } });

type FunctionAction = 'read' | 'update' | 'delete' | 'execute';

/** Whether the actor may `action` the function: CASL on Function, then the app's policies on `function:{slug}`. */
async function may(ctx: ServiceContext, schema: string, app: PolicyApp, fn: FunctionMeta, action: FunctionAction): Promise<boolean> {
  if (!allows(await siteAbility(ctx, 'Function'), action, 'Function', { schema, app: app.slug, slug: fn.slug })) return false;
  return (await decide(ctx, schema, app, functionKind(fn.slug), action, [functionResource(fn)]))[0]!;
}

/**
 * The function `slug` of the app, if the actor may `action` it. A function the actor may neither
 * read nor execute is missing to them (404, as one that does not exist: issue 29 #9); one they
 * may read or execute but not `action`, 403.
 */
export async function functionFor(ctx: ServiceContext, appSlug: string, slug: string, action: FunctionAction): Promise<FunctionTarget> {
  const schema = await siteSchemaFor(ctx, action, 'Function');
  const { app, fn } = await cachedFunction(ctx, schema, appSlug, slug);
  if (!(await may(ctx, schema, app, fn, action))) {
    const visible = (action !== 'read' && (await may(ctx, schema, app, fn, 'read'))) || (action !== 'execute' && (await may(ctx, schema, app, fn, 'execute')));
    throw visible ? permissionDenied() : notFound(`Function "${slug}"`);
  }
  return { schema, app, fn };
}

/** Of the functions `ids` of the site, those the actor may read or execute: the others are missing to them (events list them only so). */
export async function visibleFunctionIds(ctx: ServiceContext, schema: string, ids: number[]): Promise<Set<number>> {
  const visible = new Set<number>();
  if (!ids.length) return visible;
  const found = await rows<FunctionRow>(readsOf(ctx), `${select(quotedSchema(schema))} WHERE f.id IN (?)`, [ids]);
  for (const fn of found) {
    const app = { id: fn.app_id, slug: fn.app_slug };
    if ((await may(ctx, schema, app, fn, 'read')) || (await may(ctx, schema, app, fn, 'execute'))) visible.add(Number(fn.id));
  }
  return visible;
}

/** Code size, and the environment's secrets exist (the app's own or tenant-wide): 400 naming the field. */
async function checkFields(em: EntityManager, schema: string, app: ActiveApp, input: Partial<FunctionCreate>): Promise<void> {
  if (input.code !== undefined && Buffer.byteLength(input.code) > MAX_CODE_BYTES) throw fieldError('code', `Ensure the code has no more than ${MAX_CODE_BYTES} bytes.`);
  const env = Object.entries(input.environment ?? {});
  const found = await appSecretKeys(em, schema, app.slug, env.map(([, key]) => key));
  const missing = env.filter(([, key]) => !found.has(key));
  if (missing.length) {
    throw validationError({ environment: missing.map(([name, key]) => `${name}: no secret "${key}" exists for app "${app.slug}" or the whole site.`) });
  }
}

export async function listFunctions(ctx: ServiceContext, appSlug: string, rawQuery: unknown): Promise<Page<FunctionView>> {
  const query = validate(FunctionListQuery, rawQuery, 'query');
  const schema = await siteSchemaFor(ctx, 'read', 'Function');
  const app = await activeApp(readsOf(ctx), schema, appSlug);
  await authorizeSiteSubject(ctx, 'read', 'Function', { schema, app: app.slug });
  const q = quotedSchema(schema);
  const where = ['f.app_id = ?'];
  const params: unknown[] = [app.id];
  if (query.search) {
    where.push("(f.name ILIKE ? ESCAPE '\\' OR f.slug ILIKE ? ESCAPE '\\')");
    const like = `%${likeEscape(query.search)}%`;
    params.push(like, like);
  }
  if (query.is_active) {
    where.push('f.is_active = ?');
    params.push(query.is_active === 'true');
  }
  // The app's functions (at most max_functions) matching the query, then those the policies let the
  // caller read: a function they hide is missing from the list too.
  const matching = await rows<FunctionRow>(readsOf(ctx), `${select(q)} WHERE ${where.join(' AND ')} ORDER BY f.created_at DESC, f.id DESC`, params);
  const readable = await Promise.all(matching.map(async (fn) => (await decide(ctx, schema, app, functionKind(fn.slug), 'read', [functionResource(fn)]))[0]));
  const visible = matching.filter((_, i) => readable[i]);
  const page = resolvePage(parsePageRequest(query), visible.length);
  const offset = pageOffset(page);
  return { ...page, count: visible.length, results: visible.slice(offset, offset + page.pageSize).map(functionView) };
}

export async function createFunction(ctx: ServiceContext, appSlug: string, raw: unknown): Promise<FunctionView> {
  const input = validate(FunctionCreate, raw);
  const schema = await siteSchemaFor(ctx, 'create', 'Function');
  const app = await activeApp(readsOf(ctx), schema, appSlug);
  await authorizeSiteSubject(ctx, 'create', 'Function', { schema, app: app.slug });
  await checkFields(readsOf(ctx), schema, app, input);
  const q = quotedSchema(schema);
  const who = actorUuid(ctx);
  const insert = (slug: string) =>
    ctx.em.transactional(async (tx) => {
      // The app's row lock serialises creations, so max_functions holds under concurrency.
      await tx.execute(`SELECT id FROM ${q}.apps WHERE id = ? FOR UPDATE`, [app.id]);
      await checkAppCount(tx as EntityManager, schema, app.id, 'max_functions'); // Part 2 §1, default 100
      const [row] = await tx.execute(
        `INSERT INTO ${q}.functions (app_id, name, slug, description, runtime, code, timeout, environment, is_active, created_by, modified_by)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?::jsonb, ?, ?, ?) RETURNING slug`,
        [app.id, input.name, slug, input.description ?? '', input.runtime ?? 'javascript', input.code, input.timeout ?? DEFAULT_TIMEOUT_SECONDS,
          JSON.stringify(input.environment ?? {}), input.is_active ?? true, who, who],
      );
      return String(row.slug);
    });
  let slug: string;
  if (input.slug) {
    try {
      slug = await insert(input.slug);
    } catch (err) {
      if (uniqueViolation(err) === SLUG_KEY) throw fieldError('slug', `The app has a function "${input.slug}" already.`);
      throw err;
    }
  } else {
    const taken = async (base: string) => (await rows<{ slug: string }>(readsOf(ctx), `SELECT slug FROM ${q}.functions WHERE app_id = ? AND (slug = ? OR slug LIKE ?)`, [app.id, base, `${base}-%`])).map((r) => r.slug);
    slug = await insertWithUniqueSlug(slugify(input.name, 100) || 'function', SLUG_KEY, taken, insert);
  }
  return functionView(await findFunction(ctx.em, schema, app, slug));
}

export async function getFunction(ctx: ServiceContext, appSlug: string, slug: string): Promise<FunctionView> {
  const { schema, app } = await functionFor(ctx, appSlug, slug, 'read');
  return functionView(await findFunction(readsOf(ctx), schema, app, slug));
}

/** PUT and PATCH alike: the writable fields sent change; the read-only ones may come back unchanged. */
export async function updateFunction(ctx: ServiceContext, appSlug: string, slug: string, raw: unknown): Promise<FunctionView> {
  const input = validate(FunctionUpdate, raw) as Partial<FunctionCreate> & Record<string, unknown>;
  const { schema, app, fn } = await functionFor(ctx, appSlug, slug, 'update');
  dropReadOnly(FunctionUpdate, input, metaView(fn));
  await checkFields(readsOf(ctx), schema, app, input);
  const { set, params } = assignments(input, ['name', 'description', 'runtime', 'code', 'timeout', 'is_active']);
  if (input.environment !== undefined) {
    set.push('environment = ?::jsonb');
    params.push(JSON.stringify(input.environment));
  }
  if (set.length) {
    await ctx.em.execute(`UPDATE ${quotedSchema(schema)}.functions SET ${set.join(', ')}, modified_by = ?, updated_at = now() WHERE id = ?`, [...params, actorUuid(ctx), fn.id]);
  }
  return functionView(await findFunction(ctx.em, schema, app, slug));
}

/** Deletes the function with its invocations, subscriptions and system policies (cascades and the trigger); queued executions end with it. */
export async function deleteFunction(ctx: ServiceContext, appSlug: string, slug: string): Promise<void> {
  const { schema, fn } = await functionFor(ctx, appSlug, slug, 'delete');
  const q = quotedSchema(schema);
  await ctx.em.transactional(async (tx) => {
    await tx.execute(`DELETE FROM public.function_jobs j USING ${q}.function_invocations i WHERE j.site_schema = ? AND j.invocation_id = i.id AND i.function_id = ?`, [schema, fn.id]);
    await tx.execute(`DELETE FROM ${q}.functions WHERE id = ?`, [fn.id]);
  });
}

const invocationSelect = (q: string) => `SELECT ${INVOCATION_COLUMNS} FROM ${q}.function_invocations i JOIN ${q}.functions f ON f.id = i.function_id`;

async function findInvocation(em: EntityManager, schema: string, where: string, params: unknown[]): Promise<InvocationRow | undefined> {
  return firstRow<InvocationRow>(em, `${invocationSelect(quotedSchema(schema))} WHERE ${where}`, params);
}

/**
 * Executes the function as the caller: with `async`, queued for any server's queue to run (202);
 * else run by this process at once, answered when it has ended (200). A warm invocation sends two
 * statements (runtime.ts invoke; the function and the decision come from the process's caches);
 * a queued one, one.
 */
export async function invokeFunction(ctx: ServiceContext, runtime: FunctionRuntime, appSlug: string, slug: string, raw: unknown): Promise<{ invocation: InvocationView; done: boolean }> {
  const input = validate(InvokeBody, raw ?? {});
  const { schema, fn } = await functionFor(ctx, appSlug, slug, 'execute');
  if (!fn.is_active) throw new DomainError('BAD_REQUEST', `Function "${fn.slug}" is inactive: set is_active to invoke it.`);
  const job = { functionId: fn.id, payload: input.payload ?? null, invokedBy: actorUuid(ctx) };
  const row = await (input.async ? runtime.enqueue(schema, job) : runtime.invoke(schema, job));
  if (!row) throw notFound(`Function "${slug}"`); // deleted since the lookup
  return { invocation: invocationView(row), done: ['succeeded', 'failed', 'timed_out'].includes(row.status) };
}

/**
 * The invocations of a function, newest first: all of them for who may read the function
 * (administrators), else the caller's own (who may execute it).
 */
export async function listInvocations(ctx: ServiceContext, appSlug: string, slug: string, rawQuery: unknown): Promise<Page<InvocationView>> {
  const query = validate(InvocationListQuery, rawQuery, 'query');
  const { schema, fn, all } = await invocationAccess(ctx, appSlug, slug);
  const q = quotedSchema(schema);
  const where = ['i.function_id = ?'];
  const params: unknown[] = [fn.id];
  if (!all) {
    where.push('i.invoked_by = ?');
    params.push(actorUuid(ctx));
  }
  for (const field of ['status', 'trigger'] as const) {
    if (query[field]) {
      where.push(`i.${field} = ?`);
      params.push(query[field]);
    }
  }
  const whereSql = where.join(' AND ');
  const count = await countOf(readsOf(ctx), `SELECT count(*) AS n FROM ${q}.function_invocations i WHERE ${whereSql}`, params);
  const page = resolvePage(parsePageRequest(query), count);
  const found = await rows<InvocationRow>(
    readsOf(ctx),
    `${invocationSelect(q)} WHERE ${whereSql} ORDER BY i.created_at DESC, i.id DESC LIMIT ? OFFSET ?`,
    [...params, page.pageSize, pageOffset(page)],
  );
  return { ...page, count, results: found.map(invocationView) };
}

/** One invocation (by id or uuid), under the rule of the list. */
export async function getInvocation(ctx: ServiceContext, appSlug: string, slug: string, ref: string): Promise<InvocationView> {
  const { schema, fn, all } = await invocationAccess(ctx, appSlug, slug);
  const byId = /^\d{1,18}$/.test(ref);
  if (!byId && !isUuid(ref)) throw notFound('Invocation');
  const row = await findInvocation(readsOf(ctx), schema, `i.function_id = ? AND ${byId ? 'i.id = ?' : 'i.uuid = ?::uuid'}`, [fn.id, ref]);
  if (!row || (!all && row.invoked_by !== actorUuid(ctx))) throw notFound('Invocation');
  return invocationView(row);
}

/** Whether the caller sees every invocation of the function (may read it) or only their own (may execute it). */
async function invocationAccess(ctx: ServiceContext, appSlug: string, slug: string): Promise<FunctionTarget & { all: boolean }> {
  const canRead = allows(await siteAbility(ctx, 'Function'), 'read', 'Function', { schema: tenantSchema(ctx), app: appSlug, slug });
  return { ...(await functionFor(ctx, appSlug, slug, canRead ? 'read' : 'execute')), all: canRead };
}
