// Shared pieces of the `secret` and `secret-type` commands: flags, tables, value parsing.
import { Args, Flags } from '@oclif/core';
import { DomainError } from '../shared/errors.ts';
import type { SecretHistoryItem, SecretListItem } from '../shared/secrets/secret.schemas.ts';
import type { SecretTypeView } from '../shared/secrets/secret-type.schemas.ts';
import { type Column, when } from './output.ts';
export { pageFlags } from './flags.ts';
export { pageTable } from './output.ts';

export const siteFlag = Flags.string({
  summary: 'The site (its schema name). Remote mode needs `platform login --site <schema>` first.',
  required: true,
});
export const appFlag = Flags.string({ summary: 'The app (slug) whose secret this is; without it, the tenant-wide secret.' });
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
