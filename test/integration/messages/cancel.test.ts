import { expect } from 'chai';
import { startMessageBed, type MessageBed } from '../../helpers/messages.ts';
import { MessagesRepo } from '../../../src/store/messages-repo.ts';

const HOUR = 3_600_000;

describe('cancelling scheduled messages', function () {
  this.timeout(30_000);
  let bed: MessageBed;
  const later = () => new Date(bed.clock.now() + HOUR).toISOString();
  const schedule = async (fields: Record<string, unknown> = {}) => {
    const res = await bed.send({ schedule: { first_attempt: later() }, ...fields });
    expect(res.status, JSON.stringify(res.body)).to.equal(202);
    expect(res.body.data[0].status).to.equal('scheduled');
    return res.body.data[0].id as string;
  };
  const cancel = (id: string, key?: string) => bed.api('DELETE', `${bed.messages}/${encodeURIComponent(id)}/cancel`, key ? { key } : {});
  const dueIds = async () => (await bed.server.daemon.core.store.families.schedule.values().all()) as string[];
  const uuidOf = (id: string) => id.slice(1, id.indexOf('@'));

  before(async () => {
    bed = await startMessageBed();
  });
  after(async () => bed?.stop());

  it('cancels a scheduled message by its Message-ID: it leaves the due-time index and reads Cancelled', async () => {
    const id = await schedule();
    expect(await dueIds()).to.include(uuidOf(id));
    const res = await cancel(id);
    expect(res.status).to.equal(200);
    expect(res.body.message).to.contain(id);
    expect(await dueIds()).to.not.include(uuidOf(id));
    const got = await bed.api('GET', `${bed.messages}/${uuidOf(id)}`);
    expect(got.body.status).to.equal('Cancelled');
  });

  it('cancels by the bare UUID, and refuses a second cancel with 409', async () => {
    const id = await schedule();
    expect((await cancel(uuidOf(id))).status).to.equal(200);
    const again = await cancel(uuidOf(id));
    expect(again.status).to.equal(409);
    expect(again.body.message).to.contain('already cancelled');
  });

  it('refuses a message that is not scheduled, an attempted one, an unknown one and a malformed id', async () => {
    const queued = (await bed.send()).body.data[0].id as string;
    const notScheduled = await cancel(queued);
    expect(notScheduled.status).to.equal(409);
    expect(notScheduled.body.message).to.contain('not scheduled');

    // As the delivery engine will leave it: one attempt recorded.
    const id = await schedule();
    const repo = new MessagesRepo(bed.server.daemon.core.store);
    const record = (await repo.get(uuidOf(id)))!;
    await bed.server.daemon.core.store.commit(
      repo.put({ ...record, attempts: [{ time: record.createdAt, log: '451 try later', status: 'Deferred' }], status: 'Deferred' }, record),
    );
    const attempted = await cancel(id);
    expect(attempted.status).to.equal(409);
    expect(attempted.body.message).to.contain('already been attempted');

    expect((await cancel('01a1fdfb-3448-7586-aa7f-39a2956fbdb2')).status).to.equal(404);
    expect((await cancel('not a message id')).status).to.equal(400);
  });

  it('needs messages:cancel for the sender domain', async () => {
    const other = await bed.create('other.example');
    expect(other.domain).to.equal('other.example');
    const id = await schedule();
    expect((await cancel(id, await bed.key(['messages:cancel:{other.example}']))).status).to.equal(403);
    expect((await cancel(id, await bed.key(['messages:read:all']))).status).to.equal(403);
    expect((await cancel(id, await bed.key(['messages:cancel:{example.com}']))).status).to.equal(200);
  });

  it('drops the content at once when data retention is 0', async () => {
    const id = await schedule({ retention: { data: 0 } });
    const before = await bed.api('GET', `${bed.messages}/${uuidOf(id)}`);
    expect(before.body.content).to.be.a('string');
    expect((await cancel(id)).status).to.equal(200);
    const after = await bed.api('GET', `${bed.messages}/${uuidOf(id)}`);
    expect(after.status).to.equal(200);
    expect(after.body).to.not.have.property('content');
    expect(after.body).to.not.have.property('content_parsed');
  });
});
