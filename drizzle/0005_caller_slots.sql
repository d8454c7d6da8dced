CREATE TABLE "caller_slots" (
	"caller_id" uuid PRIMARY KEY NOT NULL,
	"running" integer DEFAULT 0 NOT NULL
);
--> statement-breakpoint
ALTER TABLE "daily_usage" ADD COLUMN "reserved_tokens" bigint DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "daily_usage" ADD COLUMN "reserved_cost_usd" numeric(14, 6) DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "caller_slots" ADD CONSTRAINT "caller_slots_caller_id_callers_id_fk" FOREIGN KEY ("caller_id") REFERENCES "public"."callers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
-- Runs already holding a slot when this migration runs keep holding it.
INSERT INTO "caller_slots" ("caller_id", "running")
  SELECT "caller_id", count(*)::int FROM "runs" WHERE "status" IN ('submitted', 'working') GROUP BY "caller_id";
