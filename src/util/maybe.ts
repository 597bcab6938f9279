/** A value known now, or one still on its way. */
export type Maybe<T> = T | Promise<T>;

/**
 * `next` of `value`: at once when the value is known, once it settles when it is a promise. A
 * path that is mostly answered from memory (the tracking listener's) then costs no promise and no
 * turn of the microtask queue per step, and still waits where it must.
 */
export function andThen<T, R>(value: Maybe<T>, next: (value: T) => Maybe<R>): Maybe<R> {
  return value instanceof Promise ? value.then(next) : next(value);
}
