// Frontend-worker addresses (spec Part 3 §4, create rules 2–5 and "Suggestion reasons") as pure
// functions: the subdomain and external-domain checks, the worker and build-preview hosts, and
// suggestions for a taken subdomain. Decisions:
// - A worker lives at `{prefix}{subdomain}.{base_domain | domain}`, a build's preview at
//   `{prefix}{8 hex}--{subdomain}.{…}`: one DNS label each. So the subdomain is limited to what
//   keeps the *preview* label within DNS's 63 (53 less the environment prefix), stricter than the
//   spec's 100; and `--` is refused in subdomains, which keeps previews (and IDNA `xn--`) apart.
// - An external domain must end in a TLD of the bundled `tlds` list (IDN TLDs compared in their
//   Unicode form); DNS is never asked. It is capped at 189 characters so every worker host fits 253.
// - Names of the platform are refused: the base domain, names under it and its parents, platform
//   hosts and names under them; so are the reserved names of RFC 2606 / 6761 / 6762 (and `.internal`).
import { domainToUnicode } from 'node:url';
import tlds from 'tlds' with { type: 'json' };
import type { Environment } from '../config.ts';
import { fieldError } from '../errors.ts';
import { slugify } from '../common/slug.ts';
import { underBaseDomain } from '../sites/domain-verification.ts';
import { ENVIRONMENT_PREFIX, normalizeHost } from '../sites/site.naming.ts';

const MAX_LABEL = 63;
const MAX_HOST = 253;
const MIN_SUBDOMAIN = 3;
/** `{8 hex}--` in front of the subdomain in a preview label. */
const PREVIEW_MARK = 10;
/** The longest external domain with which `{label}.{domain}` still fits in 253 characters. */
const MAX_EXTERNAL_DOMAIN = MAX_HOST - MAX_LABEL - 1;

const TLDS: ReadonlySet<string> = new Set(tlds);
const RESERVED_NAMES = new Set(['localhost', 'example.com', 'example.net', 'example.org']);
const RESERVED_SUFFIXES = ['localhost', 'local', 'internal', 'test', 'example', 'invalid', 'example.com', 'example.net', 'example.org'];

/** The longest subdomain under `environment`: the preview label `{prefix}{8 hex}--{subdomain}` stays within 63. */
const maxSubdomain = (environment: Environment): number => MAX_LABEL - PREVIEW_MARK - ENVIRONMENT_PREFIX[environment].length;

/**
 * Create rule 4 (tightened): trimmed and lowercased, then 3+ characters of letters, digits and
 * hyphens, no leading or trailing hyphen, no `--`, within the label limit of the environment.
 * Returns the canonical subdomain; throws 400 naming `field`.
 */
export function checkSubdomain(input: string, environment: Environment, field = 'subdomain'): string {
  const sub = input.trim().toLowerCase();
  const max = maxSubdomain(environment);
  if (sub.length < MIN_SUBDOMAIN) throw fieldError(field, `The subdomain needs at least ${MIN_SUBDOMAIN} characters.`);
  if (!/^[a-z0-9-]+$/.test(sub)) throw fieldError(field, 'Use only letters, digits and hyphens in the subdomain (no dots, underscores, spaces or accents).');
  if (sub.startsWith('-') || sub.endsWith('-')) throw fieldError(field, 'The subdomain cannot start or end with a hyphen.');
  if (sub.includes('--')) throw fieldError(field, 'The subdomain cannot contain two hyphens in a row ("--" marks build preview addresses and encoded international names).');
  if (sub.length > max) {
    const prefix = ENVIRONMENT_PREFIX[environment];
    throw fieldError(
      field,
      `The subdomain can have at most ${max} characters${prefix ? ` under this environment (its addresses start with "${prefix}")` : ''}: ` +
        `a DNS label holds 63, and a build's preview address adds 10 ("{build}--"). That is below the 100 characters documented for the API.`,
    );
  }
  return sub;
}

/** The TLD of `host` is a delegated one of the bundled list (an IDN TLD `xn--…` in its Unicode form). */
function knownTld(host: string): boolean {
  const tld = host.slice(host.lastIndexOf('.') + 1);
  return TLDS.has(tld) || (tld.startsWith('xn--') && TLDS.has(domainToUnicode(tld)));
}

const isReserved = (host: string): boolean => RESERVED_NAMES.has(host) || RESERVED_SUFFIXES.some((suffix) => host.endsWith(`.${suffix}`));

/**
 * Create rule 3: an external (customer) base domain, canonical (trimmed, lowercased), a host name
 * of two or more labels ending in a known TLD, neither the platform's nor reserved. Throws 400
 * naming `domain`.
 */
export function checkExternalDomain(input: string, baseDomain: string, platformHosts: readonly string[]): string {
  const host = normalizeHost(input);
  const base = baseDomain.toLowerCase();
  if (isReserved(host)) throw fieldError('domain', `${host} is a reserved name that cannot be published on the internet: use a domain you own.`);
  if (!host.includes('.')) throw fieldError('domain', 'Enter a domain with a top-level domain, such as example-shop.com.');
  if (host.length > MAX_EXTERNAL_DOMAIN) throw fieldError('domain', `The domain can have at most ${MAX_EXTERNAL_DOMAIN} characters, so that every address under it stays a valid host name.`);
  if (underBaseDomain(host, base)) {
    throw fieldError('domain', `Names under ${base} are the platform's: leave is_internal true to get {subdomain}.${base}, or use a domain you own.`);
  }
  if (underBaseDomain(base, host) || platformHosts.some((p) => underBaseDomain(host, p.toLowerCase()))) {
    throw fieldError('domain', `${host} serves the platform itself and cannot host a frontend worker: use a domain you own.`);
  }
  if (!knownTld(host)) throw fieldError('domain', `".${host.slice(host.lastIndexOf('.') + 1)}" is not a known top-level domain: check the spelling of the domain.`);
  return host;
}

export interface WorkerAddress {
  subdomain: string;
  isInternal: boolean;
  /** The external base domain (null for an internal worker). */
  domain: string | null;
}

function domainPart(a: Omit<WorkerAddress, 'subdomain'>, baseDomain: string): string {
  if (a.isInternal) return baseDomain;
  if (!a.domain) throw new Error('An external worker address needs its domain.');
  return a.domain;
}

/** Create rules 2, 3 and 5: `{prefix}{subdomain}.{base_domain}` (internal) or `.{domain}` (external). */
export function workerHost(a: WorkerAddress, environment: Environment, baseDomain: string): string {
  return `${ENVIRONMENT_PREFIX[environment]}${a.subdomain}.${domainPart(a, baseDomain)}`;
}

/**
 * The address a browser uses for a worker's host: an internal worker's on the scheme and port
 * the API is reached at (`apiBase`; https without one), an external one's on https, which its
 * customer terminates (spec §4 rule 3).
 */
export function workerUrl(host: string, isInternal: boolean, apiBase?: string): string {
  if (!isInternal || !apiBase) return `https://${host}/`;
  const u = new URL(apiBase);
  return `${u.protocol}//${host}${u.port ? `:${u.port}` : ''}/`;
}

/** A build's preview host: `{prefix}{first 8 hex of the build uuid}--{subdomain}.{domain part}`. */
export function previewHost(buildUuid: string, a: WorkerAddress, environment: Environment, baseDomain: string): string {
  const short = buildUuid.replace(/-/g, '').slice(0, 8).toLowerCase();
  if (!/^[0-9a-f]{8}$/.test(short)) throw new Error(`Not a build uuid: ${JSON.stringify(buildUuid)}`);
  return `${ENVIRONMENT_PREFIX[environment]}${short}--${a.subdomain}.${domainPart(a, baseDomain)}`;
}

/**
 * The build short id and the worker's host of a preview host (lowercased; without port), or
 * null when the first label, after the environment prefix, is not `{8 hex}--{subdomain}`.
 */
export function parsePreviewHost(host: string, environment: Environment): { short: string; workerHost: string } | null {
  const h = host.toLowerCase();
  const prefix = ENVIRONMENT_PREFIX[environment];
  const dot = h.indexOf('.');
  if (dot < 0 || !h.startsWith(prefix)) return null;
  const m = /^([0-9a-f]{8})--([a-z0-9]+(?:-[a-z0-9]+)*)$/.exec(h.slice(prefix.length, dot));
  if (!m) return null;
  return { short: m[1]!, workerHost: `${prefix}${m[2]}${h.slice(dot)}` };
}

export interface Suggestion {
  subdomain: string;
  full_domain: string;
  reason: 'context-aware' | 'semantic' | 'smart-numeric' | 'fallback';
}

const MAX_SUGGESTIONS = 5;
const MAX_FALLBACK = 50;
const FALLBACK_BATCH = 10;
const MAX_TENANT_SLUG = 20;
const SEMANTIC_SUFFIXES = ['app', 'portal', 'hub', 'platform', 'workspace'];

type Candidate = Pick<Suggestion, 'subdomain' | 'reason'>;

/**
 * Suggestions for a taken subdomain (spec "Suggestion reasons"): at most 5, valid, unique, not
 * the input, each one's prefixed host reported free by `available` (asked in batches). In order
 * of preference: context-aware (`-{tenant}`, `-{year}`), semantic (`-app` … `-workspace`),
 * smart-numeric (the next two numbers), fallback (`-1`, `-2` … at most 50 tried). A candidate too
 * long is shortened at the base. `full_domain` of an external worker has no environment prefix.
 */
export async function suggestSubdomains(
  input: { subdomain: string; tenantName?: string; year: number; address: Omit<WorkerAddress, 'subdomain'> },
  environment: Environment,
  baseDomain: string,
  available: (hosts: string[]) => Promise<Set<string>>,
): Promise<Suggestion[]> {
  const sub = checkSubdomain(input.subdomain, environment);
  const max = maxSubdomain(environment);
  const seen = new Set([sub]);
  /** `{base}{suffix}` with the base shortened to fit (no `--` at the seam), if valid and new: none or one. */
  const candidate = (reason: Candidate['reason'], base: string, suffix: string): Candidate[] => {
    const kept = base.slice(0, Math.max(0, max - suffix.length));
    const subdomain = (suffix.startsWith('-') ? kept.replace(/-+$/, '') : kept) + suffix;
    try {
      checkSubdomain(subdomain, environment);
    } catch {
      return [];
    }
    if (seen.has(subdomain)) return [];
    seen.add(subdomain);
    return [{ subdomain, reason }];
  };
  const hostOf = (subdomain: string) => workerHost({ ...input.address, subdomain }, environment, baseDomain);
  const suggestions: Suggestion[] = [];
  /** Asks for the candidates' hosts at once and keeps the free ones, in order, up to the limit. */
  const take = async (candidates: Candidate[]) => {
    if (!candidates.length) return;
    const hosts = candidates.map((c) => hostOf(c.subdomain));
    const free = await available(hosts);
    candidates.forEach((c, i) => {
      if (suggestions.length < MAX_SUGGESTIONS && free.has(hosts[i]!)) {
        const full = input.address.isInternal ? hosts[i]! : `${c.subdomain}.${domainPart(input.address, baseDomain)}`;
        suggestions.push({ subdomain: c.subdomain, full_domain: full, reason: c.reason });
      }
    });
  };

  const tenantSlug = input.tenantName ? slugify(input.tenantName, MAX_TENANT_SLUG) : '';
  const digits = /\d+$/.exec(sub)?.[0] ?? '';
  const numericBase = sub.slice(0, sub.length - digits.length);
  // `shop2` → shop3, shop4; `shop` → shop2, shop3 (as if it were shop1). BigInt: any run of digits.
  const last = digits ? BigInt(digits) : 1n;
  await take([
    ...(tenantSlug ? candidate('context-aware', sub, `-${tenantSlug}`) : []),
    ...candidate('context-aware', sub, `-${input.year}`),
    ...SEMANTIC_SUFFIXES.flatMap((s) => candidate('semantic', sub, `-${s}`)),
    ...candidate('smart-numeric', numericBase, `${last + 1n}`),
    ...candidate('smart-numeric', numericBase, `${last + 2n}`),
  ]);
  for (let n = 1; n <= MAX_FALLBACK && suggestions.length < MAX_SUGGESTIONS; n += FALLBACK_BATCH) {
    const end = Math.min(n + FALLBACK_BATCH, MAX_FALLBACK + 1);
    await take(Array.from({ length: end - n }, (_, i) => candidate('fallback', sub, `-${n + i}`)).flat());
  }
  return suggestions;
}

/** A worker's slug from its (canonical) subdomain: the subdomain itself. */
export const workerSlugOf = (subdomain: string): string => subdomain;
