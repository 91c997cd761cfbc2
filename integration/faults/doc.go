// Package faults holds the fault-tolerance tests (build tag faults, run by
// make test-integration): the bridge replicas, a GCS emulator and a Pub/Sub
// emulator each run in their own container on private Docker networks,
// started with testcontainers-go from images built FROM scratch, and the
// tests kill, pause, restart and cut them off while CI writers publish. See
// docs/testing.md.
package faults
