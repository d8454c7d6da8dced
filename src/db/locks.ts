// Advisory lock keys, in one place so two features never share a key by accident. Every lock
// peergate takes is the two-key form `pg_advisory_*lock(space, key)`.

/** "pgat": the space of peergate's fixed locks. */
export const advisoryLockSpace = 0x7067_6174;

export const lockKeys = {
  /** Transaction lock held per chaining pass to the audit chain. */
  audit: 1,
  /** Session lock held by `migrateDatabase` for a whole migration run. */
  migrations: 2,
  /** Session lock held by one prune (src/services/prune-tables.ts) at a time, cluster-wide. */
  prune: 3,
} as const;

/**
 * "pgau": transaction locks keyed by `hashtext(<caller id>:<body sha256>)`, held while claiming a
 * webhook delivery by its body hash. A separate space, so no hash can land on a key above.
 */
export const webhookClaimLockSpace = 0x7067_6175;
