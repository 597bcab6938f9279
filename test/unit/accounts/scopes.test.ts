import { expect } from 'chai';
import { formatScope, Grants, parseScope, satisfies, ScopeError, validateScopes, type DomainOwnership, type Scope } from '../../../src/accounts/scopes.ts';

async function rejectionOf(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (err) {
    return err;
  }
  throw new Error('expected the promise to reject');
}

describe('parseScope', () => {
  it('parses a static scope', () => {
    expect(parseScope('domains:read')).to.deep.equal({ kind: 'static', scope: 'domains:read' });
  });

  it('parses a family :all scope', () => {
    expect(parseScope('messages:send:all')).to.deep.equal({ kind: 'all', family: 'messages:send' });
  });

  it('parses a family:{domain} scope', () => {
    expect(parseScope('webhooks:read:{example.com}')).to.deep.equal({
      kind: 'domain',
      family: 'webhooks:read',
      domain: 'example.com',
    });
  });

  it('normalises the domain of a domain scope: lower case, surrounding spaces, trailing dot', () => {
    expect(parseScope('messages:send:{ Mail.Example.COM. }')).to.deep.equal({
      kind: 'domain',
      family: 'messages:send',
      domain: 'mail.example.com',
    });
  });

  it('ignores spaces around the whole scope', () => {
    expect(parseScope('  domains:read  ')).to.deep.equal({ kind: 'static', scope: 'domains:read' });
  });

  it('parses * as the wildcard', () => {
    expect(parseScope('*')).to.deep.equal({ kind: 'wildcard' });
  });

  it('refuses a family that does not exist', () => {
    expect(parseScope('messages:teleport:all')).to.equal(null);
    expect(parseScope('messages:teleport:{example.com}')).to.equal(null);
  });

  it('refuses a static scope used as a domain family', () => {
    expect(parseScope('domains:read:{example.com}')).to.equal(null);
    expect(parseScope('domains:read:all')).to.equal(null);
  });

  it('refuses a domain family without :all or a domain', () => {
    expect(parseScope('messages:send')).to.equal(null);
  });

  it('refuses an invalid domain', () => {
    expect(parseScope('messages:send:{localhost}')).to.equal(null);
    expect(parseScope('messages:send:{-bad.example.com}')).to.equal(null);
    expect(parseScope('messages:send:{example.123}')).to.equal(null);
    expect(parseScope('messages:send:{exa mple.com}')).to.equal(null);
  });

  it('refuses an empty or unknown string', () => {
    expect(parseScope('')).to.equal(null);
    expect(parseScope('everything')).to.equal(null);
  });
});

describe('formatScope', () => {
  it('writes every kind back in its canonical text form', () => {
    const cases: Array<[Scope, string]> = [
      [{ kind: 'wildcard' }, '*'],
      [{ kind: 'static', scope: 'api-keys:write' }, 'api-keys:write'],
      [{ kind: 'all', family: 'routes:read' }, 'routes:read:all'],
      [{ kind: 'domain', family: 'routes:read', domain: 'example.com' }, 'routes:read:{example.com}'],
    ];
    for (const [scope, text] of cases) expect(formatScope(scope)).to.equal(text);
  });

  it('round-trips through parseScope to the normalised form', () => {
    const parsed = parseScope('messages:read:{EXAMPLE.org.}');
    expect(parsed).to.not.equal(null);
    expect(formatScope(parsed!)).to.equal('messages:read:{example.org}');
  });
});

describe('Grants.holds', () => {
  it('lets the wildcard hold every role, with or without a domain', () => {
    const grants = new Grants(['*']);
    expect(grants.holds('accounts:write')).to.equal(true);
    expect(grants.holds('messages:send:all')).to.equal(true);
    expect(grants.holds('messages:send:{domain}', 'example.com')).to.equal(true);
  });

  it('holds an exact static scope and no other static scope', () => {
    const grants = new Grants(['domains:read']);
    expect(grants.holds('domains:read')).to.equal(true);
    expect(grants.holds('domains:write')).to.equal(false);
  });

  it('lets family:all satisfy the family:{domain} placeholder for any domain', () => {
    const grants = new Grants(['messages:send:all']);
    expect(grants.holds('messages:send:{domain}', 'example.com')).to.equal(true);
    expect(grants.holds('messages:send:{domain}', 'other.org')).to.equal(true);
    expect(grants.holds('messages:send:{domain}')).to.equal(true);
    expect(grants.holds('messages:send:all')).to.equal(true);
  });

  it('does not let one family:all satisfy another family', () => {
    const grants = new Grants(['messages:send:all']);
    expect(grants.holds('messages:read:{domain}', 'example.com')).to.equal(false);
    expect(grants.holds('messages:read:all')).to.equal(false);
  });

  it('lets a domain scope hold the placeholder for its own domain only', () => {
    const grants = new Grants(['messages:send:{example.com}']);
    expect(grants.holds('messages:send:{domain}', 'example.com')).to.equal(true);
    expect(grants.holds('messages:send:{domain}', 'other.org')).to.equal(false);
  });

  it('does not let a domain scope satisfy a family:all role', () => {
    const grants = new Grants(['messages:send:{example.com}']);
    expect(grants.holds('messages:send:all')).to.equal(false);
  });

  it('answers "for some domain" when the domain is not known yet', () => {
    expect(new Grants(['messages:send:{example.com}']).holds('messages:send:{domain}')).to.equal(true);
    expect(new Grants(['messages:read:{example.com}']).holds('messages:send:{domain}')).to.equal(false);
    expect(new Grants([]).holds('messages:send:{domain}')).to.equal(false);
  });

  it('compares the resource domain without regard to case or a trailing dot', () => {
    const grants = new Grants(['messages:send:{Example.com}']);
    expect(grants.holds('messages:send:{domain}', 'EXAMPLE.COM')).to.equal(true);
    expect(grants.holds('messages:send:{domain}', 'example.com.')).to.equal(true);
  });

  it('ignores invalid scope strings it was given', () => {
    const grants = new Grants(['not-a-scope', 'domains:read']);
    expect(grants.holds('domains:read')).to.equal(true);
    expect(grants.holds('not-a-scope')).to.equal(false);
  });

  it('holds nothing for a role of an unknown family', () => {
    const grants = new Grants(['messages:send:all']);
    expect(grants.holds('messages:teleport:{domain}', 'example.com')).to.equal(false);
  });
});

describe('satisfies', () => {
  it('requires every role of a joint set', () => {
    const security = [['domains:read', 'domains:write']];
    expect(satisfies(new Grants(['domains:read']), security)).to.equal(false);
    expect(satisfies(new Grants(['domains:write']), security)).to.equal(false);
    expect(satisfies(new Grants(['domains:read', 'domains:write']), security)).to.equal(true);
  });

  it('accepts any one of several alternatives', () => {
    const security = [['domains:read'], ['domains:write']];
    expect(satisfies(new Grants(['domains:read']), security)).to.equal(true);
    expect(satisfies(new Grants(['domains:write']), security)).to.equal(true);
    expect(satisfies(new Grants(['accounts:read']), security)).to.equal(false);
  });

  it('always passes an empty security list, even with no grants', () => {
    expect(satisfies(new Grants([]), [])).to.equal(true);
  });

  it('checks domain placeholders against the given domain', () => {
    const grants = new Grants(['messages:send:{example.com}']);
    expect(satisfies(grants, [['messages:send:{domain}']], 'example.com')).to.equal(true);
    expect(satisfies(grants, [['messages:send:{domain}']], 'other.org')).to.equal(false);
  });
});

describe('validateScopes', () => {
  const owned: Record<string, string> = { 'example.com': 'dom-1', 'example.org': 'dom-2' };
  const calls: Array<[string, string]> = [];
  const ownership: DomainOwnership = async (accountId, domain) => {
    calls.push([accountId, domain]);
    return owned[domain] ?? null;
  };

  beforeEach(() => {
    calls.length = 0;
  });

  it('returns static, :all and wildcard scopes with no domain id', async () => {
    const result = await validateScopes(['domains:read', 'messages:send:all', '*'], 'acc-1', ownership);
    expect(result).to.deep.equal([
      { scope: 'domains:read', domainId: null },
      { scope: 'messages:send:all', domainId: null },
      { scope: '*', domainId: null },
    ]);
  });

  it('refuses an invalid scope with a ScopeError naming it', async () => {
    const err = await rejectionOf(validateScopes(['domains:read', 'bogus:scope'], 'acc-1', ownership));
    expect(err).to.be.instanceOf(ScopeError);
    expect((err as Error).message).to.contain('bogus:scope');
  });

  it('refuses a duplicate scope, also when it differs only by normalisation', async () => {
    const exact = await rejectionOf(validateScopes(['domains:read', 'domains:read'], 'acc-1', ownership));
    expect(exact).to.be.instanceOf(ScopeError);
    expect((exact as Error).message).to.contain('duplicate');
    const normalised = await rejectionOf(validateScopes(['messages:send:{example.com}', 'messages:send:{EXAMPLE.com.}'], 'acc-1', ownership));
    expect(normalised).to.be.instanceOf(ScopeError);
  });

  it('drops a domain scope made redundant by the same family :all, whatever the order', async () => {
    const result = await validateScopes(['messages:send:{example.com}', 'messages:send:all'], 'acc-1', ownership);
    expect(result).to.deep.equal([{ scope: 'messages:send:all', domainId: null }]);
    expect(calls).to.deep.equal([]);
  });

  it('keeps a domain scope when only another family has :all', async () => {
    const result = await validateScopes(['messages:read:all', 'messages:send:{example.com}'], 'acc-1', ownership);
    expect(result).to.deep.equal([
      { scope: 'messages:read:all', domainId: null },
      { scope: 'messages:send:{example.com}', domainId: 'dom-1' },
    ]);
  });

  it('refuses a domain the account does not own', async () => {
    const err = await rejectionOf(validateScopes(['messages:send:{stranger.net}'], 'acc-1', ownership));
    expect(err).to.be.instanceOf(ScopeError);
    expect((err as Error).message).to.contain('stranger.net');
  });

  it('takes the domain id from the ownership function, asked with the account and normalised domain', async () => {
    const result = await validateScopes(['webhooks:write:{Example.ORG}'], 'acc-7', ownership);
    expect(result).to.deep.equal([{ scope: 'webhooks:write:{example.org}', domainId: 'dom-2' }]);
    expect(calls).to.deep.equal([['acc-7', 'example.org']]);
  });
});
