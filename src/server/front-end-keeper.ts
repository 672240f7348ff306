/**
 * Which unloaded models keep their front end (routes, tokenizer, parsers, metric series) for their next load. Building
 * a front end is main-thread work (tens of ms) and holding one is memory (a 150k-token vocabulary's tables are tens of
 * MiB), so only a model evicted to make room for another keeps it: such models take turns, and their later loads then
 * start only an engine Worker while the other models stream. It is kept for the model's keep-alive after the unload
 * (the window in which Ollama would have kept the whole model) and for at most `maxKept` models, the oldest released
 * first; a model unloaded for any other reason (idle past its keep-alive, keep_alive 0, shutdown) releases it at once.
 * @example keeper.keep("a", 300_000, () => { shell = null; }); ... if (keeper.take("a")) reuse(shell);
 */

interface Kept {
  readonly release: () => void;
  readonly timer: ReturnType<typeof setTimeout> | null;
}

export class FrontEndKeeper {
  /** the kept front ends by model name, oldest first (a Map keeps insertion order) */
  private readonly kept = new Map<string, Kept>();

  constructor(private readonly maxKept: number) {}

  /** Keeps `name`'s front end for `ms` (negative: no time limit); `release` drops it when that runs out or room is needed. */
  keep(name: string, ms: number, release: () => void): void {
    this.take(name);
    if (this.maxKept <= 0) { release(); return; }
    while (this.kept.size >= this.maxKept) this.releaseOne(this.kept.keys().next().value!);
    let timer: ReturnType<typeof setTimeout> | null = null;
    if (ms >= 0) {
      timer = setTimeout(() => this.releaseOne(name), ms);
      // a kept front end must not keep the process alive on its own
      (timer as { unref?: () => void }).unref?.();
    }
    this.kept.set(name, { release, timer });
  }

  /** The model loads again: its front end is in use, no longer kept (false when none was kept). */
  take(name: string): boolean {
    const kept = this.kept.get(name);
    if (kept === undefined) return false;
    if (kept.timer !== null) clearTimeout(kept.timer);
    this.kept.delete(name);
    return true;
  }

  /** the names whose front end is kept, oldest first */
  names(): string[] {
    return [...this.kept.keys()];
  }

  private releaseOne(name: string): void {
    const kept = this.kept.get(name);
    if (kept === undefined) return;
    this.take(name);
    kept.release();
  }
}
