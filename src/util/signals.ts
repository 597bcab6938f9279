/**
 * Typed signals between parts built apart: a producer is given the hub at construction and
 * emits; a consumer subscribes where it is built. The map type names every signal and what it
 * carries, so a reader finds each collaboration by its name. Listeners run synchronously, in
 * the order they subscribed.
 */
export class Signals<M extends object> {
  private readonly listeners = new Map<keyof M, Array<(value: never) => void>>();

  on<K extends keyof M>(name: K, listener: (value: M[K]) => void): void {
    const list = this.listeners.get(name);
    if (list) list.push(listener);
    else this.listeners.set(name, [listener]);
  }

  emit<K extends keyof M>(name: K, value: M[K]): void {
    const list = this.listeners.get(name) as Array<(value: M[K]) => void> | undefined;
    if (list) for (const listener of list) listener(value);
  }
}

/** What a producer is given: it can emit the signals of its own map, and nothing else. */
export interface Emitter<M extends object> {
  emit<K extends keyof M>(name: K, value: M[K]): void;
}
