// One function invocation inside QuickJS compiled to WebAssembly (quickjs-emscripten, the sync
// variant: STACK-NOTES). The guest has its own heap and globals: no `require`, no `process`, no
// module loader (an `import` fails), no timers, no network; what it can reach is what this file
// gives it — `console` (captured into the invocation's logs) and `platform`, the SDK, whose
// requests go to the platform API as the invoking user (the host's `api` callback decides where
// and how; the guest only names a method, an `/api/…` path and a JSON body).
//
// Limits: a memory limit on the runtime (QuickJS counts its allocations; an allocation past it
// throws "out of memory"), a stack limit, CPU time (the thread's CPU time while it executes guest
// code, counted around every entry into the VM; the interrupt handler stops the guest past it) and
// the wall-clock timeout (the function's `timeout`: awaiting the SDK counts, CPU limit or not).
// Values cross the boundary as JSON text only, so no host object (and no host prototype) is
// ever reachable from the guest. docs/functions.md.
import variant from '@jitl/quickjs-wasmfile-release-sync';
import { newQuickJSWASMModuleFromVariant, type QuickJSContext, type QuickJSDeferredPromise, type QuickJSHandle, type QuickJSSyncVariant, type QuickJSWASMModule } from 'quickjs-emscripten-core';

// The package's types describe its CommonJS entry; Node loads its ES module, whose default export is the variant.
export const loadQuickJS = (): Promise<QuickJSWASMModule> => newQuickJSWASMModuleFromVariant(variant as unknown as QuickJSSyncVariant);

export interface SandboxLimits {
  /** Wall-clock time for the whole invocation (ms). */
  timeoutMs: number;
  /** Time spent executing guest code (ms). */
  cpuMs: number;
  memoryBytes: number;
  /** Captured console output, in bytes; past it the logs end with a truncation line. */
  maxLogBytes: number;
  /** SDK requests one invocation may make. */
  maxApiCalls: number;
  /** The JSON of the handler's result. */
  maxResultBytes: number;
}

export interface RunRequest {
  code: string;
  /** What the handler receives as its first argument (JSON-safe). */
  event: unknown;
  /** Its second argument: who, which function, env (JSON-safe). */
  context: Record<string, unknown>;
  limits: SandboxLimits;
}

export interface LogLine {
  level: 'log' | 'info' | 'warn' | 'error' | 'debug';
  message: string;
  at: string;
}

export type ErrorType = 'Error' | 'TimeoutError' | 'CpuLimitExceeded' | 'MemoryLimitExceeded' | 'InvalidFunction' | 'InvalidResult' | 'SandboxError';

export interface RunOutcome {
  status: 'succeeded' | 'failed' | 'timed_out';
  result?: unknown;
  error?: { type: ErrorType | string; message: string; stack?: string };
  logs: LogLine[];
  cpu_ms: number;
  duration_ms: number;
  /** The QuickJS instance failed to free this invocation's runtime: it must not be used again. */
  broken?: boolean;
}

/** An outcome that ends an invocation before or without its code running to the end. */
export const failedOutcome = (type: string, message: string): RunOutcome => ({ status: 'failed', error: { type, message }, logs: [], cpu_ms: 0, duration_ms: 0 });

/** An SDK request the host refuses to send (its message is the guest's error as it is). */
export class SdkRefusal extends Error {}

/** An SDK request: the host answers with the status and the response body's text (or rejects: SdkRefusal when it will not send it). */
export type ApiCall = (method: string, path: string, body: string | undefined) => Promise<{ status: number; body: string }>;

const METHODS = new Set(['GET', 'POST', 'PUT', 'PATCH', 'DELETE']);

// The guest side of the SDK and of console; `__host_*` are removed from the global object once captured.
const PRELUDE = `
(() => {
  const request = globalThis.__host_request;
  const log = globalThis.__host_log;
  delete globalThis.__host_request;
  delete globalThis.__host_log;
  const text = (args) => args.map((a) => typeof a === 'string' ? a : (() => { try { return JSON.stringify(a); } catch { return String(a); } })()).join(' ');
  globalThis.console = Object.freeze({
    log: (...a) => log('log', text(a)), info: (...a) => log('info', text(a)), warn: (...a) => log('warn', text(a)),
    error: (...a) => log('error', text(a)), debug: (...a) => log('debug', text(a)),
  });
  const call = async (method, path, body) => {
    const r = JSON.parse(await request(method, String(path), body === undefined ? undefined : JSON.stringify(body)));
    return r;
  };
  globalThis.platform = Object.freeze({
    request: call,
    get: (path) => call('GET', path),
    post: (path, body) => call('POST', path, body),
    put: (path, body) => call('PUT', path, body),
    patch: (path, body) => call('PATCH', path, body),
    delete: (path) => call('DELETE', path),
  });
})();
`;

/** Ends the run with `outcome` (thrown from deep inside, caught once). */
class Stop extends Error {
  readonly outcome: RunOutcome;
  constructor(outcome: RunOutcome) {
    super(outcome.error?.message);
    this.outcome = outcome;
  }
}

/**
 * The calling thread's CPU time (ms). Guest time is counted with it, not with the wall clock: on a
 * busy machine a sandbox thread (at a lower priority) waits for a core, and that wait is no CPU
 * the function used. The kernel accounts it in scheduler ticks, so one reading may lag by a few ms.
 */
const threadCpuMs = (): number => {
  const { user, system } = process.threadCpuUsage();
  return (user + system) / 1000;
};

/** Guest code that has run this long without a break yields to other sites' invocations (`yieldWhile`)… */
const RUN_BEFORE_YIELD_MS = 10;
/** …then runs this long between pauses… */
const YIELD_MS = 2;
/** …each pause twice as long: a third of the core while others wait (Atomics.wait blocks only this thread). */
const PAUSE_MS = 2 * YIELD_MS;
const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * Runs `req.code`'s exported handler once; never throws (a failure is the outcome's `error`).
 * `yieldWhile`: while it says so (another site's invocations are being served), guest code that
 * has run RUN_BEFORE_YIELD_MS without a break sleeps PAUSE_MS after every YIELD_MS it runs: a
 * spinning function leaves two thirds of its core to the others, rather than making their thread wait
 * for the scheduler's turn at the same priority. Sleeping is no CPU time (the limit counts the
 * thread's CPU time), only wall clock (the timeout).
 */
export async function runFunction(qjs: QuickJSWASMModule, req: RunRequest, api: ApiCall, yieldWhile: () => boolean = () => false): Promise<RunOutcome> {
  const started = performance.now();
  const { limits } = req;
  const logs: LogLine[] = [];
  let logBytes = 0;
  let truncated = false;
  let cpu = 0;
  let enteredAt = 0;
  let enteredCpu = 0;
  let stopReason: 'cpu' | 'timeout' | undefined;
  const deadline = started + limits.timeoutMs;

  const runtime = qjs.newRuntime();
  runtime.setMemoryLimit(limits.memoryBytes);
  runtime.setMaxStackSize(256 * 1024);
  let lastPause = 0;
  runtime.setInterruptHandler(() => {
    let now = performance.now();
    if (now - enteredAt > RUN_BEFORE_YIELD_MS && now - lastPause > YIELD_MS && yieldWhile()) {
      Atomics.wait(pause, 0, 0, PAUSE_MS);
      now = lastPause = performance.now();
    }
    // The wall clock inside the guest bounds its CPU time from above: the thread's own CPU time is
    // read only once that bound passes the limit.
    if (cpu + (now - enteredAt) > limits.cpuMs && cpu + (threadCpuMs() - enteredCpu) > limits.cpuMs) stopReason ??= 'cpu';
    else if (now > deadline) stopReason ??= 'timeout';
    return stopReason !== undefined;
  });
  const vm = runtime.newContext();
  /** Guest code runs only inside enter(): its CPU time is counted. */
  const enter = <T>(fn: () => T): T => {
    enteredAt = performance.now();
    enteredCpu = threadCpuMs();
    try {
      return fn();
    } finally {
      cpu += Math.max(0, Math.min(performance.now() - enteredAt, threadCpuMs() - enteredCpu));
    }
  };
  const pending = new Set<QuickJSDeferredPromise>();
  let wake: (() => void) | undefined;
  let apiCalls = 0;

  const outcome = (status: RunOutcome['status'], extra: Partial<RunOutcome>): RunOutcome => ({ status, logs, cpu_ms: Math.round(cpu), duration_ms: Math.round(performance.now() - started), ...extra });
  const limitError = (): RunOutcome =>
    stopReason === 'cpu'
      ? outcome('failed', { error: { type: 'CpuLimitExceeded', message: `The function used more than ${limits.cpuMs} ms of CPU time.` } })
      : outcome('timed_out', { error: { type: 'TimeoutError', message: `The function did not finish within its timeout of ${Math.round(limits.timeoutMs / 1000)} s.` } });
  /** The guest's error as a plain record (its name, message and stack, as strings). */
  const guestError = (handle: QuickJSHandle): RunOutcome => {
    if (stopReason) return limitError();
    const e = vm.dump(handle) as { name?: unknown; message?: unknown; stack?: unknown } | unknown;
    const rec = typeof e === 'object' && e !== null ? (e as Record<string, unknown>) : { message: String(e) };
    const message = String(rec.message ?? e);
    if (/out of memory/i.test(message) || (rec.name === 'InternalError' && /memory/i.test(message))) {
      return outcome('failed', { error: { type: 'MemoryLimitExceeded', message: `The function used more than ${Math.round(limits.memoryBytes / 1024 / 1024)} MiB of memory.` } });
    }
    if (rec.name === 'InternalError' && /stack overflow/i.test(message)) return outcome('failed', { error: { type: 'Error', message: 'Stack overflow (too much recursion).' } });
    return outcome('failed', { error: { type: typeof rec.name === 'string' && rec.name ? rec.name : 'Error', message, stack: typeof rec.stack === 'string' ? rec.stack : undefined } });
  };

  const hostLog = vm.newFunction('__host_log', (level, message) => {
    const line = { level: vm.getString(level) as LogLine['level'], message: vm.getString(message), at: new Date().toISOString() };
    const size = Buffer.byteLength(line.message) + 32;
    if (logBytes + size > limits.maxLogBytes) {
      if (!truncated) logs.push({ level: 'warn', message: `[logs truncated at ${limits.maxLogBytes} bytes]`, at: line.at });
      truncated = true;
      return;
    }
    logBytes += size;
    logs.push(line);
  });
  const hostRequest = vm.newFunction('__host_request', (methodH, pathH, bodyH) => {
    const deferred = vm.newPromise();
    pending.add(deferred);
    const method = vm.getString(methodH).toUpperCase();
    const path = vm.getString(pathH);
    const body = vm.typeof(bodyH) === 'string' ? vm.getString(bodyH) : undefined;
    const settle = (ok: boolean, text: string) => {
      if (!pending.has(deferred)) return; // the invocation ended meanwhile
      pending.delete(deferred);
      const value = vm.newString(text);
      if (ok) deferred.resolve(value);
      else {
        const err = vm.newError(text);
        deferred.reject(err);
        err.dispose();
      }
      value.dispose();
      deferred.dispose();
      wake?.();
    };
    // Refusals settle after this returns (the handle must stay alive until the guest has it).
    const refuse = (message: string) => void Promise.resolve().then(() => settle(false, message));
    if (!METHODS.has(method)) refuse(`platform.request: unsupported method ${JSON.stringify(method)}.`);
    else if (++apiCalls > limits.maxApiCalls) refuse(`platform.request: more than ${limits.maxApiCalls} requests in one invocation.`);
    else {
      api(method, path, body).then(
        (r) => {
          let data: unknown = r.body;
          try {
            data = r.body === '' ? null : JSON.parse(r.body);
          } catch {
            /* not JSON: the text */
          }
          settle(true, JSON.stringify({ status: r.status, ok: r.status >= 200 && r.status < 300, data }));
        },
        (err: Error) => settle(false, err instanceof SdkRefusal ? err.message : `platform.request failed: ${err.message}`),
      );
    }
    return deferred.handle;
  });

  const handles: QuickJSHandle[] = [hostLog, hostRequest];
  /** A guest value to release at the end. */
  const keep = (h: QuickJSHandle): QuickJSHandle => (handles.push(h), h);
  /** The value of a VM call, or Stop with the guest's error. */
  const unwrap = (r: { value: QuickJSHandle; error?: undefined } | { error: QuickJSHandle }): QuickJSHandle => {
    if (r.error === undefined) return r.value;
    const failed = guestError(r.error);
    r.error.dispose();
    throw new Stop(failed);
  };
  /** Runs pending jobs until `handle` (a promise or a value) settles: its value, or Stop. */
  const settle = async (handle: QuickJSHandle): Promise<QuickJSHandle> => {
    for (;;) {
      const state = vm.getPromiseState(handle);
      if (state.type === 'fulfilled') {
        if (state.notAPromise) return handle;
        handle.dispose();
        return state.value;
      }
      if (state.type === 'rejected') {
        handle.dispose();
        return unwrap({ error: state.error });
      }
      const jobs = enter(() => runtime.executePendingJobs());
      if (jobs.error) {
        handle.dispose();
        return unwrap({ error: jobs.error });
      }
      if (stopReason) {
        handle.dispose();
        throw new Stop(limitError());
      }
      if (jobs.value > 0 || runtime.hasPendingJob()) continue;
      // No job ran, so the promise is still pending: only an SDK answer can move it now.
      if (pending.size === 0) {
        handle.dispose();
        throw new Stop(outcome('failed', { error: { type: 'Error', message: 'The handler returned a promise that never settles (nothing it waits for is pending).' } }));
      }
      const remaining = deadline - performance.now();
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          stopReason ??= 'timeout';
          resolve();
        }, Math.max(0, remaining));
        wake = () => {
          clearTimeout(timer);
          resolve();
        };
      });
      wake = undefined;
    }
  };

  const invoke = async (): Promise<RunOutcome> => {
    vm.setProp(vm.global, '__host_log', hostLog);
    vm.setProp(vm.global, '__host_request', hostRequest);
    unwrap(enter(() => vm.evalCode(PRELUDE, 'prelude.js', { type: 'global' }))).dispose();
    const exports = keep(await settle(unwrap(enter(() => vm.evalCode(req.code, 'function.js', { type: 'module' })))));
    let fn = keep(vm.getProp(exports, 'default'));
    if (vm.typeof(fn) !== 'function') fn = keep(vm.getProp(exports, 'handler'));
    if (vm.typeof(fn) !== 'function') {
      return outcome('failed', { error: { type: 'InvalidFunction', message: 'The code must export its handler: `export default async function (event, context) { … }` (or `export function handler`).' } });
    }
    const args = [keep(jsonValue(vm, req.event)), keep(jsonValue(vm, req.context))];
    const value = keep(await settle(unwrap(enter(() => vm.callFunction(fn, vm.undefined, ...args)))));
    // The result, as JSON made inside the guest (its toJSON, its getters: guest code, guest time).
    const json = keep(vm.getProp(vm.global, 'JSON'));
    const stringify = keep(vm.getProp(json, 'stringify'));
    const text = enter(() => vm.callFunction(stringify, json, value));
    if (text.error) {
      const failed = guestError(text.error);
      text.error.dispose();
      return stopReason || failed.error?.type === 'MemoryLimitExceeded' ? failed : outcome('failed', { error: { type: 'InvalidResult', message: `The result cannot be sent as JSON: ${failed.error?.message}` } });
    }
    const resultText = vm.typeof(text.value) === 'string' ? vm.getString(text.value) : undefined;
    text.value.dispose();
    if (resultText !== undefined && Buffer.byteLength(resultText) > limits.maxResultBytes) {
      return outcome('failed', { error: { type: 'InvalidResult', message: `The result is larger than ${limits.maxResultBytes} bytes as JSON.` } });
    }
    return outcome('succeeded', { result: resultText === undefined ? null : JSON.parse(resultText) });
  };
  const result: RunOutcome = await invoke().catch((err: Error) =>
    err instanceof Stop ? err.outcome : outcome('failed', { error: { type: 'SandboxError', message: `The sandbox failed: ${err.message}` } }),
  );
  try {
    for (const d of pending) d.dispose();
    pending.clear();
    for (const h of handles) if (h.alive) h.dispose();
    vm.dispose();
    runtime.dispose();
  } catch {
    // QuickJS aborts when a runtime cannot be freed whole (a stack overflow can leave objects
    // behind): the WebAssembly instance is unusable from then on. The outcome stands; the
    // caller replaces the instance (the pool restarts the worker).
    result.broken = true;
  }
  return result;
}

/** A JSON-safe host value as a guest value (parsed inside the guest: no host object crosses). */
function jsonValue(vm: QuickJSContext, value: unknown): QuickJSHandle {
  const json = vm.getProp(vm.global, 'JSON');
  const parse = vm.getProp(json, 'parse');
  const text = vm.newString(JSON.stringify(value ?? null));
  try {
    return vm.unwrapResult(vm.callFunction(parse, json, text));
  } finally {
    text.dispose();
    parse.dispose();
    json.dispose();
  }
}
