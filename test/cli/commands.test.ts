// src/cli/commands.ts names each verb's words and summary so that `peergate --help` loads no verb:
// they must be the verb's own, and each entry must load a verb.
import { describe, expect, it } from "vitest";
import type { Command } from "../../src/cli/command.ts";
import { commands } from "../../src/cli/commands.ts";

describe("the command list", () => {
  it("says of each verb what the verb says of itself", async () => {
    for (const entry of commands) {
      const verb: Command = "load" in entry ? await entry.load() : entry;
      expect({ words: entry.words, summary: entry.summary }).toEqual({
        words: verb.words,
        summary: verb.summary,
      });
    }
    // Every verb loaded with all it imports: the whole server among them, on a loaded machine.
  }, 300_000);

  it("has one entry per verb", () => {
    const names = commands.map((c) => c.words.join(" "));
    expect(new Set(names).size).toBe(names.length);
  });
});
