// The sandbox workers of a process: `size` worker threads, each running up to `concurrency`
// invocations (their QuickJS instances are separate from the server's heap and event loop: an
// invocation's CPU time is spent off the main thread). Threads start on first use (the cold
// start: the WebAssembly module is compiled then), or all at once with warm().
//
// Sites share the threads fairly (issue 29 #3):
// - a thread runs one site's invocations at a time (it is the site's while it runs any), so a
//   site's function that spins its CPU or fills its memory slows only that site's invocations;
// - a site holds at most `siteThreads` threads at once (default: half of them), so a site that
//   floods the pool leaves threads to the others;
// - waiting invocations are queued per site and served round-robin across sites, never one
//   site's backlog ahead of another's newer request (how many a site may have waiting is the
//   runtime's admission: runtime.ts admitSync);
// - while other sites invoke theirs, a site's functions use at most `siteCpuShare` of one
//   thread's time (a debt of CPU milliseconds, repaid at that rate; past `burstMs` of debt the
//   site's next invocation waits until it is repaid). Memory and caches are shared by every core:
//   a function copying memory flat out slows the whole machine however low its priority, so a
//   site's heavy work is spread out while anyone else is served, and runs flat out when no one is;
// - a thread is replaced only when it stops answering: an invocation that overran its timeout by
//   the grace period (its interrupt handler could not stop it) or a thread that crashed. Memory
//   limits and broken QuickJS instances are handled inside the thread (worker.ts), without
//   touching the invocations beside them. The invocations still on a replaced thread are its
//   site's only, and end as failed.
import { Worker } from 'node:worker_threads';
import { failedOutcome as failed, type RunOutcome, type RunRequest } from './engine.ts';

/** Where an invocation's SDK requests go. */
export interface ApiTarget {
  /** The platform API's base URL as this process reaches it. */
  url: string;
  /** The Host header (a platform host). */
  host: string;
  /** `/sites/{schema}`: the site's API. */
  prefix: string;
  /** The invoking user's access token; null: anonymous. */
  token: string | null;
}

export interface ToWorker {
  id: number;
  req: RunRequest;
  api: ApiTarget | null;
}

interface Slot {
  worker: Worker;
  ready: Promise<void>;
  running: Map<number, { resolve: (o: RunOutcome) => void; timer: NodeJS.Timeout }>;
  /** Invocations given to it (running, or waiting for the thread to start). */
  load: number;
  /** The site whose invocations it runs; null while it runs none. */
  site: string | null;
  retired: boolean;
}

/** A site's use of the threads' time: CPU ms owed (repaid at `siteCpuShare` per ms), as of `at`. */
interface Usage {
  debt: number;
  at: number;
  /** When it last started an invocation (other sites see contention for a while after). */
  active: number;
}

/** How long after a site's last invocation it counts as being served (ms). */
const CONTENTION_MS = 2000;

interface Waiting {
  req: RunRequest;
  api: ApiTarget | null;
  resolve: (o: RunOutcome) => void;
}

export interface PoolOptions {
  size: number;
  concurrency: number;
  /** Threads one site may hold at once (default: half of `size`, at least one). */
  siteThreads?: number;
  /** The share of one thread's time a site's functions may use while other sites invoke theirs (default 0.25). */
  siteCpuShare?: number;
  /** CPU milliseconds a site may run ahead of its share before it waits (default 500). */
  burstMs?: number;
  /** How long past an invocation's timeout its thread is terminated (ms). */
  graceMs?: number;
}

export class SandboxPool {
  private readonly slots: Slot[] = [];
  /** Waiting invocations by site; the map's order is the round-robin order. */
  private readonly queues = new Map<string, Waiting[]>();
  private readonly usage = new Map<string, Usage>();
  /** How many sites are served or owe CPU time now (`usage`'s size), shared with the threads: their long-running guest code yields while it is more than one (engine.ts runFunction). */
  private readonly busy = new Int32Array(new SharedArrayBuffer(4));
  private wakeTimer: NodeJS.Timeout | undefined;
  private nextId = 1;
  private closed = false;
  private readonly options: Required<PoolOptions>;

  constructor(options: PoolOptions) {
    this.options = { graceMs: 5000, siteThreads: Math.max(1, Math.floor(options.size / 2)), siteCpuShare: 0.25, burstMs: 500, ...options };
  }

  /** Threads running (a retired one leaves `slots` at once). */
  get threads(): number {
    return this.slots.length;
  }

  /** Starts every thread now (a server does at start), so that no invocation pays for a thread's start. */
  async warm(): Promise<void> {
    while (this.threads < this.options.size && !this.closed) this.spawn();
    await Promise.all(this.slots.map((s) => s.ready));
  }

  /** Runs `req` for `site` when the site's share of the threads lets it. */
  run(req: RunRequest, api: ApiTarget | null, site: string): Promise<RunOutcome> {
    if (this.closed) return Promise.resolve(failed('SandboxError', 'The function runtime is shutting down.'));
    return new Promise((resolve) => {
      const queue = this.queues.get(site) ?? [];
      queue.push({ req, api, resolve });
      this.queues.set(site, queue);
      this.dispatch();
    });
  }

  /** Hands waiting invocations to threads, one site at a time in turn, while any fits. */
  private dispatch(): void {
    const now = performance.now();
    for (const [site, u] of this.usage) if (now - u.active > CONTENTION_MS && this.usageOf(site, now).debt === 0) this.usage.delete(site);
    Atomics.store(this.busy, 0, this.usage.size);
    let progress = true;
    while (progress && !this.closed) {
      progress = false;
      for (const [site, queue] of [...this.queues]) {
        if (this.overShare(site)) continue;
        const slot = this.slotFor(site);
        if (!slot) continue;
        const job = queue.shift()!;
        // The site goes to the back of the round: the next turn is another site's.
        this.queues.delete(site);
        if (queue.length) this.queues.set(site, queue);
        this.start(slot, site, job);
        progress = true;
      }
    }
  }

  /** The site's usage with its debt repaid up to now. */
  private usageOf(site: string, now: number): Usage {
    const u = this.usage.get(site) ?? { debt: 0, at: now, active: 0 };
    u.debt = Math.max(0, u.debt - (now - u.at) * this.options.siteCpuShare);
    u.at = now;
    this.usage.set(site, u);
    return u;
  }

  /** Whether `site` owes more than its burst while another site is being served (then a timer dispatches again once it is repaid). */
  private overShare(site: string): boolean {
    const now = performance.now();
    const u = this.usageOf(site, now);
    if (u.debt <= this.options.burstMs) return false;
    const contended = [...this.usage].some(([other, o]) => other !== site && now - o.active < CONTENTION_MS);
    if (!contended) return false;
    const repaidIn = (u.debt - this.options.burstMs) / this.options.siteCpuShare;
    if (!this.wakeTimer) this.wakeTimer = setTimeout(() => ((this.wakeTimer = undefined), this.dispatch()), Math.min(repaidIn, CONTENTION_MS) + 1).unref();
    return true;
  }

  /** A thread for one more invocation of `site`: one it holds with room, else a free one (started if need be) within its share. */
  private slotFor(site: string): Slot | undefined {
    const held = this.slots.filter((s) => s.site === site);
    const roomy = held.filter((s) => s.load < this.options.concurrency).sort((a, b) => a.load - b.load)[0];
    if (roomy && (roomy.load === 0 || held.length >= this.options.siteThreads)) return roomy;
    if (held.length < this.options.siteThreads) {
      const free = this.slots.find((s) => s.site === null);
      if (free) return free;
      if (this.slots.length < this.options.size) return this.spawn();
    }
    return roomy;
  }

  private start(slot: Slot, site: string, job: Waiting): void {
    slot.site = site;
    slot.load++;
    const now = performance.now();
    this.usageOf(site, now).active = now;
    Atomics.store(this.busy, 0, this.usage.size);
    const id = this.nextId++;
    const done = (outcome: RunOutcome) => {
      this.usageOf(site, performance.now()).debt += outcome.cpu_ms;
      job.resolve(outcome);
      slot.load--;
      if (slot.load === 0) slot.site = null;
      this.dispatch();
    };
    void slot.ready.then(() => {
      if (slot.retired) return done(failed('SandboxError', 'The sandbox did not start.'));
      const timer = setTimeout(() => {
        slot.running.delete(id);
        done({ status: 'timed_out', error: { type: 'TimeoutError', message: `The function did not finish within its timeout of ${Math.round(job.req.limits.timeoutMs / 1000)} s; its sandbox was stopped.` }, logs: [], cpu_ms: 0, duration_ms: job.req.limits.timeoutMs });
        this.retire(slot);
      }, job.req.limits.timeoutMs + this.options.graceMs);
      slot.running.set(id, { resolve: done, timer });
      slot.worker.postMessage({ id, req: job.req, api: job.api } satisfies ToWorker);
    });
  }

  private spawn(): Slot {
    const worker = new Worker(new URL('./worker.ts', import.meta.url), { workerData: { busy: this.busy } });
    worker.unref();
    let onReady!: () => void;
    const slot: Slot = { worker, ready: new Promise((r) => (onReady = r)), running: new Map(), load: 0, site: null, retired: false };
    worker.on('message', (msg: { ready?: true; id?: number; outcome?: RunOutcome }) => {
      if (msg.ready) return onReady();
      const job = slot.running.get(msg.id!);
      if (!job) return;
      clearTimeout(job.timer);
      slot.running.delete(msg.id!);
      job.resolve(msg.outcome!);
    });
    const fail = (message: string) => this.retire(slot, failed('SandboxError', message));
    worker.on('error', (err) => fail(`The sandbox failed: ${err.message}`));
    worker.on('exit', () => {
      onReady();
      fail('The sandbox stopped.');
    });
    this.slots.push(slot);
    return slot;
  }

  /** Ends a thread that stopped answering; what still runs on it (its site's only) ends with `outcome`. */
  private retire(slot: Slot, outcome: RunOutcome = failed('SandboxError', 'The sandbox was stopped with a function that overran its timeout; try again.')): void {
    if (!slot.retired) {
      slot.retired = true;
      const at = this.slots.indexOf(slot);
      if (at >= 0) this.slots.splice(at, 1);
      void slot.worker.terminate();
    }
    for (const [id, job] of slot.running) {
      clearTimeout(job.timer);
      slot.running.delete(id);
      job.resolve(outcome);
    }
    this.dispatch();
  }

  async close(): Promise<void> {
    this.closed = true;
    const slots = this.slots.splice(0);
    for (const slot of slots) slot.retired = true;
    await Promise.all(slots.map((s) => s.worker.terminate()));
    for (const slot of slots) for (const job of slot.running.values()) job.resolve(failed('SandboxError', 'The function runtime is shutting down.'));
    for (const queue of this.queues.values()) for (const job of queue) job.resolve(failed('SandboxError', 'The function runtime is shutting down.'));
    this.queues.clear();
  }
}
