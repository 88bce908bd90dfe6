// What a server records for the processes that share its database without serving requests
// (platform_settings, platform migration 9): today its configured public URL, so that the CLI's
// direct mode builds the same absolute links (pagination) as the server it stands beside.
import type { EntityManager } from '@mikro-orm/postgresql';
import { firstRow } from './sql.ts';

const PUBLIC_URL = 'public_url';

/** Records the server's PLATFORM_PUBLIC_URL, or forgets it when the server has none. */
export async function recordPublicUrl(em: EntityManager, publicUrl: string | undefined): Promise<void> {
  if (publicUrl === undefined) await em.execute('DELETE FROM platform_settings WHERE key = ?', [PUBLIC_URL]);
  else await em.execute('INSERT INTO platform_settings (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value, updated_at = now()', [PUBLIC_URL, publicUrl]);
}

/** The public URL the last server started on this database was configured with, if any. */
export async function recordedPublicUrl(em: EntityManager): Promise<string | undefined> {
  return (await firstRow<{ value: string }>(em, 'SELECT value FROM platform_settings WHERE key = ?', [PUBLIC_URL]))?.value;
}
