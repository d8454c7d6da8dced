import { expect, it } from "vitest";
import type { Db } from "../../src/db/client.ts";
import { callers, webhookDeliveries } from "../../src/db/schema.ts";
import { claimWebhookDelivery } from "../../src/db/webhook-claims.ts";
import { describeEachDatabase } from "../support/databases.ts";

const body = "a".repeat(64);

async function addCaller(db: Db, name: string): Promise<string> {
  const [row] = await db.insert(callers).values({ name, kind: "github" }).returning();
  if (!row) throw new Error("no caller");
  return row.id;
}

describeEachDatabase("webhook delivery claims", (ctx) => {
  it("claims a delivery id once per caller", async () => {
    const github = await addCaller(ctx.db, "gh");
    const other = await addCaller(ctx.db, "gh2");
    const first = await claimWebhookDelivery(ctx.db, {
      callerId: github,
      deliveryId: "d-1",
      bodySha256: body,
    });
    expect(first.claimed).toBe(true);
    const again = await claimWebhookDelivery(ctx.db, {
      callerId: github,
      deliveryId: "d-1",
      bodySha256: "b".repeat(64),
    });
    expect(again).toMatchObject({ claimed: false, reason: "delivery-id" });
    if (first.claimed && !again.claimed) expect(again.duplicateOf.id).toBe(first.id);
    // The same id from another caller is another delivery.
    expect(
      (await claimWebhookDelivery(ctx.db, { callerId: other, deliveryId: "d-1", bodySha256: body }))
        .claimed,
    ).toBe(true);
  });

  it("dedupes a body without delivery id only inside the window", async () => {
    const ifttt = await addCaller(ctx.db, "ifttt");
    const claim = () =>
      claimWebhookDelivery(ctx.db, { callerId: ifttt, bodySha256: body, bodyWindowMs: 60_000 });
    expect((await claim()).claimed).toBe(true);
    expect(await claim()).toMatchObject({ claimed: false, reason: "body-hash" });
    // Age the claim past the window: the same body is a new delivery again.
    await ctx.db.update(webhookDeliveries).set({ receivedAt: new Date(Date.now() - 120_000) });
    expect((await claim()).claimed).toBe(true);
    // Without a window, identical bodies are separate deliveries.
    expect(
      (await claimWebhookDelivery(ctx.db, { callerId: ifttt, bodySha256: body })).claimed,
    ).toBe(true);
  });

  it("a rolled-back claim can be retried", async () => {
    const github = await addCaller(ctx.db, "gh");
    await expect(
      ctx.db.transaction(async (tx) => {
        await claimWebhookDelivery(tx, { callerId: github, deliveryId: "d-9", bodySha256: body });
        throw new Error("run failed to start");
      }),
    ).rejects.toThrow("run failed to start");
    const retry = await claimWebhookDelivery(ctx.db, {
      callerId: github,
      deliveryId: "d-9",
      bodySha256: body,
    });
    expect(retry.claimed).toBe(true);
  });

  it.runIf(ctx.kind === "postgres")(
    "the same body racing in on two instances is claimed exactly once",
    async () => {
      const ifttt = await addCaller(ctx.db, "ifttt");
      const other = await ctx.openSecondConnection();
      const attempts = Array.from({ length: 20 }, (_, i) =>
        claimWebhookDelivery((i % 2 ? other : ctx.database).db, {
          callerId: ifttt,
          bodySha256: body,
          bodyWindowMs: 60_000,
        }),
      );
      const results = await Promise.all(attempts);
      expect(results.filter((r) => r.claimed)).toHaveLength(1);
    },
  );

  it.runIf(ctx.kind === "postgres")(
    "the same delivery id racing in on two instances is claimed exactly once",
    async () => {
      const github = await addCaller(ctx.db, "gh");
      const other = await ctx.openSecondConnection();
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          claimWebhookDelivery((i % 2 ? other : ctx.database).db, {
            callerId: github,
            deliveryId: "same",
            bodySha256: body,
          }),
        ),
      );
      expect(results.filter((r) => r.claimed)).toHaveLength(1);
    },
  );
});
