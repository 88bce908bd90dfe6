// The API paths the CLI uses. The remote backend requests them; the direct backend builds
// pagination links from the very same path and query, so `next`/`previous` match.

export const PATHS = {
  token: '/api/auth/jwt/token/',
  refresh: '/api/auth/jwt/token/refresh/',
  blacklist: '/api/auth/jwt/token/blacklist/',
  profile: '/api/profile/',
  users: '/api/cloud/users/',
  user: (ref: string) => `/api/cloud/users/${encodeURIComponent(ref)}/`,
  sites: '/api/cloud/sites/',
  orgSites: (org: string) => `/api/cloud/organizations/${encodeURIComponent(org)}/sites/`,
  site: (ref: string) => `/api/cloud/sites/${encodeURIComponent(ref)}/`,
  sitePrivileges: (ref: string) => `/api/cloud/sites/${encodeURIComponent(ref)}/privileges/`,
  domains: (site: string) => `/api/cloud/sites/${encodeURIComponent(site)}/domains/`,
  domain: (site: string, ref: string) => `/api/cloud/sites/${encodeURIComponent(site)}/domains/${encodeURIComponent(ref)}/`,
  invitations: (org: string) => `/api/cloud/organizations/${encodeURIComponent(org)}/invitations/`,
  invitation: (org: string, ref: string) => `/api/cloud/organizations/${encodeURIComponent(org)}/invitations/${encodeURIComponent(ref)}/`,
  organizations: '/api/cloud/organizations/',
  organization: (ref: string) => `/api/cloud/organizations/${encodeURIComponent(ref)}/`,
  organizationPrivileges: (ref: string) => `/api/cloud/organizations/${encodeURIComponent(ref)}/privileges/`,
  members: (org: string) => `/api/cloud/organizations/${encodeURIComponent(org)}/members/`,
  member: (org: string, ref: string) => `/api/cloud/organizations/${encodeURIComponent(org)}/members/${encodeURIComponent(ref)}/`,
  groups: '/api/cloud/groups/',
  group: (id: string) => `/api/cloud/groups/${encodeURIComponent(id)}/`,
  // A site's API through the platform host: `/sites/<schema>` + the path (remote mode puts it in the base URL).
  siteApi: (schema: string) => `/sites/${encodeURIComponent(schema)}`,
  secrets: '/api/secrets/',
  secret: (key: string) => `/api/secrets/${encodeURIComponent(key)}/`,
  secretHistory: (key: string) => `/api/secrets/${encodeURIComponent(key)}/history/`,
  secretTypes: '/api/secret-types/',
  secretType: (ref: string) => `/api/secret-types/${encodeURIComponent(ref)}/`,
  apps: '/api/apps/',
  app: (slug: string) => `/api/apps/${encodeURIComponent(slug)}/`,
  appRestore: (slug: string) => `/api/apps/${encodeURIComponent(slug)}/restore/`,
  appStats: (slug: string) => `/api/apps/${encodeURIComponent(slug)}/stats/`,
  dataSources: (app: string) => `/api/apps/${encodeURIComponent(app)}/datasources/`,
  dataSource: (app: string, ds: string) => `/api/apps/${encodeURIComponent(app)}/datasources/${encodeURIComponent(ds)}/`,
} as const;

/** The base URL of one site's API through a platform API URL: `<api-url>/sites/<schema>`. */
export const siteApiUrl = (apiUrl: string, schema: string): string => apiUrl.replace(/\/+$/, '') + PATHS.siteApi(schema);

/** `path?k=v…` with the defined values only, in the order given. */
export function withQuery(path: string, query: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.append(key, value);
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}
