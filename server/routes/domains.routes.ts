import type { Config } from '../../shared/config.ts';
import { DomainCreate, DomainListQuery, DomainRef, DomainReplace, DomainUpdate, DomainView } from '../../shared/sites/domain.schemas.ts';
import * as domains from '../../shared/sites/domain.service.ts';
import { dnsTxtResolver } from '../../shared/sites/domain-verification.ts';
import { DOMAIN_MESSAGES } from '../../shared/sites/site.messages.ts';
import { SiteRef } from '../../shared/sites/site.schemas.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

const LIST = '/api/cloud/sites/:site/domains/';
const ONE = '/api/cloud/sites/:site/domains/:domain/';
const VERIFY = '/api/cloud/sites/:site/domains/:domain/verify/';
const alias = (path: string) => [path.replace('/api/cloud/', '/api/')];

export function domainRoutes(config: Config): RouteDef[] {
  const settings: domains.DomainSettings = { platformHosts: config.platformHosts, baseDomain: config.baseDomain, txt: dnsTxtResolver(config.dnsServers) };
  const update = (method: 'put' | 'patch') =>
    defineRoute({
      method,
      path: ONE,
      aliases: alias(ONE),
      operationId: method === 'put' ? 'site_domains_update' : 'site_domains_partial_update',
      summary: method === 'put' ? 'Update a domain' : 'Update some fields of a domain',
      description:
        '`is_primary: true` makes every other domain of the site non-primary (under a lock); only a verified domain may be primary. Unsetting it on the primary is refused: make another domain primary. A new host name starts unverified. Needs `manage_site`.',
      tags: ['domains'],
      auth: 'user',
      params: DomainRef,
      body: method === 'put' ? DomainReplace : DomainUpdate,
      responses: { 200: DomainView },
      async handler(ctx, { params, body }) {
        ctx.body = await domains.updateDomain(ctx.state.service(), params.site, params.domain, body, settings, method);
      },
    });
  return [
    defineRoute({
      method: 'get',
      path: LIST,
      aliases: alias(LIST),
      operationId: 'site_domains_list',
      summary: "List a site's domains",
      description: 'Default ordering `-is_primary,domain`; inactive domains are hidden unless `is_active` says otherwise. Needs `view_site`.',
      tags: ['domains'],
      auth: 'user',
      params: SiteRef,
      query: DomainListQuery,
      responses: { 200: paginated(DomainView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await domains.listDomains(ctx.state.service(), params.site, query), config.publicUrl);
      },
    }),
    defineRoute({
      method: 'post',
      path: LIST,
      aliases: alias(LIST),
      operationId: 'site_domains_create',
      summary: 'Add a domain to a site',
      description:
        "The host name must be unique across the platform. Names under the platform's base domain are the platform's: only the site's own `{slug}.{base}`. Any other name is a customer domain: it routes nothing until verified by the DNS TXT record its `verification` names (POST …/verify/), and cannot be primary before. Needs `manage_site`.",
      tags: ['domains'],
      auth: 'user',
      params: SiteRef,
      body: DomainCreate,
      responses: { 201: created(DomainView) },
      async handler(ctx, { params, body }) {
        sendCreated(ctx, DOMAIN_MESSAGES.created, await domains.createDomain(ctx.state.service(), params.site, body, settings));
      },
    }),
    defineRoute({
      method: 'get',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'site_domains_retrieve',
      summary: 'Get a domain by slug, host name or UUID',
      tags: ['domains'],
      auth: 'user',
      params: DomainRef,
      responses: { 200: DomainView },
      async handler(ctx, { params }) {
        ctx.body = await domains.getDomain(ctx.state.service(), params.site, params.domain);
      },
    }),
    defineRoute({
      method: 'post',
      path: VERIFY,
      aliases: alias(VERIFY),
      operationId: 'site_domains_verify',
      summary: "Check a domain's DNS TXT record now",
      description:
        'Reads `_platform-challenge.{domain}` TXT. The record `platform-verify={token}` (the domain\'s `verification`) found: the domain is verified and routes (200). Not found: an unverified domain stays unverified (400 naming the record); a verified one loses its verification and stops routing at once (200, `is_verified` false; a primary gives way to the site\'s own platform name). DNS not answering: 503, nothing changes. Needs `manage_site`.',
      tags: ['domains'],
      auth: 'user',
      params: DomainRef,
      responses: { 200: DomainView },
      async handler(ctx, { params }) {
        ctx.body = await domains.verifyDomain(ctx.state.service(), params.site, params.domain, settings);
      },
    }),
    update('put'),
    update('patch'),
    defineRoute({
      method: 'delete',
      path: ONE,
      aliases: alias(ONE),
      operationId: 'site_domains_destroy',
      summary: 'Delete a domain',
      description: 'The primary domain cannot be deleted (400): make another domain primary first. Needs `manage_site`.',
      tags: ['domains'],
      auth: 'user',
      params: DomainRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await domains.deleteDomain(ctx.state.service(), params.site, params.domain);
        sendMessage(ctx, DOMAIN_MESSAGES.deleted);
      },
    }),
  ];
}
