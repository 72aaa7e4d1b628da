// Package policy decides. It owns the operator config and its named
// exemptions, the denied address ranges, the decision for a CONNECT target
// (Decide) and for a resolved address (CheckAddr), the per-integration
// policies, their generations, the reload rules and version memory.
//
// Nothing here dials, resolves or logs: callers pass facts in and get a
// Decision back, and write it to the audit log themselves.
package policy
