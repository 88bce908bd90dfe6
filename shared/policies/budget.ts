// What one policy evaluation may cost (issue 29 #2). Every entry point of the engine (check, plan,
// formula: the check and plan routes, AuthZEN, records, storage) runs under one Meter
// (PolicySet.run, engine.ts); cel.ts charges it from the evaluator itself: one unit per AST node
// evaluated, plus the sizes of the values every operator and function takes and gives. Over
// budget, the evaluation fails closed: the call throws PolicyBudgetError (422) instead of
// answering, whatever CEL's `||` or a comprehension made of the error inside one expression.
// What can be known before any request (a chain of variables that doubles a value) is refused
// when the policy is written (growth.ts). docs/policies.md, "Limits", lists them all.
import { DomainError } from '../errors.ts';
import type { CelProgram } from './cel.ts';

/** Every limit of a policy evaluation, in one place (docs/policies.md, "Limits"). */
export const POLICY_LIMITS = {
  /** Characters of a string, elements of a list or entries of a map that one operation may produce. */
  maxValueSize: 1_000_000,
  /** Work units per resource evaluated (one per AST node evaluated, plus the sizes of the values operations take and give). */
  maxUnitsPerResource: 5_000_000,
  /** Wall-clock time of one engine call (all the resources of a check, one plan), in milliseconds… */
  maxMillisPerCall: 250,
  /** …or, for a call over many resources (a bulk create of records), this much per resource if that is more. */
  maxMillisPerResource: 0.1,
  /** JSON size of the attributes one check, plan or AuthZEN request may carry (principal and resources together), in bytes. */
  maxAttributeBytes: 512 * 1024,
  /** How many times the size of the request's attributes a policy's expressions may build (checked when a policy is written). */
  maxGrowth: 16,
} as const;

/** Units between two looks at the clock. */
const CLOCK_EVERY = 1024;

export type BudgetLimit = 'maxValueSize' | 'maxUnitsPerResource' | 'maxMillisPerCall';

/** A policy evaluation stopped by its budget: 422, nothing decided (a check answers no decision, a plan no rows). */
export class PolicyBudgetError extends DomainError {
  readonly limit: BudgetLimit;
  constructor(limit: BudgetLimit, what: string, where: string | undefined) {
    super('BUSINESS_LOGIC_ERROR', `Policy evaluation stopped${where ? ` in ${where}` : ''}: ${what}. Nothing was decided or allowed.`, {
      data: { limit, value: POLICY_LIMITS[limit] },
    });
    this.limit = limit;
  }
}

class Meter {
  units = 0;
  /** The units at which `check` runs next (the clock, or the end of the budget). */
  checkpoint: number;
  /** The units at which the resource being evaluated has spent its share. */
  limit: number;
  readonly deadline: number;
  readonly allowed: number;
  /** The program being evaluated (its origin names it in the error). */
  program: CelProgram | undefined;
  failure: PolicyBudgetError | undefined;

  constructor(resources: number) {
    this.allowed = Math.max(POLICY_LIMITS.maxMillisPerCall, POLICY_LIMITS.maxMillisPerResource * resources);
    this.deadline = performance.now() + this.allowed;
    this.limit = POLICY_LIMITS.maxUnitsPerResource;
    this.checkpoint = Math.min(CLOCK_EVERY, this.limit);
  }

  /** The next resource gets its own share (one resource cannot spend the others'). */
  nextResource(): void {
    if (this.failure) return;
    this.limit = this.units + POLICY_LIMITS.maxUnitsPerResource;
    this.checkpoint = Math.min(this.units + CLOCK_EVERY, this.limit);
  }

  check(): void {
    if (this.failure) throw this.failure;
    if (this.units > this.limit) this.fail('maxUnitsPerResource', `it took more than ${POLICY_LIMITS.maxUnitsPerResource.toLocaleString('en')} units of work per resource (one per expression node evaluated, plus the sizes of the values handled)`);
    if (performance.now() > this.deadline) this.fail('maxMillisPerCall', `it took longer than its ${Math.round(this.allowed)} ms`);
    this.checkpoint = Math.min(this.units + CLOCK_EVERY, this.limit);
  }

  fail(limit: BudgetLimit, what: string): never {
    // From now on every step fails at once (the first failure is the one reported).
    this.failure ??= new PolicyBudgetError(limit, what, this.program?.origin);
    this.checkpoint = -Infinity;
    throw this.failure;
  }
}

let active: Meter | undefined;

/**
 * Runs one engine call (synchronous) over `resources` resources under the budget: each resource
 * POLICY_LIMITS.maxUnitsPerResource (check.ts calls nextResource), the call its time; throws
 * PolicyBudgetError when it was exceeded, even if the evaluation swallowed the error. A nested
 * call shares the outer budget.
 */
export function metered<T>(resources: number, work: () => T): T {
  if (active) return work();
  const meter = new Meter(resources);
  active = meter;
  try {
    const result = work();
    if (meter.failure) throw meter.failure;
    return result;
  } finally {
    active = undefined;
  }
}

/** A new resource is evaluated: it gets POLICY_LIMITS.maxUnitsPerResource of its own. */
export function nextResource(): void {
  active?.nextResource();
}

/** One step of evaluation (an AST node). */
export function step(): void {
  const m = active;
  if (m !== undefined && ++m.units > m.checkpoint) m.check();
}

/** `n` units of work (the size of the values an operation handles). */
export function charge(n: number): void {
  const m = active;
  if (m !== undefined && (m.units += n) > m.checkpoint) m.check();
}

/** The size of a value an operation produces (charged as `weight`): over POLICY_LIMITS.maxValueSize the evaluation fails. */
export function produced(size: number, weight = size): void {
  if (size > POLICY_LIMITS.maxValueSize) {
    const what = `a value would hold ${size.toLocaleString('en')} characters or elements (at most ${POLICY_LIMITS.maxValueSize.toLocaleString('en')})`;
    if (active) active.fail('maxValueSize', what);
    throw new PolicyBudgetError('maxValueSize', what, undefined);
  }
  charge(weight);
}

/** A value's size, charged: a string's characters count 1/16 each (copying and comparing them is cheap, an element of a list is not). */
export const weightOf = (v: unknown): number => (typeof v === 'string' ? v.length >> 4 : sizeOf(v));

/** Names the program being evaluated, for the error. */
export function evaluating(program: CelProgram): void {
  if (active) active.program = program;
}

/** The size of a CEL value: a string's length, a list's or map's entries, 0 for scalars. */
export function sizeOf(v: unknown): number {
  if (typeof v === 'string') return v.length;
  if (typeof v !== 'object' || v === null) return 0;
  if (Array.isArray(v) || v instanceof Uint8Array) return v.length;
  return v instanceof Map || v instanceof Set ? v.size : 0;
}
