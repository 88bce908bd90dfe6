// JSON Web Tokens (HS256 only: `alg: none` and key-confusion tricks are refused).
import { createSecretKey, randomUUID, type KeyObject } from 'node:crypto';
import type JsonWebToken from 'jsonwebtoken';
import type { JwtPayload } from 'jsonwebtoken';
import { lazyRequire } from '../common/lazy-require.ts';
import { resolveSecretKey } from '../common/secret-key.ts';
import type { Config } from '../config.ts';
import { invalidToken } from '../errors.ts';

const jwt = lazyRequire<typeof JsonWebToken>('jsonwebtoken');

export type TokenType = 'access' | 'refresh';

export interface TokenClaims {
  token_type: TokenType;
  sub: string; // user uuid
  jti: string;
  gen: number; // the user's token generation when issued
  tenant: string | null; // site schema for tenant tokens; null on the platform
  iat: number;
  exp: number;
}

export interface TokenSettings {
  secretKey: string;
  accessTtlSeconds: number;
  refreshTtlSeconds: number;
  /** Browser sessions (auth/sessions.ts), from sign-in. */
  sessionTtlSeconds: number;
}

/** The token settings of a configuration (the server's and the CLI's direct mode alike). */
export function tokenSettings(config: Config): TokenSettings {
  return { secretKey: resolveSecretKey(config), accessTtlSeconds: config.accessTokenTtlSeconds, refreshTtlSeconds: config.refreshTokenTtlSeconds, sessionTtlSeconds: config.sessionTtlSeconds };
}

const ISSUER = 'platform';

// jsonwebtoken tries to parse a string secret as a PEM key on every call (≈90 µs a
// request, measured); a KeyObject made once skips that.
/** A secret's key (made once: a string secret costs a parse per call) and the tokens it verified. */
interface Signer {
  key: KeyObject;
  /**
   * Tokens whose signature checked out, by their text, with their claims: a client sends the same
   * bearer token again and again, and its HMAC and JSON need checking once. Expiry is checked on
   * every use; emptied when it reaches MAX_VERIFIED.
   */
  verified: Map<string, JwtPayload>;
}
const MAX_VERIFIED = 10_000;
const signers = new Map<string, Signer>();
function signerFor(secret: string): Signer {
  let signer = signers.get(secret);
  if (!signer) signers.set(secret, (signer = { key: createSecretKey(Buffer.from(secret, 'utf8')), verified: new Map() }));
  return signer;
}
const keyFor = (secret: string): KeyObject => signerFor(secret).key;

/** The claims of a token signed with this secret by us, not expired (jsonwebtoken's checks, done once per token). */
function verifiedClaims(secret: string, token: string): JwtPayload {
  const signer = signerFor(secret);
  const known = signer.verified.get(token);
  if (known) {
    if (Math.floor(Date.now() / 1000) >= (known.exp ?? 0)) {
      signer.verified.delete(token);
      throw new (jwt().TokenExpiredError)('jwt expired', new Date((known.exp ?? 0) * 1000));
    }
    return known;
  }
  const claims = jwt().verify(token, signer.key, { algorithms: ['HS256'], issuer: ISSUER }) as JwtPayload;
  if (signer.verified.size >= MAX_VERIFIED) signer.verified.clear();
  signer.verified.set(token, Object.freeze(claims));
  return claims;
}

export function signToken(settings: TokenSettings, type: TokenType, user: { uuid: string; token_generation: number }, tenant: string | null = null): string {
  const ttl = type === 'access' ? settings.accessTtlSeconds : settings.refreshTtlSeconds;
  return jwt().sign({ token_type: type, gen: user.token_generation, tenant }, keyFor(settings.secretKey), {
    algorithm: 'HS256',
    expiresIn: ttl,
    subject: user.uuid,
    jwtid: randomUUID(),
    issuer: ISSUER,
  });
}

/** When an access or refresh token verified already (verifyToken) expires, in milliseconds since the epoch: its `exp`, read without checking it again (from the verified tokens' cache: no second decode per request). */
export function tokenExpiry(settings: TokenSettings, token: string): number | undefined {
  const claims = signerFor(settings.secretKey).verified.get(token) ?? jwt().decode(token);
  return claims && typeof claims === 'object' && typeof claims.exp === 'number' ? claims.exp * 1000 : undefined;
}

/** Verifies signature, expiry and type; throws 401 INVALID_TOKEN with the reason in `message`. */
export function verifyToken(settings: TokenSettings, token: string, expected: TokenType): TokenClaims {
  let claims: JwtPayload;
  try {
    claims = verifiedClaims(settings.secretKey, token);
  } catch (err) {
    if (err instanceof jwt().TokenExpiredError) throw invalidToken('Token is expired.');
    throw invalidToken('Token is invalid.');
  }
  if (claims.token_type !== expected) throw invalidToken(`Token has wrong type: expected an ${expected} token.`);
  if (typeof claims.sub !== 'string' || typeof claims.jti !== 'string' || typeof claims.gen !== 'number') {
    throw invalidToken('Token is invalid.');
  }
  return claims as TokenClaims;
}
