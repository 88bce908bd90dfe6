// Direct mode on a site's data (`--site <schema>`): the context of the system actor bound to
// that site's schema (tenantEm), after the same "is there such a site?" check host routing
// makes; and the secrets keyring the server derives from the same configuration.
import type { EntityManager } from '@mikro-orm/postgresql';
import type { Actor } from '../../shared/auth/actor.ts';
import { resolveSecretKey } from '../../shared/common/secret-key.ts';
import type { Config } from '../../shared/config.ts';
import { makeContext, type ServiceContext } from '../../shared/context.ts';
import { DomainError } from '../../shared/errors.ts';
import { SecretKeyring } from '../../shared/secrets/crypto.ts';
import { isValidSchemaName, tenantEm } from '../../shared/tenancy/schema.ts';

const siteNotFound = (): DomainError => new DomainError('NOT_FOUND', 'Site not found.', { detail: 'Not found.' });

/** The service context of `actor` in the site whose schema is `site` (404 as the API answers). */
export async function siteContext(em: EntityManager, site: string, actor: Actor): Promise<ServiceContext> {
  if (!isValidSchemaName(site)) throw siteNotFound();
  const found = await em.execute('SELECT 1 FROM public.sites WHERE schema_name = ? AND is_active', [site]);
  if (!found.length) throw siteNotFound();
  return makeContext(tenantEm(em, site), actor, site);
}

/** The keyring of secret values, as `platform serve` derives it (PLATFORM_SECRET_KEY, SECRETS_KEY_VERSION). */
export function cliKeyring(config: Config, previousMaster?: string): SecretKeyring {
  return new SecretKeyring(resolveSecretKey(config), config.secretsKeyVersion, previousMaster);
}
