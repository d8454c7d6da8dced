// The suite's one way of waiting (test/support/eventually.ts): it returns what the look found,
// names what it waited for and the last thing it saw, and keeps working under fake timers.
import { afterEach, describe, expect, it, vi } from "vitest";
import { eventually, eventuallyValue, GiveUpError } from "../support/eventually.ts";

describe("eventually", () => {
  afterEach(() => {
    vi.useRealTimers();
  });

  it("returns the first value a look finds, after the looks that found none", async () => {
    let looks = 0;
    const found = await eventually("the third look", () => {
      looks += 1;
      return looks >= 3 ? { looks } : undefined;
    });
    expect(found).toEqual({ looks: 3 });
  });

  it("counts a look that throws as not yet, and names what it waited for and saw last", async () => {
    await expect(
      eventually(
        "the server to listen",
        () => {
          throw new Error("ECONNREFUSED");
        },
        { withinMs: 50 },
      ),
    ).rejects.toThrow(/waited 50 ms for the server to listen; last seen: the error ECONNREFUSED/);
    await expect(
      eventuallyValue(
        "the run to finish",
        () => ({ status: "running" }),
        (run) => run.status === "done",
        {
          withinMs: 50,
        },
      ),
    ).rejects.toThrow(/for the run to finish; last seen: \{ status: 'running' \}/);
  });

  it("stops at once on a GiveUpError", async () => {
    const gaveUp = new GiveUpError("the process exited");
    await expect(
      eventually("a process that exited", () => {
        throw gaveUp;
      }),
    ).rejects.toBe(gaveUp);
  });

  it("waits on real work while the test's clock is fake", async () => {
    vi.useFakeTimers();
    let ready = false;
    queueMicrotask(() => {
      void import("node:timers/promises").then(({ setImmediate }) =>
        setImmediate().then(() => {
          ready = true;
        }),
      );
    });
    expect(await eventually("real work to finish", () => ready)).toBe(true);
  });
});
