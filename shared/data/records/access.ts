// Which rows of a table the actor may reach: the app's policies (policies/hook.ts) on the table's
// kind `datatable:{name}`, their query plan compiled into the records SQL (policy-sql.ts). List,
// count, aggregate and export AND the read plan into their WHERE; get, patch and delete reach only
// readable rows (one the actor may not read is missing to them: 404) and select the plan of their
// action beside the row (one statement) to tell 403 from 404; creates are checked record by record
// unless the plan decides for every row.
import type { ServiceContext } from '../../context.ts';
import { DomainError, permissionDenied } from '../../errors.ts';
import { decide, planFor, type PolicyApp } from '../../policies/hook.ts';
import type { SqlFragment } from '../query/filter.ts';
import { PlanNotSupported, planSql, type PlanColumns } from './policy-sql.ts';

export const ALL_ROWS: SqlFragment = Object.freeze({ sql: 'TRUE', params: [] });
export const NO_ROWS: SqlFragment = Object.freeze({ sql: 'FALSE', params: [] });

/** What a policy decision needs of a table: its site, app, kind and columns. */
export interface PolicyTarget extends PlanColumns {
  site: string;
  app: PolicyApp;
  kind: string;
}

/** The kind of a data table's resources in policies (spec Part 2 §2: `{entity_type}:{name}`). */
export const tableKind = (name: string): string => `datatable:${name}`;

/** The rows of the table the actor may `action`, as a condition over the row alias `t`. */
export async function rowsAllowed(ctx: ServiceContext, t: PolicyTarget, action: string): Promise<SqlFragment> {
  const formula = await planFor(ctx, t.site, t.app, t.kind, action);
  if (formula === true) return ALL_ROWS;
  if (formula === false) return NO_ROWS;
  try {
    return planSql(formula, t);
  } catch (err) {
    if (err instanceof PlanNotSupported) throw new DomainError('BUSINESS_LOGIC_ERROR', `The policies of table "${t.kind.slice('datatable:'.length)}" cannot be applied to its records: ${err.message}`);
    throw err;
  }
}

/** A record as its policy attributes: every field of the table (null when absent; nothing else), its key as the resource id. */
export function recordResource(t: PlanColumns, r: Record<string, unknown>): { id: string; attr: Record<string, unknown> } {
  const attr: Record<string, unknown> = {};
  for (const field of t.columns.keys()) attr[field] = r[field] ?? null;
  const key = t.pk.map((k) => r[k]);
  return { id: key.length === 1 ? String(key[0]) : JSON.stringify(key), attr };
}

/** 403 unless the actor may `action` every one of these records (all or nothing). */
export async function requireAllowed(ctx: ServiceContext, t: PolicyTarget, action: string, records: Record<string, unknown>[]): Promise<void> {
  const formula = await planFor(ctx, t.site, t.app, t.kind, action);
  if (typeof formula === 'boolean') {
    if (!formula && records.length) throw permissionDenied();
    return;
  }
  const allowed = await decide(ctx, t.site, t.app, t.kind, action, records.map((r) => recordResource(t, r)));
  if (allowed.some((ok) => !ok)) throw permissionDenied();
}

/** `where` restricted to the allowed rows (unchanged when every row is allowed). */
export function withinAllowed(allowed: SqlFragment, where: SqlFragment): SqlFragment {
  if (allowed === ALL_ROWS) return where;
  return { sql: `(${allowed.sql}) AND (${where.sql})`, params: [...allowed.params, ...where.params] };
}
