// Where an SDK request goes: the one check between a guest's path and the request the worker
// sends. The path is resolved by the same URL parser that sends it (WHATWG `URL`), and the URL it
// yields is the one sent: whatever spelling the guest chose (`..`, `%2e%2e`, `%2E%2E/`, `\`,
// an absolute URL), what is checked is what leaves. The result must stay on the platform's origin,
// under this site's `{prefix}/api/`, and carry no encoded dot, slash or backslash that a server
// would decode into a segment of its own. docs/functions.md "The SDK".
import type { ApiTarget } from './pool.ts';

const REFUSED = 'platform.request: the path must be an /api/… path of this site.';

/** Percent-encodings a server may decode into path structure: `.`, `/`, `\`. */
const ENCODED_STRUCTURE = /%(?:2e|2f|5c)/i;

/** The URL the SDK sends for `path`, or the reason it is refused. */
export function sdkUrl(target: Pick<ApiTarget, 'url' | 'prefix'>, path: string): URL | string {
  if (!path.startsWith('/api/') || /[\s#\\]/.test(path) || ENCODED_STRUCTURE.test(path)) return REFUSED;
  let url: URL;
  try {
    url = new URL(`${target.prefix}${path}`, target.url);
  } catch {
    return REFUSED;
  }
  const base = new URL(target.url);
  if (url.origin !== base.origin || !url.pathname.startsWith(`${target.prefix}/api/`) || url.username || url.password) return REFUSED;
  return url;
}
