CREATE TABLE "a2a_task_events" (
	"task_id" text NOT NULL,
	"seq" integer NOT NULL,
	"caller_id" uuid NOT NULL,
	"event" jsonb NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "a2a_task_events_task_id_seq_pk" PRIMARY KEY("task_id","seq")
);
--> statement-breakpoint
ALTER TABLE "a2a_tasks" ADD COLUMN "event_seq" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
ALTER TABLE "a2a_task_events" ADD CONSTRAINT "a2a_task_events_task_id_a2a_tasks_id_fk" FOREIGN KEY ("task_id") REFERENCES "public"."a2a_tasks"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "a2a_task_events_created_idx" ON "a2a_task_events" USING btree ("created_at");