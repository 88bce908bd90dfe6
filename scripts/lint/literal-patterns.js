// ESLint rule `platform/literal-patterns`: every regular expression the platform runs on the
// JavaScript (backtracking) engine is written in the source, never built from a value, so no
// user-written pattern can reach it. User patterns go through the one module that builds
// linear-time matchers (shared/common/linear-regexp.ts, RE2), which the config exempts.
//
// Reported:
// - `new RegExp(x)` / `RegExp(x)` unless `x` is a literal (a string, a regex, a template without
//   substitutions);
// - `s.match(x)`, `s.matchAll(x)`, `s.search(x)` on a string unless `x` is a literal or a constant
//   bound to a regex literal (these turn a string argument into a RegExp);
// - `s.replace(x, …)`, `s.replaceAll(x, …)`, `s.split(x)` on a string when `x` is neither a
//   literal, nor such a constant, nor of a string type (a string argument is matched as text).
// With type information (typescript-eslint's project service) the method rules apply to receivers
// that may be strings (a string type, any or unknown); without it, to every receiver.
import ts from 'typescript';

const SEARCHING = new Set(['match', 'matchAll', 'search']);
const SPLITTING = new Set(['replace', 'replaceAll', 'split']);

/** A literal pattern: a string or regex literal, or a template without substitutions. */
function isLiteral(node) {
  return (node.type === 'Literal' && (typeof node.value === 'string' || 'regex' in node)) || (node.type === 'TemplateLiteral' && node.expressions.length === 0);
}

/** An identifier bound, once and for all (`const`), to a regex literal. */
function isConstantRegex(node, scope) {
  if (node.type !== 'Identifier') return false;
  for (let s = scope; s; s = s.upper) {
    const variable = s.set.get(node.name);
    if (!variable) continue;
    const def = variable.defs[0];
    return (
      variable.defs.length === 1 &&
      def.type === 'Variable' &&
      def.parent.kind === 'const' &&
      def.node.init != null &&
      def.node.init.type === 'Literal' &&
      'regex' in def.node.init
    );
  }
  return false;
}

/** @type {import('eslint').Rule.RuleModule} */
export default {
  meta: {
    type: 'problem',
    docs: { description: 'Regular expressions on the backtracking engine are literals; user patterns go through shared/common/linear-regexp.ts' },
    schema: [],
    messages: {
      constructor: 'RegExp built from a value: write the pattern as a literal, or build a linear-time matcher in shared/common/linear-regexp.ts (user-written patterns must never reach the backtracking engine).',
      method: '{{method}}() with a pattern that is not a literal: write the pattern as a literal, or match through shared/common/linear-regexp.ts.',
    },
  },
  create(context) {
    const services = context.sourceCode.parserServices;
    const checker = services?.program ? services.program.getTypeChecker() : undefined;
    const typeOf = (node) => checker.getTypeAtLocation(services.esTreeNodeToTSNodeMap.get(node));
    const parts = (node) => {
      const type = typeOf(node);
      return type.isUnion() ? type.types : [type];
    };
    /** Every constituent of the node's type is a string (false without type information). */
    const isStringTyped = (node) => !!checker && parts(node).every((t) => (t.flags & ts.TypeFlags.StringLike) !== 0);
    /** The node may hold a string: a string constituent, any or unknown (true without type information). */
    const mayBeString = (node) => !checker || parts(node).some((t) => (t.flags & (ts.TypeFlags.StringLike | ts.TypeFlags.Any | ts.TypeFlags.Unknown)) !== 0);

    function checkConstructor(node) {
      if (node.callee.type !== 'Identifier' || node.callee.name !== 'RegExp') return;
      const [pattern] = node.arguments;
      if (pattern && !isLiteral(pattern)) context.report({ node, messageId: 'constructor' });
    }
    return {
      NewExpression: checkConstructor,
      CallExpression(node) {
        checkConstructor(node);
        const callee = node.callee;
        if (callee.type !== 'MemberExpression' || callee.computed || callee.property.type !== 'Identifier') return;
        const method = callee.property.name;
        const [pattern] = node.arguments;
        if (!pattern || (!SEARCHING.has(method) && !SPLITTING.has(method))) return;
        if (isLiteral(pattern) || isConstantRegex(pattern, context.sourceCode.getScope(node))) return;
        if (!mayBeString(callee.object)) return;
        if (SPLITTING.has(method) && isStringTyped(pattern)) return;
        context.report({ node, messageId: 'method', data: { method } });
      },
    };
  },
};
