ALTER TABLE "runs" DROP CONSTRAINT "runs_status_check";--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "stop_kind" text;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_stop_kind_check" CHECK ("stop_kind" IS NULL OR "stop_kind" IN ('cancel', 'revoked'));--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_status_check" CHECK ("status" IN ('submitted', 'working', 'parked', 'input-required', 'completed', 'failed', 'canceled', 'rejected', 'expired', 'interrupted', 'revoked'));