import { expect } from 'chai';
import type { RouteRecord, WebhookRecord } from '../../../src/store/records.ts';
import { RoutesRepo } from '../../../src/store/routes-repo.ts';
import { WebhooksRepo } from '../../../src/store/webhooks-repo.ts';
import { newId } from '../../../src/util/ids.ts';
import { openTestStore, TEST_BACKEND, type TestStore } from '../../helpers/backend.ts';

const AT = '2026-11-21T12:00:00.000Z';

function webhook(accountId: string): WebhookRecord {
  return {
    v: 1,
    id: newId(),
    accountId,
    name: 'hook',
    url: 'https://hooks.example.com/',
    enabled: true,
    flags: {} as WebhookRecord['flags'],
    scope: 'global',
    domains: [],
    secret: 'sealed',
    successCount: 0,
    errorCount: 0,
    errorsSinceLastSuccess: 0,
    lastRequestAt: null,
    createdAt: AT,
    updatedAt: AT,
  };
}

function route(accountId: string, domain: string): RouteRecord {
  return {
    v: 1,
    id: newId(),
    accountId,
    name: 'route',
    url: 'https://hooks.example.com/inbound',
    recipient: 'support',
    domain: { id: newId(), name: domain },
    attachments: false,
    headers: false,
    groupByMessageId: false,
    stripReplies: false,
    enabled: true,
    secret: 'sealed',
    createdAt: AT,
    updatedAt: AT,
  };
}

/** WebhooksRepo and RoutesRepo as src/store/README.md lists them, on this run's backend. */
describe(`webhooks and routes repositories (${TEST_BACKEND})`, () => {
  let opened: TestStore;
  let webhooks: WebhooksRepo;
  let routes: RoutesRepo;
  before(async () => {
    opened = await openTestStore();
    webhooks = new WebhooksRepo(opened.store);
    routes = new RoutesRepo(opened.store);
  });
  after(() => opened?.close());

  it("reads an account's webhooks whole in creation order, updates and deletes one", async () => {
    const acct = newId();
    const made = [webhook(acct), webhook(acct), webhook(acct)];
    await opened.store.commit([...made.flatMap((w) => webhooks.create(w)), ...webhooks.create(webhook(newId()))]);
    expect(await webhooks.idsOfAccount(acct)).to.deep.equal(made.map((w) => w.id));
    expect(await webhooks.ofAccount(acct)).to.deep.equal(made);
    expect(await webhooks.countOfAccount(acct)).to.equal(3);
    await opened.store.commit(webhooks.update({ ...made[0]!, name: 'renamed' }));
    expect((await webhooks.get(made[0]!.id))?.name).to.equal('renamed');
    await opened.store.commit(webhooks.delete(made[1]!));
    expect(await webhooks.get(made[1]!.id)).to.equal(undefined);
    expect(await webhooks.idsOfAccount(acct)).to.deep.equal([made[0]!.id, made[2]!.id]);
  });

  it("reads an account's routes, and those at one domain, in creation order; an update moves its index entries", async () => {
    const acct = newId();
    const made = [route(acct, 'a.test'), route(acct, 'b.test'), route(acct, 'a.test')];
    await opened.store.commit([...made.flatMap((r) => routes.create(r)), ...routes.create(route(newId(), 'a.test'))]);
    expect(await routes.ofAccount(acct)).to.deep.equal(made);
    expect(await routes.atDomain(acct, 'a.test')).to.deep.equal([made[0], made[2]]);
    expect(await routes.countOfAccount(acct)).to.equal(3);
    const moved = { ...made[0]!, domain: { id: newId(), name: 'b.test' } };
    await opened.store.commit(routes.update(made[0]!, moved));
    expect(await routes.atDomain(acct, 'a.test')).to.deep.equal([made[2]]);
    expect(await routes.atDomain(acct, 'b.test')).to.deep.equal([moved, made[1]]);
    await opened.store.commit(routes.delete(made[2]!));
    expect(await routes.get(made[2]!.id)).to.equal(undefined);
    expect(await routes.atDomain(acct, 'a.test')).to.deep.equal([]);
    expect(await routes.countOfAccount(acct)).to.equal(2);
  });
});
