// Package auth decides whether an upgrade request may open a bridge socket:
// Origin and Host policy, credential extraction, asking the parent Jupyter
// server for a verdict (and caching it briefly), standalone-token mode, and
// confirmation receipts (signed JWTs).
//
// It never spawns processes, never relays messages, and never logs or
// forwards a credential anywhere but to the parent Jupyter server.
package auth
