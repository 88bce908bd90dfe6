// The API paths the CLI uses. The remote backend requests them; the direct backend builds
// pagination links from the very same path and query, so `next`/`previous` match.

export const PATHS = {
  token: '/api/auth/jwt/token/',
  refresh: '/api/auth/jwt/token/refresh/',
  blacklist: '/api/auth/jwt/token/blacklist/',
  profile: '/api/profile/',
  users: '/api/cloud/users/',
  user: (ref: string) => `/api/cloud/users/${encodeURIComponent(ref)}/`,
} as const;

/** `path?k=v…` with the defined values only, in the order given. */
export function withQuery(path: string, query: Record<string, string | undefined>): string {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query)) if (value !== undefined) params.append(key, value);
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}
