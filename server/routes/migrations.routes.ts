// Schema migrations of a data table (spec Part 2 §4 "Schema migration endpoints"), served with
// and without the data source segment like every per-table route. The migration itself is the
// table's PATCH (datatables.routes.ts). docs/migrations.md.
import { paginated, sendPage } from '../http/envelopes.ts';
import type { RouteDef } from '../http/registry.ts';
import * as migrations from '../../shared/data/migrations/migration.service.ts';
import {
  HistoryQuery, Preview, PreviewBody, RollbackBody, RollbackResult, SchemaOperation, SchemaValidation, ValidateSchemaBody,
} from '../../shared/data/migrations/migration.schemas.ts';
import { perTable, scopeOf } from './datatables.routes.ts';

const WHO_WRITE = 'Site administrators, when the app\'s policies allow `update` on the table.';

export function migrationRoutes(publicUrl: string | undefined): RouteDef[] {
  return [
    ...perTable({
      method: 'post',
      suffix: 'preview-changes/',
      operationId: 'datatables_preview_changes',
      summary: 'What a PATCH with this schema would do',
      description: `Nothing runs. operations: {type, column, sql, is_safe} in the order they would run; warnings name unsafe operations and what a rollback could not restore; estimated_duration_ms from the table's size. ${WHO_WRITE}`,
      body: PreviewBody,
      responses: { 200: Preview },
      async handler(ctx, { params, body }) {
        ctx.body = await migrations.previewChanges(ctx.state.service(), scopeOf(params), params.name!, body);
      },
    }),
    ...perTable({
      method: 'post',
      suffix: 'validate-schema/',
      operationId: 'datatables_validate_schema',
      summary: 'Validate a schema for this table',
      description: 'valid: the schema is a valid table schema and a migration to it could run (unsafe operations count as errors unless the data source allows data loss); warnings: foreign-key targets not materialized yet, what a migration would lose or not restore. Any user of the site who may read the table.',
      body: ValidateSchemaBody,
      responses: { 200: SchemaValidation },
      async handler(ctx, { params, body }) {
        ctx.body = await migrations.validateSchema(ctx.state.service(), scopeOf(params), params.name!, body);
      },
    }),
    ...perTable({
      method: 'get',
      suffix: 'operation-history/',
      operationId: 'datatables_operation_history',
      summary: 'The table\'s schema operations, newest first',
      description: 'CREATE_TABLE (materialize), ALTER_TABLE (migrations), ROLLBACK, with their steps (migration_operations), SQL and rollback SQL. `limit` (default 10)/`offset` or `page`/`page_size`; `status` success, failed, rolled_back, in_progress, pending. Any user of the site who may read the table.',
      query: HistoryQuery,
      responses: { 200: paginated(SchemaOperation) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await migrations.operationHistory(ctx.state.service(), scopeOf(params), params.name!, query), publicUrl);
      },
    }),
    ...perTable({
      method: 'post',
      suffix: 'rollback/',
      operationId: 'datatables_rollback',
      summary: 'Roll back a migration',
      description: `Runs the migration's stored rollback SQL in one transaction: 200 {success, message, operations_reversed, new_status: ROLLED_BACK, revision_id (the ROLLBACK operation), warnings (the migration's rollback_warnings), data_loss (what the rollback itself destroys, counted: values of the columns the migration added, edges of the hierarchy it switched on)}. With dry_run: the same checks and answer (revision_id null), nothing changed. 400 for a revision rolled back already, a failed one or one that is not a migration; 409 while a later migration stands; 404 for an unknown revision. ${WHO_WRITE}`,
      body: RollbackBody,
      responses: { 200: RollbackResult },
      async handler(ctx, { params, body }) {
        ctx.body = await migrations.rollbackMigration(ctx.state.service(), scopeOf(params), params.name!, body);
      },
    }),
  ];
}
