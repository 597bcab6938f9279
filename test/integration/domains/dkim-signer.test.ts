import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { dkimVerify } from 'mailauth/lib/dkim/verify.js';
import { DkimKeyStore, dkimTxt, type DkimPublicKey } from '../../../src/domains/dkim-keys.ts';
import { DkimSigner, SigningError } from '../../../src/domains/signer.ts';

/** The signer on its own: keys in a temp dir, a fixed identity, mailauth as the verifier. */
describe('DKIM signer', () => {
  let dir: string;
  let keys: DkimKeyStore;
  let published: DkimPublicKey[];

  const signer = (parallel?: number) =>
    new DkimSigner(
      keys,
      async (domain) => (domain === 'example.com' ? { domainId: 'd1', name: 'example.com', keys: published } : null),
      { now: () => Date.parse('2026-11-21T12:00:00Z') },
      null,
      parallel,
    );

  const verify = async (message: string) => {
    const resolver = async (name: string, type: string) => {
      const key = published.find((k) => `${k.selector}._domainkey.example.com` === name);
      if (!key || type !== 'TXT') throw Object.assign(new Error(`no ${type} for ${name}`), { code: 'ENOTFOUND' });
      return [[dkimTxt(key)]];
    };
    const { results } = await dkimVerify(message, { resolver, curTime: new Date('2026-11-21T12:00:00Z') });
    return results.map((r) => `${(r as { algo?: string }).algo} ${r.status.result}`);
  };

  /** What a receiver gets: nodemailer's DATA stream sends every line end as CRLF. */
  const onTheWire = (message: string) => message.replace(/\r\n|\r|\n/g, '\r\n');

  const message = [
    'From: Shop <app@example.com>',
    'To: "A  Customer"  <a@example.org>,',
    '\tb@example.org',
    'Subject:   Your   receipt\t',
    'Date: Sat, 21 Nov 2026 12:00:00 +0000',
    'Message-ID: <1@example.com>',
    'X-Unsigned: not in h=',
    'Content-Type: text/plain; charset=utf-8',
    '',
    'Thanks  for your order. \t',
    '',
    '\tTotal: 3 €',
    '',
    '',
  ].join('\r\n');

  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'postilion-signer-'));
    keys = DkimKeyStore.inDirectory(dir);
    published = [await keys.generate('d1', 'sel', 'rsa', '')];
  });
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('makes an RSA-SHA256 relaxed/relaxed signature that mailauth verifies', async () => {
    const headers = await signer().sign('example.com', message);
    expect(headers).to.match(/^DKIM-Signature: v=1; a=rsa-sha256; c=relaxed\/relaxed; d=example\.com;\r\n s=sel; q=dns\/txt; t=1795262400;\r\n bh=/);
    expect(headers.endsWith('\r\n')).to.equal(true);
    for (const line of headers.split('\r\n')) expect(line.length).to.be.at.most(78);
    expect(await verify(headers + message)).to.deep.equal(['rsa-sha256 pass']);
  });

  it('signs the fields it knows, bottom-up, and From, To and Subject once more than they occur', async () => {
    const headers = await signer().sign('example.com', message);
    const h = /[ ;]h=([^;]+);/.exec(headers.replace(/\r\n /g, ''))![1];
    expect(h).to.equal('From:From:Subject:Subject:Date:Message-ID:To:To:Content-Type');
  });

  it('breaks when a second From or Subject is added after signing, but not when another field is', async () => {
    const headers = await signer().sign('example.com', message);
    expect(await verify(`${headers}From: Evil <evil@example.net>\r\n${message}`)).to.deep.equal(['rsa-sha256 fail']);
    expect(await verify(`${headers}Subject: Urgent\r\n${message}`)).to.deep.equal(['rsa-sha256 fail']);
    expect(await verify(`${headers}Received: from somewhere\r\n${message}`)).to.deep.equal(['rsa-sha256 pass']);
  });

  it('signs what the receiver will see when the message has bare LF or CR line ends', async () => {
    const bare = message.replace(/\r\n/g, '\n').replace('Thanks', 'Thanks\rmore');
    const headers = await signer().sign('example.com', bare);
    expect(await verify(onTheWire(headers + bare))).to.deep.equal(['rsa-sha256 pass']);
  });

  it('signs an empty body and a message that has no body at all', async () => {
    for (const m of ['From: a@example.com\r\nSubject: x\r\n\r\n', 'From: a@example.com\r\nSubject: x\r\n']) {
      const headers = await signer().sign('example.com', m);
      expect(await verify(onTheWire(headers + m + (m.endsWith('\r\n\r\n') ? '' : '\r\n')))).to.deep.equal(['rsa-sha256 pass']);
    }
  });

  it('adds an Ed25519-SHA256 signature alongside when the domain has such a key, and both verify', async () => {
    published.push(await keys.generate('d1', 'sele', 'ed25519', ''));
    const headers = await signer().sign('example.com', message);
    expect(headers.match(/^DKIM-Signature: /gm)).to.have.length(2);
    expect(headers).to.contain('a=ed25519-sha256;');
    expect(await verify(headers + message)).to.deep.equal(['rsa-sha256 pass', 'ed25519-sha256 pass']);
  });

  it('signs many messages at once with one signature in the pool at a time', async () => {
    const s = signer(1);
    const all = await Promise.all(Array.from({ length: 8 }, (_, i) => s.sign('example.com', message.replace('receipt', `receipt ${i}`))));
    for (const [i, headers] of all.entries()) {
      expect(await verify(headers + message.replace('receipt', `receipt ${i}`))).to.deep.equal(['rsa-sha256 pass']);
    }
  });

  it('refuses a message without a From field, and a domain it does not know', async () => {
    for (const [domain, m] of [
      ['example.com', 'Subject: x\r\n\r\nbody\r\n'],
      ['example.net', message],
    ] as const) {
      let error: unknown;
      try {
        await signer().sign(domain, m);
      } catch (err) {
        error = err;
      }
      expect(error, domain).to.be.instanceOf(SigningError);
    }
  });
});
