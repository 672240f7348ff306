/** Sleep levels over a fake engine: what each keeps, what wake_up starts from, and the cache reset while asleep. */
import { describe, expect, test } from "bun:test";
import { SleepableOrchestrator } from "../../src/frontend/sleepable-orchestrator.ts";
import type { Orchestrator } from "../../src/frontend/orchestrator.ts";
import { createFakeOrchestrator } from "../server/fake-orchestrator.ts";

function setup() {
  const stopped: number[] = [];
  const restarts: (ArrayBuffer | null)[] = [];
  const states: string[] = [];
  let copies = 0;
  let engines = 0;
  const engine = (): Orchestrator => {
    const id = engines++;
    const fake = createFakeOrchestrator();
    return { ...fake, shutdown: async () => { stopped.push(id); }, resetPrefixCache: async () => true } as Orchestrator;
  };
  const sleepable = new SleepableOrchestrator(engine(), async (host) => { restarts.push(host); return engine(); }, (s) => states.push(s), async () => {
    copies++;
    return new ArrayBuffer(1024);
  });
  return { sleepable, stopped, restarts, states, copies: () => copies };
}

describe("sleepable orchestrator", () => {
  test("level 1 keeps a host copy of the weights and wakes from it; level 2 keeps nothing", async () => {
    const { sleepable, stopped, restarts, states, copies } = setup();
    await sleepable.sleep(1);
    expect(copies()).toBe(1);
    expect(stopped).toEqual([0]);
    expect(sleepable.hostBytes).toBe(1024);
    expect(sleepable.isSleeping()).toBe(true);
    await sleepable.wakeUp();
    expect(restarts.map((r) => r?.byteLength ?? null)).toEqual([1024]);
    expect(sleepable.hostBytes).toBe(0);
    await sleepable.sleep(2);
    expect(copies()).toBe(1);
    expect(sleepable.hostBytes).toBe(0);
    await sleepable.wakeUp();
    expect(restarts.at(-1)).toBeNull();
    expect(states).toEqual(["weights_offloaded", "awake", "discard_all", "awake"]);
  });

  test("asleep, there is no cached prefix to reset: success; awake, the engine answers", async () => {
    const { sleepable } = setup();
    expect(await sleepable.resetPrefixCache(false)).toBe(true);
    await sleepable.sleep(2);
    expect(await sleepable.resetPrefixCache(false)).toBe(true);
  });

  test("a failed wake-up leaves it asleep, and the next one reads the file (the host copy moved into the failed start)", async () => {
    let fail = true;
    const hosts: (ArrayBuffer | null)[] = [];
    const sleepable = new SleepableOrchestrator(createFakeOrchestrator(), async (host) => {
      hosts.push(host);
      if (fail) throw new Error("no such file");
      return createFakeOrchestrator();
    }, () => {}, async () => new ArrayBuffer(8));
    await sleepable.sleep(1);
    await expect(sleepable.wakeUp()).rejects.toThrow("no such file");
    expect(sleepable.isSleeping()).toBe(true);
    fail = false;
    await sleepable.wakeUp();
    expect(hosts.map((h) => h?.byteLength ?? null)).toEqual([8, null]);
    expect(sleepable.isSleeping()).toBe(false);
  });

  test("wake_up by tags: the engine starts with the first, serves once both are awake (vLLM's is_sleeping)", async () => {
    const { sleepable, restarts, states } = setup();
    await sleepable.sleep(2);
    await sleepable.wakeUp(["weights"]);
    expect(restarts).toHaveLength(1);
    expect(sleepable.isSleeping()).toBe(true);
    expect(sleepable.sleepingTags).toEqual(["kv_cache"]);
    expect(() => sleepable.generate({ requestId: "r", promptTokenIds: [1], sampling: {} as never, arrivalMs: 0 })).toThrow("sleeping");
    await sleepable.wakeUp(["kv_cache"]);
    expect(restarts).toHaveLength(1);
    expect(sleepable.isSleeping()).toBe(false);
    expect(states).toEqual(["discard_all", "awake"]);
  });
});
