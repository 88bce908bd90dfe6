// JSON Web Tokens (HS256 only: `alg: none` and key-confusion tricks are refused).
import { createSecretKey, randomUUID, type KeyObject } from 'node:crypto';
import jwt from 'jsonwebtoken';
import { resolveSecretKey } from '../common/secret-key.ts';
import type { Config } from '../config.ts';
import { invalidToken } from '../errors.ts';

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
}

/** The token settings of a configuration (the server's and the CLI's direct mode alike). */
export function tokenSettings(config: Config): TokenSettings {
  return { secretKey: resolveSecretKey(config), accessTtlSeconds: config.accessTokenTtlSeconds, refreshTtlSeconds: config.refreshTokenTtlSeconds };
}

const ISSUER = 'platform';

// jsonwebtoken tries to parse a string secret as a PEM key on every call (≈90 µs a
// request, measured); a KeyObject made once skips that.
const keys = new Map<string, KeyObject>();
function keyFor(secret: string): KeyObject {
  let key = keys.get(secret);
  if (!key) keys.set(secret, (key = createSecretKey(Buffer.from(secret, 'utf8'))));
  return key;
}

export function signToken(settings: TokenSettings, type: TokenType, user: { uuid: string; token_generation: number }, tenant: string | null = null): string {
  const ttl = type === 'access' ? settings.accessTtlSeconds : settings.refreshTtlSeconds;
  return jwt.sign({ token_type: type, gen: user.token_generation, tenant }, keyFor(settings.secretKey), {
    algorithm: 'HS256',
    expiresIn: ttl,
    subject: user.uuid,
    jwtid: randomUUID(),
    issuer: ISSUER,
  });
}

/** Verifies signature, expiry and type; throws 401 INVALID_TOKEN with the reason in `message`. */
export function verifyToken(settings: TokenSettings, token: string, expected: TokenType): TokenClaims {
  let claims: jwt.JwtPayload;
  try {
    claims = jwt.verify(token, keyFor(settings.secretKey), { algorithms: ['HS256'], issuer: ISSUER }) as jwt.JwtPayload;
  } catch (err) {
    if (err instanceof jwt.TokenExpiredError) throw invalidToken('Token is expired.');
    throw invalidToken('Token is invalid.');
  }
  if (claims.token_type !== expected) throw invalidToken(`Token has wrong type: expected an ${expected} token.`);
  if (typeof claims.sub !== 'string' || typeof claims.jti !== 'string' || typeof claims.gen !== 'number') {
    throw invalidToken('Token is invalid.');
  }
  return claims as TokenClaims;
}
