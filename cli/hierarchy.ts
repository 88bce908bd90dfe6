// The hierarchy side of `platform data list/get` (docs/hierarchy.md): the flags that become the
// data routes' hierarchy parameters, and the answers as a person reads them.
import { Flags } from '@oclif/core';
import { columns, table } from './output.ts';
import { recordLines, recordsTable, plural, type RecordRow } from './tables.ts';

export const hierarchyFlags = {
  include: Flags.string({ summary: 'Hierarchy tables: the related records to add, descendants, ancestors or both.' }),
  depth: Flags.string({ summary: 'Hierarchy tables: how many levels to follow (0 to DATA_SERVICE_GRAPH_MAX_DEPTH; default: the maximum).' }),
  format: Flags.string({ summary: 'Hierarchy tables: include (default), tree or graph.' }),
  'relationship-type': Flags.string({ summary: 'Hierarchy tables: follow only edges of this type (repeatable).', multiple: true }),
};

type HierarchyFlags = { include?: string; depth?: string; format?: string; 'relationship-type'?: string[] };

/** The flags as the data routes' query parameters (undefined ones are left out). */
export const hierarchyQuery = (f: HierarchyFlags) => ({ include: f.include, depth: f.depth, format: f.format, relationship_type: f['relationship-type'] });

/** Whether the command asks for a hierarchy answer (then it is rendered by hierarchyLines). */
export const asksHierarchy = (f: HierarchyFlags): boolean => Object.values(hierarchyQuery(f)).some((v) => v !== undefined);

type Node = RecordRow & { children?: Node[]; _relationship_type?: string };
const KEYS = new Set(['children', '_depth', '_relationship_type']);

/** A record on one line: its fields `name=value`, the hierarchy's own keys left out. */
const oneLine = (r: RecordRow): string =>
  Object.entries(r)
    .filter(([k]) => !KEYS.has(k))
    .map(([k, v]) => `${k}=${v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(' ');

/** A tree as indented lines: `└ (type) fields`. */
const treeLines = (nodes: Node[], indent = ''): string[] =>
  nodes.flatMap((n) => [`${indent}${n._relationship_type ? `└ (${n._relationship_type}) ` : ''}${oneLine(n)}`, ...treeLines(n.children ?? [], `${indent}  `)]);

/** A hierarchy answer (include, tree or graph form) as text. */
export function hierarchyLines(body: Record<string, unknown>, format: string | undefined): string {
  const count = plural(body.total as number, 'record');
  if (format === 'tree') return [...treeLines(body.data as Node[]), '', count].join('\n');
  if (format === 'graph') {
    const g = body.data as { nodes: RecordRow[]; edges: RecordRow[] };
    return [recordsTable(g.nodes), '', g.edges.length ? table(g.edges, columns('from type to id:edge')) : 'no edges', '', `${count}, ${plural(g.edges.length, 'edge')}`].join('\n');
  }
  const { data, total: _total, page, page_size: _size, ...related } = body;
  if (Array.isArray(data)) return [recordsTable(data as RecordRow[]), '', count + (page ? ` (page ${page})` : '')].join('\n');
  const out = [recordLines(data as RecordRow)];
  for (const [label, items] of Object.entries(related as Record<string, RecordRow[]>)) {
    out.push('', `${label}: ${plural(items.length, 'record')}`);
    if (items.length) out.push(recordsTable(items));
  }
  return out.join('\n');
}
