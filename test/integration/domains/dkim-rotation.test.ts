import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import { publishRecord, publishRecords } from '../../helpers/dns-server.ts';
import {
  DAY_MS,
  eventually,
  retiredDkimOf,
  standbyDkimOf,
  startDomainBed,
  testMessage,
  verifyDkim,
  type ApiDomain,
  type DomainBed,
  activeSelector,
} from '../../helpers/domains.ts';

const selectorOf = (record: { host: string }) => record.host.split('.')[0]!;

describe('DKIM key rotation', () => {
  let bed: DomainBed;
  let created: ApiDomain;
  let createdAt: number;

  const runDaily = async () => {
    const errors: unknown[] = [];
    const result = await bed.server.daemon.core.rotator.runDaily((_d, err) => errors.push(err));
    expect(errors).to.deep.equal([]);
    return result;
  };
  const record = () => bed.server.daemon.core.domains.get(bed.server.accountId, 'example.com');
  const sign = (message: string) => bed.server.daemon.core.signer.sign('example.com', message);

  /** A domain rotating every 7 days, DNS valid, its standby record not published yet. */
  async function rotatingDomain(): Promise<void> {
    createdAt = bed.clock.now();
    created = await bed.create('example.com', { dkim_rotation_interval_days: 7 });
    const standby = standbyDkimOf(created);
    publishRecords(
      bed.dns.zone,
      created.dns_records.filter((r) => r !== standby),
    );
    const checked = (await bed.recheck('example.com')).body;
    expect(checked.dns_valid).to.equal(true);
    expect(checked.rotation_ready).to.equal(false);
  }

  async function publishStandby(): Promise<void> {
    publishRecord(bed.dns.zone, standbyDkimOf(created));
    expect((await bed.recheck('example.com')).body.rotation_ready).to.equal(true);
  }

  describe('with RSA keys', () => {
    beforeEach(async () => {
      bed = await startDomainBed();
      await rotatingDomain();
    });
    afterEach(async () => {
      await bed.stop();
    });

    it('is rotation_ready only once the standby record is published and checked', async () => {
      publishRecord(bed.dns.zone, standbyDkimOf(created));
      expect((await bed.get('example.com')).rotation_ready).to.equal(false);
      const checked = (await bed.recheck('example.com')).body;
      expect(checked.rotation_ready).to.equal(true);
      expect(standbyDkimOf(checked)).to.include({ required: false, propagated: true });
    });

    it('does not rotate before the interval has passed', async () => {
      await publishStandby();
      bed.clock.ms = createdAt + 7 * DAY_MS - 60_000;
      expect(await runDaily()).to.deep.equal({ rotated: 0, purged: 0 });
      expect(activeSelector(await bed.get('example.com'))).to.equal(activeSelector(created));
      expect((await bed.server.daemon.core.rotator.rotate(await record())).decision).to.deep.equal({ kind: 'wait', until: createdAt + 7 * DAY_MS });

      bed.clock.ms = createdAt + 7 * DAY_MS;
      expect(await runDaily()).to.deep.equal({ rotated: 1, purged: 0 });
    });

    it('does not rotate while the standby record is not published, even long after the interval', async () => {
      bed.clock.advance(30 * DAY_MS);
      expect(await runDaily()).to.deep.equal({ rotated: 0, purged: 0 });
      const domain = await bed.get('example.com');
      expect(activeSelector(domain)).to.equal(activeSelector(created));
      expect(domain.rotation_ready).to.equal(false);
    });

    it('looks the standby record up again before rotating, and holds off when it was withdrawn', async () => {
      await publishStandby();
      bed.dns.zone.delete(standbyDkimOf(created).host);
      bed.clock.advance(8 * DAY_MS);
      expect(await runDaily()).to.deep.equal({ rotated: 0, purged: 0 });
      const domain = await bed.get('example.com');
      expect(activeSelector(domain)).to.equal(activeSelector(created));
      expect(domain.rotation_ready).to.equal(false);
    });

    it('promotes the standby key after the interval, makes a new standby and keeps the retired key listed', async () => {
      await publishStandby();
      const oldActive = activeSelector(created);
      const oldStandby = selectorOf(standbyDkimOf(created));
      bed.clock.advance(7 * DAY_MS);
      expect(await runDaily()).to.deep.equal({ rotated: 1, purged: 0 });

      const rotated = await bed.get('example.com');
      expect(activeSelector(rotated)).to.equal(oldStandby);
      const standby = standbyDkimOf(rotated);
      expect(selectorOf(standby)).to.not.be.oneOf([oldActive, oldStandby]);
      expect(standby).to.include({ required: false, propagated: false });
      expect(rotated.rotation_ready).to.equal(false);
      const retired = retiredDkimOf(rotated);
      expect(retired).to.include({ host: `${oldActive}._domainkey.example.com`, required: false, propagated: true });
      expect(retired.content).to.equal(created.dns_records.find((r) => r.host === retired.host)!.content);
      expect(rotated.dns_valid).to.equal(true);
      // The new active record is the one published as standby: still valid at the next check.
      expect((await bed.recheck('example.com')).body.dns_valid).to.equal(true);
    });

    it('keeps mail signed before the rotation verifying after it, and signs later mail with the new selector', async () => {
      await publishStandby();
      const before = testMessage('before');
      const signedBefore = (await sign(before)) + before;
      bed.clock.advance(7 * DAY_MS);
      expect((await runDaily()).rotated).to.equal(1);
      const rotated = await bed.get('example.com');

      expect(await verifyDkim(bed, signedBefore)).to.deep.equal([{ selector: activeSelector(created), algorithm: 'rsa-sha256', result: 'pass' }]);
      const after = testMessage('after');
      expect(await verifyDkim(bed, (await sign(after)) + after)).to.deep.equal([
        { selector: activeSelector(rotated), algorithm: 'rsa-sha256', result: 'pass' },
      ]);
    });

    it('drops the retired key and its file after dkim.retired_grace_days', async () => {
      await publishStandby();
      bed.clock.advance(7 * DAY_MS);
      await runDaily();
      const retired = selectorOf(retiredDkimOf(await bed.get('example.com')));
      const file = join(bed.server.dir, 'keys', 'dkim', created.id, `${retired}.pem`);
      expect(existsSync(file)).to.equal(true);

      bed.clock.advance(7 * DAY_MS - 60_000);
      expect(await runDaily()).to.deep.equal({ rotated: 0, purged: 0 });
      retiredDkimOf(await bed.get('example.com'));

      bed.clock.advance(60_000);
      // Due again, but the new standby is not published: only the purge happens.
      expect(await runDaily()).to.deep.equal({ rotated: 0, purged: 1 });
      const after = await bed.get('example.com');
      expect(after.dns_records.filter((r) => /retired/.test(r.label))).to.deep.equal([]);
      expect(after.dns_records.map((r) => r.host)).to.not.include(`${retired}._domainkey.example.com`);
      expect(existsSync(file)).to.equal(false);
    });

    it('rotates again one interval after the last rotation', async () => {
      await publishStandby();
      bed.clock.advance(7 * DAY_MS);
      await runDaily();
      created = await bed.get('example.com');
      await publishStandby();
      bed.clock.advance(7 * DAY_MS - 5 * 60_000);
      expect((await runDaily()).rotated).to.equal(0);
      bed.clock.advance(5 * 60_000);
      expect((await runDaily()).rotated).to.equal(1);
      expect(activeSelector(await bed.get('example.com'))).to.equal(selectorOf(standbyDkimOf(created)));
    });
  });

  describe('on demand', () => {
    beforeEach(async () => {
      bed = await startDomainBed();
    });
    afterEach(async () => {
      await bed.stop();
    });

    it('creates a standby first on a domain without rotation (no_standby), then rotates once it is published', async () => {
      created = await bed.create('example.com');
      bed.publish(created);
      expect((await bed.recheck('example.com')).body.dns_valid).to.equal(true);
      const rotator = bed.server.daemon.core.rotator;

      const first = await rotator.rotate(await record(), true);
      expect(first.decision).to.deep.equal({ kind: 'no_standby' });
      const withStandby = await bed.get('example.com');
      expect(activeSelector(withStandby)).to.equal(activeSelector(created));
      const standby = standbyDkimOf(withStandby);

      expect((await rotator.rotate(await record(), true)).decision).to.deep.equal({ kind: 'standby_not_published' });
      expect(activeSelector(await bed.get('example.com'))).to.equal(activeSelector(created));

      publishRecord(bed.dns.zone, standby);
      // No interval to wait for: forced, it rotates as soon as the standby is published.
      expect((await rotator.rotate(await record(), true)).decision).to.deep.equal({ kind: 'rotate' });
      const rotated = await bed.get('example.com');
      expect(activeSelector(rotated)).to.equal(selectorOf(standby));
      expect(retiredDkimOf(rotated).host).to.equal(`${activeSelector(created)}._domainkey.example.com`);
      const message = testMessage();
      expect((await verifyDkim(bed, (await sign(message)) + message))[0]!.result).to.equal('pass');
    });

    it('leaves a domain without rotation alone in the daily job', async () => {
      created = await bed.create('example.com');
      bed.clock.advance(400 * DAY_MS);
      expect(await runDaily()).to.deep.equal({ rotated: 0, purged: 0 });
      expect(await bed.get('example.com')).to.deep.equal(created);
    });
  });

  describe('the scheduled job', () => {
    beforeEach(async () => {
      // Every second, so that the daemon's own node-cron job is seen running.
      bed = await startDomainBed({ dkim: { rotation_schedule: '* * * * * *' } });
      await rotatingDomain();
    });
    afterEach(async () => {
      await bed.stop();
    });

    it('is wired into the daemon: a due domain with a published standby rotates without any call', async () => {
      await publishStandby();
      bed.clock.advance(7 * DAY_MS);
      await eventually(async () => activeSelector(await bed.get('example.com')) === selectorOf(standbyDkimOf(created)));
    });
  });

  describe('with Ed25519 alongside RSA', () => {
    beforeEach(async () => {
      bed = await startDomainBed({ dkim: { ed25519: true } });
      createdAt = bed.clock.now();
      created = await bed.create('example.com', { dkim_rotation_interval_days: 7 });
    });
    afterEach(async () => {
      await bed.stop();
    });

    it('rotates both keys together, and both signatures verify before and after the rotation', async () => {
      const standby = created.dns_records.filter((r) => /standby/.test(r.label));
      expect(standby.map((r) => r.label)).to.deep.equal(['DKIM (standby for rotation, rsa)', 'DKIM (standby for rotation, ed25519)']);
      publishRecords(
        bed.dns.zone,
        created.dns_records.filter((r) => !standby.includes(r)),
      );
      expect((await bed.recheck('example.com')).body.rotation_ready).to.equal(false);
      // Only one of the two standby records: not ready.
      publishRecord(bed.dns.zone, standby[0]!);
      expect((await bed.recheck('example.com')).body.rotation_ready).to.equal(false);
      publishRecord(bed.dns.zone, standby[1]!);
      expect((await bed.recheck('example.com')).body.rotation_ready).to.equal(true);

      const before = testMessage('before');
      const signedBefore = (await sign(before)) + before;
      bed.clock.ms = createdAt + 7 * DAY_MS;
      expect((await runDaily()).rotated).to.equal(1);
      const rotated = await bed.get('example.com');
      expect(activeSelector(rotated)).to.equal(selectorOf(standby[0]!));
      expect(rotated.dns_records.filter((r) => /retired/.test(r.label)).map((r) => selectorOf(r))).to.deep.equal([
        activeSelector(created),
        `${activeSelector(created)}e`,
      ]);

      expect(await verifyDkim(bed, signedBefore)).to.deep.equal([
        { selector: activeSelector(created), algorithm: 'rsa-sha256', result: 'pass' },
        { selector: `${activeSelector(created)}e`, algorithm: 'ed25519-sha256', result: 'pass' },
      ]);
      const after = testMessage('after');
      expect(await verifyDkim(bed, (await sign(after)) + after)).to.deep.equal([
        { selector: activeSelector(rotated), algorithm: 'rsa-sha256', result: 'pass' },
        { selector: `${activeSelector(rotated)}e`, algorithm: 'ed25519-sha256', result: 'pass' },
      ]);
    });
  });
});
