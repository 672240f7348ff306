/**
 * A single-consumer async queue: the orchestrator pushes a request's outputs as engine steps arrive, the caller of
 * `generate()` pulls them with `for await`. Ends normally or with an error.
 */
export class OutputQueue<T> implements AsyncIterable<T> {
  private readonly items: T[] = [];
  private done = false;
  private error: Error | null = null;
  private waiter: (() => void) | null = null;

  push(item: T): void {
    if (this.done) return;
    this.items.push(item);
    this.notify();
  }

  end(): void {
    this.done = true;
    this.notify();
  }

  fail(error: Error): void {
    if (this.done) return;
    this.error = error;
    this.done = true;
    this.notify();
  }

  get isDone(): boolean {
    return this.done;
  }

  async *[Symbol.asyncIterator](): AsyncIterator<T> {
    while (true) {
      if (this.items.length > 0) { yield this.items.shift()!; continue; }
      if (this.error) throw this.error;
      if (this.done) return;
      await new Promise<void>((resolve) => { this.waiter = resolve; });
    }
  }

  private notify(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }
}
