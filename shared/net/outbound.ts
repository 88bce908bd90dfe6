// The one way out to a URL a tenant chose (docs/outbound.md): social login's discovery, JWKS,
// token, userinfo and API calls today, webhooks later. Every request, and every redirect hop,
// goes through `destination()`: the host name is resolved once (all its addresses), every
// address must be public unicast (loopback, private, link-local, unique-local, CGNAT, metadata,
// reserved, multicast… and their IPv4-mapped forms are refused) unless the operator allow-listed
// the host or the address range (OUTBOUND_ALLOW_HOSTS / OUTBOUND_ALLOW_CIDRS), the port must be
// an allowed one, and the connection then goes to the checked address itself (no second
// resolution: DNS rebinding cannot swap it). One deadline covers resolution, connection,
// redirects and the body; the body is capped; a site has a bounded number of requests in flight.
import dns from 'node:dns/promises';
import http from 'node:http';
import https from 'node:https';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

export interface OutboundRules {
  /** Host names reached whatever they resolve to, on any port (an identity provider inside the network). */
  allowHosts: readonly string[];
  /** Address ranges reached although private (`10.0.0.0/8`, `127.0.0.1/32`), on any port. */
  allowCidrs: readonly string[];
  /** Ports a public destination may use (default 80 and 443). */
  allowPorts: readonly number[];
  /** Resolution, connection, redirects and body together, ms. */
  timeoutMs: number;
  /** The largest response body read, bytes. */
  maxResponseBytes: number;
  /** Requests of one site in flight at once. */
  maxPerSite: number;
}

export type OutboundFailure = 'refused' | 'timeout' | 'too_large' | 'busy' | 'unreachable';

/** A request the guard did not make or did not finish; the message names the host, never an address it resolved to. */
export class OutboundError extends Error {
  override name = 'OutboundError';
  readonly reason: OutboundFailure;
  constructor(reason: OutboundFailure, message: string) {
    super(message);
    this.reason = reason;
  }
}

export type Resolve = (host: string) => Promise<{ address: string; family: number }[]>;
const systemResolve: Resolve = (host) => dns.lookup(host, { all: true, verbatim: true });

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];
const MAX_REDIRECTS = 5;
const NULL_BODY = new Set([101, 204, 205, 304]);

/** An address as the guard classifies it: `unicast` (public) or the range that refuses it. IPv4-mapped IPv6 counts as its IPv4. */
export function addressClass(address: string): string {
  let ip = ipaddr.parse(address);
  if (ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress()) ip = (ip as ipaddr.IPv6).toIPv4Address();
  const range = ip.range();
  // The deprecated IPv4-compatible form (::a.b.c.d) is no public destination either.
  if (range === 'unicast' && ip.kind() === 'ipv6' && ip.toByteArray().slice(0, 12).every((b) => b === 0)) return 'ipv4Compatible';
  return range;
}

/** `10.0.0.0/8`, or a bare address (a /32 or /128). Throws on anything else (config.ts checks with it). */
export function parseCidr(text: string): Range {
  return text.includes('/') ? ipaddr.parseCIDR(text) : [ipaddr.parse(text), ipaddr.parse(text).kind() === 'ipv4' ? 32 : 128];
}

function inRanges(address: string, ranges: readonly Range[]): boolean {
  const ip = ipaddr.parse(address);
  const forms = ip.kind() === 'ipv6' && (ip as ipaddr.IPv6).isIPv4MappedAddress() ? [ip, (ip as ipaddr.IPv6).toIPv4Address()] : [ip];
  return forms.some((f) => ranges.some(([net, bits]) => net.kind() === f.kind() && f.match(net, bits)));
}

function deadlineOf<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const abort = () => reject(signal.reason);
    if (signal.aborted) return abort();
    signal.addEventListener('abort', abort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', abort));
  });
}

export class OutboundGuard {
  private readonly rules: OutboundRules;
  private readonly resolve: Resolve;
  private readonly allowHosts: Set<string>;
  private readonly allowRanges: Range[];
  private readonly inFlight = new Map<string, number>();

  /** `resolve`: the name resolution (dns.lookup with all addresses; tests inject another). */
  constructor(rules: OutboundRules, resolve: Resolve = systemResolve) {
    this.rules = rules;
    this.resolve = resolve;
    this.allowHosts = new Set(rules.allowHosts.map((h) => h.toLowerCase()));
    this.allowRanges = rules.allowCidrs.map(parseCidr);
  }

  /**
   * Where a request to `url` may connect: the checked address and its family. Throws
   * OutboundError('refused') for a scheme, port or address the rules refuse.
   */
  async destination(url: URL, signal: AbortSignal = AbortSignal.timeout(this.rules.timeoutMs)): Promise<{ address: string; family: number }> {
    if (url.protocol !== 'http:' && url.protocol !== 'https:') throw new OutboundError('refused', `Only http and https URLs are fetched (got ${url.protocol}).`);
    if (url.username || url.password) throw new OutboundError('refused', 'URLs with credentials are not fetched.');
    const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
    const port = url.port ? Number(url.port) : url.protocol === 'https:' ? 443 : 80;
    const literal = isIP(host);
    let addresses: { address: string; family: number }[];
    try {
      addresses = literal ? [{ address: host, family: literal }] : await deadlineOf(this.resolve(host), signal);
    } catch (err) {
      if (signal.aborted) throw new OutboundError('timeout', `Resolving ${host} took too long.`);
      throw new OutboundError('unreachable', `${host} does not resolve (${(err as NodeJS.ErrnoException).code ?? 'lookup failed'}).`);
    }
    if (!addresses.length) throw new OutboundError('unreachable', `${host} does not resolve.`);
    const hostListed = this.allowHosts.has(host);
    const what = literal ? host : `${host} resolves to an address that`;
    for (const { address } of addresses) {
      const kind = addressClass(address);
      if (kind !== 'unicast' && !hostListed && !inRanges(address, this.allowRanges)) {
        throw new OutboundError('refused', `${what} is not a public destination (${kind}): the platform does not connect there. An operator may allow it (OUTBOUND_ALLOW_HOSTS, OUTBOUND_ALLOW_CIDRS).`);
      }
    }
    const listed = hostListed || addresses.every(({ address }) => inRanges(address, this.allowRanges));
    if (!listed && !this.rules.allowPorts.includes(port)) {
      throw new OutboundError('refused', `Port ${port} is not allowed for outbound requests (allowed: ${this.rules.allowPorts.join(', ')}).`);
    }
    return addresses[0]!;
  }

  /** A fetch for one site's requests: at most `maxPerSite` in flight (more: OutboundError('busy')). */
  fetchFor(site: string): typeof fetch {
    return async (input, init) => {
      const n = this.inFlight.get(site) ?? 0;
      if (n >= this.rules.maxPerSite) throw new OutboundError('busy', 'Too many outbound requests of this site are in flight: try again shortly.');
      this.inFlight.set(site, n + 1);
      try {
        return await this.fetch(input, init);
      } finally {
        const left = (this.inFlight.get(site) ?? 1) - 1;
        if (left) this.inFlight.set(site, left);
        else this.inFlight.delete(site);
      }
    };
  }

  /** fetch() through the guard: every hop checked, one deadline, the body capped (buffered). */
  readonly fetch: typeof fetch = async (input, init) => {
    const request = new Request(input, init);
    const signal = AbortSignal.any([request.signal, AbortSignal.timeout(this.rules.timeoutMs)]);
    let url = new URL(request.url);
    let method = request.method;
    let body: Buffer | undefined = request.body ? Buffer.from(await request.arrayBuffer()) : undefined;
    const headers = Object.fromEntries(request.headers);
    for (let hop = 0; ; hop++) {
      const response = await this.once(url, method, headers, body, signal);
      const location = response.headers.get('location');
      if (request.redirect === 'manual' || response.status < 300 || response.status > 399 || !location) return response;
      if (request.redirect === 'error') throw new OutboundError('refused', `${url.host} answered with a redirect.`);
      if (hop >= MAX_REDIRECTS) throw new OutboundError('refused', `More than ${MAX_REDIRECTS} redirects from ${url.host}.`);
      const next = new URL(location, url);
      // Credentials stay with their origin (as fetch does): a redirect elsewhere does not carry them.
      if (next.origin !== url.origin) for (const name of ['authorization', 'cookie', 'proxy-authorization']) delete headers[name];
      url = next;
      if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === 'POST')) {
        method = 'GET';
        body = undefined;
        delete headers['content-type'];
      }
    }
  };

  private async once(url: URL, method: string, headers: Record<string, string>, body: Buffer | undefined, signal: AbortSignal): Promise<Response> {
    const { address, family } = await this.destination(url, signal);
    const lookup: LookupFunction = (_host, options, callback) => {
      if (options.all) (callback as unknown as (e: null, a: { address: string; family: number }[]) => void)(null, [{ address, family }]);
      else callback(null, address, family);
    };
    const host = url.hostname.replace(/^\[|\]$/g, '');
    const options: https.RequestOptions = {
      host,
      port: url.port || undefined,
      path: `${url.pathname}${url.search}`,
      method,
      // Identity: no compressed body to inflate past the cap.
      headers: { ...headers, 'accept-encoding': 'identity', ...(body ? { 'content-length': String(body.length) } : {}) },
      lookup,
      agent: false,
      signal,
      ...(isIP(host) ? {} : { servername: host }),
    };
    return new Promise<Response>((resolve, reject) => {
      const fail = (err: Error) => {
        if (err instanceof OutboundError) return reject(err);
        if (signal.aborted) return reject(new OutboundError('timeout', `${url.host} did not answer in time.`));
        reject(new OutboundError('unreachable', `${url.host} could not be reached (${(err as NodeJS.ErrnoException).code ?? err.message}).`));
      };
      const req = (url.protocol === 'https:' ? https : http).request(options, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (chunk: Buffer) => {
          size += chunk.length;
          if (size > this.rules.maxResponseBytes) {
            fail(new OutboundError('too_large', `The answer of ${url.host} is larger than ${this.rules.maxResponseBytes} bytes.`));
            req.destroy();
            return;
          }
          chunks.push(chunk);
        });
        res.on('error', fail);
        res.on('end', () => {
          if (size > this.rules.maxResponseBytes) return;
          const responseHeaders = new Headers();
          for (let i = 0; i < res.rawHeaders.length; i += 2) responseHeaders.append(res.rawHeaders[i]!, res.rawHeaders[i + 1]!);
          const status = res.statusCode ?? 0;
          if (status < 200 || status > 599) return fail(new OutboundError('unreachable', `${url.host} answered with status ${status}.`));
          resolve(new Response(NULL_BODY.has(status) ? null : Buffer.concat(chunks), { status, statusText: res.statusMessage, headers: responseHeaders }));
        });
      });
      req.on('error', fail);
      req.end(body);
    });
  }
}
