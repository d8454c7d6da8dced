ALTER TABLE "runs" DROP CONSTRAINT "runs_status_check";--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "pending_input" jsonb;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_status_check" CHECK ("status" IN ('submitted', 'working', 'parked', 'input-required', 'completed', 'failed', 'canceled', 'rejected', 'expired', 'interrupted'));