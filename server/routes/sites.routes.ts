import type { Config } from '../../shared/config.ts';
import { SITE_MESSAGES } from '../../shared/sites/site.messages.ts';
import { OrgSitesRef, Privileges, SiteConfig, SiteCreate, SiteListQuery, SiteRef, SiteUpdate, SiteView } from '../../shared/sites/site.schemas.ts';
import * as sites from '../../shared/sites/site.service.ts';
import { MessageBody, created, paginated, sendCreated, sendMessage, sendPage } from '../http/envelopes.ts';
import { defineRoute, type RouteDef } from '../http/registry.ts';

export function siteRoutes(config: Config): RouteDef[] {
  const settings = { environment: config.environment, baseDomain: config.baseDomain, platformHosts: config.platformHosts, quotas: config.quotas };
  const update = (method: 'put' | 'patch') =>
    defineRoute({
      method,
      path: '/api/cloud/sites/:site/',
      aliases: ['/api/sites/:site/'],
      operationId: method === 'put' ? 'sites_update' : 'sites_partial_update',
      summary: method === 'put' ? 'Update a site' : 'Update some fields of a site',
      description:
        'Any of name, description, is_active, site_settings, environment (no environment prefix on update). `is_active: false` takes the site off its hosts (404) until reactivated. Needs `change_site`.',
      tags: ['sites'],
      auth: 'user',
      params: SiteRef,
      body: SiteUpdate,
      responses: { 200: SiteView },
      async handler(ctx, { params, body }) {
        ctx.body = await sites.updateSite(ctx.state.service(), params.site, body);
      },
    });
  return [
    // Before /api/cloud/sites/:site/, which would otherwise take `config` for a site slug.
    defineRoute({
      method: 'get',
      path: '/api/cloud/sites/config/',
      aliases: ['/api/sites/config/'],
      operationId: 'sites_config',
      summary: 'Configuration of the site selected by the request host',
      description: 'Served on a site host (or `/sites/{schema_name}/…`); public. The site fields and its primary domain; never secrets.',
      tags: ['sites'],
      auth: 'public',
      scope: 'tenant',
      responses: { 200: SiteConfig },
      async handler(ctx) {
        ctx.body = await sites.siteConfig(ctx.state.em, ctx.state.tenant);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/cloud/sites/',
      aliases: ['/api/sites/'],
      operationId: 'sites_list',
      summary: 'List the sites the caller can view',
      description: 'Superusers see every site. Inactive sites are hidden unless `is_active` says otherwise.',
      tags: ['sites'],
      auth: 'user',
      query: SiteListQuery,
      responses: { 200: paginated(SiteView) },
      async handler(ctx, { query }) {
        sendPage(ctx, await sites.listSites(ctx.state.service(), query), config.publicUrl);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/cloud/organizations/:org/sites/',
      aliases: ['/api/organizations/:org/sites/'],
      operationId: 'organization_sites_list',
      summary: "List an organization's sites",
      tags: ['sites'],
      auth: 'user',
      params: OrgSitesRef,
      query: SiteListQuery,
      responses: { 200: paginated(SiteView) },
      async handler(ctx, { params, query }) {
        sendPage(ctx, await sites.listSites(ctx.state.service(), query, params.org), config.publicUrl);
      },
    }),
    defineRoute({
      method: 'post',
      path: '/api/cloud/organizations/:org/sites/',
      aliases: ['/api/organizations/:org/sites/'],
      operationId: 'organization_sites_create',
      statementTimeout: 'long',
      summary: 'Create a site',
      description:
        'Needs `manage_organization`. Creates the site, its schema (tenant migrations and default data: the organization owners and admins as site administrators, groups, tags, permissions) and its primary domain in one transaction.',
      tags: ['sites'],
      auth: 'user',
      params: OrgSitesRef,
      body: SiteCreate,
      responses: { 201: created(SiteView) },
      async handler(ctx, { params, body }) {
        sendCreated(ctx, SITE_MESSAGES.created, await sites.createSite(ctx.state.service(), params.org, body, settings));
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/cloud/sites/:site/',
      aliases: ['/api/sites/:site/'],
      operationId: 'sites_retrieve',
      summary: 'Get a site by slug or UUID',
      tags: ['sites'],
      auth: 'user',
      params: SiteRef,
      responses: { 200: SiteView },
      async handler(ctx, { params }) {
        ctx.body = await sites.getSite(ctx.state.service(), params.site);
      },
    }),
    update('put'),
    update('patch'),
    defineRoute({
      method: 'delete',
      path: '/api/cloud/sites/:site/',
      aliases: ['/api/sites/:site/'],
      operationId: 'sites_destroy',
      summary: 'Delete a site (hard)',
      description: 'Drops the schema and all its data, the domains and the site permissions. Cannot be undone. Needs `delete_site`.',
      tags: ['sites'],
      auth: 'user',
      params: SiteRef,
      responses: { 200: MessageBody },
      async handler(ctx, { params }) {
        await sites.deleteSite(ctx.state.service(), params.site);
        sendMessage(ctx, SITE_MESSAGES.deleted);
      },
    }),
    defineRoute({
      method: 'get',
      path: '/api/cloud/sites/:site/privileges/',
      aliases: ['/api/sites/:site/privileges/'],
      operationId: 'sites_privileges',
      summary: "The caller's effective permissions on a site",
      description: 'Including those inherited from organization membership (owner, admin) and groups.',
      tags: ['sites'],
      auth: 'user',
      params: SiteRef,
      responses: { 200: Privileges },
      async handler(ctx, { params }) {
        ctx.body = await sites.sitePrivileges(ctx.state.service(), params.site);
      },
    }),
  ];
}
