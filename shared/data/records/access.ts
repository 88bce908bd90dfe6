// Which rows of a table the actor may reach: the seam where a per-app policy's query plan
// (Cerbos PlanResources: always allowed, always denied, or a condition over the resource's
// attributes — /work/shared/CERBOS-NOTES.md §6) becomes part of the records SQL. Today the
// Record rules of the request's ability decide per table, so the answer is every row or none;
// list, count, aggregate, export and get AND it into their WHERE (read.ts, records.service.ts).
import type { Action, SiteSubjects } from '../../auth/actor.ts';
import { allows } from '../../auth/actor.ts';
import type { ServiceContext } from '../../context.ts';
import { siteAbility } from '../../tenancy/site-access.ts';
import type { SqlFragment } from '../query/filter.ts';

export const ALL_ROWS: SqlFragment = Object.freeze({ sql: 'TRUE', params: [] });
export const NO_ROWS: SqlFragment = Object.freeze({ sql: 'FALSE', params: [] });

/**
 * The rows of one table (`table`: its site, app and name) the actor may `action`, as a
 * condition over the row alias `t`. A policy plan's condition will be compiled here over the
 * table's fields (read.ts resolves field names to SQL the same way for query conditions).
 */
export async function rowsAllowed(ctx: ServiceContext, action: Action, table: SiteSubjects['Record']): Promise<SqlFragment> {
  return allows(await siteAbility(ctx, 'Record'), action, 'Record', table) ? ALL_ROWS : NO_ROWS;
}

/** `where` restricted to the allowed rows (unchanged when every row is allowed). */
export function withinAllowed(allowed: SqlFragment, where: SqlFragment): SqlFragment {
  if (allowed === ALL_ROWS) return where;
  return { sql: `(${allowed.sql}) AND (${where.sql})`, params: [...allowed.params, ...where.params] };
}
