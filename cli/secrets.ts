// Shared pieces of the `secret` and `secret-type` commands: flags, tables, value parsing.
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../shared/common/pagination.ts';
import { DomainError } from '../shared/errors.ts';
import type { SecretHistoryItem, SecretListItem } from '../shared/secrets/secret.schemas.ts';
import type { SecretTypeView } from '../shared/secrets/secret-type.schemas.ts';
import { table, type Column } from './output.ts';

export const siteFlag = Flags.string({
  summary: 'The site (its schema name). Remote mode needs `platform login --site <schema>` first.',
  required: true,
});
export const appFlag = Flags.string({ summary: 'The app (slug) whose secret this is; without it, the tenant-wide secret.' });
export const pageFlags = {
  page: Flags.string({ summary: 'Page number, or "last" (default 1).' }),
  'page-size': Flags.string({ summary: 'Items per page (default 20, at most 100).' }),
};
export const secretKeyArg = Args.string({ name: 'key', description: 'The secret key (e.g. STRIPE_API_KEY)', required: true });
export const secretTypeArg = Args.string({ name: 'type', description: 'Slug or UUID of the secret type', required: true });

/** A JSON argument or flag, parsed; a clear 400 naming `what` when it is not JSON. */
export function parseJson(text: string, what: string): unknown {
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new DomainError('VALIDATION_ERROR', `Invalid JSON in ${what}: ${(err as Error).message}`, { errors: { [what]: ['Not valid JSON.'] } });
  }
}

const when = (iso: string) => iso.slice(0, 16).replace('T', ' ');

/** A page as a table with a footer saying how many there are and how to see more. */
export function pageTable<T>(page: PageEnvelope<T>, columns: Column<T>[], [one, many]: [string, string]): string {
  const next = page.next ? (new URL(page.next).searchParams.get('page') ?? '1') : undefined;
  let footer = `${page.count} ${page.count === 1 ? one : many}`;
  if (page.results.length < page.count) footer += `, ${page.results.length} shown`;
  if (next) footer += ` (next: --page ${next})`;
  return page.results.length ? `${table(page.results, columns)}\n\n${footer}` : footer;
}

export const SECRET_COLUMNS: Column<SecretListItem>[] = [
  { header: 'Key', get: (s) => s.key },
  { header: 'App', get: (s) => s.app },
  { header: 'Type', get: (s) => s.secret_type },
  { header: 'Value', get: (s) => s.value },
  { header: 'Description', get: (s) => s.description },
  { header: 'Modified', get: (s) => when(s.modified) },
  { header: 'By', get: (s) => s.modified_by },
];

export const HISTORY_COLUMNS: Column<SecretHistoryItem>[] = [
  { header: 'At', get: (h) => h.at.slice(0, 19).replace('T', ' ') },
  { header: 'Action', get: (h) => h.action },
  { header: 'Key', get: (h) => h.key },
  { header: 'App', get: (h) => h.app },
  { header: 'Actor', get: (h) => h.actor },
];

export const SECRET_TYPE_COLUMNS: Column<SecretTypeView>[] = [
  { header: 'Slug', get: (t) => t.slug },
  { header: 'Name', get: (t) => t.name },
  { header: 'Description', get: (t) => t.description },
  { header: 'Schema', get: (t) => JSON.stringify(t.json_schema) },
];
