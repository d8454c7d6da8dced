CREATE TABLE "run_notices" (
	"run_id" uuid NOT NULL,
	"call_id" text NOT NULL,
	"kind" text NOT NULL,
	"instance_id" text NOT NULL,
	"claimed_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"status" text DEFAULT 'sending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "run_notices_run_id_call_id_kind_pk" PRIMARY KEY("run_id","call_id","kind")
);
--> statement-breakpoint
ALTER TABLE "run_notices" ADD CONSTRAINT "run_notices_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;