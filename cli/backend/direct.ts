// Direct mode: the shared services in-process, on the database of loadConfig() (embedded
// PostgreSQL or DATABASE_URL). The actor is systemActor('cli'): an operator with database
// access is elevated explicitly, never by "no actor". Each call gets its own forked
// EntityManager, and results are wrapped into exactly the bodies the API returns.
import { systemActor } from '../../shared/auth/actor.ts';
import { createdBody, messageBody, type CreatedBody, type MessageBody } from '../../shared/common/envelopes.ts';
import { pageEnvelope, type PageEnvelope } from '../../shared/common/pagination.ts';
import { validate } from '../../shared/common/validation.ts';
import type { Config } from '../../shared/config.ts';
import { makeContext, type ServiceContext } from '../../shared/context.ts';
import { openCommandDatabase, type Database } from '../../shared/db/database.ts';
import { migrationStatus } from '../../shared/db/orm.ts';
import { DomainError } from '../../shared/errors.ts';
import { USER_MESSAGES } from '../../shared/users/user.messages.ts';
import { UserRef, type UserCreate, type UserUpdate, type UserView } from '../../shared/users/user.schemas.ts';
import * as users from '../../shared/users/user.service.ts';
import * as sites from '../../shared/sites/site.service.ts';
import * as domains from '../../shared/sites/domain.service.ts';
import { DOMAIN_MESSAGES, SITE_MESSAGES } from '../../shared/sites/site.messages.ts';
import { OrgSitesRef, SiteRef, type SiteCreate, type SiteUpdate, type SiteView, type Privileges as SitePrivileges } from '../../shared/sites/site.schemas.ts';
import { DomainRef, type DomainCreate, type DomainUpdate, type DomainView } from '../../shared/sites/domain.schemas.ts';
import type { DomainListParams, SiteListParams } from './types.ts';
import * as invitations from '../../shared/invitations/invitation.service.ts';
import { INVITATION_MESSAGES } from '../../shared/invitations/invitation.mail.ts';
import { InvitationRef, OrgRef, type InvitationCreate, type InvitationView } from '../../shared/invitations/invitation.schemas.ts';
import { directInvitationDeps } from './direct-invitations.ts';
import type { InvitationListParams } from './types.ts';
import * as members from '../../shared/organizations/member.service.ts';
import { MemberRef, type MemberAdd, type MemberUpdate, type MemberView } from '../../shared/organizations/member.schemas.ts';
import * as orgs from '../../shared/organizations/organization.service.ts';
import {
  ORGANIZATION_MESSAGES,
  OrganizationRef,
  type OrganizationCreate,
  type OrganizationUpdate,
  type OrganizationView,
  type Privileges,
} from '../../shared/organizations/organization.schemas.ts';
import * as groups from '../../shared/permissions/group.service.ts';
import { GROUP_MESSAGES, GroupRef, type GroupCreate, type GroupUpdate, type GroupView } from '../../shared/permissions/group.schemas.ts';
import { SECRET_MESSAGES } from '../../shared/secrets/secret.messages.ts';
import { SecretRef, type SecretCreate, type SecretHistoryItem, type SecretListItem, type SecretUpdate, type SecretView } from '../../shared/secrets/secret.schemas.ts';
import * as secrets from '../../shared/secrets/secret.service.ts';
import type { SecretKeyring } from '../../shared/secrets/crypto.ts';
import { SecretTypeRef, type SecretTypeCreate, type SecretTypeView } from '../../shared/secrets/secret-type.schemas.ts';
import * as secretTypes from '../../shared/secrets/secret-type.service.ts';
import { cliKeyring, siteContext } from './direct-secrets.ts';
import type { SecretHistoryParams, SecretListParams, SecretTypeListParams } from './types.ts';
import { PATHS, withQuery } from './paths.ts';
import { AppRef, type AppCreate, type AppDetail, type AppListItem, type AppStats, type AppUpdate } from '../../shared/apps/app.schemas.ts';
import { APP_MESSAGES } from '../../shared/apps/app.messages.ts';
import * as apps from '../../shared/apps/app.service.ts';
import { DataSourceRef, type DataSourceCreate, type DataSourceUpdate, type DataSourceView } from '../../shared/apps/datasource.schemas.ts';
import * as dataSources from '../../shared/apps/datasource.service.ts';
import type { ListBody } from './types.ts';
import { DirectData } from './direct-data.ts';
import type { DataBackend } from './types.ts';
import type { Backend, GroupListParams, MemberListParams, OrganizationListParams, SystemActorView, UserListParams } from './types.ts';

export const CLI_ACTOR = systemActor('cli');

/** The base of absolute links, as the server computes it for a request to itself. */
export function directBaseUrl(config: Config): { publicUrl?: string; origin: string } {
  if (config.publicUrl) return { publicUrl: config.publicUrl, origin: config.publicUrl };
  const host = config.host === '0.0.0.0' ? '127.0.0.1' : config.host.includes(':') ? `[${config.host}]` : config.host;
  return { origin: `http://${host}:${config.port}` };
}

export class DirectBackend implements Backend {
  readonly mode = 'direct' as const;
  private readonly config: Config;
  private readonly info: (line: string) => void;
  private db: Promise<Database> | undefined;

  constructor(config: Config, info: (line: string) => void) {
    this.config = config;
    this.info = info;
    this.data = new DirectData({ siteCtx: (site) => this.siteCtx(site), requestUrl: (p) => this.requestUrl(p) });
  }

  // A site's data tables and records: cli/backend/direct-data.ts.
  private readonly data: DirectData;
  listTables: DataBackend['listTables'] = (...a) => this.data.listTables(...a);
  createTable: DataBackend['createTable'] = (...a) => this.data.createTable(...a);
  getTable: DataBackend['getTable'] = (...a) => this.data.getTable(...a);
  updateTable: DataBackend['updateTable'] = (...a) => this.data.updateTable(...a);
  deleteTable: DataBackend['deleteTable'] = (...a) => this.data.deleteTable(...a);
  materializeTable: DataBackend['materializeTable'] = (...a) => this.data.materializeTable(...a);
  tableSchema: DataBackend['tableSchema'] = (...a) => this.data.tableSchema(...a);
  validateTableData: DataBackend['validateTableData'] = (...a) => this.data.validateTableData(...a);
  tableStats: DataBackend['tableStats'] = (...a) => this.data.tableStats(...a);
  listRecords: DataBackend['listRecords'] = (...a) => this.data.listRecords(...a);
  getRecord: DataBackend['getRecord'] = (...a) => this.data.getRecord(...a);
  createRecords: DataBackend['createRecords'] = (...a) => this.data.createRecords(...a);
  upsertRecord: DataBackend['upsertRecord'] = (...a) => this.data.upsertRecord(...a);
  patchRecord: DataBackend['patchRecord'] = (...a) => this.data.patchRecord(...a);
  patchRecords: DataBackend['patchRecords'] = (...a) => this.data.patchRecords(...a);
  deleteRecord: DataBackend['deleteRecord'] = (...a) => this.data.deleteRecord(...a);
  deleteRecords: DataBackend['deleteRecords'] = (...a) => this.data.deleteRecords(...a);
  exportCsv: DataBackend['exportCsv'] = (...a) => this.data.exportCsv(...a);
  importCsv: DataBackend['importCsv'] = (...a) => this.data.importCsv(...a);

  /** Opens the database on first use and checks that its schema is current. */
  private database(): Promise<Database> {
    this.db ??= (async () => {
      const db = await openCommandDatabase(this.config, this.info);
      try {
        const { pending } = await migrationStatus(db.orm);
        if (pending.length) {
          throw new DomainError(
            'SERVICE_UNAVAILABLE',
            `The database schema is not current (${pending.length} pending migration${pending.length === 1 ? '' : 's'}): run \`platform migrate\` first.`,
          );
        }
      } catch (err) {
        await db.close().catch(() => undefined);
        throw err;
      }
      return db;
    })();
    return this.db;
  }

  private async context(): Promise<ServiceContext> {
    const db = await this.database();
    return makeContext(db.orm.em.fork(), CLI_ACTOR);
  }

  /** The same path-parameter check the route applies before calling the service. */
  private ref(ref: string): string {
    return validate(UserRef, { user: ref }, 'query').user;
  }

  /** The absolute URL the API would have seen for this path, for pagination links. */
  private requestUrl(pathAndQuery: string): string {
    const base = directBaseUrl(this.config);
    return base.publicUrl ? new URL(pathAndQuery, base.publicUrl).toString() : `${base.origin}${pathAndQuery}`;
  }

  async whoami(): Promise<SystemActorView> {
    return { actor: 'system', name: CLI_ACTOR.name, access: 'direct database access, every permission (explicit elevation)' };
  }

  async listUsers(query: UserListParams): Promise<PageEnvelope<UserView>> {
    const page = await users.listUsers(await this.context(), { ...query });
    return pageEnvelope(page, this.requestUrl(withQuery(PATHS.users, query)));
  }

  async createUser(input: UserCreate): Promise<CreatedBody<UserView>> {
    return createdBody(USER_MESSAGES.created, await users.createUser(await this.context(), { ...input }));
  }

  async getUser(ref: string): Promise<UserView> {
    return users.getUser(await this.context(), this.ref(ref));
  }

  async updateUser(ref: string, input: UserUpdate): Promise<UserView> {
    return users.updateUser(await this.context(), this.ref(ref), { ...input });
  }

  async deleteUser(ref: string): Promise<MessageBody> {
    await users.deleteUser(await this.context(), this.ref(ref));
    return messageBody(USER_MESSAGES.deleted);
  }

  // Invitations: the path parameters checked as the routes check them; mail as the server sends it.
  private invitationRef(org: string, ref: string): InvitationRef {
    return validate(InvitationRef, { org, invitation: ref }, 'query');
  }

  async listInvitations(org: string, query: InvitationListParams): Promise<PageEnvelope<InvitationView>> {
    const page = await invitations.listInvitations(await this.context(), validate(OrgRef, { org }, 'query').org, { ...query });
    return pageEnvelope(page, this.requestUrl(withQuery(PATHS.invitations(org), query)));
  }

  async createInvitation(org: string, input: InvitationCreate): Promise<CreatedBody<InvitationView>> {
    const deps = directInvitationDeps(this.config, directBaseUrl(this.config).origin);
    const ref = validate(OrgRef, { org }, 'query').org;
    return createdBody(INVITATION_MESSAGES.created, await invitations.createInvitation(await this.context(), ref, structuredClone(input), deps));
  }

  async getInvitation(org: string, ref: string): Promise<InvitationView> {
    const p = this.invitationRef(org, ref);
    return invitations.getInvitation(await this.context(), p.org, p.invitation);
  }

  async cancelInvitation(org: string, ref: string): Promise<MessageBody> {
    const p = this.invitationRef(org, ref);
    await invitations.cancelInvitation(await this.context(), p.org, p.invitation);
    return messageBody(INVITATION_MESSAGES.cancelled);
  }

  async resendInvitation(org: string, ref: string): Promise<CreatedBody<InvitationView>> {
    const p = this.invitationRef(org, ref);
    const deps = directInvitationDeps(this.config, directBaseUrl(this.config).origin);
    return createdBody(INVITATION_MESSAGES.resent, await invitations.resendInvitation(await this.context(), p.org, p.invitation, deps));
  }

  // Organizations, members, groups: the path parameters checked as the routes check them.
  private org(ref: string): string {
    return validate(OrganizationRef, { org: ref }, 'query').org;
  }

  private member(org: string, ref: string): MemberRef {
    return validate(MemberRef, { org, member: ref }, 'query');
  }

  private group(id: string): string {
    return validate(GroupRef, { id }, 'query').id;
  }

  async listOrganizations(query: OrganizationListParams): Promise<PageEnvelope<OrganizationView>> {
    const page = await orgs.listOrganizations(await this.context(), { ...query });
    return pageEnvelope(page, this.requestUrl(withQuery(PATHS.organizations, query)));
  }

  async createOrganization(input: OrganizationCreate): Promise<CreatedBody<OrganizationView>> {
    return createdBody(ORGANIZATION_MESSAGES.created, await orgs.createOrganization(await this.context(), { ...input }, this.config.quotas));
  }

  async getOrganization(ref: string): Promise<OrganizationView> {
    return orgs.getOrganization(await this.context(), this.org(ref));
  }

  async updateOrganization(ref: string, input: OrganizationUpdate): Promise<OrganizationView> {
    return orgs.updateOrganization(await this.context(), this.org(ref), { ...input });
  }

  async deleteOrganization(ref: string): Promise<MessageBody> {
    await orgs.deleteOrganization(await this.context(), this.org(ref));
    return messageBody(ORGANIZATION_MESSAGES.deleted);
  }

  async organizationPrivileges(ref: string): Promise<Privileges> {
    return orgs.organizationPrivileges(await this.context(), this.org(ref));
  }

  async listMembers(org: string, query: MemberListParams): Promise<PageEnvelope<MemberView>> {
    const page = await members.listMembers(await this.context(), this.org(org), { ...query });
    return pageEnvelope(page, this.requestUrl(withQuery(PATHS.members(org), query)));
  }

  async addMember(org: string, input: MemberAdd): Promise<CreatedBody<MemberView>> {
    return createdBody(ORGANIZATION_MESSAGES.memberAdded, await members.addMember(await this.context(), this.org(org), { ...input }));
  }

  async getMember(org: string, ref: string): Promise<MemberView> {
    const p = this.member(org, ref);
    return members.getMember(await this.context(), p.org, p.member);
  }

  async updateMember(org: string, ref: string, input: MemberUpdate): Promise<MemberView> {
    const p = this.member(org, ref);
    return members.updateMember(await this.context(), p.org, p.member, { ...input });
  }

  async removeMember(org: string, ref: string): Promise<MessageBody> {
    const p = this.member(org, ref);
    await members.removeMember(await this.context(), p.org, p.member);
    return messageBody(ORGANIZATION_MESSAGES.memberRemoved);
  }

  async setMemberAdmin(org: string, ref: string, isAdmin: boolean): Promise<MessageBody> {
    const p = this.member(org, ref);
    await members.setAdmin(await this.context(), p.org, p.member, isAdmin);
    return messageBody(isAdmin ? ORGANIZATION_MESSAGES.madeAdmin : ORGANIZATION_MESSAGES.removedAdmin);
  }

  async listGroups(query: GroupListParams): Promise<PageEnvelope<GroupView>> {
    const page = await groups.listGroups(await this.context(), { ...query });
    return pageEnvelope(page, this.requestUrl(withQuery(PATHS.groups, query)));
  }

  async createGroup(input: GroupCreate): Promise<CreatedBody<GroupView>> {
    return createdBody(GROUP_MESSAGES.created, await groups.createGroup(await this.context(), { ...input }));
  }

  async getGroup(id: string): Promise<GroupView> {
    return groups.getGroup(await this.context(), this.group(id));
  }

  async updateGroup(id: string, input: GroupUpdate): Promise<GroupView> {
    return groups.updateGroup(await this.context(), this.group(id), { ...input });
  }

  async deleteGroup(id: string): Promise<MessageBody> {
    await groups.deleteGroup(await this.context(), this.group(id));
    return messageBody(GROUP_MESSAGES.deleted);
  }

  // Sites and domains: the path parameters checked as the routes check them; the deployment
  // settings (ENVIRONMENT prefix, base domain, platform hosts) of this configuration.
  private siteSettings(): sites.SiteSettings {
    return { environment: this.config.environment, baseDomain: this.config.baseDomain, platformHosts: this.config.platformHosts, quotas: this.config.quotas };
  }

  private siteRef(ref: string): string {
    return validate(SiteRef, { site: ref }, 'query').site;
  }

  private domainRef(site: string, ref: string): DomainRef {
    return validate(DomainRef, { site, domain: ref }, 'query');
  }

  async listSites(query: SiteListParams, org?: string): Promise<PageEnvelope<SiteView>> {
    const orgRef = org === undefined ? undefined : validate(OrgSitesRef, { org }, 'query').org;
    const page = await sites.listSites(await this.context(), { ...query }, orgRef);
    return pageEnvelope(page, this.requestUrl(withQuery(org === undefined ? PATHS.sites : PATHS.orgSites(org), query)));
  }

  async createSite(org: string, input: SiteCreate): Promise<CreatedBody<SiteView>> {
    const orgRef = validate(OrgSitesRef, { org }, 'query').org;
    return createdBody(SITE_MESSAGES.created, await sites.createSite(await this.context(), orgRef, structuredClone(input), this.siteSettings()));
  }

  async getSite(ref: string): Promise<SiteView> {
    return sites.getSite(await this.context(), this.siteRef(ref));
  }

  async updateSite(ref: string, input: SiteUpdate): Promise<SiteView> {
    return sites.updateSite(await this.context(), this.siteRef(ref), structuredClone(input));
  }

  async deleteSite(ref: string): Promise<MessageBody> {
    await sites.deleteSite(await this.context(), this.siteRef(ref));
    return messageBody(SITE_MESSAGES.deleted);
  }

  async sitePrivileges(ref: string): Promise<SitePrivileges> {
    return sites.sitePrivileges(await this.context(), this.siteRef(ref));
  }

  async listDomains(site: string, query: DomainListParams): Promise<PageEnvelope<DomainView>> {
    const page = await domains.listDomains(await this.context(), this.siteRef(site), { ...query });
    return pageEnvelope(page, this.requestUrl(withQuery(PATHS.domains(site), query)));
  }

  async createDomain(site: string, input: DomainCreate): Promise<CreatedBody<DomainView>> {
    return createdBody(DOMAIN_MESSAGES.created, await domains.createDomain(await this.context(), this.siteRef(site), { ...input }, this.siteSettings()));
  }

  async getDomain(site: string, ref: string): Promise<DomainView> {
    const p = this.domainRef(site, ref);
    return domains.getDomain(await this.context(), p.site, p.domain);
  }

  async updateDomain(site: string, ref: string, input: DomainUpdate): Promise<DomainView> {
    const p = this.domainRef(site, ref);
    return domains.updateDomain(await this.context(), p.site, p.domain, { ...input }, this.siteSettings(), 'patch');
  }

  async deleteDomain(site: string, ref: string): Promise<MessageBody> {
    const p = this.domainRef(site, ref);
    await domains.deleteDomain(await this.context(), p.site, p.domain);
    return messageBody(DOMAIN_MESSAGES.deleted);
  }

  // A site's secrets and secret types: the site's schema (tenantEm) as the system actor; the
  // path parameters checked as the routes check them; links as the API computes them.
  private keyringCache: SecretKeyring | undefined;

  private get keyring(): SecretKeyring {
    return (this.keyringCache ??= cliKeyring(this.config));
  }

  private async siteCtx(site: string): Promise<ServiceContext> {
    return siteContext((await this.database()).orm.em.fork(), site, CLI_ACTOR);
  }

  private secretKey(key: string): string {
    return validate(SecretRef, { key }, 'query').key;
  }

  private secretTypeRef(ref: string): string {
    return validate(SecretTypeRef, { slug: ref }, 'query').slug;
  }

  async listSecrets(site: string, query: SecretListParams): Promise<PageEnvelope<SecretListItem>> {
    const page = await secrets.listSecrets(await this.siteCtx(site), { ...query });
    return pageEnvelope(page, this.requestUrl(PATHS.siteApi(site) + withQuery(PATHS.secrets, query)));
  }

  async createSecret(site: string, input: SecretCreate): Promise<CreatedBody<SecretListItem>> {
    return createdBody(SECRET_MESSAGES.created, await secrets.createSecret(await this.siteCtx(site), this.keyring, structuredClone(input)));
  }

  async getSecret(site: string, key: string, app?: string): Promise<SecretView> {
    const ctx = await this.siteCtx(site);
    return secrets.getSecret(ctx, this.keyring, this.secretKey(key), app === undefined ? {} : { app });
  }

  async updateSecret(site: string, key: string, input: SecretUpdate, app?: string): Promise<SecretListItem> {
    const ctx = await this.siteCtx(site);
    return secrets.updateSecret(ctx, this.keyring, this.secretKey(key), app === undefined ? {} : { app }, structuredClone(input));
  }

  async deleteSecret(site: string, key: string, app?: string): Promise<MessageBody> {
    const ctx = await this.siteCtx(site);
    await secrets.deleteSecret(ctx, this.secretKey(key), app === undefined ? {} : { app });
    return messageBody(SECRET_MESSAGES.deleted);
  }

  async secretHistory(site: string, key: string, query: SecretHistoryParams): Promise<PageEnvelope<SecretHistoryItem>> {
    const ctx = await this.siteCtx(site);
    const page = await secrets.secretHistory(ctx, this.secretKey(key), { ...query });
    return pageEnvelope(page, this.requestUrl(PATHS.siteApi(site) + withQuery(PATHS.secretHistory(key), query)));
  }

  async listSecretTypes(site: string, query: SecretTypeListParams): Promise<PageEnvelope<SecretTypeView>> {
    const page = await secretTypes.listSecretTypes(await this.siteCtx(site), { ...query });
    return pageEnvelope(page, this.requestUrl(PATHS.siteApi(site) + withQuery(PATHS.secretTypes, query)));
  }

  async createSecretType(site: string, input: SecretTypeCreate): Promise<CreatedBody<SecretTypeView>> {
    return createdBody(SECRET_MESSAGES.typeCreated, await secretTypes.createSecretType(await this.siteCtx(site), structuredClone(input)));
  }

  async getSecretType(site: string, ref: string): Promise<SecretTypeView> {
    const ctx = await this.siteCtx(site);
    return secretTypes.getSecretType(ctx, this.secretTypeRef(ref));
  }

  async deleteSecretType(site: string, ref: string): Promise<MessageBody> {
    const ctx = await this.siteCtx(site);
    await secretTypes.deleteSecretType(ctx, this.secretTypeRef(ref));
    return messageBody(SECRET_MESSAGES.typeDeleted);
  }

  // A site's apps and data sources: the site schema as the system actor; slugs checked as the
  // routes check them; icon URLs as the API computes them (through /sites/<schema>).
  private appSlug(slug: string): string {
    return validate(AppRef, { app_slug: slug }, 'query').app_slug;
  }

  private dsRef(app: string, ds: string): { slug: string; ds: string } {
    const ref = validate(DataSourceRef, { app_slug: app, ds }, 'query');
    return { slug: ref.app_slug, ds: ref.ds };
  }

  private siteBase(site: string): string {
    return this.requestUrl(PATHS.siteApi(site));
  }

  async listApps(site: string, isActive?: string): Promise<ListBody<AppListItem>> {
    const { data, total } = await apps.listApps(await this.siteCtx(site), isActive === undefined ? {} : { is_active: isActive }, this.siteBase(site));
    return { status: 'success', message: APP_MESSAGES.listed, data, total };
  }

  async createApp(site: string, input: AppCreate): Promise<CreatedBody<AppDetail>> {
    return createdBody(APP_MESSAGES.created, await apps.createApp(await this.siteCtx(site), structuredClone(input), this.siteBase(site)));
  }

  async getApp(site: string, slug: string): Promise<CreatedBody<AppDetail>> {
    const ctx = await this.siteCtx(site);
    return createdBody(APP_MESSAGES.retrieved, await apps.getApp(ctx, this.appSlug(slug), this.siteBase(site)));
  }

  async updateApp(site: string, slug: string, input: AppUpdate): Promise<CreatedBody<AppDetail>> {
    const ctx = await this.siteCtx(site);
    return createdBody(APP_MESSAGES.updated, await apps.updateApp(ctx, this.appSlug(slug), structuredClone(input), this.siteBase(site)));
  }

  async deleteApp(site: string, slug: string): Promise<MessageBody> {
    const ctx = await this.siteCtx(site);
    await apps.deleteApp(ctx, this.appSlug(slug));
    return messageBody(APP_MESSAGES.deleted(slug));
  }

  async restoreApp(site: string, slug: string): Promise<{ message: string }> {
    const ctx = await this.siteCtx(site);
    await apps.restoreApp(ctx, this.appSlug(slug));
    return { message: APP_MESSAGES.restored(slug) };
  }

  async appStats(site: string, slug: string): Promise<AppStats> {
    const ctx = await this.siteCtx(site);
    return apps.appStats(ctx, this.appSlug(slug));
  }

  async listDataSources(site: string, app: string): Promise<ListBody<DataSourceView>> {
    const ctx = await this.siteCtx(site);
    const { data, total } = await dataSources.listDataSources(ctx, this.appSlug(app));
    return { status: 'success', message: APP_MESSAGES.dataSourcesListed, data, total };
  }

  async createDataSource(site: string, app: string, input: DataSourceCreate): Promise<CreatedBody<DataSourceView>> {
    const ctx = await this.siteCtx(site);
    return createdBody(APP_MESSAGES.dataSourceCreated, await dataSources.createDataSource(ctx, this.appSlug(app), structuredClone(input)));
  }

  async getDataSource(site: string, app: string, ds: string): Promise<DataSourceView> {
    const ctx = await this.siteCtx(site);
    const p = this.dsRef(app, ds);
    return dataSources.getDataSource(ctx, p.slug, p.ds);
  }

  async updateDataSource(site: string, app: string, ds: string, input: DataSourceUpdate): Promise<DataSourceView> {
    const ctx = await this.siteCtx(site);
    const p = this.dsRef(app, ds);
    return dataSources.updateDataSource(ctx, p.slug, p.ds, structuredClone(input));
  }

  async deleteDataSource(site: string, app: string, ds: string): Promise<MessageBody> {
    const ctx = await this.siteCtx(site);
    const p = this.dsRef(app, ds);
    await dataSources.deleteDataSource(ctx, p.slug, p.ds);
    return messageBody(APP_MESSAGES.dataSourceDeleted(ds));
  }

  async close(): Promise<void> {
    const db = this.db;
    this.db = undefined;
    if (db) await (await db.catch(() => undefined))?.close();
  }
}
