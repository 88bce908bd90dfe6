// Schema migrations of a data table (spec Part 2 §4 "Schema migration endpoints"): request and
// response shapes. docs/migrations.md.
import { Type, type Static } from '@sinclair/typebox';

const Time = Type.String({ format: 'date-time' });
const Doc = Type.Unknown({ description: 'Frictionless Table Schema (docs/data-tables.md); fields may carry x-rename-from' });

export const OPERATION_STATUSES = ['PENDING', 'IN_PROGRESS', 'SUCCESS', 'FAILED', 'ROLLED_BACK'] as const;
export type OperationStatus = (typeof OPERATION_STATUSES)[number];

export const PreviewBody = Type.Object({ new_schema: Doc }, { additionalProperties: false });
export const ValidateSchemaBody = Type.Object({ schema: Doc }, { additionalProperties: false });
export const RollbackBody = Type.Object(
  {
    revision_id: Type.String({ pattern: '^[0-9a-f]{12}$', description: 'The revision_id of a SUCCESS migration' }),
    dry_run: Type.Optional(Type.Boolean({ description: 'Only check the rollback and say what it would lose (data_loss, warnings); change nothing (default false)' })),
  },
  { additionalProperties: false },
);

export const PlannedOperation = Type.Object({
  type: Type.String({ description: 'add_column, drop_column, rename_column, alter_column_type, set_not_null, … (docs/migrations.md)' }),
  column: Type.Union([Type.String(), Type.Null()]),
  sql: Type.String({ description: 'The statements, separated by ";\\n"' }),
  is_safe: Type.Boolean(),
});
export type PlannedOperation = Static<typeof PlannedOperation>;

export const Preview = Type.Object({
  operations: Type.Array(PlannedOperation),
  is_safe: Type.Boolean(),
  warnings: Type.Array(Type.String()),
  estimated_duration_ms: Type.Integer(),
});
export type Preview = Static<typeof Preview>;

export const SchemaValidation = Type.Object({ valid: Type.Boolean(), errors: Type.Array(Type.String()), warnings: Type.Array(Type.String()) });
export type SchemaValidation = Static<typeof SchemaValidation>;

export const HistoryQuery = Type.Object({
  limit: Type.Optional(Type.String({ pattern: '^[0-9]+$', description: 'Page size with offset (default 10, at most 100)' })),
  offset: Type.Optional(Type.String({ pattern: '^[0-9]+$' })),
  page: Type.Optional(Type.String({ description: 'Page number, or "last" (default 1)' })),
  page_size: Type.Optional(Type.String({ description: 'Operations per page (default 10, at most 100)' })),
  status: Type.Optional(Type.Union(OPERATION_STATUSES.flatMap((s) => [Type.Literal(s.toLowerCase()), Type.Literal(s)]), { description: 'An operation status, in lower or upper case (`failed`, `FAILED`)' })),
});

const Statement = Type.Object({ sql: Type.String(), params: Type.Optional(Type.Array(Type.Unknown())) });

/** An item of `migration_operations` (spec Part 2 §2): one step of the migration. */
export const MigrationOperation = Type.Object({ type: Type.String(), column: Type.Union([Type.String(), Type.Null()]) });

export const SchemaOperation = Type.Object({
  revision_id: Type.String(),
  table: Type.String(),
  operation_type: Type.Union(['CREATE_TABLE', 'ALTER_TABLE', 'ROLLBACK', 'DROP_TABLE'].map((t) => Type.Literal(t))),
  status: Type.Union(OPERATION_STATUSES.map((s) => Type.Literal(s))),
  migration_operations: Type.Array(MigrationOperation, { description: 'The steps, in the order they ran (preview-changes/ shows each one\'s SQL)' }),
  executed_sql: Type.Array(Statement, { description: 'The statements run, with their bound parameters' }),
  rollback_sql: Type.Union([Type.Array(Statement), Type.Null()], { description: 'null: the operation cannot be rolled back' }),
  rollback_warnings: Type.Array(Type.String(), { description: 'What a rollback loses or cannot restore' }),
  error_message: Type.Union([Type.String(), Type.Null()], { description: 'Why it failed (FAILED); null otherwise' }),
  started_at: Time,
  completed_at: Type.Union([Time, Type.Null()]),
  duration_ms: Type.Union([Type.Integer(), Type.Null()], { description: 'The whole operation: lock, plan, statements, record' }),
  parent_operation: Type.Union([Type.String(), Type.Null()], { description: 'The revision_id of the table\'s previous operation (a ROLLBACK: of the migration it reversed)' }),
  description: Type.String(),
  sql: Type.String({ description: 'The statements of executed_sql as one text, separated by ";\\n"' }),
  execution_time_ms: Type.Union([Type.Integer(), Type.Null()], { description: 'The statements alone; null when they did not all run' }),
  old_schema_hash: Type.Union([Type.String(), Type.Null()]),
  new_schema_hash: Type.Union([Type.String(), Type.Null()]),
  created_by: Type.Union([Type.String(), Type.Null()]),
  rolled_back_at: Type.Union([Time, Type.Null()]),
  rolled_back_by: Type.Union([Type.String(), Type.Null()]),
});
export type SchemaOperation = Static<typeof SchemaOperation>;

export const RollbackResult = Type.Object({
  success: Type.Boolean(),
  message: Type.String(),
  operations_reversed: Type.Integer(),
  new_status: Type.Literal('ROLLED_BACK'),
  revision_id: Type.Union([Type.String(), Type.Null()], { description: 'The ROLLBACK operation recorded in the history (null: a dry run)' }),
  warnings: Type.Array(Type.String(), { description: 'The migration\'s rollback_warnings' }),
  data_loss: Type.Array(Type.String(), { description: 'What the rollback itself destroys, counted: values of the columns the migration added, edges of the hierarchy it switched on. Empty: nothing' }),
});
export type RollbackResult = Static<typeof RollbackResult>;
