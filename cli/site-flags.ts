// Pieces shared by the commands that work on one site's API (secret, secret-type, app,
// datasource, table, data, demo).
import { Flags } from '@oclif/core';
import { DomainError } from '../shared/errors.ts';
import { type Column, table } from './output.ts';

export const siteFlag = Flags.string({
  summary: 'The site (its schema name). Remote mode uses the site login (`platform login --site`), or exchanges the platform login for a site token when you administer the site.',
  required: true,
});

/** A JSON argument or flag, parsed; a clear 400 naming `what` when it is not JSON. */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new DomainError('VALIDATION_ERROR', `Invalid JSON in ${what}: ${(err as Error).message}`, { errors: { [what]: ['Not valid JSON.'] } });
  }
}

/** A list as a table with a count footer (`[one, many]` names the items). */
export function listTable<T>(rows: T[], columns: Column<T>[], [one, many]: [string, string]): string {
  const footer = `${rows.length} ${rows.length === 1 ? one : many}`;
  return rows.length ? `${table(rows, columns)}\n\n${footer}` : footer;
}
