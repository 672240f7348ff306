/**
 * Which unloaded models keep their front end (routes, tokenizer, parsers, metric series) for their next load. Building
 * a front end is main-thread work (tens of ms) and holding one is memory (a 150k-token vocabulary's tables are tens of
 * MiB), so only a model evicted to make room for another keeps it: such models take turns, and their later loads then
 * start only an engine Worker while the other models stream. At most `maxKept` models keep one, the oldest released
 * first, and all are released once no model is loaded (an idle server gives their memory back); a model unloaded for
 * any other reason (idle past its keep-alive, keep_alive 0, shutdown) releases its own at once.
 * @example keeper.keep("a", () => { shell = null; }); ... if (keeper.take("a")) reuse(shell);
 */

export class FrontEndKeeper {
  /** each kept front end's release by model name, oldest first (a Map keeps insertion order) */
  private readonly kept = new Map<string, () => void>();

  constructor(private readonly maxKept: number) {}

  /** Keeps `name`'s front end; `release` drops it when room is needed or everything is released. */
  keep(name: string, release: () => void): void {
    this.kept.delete(name);
    if (this.maxKept <= 0) { release(); return; }
    while (this.kept.size >= this.maxKept) this.releaseOne(this.kept.keys().next().value!);
    this.kept.set(name, release);
  }

  /** The model loads again: its front end is in use, no longer kept (false when none was kept). */
  take(name: string): boolean {
    return this.kept.delete(name);
  }

  /** Releases every kept front end (no model is loaded). */
  releaseAll(): void {
    for (const name of [...this.kept.keys()]) this.releaseOne(name);
  }

  /** the names whose front end is kept, oldest first */
  names(): string[] {
    return [...this.kept.keys()];
  }

  private releaseOne(name: string): void {
    const release = this.kept.get(name);
    this.kept.delete(name);
    release?.();
  }
}
