// The graph part of a Table Schema (spec Part 2 §2 "Graph edge"): `hierarchy` and `graph`
// {enabled, types: [{name, inverse, constraints {max_outgoing, max_incoming}, description}]}.
// Validation reports every problem (as table-schema.ts does); the accessors give the settings
// the edge and traversal code works with. docs/hierarchy.md.
import type { TableSchema } from '../table-schema.ts';

/** An edge type name (and an inverse label): it becomes a key of the include form, so identifier-like. */
export const EDGE_TYPE_RE = /^[A-Za-z][A-Za-z0-9_]{0,49}$/;
export const EDGE_TYPE_MAX = 50;

export interface EdgeConstraints {
  max_outgoing?: number | null;
  max_incoming?: number | null;
}
export interface EdgeType {
  name: string;
  inverse: string;
  constraints?: EdgeConstraints;
  description?: string;
}
export interface GraphConfig {
  enabled?: boolean;
  types?: EdgeType[];
}

/**
 * Keys of the include form when graph.types declares no type: the related records go under
 * `descendants` and `ancestors`. Keys every hierarchy response adds to records: tree nodes'
 * `children`, and `_depth` / `_relationship_type` on related records.
 */
export const UNTYPED_LABELS = { descendants: 'descendants', ancestors: 'ancestors' } as const;
const NODE_KEYS = ['children', '_depth', '_relationship_type'];
/** The include form's envelope key: no label may take it. */
const ENVELOPE_KEY = 'data';

const GRAPH_KEYS = ['enabled', 'types'];
const TYPE_KEYS = ['name', 'inverse', 'constraints', 'description'];
const CONSTRAINT_KEYS = ['max_outgoing', 'max_incoming'];

const isObj = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const show = (v: unknown) => JSON.stringify(v);

/** The graph settings of a schema as stored (validated). */
export const graphOf = (s: Pick<TableSchema, 'graph'>): GraphConfig => (s.graph ?? {}) as GraphConfig;

/** Whether a table has edges: `hierarchy: true` and `graph.enabled` not false. */
export const hasEdges = (s: Pick<TableSchema, 'hierarchy' | 'graph'>): boolean => s.hierarchy === true && graphOf(s).enabled !== false;

/** The declared edge types (empty: any type name is accepted). */
export const edgeTypesOf = (s: Pick<TableSchema, 'graph'>): EdgeType[] => graphOf(s).types ?? [];

function checkType(raw: unknown, i: number, columns: ReadonlySet<string>, errors: string[]): void {
  if (!isObj(raw)) {
    errors.push(`graph.types[${i}]: must be an object.`);
    return;
  }
  const at = typeof raw.name === 'string' ? `graph type '${raw.name}'` : `graph.types[${i}]`;
  for (const k of Object.keys(raw)) if (!TYPE_KEYS.includes(k)) errors.push(`${at}: unknown property '${k}'.`);
  for (const k of ['name', 'inverse'] as const) {
    const v = raw[k];
    if (v === undefined) errors.push(`${at}: ${k} is required.`);
    else if (typeof v !== 'string' || !EDGE_TYPE_RE.test(v)) {
      errors.push(`${at}: ${k} ${show(v)} must be 1 to ${EDGE_TYPE_MAX} characters: a letter, then letters, digits or _.`);
    } else if (v === ENVELOPE_KEY || columns.has(v)) {
      errors.push(`${at}: ${k} '${v}' would be a key of the include form beside ${v === ENVELOPE_KEY ? "the record's 'data'" : `the field '${v}'`}; choose another.`);
    }
  }
  if (raw.description !== undefined && typeof raw.description !== 'string') errors.push(`${at}: description must be a string.`);
  if (raw.constraints === undefined) return;
  if (!isObj(raw.constraints)) {
    errors.push(`${at}: constraints must be an object.`);
    return;
  }
  for (const [k, v] of Object.entries(raw.constraints)) {
    if (!CONSTRAINT_KEYS.includes(k)) errors.push(`${at}: unknown constraint '${k}' (max_outgoing, max_incoming).`);
    else if (v !== null && !(Number.isSafeInteger(v) && (v as number) >= 0)) errors.push(`${at}: constraint ${k} must be a non-negative integer or null.`);
  }
}

/**
 * Every problem of `hierarchy` and `graph`, appended to `errors`. `columns` are the record's
 * fields (and the generated `id`); `key` the primary key's fields (empty: the generated `id`).
 */
export function checkGraph(doc: Record<string, unknown>, columns: ReadonlySet<string>, key: readonly string[], errors: string[]): void {
  if (doc.hierarchy !== undefined && typeof doc.hierarchy !== 'boolean') errors.push('hierarchy must be a boolean.');
  const graph = doc.graph;
  if (graph !== undefined && !isObj(graph)) errors.push('graph must be an object.');
  const g = isObj(graph) ? graph : {};
  for (const k of Object.keys(g)) if (!GRAPH_KEYS.includes(k)) errors.push(`graph: unknown property '${k}' (enabled, types).`);
  if (g.enabled !== undefined && typeof g.enabled !== 'boolean') errors.push('graph.enabled must be a boolean.');
  const types = g.types;
  if (types !== undefined && !Array.isArray(types)) errors.push('graph.types must be an array.');
  const list = Array.isArray(types) ? types : [];
  list.forEach((t, i) => checkType(t, i, columns, errors));
  // Names and inverses are keys of one response: each may be used once.
  const labels = list.flatMap((t) => (isObj(t) ? [t.name, t.inverse] : [])).filter((v): v is string => typeof v === 'string');
  for (const d of new Set(labels.filter((v, i) => labels.indexOf(v) !== i))) errors.push(`graph.types: '${d}' is used more than once (names and inverses are keys of one response).`);
  if (doc.hierarchy !== true || g.enabled === false) return;
  if (key.length > 1) errors.push(`hierarchy needs a single-field primary key (edges reference one key column); primaryKey has ${key.length} fields (${key.join(', ')}).`);
  const reserved = [...NODE_KEYS, ...(list.length ? [] : Object.values(UNTYPED_LABELS))];
  for (const name of reserved) {
    if (columns.has(name)) errors.push(`Field '${name}': the name is a key of hierarchy responses${NODE_KEYS.includes(name) ? '' : ' when graph.types declares no type'}; rename the field.`);
  }
}
