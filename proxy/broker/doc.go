// Package broker terminates TLS for the hosts an operator bound a secret to
// (issue 15) and swaps each placeholder for its real value on the way out,
// only over a connection to the origin that egressd verified itself. Every
// other connection stays spliced end to end and never reaches this package.
//
// It holds mechanics only: which secret goes to which host is decided in
// policy (policy.Secret, Policy.SecretsFor).
package broker
