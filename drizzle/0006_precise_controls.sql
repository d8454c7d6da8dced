ALTER TABLE "tool_calls" DROP CONSTRAINT "tool_calls_status_check";--> statement-breakpoint
ALTER TABLE "callers" ADD COLUMN "commands" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
ALTER TABLE "callers" ADD COLUMN "tool_overrides" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "callers" ADD COLUMN "url_grants" jsonb;--> statement-breakpoint
ALTER TABLE "callers" ADD COLUMN "when_nobody" text;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "controls" jsonb;--> statement-breakpoint
ALTER TABLE "tool_calls" ADD COLUMN "decision" jsonb;--> statement-breakpoint
ALTER TABLE "callers" ADD CONSTRAINT "callers_when_nobody_check" CHECK ("when_nobody" IS NULL OR "when_nobody" IN ('park', 'decline'));--> statement-breakpoint
ALTER TABLE "tool_calls" ADD CONSTRAINT "tool_calls_status_check" CHECK ("status" IN ('running', 'completed', 'interrupted', 'not-started', 'refused', 'failed', 'parked', 'rejected', 'declined'));