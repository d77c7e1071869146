// Package deploy holds linkgate's deployment files — systemd units
// (systemd/), Compose files (compose/), the AWS templates (lambda/, ecs/) —
// and the tests that check them against the tools that consume them and
// run what they describe on loopback. It has no code of its own.
package deploy
