// Records of data tables (spec Part 2 §4 "Data records"): the response shapes of the records
// API and of the CSV import, used by the routes (validation of the contract, OpenAPI) and by
// the services' return types.
import { Type, type Static } from '@sinclair/typebox';

/** One record: field → value (the table's schema decides which fields). */
export const RecordObject = Type.Record(Type.String(), Type.Unknown());

/** `{data}`: one record. */
export const RecordData = Type.Object({ data: RecordObject });

/** A page of the list: `{data, total, page, page_size}`. */
export const RecordPage = Type.Object({
  data: Type.Array(RecordObject),
  total: Type.Union([Type.Integer(), Type.Null()], { description: 'Matching records: exact by default; the estimate with `_count=planned`; null with `_count=none`.' }),
  page: Type.Integer(),
  page_size: Type.Integer(),
});
export type RecordPage = Static<typeof RecordPage>;

/** Create: one record, or the records of an array body. */
export const RecordsCreated = Type.Object({ data: Type.Union([RecordObject, Type.Array(RecordObject)]) });

/** Upsert: the record and whether it was inserted. */
export const RecordUpserted = Type.Object({ data: RecordObject, created: Type.Boolean() });

/** Bulk patch: the resulting records. */
export const RecordsPatched = Type.Object({ data: Type.Array(RecordObject) });

/** Delete by ids (`ids` given back) or by filter. */
export const RecordsDeleted = Type.Object({ deleted: Type.Integer(), ids: Type.Optional(Type.Array(Type.Unknown())) });

/** The report of a CSV import: the answer of an import or dry run; a failing import's 400 carries it as `data` (`created` 0). */
export const CsvImportReport = Type.Object({
  dry_run: Type.Boolean(),
  // The cells' separator: the one given, else sniffed from the header line (`,` `;` or a tab).
  delimiter: Type.String(),
  // The file's encoding, by its canonical name (`utf-8`, `windows-1252`, `utf-16le`…).
  encoding: Type.String(),
  // Data rows read (the header not counted).
  total_rows: Type.Integer(),
  // Records written (dry run: that would be written); 0 when any row failed.
  created: Type.Integer(),
  // Rows that failed validation or a database check (duplicate key within the file or in the table, missing referenced record…).
  failed: Type.Integer(),
  // The first MAX_REPORTED_ERRORS failing rows: 1-based data row number, errors by field.
  errors: Type.Array(Type.Object({ row: Type.Integer(), errors: Type.Record(Type.String(), Type.Array(Type.String())) })),
});
export type CsvImportReport = Static<typeof CsvImportReport>;
