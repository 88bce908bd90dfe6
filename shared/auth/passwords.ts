import { validationError } from '../errors.ts';

// The native argon2 binding is loaded by the first password hashed or verified, not with the app.
const argon2 = () => import('@node-rs/argon2');

// argon2id (the package default algorithm) with its default cost (~75 ms here).
export const hashPassword = async (password: string): Promise<string> => (await argon2()).hash(password);

// Verifying against a real hash when the user does not exist keeps the timing of
// "unknown user" and "wrong password" alike.
let dummyHash: Promise<string> | undefined;
export async function verifyPassword(stored: string | undefined, password: string): Promise<boolean> {
  const { hash, verify } = await argon2();
  if (!stored) {
    dummyHash ??= hash('timing-equaliser-not-a-password');
    await verify(await dummyHash, password).catch(() => false);
    return false;
  }
  return verify(stored, password).catch(() => false);
}

/** Password rules; throws a field-keyed VALIDATION_ERROR on `field`. */
export function checkPasswordStrength(password: string, field: string, context: { username?: string; email?: string } = {}): void {
  const problems: string[] = [];
  if (password.length < 8) problems.push('This password is too short. It must contain at least 8 characters.');
  if (password.length > 128) problems.push('This password is too long. It must contain at most 128 characters.');
  if (/^\d+$/.test(password)) problems.push('This password is entirely numeric.');
  const lower = password.toLowerCase();
  if ((context.username && lower === context.username.toLowerCase()) || (context.email && lower === context.email.toLowerCase())) {
    problems.push('The password is too similar to the username or e-mail.');
  }
  if (problems.length) throw validationError({ [field]: problems });
}
