// A hierarchy table's companions as materialization makes them: the key column type the edges
// reference, and the names they take in the site schema (free, or a 400 naming the clash).
import type { EntityManager } from '@mikro-orm/postgresql';
import { firstRow } from '../../db/sql.ts';
import { quotedSchema } from '../../tenancy/schema.ts';
import { physicalExists } from '../datatable.queries.ts';
import { columnType, type ProviderType } from '../ddl.ts';
import { declaredKey, type TableSchema } from '../table-schema.ts';
import { companionNames, edgesTableDdl } from './ddl.ts';

/** The PostgreSQL type of the key column the edges reference (a single-field key; docstore and undeclared keys: uuid). */
export function keyColumnType(schema: TableSchema, provider: ProviderType): string {
  const key = declaredKey(schema);
  if (provider === 'docstore' || !key) return 'uuid';
  return columnType(schema.fields.find((f) => f.name === key[0])!);
}

/** The DDL of the companions of a table being materialized, or the problems that prevent it. */
export async function edgesDdlFor(em: EntityManager, site: string, physical: string, schema: TableSchema, provider: ProviderType): Promise<{ ddl: string[]; problems: string[] }> {
  const problems: string[] = [];
  const { tables, others } = companionNames(physical);
  for (const name of [...tables, ...others]) {
    const row = await firstRow<{ name: string }>(em, `SELECT name FROM ${quotedSchema(site)}.data_tables WHERE physical_table_name = ?`, [name]);
    if (row || (await physicalExists(em, site, name))) {
      problems.push(`hierarchy: the companion "${name}" of the edges cannot be created: ${row ? `data table "${row.name}" has that physical name` : 'a relation of that name exists in the site schema'}.`);
    }
  }
  return { ddl: problems.length ? [] : edgesTableDdl(site, physical, keyColumnType(schema, provider)), problems };
}
