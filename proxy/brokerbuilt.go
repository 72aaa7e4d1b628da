package proxy

// BrokerBuilt says whether this build terminates TLS for bound hosts and
// substitutes secrets (issue 15, b15core). The end-to-end substitution
// tests skip while it is false; the merge that brings the broker sets it
// true, and they run from then on.
const BrokerBuilt = true
