// The API paths of data tables and records (beside paths.ts): the remote backend requests
// them; the direct backend builds pagination links from the same path and query.
import type { CsvImportOptions, RecordQuery } from './types.ts';

const enc = encodeURIComponent;

export const TABLE_PATHS = {
  tables: (app: string) => `/api/apps/${enc(app)}/datatables/`,
  sourceTables: (app: string, ds: string) => `/api/apps/${enc(app)}/datasources/${enc(ds)}/datatables/`,
  tableStats: (app: string) => `/api/apps/${enc(app)}/datatables/stats/`,
  table: (app: string, name: string) => `/api/apps/${enc(app)}/datatables/${enc(name)}/`,
  tableSchema: (app: string, name: string) => `/api/apps/${enc(app)}/datatables/${enc(name)}/schema/`,
  tableValidate: (app: string, name: string) => `/api/apps/${enc(app)}/datatables/${enc(name)}/validate_data/`,
  tableMaterialize: (app: string, name: string) => `/api/apps/${enc(app)}/datatables/${enc(name)}/materialize/`,
  records: (app: string, name: string) => `/api/apps/${enc(app)}/datatables/${enc(name)}/data/`,
  record: (app: string, name: string, id: string) => `/api/apps/${enc(app)}/datatables/${enc(name)}/data/${enc(id)}/`,
  upsert: (app: string, name: string) => `/api/apps/${enc(app)}/datatables/${enc(name)}/data/upsert/`,
  csvImport: (app: string, name: string) => `/api/apps/${enc(app)}/datatables/${enc(name)}/data/import/`,
} as const;

/** `path?k=v…`: every value of a repeated parameter, in the order given; undefined left out. */
export function withRecordQuery(path: string, query: Record<string, string | string[] | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) {
    if (value === undefined) continue;
    for (const v of Array.isArray(value) ? value : [value]) params.append(key, v);
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

export type { RecordQuery };

/** The query string of a CSV import: `dry_run=true|false`, `mapping=<JSON>` when given. */
export function csvImportQuery(options: CsvImportOptions): Record<string, string | undefined> {
  return { dry_run: options.dry_run ? 'true' : 'false', mapping: options.mapping === undefined ? undefined : JSON.stringify(options.mapping) };
}
