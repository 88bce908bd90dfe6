// Frontend-worker addresses: subdomain and external-domain checks, worker and preview hosts,
// suggestions (with a stand-in for the availability lookup: the function under test is pure).
import test, { type ExecutionContext } from 'ava';
import { ENVIRONMENTS, type Environment } from '../config.ts';
import { DomainError } from '../errors.ts';
import { ENVIRONMENT_PREFIX } from '../sites/site.naming.ts';
import {
  checkExternalDomain,
  checkSubdomain,
  parsePreviewHost,
  previewHost,
  suggestSubdomains,
  workerHost,
  workerSlugOf,
  type Suggestion,
  type WorkerAddress,
} from './hostnames.ts';

const BASE = 'apps.platform.io';
const PLATFORM_HOSTS = ['api.platform.io', 'localhost'];
const UUID = '3F2504E0-4F89-11D3-9A0C-0305E82C3301';

/** The message of the 400 `fn` throws on `field`. */
function rejects(t: ExecutionContext, fn: () => unknown, field: string, label: string): string {
  const err = t.throws(fn, { instanceOf: DomainError }, label);
  t.is(err?.code, 'VALIDATION_ERROR', label);
  t.deepEqual(Object.keys(err?.errors ?? {}), [field], label);
  return err?.errors?.[field]?.[0] ?? '';
}

test('checkSubdomain: canonical form, characters, hyphens, no "--"', (t) => {
  t.is(checkSubdomain('  My-Shop2 ', 'production'), 'my-shop2');
  t.is(checkSubdomain('abc', 'production'), 'abc');
  t.is(checkSubdomain('9lives', 'staging'), '9lives');
  for (const bad of ['', 'ab', ' a ', '-shop', 'shop-', 'my--shop', 'xn--bcher-kva', 'my_shop', 'my.shop', 'my shop', 'café']) {
    rejects(t, () => checkSubdomain(bad, 'production'), 'subdomain', bad);
  }
  t.regex(rejects(t, () => checkSubdomain('ab', 'production'), 'subdomain', 'short'), /at least 3/);
  rejects(t, () => checkSubdomain('a_b', 'production', 'subdomain_input'), 'subdomain_input', 'own field');
});

test('checkSubdomain: the preview label {prefix}{8 hex}--{subdomain} stays within 63, with and without a prefix', (t) => {
  t.is(checkSubdomain('a'.repeat(53), 'production').length, 53);
  const message = rejects(t, () => checkSubdomain('a'.repeat(54), 'production'), 'subdomain', 'production 54');
  t.regex(message, /at most 53/);
  t.regex(message, /100/);
  t.is(checkSubdomain('a'.repeat(45), 'staging').length, 45);
  t.regex(rejects(t, () => checkSubdomain('a'.repeat(46), 'staging'), 'subdomain', 'staging 46'), /at most 45.*"staging-"/);
  t.is(checkSubdomain('a'.repeat(49), 'dev').length, 49);
  rejects(t, () => checkSubdomain('a'.repeat(50), 'test'), 'subdomain', 'test 50');
  for (const env of ENVIRONMENTS) {
    const longest = longestSubdomain(env);
    const label = previewHost(UUID, { subdomain: longest, isInternal: true, domain: null }, env, BASE).split('.')[0]!;
    t.is(label.length, 63, env);
    t.true(workerHost({ subdomain: longest, isInternal: true, domain: null }, env, BASE).split('.')[0]!.length <= 63, env);
  }
});

/** The longest subdomain checkSubdomain accepts under `env`. */
function longestSubdomain(env: Environment): string {
  for (let n = 100; n >= 3; n--) {
    try {
      return checkSubdomain('c'.repeat(n), env);
    } catch {
      // too long: one shorter
    }
  }
  throw new Error('no length accepted');
}

test('checkExternalDomain: host syntax, known TLD, not the platform\'s, not reserved', (t) => {
  t.is(checkExternalDomain(' Example-Shop.CO.uk ', BASE, PLATFORM_HOSTS), 'example-shop.co.uk');
  t.is(checkExternalDomain('acme.com', BASE, PLATFORM_HOSTS), 'acme.com');
  t.is(checkExternalDomain('xn--80ak6aa92e.xn--p1ai', BASE, PLATFORM_HOSTS), 'xn--80ak6aa92e.xn--p1ai');
  for (const bad of ['shop', 'https://shop.com', 'shop.com/x', 'shop.com:443', 'shop.com.', 'sh_op.com', '-shop.com', '']) {
    rejects(t, () => checkExternalDomain(bad, BASE, PLATFORM_HOSTS), 'domain', bad);
  }
  t.regex(rejects(t, () => checkExternalDomain('shop.notarealtld', BASE, PLATFORM_HOSTS), 'domain', 'unknown TLD'), /"\.notarealtld" is not a known top-level domain/);
  rejects(t, () => checkExternalDomain('shop.xn--zzzzzz', BASE, PLATFORM_HOSTS), 'domain', 'unknown IDN TLD');
  t.regex(rejects(t, () => checkExternalDomain('shop', BASE, PLATFORM_HOSTS), 'domain', 'one label'), /top-level domain/);
  for (const platform of [BASE, `shop.${BASE}`, 'APPS.platform.io', 'platform.io']) {
    t.regex(rejects(t, () => checkExternalDomain(platform, BASE, PLATFORM_HOSTS), 'domain', platform), /platform/);
  }
  for (const platform of ['api.platform.io', 'x.api.platform.io']) {
    t.regex(rejects(t, () => checkExternalDomain(platform, 'apps.other.io', PLATFORM_HOSTS), 'domain', platform), /serves the platform/);
  }
  for (const reserved of ['localhost', 'shop.localhost', 'printer.local', 'db.internal', 'shop.test', 'shop.example', 'shop.invalid', 'example.com', 'example.net', 'example.org', 'www.example.com']) {
    t.regex(rejects(t, () => checkExternalDomain(reserved, BASE, PLATFORM_HOSTS), 'domain', reserved), /reserved/, reserved);
  }
  // At most 189 characters: `{a 63-character label}.{domain}` stays within 253.
  const ofLength = (n: number) => `${'a'.repeat(60)}.${'b'.repeat(60)}.${'c'.repeat(n - 128)}.e.com`;
  t.is(checkExternalDomain(ofLength(189), BASE, PLATFORM_HOSTS).length, 189);
  t.regex(rejects(t, () => checkExternalDomain(ofLength(190), BASE, PLATFORM_HOSTS), 'domain', '190'), /at most 189/);
});

const internal = (subdomain: string): WorkerAddress => ({ subdomain, isInternal: true, domain: null });
const external = (subdomain: string): WorkerAddress => ({ subdomain, isInternal: false, domain: 'acme.com' });

test('workerHost: the environment prefix for internal and external addresses alike', (t) => {
  const expected: Record<Environment, [string, string]> = {
    production: [`shop.${BASE}`, 'shop.acme.com'],
    staging: [`staging-shop.${BASE}`, 'staging-shop.acme.com'],
    dev: [`dev-shop.${BASE}`, 'dev-shop.acme.com'],
    test: [`test-shop.${BASE}`, 'test-shop.acme.com'],
  };
  for (const env of ENVIRONMENTS) {
    t.deepEqual([workerHost(internal('shop'), env, BASE), workerHost(external('shop'), env, BASE)], expected[env], env);
  }
  t.throws(() => workerHost({ subdomain: 'shop', isInternal: false, domain: null }, 'production', BASE));
  t.is(workerSlugOf('shop'), 'shop');
});

test('previewHost / parsePreviewHost: round trip in every environment; other hosts are not previews', (t) => {
  for (const env of ENVIRONMENTS) {
    for (const a of [internal('shop'), external('my-shop2')]) {
      const host = previewHost(UUID, a, env, BASE);
      const prefix = env === 'production' ? '' : `${env}-`;
      t.is(host, `${prefix}3f2504e0--${a.subdomain}.${a.isInternal ? BASE : 'acme.com'}`, host);
      t.deepEqual(parsePreviewHost(host, env), { short: '3f2504e0', workerHost: workerHost(a, env, BASE) }, host);
      t.deepEqual(parsePreviewHost(host.toUpperCase(), env), { short: '3f2504e0', workerHost: workerHost(a, env, BASE) }, `${host} uppercased`);
    }
  }
  t.throws(() => previewHost('not-a-uuid', internal('shop'), 'production', BASE));
  for (const host of [`shop.${BASE}`, `a--b.${BASE}`, `3f2504e--shop.${BASE}`, `3f2504eg--shop.${BASE}`, `3f2504e0--.${BASE}`, `3f2504e0---shop.${BASE}`, `3f2504e0--a--b.${BASE}`, '3f2504e0--shop', `xn--bcher-kva.${BASE}`]) {
    t.is(parsePreviewHost(host, 'production'), null, host);
  }
  // The prefix is the environment's: a preview of another environment is not one here.
  t.is(parsePreviewHost(`3f2504e0--shop.${BASE}`, 'staging'), null);
  t.is(parsePreviewHost(`staging-3f2504e0--shop.${BASE}`, 'dev'), null);
});

/** An availability stand-in: every host is free but `taken`; records what was asked. */
function availability(taken: Iterable<string> = []) {
  const takenSet = new Set(taken);
  const asked: string[][] = [];
  const available = async (hosts: string[]) => {
    asked.push(hosts);
    return new Set(hosts.filter((h) => !takenSet.has(h)));
  };
  return { asked, available };
}

const reasons = (s: Suggestion[]) => s.map((x) => x.reason);
const subdomains = (s: Suggestion[]) => s.map((x) => x.subdomain);
const INTERNAL = { isInternal: true, domain: null };

/** Every invariant of a suggestion list: at most 5, unique, not the input, valid, asked for and free. */
function assertWellFormed(t: ExecutionContext, s: Suggestion[], input: string, env: Environment, asked: string[][], taken: Set<string>, address: Omit<WorkerAddress, 'subdomain'> = INTERNAL) {
  t.true(s.length <= 5);
  t.is(new Set(subdomains(s)).size, s.length);
  t.false(subdomains(s).includes(input));
  const askedHosts = new Set(asked.flat());
  for (const x of s) {
    t.is(checkSubdomain(x.subdomain, env), x.subdomain);
    const host = workerHost({ ...address, subdomain: x.subdomain }, env, BASE);
    t.true(askedHosts.has(host), host);
    t.false(taken.has(host), host);
  }
}

test('suggestSubdomains: context-aware first, then semantic, all free', async (t) => {
  const { asked, available } = availability();
  const s = await suggestSubdomains({ subdomain: 'shop', tenantName: 'Café Müller & Co', year: 2026, address: INTERNAL }, 'production', BASE, available);
  t.deepEqual(s, [
    { subdomain: 'shop-cafe-muller-co', full_domain: `shop-cafe-muller-co.${BASE}`, reason: 'context-aware' },
    { subdomain: 'shop-2026', full_domain: `shop-2026.${BASE}`, reason: 'context-aware' },
    { subdomain: 'shop-app', full_domain: `shop-app.${BASE}`, reason: 'semantic' },
    { subdomain: 'shop-portal', full_domain: `shop-portal.${BASE}`, reason: 'semantic' },
    { subdomain: 'shop-hub', full_domain: `shop-hub.${BASE}`, reason: 'semantic' },
  ]);
  t.is(asked.length, 1, 'one batch was enough');
  assertWellFormed(t, s, 'shop', 'production', asked, new Set());
});

test('suggestSubdomains: taken candidates are skipped; smart-numeric and fallback fill in', async (t) => {
  const taken = new Set(['shop-2026', 'shop-app', 'shop-portal', 'shop-hub', 'shop-platform', 'shop-workspace', 'shop3', 'shop-1'].map((s) => `${s}.${BASE}`));
  const { asked, available } = availability(taken);
  const s = await suggestSubdomains({ subdomain: 'shop', year: 2026, address: INTERNAL }, 'production', BASE, available);
  t.deepEqual(subdomains(s), ['shop2', 'shop-2', 'shop-3', 'shop-4', 'shop-5']);
  t.deepEqual(reasons(s), ['smart-numeric', 'fallback', 'fallback', 'fallback', 'fallback']);
  assertWellFormed(t, s, 'shop', 'production', asked, taken);
});

test('suggestSubdomains: a subdomain ending in digits counts on from its number', async (t) => {
  const taken = new Set(['shop2-2026', 'shop2-app', 'shop2-portal', 'shop2-hub', 'shop2-platform', 'shop2-workspace'].map((s) => `${s}.${BASE}`));
  const { asked, available } = availability(taken);
  const s = await suggestSubdomains({ subdomain: 'shop2', year: 2026, address: INTERNAL }, 'production', BASE, available);
  t.deepEqual(subdomains(s).slice(0, 2), ['shop3', 'shop4']);
  t.deepEqual(reasons(s), ['smart-numeric', 'smart-numeric', 'fallback', 'fallback', 'fallback']);
  assertWellFormed(t, s, 'shop2', 'production', asked, taken);
  const big = await suggestSubdomains({ subdomain: 'v99999999999999999999', year: 2026, address: INTERNAL }, 'production', BASE, availability([...'app portal hub platform workspace'.split(' ').map((x) => `v99999999999999999999-${x}.${BASE}`), `v99999999999999999999-2026.${BASE}`]).available);
  t.deepEqual(subdomains(big).slice(0, 2), ['v100000000000000000000', 'v100000000000000000001']);
});

test('suggestSubdomains: everything taken gives none after 50 fallbacks, asked in batches', async (t) => {
  const asked: string[][] = [];
  const s = await suggestSubdomains({ subdomain: 'shop', tenantName: 'Acme', year: 2026, address: INTERNAL }, 'production', BASE, async (hosts) => {
    asked.push(hosts);
    return new Set();
  });
  t.deepEqual(s, []);
  const fallbacks = asked.flat().filter((h) => /^shop-\d+\./.test(h) && h !== `shop-2026.${BASE}`);
  t.is(fallbacks.length, 50);
  t.true(asked.length > 1 && asked.length <= 6);
  t.is(new Set(asked.flat()).size, asked.flat().length, 'no host asked twice');
});

test('suggestSubdomains: a tenant name without a usable slug is left out', async (t) => {
  const s = await suggestSubdomains({ subdomain: 'shop', tenantName: '日本', year: 2026, address: INTERNAL }, 'production', BASE, availability().available);
  t.deepEqual(subdomains(s), ['shop-2026', 'shop-app', 'shop-portal', 'shop-hub', 'shop-platform']);
});

test('suggestSubdomains: candidates too long are shortened at the base, never invalid', async (t) => {
  for (const env of ENVIRONMENTS) {
    // The longest subdomain, with a hyphen where `-app` cuts it: the cut drops it (no "--").
    const longest = longestSubdomain(env);
    const sub = `${'c'.repeat(longest.length - 5)}-dddd`;
    const { asked, available } = availability();
    const s = await suggestSubdomains({ subdomain: sub, tenantName: 'Very Long Tenant Name Incorporated', year: 2026, address: INTERNAL }, env, BASE, available);
    t.is(s.length, 5, env);
    t.is(s[2]!.subdomain, `${'c'.repeat(longest.length - 5)}-app`, env);
    assertWellFormed(t, s, sub, env, asked, new Set());
    for (const host of asked.flat()) t.notThrows(() => checkSubdomain(host.slice(ENVIRONMENT_PREFIX[env].length, host.indexOf('.')), env), host);
  }
});

test('suggestSubdomains: a candidate equal to another or to the input is left out', async (t) => {
  // `-app` of the tenant "App" and of the semantic list are one; `-1` shortened at the base is the input itself.
  const sub = `${'c'.repeat(51)}-1`;
  t.is(checkSubdomain(sub, 'production'), sub, 'the longest subdomain');
  const { asked, available } = availability();
  const freeOnly = async (hosts: string[]) => new Set([...(await available(hosts))].filter((h) => /-(\d{1,2}|app)\./.test(h)));
  const s = await suggestSubdomains({ subdomain: sub, tenantName: 'App', year: 2026, address: INTERNAL }, 'production', BASE, freeOnly);
  const c = 'c'.repeat(51);
  t.deepEqual(subdomains(s), [`${c.slice(2)}-app`, `${c}-2`, `${c}-3`, `${c}-4`, `${c}-5`]);
  t.deepEqual(reasons(s), ['context-aware', 'smart-numeric', 'smart-numeric', 'fallback', 'fallback']);
  assertWellFormed(t, s, sub, 'production', asked, new Set());
});

test('suggestSubdomains: external full_domain has no prefix, availability is asked for the prefixed host (staging)', async (t) => {
  const address = { isInternal: false, domain: 'acme.com' };
  const taken = new Set(['staging-shop-2026.acme.com']);
  const { asked, available } = availability(taken);
  const s = await suggestSubdomains({ subdomain: 'shop', year: 2026, address }, 'staging', BASE, available);
  t.deepEqual(
    s.map((x) => x.full_domain),
    ['shop-app.acme.com', 'shop-portal.acme.com', 'shop-hub.acme.com', 'shop-platform.acme.com', 'shop-workspace.acme.com'],
  );
  t.true(asked.flat().every((h) => h.startsWith('staging-') && h.endsWith('.acme.com')));
  assertWellFormed(t, s, 'shop', 'staging', asked, taken, address);
  const internalStaging = await suggestSubdomains({ subdomain: 'shop', year: 2026, address: INTERNAL }, 'staging', BASE, availability().available);
  t.is(internalStaging[0]!.full_domain, `staging-shop-2026.${BASE}`);
});
