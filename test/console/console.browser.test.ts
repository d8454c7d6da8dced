// The console in a real browser: Debian's Chromium, headless, driven by playwright-core, against
// the real server (PGlite) and the scripted model. One operator's session end to end: sign in,
// create a caller and copy its credential, open its ceiling, watch a parked run appear live,
// approve it with the operator token, see it finish, revoke the caller and see its ceiling empty,
// read the audit trail and its verify result. Hostile text (a script in a caller name, markup in
// tool arguments) must show as text and never run. Screenshots of each page go to
// test/console/screenshots/ (git-ignored) for a person to look at.
//
// Without Chromium the suite is skipped with a message; PEERGATE_TEST_BROWSER=required makes
// that a failure (CI sets it).
import { existsSync } from "node:fs";
import path from "node:path";
import { TaskState } from "@a2a-js/sdk";
import { type Browser, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { createOperatorToken } from "../../src/services/admin-credentials.ts";
import {
  asTask,
  copyPolicies,
  createSharedSecrets,
  createWorkspace,
  type Peergate,
  readTaskRunId,
  removeTempDirs,
  type ScriptedModel,
  startPeergate,
  startScriptedModel,
  userMessage,
} from "../e2e/support.ts";

const chromiumPath = process.env.PEERGATE_CHROMIUM ?? "/usr/bin/chromium";
const required = process.env.PEERGATE_TEST_BROWSER === "required";
const missing = existsSync(chromiumPath) ? undefined : `no Chromium at ${chromiumPath}`;
if (missing) {
  const note = `  SKIPPING the console's browser tests: ${missing} (install chromium; PEERGATE_TEST_BROWSER=required makes this a failure).`;
  if (required) throw new Error(note);
  console.warn(`\n${note}\n`);
}

const shots = path.join(import.meta.dirname, "screenshots");
const hostileArgs = `<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">`;
const scenarios = {
  park: [
    {
      text: "I will write the file.",
      calls: [
        {
          id: "call_console",
          name: "write_file",
          arguments: JSON.stringify({ path: "console.txt", content: hostileArgs }),
        },
      ],
    },
    { text: "Wrote console.txt." },
  ],
};

/** What the page's own code sees, as far as the announcement log below needs it. */
type BrowserGlobals = {
  document: { getElementById(id: string): { textContent: string | null } | null };
  MutationObserver: new (
    onChange: () => void,
  ) => { observe(target: unknown, options: Record<string, boolean>): void };
  peergateSaid: string[];
};
describe.skipIf(missing !== undefined)(
  `the console in Chromium${missing ? ` — skipped: ${missing}` : ""}`,
  () => {
    let model: ScriptedModel;
    let peergate: Peergate;
    let browser: Browser;
    let page: Page;
    let operatorToken: string;

    beforeAll(async () => {
      model = await startScriptedModel(scenarios);
      peergate = await startPeergate({
        ...createSharedSecrets(),
        policiesDir: await copyPolicies(),
        workspace: await createWorkspace(),
        modelBaseUrl: model.baseUrl,
      });
      operatorToken = await createOperatorToken({
        services: peergate.server.services,
        actor: "system",
      });
      browser = await chromium.launch({
        executablePath: chromiumPath,
        headless: true,
        args: [
          "--no-sandbox",
          "--disable-background-networking",
          "--disable-component-update",
          "--disable-sync",
          "--disable-default-apps",
          "--no-first-run",
        ],
      });
      const context = await browser.newContext({
        viewport: { width: 390, height: 844 },
        permissions: ["clipboard-read", "clipboard-write"],
      });
      page = await context.newPage();
      page.on("pageerror", (e) => console.log("PAGEERROR", e.message));
      page.on("dialog", (dialog) => {
        throw new Error(`a dialog opened: ${dialog.message()}`);
      });
    }, 120_000);
    afterAll(async () => {
      await browser?.close();
      await peergate?.stop();
      await model?.close();
      await removeTempDirs();
    });

    const shot = (name: string) =>
      page.screenshot({ path: path.join(shots, `${name}.png`), fullPage: true });
    // Page functions run in the browser; Node's types have no DOM, so they reach it via globalThis.
    const pwned = () => page.evaluate(() => (globalThis as { __pwned?: number }).__pwned);

    it("an operator's session, end to end", async () => {
      // Sign in.
      await page.goto(`${peergate.url}/console`);
      await page.getByLabel("Admin token").fill(peergate.adminToken);
      await shot("01-sign-in");
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("heading", { name: "Overview" }).waitFor();
      await page.getByRole("link", { name: "Callers" }).click();
      await page.getByRole("heading", { name: "Callers" }).waitFor();
      expect(
        await page.evaluate(
          () => (globalThis as unknown as { document: { cookie: string } }).document.cookie,
        ),
      ).toBe("");

      // A script as a caller name: the API's message shows beside the field, as text.
      const hostileName = `<img src=x onerror="window.__pwned=1">`;
      await page.getByLabel("Name", { exact: true }).fill(hostileName);
      await page.getByRole("button", { name: "Create" }).click();
      const nameError = page.locator(".field-error").first();
      await nameError.waitFor();
      expect(await nameError.textContent()).toContain(JSON.stringify(hostileName));
      expect(await page.locator("img").count()).toBe(0);
      expect(await pwned()).toBeUndefined();
      await shot("02-validation");

      // Create a caller that may write files, with its approval asked for.
      await page.locator(".field-error, .notice.error").first().waitFor();
      await page.getByLabel("Name", { exact: true }).fill("console-peer");
      await page.getByLabel("Allow list", { exact: true }).fill("write_file");
      await page.getByLabel("Approval policy").selectOption("read-only");
      await page.getByLabel(/^Operator token/).fill(operatorToken);
      await page.getByRole("button", { name: "Create" }).click();
      const secretEl = page.locator("#credential-secret");
      await secretEl.waitFor();
      const secret = (await secretEl.textContent()) ?? "";
      expect(secret).toMatch(/^pg_/);
      await page.getByRole("button", { name: "Copy credential" }).click();
      await page.getByRole("button", { name: "Copied" }).waitFor();
      expect(
        await page.evaluate(() =>
          (
            globalThis as unknown as { navigator: { clipboard: { readText(): Promise<string> } } }
          ).navigator.clipboard.readText(),
        ),
      ).toBe(secret);
      await shot("03-created");

      // Its ceiling: write_file is admitted.
      // By keyboard: the link is focusable and Enter follows it.
      await page.getByRole("link", { name: "Open console-peer" }).press("Enter");
      await page
        .getByRole("heading", { name: "Ceiling" })
        .waitFor()
        .catch(async (error) => {
          throw new Error(
            `${error}; at ${page.url()} the page says: ${await page.locator("main").textContent()}`,
          );
        });
      const writeRow = page.locator("#ceiling tr", { hasText: "write_file" });
      expect(await writeRow.locator("td").nth(1).textContent()).toBe("admitted");
      // What if it were public with no allow list: write_file is not admitted.
      await page.locator("form", { hasText: "What if" }).getByLabel("Allow list").fill("");
      await page.getByRole("button", { name: "Show" }).click();
      const whatIfRow = page.locator("#what-if tr", { hasText: "write_file" });
      await whatIfRow.waitFor();
      expect(await whatIfRow.locator("td").nth(1).textContent()).toBe("not admitted");
      await shot("04-ceiling");

      // Watch a parked run appear on the approvals page, live.
      await page.getByRole("link", { name: "Approvals" }).click();
      await page.getByRole("heading", { name: "Parked approvals" }).waitFor();
      const client = await peergate.client(secret);
      const parked = asTask(
        await client.sendMessage({
          message: userMessage("scenario:park Write console.txt, please."),
        } as never),
      );
      expect(parked.status?.state).toBe(TaskState.TASK_STATE_WORKING);
      const runId = readTaskRunId(parked);
      const row = page.locator("section.approval", { hasText: "console-peer" });
      await row.waitFor({ timeout: 60_000 });
      await shot("05-approvals");

      // Open it: the hostile arguments are text. Approve with the operator token.
      await row.getByRole("link", { name: runId.slice(0, 8) }).click();
      await page.locator("#run-status").waitFor();
      await page.getByRole("heading", { name: /Waiting for approval/ }).waitFor();
      expect(await page.locator(".pending-call pre").first().textContent()).toContain(
        JSON.stringify(hostileArgs).slice(1, -1),
      );
      const diff = page.locator("pre.diff");
      if ((await diff.count()) > 0) expect(await diff.textContent()).toContain(hostileArgs);
      expect(await page.locator("main img, main script").count()).toBe(0);
      expect(await pwned()).toBeUndefined();
      await shot("06-run-parked");
      // Another operator answers first (the typing operator's page is not redrawn under them):
      // this page's approval is told it is stale, and a reload shows the finished run.
      await page.getByLabel("Operator token (asked each time)").fill(operatorToken);
      // Every announcement, kept: the status region holds only the newest, and a later one (the
      // run's own end) can replace "moved on" before a slow look reads it.
      await page.evaluate(() => {
        const g = globalThis as unknown as BrowserGlobals;
        const region = g.document.getElementById("status");
        g.peergateSaid = [];
        new g.MutationObserver(() => g.peergateSaid.push(region?.textContent ?? "")).observe(
          region,
          { childList: true, characterData: true, subtree: true },
        );
      });
      const pending = await peergate.admin("GET", `/runs/${runId}`);
      const first = await peergate.admin(
        "POST",
        `/runs/${runId}/approve`,
        {
          callId: pending.body.run.pending.callId,
          argsDigest: pending.body.run.pending.argsDigest,
        },
        { "x-peergate-operator-token": operatorToken },
      );
      expect(first.status).toBe(202);
      // The page hears of it (announced, not redrawn: the operator is typing in its form), and
      // is not redrawn either once the click moved the focus to the form's button.
      await page.waitForFunction(
        (text) =>
          (globalThis as unknown as BrowserGlobals).peergateSaid.some((said) =>
            said.includes(text),
          ),
        `Run ${runId.slice(0, 8)} moved on`,
        { timeout: 60_000 },
      );
      await page.getByRole("button", { name: "Approve" }).click();
      const stale = page.getByRole("alert");
      await stale.waitFor();
      expect(await stale.textContent()).toContain("This page is stale");
      await shot("07-run-stale");
      await page.reload();
      await page
        .locator("#run-status", { hasText: "Status: completed" })
        .waitFor({ timeout: 60_000 });
      expect(await page.locator("#run-answer").textContent()).toContain("Wrote console.txt.");
      expect(runId).toMatch(/^[0-9a-f-]{36}$/);
      await shot("08-run-completed");

      // Revoke the caller: its ceiling is empty.
      await page.getByRole("link", { name: "Callers" }).click();
      await page.getByRole("link", { name: "console-peer" }).click();
      await page
        .getByRole("heading", { name: "Revoke" })
        .waitFor()
        .catch(async (error) => {
          throw new Error(`${error}; the page says: ${await page.locator("main").textContent()}`);
        });
      await page.locator("form", { hasText: "Revoke" }).getByLabel("Reason").fill("done");
      await page.getByRole("button", { name: "Revoke…" }).click();
      await page.getByRole("button", { name: "Yes, revoke console-peer" }).click();
      await page.getByText(/revoked · approval/).waitFor();
      expect(await page.locator("#ceiling p").first().textContent()).toBe("Admitted: nothing");
      await shot("09-revoked");

      // The audit trail, filtered by the caller's name, and its verify result.
      await page.goto(`${peergate.url}/console#/audit?subject=console-peer`);
      await page.locator("#audit-verify").waitFor();
      expect(await page.locator("#audit-verify").textContent()).toMatch(
        /^Chain verified: \d+ events, intact\./,
      );
      expect(await page.locator("tbody tr", { hasText: "caller.revoked" }).count()).toBeGreaterThan(
        0,
      );
      await shot("10-audit");
      expect(await pwned()).toBeUndefined();
    }, 300_000);
  },
);
