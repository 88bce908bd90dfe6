// Remote mode: a typed client of our own HTTP API. Authenticated calls send the access
// token stored by `platform login`; when the API says the token is expired or invalid
// (401 INVALID_TOKEN) and a refresh token is stored, it refreshes once, saves the new
// access token and retries. Error bodies are decoded back into DomainError.
import type { CreatedBody, MessageBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import { DomainError, NOT_AUTHENTICATED_DETAIL } from '../../shared/errors.ts';
import type { UserCreate, UserUpdate, UserView } from '../../shared/users/user.schemas.ts';
import type { SiteCreate, SiteUpdate, SiteView, Privileges as SitePrivileges } from '../../shared/sites/site.schemas.ts';
import type { DomainCreate, DomainUpdate, DomainView } from '../../shared/sites/domain.schemas.ts';
import type { DomainListParams, SiteListParams } from './types.ts';
import type { InvitationCreate, InvitationView } from '../../shared/invitations/invitation.schemas.ts';
import type { InvitationListParams } from './types.ts';
import type { MemberAdd, MemberUpdate, MemberView } from '../../shared/organizations/member.schemas.ts';
import type { OrganizationCreate, OrganizationUpdate, OrganizationView, Privileges } from '../../shared/organizations/organization.schemas.ts';
import type { GroupCreate, GroupUpdate, GroupView } from '../../shared/permissions/group.schemas.ts';
import type { SecretCreate, SecretHistoryItem, SecretListItem, SecretUpdate, SecretView } from '../../shared/secrets/secret.schemas.ts';
import type { SecretTypeCreate, SecretTypeView } from '../../shared/secrets/secret-type.schemas.ts';
import type { AppCreate, AppDetail, AppListItem, AppStats, AppUpdate } from '../../shared/apps/app.schemas.ts';
import type { DataSourceCreate, DataSourceUpdate, DataSourceView } from '../../shared/apps/datasource.schemas.ts';
import type { ListBody } from './types.ts';
import { Readable } from 'node:stream';
import type { DataTableCreate, DataTableListItem, DataTableStats, DataTableUpdate, DataTableView } from '../../shared/data/datatable.schemas.ts';
import { csvImportQuery, TABLE_PATHS, withRecordQuery } from './table-paths.ts';
import type { CsvImportOptions, CsvImportReport, DeletedBody, RecordPageBody, RecordQuery, RecordRow, TableListParams, TableSchemaView, ValidateDataView } from './types.ts';
import { isValidSchemaName } from '../../shared/tenancy/schema.ts';
import type { SecretHistoryParams, SecretListParams, SecretTypeListParams } from './types.ts';
import type { CredentialStore, Credentials } from '../credentials.ts';
import { PATHS, siteApiUrl, withQuery } from './paths.ts';
import type { Backend, GroupListParams, MemberListParams, OrganizationListParams, UserListParams } from './types.ts';

const TIMEOUT_MS = 60_000;

/** The API URL to use, checked: a clear error when there is none or it is malformed. */
export function requireApiUrl(apiUrl: string | undefined, hint = ', or use --direct to work on the database'): string {
  if (!apiUrl) throw new DomainError('BAD_REQUEST', `No API URL: pass --api-url or set PLATFORM_API_URL${hint}.`);
  let url: URL;
  try {
    url = new URL(apiUrl);
  } catch {
    throw new DomainError('BAD_REQUEST', `Invalid API URL ${JSON.stringify(apiUrl)}: expected http(s)://host[:port].`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new DomainError('BAD_REQUEST', `Invalid API URL ${JSON.stringify(apiUrl)}: expected http(s)://host[:port].`);
  }
  return apiUrl;
}

interface RequestOptions {
  body?: unknown;
  /** Send the stored access token (and refresh it when needed). */
  auth?: boolean;
}

export class ApiClient {
  readonly apiUrl: string;
  private readonly store: CredentialStore;

  /** The site schema when this client talks to one site's API (`forSite`). */
  readonly site: string | undefined;

  constructor(apiUrl: string, store: CredentialStore, site?: string) {
    this.apiUrl = apiUrl;
    this.store = store;
    this.site = site;
  }

  /** A client of one site's API through this platform URL, with that site's own stored login. */
  forSite(site: string): ApiClient {
    if (!isValidSchemaName(site)) throw new DomainError('NOT_FOUND', 'Site not found.', { detail: 'Not found.' });
    return new ApiClient(siteApiUrl(this.apiUrl, site), this.store, site);
  }

  private get loginCommand(): string {
    return this.site ? `platform login --site ${this.site}` : 'platform login';
  }

  private url(path: string): string {
    return this.apiUrl.replace(/\/+$/, '') + path;
  }

  /** One HTTP exchange: status and parsed JSON body (network failures become 503 SERVICE_UNAVAILABLE). */
  private async send(method: string, path: string, body: unknown, access?: string): Promise<{ status: number; body: unknown }> {
    const headers: Record<string, string> = { Accept: 'application/json' };
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (access) headers.Authorization = `Bearer ${access}`;
    let res: Response;
    try {
      res = await fetch(this.url(path), {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(TIMEOUT_MS),
      });
    } catch (err) {
      const cause = (err as { cause?: { code?: string; message?: string } }).cause;
      const reason = cause?.code ?? cause?.message ?? (err as Error).message;
      throw new DomainError('SERVICE_UNAVAILABLE', `Cannot reach the API at ${this.apiUrl} (${reason}).`);
    }
    const text = await res.text();
    let parsed: unknown = undefined;
    if (text) {
      try {
        parsed = JSON.parse(text);
      } catch {
        if (res.ok) throw new DomainError('BAD_GATEWAY', `The API at ${this.apiUrl} answered ${method} ${path} with a body that is not JSON.`);
      }
    }
    return { status: res.status, body: parsed };
  }

  private credentials(): Credentials {
    const creds = this.store.get(this.apiUrl);
    if (!creds) {
      throw new DomainError('AUTHENTICATION_FAILED', `Not logged in to ${this.apiUrl}: run \`${this.loginCommand}\` first (or use --direct to work on the database).`, {
        detail: NOT_AUTHENTICATED_DETAIL,
      });
    }
    return creds;
  }

  /** Exchanges the stored refresh token for a new access token and saves it. */
  private async refresh(creds: Credentials): Promise<Credentials> {
    const res = await this.send('POST', PATHS.refresh, { refresh: creds.refresh });
    if (res.status !== 200) {
      const err = DomainError.fromBody(res.status, res.body);
      if (err.status !== 401) throw err;
      throw new DomainError('INVALID_TOKEN', `Your session at ${this.apiUrl} has ended (${err.message}): run \`${this.loginCommand}\` again.`, {
        detail: err.detail,
      });
    }
    const updated = { ...creds, access: (res.body as { access: string }).access };
    this.store.set(this.apiUrl, updated);
    return updated;
  }

  async request<T>(method: string, path: string, options: RequestOptions = {}): Promise<T> {
    let creds = options.auth ? this.credentials() : undefined;
    let res = await this.send(method, path, options.body, creds?.access);
    if (creds && res.status === 401 && (res.body as { code?: string } | undefined)?.code === 'INVALID_TOKEN' && creds.refresh) {
      creds = await this.refresh(creds);
      res = await this.send(method, path, options.body, creds.access);
    }
    if (res.status < 200 || res.status >= 300) throw DomainError.fromBody(res.status, res.body);
    return res.body as T;
  }
  /**
   * A request whose body and/or answer are streams (CSV import and export): `open` gives the
   * body (called again when the token is refreshed and the request retried). No overall
   * timeout: the transfer lasts as long as the data. Answers the Response of a 2xx; an error
   * body becomes a DomainError.
   */
  async stream(method: string, path: string, options: { open?: () => Readable; contentType?: string; accept: string; auth?: boolean }): Promise<Response> {
    const exchange = async (access?: string): Promise<Response> => {
      const headers: Record<string, string> = { Accept: `${options.accept}, application/json` };
      if (options.open) headers['Content-Type'] = options.contentType ?? 'application/octet-stream';
      if (access) headers.Authorization = `Bearer ${access}`;
      try {
        const init: RequestInit & { duplex?: 'half' } = { method, headers };
        if (options.open) {
          init.body = Readable.toWeb(options.open()) as ReadableStream;
          init.duplex = 'half';
        }
        return await fetch(this.url(path), init);
      } catch (err) {
        const cause = (err as { cause?: { code?: string; message?: string } }).cause;
        const reason = cause?.code ?? cause?.message ?? (err as Error).message;
        throw new DomainError('SERVICE_UNAVAILABLE', `Cannot reach the API at ${this.apiUrl} (${reason}).`);
      }
    };
    const failure = async (res: Response): Promise<{ status: number; body: unknown }> => {
      const text = await res.text();
      let body: unknown;
      try {
        body = text ? JSON.parse(text) : undefined;
      } catch {
        body = undefined;
      }
      return { status: res.status, body };
    };
    let creds = options.auth ? this.credentials() : undefined;
    let res = await exchange(creds?.access);
    if (res.ok) return res;
    let err = await failure(res);
    if (creds && err.status === 401 && (err.body as { code?: string } | undefined)?.code === 'INVALID_TOKEN' && creds.refresh) {
      creds = await this.refresh(creds);
      res = await exchange(creds.access);
      if (res.ok) return res;
      err = await failure(res);
    }
    throw DomainError.fromBody(err.status, err.body);
  }
}

export class RemoteBackend implements Backend {
  readonly mode = 'remote' as const;
  private readonly api: ApiClient;

  constructor(api: ApiClient) {
    this.api = api;
  }

  whoami(): Promise<UserView> {
    return this.api.request('GET', PATHS.profile, { auth: true });
  }

  listUsers(query: UserListParams): Promise<PageEnvelope<UserView>> {
    return this.api.request('GET', withQuery(PATHS.users, query), { auth: true });
  }

  createUser(input: UserCreate): Promise<CreatedBody<UserView>> {
    return this.api.request('POST', PATHS.users, { auth: true, body: input });
  }

  getUser(ref: string): Promise<UserView> {
    return this.api.request('GET', PATHS.user(ref), { auth: true });
  }

  updateUser(ref: string, input: UserUpdate): Promise<UserView> {
    return this.api.request('PUT', PATHS.user(ref), { auth: true, body: input });
  }

  deleteUser(ref: string): Promise<MessageBody> {
    return this.api.request('DELETE', PATHS.user(ref), { auth: true });
  }

  listInvitations(org: string, query: InvitationListParams): Promise<PageEnvelope<InvitationView>> {
    return this.api.request('GET', withQuery(PATHS.invitations(org), query), { auth: true });
  }

  createInvitation(org: string, input: InvitationCreate): Promise<CreatedBody<InvitationView>> {
    return this.api.request('POST', PATHS.invitations(org), { auth: true, body: input });
  }

  getInvitation(org: string, ref: string): Promise<InvitationView> {
    return this.api.request('GET', PATHS.invitation(org, ref), { auth: true });
  }

  cancelInvitation(org: string, ref: string): Promise<MessageBody> {
    return this.api.request('DELETE', PATHS.invitation(org, ref), { auth: true });
  }

  resendInvitation(org: string, ref: string): Promise<CreatedBody<InvitationView>> {
    return this.api.request('POST', `${PATHS.invitation(org, ref)}resend/`, { auth: true });
  }

  listOrganizations(query: OrganizationListParams): Promise<PageEnvelope<OrganizationView>> {
    return this.api.request('GET', withQuery(PATHS.organizations, query), { auth: true });
  }

  createOrganization(input: OrganizationCreate): Promise<CreatedBody<OrganizationView>> {
    return this.api.request('POST', PATHS.organizations, { auth: true, body: input });
  }

  getOrganization(ref: string): Promise<OrganizationView> {
    return this.api.request('GET', PATHS.organization(ref), { auth: true });
  }

  updateOrganization(ref: string, input: OrganizationUpdate): Promise<OrganizationView> {
    return this.api.request('PUT', PATHS.organization(ref), { auth: true, body: input });
  }

  deleteOrganization(ref: string): Promise<MessageBody> {
    return this.api.request('DELETE', PATHS.organization(ref), { auth: true });
  }

  organizationPrivileges(ref: string): Promise<Privileges> {
    return this.api.request('GET', PATHS.organizationPrivileges(ref), { auth: true });
  }

  listMembers(org: string, query: MemberListParams): Promise<PageEnvelope<MemberView>> {
    return this.api.request('GET', withQuery(PATHS.members(org), query), { auth: true });
  }

  addMember(org: string, input: MemberAdd): Promise<CreatedBody<MemberView>> {
    return this.api.request('POST', PATHS.members(org), { auth: true, body: input });
  }

  getMember(org: string, ref: string): Promise<MemberView> {
    return this.api.request('GET', PATHS.member(org, ref), { auth: true });
  }

  updateMember(org: string, ref: string, input: MemberUpdate): Promise<MemberView> {
    return this.api.request('PUT', PATHS.member(org, ref), { auth: true, body: input });
  }

  removeMember(org: string, ref: string): Promise<MessageBody> {
    return this.api.request('DELETE', PATHS.member(org, ref), { auth: true });
  }

  setMemberAdmin(org: string, ref: string, isAdmin: boolean): Promise<MessageBody> {
    return this.api.request('POST', `${PATHS.member(org, ref)}${isAdmin ? 'make_admin' : 'remove_admin'}/`, { auth: true });
  }

  listGroups(query: GroupListParams): Promise<PageEnvelope<GroupView>> {
    return this.api.request('GET', withQuery(PATHS.groups, query), { auth: true });
  }

  createGroup(input: GroupCreate): Promise<CreatedBody<GroupView>> {
    return this.api.request('POST', PATHS.groups, { auth: true, body: input });
  }

  getGroup(id: string): Promise<GroupView> {
    return this.api.request('GET', PATHS.group(id), { auth: true });
  }

  updateGroup(id: string, input: GroupUpdate): Promise<GroupView> {
    return this.api.request('PUT', PATHS.group(id), { auth: true, body: input });
  }

  deleteGroup(id: string): Promise<MessageBody> {
    return this.api.request('DELETE', PATHS.group(id), { auth: true });
  }

  listSites(query: SiteListParams, org?: string): Promise<PageEnvelope<SiteView>> {
    return this.api.request('GET', withQuery(org === undefined ? PATHS.sites : PATHS.orgSites(org), query), { auth: true });
  }

  createSite(org: string, input: SiteCreate): Promise<CreatedBody<SiteView>> {
    return this.api.request('POST', PATHS.orgSites(org), { auth: true, body: input });
  }

  getSite(ref: string): Promise<SiteView> {
    return this.api.request('GET', PATHS.site(ref), { auth: true });
  }

  updateSite(ref: string, input: SiteUpdate): Promise<SiteView> {
    return this.api.request('PATCH', PATHS.site(ref), { auth: true, body: input });
  }

  deleteSite(ref: string): Promise<MessageBody> {
    return this.api.request('DELETE', PATHS.site(ref), { auth: true });
  }

  sitePrivileges(ref: string): Promise<SitePrivileges> {
    return this.api.request('GET', PATHS.sitePrivileges(ref), { auth: true });
  }

  listDomains(site: string, query: DomainListParams): Promise<PageEnvelope<DomainView>> {
    return this.api.request('GET', withQuery(PATHS.domains(site), query), { auth: true });
  }

  createDomain(site: string, input: DomainCreate): Promise<CreatedBody<DomainView>> {
    return this.api.request('POST', PATHS.domains(site), { auth: true, body: input });
  }

  getDomain(site: string, ref: string): Promise<DomainView> {
    return this.api.request('GET', PATHS.domain(site, ref), { auth: true });
  }

  updateDomain(site: string, ref: string, input: DomainUpdate): Promise<DomainView> {
    return this.api.request('PATCH', PATHS.domain(site, ref), { auth: true, body: input });
  }

  deleteDomain(site: string, ref: string): Promise<MessageBody> {
    return this.api.request('DELETE', PATHS.domain(site, ref), { auth: true });
  }

  // A site's secrets and secret types: <api-url>/sites/<site>/api/… with the site's login.
  listSecrets(site: string, query: SecretListParams): Promise<PageEnvelope<SecretListItem>> {
    return this.api.forSite(site).request('GET', withQuery(PATHS.secrets, query), { auth: true });
  }

  createSecret(site: string, input: SecretCreate): Promise<CreatedBody<SecretListItem>> {
    return this.api.forSite(site).request('POST', PATHS.secrets, { auth: true, body: input });
  }

  getSecret(site: string, key: string, app?: string): Promise<SecretView> {
    return this.api.forSite(site).request('GET', withQuery(PATHS.secret(key), { app }), { auth: true });
  }

  updateSecret(site: string, key: string, input: SecretUpdate, app?: string): Promise<SecretListItem> {
    return this.api.forSite(site).request('PUT', withQuery(PATHS.secret(key), { app }), { auth: true, body: input });
  }

  deleteSecret(site: string, key: string, app?: string): Promise<MessageBody> {
    return this.api.forSite(site).request('DELETE', withQuery(PATHS.secret(key), { app }), { auth: true });
  }

  secretHistory(site: string, key: string, query: SecretHistoryParams): Promise<PageEnvelope<SecretHistoryItem>> {
    return this.api.forSite(site).request('GET', withQuery(PATHS.secretHistory(key), query), { auth: true });
  }

  listSecretTypes(site: string, query: SecretTypeListParams): Promise<PageEnvelope<SecretTypeView>> {
    return this.api.forSite(site).request('GET', withQuery(PATHS.secretTypes, query), { auth: true });
  }

  createSecretType(site: string, input: SecretTypeCreate): Promise<CreatedBody<SecretTypeView>> {
    return this.api.forSite(site).request('POST', PATHS.secretTypes, { auth: true, body: input });
  }

  getSecretType(site: string, ref: string): Promise<SecretTypeView> {
    return this.api.forSite(site).request('GET', PATHS.secretType(ref), { auth: true });
  }

  deleteSecretType(site: string, ref: string): Promise<MessageBody> {
    return this.api.forSite(site).request('DELETE', PATHS.secretType(ref), { auth: true });
  }

  // A site's apps and data sources: <api-url>/sites/<site>/api/apps/… with the site's login.
  listApps(site: string, isActive?: string): Promise<ListBody<AppListItem>> {
    return this.api.forSite(site).request('GET', withQuery(PATHS.apps, { is_active: isActive }), { auth: true });
  }

  createApp(site: string, input: AppCreate): Promise<CreatedBody<AppDetail>> {
    return this.api.forSite(site).request('POST', PATHS.apps, { auth: true, body: input });
  }

  getApp(site: string, slug: string): Promise<CreatedBody<AppDetail>> {
    return this.api.forSite(site).request('GET', PATHS.app(slug), { auth: true });
  }

  updateApp(site: string, slug: string, input: AppUpdate): Promise<CreatedBody<AppDetail>> {
    return this.api.forSite(site).request('PATCH', PATHS.app(slug), { auth: true, body: input });
  }

  deleteApp(site: string, slug: string): Promise<MessageBody> {
    return this.api.forSite(site).request('DELETE', PATHS.app(slug), { auth: true });
  }

  restoreApp(site: string, slug: string): Promise<{ message: string }> {
    return this.api.forSite(site).request('POST', PATHS.appRestore(slug), { auth: true });
  }

  appStats(site: string, slug: string): Promise<AppStats> {
    return this.api.forSite(site).request('GET', PATHS.appStats(slug), { auth: true });
  }

  listDataSources(site: string, app: string): Promise<ListBody<DataSourceView>> {
    return this.api.forSite(site).request('GET', PATHS.dataSources(app), { auth: true });
  }

  createDataSource(site: string, app: string, input: DataSourceCreate): Promise<CreatedBody<DataSourceView>> {
    return this.api.forSite(site).request('POST', PATHS.dataSources(app), { auth: true, body: input });
  }

  getDataSource(site: string, app: string, ds: string): Promise<DataSourceView> {
    return this.api.forSite(site).request('GET', PATHS.dataSource(app, ds), { auth: true });
  }

  updateDataSource(site: string, app: string, ds: string, input: DataSourceUpdate): Promise<DataSourceView> {
    return this.api.forSite(site).request('PATCH', PATHS.dataSource(app, ds), { auth: true, body: input });
  }

  deleteDataSource(site: string, app: string, ds: string): Promise<MessageBody> {
    return this.api.forSite(site).request('DELETE', PATHS.dataSource(app, ds), { auth: true });
  }

  // A site's data tables and records: <api-url>/sites/<site>/api/apps/:app/datatables/… with the site's login.
  listTables(site: string, app: string, query: TableListParams): Promise<PageEnvelope<DataTableListItem>> {
    return this.api.forSite(site).request('GET', withQuery(TABLE_PATHS.tables(app), { ...query }), { auth: true });
  }

  createTable(site: string, app: string, ds: string, input: DataTableCreate): Promise<CreatedBody<DataTableView>> {
    return this.api.forSite(site).request('POST', TABLE_PATHS.sourceTables(app, ds), { auth: true, body: input });
  }

  getTable(site: string, app: string, name: string): Promise<DataTableView> {
    return this.api.forSite(site).request('GET', TABLE_PATHS.table(app, name), { auth: true });
  }

  updateTable(site: string, app: string, name: string, input: DataTableUpdate): Promise<DataTableView> {
    return this.api.forSite(site).request('PATCH', TABLE_PATHS.table(app, name), { auth: true, body: input });
  }

  deleteTable(site: string, app: string, name: string): Promise<MessageBody> {
    return this.api.forSite(site).request('DELETE', TABLE_PATHS.table(app, name), { auth: true });
  }

  materializeTable(site: string, app: string, name: string): Promise<CreatedBody<DataTableView>> {
    return this.api.forSite(site).request('POST', TABLE_PATHS.tableMaterialize(app, name), { auth: true });
  }

  tableSchema(site: string, app: string, name: string): Promise<TableSchemaView> {
    return this.api.forSite(site).request('GET', TABLE_PATHS.tableSchema(app, name), { auth: true });
  }

  validateTableData(site: string, app: string, name: string, records: unknown[]): Promise<ValidateDataView> {
    return this.api.forSite(site).request('POST', TABLE_PATHS.tableValidate(app, name), { auth: true, body: { data: records } });
  }

  tableStats(site: string, app: string): Promise<DataTableStats> {
    return this.api.forSite(site).request('GET', TABLE_PATHS.tableStats(app), { auth: true });
  }

  listRecords(site: string, app: string, table: string, query: RecordQuery): Promise<RecordPageBody> {
    return this.api.forSite(site).request('GET', withRecordQuery(TABLE_PATHS.records(app, table), query), { auth: true });
  }

  getRecord(site: string, app: string, table: string, id: string, query: RecordQuery): Promise<{ data: RecordRow }> {
    return this.api.forSite(site).request('GET', withRecordQuery(TABLE_PATHS.record(app, table, id), query), { auth: true });
  }

  createRecords(site: string, app: string, table: string, body: unknown): Promise<{ data: RecordRow | RecordRow[] }> {
    return this.api.forSite(site).request('POST', TABLE_PATHS.records(app, table), { auth: true, body });
  }

  upsertRecord(site: string, app: string, table: string, body: unknown, uniqueFields: string): Promise<{ data: RecordRow; created: boolean }> {
    return this.api.forSite(site).request('POST', withQuery(TABLE_PATHS.upsert(app, table), { unique_fields: uniqueFields }), { auth: true, body });
  }

  patchRecord(site: string, app: string, table: string, id: string, body: unknown): Promise<{ data: RecordRow }> {
    return this.api.forSite(site).request('PATCH', TABLE_PATHS.record(app, table, id), { auth: true, body });
  }

  patchRecords(site: string, app: string, table: string, body: unknown): Promise<{ data: RecordRow[] }> {
    return this.api.forSite(site).request('PATCH', TABLE_PATHS.records(app, table), { auth: true, body });
  }

  async deleteRecord(site: string, app: string, table: string, id: string): Promise<void> {
    await this.api.forSite(site).request('DELETE', TABLE_PATHS.record(app, table, id), { auth: true });
  }

  deleteRecords(site: string, app: string, table: string, query: { ids?: string; filter?: string }): Promise<DeletedBody> {
    return this.api.forSite(site).request('DELETE', withQuery(TABLE_PATHS.records(app, table), query), { auth: true });
  }

  async exportCsv(site: string, app: string, table: string, query: RecordQuery): Promise<Readable> {
    const path = withRecordQuery(TABLE_PATHS.records(app, table), { ...query, format: 'csv' });
    const res = await this.api.forSite(site).stream('GET', path, { accept: 'text/csv', auth: true });
    if (!res.body) return Readable.from([]);
    return Readable.fromWeb(res.body as import('node:stream/web').ReadableStream<Uint8Array>);
  }

  async importCsv(site: string, app: string, table: string, open: () => Readable, options: CsvImportOptions): Promise<CsvImportReport> {
    const path = withQuery(TABLE_PATHS.csvImport(app, table), csvImportQuery(options));
    const res = await this.api.forSite(site).stream('POST', path, { open, contentType: 'text/csv', accept: 'application/json', auth: true });
    const text = await res.text();
    try {
      return JSON.parse(text) as CsvImportReport;
    } catch {
      throw new DomainError('BAD_GATEWAY', `The API at ${this.api.apiUrl} answered the CSV import with a body that is not JSON.`);
    }
  }

  async close(): Promise<void> {}
}
