// What "revoked" means, once: a caller is revoked when it carries a revocation time or has been
// narrowed to tier `none`. Authentication, run admission, the between-steps check and the approval
// claim all ask this one question.
export function isCallerRevoked(caller: {
  readonly revokedAt: Date | null;
  readonly tier: string;
}): boolean {
  return caller.revokedAt !== null || caller.tier === "none";
}
