// Rotation mints a credential that carries every grant the caller holds, so it is judged as creating
// the caller anew, grants kept beside the caller row included: a public-tier caller that holds a
// push grant (an operator-approved destination for its task updates) rotates only with the
// operator token. Attacked through the admin API with the admin token alone.
import { and, eq } from "drizzle-orm";
import { afterEach, beforeEach, expect, it } from "vitest";
import { auditEvents, credentials } from "../../src/db/schema.ts";
import { adminRequest, createTestApp, operatorRequest, type TestApp } from "../support/app.ts";
import { describeEachDatabase } from "../support/databases.ts";

type Json = Record<string, any>;

describeEachDatabase("rotating a caller that holds a push grant", (db) => {
  let app: TestApp;
  beforeEach(async () => {
    app = await createTestApp(db.database);
  });
  afterEach(() => app.close());

  const json = async (res: Response) => ({ status: res.status, body: (await res.json()) as Json });

  async function addPublicCaller(name: string): Promise<string> {
    // At the floor: the admin token alone creates it.
    const created = await json(await adminRequest(app, "POST", "/callers", { name, kind: "peer" }));
    expect(created.status).toBe(201);
    expect(created.body.caller.tier).toBe("public");
    return created.body.caller.id as string;
  }

  async function liveCredentials(callerId: string) {
    const rows = await db.db.select().from(credentials).where(eq(credentials.callerId, callerId));
    return rows.filter((r) => r.revokedAt === null).map((r) => r.id);
  }

  it("admin token alone → 403 naming the operator token, nothing minted; with it → rotated, audited", async () => {
    const callerId = await addPublicCaller("pusher");
    const granted = await json(
      await operatorRequest(app, "PUT", "/callers/pusher/push-hosts", {
        hosts: ["hooks.example.org"],
      }),
    );
    expect(granted.status).toBe(200);
    const before = await liveCredentials(callerId);
    expect(before).toHaveLength(1);

    const refused = await json(await adminRequest(app, "POST", "/callers/pusher/rotate", {}));
    expect(refused.status).toBe(403);
    expect(refused.body.code).toBe("operator-token-required");
    expect(refused.body.detail).toContain("X-Peergate-Operator-Token");
    expect(refused.body.problems).toEqual([
      expect.objectContaining({ field: "pushHosts", message: expect.stringContaining("hooks") }),
    ]);
    expect(await liveCredentials(callerId)).toEqual(before);
    const failures = await db.db
      .select()
      .from(auditEvents)
      .where(
        and(eq(auditEvents.kind, "auth.failed"), eq(auditEvents.subject, `caller:${callerId}`)),
      );
    expect(failures.map((f) => f.data)).toEqual([
      expect.objectContaining({ reason: "operator-token-missing", widened: ["pushHosts"] }),
    ]);

    const rotated = await json(await operatorRequest(app, "POST", "/callers/pusher/rotate", {}));
    expect(rotated.status).toBe(200);
    expect(rotated.body.credential.secret).toEqual(expect.any(String));
    const after = await liveCredentials(callerId);
    expect(after).toHaveLength(1);
    expect(after).not.toEqual(before);
    const [event] = await db.db
      .select()
      .from(auditEvents)
      .where(
        and(eq(auditEvents.kind, "caller.rotated"), eq(auditEvents.subject, `caller:${callerId}`)),
      );
    expect(event?.data).toMatchObject({ name: "pusher", withOperator: ["pushHosts"] });
  });

  it("a caller at the floor, and one whose push grants were removed, rotate with the admin token", async () => {
    await addPublicCaller("plain");
    expect((await adminRequest(app, "POST", "/callers/plain/rotate", {})).status).toBe(200);

    await addPublicCaller("former-pusher");
    expect(
      (
        await operatorRequest(app, "PUT", "/callers/former-pusher/push-hosts", {
          hosts: [".example.org"],
        })
      ).status,
    ).toBe(200);
    expect((await adminRequest(app, "POST", "/callers/former-pusher/rotate", {})).status).toBe(403);
    // Removing a grant narrows: the admin token alone, and rotation is back at the floor.
    expect(
      (await adminRequest(app, "PUT", "/callers/former-pusher/push-hosts", { hosts: [] })).status,
    ).toBe(200);
    expect((await adminRequest(app, "POST", "/callers/former-pusher/rotate", {})).status).toBe(200);
  });
});
