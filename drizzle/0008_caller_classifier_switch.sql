ALTER TABLE "callers" ADD COLUMN "classifier" text DEFAULT 'on' NOT NULL;--> statement-breakpoint
ALTER TABLE "callers" ADD CONSTRAINT "callers_classifier_check" CHECK ("classifier" IN ('on', 'off'));