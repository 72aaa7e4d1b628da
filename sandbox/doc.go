// Package sandbox runs an integration's own process so that egressd's proxy
// is its only way out, enforced by the kernel rather than asked for through
// environment variables.
//
// The child gets new user, network, mount, pid, IPC and UTS namespaces. Its
// network namespace has loopback only; the listeners it may use (the
// explicit proxy, transparent capture, DNS) are created inside and handed to
// the supervisor over a socketpair, so the supervisor serves them from the
// host's namespace with the same proxy, policy and audit code as
// "egressd serve". Its filesystem is built by allowlist on a tmpfs, its
// environment is built by allowlist, and a seccomp filter closes the
// kernel interfaces that could undo the rest.
//
// This package holds no policy: the supervisor (cmd/egressd run) does.
package sandbox
