import { expect } from 'chai';
import { transport } from '../../../../src/api/middleware/request-context.ts';
import type { ApiContext } from '../../../../src/api/context.ts';
import { parseCidr } from '../../../../src/util/cidr.ts';
import { AppError } from '../../../../src/util/errors.ts';

/** A minimal context: a socket peer, optional TLS, request headers. */
function context(remoteAddress: string, headers: Record<string, string> = {}, encrypted = false): ApiContext {
  const lower = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return {
    req: { socket: { remoteAddress, encrypted } },
    get: (name: string) => lower[name.toLowerCase()] ?? '',
    state: {},
  } as unknown as ApiContext;
}

async function run(ctx: ApiContext, trusted: string[] = []): Promise<{ status: number | 'passed'; client?: string }> {
  const mw = transport(() => ({ trustedProxies: trusted.map(parseCidr) }));
  try {
    await mw(ctx, async () => {});
    return { status: 'passed', client: ctx.state.clientIp.toString() };
  } catch (err) {
    if (err instanceof AppError) return { status: err.status };
    throw err;
  }
}

describe('transport middleware', () => {
  it('refuses plain HTTP from a non-loopback peer with 403', async () => {
    expect(await run(context('203.0.113.9'))).to.deep.equal({ status: 403 });
  });

  it('accepts a non-loopback peer over TLS', async () => {
    expect(await run(context('203.0.113.9', {}, true))).to.deep.equal({ status: 'passed', client: '203.0.113.9' });
  });

  it('accepts plain HTTP from IPv4 and IPv6 loopback', async () => {
    expect((await run(context('127.0.0.1'))).status).to.equal('passed');
    expect((await run(context('::1'))).status).to.equal('passed');
  });

  it('reads an IPv4-mapped IPv6 peer as its IPv4 address', async () => {
    expect(await run(context('::ffff:127.0.0.1'))).to.deep.equal({ status: 'passed', client: '127.0.0.1' });
  });

  it('ignores forwarding headers from an untrusted peer', async () => {
    const res = await run(context('203.0.113.9', { 'x-forwarded-for': '127.0.0.1', 'x-forwarded-proto': 'https' }));
    expect(res.status).to.equal(403);
  });

  it('reads hops with ports from a trusted proxy', async () => {
    const headers = (xff: string) => ({ 'x-forwarded-for': xff, 'x-forwarded-proto': 'https' });
    expect((await run(context('10.0.0.1', headers('203.0.113.9:4711')), ['10.0.0.0/8'])).client).to.equal('203.0.113.9');
    expect((await run(context('10.0.0.1', headers('[2001:db8::1]:443')), ['10.0.0.0/8'])).client).to.equal('2001:db8::1');
  });

  it('fails closed with 400 on an unreadable hop instead of taking the proxy as the client', async () => {
    for (const xff of ['unknown', '203.0.113.9, garbage', '10']) {
      expect(await run(context('127.0.0.1', { 'x-forwarded-for': xff }), ['127.0.0.1']), xff).to.deep.equal({ status: 400 });
    }
  });

  it('believes only the right-most X-Forwarded-Proto, the one the proxy set', async () => {
    const headers = (proto: string) => ({ 'x-forwarded-for': '203.0.113.9', 'x-forwarded-proto': proto });
    expect((await run(context('127.0.0.1', headers('https, http')), ['127.0.0.1'])).status).to.equal(403);
    expect((await run(context('127.0.0.1', headers('http, https')), ['127.0.0.1'])).status).to.equal('passed');
  });
});
