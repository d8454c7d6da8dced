ALTER TABLE "runs" ADD COLUMN "cancel_requested_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "runs" ADD COLUMN "cancel_reason" text;