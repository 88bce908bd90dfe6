// What a command can ask of the platform. Two implementations: remote (our own HTTP API)
// and direct (the shared services in-process). Every method returns the JSON body the API
// returns for that operation, so output, --json and exit codes do not depend on the mode.
import type { CreatedBody, MessageBody } from '../../shared/common/envelopes.ts';
import type { PageEnvelope } from '../../shared/common/pagination.ts';
import type { UserCreate, UserListQuery, UserUpdate, UserView } from '../../shared/users/user.schemas.ts';
import type { SiteCreate, SiteListQuery, SiteUpdate, SiteView, Privileges as SitePrivileges } from '../../shared/sites/site.schemas.ts';
import type { DomainCreate, DomainListQuery, DomainUpdate, DomainView } from '../../shared/sites/domain.schemas.ts';
import type { InvitationCreate, InvitationListQuery, InvitationView } from '../../shared/invitations/invitation.schemas.ts';
import type { MemberAdd, MemberListQuery, MemberUpdate, MemberView } from '../../shared/organizations/member.schemas.ts';
import type { OrganizationCreate, OrganizationListQuery, OrganizationUpdate, OrganizationView, Privileges } from '../../shared/organizations/organization.schemas.ts';
import type { GroupCreate, GroupListQuery, GroupUpdate, GroupView } from '../../shared/permissions/group.schemas.ts';
import type { SecretCreate, SecretHistoryItem, SecretHistoryQuery, SecretListItem, SecretListQuery, SecretUpdate, SecretView } from '../../shared/secrets/secret.schemas.ts';
import type { SecretTypeCreate, SecretTypeListQuery, SecretTypeView } from '../../shared/secrets/secret-type.schemas.ts';
import type { AppCreate, AppDetail, AppListItem, AppStats, AppUpdate } from '../../shared/apps/app.schemas.ts';
import type { DataSourceCreate, DataSourceUpdate, DataSourceView } from '../../shared/apps/datasource.schemas.ts';
import type { DataTableCreate, DataTableListItem, DataTableStats, DataTableUpdate, DataTableView } from '../../shared/data/datatable.schemas.ts';
import type { Readable } from 'node:stream';

/** The list envelopes of apps and data sources: {status, message, data, total}. */
export interface ListBody<T> {
  status: 'success';
  message: string;
  data: T[];
  total: number;
}

export type BackendMode = 'remote' | 'direct';

/** Secret, history and secret-type list filters as the query string carries them. */
export type SecretListParams = { [K in keyof SecretListQuery]?: string };
export type SecretHistoryParams = { [K in keyof SecretHistoryQuery]?: string };
export type SecretTypeListParams = { [K in keyof SecretTypeListQuery]?: string };

/** List filters as the query string carries them (strings; the service validates them). */
export type UserListParams = { [K in keyof UserListQuery]?: string };
export type SiteListParams = { [K in keyof SiteListQuery]?: string };
export type DomainListParams = { [K in keyof DomainListQuery]?: string };
export type InvitationListParams = { [K in keyof InvitationListQuery]?: string };
export type OrganizationListParams = { [K in keyof OrganizationListQuery]?: string };
export type MemberListParams = { [K in keyof MemberListQuery]?: string };
export type GroupListParams = { [K in keyof GroupListQuery]?: string };

/** `whoami` in direct mode: the explicit elevation the CLI acts with. */
export interface SystemActorView {
  actor: 'system';
  name: string;
  access: string;
}

export interface Backend extends DataBackend {
  readonly mode: BackendMode;
  /** GET /api/profile/ (remote); the system actor (direct). */
  whoami(): Promise<UserView | SystemActorView>;
  /** GET /api/cloud/users/ */
  listUsers(query: UserListParams): Promise<PageEnvelope<UserView>>;
  /** POST /api/cloud/users/ */
  createUser(input: UserCreate): Promise<CreatedBody<UserView>>;
  /** GET /api/cloud/users/:user/ */
  getUser(ref: string): Promise<UserView>;
  /** PUT /api/cloud/users/:user/ */
  updateUser(ref: string, input: UserUpdate): Promise<UserView>;
  /** DELETE /api/cloud/users/:user/ */
  deleteUser(ref: string): Promise<MessageBody>;
  /** GET /api/cloud/organizations/:org/invitations/ */
  listInvitations(org: string, query: InvitationListParams): Promise<PageEnvelope<InvitationView>>;
  /** POST /api/cloud/organizations/:org/invitations/ (sends the e-mail) */
  createInvitation(org: string, input: InvitationCreate): Promise<CreatedBody<InvitationView>>;
  /** GET /api/cloud/organizations/:org/invitations/:invitation/ */
  getInvitation(org: string, ref: string): Promise<InvitationView>;
  /** DELETE /api/cloud/organizations/:org/invitations/:invitation/ */
  cancelInvitation(org: string, ref: string): Promise<MessageBody>;
  /** POST /api/cloud/organizations/:org/invitations/:invitation/resend/ */
  resendInvitation(org: string, ref: string): Promise<CreatedBody<InvitationView>>;
  /** GET /api/cloud/organizations/ */
  listOrganizations(query: OrganizationListParams): Promise<PageEnvelope<OrganizationView>>;
  /** POST /api/cloud/organizations/ */
  createOrganization(input: OrganizationCreate): Promise<CreatedBody<OrganizationView>>;
  /** GET /api/cloud/organizations/:org/ */
  getOrganization(ref: string): Promise<OrganizationView>;
  /** PUT /api/cloud/organizations/:org/ */
  updateOrganization(ref: string, input: OrganizationUpdate): Promise<OrganizationView>;
  /** DELETE /api/cloud/organizations/:org/ */
  deleteOrganization(ref: string): Promise<MessageBody>;
  /** GET /api/cloud/organizations/:org/privileges/ */
  organizationPrivileges(ref: string): Promise<Privileges>;
  /** GET /api/cloud/organizations/:org/members/ */
  listMembers(org: string, query: MemberListParams): Promise<PageEnvelope<MemberView>>;
  /** POST /api/cloud/organizations/:org/members/ */
  addMember(org: string, input: MemberAdd): Promise<CreatedBody<MemberView>>;
  /** GET /api/cloud/organizations/:org/members/:member/ */
  getMember(org: string, ref: string): Promise<MemberView>;
  /** PUT /api/cloud/organizations/:org/members/:member/ */
  updateMember(org: string, ref: string, input: MemberUpdate): Promise<MemberView>;
  /** DELETE /api/cloud/organizations/:org/members/:member/ */
  removeMember(org: string, ref: string): Promise<MessageBody>;
  /** POST /api/cloud/organizations/:org/members/:member/make_admin/ (true) or remove_admin/ (false) */
  setMemberAdmin(org: string, ref: string, isAdmin: boolean): Promise<MessageBody>;
  /** GET /api/cloud/groups/ */
  listGroups(query: GroupListParams): Promise<PageEnvelope<GroupView>>;
  /** POST /api/cloud/groups/ */
  createGroup(input: GroupCreate): Promise<CreatedBody<GroupView>>;
  /** GET /api/cloud/groups/:id/ */
  getGroup(id: string): Promise<GroupView>;
  /** PUT /api/cloud/groups/:id/ */
  updateGroup(id: string, input: GroupUpdate): Promise<GroupView>;
  /** DELETE /api/cloud/groups/:id/ */
  deleteGroup(id: string): Promise<MessageBody>;
  /** GET /api/cloud/sites/, or GET /api/cloud/organizations/:org/sites/ with `org` */
  listSites(query: SiteListParams, org?: string): Promise<PageEnvelope<SiteView>>;
  /** POST /api/cloud/organizations/:org/sites/ */
  createSite(org: string, input: SiteCreate): Promise<CreatedBody<SiteView>>;
  /** GET /api/cloud/sites/:site/ */
  getSite(ref: string): Promise<SiteView>;
  /** PATCH /api/cloud/sites/:site/ */
  updateSite(ref: string, input: SiteUpdate): Promise<SiteView>;
  /** DELETE /api/cloud/sites/:site/ */
  deleteSite(ref: string): Promise<MessageBody>;
  /** GET /api/cloud/sites/:site/privileges/ */
  sitePrivileges(ref: string): Promise<SitePrivileges>;
  /** GET /api/cloud/sites/:site/domains/ */
  listDomains(site: string, query: DomainListParams): Promise<PageEnvelope<DomainView>>;
  /** POST /api/cloud/sites/:site/domains/ */
  createDomain(site: string, input: DomainCreate): Promise<CreatedBody<DomainView>>;
  /** GET /api/cloud/sites/:site/domains/:domain/ */
  getDomain(site: string, ref: string): Promise<DomainView>;
  /** PATCH /api/cloud/sites/:site/domains/:domain/ */
  updateDomain(site: string, ref: string, input: DomainUpdate): Promise<DomainView>;
  /** DELETE /api/cloud/sites/:site/domains/:domain/ */
  deleteDomain(site: string, ref: string): Promise<MessageBody>;
  // A site's secrets (`site`: its schema name). Remote: <api-url>/sites/<site>/api/… with the
  // token of `platform login --site`; direct: the site schema as the system actor.
  /** GET /api/secrets/ */
  listSecrets(site: string, query: SecretListParams): Promise<PageEnvelope<SecretListItem>>;
  /** POST /api/secrets/ */
  createSecret(site: string, input: SecretCreate): Promise<CreatedBody<SecretListItem>>;
  /** GET /api/secrets/:key/?app= */
  getSecret(site: string, key: string, app?: string): Promise<SecretView>;
  /** PUT /api/secrets/:key/?app= */
  updateSecret(site: string, key: string, input: SecretUpdate, app?: string): Promise<SecretListItem>;
  /** DELETE /api/secrets/:key/?app= */
  deleteSecret(site: string, key: string, app?: string): Promise<MessageBody>;
  /** GET /api/secrets/:key/history/ */
  secretHistory(site: string, key: string, query: SecretHistoryParams): Promise<PageEnvelope<SecretHistoryItem>>;
  /** GET /api/secret-types/ */
  listSecretTypes(site: string, query: SecretTypeListParams): Promise<PageEnvelope<SecretTypeView>>;
  /** POST /api/secret-types/ */
  createSecretType(site: string, input: SecretTypeCreate): Promise<CreatedBody<SecretTypeView>>;
  /** GET /api/secret-types/:slug/ */
  getSecretType(site: string, ref: string): Promise<SecretTypeView>;
  /** DELETE /api/secret-types/:slug/ */
  deleteSecretType(site: string, ref: string): Promise<MessageBody>;
  // A site's apps and their data sources (same access as secrets).
  /** GET /api/apps/?is_active= */
  listApps(site: string, isActive?: string): Promise<ListBody<AppListItem>>;
  /** POST /api/apps/ */
  createApp(site: string, input: AppCreate): Promise<CreatedBody<AppDetail>>;
  /** GET /api/apps/:slug/ */
  getApp(site: string, slug: string): Promise<CreatedBody<AppDetail>>;
  /** PATCH /api/apps/:slug/ */
  updateApp(site: string, slug: string, input: AppUpdate): Promise<CreatedBody<AppDetail>>;
  /** DELETE /api/apps/:slug/ (soft) */
  deleteApp(site: string, slug: string): Promise<MessageBody>;
  /** POST /api/apps/:slug/restore/ */
  restoreApp(site: string, slug: string): Promise<{ message: string }>;
  /** GET /api/apps/:slug/stats/ */
  appStats(site: string, slug: string): Promise<AppStats>;
  /** GET /api/apps/:app/datasources/ */
  listDataSources(site: string, app: string): Promise<ListBody<DataSourceView>>;
  /** POST /api/apps/:app/datasources/ */
  createDataSource(site: string, app: string, input: DataSourceCreate): Promise<CreatedBody<DataSourceView>>;
  /** GET /api/apps/:app/datasources/:ds/ */
  getDataSource(site: string, app: string, ds: string): Promise<DataSourceView>;
  /** PATCH /api/apps/:app/datasources/:ds/ */
  updateDataSource(site: string, app: string, ds: string, input: DataSourceUpdate): Promise<DataSourceView>;
  /** DELETE /api/apps/:app/datasources/:ds/ */
  deleteDataSource(site: string, app: string, ds: string): Promise<MessageBody>;
  /** Releases connections (direct: the pool, and the embedded PostgreSQL if this process started it). */
  close(): Promise<void>;
}

// A site's data tables and their records (same access as apps). Tables are addressed through
// their app: /api/apps/:app/datatables/:name/… (create goes through the data source).

/** Table list filters as the query string carries them. */
export interface TableListParams {
  datasource?: string;
  is_materialized?: string;
  page?: string;
  page_size?: string;
}

/** GET …/schema/ */
export interface TableSchemaView {
  name: string;
  schema: unknown;
  schema_hash: string;
  field_count: number;
}

/** POST …/validate_data/ */
export interface ValidateDataView {
  is_valid: boolean;
  errors: string[];
  validated_rows: number;
}

/** Record query parameters as the query string carries them (a repeated condition: an array). */
export type RecordQuery = Record<string, string | string[]>;

export type RecordRow = Record<string, unknown>;

/** GET …/data/ */
export interface RecordPageBody {
  data: RecordRow[];
  total: number;
  page: number;
  page_size: number;
}

/** DELETE …/data/?ids= | ?filter= */
export interface DeletedBody {
  deleted: number;
  ids?: unknown[];
}

/** POST …/data/import/ */
export interface CsvImportReport {
  dry_run: boolean;
  total_rows: number;
  created: number;
  failed: number;
  errors: { row: number; errors: Record<string, string[]> }[];
}

export interface CsvImportOptions {
  mapping?: Record<string, string>;
  dry_run?: boolean;
}

export interface DataBackend {
  /** GET /api/apps/:app/datatables/?datasource=&is_materialized=&page=&page_size= */
  listTables(site: string, app: string, query: TableListParams): Promise<PageEnvelope<DataTableListItem>>;
  /** POST /api/apps/:app/datasources/:ds/datatables/ */
  createTable(site: string, app: string, ds: string, input: DataTableCreate): Promise<CreatedBody<DataTableView>>;
  /** GET /api/apps/:app/datatables/:name/ */
  getTable(site: string, app: string, name: string): Promise<DataTableView>;
  /** PATCH /api/apps/:app/datatables/:name/ */
  updateTable(site: string, app: string, name: string, input: DataTableUpdate): Promise<DataTableView>;
  /** DELETE /api/apps/:app/datatables/:name/ */
  deleteTable(site: string, app: string, name: string): Promise<MessageBody>;
  /** POST /api/apps/:app/datatables/:name/materialize/ */
  materializeTable(site: string, app: string, name: string): Promise<CreatedBody<DataTableView>>;
  /** GET /api/apps/:app/datatables/:name/schema/ */
  tableSchema(site: string, app: string, name: string): Promise<TableSchemaView>;
  /** POST /api/apps/:app/datatables/:name/validate_data/ */
  validateTableData(site: string, app: string, name: string, records: unknown[]): Promise<ValidateDataView>;
  /** GET /api/apps/:app/datatables/stats/ */
  tableStats(site: string, app: string): Promise<DataTableStats>;
  /** GET …/data/ */
  listRecords(site: string, app: string, table: string, query: RecordQuery): Promise<RecordPageBody>;
  /** GET …/data/:pk/?populate= */
  getRecord(site: string, app: string, table: string, id: string, query: RecordQuery): Promise<{ data: RecordRow }>;
  /** POST …/data/ (an object, or an array: all or nothing) */
  createRecords(site: string, app: string, table: string, body: unknown): Promise<{ data: RecordRow | RecordRow[] }>;
  /** POST …/data/upsert/?unique_fields=a,b */
  upsertRecord(site: string, app: string, table: string, body: unknown, uniqueFields: string): Promise<{ data: RecordRow; created: boolean }>;
  /** PATCH …/data/:pk/ */
  patchRecord(site: string, app: string, table: string, id: string, body: unknown): Promise<{ data: RecordRow }>;
  /** PATCH …/data/ (an array of objects, each with its key) */
  patchRecords(site: string, app: string, table: string, body: unknown): Promise<{ data: RecordRow[] }>;
  /** DELETE …/data/:pk/ (204) */
  deleteRecord(site: string, app: string, table: string, id: string): Promise<void>;
  /** DELETE …/data/?ids=a,b | ?filter=<JSON> */
  deleteRecords(site: string, app: string, table: string, query: { ids?: string; filter?: string }): Promise<DeletedBody>;
  /** GET …/data/?format=csv&… : the CSV text, streamed. */
  exportCsv(site: string, app: string, table: string, query: RecordQuery): Promise<Readable>;
  /** POST …/data/import/?dry_run=&mapping= with a text/csv body; `open` gives the CSV (called again for a retry). */
  importCsv(site: string, app: string, table: string, open: () => Readable, options: CsvImportOptions): Promise<CsvImportReport>;
}
