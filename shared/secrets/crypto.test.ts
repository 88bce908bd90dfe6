// Encryption of secret values: AES-256-GCM with HKDF-derived, versioned keys.
import test from 'ava';
import { deriveSecretKey, SecretKeyring } from './crypto.ts';

const MASTER = 'master-secret-0123456789abcdef-0123456789';

test('a value round-trips; each seal has its own IV; the stored form is base64(iv|tag|ct)', (t) => {
  const ring = new SecretKeyring(MASTER);
  const one = ring.seal('hunter2', 'secret:site_a:1');
  const two = ring.seal('hunter2', 'secret:site_a:1');
  t.not(one.ciphertext, two.ciphertext);
  t.is(one.key_version, 1);
  t.is(Buffer.from(one.ciphertext, 'base64').length, 12 + 16 + 'hunter2'.length);
  t.false(one.ciphertext.includes('hunter2'));
  t.is(ring.open(one, 'secret:site_a:1'), 'hunter2');
});

test('another row, another site, a changed byte or another master key: no plaintext', (t) => {
  const ring = new SecretKeyring(MASTER);
  const sealed = ring.seal('{"password":"x"}', 'secret:site_a:1');
  t.throws(() => ring.open(sealed, 'secret:site_b:1'), { message: /cannot be decrypted/ });
  t.throws(() => ring.open(sealed, 'secret:site_a:2'));
  const raw = Buffer.from(sealed.ciphertext, 'base64');
  raw[raw.length - 1] ^= 1;
  t.throws(() => ring.open({ ...sealed, ciphertext: raw.toString('base64') }, 'secret:site_a:1'));
  t.throws(() => new SecretKeyring(`${MASTER}-other`).open(sealed, 'secret:site_a:1'));
});

test('key versions: HKDF gives distinct keys; older versions stay readable; rotation from a previous master', (t) => {
  t.notDeepEqual(deriveSecretKey(MASTER, 1), deriveSecretKey(MASTER, 2));
  t.deepEqual(deriveSecretKey(MASTER, 1), deriveSecretKey(MASTER, 1));
  const v1 = new SecretKeyring(MASTER, 1).seal('value', 'aad');
  const v2ring = new SecretKeyring(MASTER, 2);
  t.is(v2ring.open(v1, 'aad'), 'value');
  t.is(v2ring.seal('value', 'aad').key_version, 2);
  t.throws(() => new SecretKeyring(MASTER, 1).open(v2ring.seal('value', 'aad'), 'aad'), { message: /newer/ });
  // PLATFORM_SECRET_KEY replaced: old versions come from the previous master during rotation.
  const rotating = new SecretKeyring('new-master-secret-0123456789abcdef-012', 2, MASTER);
  t.is(rotating.open(v1, 'aad'), 'value');
  t.is(new SecretKeyring('new-master-secret-0123456789abcdef-012', 2).open(rotating.seal('value', 'aad'), 'aad'), 'value');
});
