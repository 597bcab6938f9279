import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';

const DAY = 24 * 3_600_000;

describe('message retention', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  const get = (id: string) => bed.api('GET', `${bed.messages}/${encodeURIComponent(id)}`);
  const bodyChunks = async () => (await bed.server.daemon.core.store.families.bodies.keys().all()).length;

  before(async () => {
    bed = await startMessageBed();
  });
  after(async () => bed?.stop());

  it('reports retain_until from the request, else from the account defaults', async () => {
    const own = await bed.send({ retention: { metadata: 3, data: 1 } });
    const byDefault = await bed.send();
    const a = (await get(own.body.data[0].id)).body;
    const b = (await get(byDefault.body.data[0].id)).body;
    expect(Date.parse(a.retain_until) - Date.parse(a.created_at)).to.equal(3 * DAY);
    const account = (await bed.api('GET', `/v2/accounts/${bed.server.accountId}`)).body;
    expect(Date.parse(b.retain_until) - Date.parse(b.created_at)).to.equal(account.message_metadata_retention * DAY);
  });

  it('drops final content after its data days, keeps a shared body for the other recipient, then purges the metadata', async () => {
    const res = await bed.send({
      recipients: [{ email: 'one@example.org' }, { email: 'two@example.org' }],
      subject: 'Retained',
      retention: { metadata: 2, data: 1 },
      schedule: { first_attempt: new Date(bed.clock.now() + 3_600_000).toISOString() },
    });
    const [one, two] = res.body.data.map((d: { id: string }) => d.id) as [string, string];
    expect((await bed.api('DELETE', `${bed.messages}/${encodeURIComponent(one)}/cancel`)).status).to.equal(200);
    const chunks = await bodyChunks();

    bed.clock.advance(DAY + 1000);
    const first = await bed.server.daemon.core.messages.purge();
    expect(first.contents).to.be.at.least(1);
    expect((await get(one)).body).to.not.have.property('content');
    // `two` is still scheduled (not final): its content stays, and so does the shared body.
    expect((await get(two)).body.content).to.contain('Subject: Retained');
    expect(await bodyChunks()).to.equal(chunks);

    bed.clock.advance(DAY);
    const second = await bed.server.daemon.core.messages.purge();
    expect(second.messages).to.be.at.least(2);
    expect((await get(one)).status).to.equal(404);
    expect((await get(two)).status).to.equal(404);
    const listed = await bed.api('GET', `${bed.messages}?subject=Retained`);
    expect(listed.body.data).to.have.length(0);
    expect(await bodyChunks()).to.be.below(chunks);
  });
});
