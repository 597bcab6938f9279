/** At most `size` tasks at once, at most `queue` waiting (past it `full` is true: callers refuse). */
export class Gate {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly size: number,
    private readonly queue = Number.POSITIVE_INFINITY,
  ) {}

  get full(): boolean {
    return this.waiting.length >= this.queue;
  }

  async run<T>(task: () => Promise<T>): Promise<T> {
    // A finishing task hands its slot to the first waiter, so `running` never passes `size`.
    if (this.running >= this.size) await new Promise<void>((resolve) => this.waiting.push(resolve));
    else this.running++;
    try {
      return await task();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}
