import { defineEntity, p } from '@mikro-orm/core';

export const SITE_ENVIRONMENTS = ['production', 'staging', 'development', 'testing'] as const;

/** A site (tenant): its data lives in the PostgreSQL schema `schema_name`. */
export const Site = defineEntity({
  name: 'Site',
  tableName: 'sites',
  properties: {
    uuid: p.uuid().primary().onCreate(() => crypto.randomUUID()),
    slug: p.string().length(100),
    name: p.string().length(255),
    description: p.text().default(''),
    schema_name: p.string().length(63),
    environment: p.enum(SITE_ENVIRONMENTS),
    is_active: p.boolean().default(true),
    site_settings: p.json<Record<string, unknown>>().default('{}'),
    organization_uuid: p.uuid(),
    created_at: p.datetime().onCreate(() => new Date()),
    modified_at: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
  },
});
export type SiteEntity = InstanceType<typeof Site.class>;

/** A host name routed to a site; at most one primary per site (`one_primary_domain_per_site`). */
export const Domain = defineEntity({
  name: 'Domain',
  tableName: 'domains',
  properties: {
    uuid: p.uuid().primary().onCreate(() => crypto.randomUUID()),
    slug: p.string().length(255),
    domain: p.string().length(253),
    is_primary: p.boolean().default(false),
    is_active: p.boolean().default(true),
    site_uuid: p.uuid(),
    created_at: p.datetime().onCreate(() => new Date()),
    modified_at: p.datetime().onCreate(() => new Date()).onUpdate(() => new Date()),
    /** The DNS TXT proof's token of a customer domain; '' for a name the platform assigned. */
    verification_token: p.string().length(64).default(''),
    /** Null while unverified: an unverified domain routes nothing. */
    verified_at: p.datetime().nullable(),
  },
});
export type DomainEntity = InstanceType<typeof Domain.class>;
