// Who may route a host name (docs/domains.md): names under PLATFORM_BASE_DOMAIN are the
// platform's to assign (a site gets its own `{slug}.{base}`), every other name is the
// customer's and routes only once proven with a DNS TXT record:
//   _platform-challenge.<domain>  TXT  "platform-verify=<the domain's token>"
// The record is read through a resolver seam (TxtResolver): production asks node:dns (the
// system's servers, or DNS_SERVERS), the tests a dns2 stand-in.
import { randomBytes } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import { DomainError, fieldError } from '../errors.ts';

export interface TxtResolver {
  /** The TXT records of `name`, each as its character-strings (node:dns's resolveTxt). */
  resolveTxt(name: string): Promise<string[][]>;
}

/** node:dns asking `servers` (default: the system's), 3 s per try, 2 tries. */
export function dnsTxtResolver(servers: readonly string[]): TxtResolver {
  const resolver = new Resolver({ timeout: 3000, tries: 2 });
  if (servers.length) resolver.setServers([...servers]);
  return resolver;
}

export const CHALLENGE_LABEL = '_platform-challenge';
export const CHALLENGE_PREFIX = 'platform-verify=';

/** A new domain's token: 128 random bits, hex. */
export const newVerificationToken = (): string => randomBytes(16).toString('hex');

/** The record a customer publishes to prove `host` (shown in the domain's view). */
export const challengeRecord = (host: string, token: string) => ({ type: 'TXT' as const, name: `${CHALLENGE_LABEL}.${host}`, value: `${CHALLENGE_PREFIX}${token}` });

/** Whether `host` is the platform's: the base domain itself or a name under it. */
export const underBaseDomain = (host: string, base: string): boolean => host === base || host.endsWith(`.${base}`);

/**
 * The claim rule: a name under the base domain only as the site's own `{slug}.{base}` (then it
 * needs no proof: `platform` true); any other name is a customer domain to prove. 400 on
 * `domain` otherwise.
 */
export function claimOf(host: string, siteSlug: string, base: string): { platform: boolean } {
  if (!underBaseDomain(host, base)) return { platform: false };
  if (host === `${siteSlug}.${base}`) return { platform: true };
  throw fieldError('domain', `Names under ${base} are assigned by the platform: this site's own is ${siteSlug}.${base}. Use a domain you own (it is verified by a DNS TXT record).`);
}

const DEFINITE_ABSENCE = new Set(['ENOTFOUND', 'ENODATA', 'NXDOMAIN']);

/**
 * Whether the TXT record proving `host` with `token` is published: true or false when DNS gave
 * a definite answer; a DNS failure (timeout, SERVFAIL, refused) is 503 and decides nothing.
 */
export async function proofPublished(resolver: TxtResolver, host: string, token: string): Promise<boolean> {
  const { name, value } = challengeRecord(host, token);
  let records: string[][];
  try {
    records = await resolver.resolveTxt(name);
  } catch (err) {
    if (DEFINITE_ABSENCE.has((err as NodeJS.ErrnoException).code ?? '')) return false;
    throw new DomainError('SERVICE_UNAVAILABLE', `DNS did not answer for ${name} (${(err as NodeJS.ErrnoException).code ?? 'error'}): nothing was changed, try again later.`);
  }
  return records.some((chunks) => chunks.join('') === value);
}
