ALTER TABLE "tool_calls" DROP CONSTRAINT "tool_calls_status_check";--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "pending_batch" jsonb;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "messages" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "model_id" text;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "segment_started_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "tool_calls" ADD COLUMN "code" text;--> statement-breakpoint
ALTER TABLE "tool_calls" ADD COLUMN "segment" integer DEFAULT 1 NOT NULL;--> statement-breakpoint
CREATE INDEX "runs_created_at_idx" ON "runs" USING btree ("created_at");--> statement-breakpoint
CREATE INDEX "runs_caller_created_at_idx" ON "runs" USING btree ("caller_id","created_at");--> statement-breakpoint
ALTER TABLE "tool_calls" ADD CONSTRAINT "tool_calls_status_check" CHECK ("status" IN ('running', 'completed', 'interrupted', 'not-started', 'refused', 'failed', 'parked', 'rejected'));