// The CLI's handling of bad input, each as an operator met it: a typo in an option, a tier, a
// tool name or a budget is refused with the field, the value and the nearest right one, in a few
// lines (not a page of help), and changes nothing; `--allow` says what it replaced; a reader
// that stops reading (`| head`) is not a crash; a restored caller gets back no old grant.
import { spawn } from "node:child_process";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { mainScript } from "../support/serve-process.ts";
import { type CliServer, startCliServer } from "./cli-server.ts";

describe("the CLI's input handling", () => {
  let s: CliServer;
  beforeAll(async () => {
    s = await startCliServer("pglite");
  }, 300_000);
  afterAll(async () => {
    await s?.stop();
  });

  it("an unknown option names the nearest one and prints no page of help", async () => {
    const r = await s.cli("callers", "list", "--jsn");
    expect(r.code).toBe(2);
    expect(r.err).toContain("unknown option --jsn (did you mean --json?)");
    expect(r.err).toContain("Run `peergate callers list --help`");
    expect(r.err).not.toContain("To specify a positional argument");
    expect(r.err.split("\n").length).toBeLessThanOrEqual(3);
    const missing = await s.cli("callers", "rotate", "x", "--grace");
    expect(missing.code).toBe(2);
    expect(missing.err).toContain("option --grace needs a value");
  });

  it("`ceiling --tier` with a typo is a usage error naming the tiers", async () => {
    const r = await s.cli("ceiling", "--tier", "internl");
    expect(r.code).toBe(2);
    expect(r.err).toContain("did you mean internal?");
    expect(r.out).toBe("");
  });

  it("an allow entry that names no tool is refused before anything changes", async () => {
    await s.json("callers", "add", "typo", "--kind", "peer");
    const r = await s.cli(
      "callers",
      "set",
      "typo",
      "--allow",
      "web_fetc",
      "--operator-token-file",
      s.operatorFile,
    );
    expect(r.code).toBe(2);
    expect(r.err).toContain('"web_fetc" (did you mean web_fetch?)');
    expect((await s.json("callers", "show", "typo")).caller.allow).toEqual([]);

    // Deliberately: a name a policy will add later.
    const later = await s.cli(
      "callers",
      "set",
      "typo",
      "--allow",
      "future_tool",
      "--allow-unknown-tools",
      "--operator-token-file",
      s.operatorFile,
    );
    expect(later.code).toBe(0);
    expect((await s.json("callers", "show", "typo")).caller.allow).toEqual(["future_tool"]);
  });

  it("--allow says what it replaced; --add-allow and --remove-allow change one entry", async () => {
    await s.json("callers", "add", "lists", "--kind", "peer");
    const op = ["--operator-token-file", s.operatorFile];
    const first = await s.cli("callers", "set", "lists", "--allow", "read_file,grep", ...op);
    expect(first.code).toBe(0);
    expect(first.out).toContain('allow: (none) → "read_file", "grep"');
    const replaced = await s.cli("callers", "set", "lists", "--allow", "web_fetch", ...op);
    expect(replaced.out).toContain('allow: "read_file", "grep" → "web_fetch"');
    await s.cli("callers", "set", "lists", "--add-allow", "read_file", ...op);
    await s.cli("callers", "set", "lists", "--remove-allow", "web_fetch");
    expect((await s.json("callers", "show", "lists")).caller.allow).toEqual(["read_file"]);
    const both = await s.cli("callers", "set", "lists", "--allow", "grep", "--add-allow", "grep");
    expect(both.code).toBe(2);
    expect(both.err).toContain("not both");
  });

  it("a bad value is explained in plain words, never in zod's", async () => {
    const r = await s.cli(
      "callers",
      "set",
      "typo",
      "--approval",
      "sometimes",
      "--operator-token-file",
      s.operatorFile,
    );
    expect(r.code).toBe(1);
    expect(r.err).toContain('approvalPolicy: got "sometimes"; expected one of');
    const raw = await fetch(`${s.env.PEERGATE_URL}/admin/v1/callers/typo`, {
      method: "PATCH",
      headers: {
        authorization: `Bearer ${await adminToken(s)}`,
        "content-type": "application/json",
      },
      body: JSON.stringify({ budgets: { steps: "a" }, allow: "x" }),
    });
    const text = await raw.text();
    expect(raw.status).toBe(400);
    expect(text).toContain('budgets.steps: got \\"a\\"; expected a number');
    expect(text).toContain('allow: got \\"x\\"; expected a list');
    expect(text).not.toContain("Invalid input");
  });

  it("a restored caller comes back with no allow entry of before its revocation", async () => {
    const op = ["--operator-token-file", s.operatorFile];
    await s.json("callers", "add", "comeback", "--kind", "peer", "--allow", "read_file", ...op);
    await s.json("callers", "revoke", "comeback");
    const back = await s.json("callers", "restore", "comeback", "--tier", "public", ...op);
    expect(back.caller.allow).toEqual([]);
    await s.json("callers", "revoke", "comeback");
    const named = await s.json(
      "callers",
      "restore",
      "comeback",
      "--tier",
      "public",
      "--allow",
      "grep",
      ...op,
    );
    expect(named.caller.allow).toEqual(["grep"]);
  });

  it("`peergate audit | …` ends quietly when the reader is gone", async () => {
    // `true` exits before the CLI has started, so the CLI's first write meets a closed pipe, as
    // `| head` does once it has its lines.
    const result = await new Promise<{ code: number | null; err: string }>((resolve) => {
      const child = spawn(
        "bash",
        ["-o", "pipefail", "-c", `"${process.execPath}" "${mainScript}" audit | true`],
        { env: { ...process.env, ...s.env }, cwd: s.dir },
      );
      let err = "";
      child.stderr.on("data", (c: Buffer) => {
        err += c.toString();
      });
      child.stdout.resume();
      child.on("close", (code) => resolve({ code, err }));
    });
    expect(result.err).not.toContain("EPIPE");
    expect(result.code).toBe(0);
  }, 60_000);
});

async function adminToken(s: CliServer): Promise<string> {
  const { readFile } = await import("node:fs/promises");
  return (await readFile(`${s.env.PEERGATE_DATA_DIR}/admin-token`, "utf8")).trim();
}
