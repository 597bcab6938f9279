import { expect } from 'chai';
import type { Domains } from '../../../src/domains/domains.ts';
import type { Acceptor, Submission } from '../../../src/message/accept.ts';
import { Sender, type OutgoingMail } from '../../../src/message/send.ts';
import { TemplateEngine } from '../../../src/message/template-engine.ts';
import type { AccountRecord, DomainRecord, MessageRecord } from '../../../src/store/records.ts';
import { AppError } from '../../../src/util/errors.ts';
import { corrupt } from '../../helpers/template-engine.ts';

/** A Sender over stand-ins: one valid sender domain; accept() echoes records. */
function sender(engine: TemplateEngine) {
  const domain = { id: 'dom', name: 'example.com', dns: { valid: true } } as DomainRecord;
  const domains = { find: async (_account: string, name: string) => (name === domain.name ? domain : undefined) } as unknown as Domains;
  const accepted: Submission[] = [];
  const acceptor = {
    accept: async (s: Submission) => {
      accepted.push(s);
      return s.messages.map((m) => ({ id: m.id, messageId: m.messageId, subject: m.subject, schedule: null }) as unknown as MessageRecord);
    },
  } as unknown as Acceptor;
  return { sender: new Sender(domains, acceptor, { now: () => Date.parse('2026-11-21T12:00:00Z') }, engine), accepted };
}

const account = { id: 'acc' } as AccountRecord;
const mail = (subject: string, names: string[]): OutgoingMail => ({
  source: 'api',
  from: { email: 'app@example.com' },
  subject,
  text: 'Hello {{ name }}',
  inlineRule: 'brackets',
  badAddress: 'refuse',
  audience: { kind: 'individual', recipients: names.map((name, i) => ({ email: `r${i}@example.org`, substitutions: { name } })) },
});

describe('Sender: failures inside the template engine', () => {
  it("answers our words, logs the engine's own text where a logger is given, and sends with a fresh engine next", async () => {
    const engine = new TemplateEngine();
    const { sender: s, accepted } = sender(engine);
    const lines: Array<{ details: object; message: string }> = [];
    corrupt(engine);
    let refused: unknown;
    try {
      await s.send(account, mail('Hi {{ name }}', ['Ada']), () => true, { warn: (details, message) => lines.push({ details, message }) });
    } catch (err) {
      refused = err;
    }
    expect(refused).to.be.instanceOf(AppError);
    expect((refused as AppError).status).to.equal(400);
    expect((refused as AppError).message).to.equal('template error: the template could not be rendered');
    expect(lines).to.have.length(1);
    expect(lines[0]!.message).to.equal('the template engine was stopped or failed inside; a fresh instance replaces it');
    expect(String((lines[0]!.details as { err: unknown }).err)).to.match(/RuntimeError: memory access out of bounds/);
    expect(accepted).to.have.length(0);
    const outcomes = await s.send(account, mail('Hi {{ name }}', ['Bo', 'Cy']), () => true);
    expect(outcomes.map((o) => o.message?.subject)).to.deep.equal(['Hi Bo', 'Hi Cy']);
  });

  it('drops the details when no logger is given', async () => {
    const engine = new TemplateEngine();
    const { sender: s } = sender(engine);
    corrupt(engine);
    let refused: unknown;
    try {
      await s.send(account, mail('Hi {{ name }}', ['Ada']), () => true);
    } catch (err) {
      refused = err;
    }
    expect((refused as AppError).message).to.equal('template error: the template could not be rendered');
  });
});
