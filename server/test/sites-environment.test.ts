// Site rule 1: the ENVIRONMENT prefix of site names (create only), the derived schema name,
// slug and default environment, one server per deployment ENVIRONMENT.
import test from 'ava';
import { startTestServer, type TestServer } from './helpers.ts';
import { makeOrg } from './site-fixtures.ts';

const servers: Record<string, TestServer> = {};
const tokens: Record<string, string> = {};

test.before(async () => {
  await Promise.all(
    ['staging', 'dev', 'test', 'production'].map(async (environment) => {
      const s = await startTestServer({ ENVIRONMENT: environment, PLATFORM_BASE_DOMAIN: 'apps.example.com' });
      servers[environment] = s;
      tokens[environment] = (await s.login()).access;
      await makeOrg(s, 'acme');
    }),
  );
});
test.after.always(async () => {
  await Promise.all(Object.values(servers).map((s) => s.close()));
});

const create = (environment: string, body: Record<string, unknown>) =>
  servers[environment].api('POST', '/api/cloud/organizations/acme/sites/', { token: tokens[environment], body });

const CASES = [
  { environment: 'staging', prefix: 'staging-', siteEnvironment: 'staging' },
  { environment: 'dev', prefix: 'dev-', siteEnvironment: 'development' },
  { environment: 'test', prefix: 'test-', siteEnvironment: 'testing' },
  { environment: 'production', prefix: '', siteEnvironment: 'production' },
];

for (const c of CASES) {
  test(`ENVIRONMENT=${c.environment}: names get "${c.prefix}", schema and slug follow, environment defaults to ${c.siteEnvironment}`, async (t) => {
    const res = await create(c.environment, { name: 'My Shop' });
    t.is(res.status, 201, res.text);
    const slug = `${c.prefix}my-shop`;
    t.like(res.body.data, {
      name: `${c.prefix}My Shop`,
      slug,
      schema_name: `${c.prefix.replace('-', '_')}my_shop`,
      environment: c.siteEnvironment,
      primary_domain: `${slug}.apps.example.com`,
    });
    // Not prefixed twice (any case); an explicit environment wins over the derived one.
    if (c.prefix) {
      const again = await create(c.environment, { name: `${c.prefix.toUpperCase()}Already`, environment: 'production' });
      t.like(again.body.data, { name: `${c.prefix.toUpperCase()}Already`, environment: 'production' });
    }
    // No prefix on update.
    const upd = await servers[c.environment].api('PATCH', `/api/cloud/sites/${slug}/`, { token: tokens[c.environment], body: { name: 'Plain' } });
    t.is(upd.body.name, 'Plain');
  });
}
