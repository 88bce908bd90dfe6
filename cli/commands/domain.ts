// `platform domain …`: the host names of a site (/api/cloud/sites/{site}/domains/).
import { Args, Flags } from '@oclif/core';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { DomainView } from '../../shared/sites/domain.schemas.ts';
import { defined, path } from '../api.ts';
import { operation } from '../base.ts';
import { pageFlags } from '../flags.ts';
import { pageTable, when, type Column } from '../output.ts';

const siteFlag = Flags.string({ summary: 'The site (slug or UUID).', required: true });
const domainArg = { domain: Args.string({ name: 'domain', description: 'Domain slug, host name or UUID', required: true }) };
const domains = (site: string) => path`/api/cloud/sites/${site}/domains/`;

const COLUMNS: Column<DomainView>[] = [
  { header: 'Domain', get: (d) => d.domain },
  { header: 'Slug', get: (d) => d.slug },
  { header: 'Primary', get: (d) => d.is_primary },
  { header: 'Active', get: (d) => d.is_active },
  { header: 'Created', get: (d) => when(d.created_at) },
];

export const DOMAIN_COMMANDS = {
  'domain:list': operation({
    summary: "List a site's domains (primary first).",
    description: "Inactive domains are hidden unless --is-active says otherwise. Prints the API's pagination body with --json.",
    examples: ['domain list --site shop', 'domain list --site shop --is-active all --json'],
    flags: {
      site: siteFlag,
      'is-active': Flags.string({ summary: 'true (default), false or all.' }),
      'is-primary': Flags.string({ summary: 'true, false or all (default).' }),
      search: Flags.string({ summary: 'Matches the host name.' }),
      ordering: Flags.string({ summary: 'domain, is_primary, is_active, created_at or modified_at; a leading - reverses (default -is_primary,domain).' }),
      ...pageFlags,
    },
    request: ({ flags: f }) => ({
      method: 'GET',
      path: domains(f.site),
      query: { is_active: f['is-active'], is_primary: f['is-primary'], search: f.search, ordering: f.ordering, page: f.page, page_size: f['page-size'] },
    }),
    render: (page: PageEnvelope<DomainView>) => pageTable(page, COLUMNS, ['domain', 'domains']),
  }),

  'domain:add': operation({
    summary: 'Add a domain (host name) to a site.',
    description: '--primary makes it the primary domain (every other domain of the site becomes non-primary). Prints the API body {status, message, data} with --json.',
    examples: ['domain add shop.example.com --site shop --primary'],
    args: { domain: Args.string({ name: 'domain', description: 'Host name (lowercase RFC 1123; no scheme, port or trailing dot)', required: true }) },
    flags: {
      site: siteFlag,
      primary: Flags.boolean({ summary: 'Make it the primary domain.' }),
      active: Flags.boolean({ summary: 'Whether the host is routed (default yes).', allowNo: true }),
    },
    request: ({ flags: f, args }) => ({
      method: 'POST',
      path: domains(f.site),
      body: defined({ domain: args.domain, is_primary: f.primary || undefined, is_active: f.active }),
    }),
  }),

  'domain:get': operation({
    summary: 'Show a domain of a site.',
    examples: ['domain get shop.example.com --site shop'],
    args: domainArg,
    flags: { site: siteFlag },
    request: ({ flags, args }) => ({ method: 'GET', path: domains(flags.site) + path`${args.domain}/` }),
  }),

  'domain:update': operation({
    summary: 'Update a domain of a site (PATCH: flags left out keep their values).',
    description: '--primary moves the primary to this domain. The primary cannot be unset (make another domain primary instead).',
    examples: ['domain update www.example.com --site shop --primary', 'domain update old.example.com --site shop --host new.example.com --no-active'],
    args: domainArg,
    flags: {
      site: siteFlag,
      host: Flags.string({ summary: 'New host name.' }),
      primary: Flags.boolean({ summary: 'Make it the primary domain.', allowNo: true }),
      active: Flags.boolean({ summary: 'Whether the host is routed.', allowNo: true }),
    },
    request: ({ flags: f, args }) => ({
      method: 'PATCH',
      path: domains(f.site) + path`${args.domain}/`,
      body: defined({ domain: f.host, is_primary: f.primary, is_active: f.active }),
    }),
  }),

  'domain:delete': operation({
    summary: 'Delete a domain of a site (not the primary one).',
    examples: ['domain delete old.example.com --site shop'],
    args: domainArg,
    flags: { site: siteFlag },
    request: ({ flags, args }) => ({ method: 'DELETE', path: domains(flags.site) + path`${args.domain}/` }),
  }),
};
