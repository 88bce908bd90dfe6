// `platform site …`: sites, the tenants (/api/cloud/sites/, /api/cloud/organizations/{org}/sites/).
import { Args, Flags } from '@oclif/core';
import type { CreatedBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import { DomainError } from '../../shared/errors.ts';
import type { Privileges, SiteView } from '../../shared/sites/site.schemas.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags } from '../flags.ts';
import { keyValues, pageTable, when, type Column } from '../output.ts';

const siteArg = { site: Args.string({ name: 'site', description: 'Site slug or UUID', required: true }) };

const fieldFlags = {
  name: Flags.string({ summary: 'Display name (on create it receives the ENVIRONMENT prefix: dev-, test-, staging-).' }),
  description: Flags.string({ summary: 'Description.' }),
  environment: Flags.string({ summary: 'production, staging, development or testing.' }),
  settings: Flags.string({ summary: 'site_settings as a JSON object, e.g. \'{"theme":"dark"}\'.' }),
};

/** `--settings` parsed; a malformed value is the same 400 the API gives for a bad field. */
function parseSettings(text: string | undefined): Record<string, unknown> | undefined {
  if (text === undefined) return undefined;
  try {
    const value = JSON.parse(text);
    if (value && typeof value === 'object' && !Array.isArray(value)) return value;
  } catch {
    /* below */
  }
  throw new DomainError('VALIDATION_ERROR', 'Invalid input.', { errors: { site_settings: ['Must be a JSON object.'] } });
}

const COLUMNS: Column<SiteView>[] = [
  { header: 'Slug', get: (s) => s.slug },
  { header: 'Name', get: (s) => s.name },
  { header: 'Schema', get: (s) => s.schema_name },
  { header: 'Environment', get: (s) => s.environment },
  { header: 'Active', get: (s) => s.is_active },
  { header: 'Organization', get: (s) => s.organization },
  { header: 'Primary domain', get: (s) => s.primary_domain },
  { header: 'Created', get: (s) => when(s.created_at) },
];

export const SITE_COMMANDS = {
  'site:list': operation({
    summary: "List the sites you can view (all of them, or one organization's).",
    description: "Inactive sites are hidden unless --is-active says otherwise. Prints the API's pagination body {count, next, previous, results} with --json.",
    examples: ['site list', 'site list --org acme --environment staging --ordering -created_at --json'],
    flags: {
      org: Flags.string({ summary: 'Only the sites of this organization (slug or UUID).' }),
      environment: Flags.string({ summary: 'production, staging, development or testing.' }),
      'is-active': Flags.string({ summary: 'true (default), false or all.' }),
      search: Flags.string({ summary: 'Matches name or schema name.' }),
      ordering: Flags.string({ summary: 'name, created_at or updated_at; a leading - reverses.' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      path: f.org === undefined ? '/api/cloud/sites/' : path`/api/cloud/organizations/${f.org}/sites/`,
      query: { environment: f.environment, is_active: f['is-active'], search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<SiteView>) => pageTable(page, COLUMNS, ['site', 'sites']),
  }),

  'site:create': operation({
    summary: 'Create a site: its schema, tenant migrations, default data and primary domain, in one transaction.',
    description:
      'The name receives the ENVIRONMENT prefix of the deployment (dev-, test-, staging-; none in production). Without --schema-name one is generated from the name; without --domain the primary domain is {slug}.{PLATFORM_BASE_DOMAIN}. Progress on stderr; prints the API body {status, message, data} with --json.',
    examples: ['site create --org acme --name "Shop" --environment staging', 'site create --org acme --name Blog --schema-name blog --domain blog.example.com --json'],
    flags: {
      org: Flags.string({ summary: 'The organization (slug or UUID).', required: true }),
      ...fieldFlags,
      name: Flags.string({ summary: fieldFlags.name.summary, required: true }),
      'schema-name': Flags.string({ summary: 'PostgreSQL schema (lowercase letters, digits, underscores; starts with a letter or underscore).' }),
      domain: Flags.string({ summary: 'Primary host name (default {slug}.{PLATFORM_BASE_DOMAIN}).' }),
    },
    request: ({ flags: f, info }) => {
      const body = defined({
        name: f.name,
        description: f.description,
        environment: f.environment,
        schema_name: f['schema-name'],
        site_settings: parseSettings(f.settings),
        domain: f.domain,
      });
      info(`Creating site "${f.name}" in organization ${f.org}: schema, tenant migrations, default data, primary domain…`);
      return { method: 'POST', path: path`/api/cloud/organizations/${f.org}/sites/`, body };
    },
    render: (body: CreatedBody<SiteView>, { info }) => {
      info(`Site ${body.data.slug} ready: schema ${body.data.schema_name}, primary domain ${body.data.primary_domain}.`);
      return [body.message, keyValues(body.data)];
    },
  }),

  'site:get': operation({
    summary: 'Show a site.',
    examples: ['site get shop', 'site get 5f0c…-uuid --json'],
    args: siteArg,
    request: ({ args }) => ({ method: 'GET', path: path`/api/cloud/sites/${args.site}/` }),
  }),

  'site:update': operation({
    summary: 'Update a site (PATCH: fields left out keep their values).',
    description: 'No environment prefix is applied on update. --no-active takes the site off its hosts (404) until --active.',
    examples: ['site update shop --name "Shop 2" --settings \'{"theme":"light"}\'', 'site update shop --no-active'],
    args: siteArg,
    flags: { ...fieldFlags, active: Flags.boolean({ summary: 'Whether the site is served on its hosts.', allowNo: true }) },
    request: ({ flags: f, args }) => ({
      method: 'PATCH',
      path: path`/api/cloud/sites/${args.site}/`,
      body: defined({ name: f.name, description: f.description, environment: f.environment, site_settings: parseSettings(f.settings), is_active: f.active }),
    }),
  }),

  'site:delete': operation({
    summary: 'Delete a site: drops its schema and all its data, its domains and its permissions. Cannot be undone.',
    description: 'To take a site offline without losing data, use `site update <site> --no-active` instead.',
    examples: ['site delete shop'],
    args: siteArg,
    request: ({ args }) => ({ method: 'DELETE', path: path`/api/cloud/sites/${args.site}/` }),
  }),

  'site:privileges': operation({
    summary: 'Your effective permissions on a site (organization role and groups included).',
    examples: ['site privileges shop --json'],
    args: siteArg,
    request: ({ args }) => ({ method: 'GET', path: path`/api/cloud/sites/${args.site}/privileges/` }),
    render: (body: Privileges) => (body.permissions.length ? body.permissions.join('\n') : '(no permissions)'),
  }),
};
