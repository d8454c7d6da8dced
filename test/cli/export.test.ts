// `callers export` writes the file `callers apply` reads, with no secret, and the two round-trip;
// the repository's callers.example.yaml passes `apply --dry-run`.
import { readFile } from "node:fs/promises";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliServer, cliVariants, startCliServer } from "./cli-server.ts";

const example = path.resolve(import.meta.dirname, "../../callers.example.yaml");

for (const variant of cliVariants) {
  describe.skipIf(variant.skip !== undefined)(`callers export (${variant.kind})`, () => {
    let s: CliServer;
    beforeAll(async () => {
      s = await startCliServer(variant.kind);
    });
    afterAll(async () => s?.stop());

    it("callers.example.yaml passes apply --dry-run and then applies", async () => {
      const dry = await s.cli(
        "callers",
        "apply",
        "-f",
        example,
        "--dry-run",
        "--operator-token-file",
        s.operatorFile,
      );
      expect(dry.err).toBe("");
      expect(dry.code).toBe(0);
      expect(dry.out).toContain("would create research-peer");
      expect(dry.out).toContain("would create ifttt-notes");
      const real = await s.cli(
        "callers",
        "apply",
        "-f",
        example,
        "--operator-token-file",
        s.operatorFile,
      );
      expect(real.err).toBe("");
      expect(real.out.match(/Credential for /g)).toHaveLength(4);
    });

    it("exports what apply reads, with no secret, and applying the export changes nothing", async () => {
      await s.json("callers", "add", "gone", "--kind", "peer");
      await s.cli("callers", "revoke", "gone");
      const file = path.join(s.dir, "exported.yaml");
      const wrote = await s.cli("callers", "export", "-o", file);
      expect(wrote.err).toBe("");
      const text = await readFile(file, "utf8");
      expect(text).toContain("name: github-triage");
      expect(text).toContain("Revoked (left out");
      expect(text).not.toMatch(/pg[a-z]?_[A-Za-z0-9]/);
      const again = await s.cli("callers", "apply", "-f", file, "--dry-run");
      expect(again.err).toBe("");
      for (const name of ["research-peer", "build-agent", "github-triage", "ifttt-notes"])
        expect(again.out).toContain(`unchanged ${name}`);
      expect(again.out).not.toMatch(/would (create|update)/);
      const stdout = await s.cli("callers", "export");
      expect(`${stdout.out}\n`).toBe(text);
    });
  });
}
