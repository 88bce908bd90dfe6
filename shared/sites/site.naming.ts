// Site naming rules of spec Part 1 §2 (Site rules 1–4) as pure functions: the environment
// prefix, the generated schema name with its `_1`, `_2` suffixes, host-name checks.
import type { Environment } from '../config.ts';
import { fieldError } from '../errors.ts';
import { isValidSchemaName } from '../tenancy/schema.ts';
import type { SITE_ENVIRONMENTS } from './site.entity.ts';

export type SiteEnvironment = (typeof SITE_ENVIRONMENTS)[number];

/** Rule 1: the name prefix of each deployment ENVIRONMENT (production: none). */
export const ENVIRONMENT_PREFIX: Record<Environment, string> = { production: '', dev: 'dev-', test: 'test-', staging: 'staging-' };

/** The site `environment` a deployment gives by default. */
export const DEFAULT_SITE_ENVIRONMENT: Record<Environment, SiteEnvironment> = {
  production: 'production',
  staging: 'staging',
  dev: 'development',
  test: 'testing',
};

/** Rule 1: `Shop` → `staging-Shop` under ENVIRONMENT=staging; a name already carrying the prefix (any case) is kept. */
export function prefixedName(name: string, environment: Environment): string {
  const prefix = ENVIRONMENT_PREFIX[environment];
  if (!prefix || name.toLowerCase().startsWith(prefix)) return name;
  return prefix + name;
}

const MAX_SCHEMA = 63;

/**
 * Rule 2: the base of a generated schema name. Lowercase; accents folded (é → e); every space,
 * hyphen or other character outside [a-z0-9_] becomes one underscore; a leading digit gets an
 * underscore in front; at most 63 characters. A result PostgreSQL reserves (`public`,
 * `information_schema`, `pg_…`) is moved aside with a leading underscore or a suffix.
 */
export function schemaBase(name: string): string {
  let base = name
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z0-9_]/g, '_');
  if (!base) base = '_';
  if (!/^[a-z_]/.test(base)) base = `_${base}`;
  if (base.startsWith('pg_')) base = `_${base}`;
  return base.slice(0, MAX_SCHEMA);
}

/** `base`, else `base_1`, `base_2` … the first one not taken (nor reserved), within 63 characters. */
export function nextSchemaName(base: string, taken: Iterable<string>): string {
  const set = new Set(taken);
  const free = (s: string) => !set.has(s) && isValidSchemaName(s);
  if (free(base)) return base;
  for (let n = 1; ; n++) {
    const suffix = `_${n}`;
    const candidate = base.slice(0, MAX_SCHEMA - suffix.length) + suffix;
    if (free(candidate)) return candidate;
  }
}

/** Labels of letters, digits and inner hyphens (1–63 characters) joined by dots. */
const HOST_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*$/;

/**
 * A domain as stored: trimmed and lowercased, then checked as an RFC 1123 host name (labels
 * of letters, digits and inner hyphens, at most 63 each, 253 in all; no port, no trailing
 * dot). Throws 400 naming `domain`.
 */
export function normalizeHost(input: string, platformHosts: readonly string[] = []): string {
  const host = input.trim().toLowerCase();
  if (host.length > 253 || !HOST_RE.test(host)) {
    throw fieldError('domain', 'Enter a valid host name: letters, digits, hyphens and dots (no scheme, port, path or trailing dot; at most 253 characters).');
  }
  if (platformHosts.includes(host)) throw fieldError('domain', 'This host name serves the platform API and cannot belong to a site.');
  return host;
}

/** Domain slug: the host with dots turned into hyphens. */
export const domainSlug = (host: string): string => host.replace(/\./g, '-');
