import { Resolver } from 'node:dns/promises';
import type { Socket } from 'node:net';
import dns2, { Packet } from 'dns2';

/**
 * A real DNS server on 127.0.0.1 (the `dns2` package) serving a zone the test edits while it
 * runs: TXT, CNAME, MX, A and TLSA records, NXDOMAIN for unknown names, SERVFAIL while `failing`.
 * With `ad` set it answers as a validating resolver does for a signed zone (the AD bit), except
 * for the names in `insecureNames`.
 * UDP and TCP listen on the same port, so Node's resolver, given `127.0.0.1:<port>`, can fall
 * back to TCP on a truncated answer.
 */

export interface MxValue {
  exchange: string;
  priority: number;
}

export interface ZoneValues {
  TXT: string[];
  CNAME: string[];
  MX: MxValue[];
  /** IPv4 addresses (MX hosts on loopback: 127.0.0.x). */
  A: string[];
  /** TLSA records (RFC 6698) at `_<port>._tcp.<host>`; dns2 has no encoder for them, so RDATA is written here. */
  TLSA: TlsaValue[];
}

export interface TlsaValue {
  usage: number;
  selector: number;
  matching: number;
  /** The certificate association data. */
  data: Buffer;
}

const TYPE_TLSA = 52;

export type RecordType = keyof ZoneValues;

/** A record as the API lists it in a domain's `dns_records`. */
export interface ApiDnsRecord {
  type: string;
  host: string;
  content: string;
}

// dns2's bundled types omit Packet.RCODE (its runtime has it); the values are RFC 1035 §4.1.1's.
const RCODE = { NOERROR: 0, SERVFAIL: 2, NXDOMAIN: 3 } as const;

const TYPE_NAMES: Record<number, RecordType> = {
  [Packet.TYPE.TXT]: 'TXT',
  [Packet.TYPE.CNAME]: 'CNAME',
  [Packet.TYPE.MX]: 'MX',
  [Packet.TYPE.A]: 'A',
  [TYPE_TLSA]: 'TLSA',
};

/** DNS names compare case-insensitively and without the root dot. */
function key(name: string): string {
  return name.trim().toLowerCase().replace(/\.$/, '');
}

/** The records served, by name and type. Changes show in the next answer. */
export class Zone {
  private readonly names = new Map<string, Partial<ZoneValues>>();

  /** Replaces the records of one type at `name`. */
  set<T extends RecordType>(name: string, type: T, values: ZoneValues[T]): void {
    const entry = this.names.get(key(name)) ?? {};
    entry[type] = values;
    this.names.set(key(name), entry);
  }

  /** Adds one record next to those already there. */
  add<T extends RecordType>(name: string, type: T, value: ZoneValues[T][number]): void {
    this.set(name, type, [...(this.get(name, type) ?? []), value] as ZoneValues[T]);
  }

  get<T extends RecordType>(name: string, type: T): ZoneValues[T] | undefined {
    return this.names.get(key(name))?.[type];
  }

  /** Removes the records of one type at `name`, or every record at `name` when no type is given. */
  delete(name: string, type?: RecordType): void {
    const entry = this.names.get(key(name));
    if (!entry) return;
    if (type === undefined) {
      this.names.delete(key(name));
      return;
    }
    delete entry[type];
    if (Object.keys(entry).length === 0) this.names.delete(key(name));
  }

  clear(): void {
    this.names.clear();
  }

  /** Whether anything at all is published at `name` (otherwise the answer is NXDOMAIN). */
  has(name: string): boolean {
    return this.names.has(key(name));
  }
}

export interface TestDnsServer {
  zone: Zone;
  port: number;
  /** `127.0.0.1:<port>`, for `dns.servers`. */
  address: string;
  /** While true every query is answered SERVFAIL: a resolver outage. */
  failing: boolean;
  /** Names (lower-case, no trailing dot) answered SERVFAIL while the rest answer: a partial outage. */
  failingNames: Set<string>;
  /** Every question asked, as `TYPE name`, in order (tests clear it to count). */
  queries: string[];
  /** While true answers carry the AD bit (DNSSEC validated), as from a validating resolver. */
  ad: boolean;
  /** Names (lower-case, no trailing dot) answered without the AD bit while `ad` is set: an unsigned zone. */
  insecureNames: Set<string>;
  close(): Promise<void>;
}

/** A TXT string is at most 255 bytes (RFC 1035 §3.3): long values go out as several strings. */
export function txtChunks(value: string): string[] {
  const bytes = Buffer.from(value, 'utf8');
  if (bytes.length === 0) return [''];
  const chunks: string[] = [];
  for (let i = 0; i < bytes.length; i += 255) chunks.push(bytes.subarray(i, i + 255).toString('utf8'));
  return chunks;
}

export async function startDnsServer(): Promise<TestDnsServer> {
  const zone = new Zone();
  const state = { failing: false, queries: [] as string[], ad: false };
  const failingNames = new Set<string>();
  const insecureNames = new Set<string>();

  const answer = (request: Packet): Packet => {
    const response = Packet.createResponseFromRequest(request);
    response.header.aa = 1;
    // dns2's bundled types omit the AD bit its runtime encodes (RFC 4035 §3.2.3).
    (response.header as unknown as { ad: number }).ad = state.ad && request.questions.every((q) => !insecureNames.has(key(q.name))) ? 1 : 0;
    // Only what dns2 can encode goes back: no EDNS OPT record in the answer.
    response.additionals = [];
    for (const question of request.questions) {
      const type = TYPE_NAMES[question.type];
      state.queries.push(`${type ?? question.type} ${key(question.name)}`);
      if (state.failing || failingNames.has(key(question.name))) {
        response.header.rcode = RCODE.SERVFAIL;
        continue;
      }
      if (!zone.has(question.name)) {
        response.header.rcode = RCODE.NXDOMAIN;
        continue;
      }
      // ttl 0: nothing may be cached, so each check sees the zone as it is now.
      const base = { name: question.name, ttl: 0 };
      if (type === 'TXT') {
        for (const text of zone.get(question.name, 'TXT') ?? []) {
          response.answers.push(Packet.createResourceFromQuestion(question, { ...base, data: txtChunks(text) }));
        }
      } else if (type === 'CNAME') {
        for (const target of zone.get(question.name, 'CNAME') ?? []) {
          response.answers.push(Packet.createResourceFromQuestion(question, { ...base, domain: target }));
        }
      } else if (type === 'A') {
        for (const address of zone.get(question.name, 'A') ?? []) {
          response.answers.push(Packet.createResourceFromQuestion(question, { ...base, address }));
        }
      } else if (type === 'MX') {
        for (const mx of zone.get(question.name, 'MX') ?? []) {
          response.answers.push(Packet.createResourceFromQuestion(question, { ...base, exchange: mx.exchange, priority: mx.priority }));
        }
      } else if (type === 'TLSA') {
        for (const t of zone.get(question.name, 'TLSA') ?? []) {
          const data = Buffer.concat([Buffer.from([t.usage, t.selector, t.matching]), t.data]);
          // dns2 writes the `data` Buffer of a type it has no encoder for as the RDATA (its types say string).
          response.answers.push(new Packet.Resource({ ...base, type: TYPE_TLSA, class: Packet.CLASS.IN, data: data as unknown as string }));
        }
      }
      // A known name without records of the asked type: NOERROR with no answers (NODATA).
    }
    return response;
  };

  const handle = (request: Packet, send: (response: Packet) => Promise<Buffer> | void): void => {
    // The TCP transport's send returns nothing; the UDP one may reject once the socket closed.
    void Promise.resolve(send(answer(request))).catch(() => undefined);
  };

  const { udp, tcp, port, connections } = await listenOnOnePort(handle);
  return {
    zone,
    port,
    address: `127.0.0.1:${port}`,
    failingNames,
    insecureNames,
    get ad() {
      return state.ad;
    },
    set ad(value: boolean) {
      state.ad = value;
    },
    get failing() {
      return state.failing;
    },
    set failing(value: boolean) {
      state.failing = value;
    },
    get queries() {
      return state.queries;
    },
    set queries(value: string[]) {
      state.queries = value;
    },
    close: async () => {
      await Promise.all([
        new Promise<void>((resolve) => udp.close(() => resolve())),
        new Promise<void>((resolve) => {
          tcp.close(() => resolve());
          // Node's resolver may keep its TCP connection open: close() must not wait for
          // dns2's 10 s idle timeout.
          for (const socket of connections) socket.destroy();
        }),
      ]);
    },
  };
}

/**
 * Binds UDP to a free loopback port, then TCP to the same number (retrying when that number is
 * taken for TCP). dns2's `createServer().listen()` cannot do this: given port 0, each transport
 * picks its own port, and TCP gets `{ port, address }` as `net.Server.listen` options, which
 * read `host`, not `address`, so it would listen on every interface.
 */
async function listenOnOnePort(handle: (request: Packet, send: (response: Packet) => Promise<Buffer> | void) => void) {
  for (let attempt = 0; ; attempt++) {
    const udp = dns2.createUDPServer((request, send) => handle(request, send));
    await udp.listen(0, '127.0.0.1');
    const port = udp.address().port;
    const tcp = dns2.createTCPServer((request, send) => handle(request, send));
    const connections = new Set<Socket>();
    tcp.on('connection', (socket: Socket) => {
      connections.add(socket);
      socket.on('close', () => connections.delete(socket));
    });
    try {
      await new Promise<void>((resolve, reject) => {
        tcp.once('error', reject);
        tcp.listen(port, '127.0.0.1', () => {
          tcp.off('error', reject);
          resolve();
        });
      });
      return { udp, tcp, port, connections };
    } catch (err) {
      await new Promise<void>((resolve) => udp.close(() => resolve()));
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 20) throw err;
    }
  }
}

/** Publishes every record the API asks for (its `dns_records`), as a user would. */
export function publishRecords(zone: Zone, records: ApiDnsRecord[]): void {
  for (const record of records) publishRecord(zone, record);
}

/** Publishes one API record; TXT records add to what is at the name (SPF and DKIM share none). */
export function publishRecord(zone: Zone, record: ApiDnsRecord): void {
  const host = key(record.host);
  switch (record.type) {
    case 'TXT':
      if (!(zone.get(host, 'TXT') ?? []).includes(record.content)) zone.add(host, 'TXT', record.content);
      return;
    case 'CNAME':
      zone.set(host, 'CNAME', [key(record.content)]);
      return;
    case 'MX':
      // The label says "priority 10"; the API gives the exchange as the content.
      zone.set(host, 'MX', [{ exchange: key(record.content), priority: 10 }]);
      return;
    default:
      throw new Error(`publishRecord: unsupported record type ${record.type}`);
  }
}

/** Parses the record table `postilion domains add|check` prints into publishable records. */
export function printedRecords(stdout: string): Array<ApiDnsRecord & { ok: boolean }> {
  const out = [];
  const lines = stdout.split('\n');
  for (let i = 0; i < lines.length; i++) {
    const m = /^\s+\[(ok|missing)\s*\] (?:required|optional)\s+(TXT|CNAME|MX)\s+(\S+)$/.exec(lines[i]!);
    if (m) out.push({ ok: m[1] === 'ok', type: m[2]!, host: m[3]!, content: lines[i + 1]!.trim() });
  }
  return out;
}

/**
 * A resolver for mailauth's `dkimVerify` that asks `server` over the wire: the signature is
 * checked against the TXT records the test DNS server really serves.
 */
export function dkimResolver(server: TestDnsServer): (name: string, rrtype: string) => Promise<string[][]> {
  const resolver = new Resolver({ timeout: 1000, tries: 1 });
  resolver.setServers([server.address]);
  // mailauth reads TXT answers as arrays of chunks, as resolveTxt gives them.
  return (name, rrtype) => resolver.resolve(name, rrtype) as Promise<string[][]>;
}
