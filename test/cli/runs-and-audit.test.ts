// What the user hit in `runs` and `audit`: the A2A task id a peer was given was a 404 in
// `runs show`, and the audit listing's filters were hard to use.
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { type CliServer, cliVariants, startCliServer } from "./cli-server.ts";

for (const variant of cliVariants) {
  describe.skipIf(variant.skip !== undefined)(`runs and audit (${variant.kind})`, () => {
    let s: CliServer;
    let taskId: string;
    let runId: string;
    beforeAll(async () => {
      s = await startCliServer(variant.kind);
      const peer = await s.json("callers", "add", "runner", "--kind", "peer");
      // No model is configured: the run fails at once, which is all these tests need.
      const sent = await fetch(`${s.server.url}/a2a`, {
        method: "POST",
        headers: {
          authorization: `Bearer ${peer.credential.secret}`,
          "content-type": "application/json",
          "a2a-version": "1.0",
        },
        body: JSON.stringify({
          jsonrpc: "2.0",
          id: 1,
          method: "SendMessage",
          params: { message: { messageId: "m1", role: "ROLE_USER", parts: [{ text: "hi" }] } },
        }),
      });
      const answer = (await sent.json()) as { result: { task?: { id: string } } };
      taskId = String(answer.result.task?.id);
      runId = (await s.json("runs", "list", "--caller", "runner")).runs[0].id;
    });
    afterAll(async () => s?.stop());

    it("`runs show` accepts the A2A task id where the run id goes", async () => {
      expect(taskId).not.toBe("undefined");
      expect(taskId).not.toBe(runId);
      const shown = await s.cli("runs", "show", taskId);
      expect(shown.err).toBe("");
      expect(shown.code).toBe(0);
      expect(shown.out).toContain(`run ${runId}`);
      expect((await s.json("runs", "show", taskId)).run.id).toBe(runId);
    });
  });
}
