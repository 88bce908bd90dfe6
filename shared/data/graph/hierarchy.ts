// Hierarchy queries on the data routes of a table with edges (spec Part 2 §4 "Hierarchy
// queries"; docs/hierarchy.md): `include` (descendants, ancestors, both), `depth`, `format`
// (include, tree, graph), `relationship_type` (repeatable; `graph_types` the deprecated comma
// list). The parameters are checked first (400 {error, detail} naming the bad one), then one
// traversal statement (traverse.ts) and, for trees and graphs, one statement for the edges.
import type { EntityManager } from '@mikro-orm/postgresql';
import { readsOf, type ServiceContext } from '../../context.ts';
import { DomainError, fieldError } from '../../errors.ts';
import { countOf, preparedRows } from '../../db/sql.ts';
import { JsonText } from '../../common/json-text.ts';
import { ALL_ROWS, withinAllowed } from '../records/access.ts';
import { compileOn, listQuery, pageOf, plain } from '../records/read.ts';
import type { RecordRow, Target } from '../records/target.ts';
import { keyFilter, recordNotFound } from '../records/write.ts';
import { EDGE_TYPE_RE } from './schema.ts';
import { graphTarget, keyArray, keySet, labelOf, type GraphTarget } from './target.ts';
import { edgesAmong, reach, type Direction, type EdgeRow, type Reached } from './traverse.ts';

export interface GraphSettings {
  /** DATA_SERVICE_GRAPH_MAX_DEPTH: the deepest traversal a request may ask for. */
  maxDepth: number;
}

/** A hierarchy answer: the whole response body, which the record routes send as it is. */
export class HierarchyBody {
  readonly body: Record<string, unknown>;
  constructor(body: Record<string, unknown>) {
    this.body = body;
  }
}

/** The query parameters that are the hierarchy's on a table with edges (never field conditions there). */
export const HIERARCHY_PARAMS = ['include', 'depth', 'relationship_type', 'graph_types'];
const INCLUDES = ['descendants', 'ancestors', 'both'] as const;
const FORMATS = ['include', 'tree', 'graph'] as const;
/** The records API's own formats: a plain record or list (csv: the export). */
const PLAIN_FORMATS = ['json', 'flat', 'csv'];
/** The tree form repeats a record under each of its parents: at most this many nodes in one answer. */
export const MAX_TREE_NODES = 100_000;

type Include = (typeof INCLUDES)[number];
type Format = (typeof FORMATS)[number];

export interface HierarchyRequest {
  include?: Include;
  format: Format;
  depth: number;
  /** The followed types; null: every edge. */
  types: string[] | null;
}

/** Spec Part 2 §7 item 3: 400 with {error, detail} naming the parameter and the value, beside the standard envelope. */
function invalid(param: string, detail: string): DomainError {
  return new DomainError('VALIDATION_ERROR', detail, { detail, errors: { [param]: [detail] }, extra: { error: `Invalid ${param}.` } });
}

const values = (raw: unknown): string[] => (raw === undefined ? [] : (Array.isArray(raw) ? raw : [raw]).map((v) => (typeof v === 'string' ? v : JSON.stringify(v))));

function oneValue(param: string, raw: unknown): string | undefined {
  const list = values(raw);
  if (list.length > 1) throw invalid(param, `${param} takes one value; got ${list.length}.`);
  return list[0];
}

function typesOf(g: GraphTarget, query: Record<string, unknown>): string[] | null {
  const asked = [
    ...values(query.relationship_type).map((v) => ['relationship_type', v] as const),
    ...values(query.graph_types).flatMap((v) => v.split(',').map((x) => ['graph_types', x.trim()] as const)),
  ].filter(([, v]) => v !== '');
  for (const [param, v] of asked) {
    if (g.types.size ? !g.types.has(v) : !EDGE_TYPE_RE.test(v)) {
      const known = g.types.size ? `; the types of this table are ${[...g.types.keys()].join(', ')}` : ': a type name is a letter, then letters, digits or _, at most 50';
      throw invalid(param === 'graph_types' ? 'graph_types' : 'relationship_type', `Unknown relationship_type "${v}"${known}.`);
    }
  }
  return asked.length ? [...new Set(asked.map(([, v]) => v))].sort() : null;
}

/**
 * The hierarchy request of a data route's query, checked; undefined when the table has no edges
 * or the query asks for none of it (a plain record or list).
 */
export function hierarchyRequest(t: Target, query: Record<string, unknown>, settings: GraphSettings): { g: GraphTarget; h: HierarchyRequest } | undefined {
  const asked = HIERARCHY_PARAMS.some((p) => query[p] !== undefined) || (query.format !== undefined && !PLAIN_FORMATS.includes(query.format as string));
  if (!asked) return undefined;
  let g: GraphTarget;
  try {
    g = graphTarget(t);
  } catch {
    return undefined; // no edges: the parameters are what they are on any table
  }
  for (const p of ['populate', '_aggregate'] as const) if (query[p] !== undefined) throw fieldError(p, `${p} does not apply to hierarchy queries (include, depth, relationship_type, format=tree|graph).`);
  const include = oneValue('include', query.include);
  if (include !== undefined && !(INCLUDES as readonly string[]).includes(include)) throw invalid('include', `include must be descendants, ancestors or both; got "${include}".`);
  const format = oneValue('format', query.format) ?? 'include';
  if (!(FORMATS as readonly string[]).includes(format) && !PLAIN_FORMATS.includes(format)) {
    throw invalid('format', `format must be include (the default), tree or graph on a hierarchy table; got "${format}".`);
  }
  const rawDepth = oneValue('depth', query.depth);
  let depth = settings.maxDepth;
  if (rawDepth !== undefined) {
    if (!/^\d{1,4}$/.test(rawDepth)) throw invalid('depth', `depth must be an integer from 0 to ${settings.maxDepth}; got "${rawDepth}".`);
    depth = Number(rawDepth);
    if (depth > settings.maxDepth) throw invalid('depth', `depth ${depth} is above the maximum ${settings.maxDepth} (DATA_SERVICE_GRAPH_MAX_DEPTH).`);
  }
  return { g, h: { include: include as Include | undefined, format: (PLAIN_FORMATS.includes(format) ? 'include' : format) as Format, depth, types: typesOf(g, query) } };
}

const DIRS: Record<Include, Direction[]> = { descendants: ['descendants'], ancestors: ['ancestors'], both: ['ancestors', 'descendants'] };

/** A record (JSON text or object) as JSON text with further keys after its fields, their values given as JSON text. */
function withJson(r: RecordRow | string, extra: [string, string][]): string {
  const text = typeof r === 'string' ? r : JSON.stringify(r);
  const tail = extra.map(([k, v]) => `${JSON.stringify(k)}:${v}`).join(',');
  return tail ? `${text.slice(0, -1)},${tail}}` : text;
}
const withKeys = (r: RecordRow | string, extra: Record<string, unknown>): string => withJson(r, Object.entries(extra).map(([k, v]) => [k, JSON.stringify(v)]));
const asObject = (r: RecordRow | string): RecordRow => (typeof r === 'string' ? (JSON.parse(r) as RecordRow) : r);
const asText = (list: string[]) => new JsonText(`[${list.join(',')}]`);

/** A base record: its record (JSON text or object), its key text; 404 when missing or when the caller may not read it. */
async function baseRecord(em: EntityManager, g: GraphTarget, id: string): Promise<{ k: string; r: RecordRow | string }> {
  const t = g.t;
  const cond = keyFilter(t, id);
  if (!cond) throw recordNotFound();
  const where = withinAllowed(t.readable, compileOn(t, cond));
  const [found] = await preparedRows<{ r: RecordRow | string; k: string }>(
    em,
    `SELECT ${t.jsonSql ?? t.recordSql('t')} AS r, ${g.key.sql}::text AS k FROM ${t.table} t WHERE ${where.sql}`,
    where.params,
  );
  if (!found) throw recordNotFound();
  return { k: found.k, r: t.jsonSql ? found.r : plain(t, found.r as RecordRow) };
}

/** The include form's arrays of one base: every label of the followed types (empty ones too), each item with `_depth` and `_relationship_type`. */
function labelled(g: GraphTarget, h: HierarchyRequest, reached: Reached[]): Map<string, string[]> {
  const out = new Map<string, string[]>();
  // Declared types in their declared order; undeclared ones share their direction's label.
  const followed = g.types.size ? [...g.types.keys()].filter((x) => !h.types || h.types.includes(x)) : (h.types ?? ['']);
  for (const dir of DIRS[h.include!]) for (const type of followed) out.set(labelOf(g, type, dir), []);
  for (const x of reached) {
    const label = labelOf(g, x.type, x.dir);
    if (!out.has(label)) out.set(label, []);
    out.get(label)!.push(withKeys(x.r, { _depth: x.depth, _relationship_type: x.type }));
  }
  return out;
}

interface TreeNode extends RecordRow {
  children: TreeNode[];
}

/**
 * The tree form under `roots`: each record with `_depth` (root 0), `_relationship_type` (the
 * edge to its parent; not on roots) and `children`. A record with several parents appears under
 * each; one already on the path from the root is not repeated (cycles end there).
 */
function buildTree(roots: { k: string; r: RecordRow | string }[], records: Map<string, RecordRow | string>, edges: EdgeRow[], depth: number): { data: TreeNode[]; total: number } {
  const kids = new Map<string, { k: string; type: string }[]>();
  for (const e of edges) {
    const list = kids.get(e.o) ?? [];
    if (!list.some((c) => c.k === e.f)) list.push({ k: e.f, type: e.type }); // one place per parent: the smallest type
    kids.set(e.o, list);
  }
  const seen = new Set<string>();
  let emitted = 0;
  const objects = new Map<string, RecordRow>();
  const record = (k: string) => {
    let o = objects.get(k);
    if (!o) objects.set(k, (o = asObject(records.get(k)!)));
    return o;
  };
  const make = (k: string, d: number, type: string | undefined, path: Set<string>): TreeNode => {
    if (++emitted > MAX_TREE_NODES) throw invalid('depth', `The tree would hold more than ${MAX_TREE_NODES} nodes (records under several parents repeat); ask for a smaller depth or format=graph.`);
    seen.add(k);
    const node = { ...record(k), _depth: d, ...(type === undefined ? {} : { _relationship_type: type }), children: [] as TreeNode[] };
    if (d < depth) {
      for (const c of kids.get(k) ?? []) {
        if (path.has(c.k)) continue;
        path.add(c.k);
        node.children.push(make(c.k, d + 1, c.type, path));
        path.delete(c.k);
      }
    }
    return node;
  };
  const data = roots.map((root) => make(root.k, 0, undefined, new Set([root.k])));
  return { data, total: seen.size };
}

/** Trees from `roots` down `depth` levels: the descendants, then the edges among them. */
async function trees(em: EntityManager, g: GraphTarget, h: HierarchyRequest, roots: { k: string; r: RecordRow | string }[]): Promise<{ data: TreeNode[]; total: number }> {
  const below = await reach(em, g, roots.map((r) => r.k), { dirs: ['descendants'], types: h.types, depth: h.depth });
  const records = new Map<string, RecordRow | string>(roots.map((r) => [r.k, r.r]));
  for (const x of below) records.set(x.k, x.r);
  const edges = h.depth > 0 ? await edgesAmong(em, g, [...records.keys()], h.types) : [];
  return buildTree(roots, records, edges, h.depth);
}

/**
 * The natural roots of a record: among it and its ancestors (within the maximum depth), those
 * with no parent the caller may read through a followed type; when there is none (a cycle, or a
 * chain longer than the maximum), the farthest ancestors reached.
 */
async function naturalRoots(em: EntityManager, g: GraphTarget, h: HierarchyRequest, base: { k: string; r: RecordRow | string }, maxDepth: number): Promise<{ k: string; r: RecordRow | string }[]> {
  const above = await reach(em, g, [base.k], { dirs: ['ancestors'], types: h.types, depth: maxDepth });
  const candidates = [{ ...base, depth: 0 }, ...above.map((x) => ({ k: x.k, r: x.r, depth: x.depth }))];
  const t = g.t;
  const params: unknown[] = [keyArray(candidates.map((c) => c.k)), ...(h.types ?? []), ...(t.readable === ALL_ROWS ? [] : t.readable.params)];
  const readable = t.readable === ALL_ROWS ? '' : ` AND EXISTS (SELECT 1 FROM ${t.table} t WHERE ${g.key.sql} = e.to_id AND (${t.readable.sql}))`;
  const typeCond = h.types ? ` AND e.type IN (${h.types.map(() => '?').join(', ')})` : '';
  const withParent = new Set(
    (await preparedRows<{ k: string }>(em, `SELECT DISTINCT e.from_id::text AS k FROM ${g.edges} e WHERE e.from_id IN ${keySet(g)}${typeCond}${readable}`, params)).map((x) => x.k),
  );
  const roots = candidates.filter((c) => !withParent.has(c.k));
  if (roots.length) return roots;
  const farthest = Math.max(...candidates.map((c) => c.depth));
  return candidates.filter((c) => c.depth === farthest);
}

/** The graph form: the records de-duplicated (no `_depth`), the edges among them with `from`/`to`. */
async function graphForm(em: EntityManager, g: GraphTarget, h: HierarchyRequest, nodes: Map<string, RecordRow | string>): Promise<{ data: JsonText; total: number }> {
  const edges = h.depth > 0 ? await edgesAmong(em, g, [...nodes.keys()], h.types) : [];
  const shown = edges.map(({ id, from, to, type, metadata }) => ({ id, from, to, type, metadata }));
  const texts = [...nodes.values()].map((r) => withKeys(r, {}));
  return { data: new JsonText(`{"nodes":[${texts.join(',')}],"edges":${JSON.stringify(shown)}}`), total: nodes.size };
}

/** GET data/{id}/ with hierarchy parameters: the include, tree or graph form around one record. */
export async function hierarchyOfRecord(ctx: ServiceContext, g: GraphTarget, h: HierarchyRequest, id: string, settings: GraphSettings): Promise<Record<string, unknown>> {
  const em = readsOf(ctx);
  const base = await baseRecord(em, g, id);
  if (h.format === 'tree') {
    if (h.depth === 0) return buildTree([base], new Map([[base.k, base.r]]), [], 0);
    const roots = h.include === 'descendants' ? [base] : await naturalRoots(em, g, h, base, settings.maxDepth);
    return trees(em, g, h, roots);
  }
  if (h.format === 'graph') {
    const reached = await reach(em, g, [base.k], { dirs: DIRS[h.include ?? 'both'], types: h.types, depth: h.depth });
    const nodes = new Map<string, RecordRow | string>([[base.k, base.r]]);
    for (const x of reached) if (!nodes.has(x.k)) nodes.set(x.k, x.r);
    return graphForm(em, g, h, nodes);
  }
  const data = new JsonText(withKeys(base.r, {}));
  if (!h.include || h.depth === 0) return { data };
  const reached = await reach(em, g, [base.k], { dirs: DIRS[h.include], types: h.types, depth: h.depth });
  return { data, ...Object.fromEntries([...labelled(g, h, reached)].map(([label, items]) => [label, asText(items)])) };
}

/**
 * GET data/ with hierarchy parameters. The list's conditions, search, sort and pages select the
 * records; include form: each carries its arrays; tree form: the selected records with no parent
 * (the caller may read, through a followed type) are the roots; graph form: the selected
 * records, and what `include` reaches from them.
 */
export async function hierarchyOfList(ctx: ServiceContext, g: GraphTarget, h: HierarchyRequest, query: Record<string, unknown>): Promise<Record<string, unknown>> {
  const em = readsOf(ctx);
  const t = g.t;
  const conditions = Object.fromEntries(Object.entries(query).filter(([k]) => !HIERARCHY_PARAMS.includes(k)));
  const { where, orderBy } = await listQuery(em, t, conditions);
  const p = pageOf(query);
  let filter = where;
  if (h.format === 'tree') {
    const readable = t.readable === ALL_ROWS ? '' : ` AND EXISTS (SELECT 1 FROM ${t.table} t WHERE ${g.key.sql} = e.to_id AND (${t.readable.sql}))`;
    const typeCond = h.types ? ` AND e.type IN (${h.types.map(() => '?').join(', ')})` : '';
    filter = {
      sql: `(${where.sql}) AND NOT EXISTS (SELECT 1 FROM ${g.edges} e WHERE e.from_id = ${g.key.sql}${typeCond}${readable})`,
      params: [...where.params, ...(h.types ?? []), ...(t.readable === ALL_ROWS ? [] : t.readable.params)],
    };
  }
  const total = await countOf(em, `SELECT count(*) AS n FROM ${t.table} t WHERE ${filter.sql}`, filter.params);
  const page = await preparedRows<{ r: RecordRow | string; k: string }>(
    em,
    `SELECT ${t.jsonSql ?? t.recordSql('t')} AS r, ${g.key.sql}::text AS k FROM ${t.table} t WHERE ${filter.sql} ORDER BY ${orderBy} LIMIT ? OFFSET ?`,
    [...filter.params, p.limit, p.offset],
  );
  const selected = page.map((x) => ({ k: x.k, r: t.jsonSql ? x.r : plain(t, x.r as RecordRow) }));
  const envelope = { page: p.page, page_size: p.pageSize };
  if (h.format === 'tree') return { ...(await trees(em, g, h, selected)), ...envelope };
  if (h.format === 'graph') {
    const nodes = new Map(selected.map((x) => [x.k, x.r]));
    if (h.include) for (const x of await reach(em, g, [...nodes.keys()], { dirs: DIRS[h.include], types: h.types, depth: h.depth })) if (!nodes.has(x.k)) nodes.set(x.k, x.r);
    return { ...(await graphForm(em, g, h, nodes)), ...envelope };
  }
  if (!h.include || h.depth === 0) return { data: asText(selected.map((x) => withKeys(x.r, {}))), total, ...envelope };
  const reached = await reach(em, g, selected.map((x) => x.k), { dirs: DIRS[h.include], types: h.types, depth: h.depth });
  const byBase = new Map<number, Reached[]>();
  for (const x of reached) {
    const list = byBase.get(x.bi);
    if (list) list.push(x);
    else byBase.set(x.bi, [x]);
  }
  const items = selected.map((x, i) => withJson(x.r, [...labelled(g, h, byBase.get(i + 1) ?? [])].map(([label, list]) => [label, `[${list.join(',')}]`])));
  return { data: asText(items), total, ...envelope };
}
