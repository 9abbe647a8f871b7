// Package deploy holds the deployment files of prunesched: the NATS
// cluster configs, Prometheus rules and their promtool tests, the Grafana
// dashboard and its provisioning, the systemd unit and the compose file.
// It has no code; its tests check that those files agree with each other
// and with the binary (mounted files exist, commands use flags prunesched
// accepts, addresses match, every proxy metric queried is registered), so
// that they are checked where docker and systemd are not available.
package deploy
