// The smaller traps of the first hour: no --version, GitHub and IFTTT runs both shown as
// "webhook", and `costUsd: 0` refused with no hint of what to do instead.
import { createHmac } from "node:crypto";
import { readFile } from "node:fs/promises";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliServer, startCliServer } from "./cli-server.ts";

describe("small fixes (pglite)", () => {
  let s: CliServer;
  beforeAll(async () => {
    s = await startCliServer("pglite");
  });
  afterAll(async () => s?.stop());

  it("`peergate --version` prints the package's version", async () => {
    const pkg = JSON.parse(await readFile(new URL("../../package.json", import.meta.url), "utf8"));
    const r = await s.cli("--version");
    expect(r).toEqual({ code: 0, out: `peergate ${pkg.version}`, err: "" });
  });

  it("`runs list` tells a GitHub run from an IFTTT run", async () => {
    const gh = await s.json(
      "callers",
      "add",
      "gh",
      "--kind",
      "github",
      "--prompt",
      "triage {{payload}}",
    );
    const ifttt = await s.json(
      "callers",
      "add",
      "applet",
      "--kind",
      "ifttt",
      "--prompt",
      "note {{payload}}",
    );
    const body = JSON.stringify({ action: "opened" });
    const signature = `sha256=${createHmac("sha256", gh.credential.secret).update(body).digest("hex")}`;
    const fromGithub = await fetch(`${s.server.url}/webhooks/github/gh`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "x-github-event": "issues",
        "x-github-delivery": crypto.randomUUID(),
        "x-hub-signature-256": signature,
      },
      body,
    });
    expect(fromGithub.status).toBe(202);
    const fromIfttt = await fetch(ifttt.credential.url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ value1: "x" }),
    });
    expect(fromIfttt.status).toBe(202);
    const listed = await s.cli("runs", "list");
    expect(listed.out).toMatch(/gh\s+webhook:github/);
    expect(listed.out).toMatch(/applet\s+webhook:ifttt/);
  });

  it("`costUsd: 0` is refused with what to do instead", async () => {
    const r = await s.cli("callers", "add", "free", "--kind", "peer", "--budget", "costUsd=0");
    expect(r.code).not.toBe(0);
    expect(r.err).toContain("price it at 0 in policies/models.yaml");
  });
});
