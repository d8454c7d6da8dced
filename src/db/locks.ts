// Advisory lock keys, in one place so two features never share a key by accident. Every lock
// peergate takes is the two-key form `pg_advisory_*lock(advisoryLockSpace, key)`.

/** "pgat": the first key of every peergate advisory lock. */
export const advisoryLockSpace = 0x7067_6174;

export const lockKeys = {
  /** Transaction lock held while appending to the audit chain. */
  audit: 1,
  /** Session lock held by `migrateDatabase` for a whole migration run. */
  migrations: 2,
  /** Transaction lock held while claiming a webhook delivery by body hash. */
  webhookClaims: 3,
} as const;
