// The differential corpus: the policy documents of policies/ (Cerbos' JSON form, one document per
// file) and cases.json (principals, check cases with Cerbos' answers, known differences, plan
// cases). Used by shared/policies/cerbos-differential.test.ts and bench/policies.ts; described
// in docs/policies-differential.md.
import fs from 'node:fs';
import path from 'node:path';
import type { CheckRequest, Effect, PolicyDocument, Principal, Resource } from '../model.ts';

export const CORPUS_DIR = import.meta.dirname;

/** One check case: a principal (by name), one resource, its actions with Cerbos' answers. */
export interface CheckCase {
  id: string;
  principal: string;
  resource: Resource;
  /** action → Cerbos' effect (asserted against Cerbos, then ours against Cerbos). */
  expect: Record<string, Effect>;
  /** Cerbos' meta.effectiveDerivedRoles, as a set (missing = none). */
  effectiveDerivedRoles?: string[];
  /** Our rule outputs, exactly (outputLines); Cerbos' must be among them (its own depend on its evaluation order). */
  outputs?: string[];
  note?: string;
}

/** Rule outputs as sorted, distinct `action src val` lines (`-`: no val; object keys sorted). */
export function outputLines(outputs: { action: string; src: string; val?: unknown }[] = []): string[] {
  const sorted = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(sorted) : v && typeof v === 'object' ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sorted((v as Record<string, unknown>)[k])])) : v;
  return [...new Set(outputs.map((o) => `${o.action} ${o.src} ${o.val === undefined ? '-' : JSON.stringify(sorted(o.val))}`))].sort();
}

/** A case where we deliberately differ from Cerbos (CERBOS-NOTES §9): both answers are asserted. */
export interface KnownDifference {
  id: string;
  principal: string;
  resource: Resource;
  cerbos: Record<string, Effect>;
  ours: Record<string, Effect>;
  reason: string;
}

/** A plan case: PlanResources for one action; `samples` are the resource attributes checked against the plan. */
export interface PlanCase {
  id: string;
  principal: string;
  resource: { kind: string; scope?: string; attr?: Record<string, unknown> };
  action: string;
  samples: Record<string, unknown>[];
  /** Set when Cerbos' plan contradicts Cerbos' own checks on some sample (CERBOS-NOTES §6): the reason. */
  cerbosDisagreesWithItself?: string;
  note?: string;
}

export interface Corpus {
  /** file name → document, in file-name order */
  files: Record<string, PolicyDocument>;
  docs: PolicyDocument[];
  principals: Record<string, Principal>;
  checks: CheckCase[];
  knownDifferences: KnownDifference[];
  plans: PlanCase[];
}

export function loadCorpus(dir = CORPUS_DIR): Corpus {
  const policyDir = path.join(dir, 'policies');
  const files: Record<string, PolicyDocument> = {};
  for (const name of fs.readdirSync(policyDir).filter((f) => f.endsWith('.json')).sort()) {
    files[name] = JSON.parse(fs.readFileSync(path.join(policyDir, name), 'utf8')) as PolicyDocument;
  }
  const cases = JSON.parse(fs.readFileSync(path.join(dir, 'cases.json'), 'utf8')) as Omit<Corpus, 'files' | 'docs'>;
  const corpus: Corpus = { files, docs: Object.values(files), ...cases };
  const ids = new Set<string>();
  for (const c of [...corpus.checks, ...corpus.knownDifferences, ...corpus.plans]) {
    if (ids.has(c.id)) throw new Error(`cases.json: duplicate case id ${c.id}`);
    ids.add(c.id);
    if (!corpus.principals[c.principal]) throw new Error(`cases.json: case ${c.id} names an unknown principal ${c.principal}`);
  }
  return corpus;
}

/** Cerbos answers at most 50 resources per CheckResources request. */
export const MAX_BATCH = 50;

/** A check case reduced to what is sent: the principal and one resource with its actions. */
export interface CheckItem {
  id: string;
  principal: string;
  resource: Resource;
  actions: string[];
}

/**
 * CheckResources requests for the items: grouped by principal (in first-seen order), at most
 * MAX_BATCH resources each; `items[i]` is answered by `results[i]` of the same request.
 */
export function batchRequests(principals: Record<string, Principal>, items: CheckItem[], prefix = 'diff'): { request: CheckRequest; items: CheckItem[] }[] {
  const byPrincipal = new Map<string, CheckItem[]>();
  for (const item of items) {
    const list = byPrincipal.get(item.principal) ?? [];
    list.push(item);
    byPrincipal.set(item.principal, list);
  }
  const out: { request: CheckRequest; items: CheckItem[] }[] = [];
  for (const [name, list] of byPrincipal) {
    for (let i = 0; i < list.length; i += MAX_BATCH) {
      const chunk = list.slice(i, i + MAX_BATCH);
      out.push({
        request: {
          requestId: `${prefix}-${name}-${i / MAX_BATCH}`,
          includeMeta: true,
          principal: principals[name]!,
          resources: chunk.map((c) => ({ resource: c.resource, actions: c.actions })),
        },
        items: chunk,
      });
    }
  }
  return out;
}

export const checkItems = (corpus: Corpus): CheckItem[] => corpus.checks.map((c) => ({ id: c.id, principal: c.principal, resource: c.resource, actions: Object.keys(c.expect) }));
