// What the site and domain commands share: arguments and flags, the bodies they build, and
// how sites and domains are shown to a person.
import { Args, Flags } from '@oclif/core';
import { DomainError } from '../shared/errors.ts';
import type { DomainView } from '../shared/sites/domain.schemas.ts';
import type { SiteView } from '../shared/sites/site.schemas.ts';
import { type Column, when } from './output.ts';
export { pageFlags } from './flags.ts';
export { pageTable } from './output.ts';

export const siteRefArg = Args.string({ name: 'site', description: 'Site slug or UUID', required: true });
export const siteFlag = Flags.string({ summary: 'The site (slug or UUID).', required: true });
export const domainRefArg = Args.string({ name: 'domain', description: 'Domain slug, host name or UUID', required: true });

export const siteFieldFlags = {
  name: Flags.string({ summary: 'Display name (on create it receives the ENVIRONMENT prefix: dev-, test-, staging-).' }),
  description: Flags.string({ summary: 'Description.' }),
  environment: Flags.string({ summary: 'production, staging, development or testing.' }),
  settings: Flags.string({ summary: 'site_settings as a JSON object, e.g. \'{"theme":"dark"}\'.' }),
};

/** `--settings` parsed; a malformed value is the same 400 the API gives for a bad field. */
export function parseSettings(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) return value;
  } catch {
    /* below */
  }
  throw new DomainError('VALIDATION_ERROR', 'Invalid input.', { errors: { site_settings: ['Must be a JSON object.'] } });
}

/** Only the fields given on the command line. */
export function defined<T extends Record<string, unknown>>(input: T): T {
  for (const key of Object.keys(input)) if (input[key] === undefined) delete input[key];
  return input;
}

export const SITE_COLUMNS: Column<SiteView>[] = [
  { header: 'Slug', get: (s) => s.slug },
  { header: 'Name', get: (s) => s.name },
  { header: 'Schema', get: (s) => s.schema_name },
  { header: 'Environment', get: (s) => s.environment },
  { header: 'Active', get: (s) => s.is_active },
  { header: 'Organization', get: (s) => s.organization },
  { header: 'Primary domain', get: (s) => s.primary_domain },
  { header: 'Created', get: (s) => when(s.created_at) },
];

export const DOMAIN_COLUMNS: Column<DomainView>[] = [
  { header: 'Domain', get: (d) => d.domain },
  { header: 'Slug', get: (d) => d.slug },
  { header: 'Primary', get: (d) => d.is_primary },
  { header: 'Active', get: (d) => d.is_active },
  { header: 'Created', get: (d) => when(d.created_at) },
];
