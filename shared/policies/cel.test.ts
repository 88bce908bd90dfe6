import { EvaluationError } from '@marcbachmann/cel-js';
import test from 'ava';
import { CelError, compileCel, holds, valueOf } from './cel.ts';

const failure = (source: string, activation: Record<string, unknown>): unknown => {
  try {
    compileCel(source).run(activation);
  } catch (err) {
    return err;
  }
  return undefined;
};

test('runtime errors are one shared EvaluationError (quietRuntimeErrors is in force)', (t) => {
  const absentKey = failure('R.attr.owner == P.id', { R: { attr: {} }, P: { id: 'a' } });
  const noOverload = failure('R.attr.n + P.id == 1', { R: { attr: { n: 1 } }, P: { id: 'a' } });
  t.true(absentKey instanceof EvaluationError);
  t.is(noOverload, absentKey);
});

test('CEL error semantics hold with the shared error', (t) => {
  const act = { R: { attr: { n: 2 } }, P: { id: 'a', attr: {} } };
  t.false(holds(compileCel('R.attr.missing == 1'), act));
  t.true(holds(compileCel('true || R.attr.missing == 1'), act));
  t.true(holds(compileCel('R.attr.missing == 1 || true'), act));
  t.false(holds(compileCel('R.attr.missing == 1 && false'), act));
  t.false(holds(compileCel('false && R.attr.missing == 1'), act));
  t.false(holds(compileCel('has(R.attr.missing)'), act));
  t.true(holds(compileCel('!has(R.attr.missing) && R.attr.n == 2'), act));
  t.true(holds(compileCel('(R.attr.missing == 1 ? false : true) || R.attr.n > 1'), act));
  t.is(valueOf(compileCel('P.attr.team'), act), undefined);
  t.is(valueOf(compileCel('R.attr.n * 2.0'), act), 4);
});

test('compile errors keep their message and position', (t) => {
  const err = t.throws(() => compileCel('R.attr.n == '), { instanceOf: CelError });
  t.regex(err.message, /at column \d+/);
  t.is(typeof err.position, 'number');
  const typeErr = t.throws(() => compileCel('1 + "a" == 2'), { instanceOf: CelError });
  t.regex(typeErr.message, /overload|no matching|\+/i);
});
