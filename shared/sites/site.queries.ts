// Reads of sites and domains as the API shows them: plain rows (one query for a page of
// sites, with the organization slug and the primary domain), mapped to views.
import type { EntityManager } from '@mikro-orm/postgresql';
import { iso, type Timestamp } from '../db/sql.ts';
import type { SiteView } from './site.schemas.ts';
import type { DomainView } from './domain.schemas.ts';
import { challengeRecord } from './domain-verification.ts';

const SITE_SELECT = `
SELECT s.uuid, s.slug, s.name, s.description, s.schema_name, s.environment, s.is_active, s.site_settings,
       o.slug AS organization,
       (SELECT d.domain FROM public.domains d WHERE d.site_uuid = s.uuid AND d.is_primary) AS primary_domain,
       s.created_at, s.modified_at
  FROM public.sites s JOIN public.organizations o ON o.uuid = s.organization_uuid`;

export interface SiteRow {
  uuid: string;
  slug: string;
  name: string;
  description: string;
  schema_name: string;
  environment: SiteView['environment'];
  is_active: boolean;
  site_settings: Record<string, unknown> | string;
  organization: string;
  primary_domain: string | null;
  created_at: Timestamp;
  modified_at: Timestamp;
}

export function toSiteView(r: SiteRow): SiteView {
  return {
    uuid: r.uuid,
    slug: r.slug,
    name: r.name,
    description: r.description,
    schema_name: r.schema_name,
    environment: r.environment,
    is_active: r.is_active,
    site_settings: typeof r.site_settings === 'string' ? JSON.parse(r.site_settings) : (r.site_settings ?? {}),
    organization: r.organization,
    primary_domain: r.primary_domain ?? null,
    created_at: iso(r.created_at),
    modified_at: iso(r.modified_at),
  };
}

/** The views of these sites, in the order given (missing ones are skipped). */
export async function siteViews(em: EntityManager, uuids: string[]): Promise<SiteView[]> {
  if (!uuids.length) return [];
  const rows = (await em.execute(`${SITE_SELECT} WHERE s.uuid IN (?)`, [uuids])) as SiteRow[];
  const byUuid = new Map(rows.map((r) => [r.uuid, r]));
  return uuids.flatMap((u) => (byUuid.has(u) ? [toSiteView(byUuid.get(u)!)] : []));
}

export async function siteView(em: EntityManager, uuid: string): Promise<SiteView> {
  const [view] = await siteViews(em, [uuid]);
  if (!view) throw new Error(`site ${uuid} vanished`);
  return view;
}

/** The active site whose schema is `schema` (host routing selected it), or undefined. */
export async function siteViewBySchema(em: EntityManager, schema: string): Promise<SiteView | undefined> {
  const rows = (await em.execute(`${SITE_SELECT} WHERE s.schema_name = ? AND s.is_active`, [schema])) as SiteRow[];
  return rows[0] ? toSiteView(rows[0]) : undefined;
}

export const DOMAIN_COLUMNS = 'uuid, slug, domain, is_primary, is_active, site_uuid, created_at, modified_at, verification_token, verified_at';

export interface DomainRow {
  uuid: string;
  slug: string;
  domain: string;
  is_primary: boolean;
  is_active: boolean;
  site_uuid: string;
  created_at: Timestamp;
  modified_at: Timestamp;
  /** '' for a name the platform assigned. */
  verification_token: string;
  verified_at: Timestamp | null;
}

export function toDomainView(r: DomainRow): DomainView {
  return {
    uuid: r.uuid,
    slug: r.slug,
    domain: r.domain,
    is_primary: r.is_primary,
    is_active: r.is_active,
    tenant: r.site_uuid,
    created_at: iso(r.created_at),
    modified_at: iso(r.modified_at),
    is_verified: r.verified_at !== null,
    verified_at: r.verified_at === null ? null : iso(r.verified_at),
    verification: r.verification_token ? challengeRecord(r.domain, r.verification_token) : null,
  };
}
