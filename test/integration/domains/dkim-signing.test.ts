import { createPublicKey, generateKeyPairSync } from 'node:crypto';
import { Readable } from 'node:stream';
import { expect } from 'chai';
import { SigningError } from '../../../src/domains/signer.ts';
import { activeDkimOf, startDomainBed, testMessage, verifyDkim, type ApiDomain, type DomainBed, activeSelector } from '../../helpers/domains.ts';

describe('DKIM signing', () => {
  let bed: DomainBed;
  afterEach(async () => {
    await bed.stop();
  });

  const sign = (message: string | Readable) => bed.server.daemon.core.signer.sign('example.com', message);

  describe('with RSA (the default)', () => {
    let domain: ApiDomain;
    beforeEach(async () => {
      bed = await startDomainBed();
      domain = await bed.create('example.com');
      bed.publish(domain);
    });

    it('signs a message that mailauth verifies against the TXT record the DNS server publishes', async () => {
      const message = testMessage();
      const headers = await sign(message);
      expect(headers).to.match(/^DKIM-Signature: /);
      expect(headers).to.match(/\r\n$/);
      expect(await verifyDkim(bed, headers + message)).to.deep.equal([{ selector: activeSelector(domain), algorithm: 'rsa-sha256', result: 'pass' }]);
    });

    it('signs a message given as a stream', async () => {
      const message = testMessage('streamed');
      const headers = await sign(Readable.from([Buffer.from(message.slice(0, 40)), Buffer.from(message.slice(40))]));
      expect((await verifyDkim(bed, headers + message))[0]!.result).to.equal('pass');
    });

    it('does not verify while the DKIM record is unpublished, or publishes another key', async () => {
      const message = testMessage();
      const signed = (await sign(message)) + message;
      const host = activeDkimOf(domain).host;
      bed.dns.zone.delete(host);
      expect((await verifyDkim(bed, signed))[0]!.result).to.not.equal('pass');
      const other = (
        createPublicKey(generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey).export({ type: 'spki', format: 'der' }) as Buffer
      ).toString('base64');
      bed.dns.zone.set(host, 'TXT', [`v=DKIM1; k=rsa; p=${other}`]);
      expect((await verifyDkim(bed, signed))[0]!.result).to.equal('fail');
    });

    it('does not verify a message changed after signing', async () => {
      const message = testMessage();
      const headers = await sign(message);
      expect((await verifyDkim(bed, headers + message.replace('signed.', 'forged.')))[0]!.result).to.not.equal('pass');
    });

    it('signs with a selector changed before verification, under its new name', async () => {
      const res = await bed.api('PUT', `${bed.base}/example.com`, { body: { dkim_selector: 'renamed' } });
      expect(res.status).to.equal(200);
      bed.publish(res.body);
      const message = testMessage();
      expect(await verifyDkim(bed, (await sign(message)) + message)).to.deep.equal([{ selector: 'renamed', algorithm: 'rsa-sha256', result: 'pass' }]);
    });

    it('refuses to sign for a domain it does not know', async () => {
      let error: unknown;
      try {
        await bed.server.daemon.core.signer.sign('unknown.com', testMessage());
      } catch (err) {
        error = err;
      }
      expect(error).to.be.instanceOf(SigningError);
    });
  });

  describe('with dkim.ed25519', () => {
    let domain: ApiDomain;
    beforeEach(async () => {
      bed = await startDomainBed({ dkim: { ed25519: true } });
      domain = await bed.create('example.com');
      bed.publish(domain);
    });

    it('asks for an Ed25519 record next to the RSA one, both required', async () => {
      const dkim = domain.dns_records.filter((r) => r.host.includes('._domainkey.'));
      expect(dkim.map((r) => [r.host, r.required])).to.deep.equal([
        [`${activeSelector(domain)}._domainkey.example.com`, true],
        [`${activeSelector(domain)}e._domainkey.example.com`, true],
      ]);
      expect(dkim[1]!.content).to.match(/^v=DKIM1; k=ed25519; p=[A-Za-z0-9+/]{43}=$/);
      expect((await bed.recheck('example.com')).body.dns_valid).to.equal(true);
    });

    it('signs with RSA-SHA256 and Ed25519-SHA256 alongside, and both verify', async () => {
      const message = testMessage();
      const headers = await sign(message);
      expect(headers.match(/^DKIM-Signature: /gm)).to.have.length(2);
      expect(await verifyDkim(bed, headers + message)).to.deep.equal([
        { selector: activeSelector(domain), algorithm: 'rsa-sha256', result: 'pass' },
        { selector: `${activeSelector(domain)}e`, algorithm: 'ed25519-sha256', result: 'pass' },
      ]);
    });

    it("refuses a selector that is the Ed25519 key's, leaving both keys signing", async () => {
      // "<sel>" → "<sel>e" would write the RSA key over the live Ed25519 key file.
      const res = await bed.api('PUT', `${bed.base}/example.com`, { body: { dkim_selector: `${activeSelector(domain)}e` } });
      expect(res.status).to.equal(400);
      expect(res.body.message).to.contain('in use by another key');
      const message = testMessage();
      expect(await verifyDkim(bed, (await sign(message)) + message)).to.deep.equal([
        { selector: activeSelector(domain), algorithm: 'rsa-sha256', result: 'pass' },
        { selector: `${activeSelector(domain)}e`, algorithm: 'ed25519-sha256', result: 'pass' },
      ]);
    });
  });
});
