// Package helm holds llmgw's Helm chart, in llmgw/, and its tests: the
// chart rendered with Helm's own engine for the default and the production
// values, every object decoded strictly into Kubernetes's types, its
// probes sent to a running gateway, and helm lint. It has no code of its
// own; Helm and the Kubernetes types are imported by the tests alone.
package helm
