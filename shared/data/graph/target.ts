// A hierarchy table as the edge routes and traversals see it: the records API's Target (the
// table, its policies) plus its companions' names, its key column and its edge types.
import { DomainError } from '../../errors.ts';
import { quoteIdent } from '../../db/sql.ts';
import { quotedSchema } from '../../tenancy/schema.ts';
import type { ColumnInfo } from '../query/filter.ts';
import type { Target } from '../records/target.ts';
import { closureTableName, edgesTableName } from './ddl.ts';
import { UNTYPED_LABELS, edgeTypesOf, hasEdges, type EdgeType } from './schema.ts';
import { keyColumnType } from './tables.ts';

export interface GraphTarget {
  t: Target;
  /** `"schema"."{physical}_edges"` and `"schema"."{physical}_edges_closure"`. */
  edges: string;
  closure: string;
  /** The key column over alias `t` (its `sql`) and its PostgreSQL type. */
  key: ColumnInfo;
  keyType: string;
  /** The declared edge types, by name (empty: any type name). */
  types: Map<string, EdgeType>;
}

/** The graph of a materialized table; 400 when the table has no edges. */
export function graphTarget(t: Target): GraphTarget {
  if (!hasEdges(t.schema)) throw new DomainError('BAD_REQUEST', `Data table "${t.name}" has no edges: its schema does not set hierarchy: true (with graph.enabled).`);
  const physical = t.row.src_physical ?? t.row.physical_table_name;
  const q = quotedSchema(t.site);
  return {
    t,
    edges: `${q}.${quoteIdent(edgesTableName(physical))}`,
    closure: `${q}.${quoteIdent(closureTableName(physical))}`,
    key: t.columns.get(t.pk[0]!)!,
    keyType: keyColumnType(t.schema, t.provider),
    types: new Map(edgeTypesOf(t.schema).map((x) => [x.name, x])),
  };
}

/** The include form's key of records reached through `type`: the inverse label (descendants) or the name (ancestors). */
export function labelOf(g: GraphTarget, type: string, dir: 'descendants' | 'ancestors'): string {
  const declared = g.types.get(type);
  if (!declared) return UNTYPED_LABELS[dir];
  return dir === 'descendants' ? declared.inverse : declared.name;
}

/** `?` bound to keyArray(keys), as a set of key values (`value`): one array parameter, so the planner reads the edges by index per key. */
export const keySet = (g: GraphTarget): string => `(SELECT value FROM unnest(?::${g.keyType}[]) AS value)`;

/** Key texts as one PostgreSQL array literal (elements quoted, `"` and `\` escaped): a bound value, never SQL. */
export const keyArray = (keys: string[]): string => `{${keys.map((k) => `"${k.replace(/[\\"]/g, '\\$&')}"`).join(',')}}`;
