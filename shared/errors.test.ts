// The error body (docs/api-conventions.md "Field errors"): the standard form, each field's
// messages beside it (the spec's field form) unless the field is named like a member of an
// envelope, and the round trip of the remote CLI (fromBody → toBody gives the body back).
import test from 'ava';
import { DomainError, ENVELOPE_MEMBERS, validationError } from './errors.ts';

test('a field error: the standard form and the field form in one body', (t) => {
  t.deepEqual(validationError({ paths: ['Paths list cannot be empty'], 'settings.display_name': ['x'] }).toBody(), {
    status: 'error',
    code: 'VALIDATION_ERROR',
    message: 'Invalid input.',
    errors: { paths: ['Paths list cannot be empty'], 'settings.display_name': ['x'] },
    paths: ['Paths list cannot be empty'],
    'settings.display_name': ['x'],
  });
  t.deepEqual(new DomainError('NOT_FOUND', 'Record not found.', { detail: 'Not found.' }).toBody(), { status: 'error', code: 'NOT_FOUND', message: 'Record not found.', detail: 'Not found.' });
});

test('fields named like envelope members stay in errors; extras win over copies; __proto__ is a plain key', (t) => {
  const errors = Object.fromEntries([...ENVELOPE_MEMBERS].map((m) => [m, [`bad ${m}`]]));
  const body = new DomainError('VALIDATION_ERROR', 'Invalid record.', { errors: { ...errors, title: ['t'] }, extra: { title: 'kept' } }).toBody();
  t.deepEqual(Object.keys(body), ['status', 'code', 'message', 'errors', 'title']);
  t.is(body.title, 'kept');
  t.is(body.status, 'error');
  const proto = validationError(JSON.parse('{"__proto__": ["no"]}')).toBody();
  t.deepEqual(JSON.parse(JSON.stringify(proto)), JSON.parse('{"status":"error","code":"VALIDATION_ERROR","message":"Invalid input.","errors":{"__proto__":["no"]},"__proto__":["no"]}'));
  t.is(Object.getPrototypeOf(proto), Object.prototype);
});

test('fromBody drops the field form\'s copies and keeps other members: toBody gives the same body back', (t) => {
  for (const err of [
    validationError({ json_schema: ['Field \'a\': invalid type "x".'] }, 'Invalid table schema.'),
    new DomainError('VALIDATION_ERROR', 'Invalid input.', { errors: { paths: ['p'] }, extra: { success: false, status_code: 400 } }),
    new DomainError('RATE_LIMIT_EXCEEDED', 'Slow down.', { detail: 'Slow down.', extra: { retry_after: 5 } }),
  ]) {
    const again = DomainError.fromBody(err.status, err.toBody());
    t.deepEqual(again.toBody(), err.toBody());
    t.deepEqual(again.errors, err.errors);
    t.deepEqual(again.extra, err.extra);
  }
});
