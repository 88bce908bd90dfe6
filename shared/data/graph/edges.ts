// The edges of a hierarchy table (spec Part 2 §4 "Edge routes"; docs/hierarchy.md): list with
// filters and pages, bulk create (all or nothing), full update, delete by ids. Reads need the
// table's `read` action and show an edge only when the caller may read both its records; writes
// need `update`, on the record an edge starts from (an edge is that record's relationship), and
// `read` on the one it points to. Every write holds the edges' write lock for its transaction,
// so the max_outgoing / max_incoming counts it checks after writing cannot be raced past.
import { randomUUID } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { readsOf, type ServiceContext } from '../../context.ts';
import { DomainError, addFieldError, fieldError, notFound, permissionDenied, validationError, type FieldErrors } from '../../errors.ts';
import { countOf, preparedRows, rows } from '../../db/sql.ts';
import type { TableScope } from '../datatable.queries.ts';
import { coerceValue } from '../query/filter.ts';
import { ALL_ROWS, rowsAllowed } from '../records/access.ts';
import { pageOf } from '../records/read.ts';
import { openTarget } from '../records/target.ts';
import { MAX_EDGE_IDS, MAX_EDGES_PER_REQUEST, type EdgePage, type EdgeView } from './edges.schemas.ts';
import { EDGE_TYPE_RE } from './schema.ts';
import { graphTarget, type GraphTarget } from './target.ts';


const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const EDGE_KEYS = ['from_id', 'to_id', 'type', 'metadata'];
const VIEW = `json_build_object('id', e.id, 'from_id', e.from_id, 'to_id', e.to_id, 'type', e.type, 'metadata', e.metadata, 'created_at', to_char(e.created_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))`;
const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** A checked edge; `n` its position in the request. */
interface EdgeInput {
  n: number;
  id: string;
  from_id: unknown;
  to_id: unknown;
  type: string;
  metadata: unknown;
}

/** A record key as given, coerced to the key column's type (an object key travels as it is); errors under `field`. */
function keyValue(g: GraphTarget, field: string, value: unknown, errors: FieldErrors): unknown {
  if (value === undefined || value === null || value === '') {
    addFieldError(errors, field, 'This field is required.');
    return undefined;
  }
  try {
    const v = coerceValue(field, g.key, value);
    return g.keyType === 'jsonb' ? value : v;
  } catch (err) {
    if (err instanceof DomainError) for (const text of err.errors?.[field] ?? [err.message]) addFieldError(errors, field, text);
    else throw err;
    return undefined;
  }
}

function typeProblem(g: GraphTarget, type: unknown): string | undefined {
  if (typeof type !== 'string' || type === '') return 'This field is required (a string).';
  if (g.types.size) return g.types.has(type) ? undefined : `Unknown type "${type}"; the types of this table are ${[...g.types.keys()].join(', ')}.`;
  return EDGE_TYPE_RE.test(type) ? undefined : 'A type is a letter, then letters, digits or _, at most 50 characters.';
}

/** One edge of a request, every problem keyed `{prefix}{field}`. */
function checkEdge(g: GraphTarget, raw: unknown, n: number, prefix: string, errors: FieldErrors): EdgeInput | undefined {
  if (!isObject(raw)) {
    addFieldError(errors, prefix ? prefix.slice(0, -1) : 'non_field_errors', 'Expected an object {from_id, to_id, type, metadata?}.');
    return undefined;
  }
  const before = Object.keys(errors).length;
  for (const k of Object.keys(raw)) if (!EDGE_KEYS.includes(k)) addFieldError(errors, `${prefix}${k}`, `Unknown field "${k}" (from_id, to_id, type, metadata).`);
  const from = keyValue(g, `${prefix}from_id`, raw.from_id, errors);
  const to = keyValue(g, `${prefix}to_id`, raw.to_id, errors);
  const problem = typeProblem(g, raw.type);
  if (problem) addFieldError(errors, `${prefix}type`, problem);
  if (from !== undefined && JSON.stringify(from) === JSON.stringify(to)) addFieldError(errors, `${prefix}to_id`, 'An edge links two different records (from_id equals to_id).');
  if (Object.keys(errors).length !== before) return undefined;
  return { n, id: randomUUID(), from_id: from, to_id: to, type: raw.type as string, metadata: raw.metadata ?? null };
}

/** Holds the edges' write lock until the transaction ends (the closure trigger takes the same). */
const lock = (em: EntityManager, g: GraphTarget) => em.execute(`LOCK TABLE ${g.edges} IN SHARE ROW EXCLUSIVE MODE`);

/**
 * The records the edges link, checked in one statement: a missing one, or one the caller may not
 * read (missing to them), is a 400 naming it; an edge's start the caller may not update a 403
 * (all or nothing).
 */
async function checkEnds(ctx: ServiceContext, em: EntityManager, g: GraphTarget, edges: EdgeInput[], prefix: (e: EdgeInput) => string): Promise<void> {
  const t = g.t;
  const update = await rowsAllowed(ctx, t, 'update');
  const keys = edges.flatMap((e) => [e.from_id, e.to_id]);
  const found = await rows<{ n: number; found: boolean; u: boolean }>(
    em,
    `SELECT v.ordinality::int AS n, t.ctid IS NOT NULL AND coalesce((${t.readable.sql}), false) AS found, coalesce((${update.sql}), false) AS u
       FROM jsonb_array_elements(?::jsonb) WITH ORDINALITY v LEFT JOIN ${t.table} t ON ${g.key.sql} = (v.value #>> '{}')::${g.keyType}
      ORDER BY v.ordinality`,
    [...t.readable.params, ...update.params, JSON.stringify(keys)],
  );
  const errors: FieldErrors = {};
  let denied = false;
  edges.forEach((e, i) => {
    const [from, to] = [found[2 * i]!, found[2 * i + 1]!];
    if (!from.found) addFieldError(errors, `${prefix(e)}from_id`, `Record ${JSON.stringify(e.from_id)} does not exist.`);
    if (!to.found) addFieldError(errors, `${prefix(e)}to_id`, `Record ${JSON.stringify(e.to_id)} does not exist.`);
    if (from.found && !from.u) denied = true;
  });
  if (Object.keys(errors).length) throw validationError(errors, edges.length > 1 ? 'Invalid edges: nothing was stored.' : 'Invalid edge.');
  if (denied) throw permissionDenied();
}

/** The edges as a JSON recordset `x(n, id, from_id, to_id, type, metadata)` with the key column's type. */
const recordset = (g: GraphTarget) => `jsonb_to_recordset(?::jsonb) AS x(n int, id uuid, from_id ${g.keyType}, to_id ${g.keyType}, type varchar(50), metadata jsonb)`;

/** 409 for an edge that exists already (same ends and type; `except` the edge being updated) or twice in the request. */
async function checkDuplicates(em: EntityManager, g: GraphTarget, edges: EdgeInput[], prefix: (e: EdgeInput) => string, except?: string): Promise<void> {
  const errors: FieldErrors = {};
  const seen = new Map<string, number>();
  for (const e of edges) {
    const k = JSON.stringify([e.from_id, e.to_id, e.type]);
    if (seen.has(k)) addFieldError(errors, prefix(e).slice(0, -1) || 'non_field_errors', `The same edge is given twice (also at ${seen.get(k)}).`);
    else seen.set(k, e.n);
  }
  const existing = await rows<{ n: number }>(
    em,
    `SELECT x.n FROM ${recordset(g)} JOIN ${g.edges} e ON e.from_id = x.from_id AND e.to_id = x.to_id AND e.type = x.type${except ? ' WHERE e.id <> ?' : ''} ORDER BY x.n`,
    [JSON.stringify(edges), ...(except ? [except] : [])],
  );
  const byN = new Map(edges.map((e) => [e.n, e]));
  for (const { n } of existing) addFieldError(errors, prefix(byN.get(n)!).slice(0, -1) || 'non_field_errors', 'This edge exists already (same from_id, to_id and type).');
  if (Object.keys(errors).length) throw new DomainError('CONFLICT', edges.length > 1 ? 'Duplicate edges: nothing was stored.' : 'Duplicate edge.', { errors });
}

/**
 * max_outgoing / max_incoming of the declared types, counted after the write in its transaction
 * (under the write lock): a record over a limit is a 400 naming the constraint, the record and
 * the type; the transaction, hence the whole request, is rolled back.
 */
async function checkLimits(em: EntityManager, g: GraphTarget, edges: EdgeInput[], prefix: (e: EdgeInput) => string): Promise<void> {
  const limited = edges.filter((e) => {
    const c = g.types.get(e.type)?.constraints;
    return typeof c?.max_outgoing === 'number' || typeof c?.max_incoming === 'number';
  });
  if (!limited.length) return;
  const counts = await rows<{ n: number; outgoing: number; incoming: number }>(
    em,
    `SELECT x.n,
            (SELECT count(*)::int FROM ${g.edges} e WHERE e.from_id = x.from_id AND e.type = x.type) AS outgoing,
            (SELECT count(*)::int FROM ${g.edges} e WHERE e.to_id = x.to_id AND e.type = x.type) AS incoming
       FROM ${recordset(g)} ORDER BY x.n`,
    [JSON.stringify(limited)],
  );
  const errors: FieldErrors = {};
  const reported = new Set<string>();
  let first: string | undefined;
  // Reported at the last edge of the request that reaches the record: the one over the limit.
  const byN = new Map(limited.map((e) => [e.n, e]));
  for (const c of [...counts].reverse()) {
    const e = byN.get(c.n)!;
    const limits = g.types.get(e.type)!.constraints!;
    const sides = [['max_outgoing', 'from_id', e.from_id, c.outgoing, 'outgoing'], ['max_incoming', 'to_id', e.to_id, c.incoming, 'incoming']] as const;
    for (const [constraint, field, key, count, way] of sides) {
      const max = limits[constraint];
      if (typeof max !== 'number' || count <= max || reported.has(`${constraint}|${JSON.stringify(key)}`)) continue;
      reported.add(`${constraint}|${JSON.stringify(key)}`);
      const text = `Constraint ${constraint} of type "${e.type}" is ${max}: record ${JSON.stringify(key)} would have ${count} ${way} "${e.type}" edges.`;
      first ??= text;
      addFieldError(errors, `${prefix(e)}${field}`, text);
    }
  }
  if (first) throw validationError(errors, edges.length > 1 ? `${first} Nothing was stored.` : first);
}

function parseEdges(g: GraphTarget, body: unknown): EdgeInput[] {
  if (!Array.isArray(body)) throw fieldError('non_field_errors', 'Expected an array of edges [{from_id, to_id, type, metadata?}].');
  if (!body.length) throw fieldError('non_field_errors', 'Give at least one edge.');
  if (body.length > MAX_EDGES_PER_REQUEST) throw fieldError('non_field_errors', `At most ${MAX_EDGES_PER_REQUEST} edges per request.`);
  const errors: FieldErrors = {};
  const edges = body.map((raw, i) => checkEdge(g, raw, i, `${i}.`, errors));
  if (Object.keys(errors).length) throw validationError(errors, 'Invalid edges: nothing was stored.');
  return edges as EdgeInput[];
}

/** The edges (alias e) the caller may see: both records readable. */
function visible(g: GraphTarget): { sql: string; params: unknown[] } {
  const t = g.t;
  if (t.readable === ALL_ROWS) return { sql: 'TRUE', params: [] };
  const side = (end: string) => `EXISTS (SELECT 1 FROM ${t.table} t WHERE ${g.key.sql} = e.${end} AND (${t.readable.sql}))`;
  return { sql: `${side('from_id')} AND ${side('to_id')}`, params: [...t.readable.params, ...t.readable.params] };
}

/** GET edges/?from_id=&to_id=&types=a,b&page=&page_size= → {total, page, page_size, results}, oldest first. */
export async function listEdges(ctx: ServiceContext, scope: TableScope, name: string, query: Record<string, unknown>): Promise<EdgePage> {
  const g = graphTarget(await openTarget(ctx, scope, name, 'read'));
  const errors: FieldErrors = {};
  const where = [visible(g)];
  for (const end of ['from_id', 'to_id'] as const) {
    if (query[end] === undefined) continue;
    const v = keyValue(g, end, query[end], errors);
    if (v !== undefined) where.push({ sql: `e.${end} = ?::${g.keyType}`, params: [g.keyType === 'jsonb' ? JSON.stringify(v) : v] });
  }
  if (query.types !== undefined) {
    const types = String(query.types).split(',').map((x) => x.trim()).filter(Boolean);
    for (const type of types) {
      const problem = typeProblem(g, type);
      if (problem) addFieldError(errors, 'types', problem);
    }
    if (types.length) where.push({ sql: `e.type IN (${types.map(() => '?').join(', ')})`, params: types });
  }
  const p = pageOf(query);
  if (Object.keys(errors).length) throw validationError(errors);
  const cond = { sql: where.map((w) => w.sql).join(' AND '), params: where.flatMap((w) => w.params) };
  const em = readsOf(ctx);
  const total = await countOf(em, `SELECT count(*) AS n FROM ${g.edges} e WHERE ${cond.sql}`, cond.params);
  const results = await preparedRows<{ e: EdgeView }>(em, `SELECT ${VIEW} AS e FROM ${g.edges} e WHERE ${cond.sql} ORDER BY e.created_at, e.id LIMIT ? OFFSET ?`, [...cond.params, p.limit, p.offset]);
  return { total, page: p.page, page_size: p.pageSize, results: results.map((r) => r.e) };
}

/** POST edges/ (an array; all or nothing) → 201 {total, results}, in the order given. */
export async function createEdges(ctx: ServiceContext, scope: TableScope, name: string, body: unknown): Promise<{ total: number; results: EdgeView[] }> {
  const g = graphTarget(await openTarget(ctx, scope, name, 'update'));
  const edges = parseEdges(g, body);
  const at = (e: EdgeInput) => `${e.n}.`;
  const created = await ctx.em.transactional(async (tx) => {
    const em = tx as EntityManager;
    await lock(em, g);
    await checkEnds(ctx, em, g, edges, at);
    await checkDuplicates(em, g, edges, at);
    const inserted = await rows<{ e: EdgeView }>(
      em,
      `INSERT INTO ${g.edges} AS e (id, from_id, to_id, type, metadata) SELECT x.id, x.from_id, x.to_id, x.type, x.metadata FROM ${recordset(g)} ORDER BY x.n RETURNING ${VIEW} AS e`,
      [JSON.stringify(edges)],
    );
    await checkLimits(em, g, edges, at);
    return inserted.map((r) => r.e);
  });
  const byId = new Map(created.map((e) => [e.id, e]));
  return { total: created.length, results: edges.map((e) => byId.get(e.id)!) };
}

const edgeNotFound = () => notFound('Edge');

/** PATCH edges/{id}/: the given fields replace the edge's, the whole edge is checked again → {data}. */
export async function updateEdge(ctx: ServiceContext, scope: TableScope, name: string, edgeId: string, body: unknown): Promise<{ data: EdgeView }> {
  const g = graphTarget(await openTarget(ctx, scope, name, 'update'));
  if (!UUID_RE.test(edgeId)) throw edgeNotFound();
  if (!isObject(body)) throw fieldError('non_field_errors', 'Expected an object {from_id?, to_id?, type?, metadata?}.');
  return ctx.em.transactional(async (tx) => {
    const em = tx as EntityManager;
    await lock(em, g);
    const seen = visible(g);
    const [current] = await rows<{ from_id: unknown; to_id: unknown; type: string; metadata: unknown }>(
      em,
      `SELECT to_jsonb(e.from_id) AS from_id, to_jsonb(e.to_id) AS to_id, e.type, e.metadata FROM ${g.edges} e WHERE e.id = ? AND ${seen.sql}`,
      [edgeId, ...seen.params],
    );
    if (!current) throw edgeNotFound();
    const old = { n: 0, id: edgeId, ...current };
    await checkEnds(ctx, em, g, [old], () => '');
    const errors: FieldErrors = {};
    const edge = checkEdge(g, { ...current, ...body }, 0, '', errors);
    if (!edge) throw validationError(errors, 'Invalid edge.');
    edge.id = edgeId;
    await checkEnds(ctx, em, g, [edge], () => '');
    await checkDuplicates(em, g, [edge], () => '', edgeId);
    const [updated] = await rows<{ e: EdgeView }>(
      em,
      `UPDATE ${g.edges} e SET from_id = x.from_id, to_id = x.to_id, type = x.type, metadata = x.metadata FROM ${recordset(g)} WHERE e.id = x.id RETURNING ${VIEW} AS e`,
      [JSON.stringify([edge])],
    );
    await checkLimits(em, g, [edge], () => '');
    return { data: updated!.e };
  });
}

/** DELETE edges/ with {edge_ids}: the edges that exist are deleted (all or nothing under the policies) → {deleted, message}. */
export async function deleteEdges(ctx: ServiceContext, scope: TableScope, name: string, body: unknown): Promise<{ deleted: number; message: string }> {
  const t = await openTarget(ctx, scope, name, 'update');
  const g = graphTarget(t);
  const ids = isObject(body) ? body.edge_ids : undefined;
  if (!Array.isArray(ids) || !ids.length) throw fieldError('edge_ids', 'Expected a non-empty array of edge ids.');
  if (ids.length > MAX_EDGE_IDS) throw fieldError('edge_ids', `At most ${MAX_EDGE_IDS} ids per request.`);
  const bad = ids.filter((id) => typeof id !== 'string' || !UUID_RE.test(id));
  if (bad.length) throw fieldError('edge_ids', `Not edge ids (UUIDs): ${bad.slice(0, 5).map((b) => JSON.stringify(b)).join(', ')}.`);
  const update = await rowsAllowed(ctx, t, 'update');
  const seen = visible(g);
  const gone = await ctx.em.transactional(async (tx) => {
    const em = tx as EntityManager;
    await lock(em, g);
    // Edges the caller may not see (an end it may not read) are missing to it: left alone, not counted.
    const deleted = await rows<{ ok: boolean }>(
      em,
      `DELETE FROM ${g.edges} e USING ${t.table} t WHERE e.id IN (${ids.map(() => '?').join(', ')}) AND ${g.key.sql} = e.from_id AND ${seen.sql} RETURNING (${update.sql}) AS ok`,
      [...ids, ...seen.params, ...update.params],
    );
    if (deleted.some((d) => !d.ok)) throw permissionDenied();
    return deleted.length;
  });
  return { deleted: gone, message: `${gone} ${gone === 1 ? 'edge' : 'edges'} deleted.` };
}
