CREATE TABLE "a2a_tasks" (
	"id" text PRIMARY KEY NOT NULL,
	"caller_id" uuid NOT NULL,
	"context_id" text NOT NULL,
	"task" jsonb NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "audit_events" (
	"seq" bigint PRIMARY KEY NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	"actor" text NOT NULL,
	"kind" text NOT NULL,
	"subject" text,
	"data" jsonb NOT NULL,
	"prev_hash" text NOT NULL,
	"hash" text NOT NULL,
	CONSTRAINT "audit_events_hash_unique" UNIQUE("hash")
);
--> statement-breakpoint
CREATE TABLE "callers" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"name" text NOT NULL,
	"kind" text NOT NULL,
	"tier" text DEFAULT 'none' NOT NULL,
	"allow" text[] DEFAULT '{}'::text[] NOT NULL,
	"approval_policy" text DEFAULT 'auto' NOT NULL,
	"budgets" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"prompt_template" text,
	"event_filter" text[],
	"jwt" jsonb,
	"version" integer DEFAULT 1 NOT NULL,
	"revoked_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	CONSTRAINT "callers_name_unique" UNIQUE("name"),
	CONSTRAINT "callers_kind_check" CHECK ("kind" IN ('peer', 'github', 'ifttt', 'webhook')),
	CONSTRAINT "callers_tier_check" CHECK ("tier" IN ('none', 'public', 'internal', 'private')),
	CONSTRAINT "callers_approval_policy_check" CHECK ("approval_policy" IN ('auto', 'read-only', 'low-risk', 'high-risk'))
);
--> statement-breakpoint
CREATE TABLE "credentials" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"caller_id" uuid,
	"kind" text NOT NULL,
	"secret_hash" text NOT NULL,
	"prefix" text NOT NULL,
	"sealed_secret" text,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp (3) with time zone,
	"revoked_at" timestamp (3) with time zone,
	CONSTRAINT "credentials_secret_hash_unique" UNIQUE("secret_hash"),
	CONSTRAINT "credentials_kind_check" CHECK ("kind" IN ('token', 'webhook-secret', 'ifttt-secret', 'admin', 'operator')),
	CONSTRAINT "credentials_sealed_secret_check" CHECK ("sealed_secret" IS NULL OR "kind" = 'webhook-secret')
);
--> statement-breakpoint
CREATE TABLE "daily_usage" (
	"caller_id" uuid NOT NULL,
	"day" date NOT NULL,
	"tokens" bigint DEFAULT 0 NOT NULL,
	"cost_usd" numeric(14, 6) DEFAULT 0 NOT NULL,
	"runs" integer DEFAULT 0 NOT NULL,
	CONSTRAINT "daily_usage_caller_id_day_pk" PRIMARY KEY("caller_id","day")
);
--> statement-breakpoint
CREATE TABLE "instances" (
	"id" text PRIMARY KEY NOT NULL,
	"hostname" text NOT NULL,
	"pid" integer NOT NULL,
	"started_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"heartbeat_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "jwt_replays" (
	"issuer" text NOT NULL,
	"jti" text NOT NULL,
	"expires_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "jwt_replays_issuer_jti_pk" PRIMARY KEY("issuer","jti")
);
--> statement-breakpoint
CREATE TABLE "runs" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"caller_id" uuid NOT NULL,
	"origin" text NOT NULL,
	"a2a_task_id" text,
	"a2a_context_id" text,
	"status" text DEFAULT 'submitted' NOT NULL,
	"approval_policy" text NOT NULL,
	"tool_set" text[] NOT NULL,
	"segments" integer DEFAULT 0 NOT NULL,
	"budget_limits" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"budget_used" jsonb DEFAULT '{"tokens":0,"costUsd":0,"durationMs":0,"steps":0}'::jsonb NOT NULL,
	"pending_approval" jsonb,
	"parked_until" timestamp (3) with time zone,
	"owner_instance_id" text,
	"heartbeat_at" timestamp (3) with time zone,
	"result" jsonb,
	"error" jsonb,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp (3) with time zone,
	"finished_at" timestamp (3) with time zone,
	CONSTRAINT "runs_origin_check" CHECK ("origin" IN ('a2a', 'webhook')),
	CONSTRAINT "runs_status_check" CHECK ("status" IN ('submitted', 'working', 'parked', 'completed', 'failed', 'canceled', 'rejected', 'expired', 'interrupted')),
	CONSTRAINT "runs_approval_policy_check" CHECK ("approval_policy" IN ('auto', 'read-only', 'low-risk', 'high-risk')),
	CONSTRAINT "runs_segments_check" CHECK ("segments" >= 0)
);
--> statement-breakpoint
CREATE TABLE "tool_calls" (
	"run_id" uuid NOT NULL,
	"call_id" text NOT NULL,
	"tool" text NOT NULL,
	"args_digest" text NOT NULL,
	"status" text NOT NULL,
	"output_truncated" boolean DEFAULT false NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"started_at" timestamp (3) with time zone,
	"finished_at" timestamp (3) with time zone,
	CONSTRAINT "tool_calls_run_id_call_id_pk" PRIMARY KEY("run_id","call_id"),
	CONSTRAINT "tool_calls_status_check" CHECK ("status" IN ('running', 'completed', 'interrupted', 'not-started', 'refused', 'failed'))
);
--> statement-breakpoint
CREATE TABLE "webhook_deliveries" (
	"id" uuid PRIMARY KEY DEFAULT gen_random_uuid() NOT NULL,
	"caller_id" uuid NOT NULL,
	"delivery_id" text,
	"body_sha256" text NOT NULL,
	"received_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"run_id" uuid,
	CONSTRAINT "webhook_deliveries_caller_delivery_key" UNIQUE("caller_id","delivery_id")
);
--> statement-breakpoint
ALTER TABLE "a2a_tasks" ADD CONSTRAINT "a2a_tasks_caller_id_callers_id_fk" FOREIGN KEY ("caller_id") REFERENCES "public"."callers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "credentials" ADD CONSTRAINT "credentials_caller_id_callers_id_fk" FOREIGN KEY ("caller_id") REFERENCES "public"."callers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "daily_usage" ADD CONSTRAINT "daily_usage_caller_id_callers_id_fk" FOREIGN KEY ("caller_id") REFERENCES "public"."callers"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "runs" ADD CONSTRAINT "runs_caller_id_callers_id_fk" FOREIGN KEY ("caller_id") REFERENCES "public"."callers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "tool_calls" ADD CONSTRAINT "tool_calls_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_caller_id_callers_id_fk" FOREIGN KEY ("caller_id") REFERENCES "public"."callers"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "webhook_deliveries" ADD CONSTRAINT "webhook_deliveries_run_id_runs_id_fk" FOREIGN KEY ("run_id") REFERENCES "public"."runs"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "a2a_tasks_caller_context_idx" ON "a2a_tasks" USING btree ("caller_id","context_id");--> statement-breakpoint
CREATE INDEX "audit_events_subject_idx" ON "audit_events" USING btree ("subject");--> statement-breakpoint
CREATE INDEX "audit_events_kind_idx" ON "audit_events" USING btree ("kind","created_at");--> statement-breakpoint
CREATE INDEX "credentials_caller_id_idx" ON "credentials" USING btree ("caller_id");--> statement-breakpoint
CREATE INDEX "jwt_replays_expires_at_idx" ON "jwt_replays" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "runs_caller_status_idx" ON "runs" USING btree ("caller_id","status");--> statement-breakpoint
CREATE INDEX "runs_status_parked_until_idx" ON "runs" USING btree ("status","parked_until");--> statement-breakpoint
CREATE INDEX "runs_owner_instance_idx" ON "runs" USING btree ("owner_instance_id");--> statement-breakpoint
CREATE INDEX "runs_a2a_task_idx" ON "runs" USING btree ("a2a_task_id");--> statement-breakpoint
CREATE INDEX "webhook_deliveries_body_idx" ON "webhook_deliveries" USING btree ("caller_id","body_sha256","received_at");