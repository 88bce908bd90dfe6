// Site rules 1, 2 and the host-name checks, as pure functions.
import test from 'ava';
import { domainSlug, nextSchemaName, normalizeHost, prefixedName, schemaBase } from './site.naming.ts';

test('prefixedName: per ENVIRONMENT, never twice', (t) => {
  t.is(prefixedName('Shop', 'production'), 'Shop');
  t.is(prefixedName('Shop', 'staging'), 'staging-Shop');
  t.is(prefixedName('Shop', 'dev'), 'dev-Shop');
  t.is(prefixedName('Shop', 'test'), 'test-Shop');
  t.is(prefixedName('staging-Shop', 'staging'), 'staging-Shop');
  t.is(prefixedName('DEV-Shop', 'dev'), 'DEV-Shop');
  t.is(prefixedName('dev-Shop', 'staging'), 'staging-dev-Shop');
});

test('schemaBase / nextSchemaName: underscores, leading letter or underscore, _1 _2, reserved names avoided, 63 max', (t) => {
  t.is(schemaBase('staging-My Shop'), 'staging_my_shop');
  t.is(schemaBase('Café & Co.'), 'cafe___co_');
  t.is(schemaBase('9 lives'), '_9_lives');
  t.is(schemaBase('pg data'), '_pg_data');
  t.is(schemaBase('x'.repeat(80)).length, 63);
  t.is(nextSchemaName('shop', []), 'shop');
  t.is(nextSchemaName('shop', ['shop']), 'shop_1');
  t.is(nextSchemaName('shop', ['shop', 'shop_1']), 'shop_2');
  t.is(nextSchemaName('public', []), 'public_1');
  const long = 'y'.repeat(63);
  t.is(nextSchemaName(long, [long]), `${'y'.repeat(61)}_1`);
});

test('normalizeHost: lowercase RFC 1123, no port, no trailing dot; platform hosts refused', (t) => {
  t.is(normalizeHost(' Shop.Example.COM '), 'shop.example.com');
  t.is(normalizeHost('intranet'), 'intranet');
  for (const bad of ['a..b', 'a.b.', 'a.b:80', 'http://a.b', '-a.b', 'a-.b', 'a_b.c', `${'a'.repeat(64)}.b`, `${'a.'.repeat(127)}ab`, '']) {
    t.throws(() => normalizeHost(bad), undefined, bad);
  }
  t.throws(() => normalizeHost('localhost', ['localhost']));
  t.is(domainSlug('www.example.com'), 'www-example-com');
});
