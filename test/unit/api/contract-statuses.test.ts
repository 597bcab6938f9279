import { expect } from 'chai';
import { ANY_OPERATION, assertMatchesContract } from '../../helpers/openapi.ts';

/**
 * The contract check (test/helpers/openapi.ts) refuses a status an operation does not declare,
 * so that a status the API answers for an operation's input is listed under it in the project's
 * copy of the contract (test/contract/openapi.yaml), where client generators read it.
 */
describe('contract statuses (test/contract/openapi.yaml)', () => {
  const error = { message: 'x' };

  it('refuses an undeclared status that depends on the operation, and an undeclared success', () => {
    expect(() => assertMatchesContract('ping', 409, error)).to.throw(/ping does not declare status 409/);
    expect(() => assertMatchesContract('getAPIKeys', 404, error)).to.throw(/getAPIKeys does not declare status 404/);
    expect(() => assertMatchesContract('ping', 204, {})).to.throw(/ping does not declare status 204/);
  });

  it('checks an error any operation may answer against ErrorResponse, declared or not', () => {
    for (const status of ANY_OPERATION) {
      expect(() => assertMatchesContract('ping', status, error), String(status)).not.to.throw();
      expect(() => assertMatchesContract('ping', status, { status: 'v1 words' }), String(status)).to.throw(/does not match/);
    }
  });

  it('declares the 400 of checkDomainDNS (a malformed account_id or domain)', () => {
    expect(() => assertMatchesContract('checkDomainDNS', 400, { message: 'invalid account_id' })).not.to.throw();
    expect(() => assertMatchesContract('checkDomainDNS', 400, { status: 'x' })).to.throw(/does not match/);
  });

  it('declares the 409 of what a deleted sub account refuses, and of a message that can no longer be cancelled', () => {
    const ops = [
      'suspendSubAccount',
      'unsuspendSubAccount',
      'updateSubAccount',
      'deleteSubAccount',
      'listSubAccountAPIKeys',
      'getSubAccountAPIKey',
      'updateSubAccountAPIKey',
      'deleteSubAccountAPIKey',
      'cancelMessage',
    ];
    for (const op of ops) {
      expect(() => assertMatchesContract(op, 409, { message: 'account x is deleted' }), op).not.to.throw();
      expect(() => assertMatchesContract(op, 409, {}), op).to.throw(/does not match/);
    }
  });
});
