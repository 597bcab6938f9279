import { expect } from 'chai';
import { AppError } from '../../src/util/errors.ts';

/** Runs `fn`, expecting it to throw an AppError of `status`; returns its message. */
export function appErrorOf(fn: () => unknown, status = 400): string {
  let thrown: unknown;
  try {
    fn();
  } catch (err) {
    thrown = err;
  }
  expect(thrown, 'expected an AppError to be thrown').to.be.instanceOf(AppError);
  expect((thrown as AppError).status).to.equal(status);
  return (thrown as AppError).message;
}
