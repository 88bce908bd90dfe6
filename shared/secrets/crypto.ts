// Encryption of secret values at rest: AES-256-GCM, a random 12-byte IV per value, the key
// derived from PLATFORM_SECRET_KEY with HKDF-SHA256 (fixed salt, an info string naming the
// key version). Stored form: base64(iv | tag | ciphertext) with the key version beside it.
// The associated data binds a ciphertext to its site and secret, so a ciphertext copied into
// another row or another site's schema does not decrypt. Rotation: docs/api-conventions.md.
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

const SALT = 'platform/secrets/v1-salt';
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** The 32-byte key of one version, derived from a master secret. */
export function deriveSecretKey(master: string, version: number): Buffer {
  if (!Number.isInteger(version) || version < 1) throw new Error(`Invalid secrets key version ${version}.`);
  return Buffer.from(hkdfSync('sha256', Buffer.from(master, 'utf8'), Buffer.from(SALT, 'utf8'), Buffer.from(`platform secrets key v${version}`, 'utf8'), 32));
}

export interface Sealed {
  ciphertext: string;
  key_version: number;
}

/**
 * The keys for secret values. New values are written with `currentVersion`; every older
 * version stays readable (derived from `previousMaster` when given: re-encryption after
 * PLATFORM_SECRET_KEY itself was replaced, see `platform secret rotate`).
 */
export class SecretKeyring {
  readonly currentVersion: number;
  private readonly master: string;
  private readonly previousMaster: string | undefined;
  private readonly keys = new Map<number, Buffer>();

  constructor(master: string, currentVersion = 1, previousMaster?: string) {
    if (!master) throw new Error('The secrets keyring needs a master secret.');
    this.master = master;
    this.currentVersion = currentVersion;
    this.previousMaster = previousMaster;
  }

  private key(version: number): Buffer {
    let key = this.keys.get(version);
    if (!key) {
      if (version > this.currentVersion) throw cannotDecrypt(`it was written with key version ${version}, newer than this process's ${this.currentVersion}`);
      const master = version < this.currentVersion && this.previousMaster ? this.previousMaster : this.master;
      this.keys.set(version, (key = deriveSecretKey(master, version)));
    }
    return key;
  }

  seal(plaintext: string, aad: string): Sealed {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key(this.currentVersion), iv);
    cipher.setAAD(Buffer.from(aad, 'utf8'));
    const ct = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final()]);
    return { ciphertext: Buffer.concat([iv, cipher.getAuthTag(), ct]).toString('base64'), key_version: this.currentVersion };
  }

  open(sealed: Sealed, aad: string): string {
    const raw = Buffer.from(sealed.ciphertext, 'base64');
    if (raw.length < IV_BYTES + TAG_BYTES) throw cannotDecrypt('the stored value is truncated');
    const decipher = createDecipheriv('aes-256-gcm', this.key(sealed.key_version), raw.subarray(0, IV_BYTES));
    decipher.setAAD(Buffer.from(aad, 'utf8'));
    decipher.setAuthTag(raw.subarray(IV_BYTES, IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(raw.subarray(IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw cannotDecrypt('the key does not match (was PLATFORM_SECRET_KEY changed without `platform secret rotate`?)');
    }
  }
}

// A server-side fault, never the caller's: 500, with the reason in the log only.
const cannotDecrypt = (why: string) => new Error(`A secret value cannot be decrypted: ${why}.`);

/** The associated data of a secret value: its site and its identity. */
export const secretAad = (schema: string, secretUuid: string): string => `secret:${schema}:${secretUuid}`;
