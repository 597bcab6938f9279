import { expect } from 'chai';
import { parseDestinationName, resolveDestination, type DestinationFacts } from '../../../src/queue/destination-name.ts';
import { AppError } from '../../../src/util/errors.ts';

function facts(over: Partial<DestinationFacts> = {}): DestinationFacts {
  return {
    transport: {},
    smarthost: null,
    known: () => false,
    mxSet: async (domain) =>
      domain === 'example.org' ? 'mx1.example.net,mx2.example.net' : { permanent: true, text: `${domain} has no MX and no address record` },
    ...over,
  };
}

async function refusal(p: Promise<unknown>): Promise<AppError> {
  try {
    await p;
  } catch (err) {
    if (err instanceof AppError) return err;
    throw err;
  }
  throw new Error('not refused');
}

describe('destination names (queue suspend)', () => {
  it('parses origins, MX sets (sorted, deduplicated) and single names; refuses anything else', () => {
    expect(parseDestinationName(' HTTPS://Hooks.Example.com:8443/a/b?c ')).to.deep.equal({ kind: 'origin', origin: 'https://hooks.example.com:8443' });
    expect(parseDestinationName('MX2.example.net, mx1.example.net,mx2.example.net')).to.deep.equal({ kind: 'set', name: 'mx1.example.net,mx2.example.net' });
    expect(parseDestinationName('Example.org.')).to.deep.equal({ kind: 'name', name: 'example.org' });
    expect(parseDestinationName('[::1]')).to.deep.equal({ kind: 'name', name: '::1' });
    for (const bad of ['', ' ', 'two words', 'ftp://x.example', 'mailto://x', 'a\u0007b', 'x'.repeat(3000), 'a,,b', 'exa_mple..org']) {
      expect(() => parseDestinationName(bad), bad).to.throw(AppError, 'is not a destination');
    }
  });

  it('a recipient domain stands for its transport host first, then the smarthost, then its MX set', async () => {
    const routed = facts({ transport: { 'relay.example': { host: 'Relay-Host.example' } }, smarthost: { host: '192.0.2.1' } });
    expect(await resolveDestination('relay.example', routed)).to.deep.equal({ destination: 'relay-host.example', via: 'transport' });
    expect(await resolveDestination('relay-host.example', routed)).to.deep.equal({ destination: 'relay-host.example', via: 'transport' });
    expect(await resolveDestination('example.org', routed)).to.deep.equal({ destination: '192.0.2.1', via: 'smarthost' });
    expect(await resolveDestination('192.0.2.1', routed)).to.deep.equal({ destination: '192.0.2.1', via: 'smarthost' });
    expect(await resolveDestination('example.org', facts())).to.deep.equal({ destination: 'mx1.example.net,mx2.example.net', via: 'mx' });
    expect(await resolveDestination('https://h.example/x', facts())).to.deep.equal({ destination: 'https://h.example', via: 'origin' });
  });

  it('a destination the engine knows stands for itself; an unknown MX set or unroutable domain is refused with what names could mean', async () => {
    const known = facts({ known: (n) => n === 'mx1.example.net,mx2.example.net' || n === 'mx9.example.net' });
    expect(await resolveDestination('mx2.example.net,mx1.example.net', known)).to.deep.equal({
      destination: 'mx1.example.net,mx2.example.net',
      via: 'destination',
    });
    expect(await resolveDestination('mx9.example.net', known)).to.deep.equal({ destination: 'mx9.example.net', via: 'destination' });
    const set = await refusal(resolveDestination('a.example,b.example', known));
    expect(set.status).to.equal(400);
    expect(set.message).to.match(/^"a\.example,b\.example" matches nothing: .*give a recipient domain/);
    const domain = await refusal(resolveDestination('nowhere.example', known));
    expect(domain.message).to.contain('nowhere.example has no MX and no address record');
    const single = await refusal(resolveDestination('localhost', known));
    expect(single.message).to.contain('localhost is not a domain name');
    const later = await refusal(resolveDestination('example.com', facts({ mxSet: async () => ({ permanent: false, text: 'DNS timed out' }) })));
    expect(later.status).to.equal(503);
    expect(later.message).to.contain('try again');
  });
});
