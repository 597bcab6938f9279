import { randomInt } from 'node:crypto';
import { createSocket } from 'node:dgram';
import { Resolver } from 'node:dns/promises';
import { isIP, Socket } from 'node:net';
import { DnsUnavailableError, resolverName } from './resolver.ts';

/**
 * A small DNS client on the wire (RFC 1035), for what Node's resolver cannot give: TLSA records
 * and the AD bit of a validating resolver (RFC 4035 §3.2.3, RFC 6840 §5.7). UDP first, TCP when
 * the answer is truncated; every answer bounded in size and time.
 */

export const RR_TYPE = { A: 1, MX: 15, TXT: 16, AAAA: 28, TLSA: 52 } as const;
export type RrTypeName = keyof typeof RR_TYPE;

export interface WireRecord {
  name: string;
  type: number;
  ttl: number;
  data: Buffer;
}

export interface WireAnswer {
  /** RFC 1035 RCODE: 0 NOERROR, 3 NXDOMAIN. */
  rcode: number;
  /** Authenticated Data: the resolver validated the answer with DNSSEC. */
  ad: boolean;
  /** The answer section's records of the asked type (CNAMEs followed by the resolver are left out). */
  records: WireRecord[];
}

export interface WireClientOptions {
  /** `dns.servers` ("127.0.0.1", "[::1]:5353", "10.0.0.2:53"); empty: the system's. */
  servers: string[];
  timeoutMs: number;
  tries: number;
}

/** A TCP answer is at most 64 KiB by its length prefix; a UDP one at most our EDNS buffer. */
const UDP_PAYLOAD = 1232;
const RCODE_NXDOMAIN = 3;

export class DnsWireClient {
  private readonly servers: Array<{ host: string; port: number }>;
  private readonly asked: string;

  constructor(private readonly options: WireClientOptions) {
    const listed = options.servers.length > 0 ? options.servers : new Resolver().getServers();
    this.servers = listed.map(parseServer);
    this.asked = resolverName(options.servers);
  }

  /**
   * Asks `type` at `name`. NXDOMAIN and NODATA are answers (no records); SERVFAIL, REFUSED, a
   * timeout or a malformed answer throw DnsUnavailableError.
   */
  async query(name: string, type: RrTypeName): Promise<WireAnswer> {
    const question = `${type} ${name}`;
    let lastError = 'ETIMEOUT';
    for (let attempt = 0; attempt < this.options.tries; attempt++) {
      for (const server of this.servers) {
        const id = randomInt(0, 0x10000);
        const packet = encodeQuery(id, name, RR_TYPE[type]);
        try {
          let reply = await udpExchange(server, packet, this.options.timeoutMs);
          if (reply.readUInt16BE(2) & 0x0200) reply = await tcpExchange(server, packet, this.options.timeoutMs);
          const answer = decodeAnswer(reply, id, RR_TYPE[type]);
          if (answer.rcode === 0 || answer.rcode === RCODE_NXDOMAIN) return { ...answer, records: answer.rcode === 0 ? answer.records : [] };
          lastError = RCODE_NAMES[answer.rcode] ?? `RCODE${answer.rcode}`;
        } catch (err) {
          lastError = (err as NodeJS.ErrnoException).code ?? (err as Error).message;
        }
      }
    }
    throw new DnsUnavailableError(lastError, question, this.asked);
  }
}

const RCODE_NAMES: Record<number, string> = { 1: 'EFORMERR', 2: 'ESERVFAIL', 4: 'ENOTIMP', 5: 'EREFUSED' };

function parseServer(text: string): { host: string; port: number } {
  const bracketed = /^\[([^\]]+)\](?::(\d+))?$/.exec(text);
  if (bracketed) return { host: bracketed[1]!, port: Number(bracketed[2] ?? 53) };
  if (isIP(text) === 6) return { host: text, port: 53 };
  const [host, port] = text.split(':');
  return { host: host!, port: Number(port ?? 53) };
}

/** A query with RD and AD set (RFC 6840 §5.7: AD in a query asks for the AD bit in the answer) and an EDNS0 OPT record. */
export function encodeQuery(id: number, name: string, type: number): Buffer {
  const header = Buffer.alloc(12);
  header.writeUInt16BE(id, 0);
  header.writeUInt16BE(0x0120, 2); // RD, AD
  header.writeUInt16BE(1, 4); // QDCOUNT
  header.writeUInt16BE(1, 10); // ARCOUNT: the OPT record
  const labels = name.replace(/\.$/, '').split('.').filter(Boolean);
  const parts: Buffer[] = [header];
  for (const label of labels) {
    const bytes = Buffer.from(label, 'ascii');
    if (bytes.length > 63) throw new DnsUnavailableError('EBADNAME', `${name}`);
    parts.push(Buffer.from([bytes.length]), bytes);
  }
  const tail = Buffer.alloc(5 + 11);
  tail.writeUInt8(0, 0);
  tail.writeUInt16BE(type, 1);
  tail.writeUInt16BE(1, 3); // IN
  // OPT: root name, type 41, class = UDP payload size, TTL 0 (no DO), no options.
  tail.writeUInt8(0, 5);
  tail.writeUInt16BE(41, 6);
  tail.writeUInt16BE(UDP_PAYLOAD, 8);
  parts.push(tail);
  return Buffer.concat(parts);
}

/** The header, and the answer records of `type`; throws on anything malformed. */
export function decodeAnswer(reply: Buffer, id: number, type: number): WireAnswer {
  if (reply.length < 12 || reply.readUInt16BE(0) !== id) throw Object.assign(new Error('malformed answer'), { code: 'EBADRESP' });
  const flags = reply.readUInt16BE(2);
  const rcode = flags & 0x000f;
  const ad = (flags & 0x0020) !== 0;
  const qd = reply.readUInt16BE(4);
  const an = reply.readUInt16BE(6);
  let at = 12;
  for (let i = 0; i < qd; i++) at = skipName(reply, at) + 4;
  const records: WireRecord[] = [];
  for (let i = 0; i < an; i++) {
    const [name, end] = readName(reply, at);
    if (end + 10 > reply.length) throw Object.assign(new Error('truncated record'), { code: 'EBADRESP' });
    const rtype = reply.readUInt16BE(end);
    const ttl = reply.readUInt32BE(end + 4);
    const length = reply.readUInt16BE(end + 8);
    const start = end + 10;
    if (start + length > reply.length) throw Object.assign(new Error('truncated record'), { code: 'EBADRESP' });
    if (rtype === type) records.push({ name, type: rtype, ttl, data: reply.subarray(start, start + length) });
    at = start + length;
  }
  return { rcode, ad, records };
}

function skipName(buf: Buffer, at: number): number {
  return readName(buf, at)[1];
}

/** A (possibly compressed) name and the offset after it where it was read; at most 128 jumps. */
function readName(buf: Buffer, start: number): [string, number] {
  const labels: string[] = [];
  let at = start;
  let end = -1;
  for (let jumps = 0; jumps < 128; jumps++) {
    if (at >= buf.length) break;
    const length = buf[at]!;
    if ((length & 0xc0) === 0xc0) {
      if (at + 1 >= buf.length) break;
      if (end < 0) end = at + 2;
      at = ((length & 0x3f) << 8) | buf[at + 1]!;
      continue;
    }
    if (length === 0) return [labels.join('.').toLowerCase(), end < 0 ? at + 1 : end];
    labels.push(buf.toString('ascii', at + 1, at + 1 + length));
    at += 1 + length;
  }
  throw Object.assign(new Error('malformed name'), { code: 'EBADRESP' });
}

function udpExchange(server: { host: string; port: number }, packet: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = createSocket(isIP(server.host) === 6 ? 'udp6' : 'udp4');
    const timer = setTimeout(() => finish(Object.assign(new Error('DNS query timed out'), { code: 'ETIMEOUT' })), timeoutMs);
    const id = packet.readUInt16BE(0);
    let done = false;
    const finish = (err: Error | null, reply?: Buffer) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.close();
      if (err) reject(err);
      else resolve(reply!);
    };
    socket.on('error', (err) => finish(err));
    socket.on('message', (reply, from) => {
      // A datagram from elsewhere, or for another query, is not the answer (RFC 5452 §9.1).
      if (from.port !== server.port || reply.length < 2 || reply.readUInt16BE(0) !== id) return;
      finish(null, reply);
    });
    socket.send(packet, server.port, server.host);
  });
}

function tcpExchange(server: { host: string; port: number }, packet: Buffer, timeoutMs: number): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    const chunks: Buffer[] = [];
    let received = 0;
    let done = false;
    const finish = (err: Error | null, reply?: Buffer) => {
      if (done) return;
      done = true;
      socket.destroy();
      if (err) reject(err);
      else resolve(reply!);
    };
    socket.setTimeout(timeoutMs, () => finish(Object.assign(new Error('DNS query timed out'), { code: 'ETIMEOUT' })));
    socket.on('error', (err) => finish(err));
    socket.on('data', (chunk: Buffer) => {
      chunks.push(chunk);
      received += chunk.length;
      if (received < 2) return;
      const all = Buffer.concat(chunks);
      const length = all.readUInt16BE(0);
      if (all.length >= 2 + length) finish(null, all.subarray(2, 2 + length));
    });
    socket.on('end', () => finish(Object.assign(new Error('DNS connection closed'), { code: 'ECONNRESET' })));
    socket.connect(server.port, server.host, () => {
      const prefix = Buffer.alloc(2);
      prefix.writeUInt16BE(packet.length, 0);
      socket.write(Buffer.concat([prefix, packet]));
    });
  });
}
