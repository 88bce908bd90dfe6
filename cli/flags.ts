// Flags and flag values shared by several commands.
import { Flags } from '@oclif/core';
import { DomainError, fieldError } from '../shared/errors.ts';

export const pageFlags = {
  page: Flags.string({ summary: 'Page number, or "last" (default 1).' }),
  'page-size': Flags.string({ summary: 'Items per page (default 20, at most 100).' }),
};

/** The site of the commands on one site's API (secret, secret-type, app, datasource, table, data, demo). */
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

/** A JSON object flag (`--attr '{"a":1}'`), parsed; another JSON value is `field`'s 400. */
export function jsonObject(text: string, flag: string, field = flag): Record<string, unknown> {
  const value = parseJson(text, flag);
  if (value && typeof value === 'object' && !Array.isArray(value)) return value as Record<string, unknown>;
  throw fieldError(field, 'Must be a JSON object.');
}
