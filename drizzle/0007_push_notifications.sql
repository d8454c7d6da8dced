CREATE TABLE "caller_push_hosts" (
	"caller_id" uuid NOT NULL,
	"entry" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "caller_push_hosts_caller_id_entry_pk" PRIMARY KEY("caller_id","entry")
);
--> statement-breakpoint
CREATE TABLE "push_configs" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"task_id" text NOT NULL,
	"caller_id" uuid NOT NULL,
	"config_id" text NOT NULL,
	"config" jsonb NOT NULL,
	"sealed_secrets" text,
	"wire_version" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "push_configs_task_config_key" UNIQUE("task_id","config_id")
);
--> statement-breakpoint
CREATE TABLE "push_deliveries" (
	"id" bigint PRIMARY KEY GENERATED ALWAYS AS IDENTITY (sequence name "push_deliveries_id_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1),
	"push_config_id" uuid NOT NULL,
	"task_id" text NOT NULL,
	"caller_id" uuid NOT NULL,
	"task" jsonb NOT NULL,
	"state" text DEFAULT 'pending' NOT NULL,
	"attempts" integer DEFAULT 0 NOT NULL,
	"next_attempt_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"lease_until" timestamp (3) with time zone,
	"last_error" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"finished_at" timestamp (3) with time zone,
	CONSTRAINT "push_deliveries_state_check" CHECK ("state" IN ('pending', 'delivered', 'failed'))
);
--> statement-breakpoint
ALTER TABLE "caller_push_hosts" ADD CONSTRAINT "caller_push_hosts_caller_id_callers_id_fk" FOREIGN KEY ("caller_id") REFERENCES "public"."callers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "push_configs" ADD CONSTRAINT "push_configs_caller_id_callers_id_fk" FOREIGN KEY ("caller_id") REFERENCES "public"."callers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "push_deliveries" ADD CONSTRAINT "push_deliveries_push_config_id_push_configs_id_fk" FOREIGN KEY ("push_config_id") REFERENCES "public"."push_configs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "push_deliveries_pending_idx" ON "push_deliveries" USING btree ("next_attempt_at","id") WHERE state = 'pending';--> statement-breakpoint
CREATE INDEX "push_deliveries_config_pending_idx" ON "push_deliveries" USING btree ("push_config_id","id") WHERE state = 'pending';