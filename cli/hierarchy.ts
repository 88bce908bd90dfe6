// The hierarchy side of `platform data list/get` (docs/hierarchy.md): the flags that become the
// data routes' hierarchy parameters, and the answers as a person reads them.
import { Flags } from '@oclif/core';
import { table } from './output.ts';
import { recordLines, recordsTable, plural, type RecordRow } from './tables.ts';

export const hierarchyFlags = {
  include: Flags.string({ summary: 'Hierarchy tables: the related records to add, descendants, ancestors or both.' }),
  depth: Flags.string({ summary: 'Hierarchy tables: how many levels to follow (0 to DATA_SERVICE_GRAPH_MAX_DEPTH; default: the maximum).' }),
  format: Flags.string({ summary: 'Hierarchy tables: include (default), tree or graph.' }),
  'relationship-type': Flags.string({ summary: 'Hierarchy tables: follow only edges of this type (repeatable).', multiple: true }),
};

export interface HierarchyFlags {
  include?: string;
  depth?: string;
  format?: string;
  'relationship-type'?: string[];
}

/** The flags as the data routes' query parameters (undefined ones are left out). */
export const hierarchyQuery = (f: HierarchyFlags) => ({ include: f.include, depth: f.depth, format: f.format, relationship_type: f['relationship-type'] });

/** Whether the command asks for a hierarchy answer (then it is rendered by hierarchyLines). */
export const asksHierarchy = (f: HierarchyFlags): boolean => [f.include, f.depth, f.format, f['relationship-type']].some((v) => v !== undefined);

type Node = RecordRow & { children?: Node[]; _depth?: number; _relationship_type?: string };
const KEYS = new Set(['children', '_depth', '_relationship_type']);

/** A record on one line: its fields `name=value`, the hierarchy's own keys left out. */
function oneLine(r: RecordRow): string {
  return Object.entries(r)
    .filter(([k]) => !KEYS.has(k))
    .map(([k, v]) => `${k}=${v !== null && typeof v === 'object' ? JSON.stringify(v) : String(v)}`)
    .join(' ');
}

/** A tree as indented lines: `└ (type) fields`. */
function treeLines(nodes: Node[], indent = ''): string[] {
  return nodes.flatMap((n) => [`${indent}${n._relationship_type ? `└ (${n._relationship_type}) ` : ''}${oneLine(n)}`, ...treeLines(n.children ?? [], `${indent}  `)]);
}

/** A hierarchy answer (include, tree or graph form) as text. */
export function hierarchyLines(body: Record<string, unknown>, format: string | undefined): string {
  if (format === 'tree') return [...treeLines(body.data as Node[]), '', plural(body.total as number, 'record')].join('\n');
  if (format === 'graph') {
    const g = body.data as { nodes: RecordRow[]; edges: RecordRow[] };
    const edges = g.edges.length ? table(g.edges, [
      { header: 'From', get: (e) => String(e.from) },
      { header: 'Type', get: (e) => String(e.type) },
      { header: 'To', get: (e) => String(e.to) },
      { header: 'Edge', get: (e) => String(e.id) },
    ]) : 'no edges';
    return [recordsTable(g.nodes), '', edges, '', `${plural(body.total as number, 'record')}, ${plural(g.edges.length, 'edge')}`].join('\n');
  }
  const { data, total, page, page_size: _size, ...related } = body;
  if (Array.isArray(data)) return [recordsTable(data as RecordRow[]), '', plural(total as number, 'record') + (page ? ` (page ${page})` : '')].join('\n');
  const out = [recordLines(data as RecordRow)];
  for (const [label, items] of Object.entries(related)) {
    out.push('', `${label}: ${plural((items as unknown[]).length, 'record')}`);
    if ((items as unknown[]).length) out.push(recordsTable(items as RecordRow[]));
  }
  return out.join('\n');
}
