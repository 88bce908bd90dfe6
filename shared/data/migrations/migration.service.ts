// Schema migrations of materialized data tables (spec Part 2 §3, §4 "Schema migration
// endpoints"): a PATCH of json_schema runs the plan of plan.ts in one transaction under the table
// row's lock, recorded as a schema operation; preview, validation, history and rollback.
// docs/migrations.md.
import { randomBytes } from 'node:crypto';
import type { EntityManager } from '@mikro-orm/postgresql';
import { pageOffset, parsePageRequest, resolvePage, type Page } from '../../common/pagination.ts';
import { validate } from '../../common/validation.ts';
import { actorUuid, type ServiceContext } from '../../context.ts';
import { longTransaction } from '../../db/long-operations.ts';
import { countOf, executeNative, firstRow, iso, pgCode, rows, type Timestamp } from '../../db/sql.ts';
import { isStatementTimeout, setLocalStatementTimeout } from '../../db/statement-timeout.ts';
import { DomainError, fieldError, notFound } from '../../errors.ts';
import { quotedSchema } from '../../tenancy/schema.ts';
import { siteSchemaFor } from '../../tenancy/site-access.ts';
import { SELECT, checkedSchema, schemaError, type TableRow, type TableScope } from '../datatable.queries.ts';
import { tableFor } from '../datatable.service.ts';
import { quoteIdent } from '../../db/sql.ts';
import { dropEdgesDdl, edgesTableDdl, edgesTableName } from '../graph/ddl.ts';
import { hasEdges } from '../graph/schema.ts';
import { edgesDdlFor, keyColumnType } from '../graph/tables.ts';
import { foreignKeysOf, schemaHash, type TableSchema } from '../table-schema.ts';
import {
  HistoryQuery, PreviewBody, RollbackBody, ValidateSchemaBody,
  type OperationStatus, type PlannedOperation, type Preview, type RollbackResult, type SchemaOperation, type SchemaValidation,
} from './migration.schemas.ts';
import { estimatedMs, planMigration, type Plan, type PlanInput, type Statement, type Step } from './plan.ts';

/** The limits of a migration's transaction: its statements (spec §8: 30 s) and each wait for a lock. */
export function migrationLimits(env: NodeJS.ProcessEnv = process.env): { timeoutMs: number; lockTimeoutMs: number } {
  const int = (name: string, fallback: number) => {
    const v = env[name];
    return v !== undefined && /^\d{1,9}$/.test(v) ? Number(v) : fallback;
  };
  return { timeoutMs: int('DATA_SERVICE_MIGRATION_TIMEOUT_MS', 30_000), lockTimeoutMs: int('DATA_SERVICE_MIGRATION_LOCK_TIMEOUT_MS', 10_000) };
}

type OperationType = SchemaOperation['operation_type'];

interface OperationRow {
  id: string;
  revision_id: string;
  data_table_id: number;
  table_name: string;
  operation_type: OperationType;
  status: OperationStatus;
  operations: PlannedOperation[];
  executed_sql: Statement[];
  rollback_sql: Statement[] | null;
  rollback_warnings: string[];
  old_schema: TableSchema | null;
  new_schema: TableSchema | null;
  old_schema_hash: string | null;
  new_schema_hash: string | null;
  parent_revision_id: string | null;
  description: string;
  error: string | null;
  started_at: Timestamp;
  completed_at: Timestamp | null;
  duration_ms: number | null;
  execution_time_ms: number | null;
  created_by: string | null;
  rolled_back_at: Timestamp | null;
  rolled_back_by: string | null;
}

const OPERATION_SELECT = (q: string) => `
  SELECT o.*, p.revision_id AS parent_revision_id FROM ${q}.schema_operations o LEFT JOIN ${q}.schema_operations p ON p.id = o.parent_id`;

const trim = (v: string | null): string | null => (v === null ? null : v.trim());

function operationView(r: OperationRow): SchemaOperation {
  return {
    revision_id: r.revision_id.trim(),
    table: r.table_name,
    operation_type: r.operation_type,
    status: r.status,
    migration_operations: r.operations.map((o) => ({ type: o.type, column: o.column })),
    executed_sql: r.executed_sql,
    rollback_sql: r.rollback_sql,
    rollback_warnings: r.rollback_warnings,
    error_message: r.error,
    started_at: iso(r.started_at),
    completed_at: r.completed_at === null ? null : iso(r.completed_at),
    duration_ms: r.duration_ms,
    parent_operation: trim(r.parent_revision_id),
    description: r.description,
    sql: r.executed_sql.map((st) => st.sql).join(';\n'),
    execution_time_ms: r.execution_time_ms,
    old_schema_hash: trim(r.old_schema_hash),
    new_schema_hash: trim(r.new_schema_hash),
    created_by: r.created_by,
    rolled_back_at: r.rolled_back_at === null ? null : iso(r.rolled_back_at),
    rolled_back_by: r.rolled_back_by,
  };
}

const plannedOperations = (steps: Step[]): PlannedOperation[] =>
  steps.map((st) => ({ type: st.type, column: st.column ?? null, sql: st.sql.map((x) => x.sql).join(';\n'), is_safe: st.is_safe }));
const forward = (steps: Step[]): Statement[] => steps.flatMap((st) => st.sql);
const backward = (steps: Step[]): Statement[] => [...steps].reverse().flatMap((st) => st.rollback);
const stepWarnings = (steps: Step[]): string[] => [...new Set(steps.flatMap((st) => st.warnings))];

/** Runs the statements; the milliseconds they took. */
async function runStatements(tx: EntityManager, statements: Statement[]): Promise<number> {
  const started = Date.now();
  for (const st of statements) {
    const found = await executeNative(tx, st.sql, st.params);
    if (st.expectNone && found.length) throw new DomainError('BAD_REQUEST', st.expectNone);
  }
  return Date.now() - started;
}

/** The operation SUCCESS, with its times. */
const markSucceeded = (em: EntityManager, schema: string, id: string, started: number, executionMs: number) =>
  em.execute(`UPDATE ${quotedSchema(schema)}.schema_operations SET status = 'SUCCESS', completed_at = now(), duration_ms = ?, execution_time_ms = ? WHERE id = ?`, [Date.now() - started, executionMs, id]);

/** What the database holds that a plan needs: constraints, row estimate, foreign-key targets and referrers. */
async function planInput(em: EntityManager, schema: string, row: TableRow, next: TableSchema): Promise<PlanInput> {
  const q = quotedSchema(schema);
  const relation = `${q}.${quoteIdent(row.physical_table_name)}`;
  const constraints = await rows<{ name: string; type: string; columns: string[] }>(
    em,
    `SELECT c.conname AS name, c.contype AS type,
            ARRAY(SELECT a.attname::text FROM unnest(c.conkey) WITH ORDINALITY k(n, i) JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k.n ORDER BY k.i) AS columns
       FROM pg_constraint c WHERE c.conrelid = to_regclass(?)`,
    [relation],
  );
  const estimate = await firstRow<{ n: number }>(em, 'SELECT greatest(reltuples, 0)::bigint AS n FROM pg_class WHERE oid = to_regclass(?)', [relation]);
  const others = await rows<{ name: string; json_schema: TableSchema; physical: string; is_materialized: boolean }>(
    em,
    `SELECT t.name, t.json_schema, coalesce(s.physical_table_name, t.physical_table_name) AS physical, t.is_materialized
       FROM ${q}.data_tables t LEFT JOIN ${q}.data_tables s ON s.id = t.source_table_id WHERE t.app_id = ? AND t.id <> ?`,
    [row.app_id, row.id],
  );
  const physical = new Map(others.filter((o) => o.is_materialized).map((o) => [o.name, o.physical]));
  const referenced = new Map<string, string[]>();
  for (const o of others) {
    for (const fk of foreignKeysOf(o.json_schema)) {
      if (fk.reference.resource !== row.name) continue;
      for (const f of fk.reference.fields) referenced.set(f, [...new Set([...(referenced.get(f) ?? []), o.name])]);
    }
  }
  let edges: PlanInput['edges'];
  if (hasEdges(row.json_schema) !== hasEdges(next)) {
    // Switched on: the companions' names must be free; switched off: they exist (the rollback re-creates them).
    let create = edgesTableDdl(schema, row.physical_table_name, keyColumnType(row.json_schema, row.provider_type));
    if (hasEdges(next)) {
      const made = await edgesDdlFor(em, schema, row.physical_table_name, next, row.provider_type);
      if (made.problems.length) throw schemaError(made.problems, 'The schema change cannot be applied.');
      create = made.ddl;
    }
    edges = { create, drop: dropEdgesDdl(schema, row.physical_table_name) };
  }
  return {
    schema, table: row.physical_table_name, provider: row.provider_type, old: row.json_schema, next, edges,
    catalog: { constraints: constraints.map((c) => ({ ...c, type: String(c.type) })), rows: Number(estimate?.n ?? 0) },
    resolveTable: (resource) => (resource === '' || resource === row.name ? row.physical_table_name : physical.get(resource)),
    referenced,
  };
}

/** The 400 of a plan that cannot run: its errors, or its unsafe steps without the data source's allow_data_loss. */
function refuse(plan: Plan, allowDataLoss: boolean, datasource: string): void {
  if (plan.errors.length) throw schemaError(plan.errors, 'The schema change cannot be applied.');
  const unsafe = plan.steps.filter((st) => !st.is_safe);
  if (unsafe.length && !allowDataLoss) {
    const messages = unsafe.map((st) => `Unsafe operation ${st.type}${st.column ? ` (${st.column})` : ''}: ${st.unsafe}.`);
    throw new DomainError(
      'VALIDATION_ERROR',
      `The schema change has unsafe operations; they run only when the data source "${datasource}" allows data loss (provider_config.allow_data_loss: platform datasource update ${datasource} --allow-data-loss).`,
      { errors: { json_schema: messages }, extra: { json_schema: messages, unsafe_operations: unsafe.map((st) => ({ type: st.type, column: st.column ?? null, reason: st.unsafe })) } },
    );
  }
}

const allowsDataLoss = async (em: EntityManager, schema: string, sourceId: number): Promise<boolean> =>
  (await firstRow<{ allow: boolean }>(em, `SELECT coalesce(provider_config -> 'allow_data_loss' = 'true'::jsonb, false) AS allow FROM ${quotedSchema(schema)}.data_sources WHERE id = ?`, [sourceId]))?.allow === true;

const newRevision = (): string => randomBytes(6).toString('hex');

interface NewOperation {
  table: TableRow;
  type: OperationType;
  status: OperationStatus;
  steps: Step[];
  executed?: Statement[];
  rollback: Statement[] | null;
  warnings?: string[];
  oldSchema: TableSchema | null;
  newSchema: TableSchema | null;
  parentId: string | null;
  description?: string;
  completed?: boolean;
}

/** Records an operation; its id and revision. */
async function insertOperation(em: EntityManager, schema: string, ctx: ServiceContext, o: NewOperation): Promise<{ id: string; revision: string }> {
  const revision = newRevision();
  const row = await firstRow<{ id: string }>(
    em,
    `INSERT INTO ${quotedSchema(schema)}.schema_operations
       (revision_id, data_table_id, app_id, table_name, operation_type, status, operations, executed_sql, rollback_sql, rollback_warnings,
        old_schema, new_schema, old_schema_hash, new_schema_hash, parent_id, description, created_by, completed_at, duration_ms, execution_time_ms)
     VALUES (?, ?, ?, ?, ?, ?, ?::jsonb, ?::jsonb, ?::jsonb, ?::jsonb, ?::jsonb, ?::jsonb, ?, ?, ?, ?, ?, ${o.completed ? 'now()' : 'NULL'}, ${o.completed ? '0' : 'NULL'}, ${o.completed ? '0' : 'NULL'})
     RETURNING id`,
    [
      revision, o.table.id, o.table.app_id, o.table.name, o.type, o.status, JSON.stringify(plannedOperations(o.steps)), JSON.stringify(o.executed ?? forward(o.steps)),
      o.rollback === null ? null : JSON.stringify(o.rollback), JSON.stringify(o.warnings ?? stepWarnings(o.steps)),
      o.oldSchema === null ? null : JSON.stringify(o.oldSchema), o.newSchema === null ? null : JSON.stringify(o.newSchema),
      o.oldSchema === null ? null : schemaHash(o.oldSchema), o.newSchema === null ? null : schemaHash(o.newSchema), o.parentId, o.description ?? '', actorUuid(ctx),
    ],
  );
  return { id: row!.id, revision };
}

/** The table's last operation (the parent of its next one). */
const lastOperation = async (em: EntityManager, schema: string, tableId: number): Promise<string | null> =>
  (await firstRow<{ id: string }>(em, `SELECT id FROM ${quotedSchema(schema)}.schema_operations WHERE data_table_id = ? ORDER BY id DESC LIMIT 1`, [tableId]))?.id ?? null;

/**
 * CREATE_TABLE (materialize) and DROP_TABLE (delete), recorded in the transaction that does it.
 * Neither can be rolled back: a table is deleted, or created again, through its own routes.
 */
export async function recordTableOperation(tx: EntityManager, schema: string, ctx: ServiceContext, table: TableRow, type: 'CREATE_TABLE' | 'DROP_TABLE', statements: string[]): Promise<void> {
  await insertOperation(tx, schema, ctx, {
    table, type, status: 'SUCCESS', steps: [], executed: statements.map((sql) => ({ sql })), rollback: null, warnings: [],
    oldSchema: type === 'DROP_TABLE' ? table.json_schema : null, newSchema: type === 'CREATE_TABLE' ? table.json_schema : null,
    parentId: await lastOperation(tx, schema, table.id), completed: true,
  });
}

/** The transaction's limits, then the table row's lock (a concurrent change waits, then fails: 409). */
async function lockTable(tx: EntityManager, schema: string, tableId: number): Promise<TableRow> {
  const limits = migrationLimits();
  await setLocalStatementTimeout(tx, limits.timeoutMs);
  await tx.execute(`SELECT set_config('lock_timeout', ?, true)`, [String(limits.lockTimeoutMs)]);
  const row = await firstRow<TableRow>(tx, `${SELECT(quotedSchema(schema))} WHERE t.id = ? FOR UPDATE OF t`, [tableId]);
  if (!row) throw notFound();
  // Under the lock no other change of this table runs: one still marked running was cut off
  // (its process ended; PostgreSQL rolled its transaction back).
  await tx.execute(
    `UPDATE ${quotedSchema(schema)}.schema_operations SET status = 'FAILED', completed_at = now(), error = 'Interrupted: the process ended before the operation finished; nothing was changed.'
      WHERE data_table_id = ? AND status IN ('PENDING', 'IN_PROGRESS')`,
    [tableId],
  );
  return row;
}

/** A failure inside a migration or rollback as the caller's error (the transaction is rolled back). */
function failure(err: unknown, what: string, table: string, revision?: string): unknown {
  const extra = revision ? { revision_id: revision } : undefined;
  if (err instanceof DomainError) return revision ? new DomainError(err.code, err.message, { ...(err.errors ? { errors: err.errors } : {}), extra: { ...extra } }) : err;
  const code = pgCode(err);
  const said = (err as Error).message.split('\n')[0]!.replace(/^.* - /, '');
  if (code === '55P03') return new DomainError('CONFLICT', `Another change of data table "${table}" holds its lock (or a long query holds the table); retry. Nothing was changed.`, { extra });
  if (isStatementTimeout(err)) return new DomainError('BAD_REQUEST', `The ${what} ran past its limit of ${migrationLimits().timeoutMs / 1000} s; nothing was changed.`, { extra });
  if (code && /^(2[23]|42|0A)/.test(code)) return new DomainError('BAD_REQUEST', `The ${what} failed and changed nothing: ${said}`, { extra });
  return err;
}

const markFailed = async (em: EntityManager, schema: string, id: string, started: number, err: unknown): Promise<void> => {
  const message = err instanceof DomainError ? err.message : (err as Error).message.split('\n')[0]!.replace(/^.* - /, '');
  await em.execute(
    `UPDATE ${quotedSchema(schema)}.schema_operations SET status = 'FAILED', error = ?, completed_at = now(), duration_ms = ? WHERE id = ?`,
    [message, Date.now() - started, id],
  );
};

/** Sets a table's schema (and its references' copies) in the migration's transaction. */
async function storeSchema(tx: EntityManager, schema: string, ctx: ServiceContext, tableId: number, doc: TableSchema, description?: string): Promise<void> {
  const q = quotedSchema(schema);
  await tx.execute(
    `UPDATE ${q}.data_tables SET json_schema = ?::jsonb, schema_hash = ?, description = coalesce(?, description), updated_at = now(), modified_by = ? WHERE id = ?`,
    [JSON.stringify(doc), schemaHash(doc), description ?? null, actorUuid(ctx), tableId],
  );
  await tx.execute(`UPDATE ${q}.data_tables SET json_schema = ?::jsonb, schema_hash = ?, updated_at = now() WHERE source_table_id = ?`, [JSON.stringify(doc), schemaHash(doc), tableId]);
}

/**
 * The migration of a materialized table to `doc` (already a valid schema for its app): under the
 * table row's lock the plan is made against the schema as stored then, refused when it cannot
 * run or is unsafe without allow_data_loss, recorded IN_PROGRESS (committed, so the history shows
 * it while it runs), and run with the new definition in one transaction; SUCCESS commits with
 * it, a failure is recorded FAILED and changes nothing.
 */
export async function migrateTable(ctx: ServiceContext, schema: string, tableId: number, doc: TableSchema, description?: string): Promise<void> {
  const started = Date.now();
  let op: { id: string; revision: string } | undefined;
  let name = '';
  try {
    await longTransaction(ctx, async (em) => {
      const row = await lockTable(em, schema, tableId);
      name = row.name;
      const plan = planMigration(await planInput(em, schema, row, doc));
      if (schemaHash(plan.stored) === row.schema_hash.trim()) {
        if (description !== undefined) await storeSchema(em, schema, ctx, row.id, plan.stored, description);
        return;
      }
      refuse(plan, await allowsDataLoss(em, schema, row.data_source_id), row.datasource_slug);
      op = await insertOperation(ctx.em, schema, ctx, {
        table: row, type: 'ALTER_TABLE', status: 'IN_PROGRESS', steps: plan.steps, rollback: backward(plan.steps),
        oldSchema: row.json_schema, newSchema: plan.stored, parentId: await lastOperation(em, schema, row.id),
      });
      const executionMs = await runStatements(em, forward(plan.steps));
      await storeSchema(em, schema, ctx, row.id, plan.stored, description);
      await markSucceeded(em, schema, op.id, started, executionMs);
    });
  } catch (err) {
    if (op) await markFailed(ctx.em, schema, op.id, started, err);
    throw failure(err, 'migration', name, op?.revision);
  }
}

async function plannedChange(ctx: ServiceContext, schema: string, row: TableRow, raw: unknown): Promise<{ plan: Plan; rows: number }> {
  const doc = await checkedSchema(ctx.em, schema, row.app_id, row.name, raw, row.id);
  const input = await planInput(ctx.em, schema, row, doc);
  return { plan: planMigration(input), rows: input.catalog.rows };
}

/** POST preview-changes/: what a PATCH with this schema would do (nothing runs). */
export async function previewChanges(ctx: ServiceContext, scope: TableScope, name: string, rawBody: unknown): Promise<Preview> {
  const schema = await siteSchemaFor(ctx, 'update', 'DataTable');
  const body = validate(PreviewBody, rawBody);
  const row = await tableFor(ctx, schema, scope, name, 'update');
  if (row.is_reference) throw new DomainError('BAD_REQUEST', 'A reference table takes its schema from the source table.');
  if (!row.is_materialized) {
    await checkedSchema(ctx.em, schema, row.app_id, row.name, body.new_schema, row.id);
    return { operations: [], is_safe: true, warnings: ['The table is not materialized: a PATCH replaces its schema without a migration.'], estimated_duration_ms: 0 };
  }
  const { plan, rows: estimate } = await plannedChange(ctx, schema, row, body.new_schema);
  if (plan.errors.length) throw schemaError(plan.errors, 'The schema change cannot be applied.');
  const unsafe = plan.steps.filter((st) => !st.is_safe);
  const allow = await allowsDataLoss(ctx.em, schema, row.data_source_id);
  return {
    operations: plannedOperations(plan.steps),
    is_safe: unsafe.length === 0,
    warnings: [
      ...unsafe.map((st) => `Unsafe: ${st.unsafe}.${allow ? ' The data source allows data loss: it will run.' : ` Refused unless data source "${row.datasource_slug}" allows data loss.`}`),
      ...stepWarnings(plan.steps),
      ...(schemaHash(plan.stored) === row.schema_hash.trim() ? ['The schema is the current one: a PATCH with it changes nothing.'] : []),
    ],
    estimated_duration_ms: estimatedMs(plan.steps, estimate),
  };
}

/** POST validate-schema/: the schema's problems, and what a migration to it would refuse or warn of. */
export async function validateSchema(ctx: ServiceContext, scope: TableScope, name: string, rawBody: unknown): Promise<SchemaValidation> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataTable');
  const body = validate(ValidateSchemaBody, rawBody);
  const row = await tableFor(ctx, schema, scope, name, 'read');
  let errors: string[];
  try {
    await checkedSchema(ctx.em, schema, row.app_id, row.name, body.schema, row.id);
    errors = [];
  } catch (err) {
    if (!(err instanceof DomainError)) throw err;
    errors = err.errors?.json_schema ?? [err.message];
  }
  if (errors.length) return { valid: false, errors, warnings: [] };
  const doc = body.schema as TableSchema;
  if (!row.is_materialized || row.is_reference) {
    const input = await planInput(ctx.em, schema, row, doc);
    const unmaterialized = foreignKeysOf(doc).filter((fk) => input.resolveTable(fk.reference.resource) === undefined)
      .map((fk) => `foreignKeys (${fk.fields.join(', ')} → ${fk.reference.resource}): the referenced table "${fk.reference.resource}" is not materialized; materialize it before this table.`);
    return { valid: true, errors: [], warnings: [...(row.is_reference ? ['A reference table takes its schema from the source table: it cannot be changed.'] : []), ...unmaterialized] };
  }
  const { plan } = await plannedChange(ctx, schema, row, doc);
  const allow = await allowsDataLoss(ctx.em, schema, row.data_source_id);
  const unsafe = plan.steps.filter((st) => !st.is_safe).map((st) => `Unsafe: ${st.unsafe}.`);
  return {
    valid: plan.errors.length === 0 && (allow || unsafe.length === 0),
    errors: [...plan.errors, ...(allow ? [] : unsafe.map((u) => `${u} Refused unless data source "${row.datasource_slug}" allows data loss.`))],
    warnings: [...(allow ? unsafe : []), ...stepWarnings(plan.steps)],
  };
}

/** GET operation-history/: newest first; `limit`/`offset` (default 10) or `page`/`page_size`; `status` in lower or upper case. */
export async function operationHistory(ctx: ServiceContext, scope: TableScope, name: string, rawQuery: unknown): Promise<Page<SchemaOperation>> {
  const schema = await siteSchemaFor(ctx, 'read', 'DataTable');
  const query = validate(HistoryQuery, rawQuery, 'query');
  const row = await tableFor(ctx, schema, scope, name, 'read');
  const q = quotedSchema(schema);
  const where = ['o.data_table_id = ?'];
  const params: unknown[] = [row.id];
  if (query.status) { where.push('o.status = ?'); params.push(query.status.toUpperCase()); }
  const count = await countOf(ctx.em, `SELECT count(*) AS n FROM ${q}.schema_operations o WHERE ${where.join(' AND ')}`, params);
  let limit: number, offset: number, page: Page<SchemaOperation>;
  if (query.limit !== undefined || query.offset !== undefined) {
    limit = Math.min(Math.max(Number(query.limit ?? 10), 1), 100);
    offset = Number(query.offset ?? 0);
    page = { page: Math.floor(offset / limit) + 1, pageSize: limit, offset, count, results: [] };
  } else {
    const req = resolvePage(parsePageRequest({ page: query.page, page_size: query.page_size ?? '10' }), count);
    limit = req.pageSize;
    offset = pageOffset(req);
    page = { ...req, count, results: [] };
  }
  const found = await rows<OperationRow>(ctx.em, `${OPERATION_SELECT(q)} WHERE ${where.join(' AND ')} ORDER BY o.id DESC LIMIT ? OFFSET ?`, [...params, limit, offset]);
  return { ...page, results: found.map(operationView) };
}

/**
 * The migration `revision` of the table if it can be rolled back now: 404 for an unknown
 * revision, 400 for anything but a SUCCESS migration, 409 while a later change of the table stands.
 */
async function rollbackTarget(em: EntityManager, schema: string, row: TableRow, revision: string): Promise<OperationRow & { rollback_sql: Statement[] }> {
  const q = quotedSchema(schema);
  const target = await firstRow<OperationRow>(em, `${OPERATION_SELECT(q)} WHERE o.data_table_id = ? AND o.revision_id = ?`, [row.id, revision]);
  if (!target) throw notFound({ message: `Revision "${revision}" is not an operation of data table "${row.name}".` });
  if (target.status === 'ROLLED_BACK') throw fieldError('revision_id', `Revision ${revision} is rolled back already; an operation is rolled back once.`);
  if (target.operation_type !== 'ALTER_TABLE' || target.rollback_sql === null) {
    throw fieldError('revision_id', `Revision ${revision} is a ${target.operation_type} operation: only migrations (ALTER_TABLE) roll back${target.operation_type === 'CREATE_TABLE' ? '; delete the table to undo its creation' : ''}.`);
  }
  if (target.status !== 'SUCCESS') throw fieldError('revision_id', `Revision ${revision} is ${target.status}: a migration that did not succeed changed nothing to roll back.`);
  if (trim(target.new_schema_hash) !== row.schema_hash.trim()) {
    const later = await rows<{ revision_id: string }>(em, `SELECT revision_id FROM ${q}.schema_operations WHERE data_table_id = ? AND id > ? AND operation_type = 'ALTER_TABLE' AND status = 'SUCCESS' ORDER BY id DESC`, [row.id, target.id]);
    throw new DomainError('CONFLICT', `Revision ${revision} is not the table's current schema: roll back the later migrations first${later.length ? ` (${later.map((l) => l.revision_id.trim()).join(', ')})` : ''}.`);
  }
  return target as OperationRow & { rollback_sql: Statement[] };
}

const counted = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * What rolling back `target` destroys, counted now: the values of the columns it added (the
 * rollback drops them) and the edges of the hierarchy it switched on (the rollback drops the
 * edges table). A column or edges table without data loses nothing and is not named.
 */
async function rollbackLosses(em: EntityManager, schema: string, row: TableRow, target: OperationRow): Promise<string[]> {
  const q = quotedSchema(schema);
  const losses: string[] = [];
  for (const op of target.operations) {
    if (op.type === 'add_column' && op.column) {
      const n = await countOf(em, `SELECT count(*) AS n FROM ${q}.${quoteIdent(row.physical_table_name)} WHERE ${quoteIdent(op.column)} IS NOT NULL`);
      if (n) losses.push(`Column '${op.column}' is dropped with its values (${counted(n, 'row holds one', 'rows hold one')}).`);
    } else if (op.type === 'add_edges_table') {
      const n = await countOf(em, `SELECT count(*) AS n FROM ${q}.${quoteIdent(edgesTableName(row.physical_table_name))}`);
      if (n) losses.push(`The edges table is dropped with its ${counted(n, 'edge', 'edges')}.`);
    }
  }
  return losses;
}

/**
 * POST rollback/: the stored rollback SQL of the table's latest migration, in one transaction
 * under the table's lock; the migration becomes ROLLED_BACK and the rollback is recorded as an
 * operation of its own. Refused as rollbackTarget says. With `dry_run`, the same checks and what
 * the rollback would lose (`data_loss`), nothing changed or recorded.
 */
export async function rollbackMigration(ctx: ServiceContext, scope: TableScope, name: string, rawBody: unknown): Promise<RollbackResult> {
  const schema = await siteSchemaFor(ctx, 'update', 'DataTable');
  const body = validate(RollbackBody, rawBody);
  const table = await tableFor(ctx, schema, scope, name, 'update');
  const q = quotedSchema(schema);
  if (body.dry_run) {
    const target = await rollbackTarget(ctx.em, schema, table, body.revision_id);
    return {
      success: true,
      message: `Revision ${body.revision_id} of data table "${name}" can be rolled back (dry run: nothing was changed).`,
      operations_reversed: target.operations.length,
      new_status: 'ROLLED_BACK',
      revision_id: null,
      warnings: target.rollback_warnings,
      data_loss: await rollbackLosses(ctx.em, schema, table, target),
    };
  }
  const started = Date.now();
  let record: { id: string; revision: string } | undefined;
  try {
    return await longTransaction(ctx, async (em) => {
      const row = await lockTable(em, schema, table.id);
      const target = await rollbackTarget(em, schema, row, body.revision_id);
      const dataLoss = await rollbackLosses(em, schema, row, target);
      record = await insertOperation(ctx.em, schema, ctx, {
        table: row, type: 'ROLLBACK', status: 'IN_PROGRESS', steps: [], executed: target.rollback_sql, rollback: null, warnings: target.rollback_warnings,
        oldSchema: target.new_schema, newSchema: target.old_schema, parentId: target.id, description: `Rollback of ${body.revision_id}`,
      });
      const executionMs = await runStatements(em, target.rollback_sql);
      await storeSchema(em, schema, ctx, row.id, target.old_schema!);
      await em.execute(`UPDATE ${q}.schema_operations SET status = 'ROLLED_BACK', rolled_back_at = now(), rolled_back_by = ? WHERE id = ?`, [actorUuid(ctx), target.id]);
      await markSucceeded(em, schema, record.id, started, executionMs);
      return {
        success: true,
        message: `Revision ${body.revision_id} of data table "${name}" is rolled back.`,
        operations_reversed: target.operations.length,
        new_status: 'ROLLED_BACK' as const,
        revision_id: record.revision,
        warnings: target.rollback_warnings,
        data_loss: dataLoss,
      };
    });
  } catch (err) {
    if (record) await markFailed(ctx.em, schema, record.id, started, err);
    throw failure(err, 'rollback', name, record?.revision);
  }
}
