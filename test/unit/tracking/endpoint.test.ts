import { expect } from 'chai';
import type { Socket } from 'node:net';
import { trackingEndpoint } from '../../../src/tracking/endpoint.ts';
import type { LeanAnswer, LeanRequest } from '../../../src/tracking/lean-http.ts';
import type { ThreadHit } from '../../../src/tracking/thread-protocol.ts';
import { TrackingTokens } from '../../../src/tracking/tokens.ts';

const ID = '01a1fdfb-3448-70e0-b061-88c51b75a150';

describe("the tracking endpoint's answers", () => {
  const tokens = new TrackingTokens(Buffer.alloc(32, 7));
  let link: string;
  const hits: ThreadHit[] = [];
  const endpoint = trackingEndpoint({
    tokens,
    domainOfHost: (host) => (host === 'track.example.com' ? 'd1' : null),
    facts: (id) => (id === ID ? { domainId: 'd1', open: true, click: true } : null),
    link: () => link,
    hit: (h) => {
      hits.push(h);
    },
    trustedProxies: () => [],
  });
  const request = (target: string, method = 'GET'): LeanRequest => ({
    method,
    target,
    host: 'track.example.com',
    userAgent: 'UA',
    forwardedFor: undefined,
    socket: { remoteAddress: '127.0.0.1' } as Socket,
  });
  const answer = async (target: string, method = 'GET') => await endpoint(request(target, method));
  const location = (a: LeanAnswer) => /^Location: (.*)$/m.exec(a.headers)?.[1];

  it('redirects to the stored link, answering at once from what is known', () => {
    link = 'https://shop.example.net/orders/7?from=mail';
    const a = endpoint(request(`/c/${tokens.click(ID, 0)}`)) as LeanAnswer;
    expect(a).to.not.be.instanceOf(Promise);
    expect(a.status).to.equal(302);
    expect(location(a)).to.equal('https://shop.example.net/orders/7?from=mail');
    expect(a.headers).to.include('Referrer-Policy: no-referrer\r\n').and.include('Cache-Control: no-store');
    expect(hits.at(-1)).to.deep.include({ id: ID, kind: 'click', ip: '127.0.0.1', userAgent: 'UA', url: link });
  });

  it('sends a link with spaces or other than ASCII percent-encoded, and one with CR or LF without them', async () => {
    link = 'https://shop.example.net/ä?q=a b';
    expect(location(await answer(`/c/${tokens.click(ID, 0)}`))).to.equal('https://shop.example.net/%C3%A4?q=a%20b');
    link = 'https://shop.example.net/x\r\nSet-Cookie: a=b';
    const a = await answer(`/c/${tokens.click(ID, 0)}`);
    expect(a.headers.split('\r\n').filter((l) => /^set-cookie/i.test(l))).to.deep.equal([]);
    expect(location(a)).to.equal('https://shop.example.net/xSet-Cookie:%20a=b');
    link = 'not a URL \u0001';
    expect((await answer(`/c/${tokens.click(ID, 0)}`)).status).to.equal(404);
  });

  it('answers the pixel, 405 with Allow to other methods, and 404 to anything else', async () => {
    const pixel = await answer(`/o/${tokens.open(ID)}`);
    expect(pixel.status).to.equal(200);
    expect(pixel.headers).to.include('Content-Type: image/gif\r\n').and.include(`Content-Length: ${pixel.body!.length}\r\n`);
    const post = await answer(`/o/${tokens.open(ID)}`, 'POST');
    expect(post.status).to.equal(405);
    expect(post.headers).to.include('Allow: GET, HEAD\r\n');
    expect((await answer(`/c/${tokens.open(ID)}`)).status).to.equal(404);
    expect((await answer('/x')).status).to.equal(404);
  });
});
