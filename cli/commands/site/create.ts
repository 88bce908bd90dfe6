import { Flags } from '@oclif/core';
import { BackendCommand } from '../../base.ts';
import { keyValues } from '../../output.ts';
import type { SiteCreate } from '../../../shared/sites/site.schemas.ts';
import { defined, parseSettings, siteFieldFlags } from '../../sites.ts';

export default class SiteCreateCommand extends BackendCommand<typeof SiteCreateCommand> {
  static override summary = 'Create a site: its schema, tenant migrations, default data and primary domain, in one transaction.';
  static override description =
    'The name receives the ENVIRONMENT prefix of the deployment (dev-, test-, staging-; none in production). Without --schema-name one is generated from the name; without --domain the primary domain is {slug}.{PLATFORM_BASE_DOMAIN}. Progress on stderr; prints the API body {status, message, data} with --json.';
  static override examples = [
    '<%= config.bin %> site create --org acme --name "Shop" --environment staging',
    '<%= config.bin %> site create --org acme --name Blog --schema-name blog --domain blog.example.com --json',
  ];
  static override flags = {
    org: Flags.string({ summary: 'The organization (slug or UUID).', required: true }),
    ...siteFieldFlags,
    name: Flags.string({ summary: siteFieldFlags.name.summary, required: true }),
    'schema-name': Flags.string({ summary: 'PostgreSQL schema (lowercase letters, digits, underscores; starts with a letter or underscore).' }),
    domain: Flags.string({ summary: 'Primary host name (default {slug}.{PLATFORM_BASE_DOMAIN}).' }),
  };

  async run() {
    const f = this.flags;
    const input = defined({
      name: f.name,
      description: f.description,
      environment: f.environment,
      schema_name: f['schema-name'],
      site_settings: parseSettings(f.settings),
      domain: f.domain,
    }) as SiteCreate;
    const backend = await this.backend();
    this.info(`Creating site "${f.name}" in organization ${f.org}: schema, tenant migrations, default data, primary domain…`);
    const body = await backend.createSite(f.org, input);
    this.info(`Site ${body.data.slug} ready: schema ${body.data.schema_name}, primary domain ${body.data.primary_domain}.`);
    this.log(body.message);
    this.log(keyValues(body.data));
    return body;
  }
}
